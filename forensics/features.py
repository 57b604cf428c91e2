"""Incident features for the attribution classifier (DESIGN §6.3, docs/classifier.md).

Pure functions of the frames attribution already holds for one attempt:

- `hits_events`: the attempt's signature hits joined to their events (signature, category, role,
  weight, source, kind, code, ts, ts_quality, host, rank, message, event_id, ...);
- `attempt_events`: every event of the attempt;
- `attempt`: the attempts row (index, start, end, first_step, last_step, first_step_start,
  last_progress).

`incident_features` returns a flat `{name: float}` dict (missing names mean 0), and
`first_error_text` the normalised text of the first error lines, for the character n-gram
model. Nothing here reads files or depends on the trained model.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

import polars as pl

# exit codes / signals with a name of their own; anything else is "exit:other_pos|neg"
EXIT_CODES = ("-6", "-9", "-15", "-11", "-7", "1")
EXIT_KINDS = ("elastic_failure", "worker_failed", "launcher_exit", "slurm_task_exit", "exit")
WATCHDOG_SIGS = ("pt-watchdog-timeout", "pt-heartbeat-timeout", "pt-watchdog-status")
TEXT_LINES = 4  # lines of first_error_text
TEXT_LINE_CHARS = 200


def _log1p(n: float) -> float:
    return round(math.log1p(max(n, 0.0)), 6)


def signature_families(sig: str) -> tuple[str, str]:
    """(group, family) of a signature id: `xid-79` -> (`xid`, `xid:79`); `nccl-ib-retry-exceeded`
    -> (`nccl`, `nccl-ib`); `pt-watchdog-timeout` -> (`pt`, `pt-watchdog`)."""
    parts = sig.split("-")
    if parts[0] == "xid" and len(parts) > 1:
        return "xid", f"xid:{parts[1]}"
    return parts[0], "-".join(parts[:2])


def _sorted_hits(h: pl.DataFrame) -> pl.DataFrame:
    """Time order: stamped lines by time, unstamped after them, then file order."""
    cols = [c for c in ("ts", "event_id") if c in h.columns]
    return h.sort(cols, nulls_last=True) if cols else h


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    if a is None or b is None:
        return None
    return (b - a).total_seconds()


def _col(df: pl.DataFrame, name: str) -> list:
    return df[name].to_list() if name in df.columns else [None] * df.height


def incident_features(hits_events: pl.DataFrame, attempt_events: pl.DataFrame, attempt: dict,
                      recurrence: dict[str, float] | None = None) -> dict[str, float]:
    """Features of one attempt's incident. `recurrence` (optional) is passed through with a
    `rec:` prefix (e.g. {"same_code_as_previous": 1.0})."""
    f: dict[str, float] = {}
    h = hits_events
    roots = h.filter(pl.col("role") == "root") if h.height else h
    casc = h.filter(pl.col("role") == "cascade") if h.height else h
    ctx = h.filter(pl.col("role") == "context") if h.height else h
    bad = h.filter(pl.col("role").is_in(["root", "cascade"])) if h.height else h

    f["n_root"] = _log1p(roots.height)
    f["n_cascade"] = _log1p(casc.height)
    f["n_context"] = _log1p(ctx.height)
    f["no_root"] = float(roots.height == 0)
    f["no_error"] = float(bad.height == 0)

    # signatures, families, groups
    for sig, n in sorted(_counts(_col(h, "signature")).items()):
        grp, fam = signature_families(sig)
        f[f"sig:{sig}"] = _log1p(n)
        f[f"fam:{fam}"] = 1.0
        f[f"grp:{grp}"] = 1.0
    # categories per role
    for prefix, part in (("root_cat", roots), ("casc_cat", casc), ("ctx_cat", ctx)):
        for cat, n in sorted(_counts(_col(part, "category")).items()):
            f[f"{prefix}:{cat}"] = _log1p(n)
    if roots.height:
        w = roots.group_by("category").agg(pl.col("weight").max()).sort("category")
        for cat, wt in w.iter_rows():
            f[f"root_w:{cat}"] = float(wt or 0) / 5.0
        top = _sorted_hits(roots).sort("weight", descending=True, maintain_order=True).row(0, named=True)
        f[f"top_root_cat:{top['category']}"] = 1.0
        f[f"top_root_fam:{signature_families(top['signature'])[1]}"] = 1.0
        f["n_root_cats"] = float(roots["category"].n_unique())

    # order
    for prefix, part in (("first_root", roots), ("first_casc", casc)):
        if part.height:
            r = _sorted_hits(part).row(0, named=True)
            f[f"{prefix}_sig:{r['signature']}"] = 1.0
            f[f"{prefix}_fam:{signature_families(r['signature'])[1]}"] = 1.0
            f[f"{prefix}_cat:{r['category']}"] = 1.0
    # the families in the order of their first hit, and the first hit's source (of the distinct
    # signatures, not a Python loop over every hit: a 1,024-rank hang has thousands of cascades)
    ordered = _sorted_hits(bad)
    fams: list[str] = []
    for sig in (ordered["signature"].unique(maintain_order=True).to_list() if ordered.height else []):
        fam = signature_families(sig)[1]
        if fam not in fams:
            fams.append(fam)
    src = ordered["source"].cast(pl.Utf8) if "source" in ordered.columns else None
    srcs = src.filter(src.str.len_bytes() > 0).head(1).to_list() \
        if src is not None and ordered.height else []
    for k, fam in enumerate(fams[:3]):
        f[f"order{k}:{fam}"] = 1.0
    if len(fams) >= 2:
        f[f"pair:{fams[0]}>{fams[1]}"] = 1.0
    if srcs:
        f[f"first_src:{srcs[0]}"] = 1.0

    # spread over ranks and hosts
    ae = attempt_events
    all_ranks = {r for r in _col(ae, "rank") if r is not None}
    all_hosts = {x for x in _col(ae, "host") if x is not None}
    err_ranks = {r for r in _col(bad, "rank") if r is not None}
    err_hosts = {x for x in _col(bad, "host") if x is not None}
    root_ranks = {r for r in _col(roots, "rank") if r is not None}
    root_hosts = {x for x in _col(roots, "host") if x is not None}
    f["ranks"] = _log1p(len(all_ranks))
    f["hosts"] = _log1p(len(all_hosts))
    f["err_ranks"] = _log1p(len(err_ranks))
    f["err_hosts"] = _log1p(len(err_hosts))
    f["root_ranks"] = _log1p(len(root_ranks))
    f["root_hosts"] = _log1p(len(root_hosts))
    f["err_host_share"] = round(len(err_hosts) / len(all_hosts), 6) if all_hosts else 0.0
    f["err_rank_share"] = round(len(err_ranks) / len(all_ranks), 6) if all_ranks else 0.0
    f["root_one_host"] = float(len(root_hosts) == 1)
    f["root_one_rank"] = float(len(root_ranks) == 1)
    f["root_all_hosts"] = float(bool(all_hosts) and len(root_hosts) >= len(all_hosts) and len(all_hosts) > 1)

    # phase
    first_ts = None
    stamped = bad.filter(pl.col("ts").is_not_null()) if bad.height else bad
    if stamped.height:
        first_ts = stamped["ts"].min()
    started = attempt.get("first_step") is not None
    fss = attempt.get("first_step_start")
    early = (not started) or (first_ts is not None and fss is not None and first_ts < fss)
    f["phase:before_first_step" if early else "phase:late"] = 1.0
    if started and attempt.get("last_step") is not None:
        f["steps_done"] = _log1p(attempt["last_step"] - attempt["first_step"] + 1)
    for name, a, b in (("t_start_to_error", attempt.get("start"), first_ts),
                       ("t_error_to_end", first_ts, attempt.get("end")),
                       ("t_progress_to_end", attempt.get("last_progress"), attempt.get("end"))):
        s = _seconds(a, b)
        if s is not None:
            f[name] = _log1p(s / 60.0)

    # exit codes and signals, scheduler states
    if ae.height and "kind" in ae.columns:
        ex = ae.filter(pl.col("kind").is_in(list(EXIT_KINDS)) & pl.col("code").is_not_null())
        for code, n in sorted(_counts([str(c).strip() for c in ex["code"].to_list()]).items()):
            if code in EXIT_CODES:
                key = code
            else:
                try:
                    key = "other_pos" if int(code) > 0 else "other_neg" if int(code) < 0 else "0"
                except ValueError:
                    continue
            f[f"exit:{key}"] = max(f.get(f"exit:{key}", 0.0), _log1p(n))
        for st in sorted(set(ae.filter(pl.col("kind") == "sched_state")["code"].drop_nulls().to_list())):
            f[f"sched:{str(st).split()[0]}"] = 1.0
        for src in sorted(set(ae["source"].drop_nulls().to_list())):
            f[f"src:{src}"] = 1.0
        wd = ae.filter(pl.col("kind") == "watchdog_timeout")
        wd_ranks = {r for r in wd["rank"].to_list() if r is not None}
    else:
        wd_ranks = set()
    wd_hits = h.filter(pl.col("signature").is_in(list(WATCHDOG_SIGS))) if h.height else h
    wd_ranks |= {r for r in _col(wd_hits, "rank") if r is not None}
    f["watchdog"] = float(bool(wd_ranks) or wd_hits.height > 0)
    if f["watchdog"]:
        f["watchdog_ranks"] = _log1p(len(wd_ranks))
        f["watchdog_share"] = round(len(wd_ranks) / len(all_ranks), 6) if all_ranks else 0.0
        f["watchdog_missing_one"] = float(len(all_ranks) - len(wd_ranks) == 1)
    # exception types on root lines
    for code in sorted({str(c) for c in _col(roots.filter(pl.col("kind") == "exception") if roots.height else roots,
                                             "code") if c}):
        f[f"exc:{code.rsplit('.', 1)[-1]}"] = 1.0

    for k, v in sorted((recurrence or {}).items()):
        f[f"rec:{k}"] = float(v)
    return {k: v for k, v in f.items() if v != 0.0}


def _counts(values: list) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        if v is not None:
            out[str(v)] = out.get(str(v), 0) + 1
    return out


# --------------------------------------------------------------------------------------- text

_DOW = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_NORMALISE: list[tuple[re.Pattern[str], str]] = [
    # time stamps first (their digits and month names are noise)
    (re.compile(r"\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), " "),
    (re.compile(rf"{_DOW}\s+{_MON}\s+\d+\s+\d\d:\d\d:\d\d(?:\s+\d{{4}})?"), " "),
    (re.compile(rf"\b{_MON}\s+\d+\s+\d\d:\d\d:\d\d"), " "),
    (re.compile(r"\b[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+"), " "),
    (re.compile(r"^\s*\[\s*\]"), " "),  # the brackets a leading stamp leaves behind
    # paths: keep the last component
    (re.compile(r"(?:[\w.~-]*/)+([\w.-]+)"), r"\1"),
    # PCI ids, UUIDs, hex
    (re.compile(r"\b(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?\b"), "pci"),
    (re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"), "uuid"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "x"),
    (re.compile(r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}\b"), "x"),
    (re.compile(r"\d+"), "0"),
    (re.compile(r"\s+"), " "),
]


def normalise_line(text: str) -> str:
    """One log line reduced to its shape: stamps dropped, paths trimmed to the file name, PCI
    ids / UUIDs / hex replaced, digit runs -> 0, whitespace collapsed, lower case."""
    t = text or ""
    for pat, rep in _NORMALISE:
        t = pat.sub(rep, t)
    return t.strip().lower()[:TEXT_LINE_CHARS]


def first_error_text(hits_events: pl.DataFrame, max_lines: int = TEXT_LINES) -> str:
    """The normalised text of the first few error lines: root hits first (time order), then
    cascades when roots are fewer than `max_lines`; repeated shapes are kept once."""
    h = hits_events
    if h.is_empty():
        return ""
    out: list[str] = []
    for role in ("root", "cascade"):
        part = _sorted_hits(h.filter(pl.col("role") == role))
        if "event_id" in part.columns:
            part = part.unique("event_id", keep="first", maintain_order=True)
        for msg in part["message"].to_list():
            line = normalise_line(msg or "")
            if line and line not in out:
                out.append(line)
            if len(out) >= max_lines:
                return "\n".join(out)
        if out and role == "root" and len(out) >= 2:
            break
    return "\n".join(out)
