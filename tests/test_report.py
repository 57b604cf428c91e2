"""report.json against every field and type of DESIGN §8, and Markdown escaping."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.report import md_escape

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
STR, INT, FLOAT, BOOL, TIME = "str", "int", "float", "bool", "time"

CULPRIT = {"host": STR, "rank": INT, "gpu": INT, "pci_bus_id": STR}
EVIDENCE = {"path": STR, "line": INT, "time": TIME, "signature": STR, "role": STR, "text": STR}
INTERRUPTION = {"id": STR, "attempt": INT, "time": TIME, "kind": STR, "category": STR, "domain": STR,
                "action": STR, "auto_recoverable": BOOL, "recurring": BOOL, "culprit": CULPRIT,
                "confidence": FLOAT, "method": STR, "summary": STR, "evidence": [EVIDENCE]}
SCHEMA = {
    "schema_version": INT,
    "job": {"name": STR, "dir": STR, "hosts": [STR], "ranks": INT, "gpus": INT, "start": TIME, "end": TIME},
    "sources": [{"path": STR, "parser": STR, "lines": INT, "events": INT, "unparsed": INT, "warnings": [STR]}],
    "attempts": [{"index": INT, "start": TIME, "end": TIME, "first_step": INT, "last_step": INT, "end_reason": STR,
                  "witnesses": [STR],
                  # the attempt's share of each bucket, and the lines behind it (forensics explain-time)
                  "downtime": {f"{b}_s": FLOAT for b in ("productive", "startup", "checkpoint", "lost_work",
                                                          "termination", "restart", "slowdown")},
                  "intervals": [{"bucket": STR, "from": TIME, "to": TIME, "seconds": FLOAT, "interruption": STR}],
                  "evidence": {k: {"time": TIME, "path": STR} for k in ("start", "end")}}],
    "verdict": {k: v for k, v in INTERRUPTION.items() if k not in ("id", "attempt", "time")},
    "interruptions": [INTERRUPTION],
    "stragglers": [{"host": STR, "rank": INT, "gpu": INT, "start": TIME, "end": TIME, "slowdown": FLOAT,
                    "cause": STR, "evidence": STR}],
    "downtime": {"wall_s": FLOAT, "productive_s": FLOAT, "startup_s": FLOAT, "checkpoint_s": FLOAT,
                 "lost_work_s": FLOAT, "termination_s": FLOAT, "restart_s": FLOAT, "slowdown_s": FLOAT,
                 "goodput": FLOAT, "gpu_hours_lost": FLOAT},
    "warnings": [STR],
}
KINDS = {"crash", "hang", "slowdown", "preemption", "completed", "unknown"}
DOMAINS = {"hardware", "network", "system_software", "storage", "user", "scheduler", "unknown"}
ACTIONS = {"restart", "exclude_node_and_restart", "stop_and_fix", "rollback_and_skip_data", "investigate", "none"}


def check(value: object, spec: object, where: str) -> None:
    """Every key of the contract present; every value of its type or null (unknown)."""
    if isinstance(spec, dict):
        assert isinstance(value, dict), f"{where}: expected an object"
        for k, sub in spec.items():
            assert k in value, f"{where}.{k}: missing"
            check(value[k], sub, f"{where}.{k}")
    elif isinstance(spec, list):
        assert isinstance(value, list), f"{where}: expected a list"
        for i, item in enumerate(value):
            check(item, spec[0], f"{where}[{i}]")
    elif value is None:
        return
    elif spec == STR:
        assert isinstance(value, str), where
    elif spec == INT:
        assert isinstance(value, int) and not isinstance(value, bool), where
    elif spec == FLOAT:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), where
    elif spec == BOOL:
        assert isinstance(value, bool), where
    elif spec == TIME:
        assert isinstance(value, str) and ISO.match(value), f"{where}: {value!r} is not ISO-8601 UTC"


def _job(tmp_path: Path) -> Path:
    """A small real-format job: one node's dmesg with an Xid 79, its peers' watchdog timeouts."""
    job = tmp_path / "job"
    (job / "node-001").mkdir(parents=True)
    (job / "node-002").mkdir(parents=True)
    (job / "node-001" / "dmesg.log").write_text(
        "[Mon Nov  2 09:59:58 2026] nvidia-nvlink: Nvlink Core is being initialized\n"
        "[Mon Nov  2 10:00:00 2026] NVRM: GPU at PCI:0000:9a:00: GPU-12345678-aaaa-bbbb-cccc-1234567890ab\n"
        "[Mon Nov  2 10:00:00 2026] NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    (job / "node-002" / "rank-8.log").write_text(
        "[rank8]:[E1102 10:10:00.123456789 ProcessGroupNCCL.cpp:607] [Rank 8] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600050 milliseconds before timing out.\n"
        "<script>alert('x')</script> | not markdown *either*\n")
    return job


def test_report_json_matches_contract(tmp_path: Path) -> None:
    a = analyze(_job(tmp_path), tmp_path / "out")
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep == json.loads(json.dumps(a.report))
    assert rep["schema_version"] == 1
    check(rep, SCHEMA, "report")
    v = rep["verdict"]
    assert v["kind"] in KINDS and v["domain"] in DOMAINS and v["action"] in ACTIONS
    assert v["category"] == "gpu_lost" and v["culprit"]["host"] == "node-001"
    assert v["culprit"]["pci_bus_id"] == "0000:9a:00"
    assert {"path": "node-001/dmesg.log", "line": 3} in [{"path": e["path"], "line": e["line"]} for e in v["evidence"]]
    for x in rep["interruptions"]:  # a GPU loss in a job of several nodes: restart without the node
        assert x["auto_recoverable"] == (x["action"] in ("restart", "exclude_node_and_restart"))
    assert (tmp_path / "out" / "report.md").is_file() and (tmp_path / "out" / "forensics.duckdb").is_file()


def test_markdown_escapes_log_text(tmp_path: Path) -> None:
    analyze(_job(tmp_path), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "<script>" not in md
    assert md_escape("<b>x</b> | *y*") == "&lt;b&gt;x&lt;/b&gt; \\| \\*y\\*"


@pytest.mark.parametrize("rerun", [1, 2])
def test_rerun_replaces_output_cleanly(tmp_path: Path, rerun: int) -> None:
    job = _job(tmp_path)
    out = tmp_path / "out"
    for _ in range(rerun):
        analyze(job, out)
    names = {p.name for p in out.iterdir()}
    assert {"forensics.duckdb", "report.json", "report.md"} <= names
    assert not any("tmp" in n or "old" in n for n in names)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def _write(job: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_text(text)
    return job


NCCL_INIT = ("node-001:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:10.64.0.11<0>\n"
             "node-001:4101:4101 [0] NCCL INFO comm 0x5f1e2a0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 "
             "commId 0x1a2b3c4d5e6f7081 - Init COMPLETE\n")


def test_context_only_and_warnings_are_no_interruption(tmp_path: Path) -> None:
    """NCCL init lines and a corrected PCIe error (a context signal) hold no failure: verdict `none`, the
    sources read named; `unknown` would say a failure of unknown cause was seen."""
    job = _write(tmp_path / "job", {
        "rank-0.log": NCCL_INIT,
        "node-001/dmesg.log": "[Mon Nov  2 10:00:00 2026] pcieport 0000:00:03.0: AER: Corrected error received: "
                              "0000:00:03.0\n"})
    rep = analyze(job, tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert (v["kind"], v["category"], v["domain"], v["action"], v["auto_recoverable"]) == (
        "none", None, None, "none", True)
    assert rep["interruptions"] == [] and v["culprit"]["host"] is None
    assert v["summary"] == "No interruption found in the sources read (2 files: 1 kernel, 1 nccl)"
    check(rep, SCHEMA, "report")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "**none**" in md and "- Culprit:" not in md


def test_an_error_no_signature_knows_is_a_failure_of_unknown_cause(tmp_path: Path) -> None:
    """An error line (an unparsed line with `fatal` in it) that no signature names and the line
    classifier cannot place (a made-up message): a failure was seen, its
    cause is not known: `unknown`, not `none`."""
    job = _write(tmp_path / "job", {"rank-5.log": NCCL_INIT + (
        "[2026-06-23 15:45:07] frobnicator: fatal condition in the widget spline reticulator\n")})
    rep = analyze(job, tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert (v["kind"], v["category"], v["action"]) == ("unknown", "unknown", "investigate")
    (x,) = rep["interruptions"]
    assert x["summary"].startswith("A failure was seen (error_line at rank-5.log:3)")


def test_a_job_without_times_reports_unknown_downtime(tmp_path: Path) -> None:
    # a k8s admission error and an nvidia-smi line, neither stamped: no span was measured
    job = tmp_path / "job"
    job.mkdir()
    (job / "nvidia-smi.txt").write_text("Unable to determine the device handle for GPU 0000:C1:00.0: GPU is lost.  "
                                        "Reboot the system to recover this GPU\n")
    rep = analyze(job, tmp_path / "out", html=False).report
    assert rep["verdict"]["category"] == "gpu_lost"
    assert set(rep["downtime"].values()) == {None}
    assert all(set(a["downtime"].values()) == {None} for a in rep["attempts"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| wall | unknown | — |" in md and "Goodput: unknown; GPU-hours lost: unknown" in md
    assert "Start: unknown; end: unknown" in md and "None" not in md
