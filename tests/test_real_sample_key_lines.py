"""Issue 14's test over every file of every case of ../shared/real-samples/ (both collections): the
file is recognized (some line is parsed or becomes an event), and every line that an independent
list of key patterns matches (kept here, not taken from the parsers) is an event at its own line
(a parser's, or the `error_line` that ingest keeps for an unparsed error-like line), or restates
one within RESTATE lines. A failure lists the misses as file:line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forensics.config import JobConfig
from forensics.discovery import Limits, SourceFile, path_hints
from forensics.ingest import parse_one
from parsers import registry

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real-samples"
if not REAL.is_dir():
    pytest.skip("../shared/real-samples is missing", allow_module_level=True)

RESTATE = 3  # lines
# what a person greps for in a failed job's logs, by family (independent of the parsers' rules)
KEY_PATTERNS = {
    "xid": r"\bXid\b|\bXID[ =]?\d+|\bSXid\b",
    "nccl_warn": r"NCCL WARN",
    "watchdog": r"(?i:watchdog caught|failure detected by watchdog|heartbeat monitor timed out)",
    "oom": r"(?i:out of memory|OutOfMemoryError|\bOOM\b|oom[-_]kill|RESOURCE_EXHAUSTED|ResourceExhausted)",
    "ecc": r"(?i:uncorrectable ECC|\bECC error|double bit ECC|DBE\b)",
    "aer": r"\bAER: |Surprise Down",
    "mce": r"(?i:machine check|\bmce: \[Hardware Error\])",
    "exception": r"^\s*(?:\[[^\]]{1,40}\]:?\s*)*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)(?::\s|$)",
    "traceback": r"^\s*(?:\[[^\]]{1,40}\]:?\s*)*Traceback \(most recent call last\)",
    "step": r"(?i:\b(?:iteration|global_step|step|iter)\s*[:=]?\s*\d+\s*(?:/\s*\d+)?\b.{0,120}\bloss\b)",
    "sched_state": r"\b(?:CANCELLED|PREEMPTED|NODE_FAIL|OUT_OF_MEMORY|REQUEUED|DEADLINE)\b|DUE TO TIME LIMIT",
    "k8s_event": r"\b(?:OOMKilled|Evicted|CrashLoopBackOff|FailedScheduling|NodeNotReady|Preempted|DisruptionTarget)\b",
    "cuda_nvml": r"\bcudaError\w+|\bCUDA_ERROR_\w+|\bNVML_ERROR_\w+|\bCUDA error\b|\bCuda failure\b|\bCUDA failure\b",
}
# files no parser reads yet, each with the reason; strict xfail: the day one is read, this list must shrink
NOT_YET_READ: dict[str, str] = {}
KEY_RE = re.compile("|".join(f"(?:{p})" for p in KEY_PATTERNS.values()))


def _files() -> list[str]:
    return [f"{d.name}/{f.name}" for d in sorted(REAL.iterdir()) if d.is_dir()
            for f in sorted(d.iterdir()) if f.is_file() and f.name != "case.toml"]


@pytest.mark.parametrize("rel", [pytest.param(f, marks=pytest.mark.xfail(strict=True, reason=NOT_YET_READ[f]))
                                 if f in NOT_YET_READ else f for f in _files()])
def test_key_lines_are_events(rel: str) -> None:
    path = REAL / rel
    h, r, a = path_hints(rel)
    res = parse_one(SourceFile(rel, path, None, path.stat().st_size, h, r, a), JobConfig(), None, {}, registry(),
                    Limits())
    raw = path.read_text(encoding="utf-8", errors="replace").splitlines()
    assert res.lines == len(raw) == res.parsed + res.ignored + res.unparsed
    event_lines = set(res.events["line_no"].to_list()) | set(res.unparsed_errors["line_no"].to_list())
    assert res.parser is not None or res.parsed > 0 or event_lines, f"{rel}: not recognized (no parser, no event)"
    misses = [f"{rel}:{n}" for n, line in enumerate(raw, 1) if KEY_RE.search(line)
              and not any(m in event_lines for m in range(n - RESTATE, n + 1))]
    assert not misses, misses
