"""`forensics explain-time`: where each second of the downtime split comes from.

`explain_time` reads only a report (report.json): one line per bucket per attempt and one per
bucket for the job, the seconds as the report has them and how they were derived from the lines
that `forensics.explain.attempt_evidence` put beside each attempt during the analysis.
`explain_path` takes an output directory, a report.json, or a job directory (analyzed into a
temporary directory first; nothing is written beside it).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from forensics.analysis import analyze
from forensics.discovery import JobDirError
from forensics.downtime import BUCKETS

# --- explain-time: read a report, say where each bucket's seconds come from -------------------------------


@dataclass(frozen=True)
class TimeLine:
    attempt: int | None  # None: the job's total
    bucket: str
    seconds: float
    how: str


def _at(x: dict | None) -> str:
    if not x:
        return "not in the logs"
    where = x.get("path") or ""
    if where and x.get("line") is not None:
        where += f":{x['line']}"
    return where or "no line"


def _t(v: str | None) -> str:
    return v or "unknown"


def _ivs(a: dict, bucket: str) -> str:
    got = [iv for iv in a.get("intervals") or [] if iv["bucket"] == bucket]
    if not got:
        return ""
    if len(got) == 1:
        return f" (interval {got[0]['from']} .. {got[0]['to']}, {got[0]['seconds']} s before precedence)"
    return f" ({len(got)} intervals, {round(sum(iv['seconds'] for iv in got), 3)} s before precedence)"


def _save_at(s: dict) -> str:
    a, b = s.get("start_line"), s.get("end_line")
    lines = f"{a}-{b}" if a is not None and b is not None else (f"{a}, no end line" if a is not None else f"{b}")
    return f"{s.get('path')}:{lines}"


def _step(x: dict | None) -> str:
    if not x:
        return "no step logged"
    saved = ", a save naming it" if x.get("from") == "save line" else ""
    return f"step {x.get('step')} at {_t(x.get('time'))} ({_at(x)}{saved})"


def _how(bucket: str, a: dict, prev: dict | None) -> str:
    ev = a.get("evidence") or {}
    st, en = ev.get("start") or {}, ev.get("end") or {}
    first, last = ev.get("first_step"), ev.get("last_step")
    fst = a.get("first_step_time")
    if bucket in ("startup", "restart"):
        txt = ""
        if bucket == "restart" and prev is not None:
            txt = f"wait from the previous attempt's end {_t(prev.get('end'))} to this start, then "
        txt += (f"attempt start {_t(a.get('start'))} ({st.get('kind')}, {_at(st)}) to the first step's start "
                f"{_t(fst)}")
        if first:
            base = f"resumed step {a['resumed_from']}" if a.get("resumed_from") is not None else "step 0"
            txt += f", estimated back from the first logged {_step(first)} to {base}"
            if (ev.get("resumed_from") or {}).get("path"):
                txt += f" (checkpoint load {_at(ev['resumed_from'])})"
        else:
            txt += " (no step logged: the whole attempt up to its end or fault)"
        return txt + _ivs(a, bucket)
    if bucket == "checkpoint":
        sv = ev.get("saves") or {}
        listed = "; ".join(f"step {s.get('step')} at {_t(s.get('time'))} ({_save_at(s)})" for s in sv.get("listed") or [])
        return f"{sv.get('count', 0)} blocking save(s), start to end" + (f": {listed}" if listed else "") + _ivs(a, bucket)
    if bucket == "lost_work":
        dur = ev.get("last_durable_checkpoint")
        frm = (f"last durable checkpoint step {dur.get('step')} at {_t(dur.get('time'))} ({_at(dur)}; {dur.get('how')})"
               if dur else f"no durable checkpoint: from the first step's start {_t(fst)}")
        return f"{frm} to the last progress {_t(a.get('last_progress'))}, {_step(last)}" + _ivs(a, bucket)
    if bucket == "termination":
        f = ev.get("fault")
        ftxt = (f"; fault {f['interruption']} ({f['kind']}) at {_t(f.get('time'))} ({_at(f)})" if f else "")
        return (f"last progress {_t(a.get('last_progress'))} ({_step(last)}) to the attempt's end {_t(a.get('end'))} "
                f"({en.get('kind')}, {_at(en)}){ftxt}" + _ivs(a, bucket))
    if bucket == "slowdown":
        return "excess of slow steps over the ideal step time, carved out of productive time"
    return (f"the rest of the attempt's span {_t(a.get('start'))} .. {_t(a.get('end'))}, steps {_step(first)} "
            f"to {_step(last)}")


def explain_time(report: dict) -> list[TimeLine]:
    """One line per (attempt, bucket) with seconds in that attempt, then one per bucket for the
    job with report.json's downtime value and how many attempts it comes from. Only the report
    is read, never the rendered text; the order is fixed (attempt, then DESIGN §7's buckets)."""
    out: list[TimeLine] = []
    atts = report.get("attempts") or []
    prev = None
    for a in atts:
        share = a.get("downtime") or {}
        for b in BUCKETS:
            v = share.get(f"{b}_s")
            if v:
                out.append(TimeLine(a["index"], b, v, _how(b, a, prev)))
        prev = a
    d = report.get("downtime") or {}
    for b in BUCKETS:
        v = d.get(f"{b}_s")
        if v is None:
            continue
        from_ = [str(a["index"]) for a in atts if (a.get("downtime") or {}).get(f"{b}_s")]
        how = (f"sum over attempt(s) {', '.join(from_)}" if from_ else "no attempt has any") + \
            f" (report.json downtime.{b}_s)"
        out.append(TimeLine(None, b, v, how))
    return out


def render(report: dict, lines: list[TimeLine]) -> str:
    """The text `forensics explain-time` prints: each attempt's header (span, end, witnesses),
    then its bucket lines; the job's totals last."""
    atts = {a["index"]: a for a in report.get("attempts") or []}
    text: list[str] = []
    cur: object = object()
    for ln in lines:
        if ln.attempt != cur:
            cur = ln.attempt
            if ln.attempt is None:
                d = report.get("downtime") or {}
                text.append(f"job: wall {d.get('wall_s')} s, goodput {d.get('goodput')}")
            else:
                a = atts[ln.attempt]
                ev = a.get("evidence") or {}
                text.append(f"attempt {a['index']}: {_t(a.get('start'))} .. {_t(a.get('end'))}, ended "
                            f"{a.get('end_reason')}, witnesses {','.join(a.get('witnesses') or []) or 'none'}")
                for k in ("start", "end"):
                    x = ev.get(k) or {}
                    text.append(f"  {k:<12} {_t(x.get('time'))}  {x.get('kind')} ({_at(x)})")
        text.append(f"  {ln.bucket:<12} {ln.seconds:>12.3f} s  {ln.how}")
    return "\n".join(text) + "\n"


class ExplainError(Exception):
    """The path holds neither a report nor a job the analyzer can read."""


def explain_path(path: Path | str) -> tuple[dict, list[TimeLine]]:
    """(report, lines) for an output directory (its report.json), a report.json file, or a job
    directory / archive (analyzed into a temporary directory, nothing written beside it)."""
    p = Path(path)
    if p.is_dir() and (p / "report.json").is_file():
        p = p / "report.json"
    if p.is_file() and p.suffix == ".json":
        try:
            rep = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ExplainError(f"cannot read {p}: {exc}") from exc
        if not isinstance(rep, dict) or "downtime" not in rep:
            raise ExplainError(f"{p} is not a forensics report.json")
        return rep, explain_time(rep)
    with tempfile.TemporaryDirectory(prefix="forensics-explain-") as tmp:
        try:
            rep = analyze(p, Path(tmp) / "out", html=False).report
        except JobDirError as exc:
            raise ExplainError(str(exc)) from exc
    return rep, explain_time(rep)


def as_json(lines: list[TimeLine]) -> list[dict]:
    return [asdict(ln) for ln in lines]
