"""report.json (the machine contract of DESIGN §8, schema_version 1) and report.md."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from forensics.attribution import Interruption
from forensics.downtime import Downtime
from forensics.humanize import duration, stamp
from forensics.stragglers import Straggler
from forensics.taxonomy import info

SCHEMA_VERSION = 1
MAX_UNPARSED_LISTED = 200


# A verdict that needs no action (`none`: no interruption in the sources read; `completed` without
# a node to drain) is auto-recoverable: nothing needs a human for the job to go on. An
# interruption's `auto_recoverable` is true for `restart` and `exclude_node_and_restart` (DESIGN §5)
# unless its node must be replaced and the job shows no other (precedence.restart_recovers); see
# docs/architecture.md "Verdict".
NOTHING_TO_RECOVER = True

def iso(t: datetime | None) -> str | None:
    if t is None:
        return None
    return t.isoformat().replace("+00:00", "Z")


def _interruption(x: Interruption) -> dict:
    return {
        "id": x.id, "attempt": x.attempt, "time": iso(x.time), "kind": x.kind, "category": x.category,
        "domain": x.domain, "action": x.action, "auto_recoverable": x.auto_recoverable,
        "recurring": x.recurring,
        "culprit": {"host": x.culprit_host, "rank": x.culprit_rank, "gpu": x.culprit_gpu,
                    "pci_bus_id": x.culprit_pci_bus_id},
        "confidence": x.confidence, "method": x.method, "summary": x.summary,
        "missing_evidence": x.missing_evidence,
        "evidence": [{"path": e["path"], "line": e["line"], "time": iso(e["time"]), "signature": e["signature"],
                      "role": e["role"], "text": e["text"], "event_id": e["event_id"]} for e in x.evidence],
    }


BLANK_CULPRIT = {"host": None, "rank": None, "gpu": None, "pci_bus_id": None}


def _drain(inters: list[dict]) -> list[dict]:
    """Hosts/GPUs to take out of service: one entry per (host, GPU) of the interruptions whose action
    is `exclude_node_and_restart` and that name a host, in time order (the first is the verdict's
    culprit when the job completed)."""
    out, seen = [], set()
    for x in inters:
        c = x["culprit"]
        if x["action"] != "exclude_node_and_restart" or not c.get("host") or (c["host"], c.get("gpu")) in seen:
            continue
        seen.add((c["host"], c.get("gpu")))
        out.append({"interruption": x["id"], "attempt": x["attempt"], "time": x["time"], "kind": x["kind"],
                    "category": x["category"], "domain": x["domain"], "action": x["action"],
                    "recurring": x["recurring"], "culprit": dict(c)})
    return out


def _coverage_text(files: pl.DataFrame) -> str:
    """'3 files: 2 steps, 1 dcgm; 1 more not recognized' (the sources read, by parser); with no file
    recognized, '2 files not recognized by any parser, their 40 lines screened for error lines'."""
    rec = files.filter(pl.col("parser").is_not_null())
    if rec.is_empty():
        screened = _screened(files)
        n, lines = screened.height, int(screened["lines"].sum())
        text = (f"{n} file{'s' if n != 1 else ''} not recognized by any parser, {'their' if n != 1 else 'its'} "
                f"{lines} line{'s' if lines != 1 else ''} screened for error lines")
        if files.height > n:
            text += f"; {files.height - n} more not read"
        return text
    per = rec.group_by("parser").len().sort(["len", "parser"], descending=[True, False])
    parts = ", ".join(f"{n} {p}" for p, n in per.iter_rows())
    text = f"{rec.height} file{'s' if rec.height != 1 else ''}: {parts}"
    if files.height > rec.height:
        text += f"; {files.height - rec.height} more not recognized"
    return text


def _screened(files: pl.DataFrame) -> pl.DataFrame:
    """The files whose lines were read (some line decoded), recognized by a parser or not: each line
    of an unrecognized one was still screened for error lines (`error_lines`, the line classifier)."""
    return files.filter(pl.col("parser").is_not_null() | (pl.col("lines").fill_null(0) > 0))


def _verdict(inters: list[dict], attempts: pl.DataFrame, completed: set[int], files: pl.DataFrame) -> dict:
    """The job's outcome (docs/architecture.md, "Verdict"): the interruption that ended the last
    attempt; else a slowdown when the job had nothing but slowdowns; else `completed`, naming the
    node to drain when an interruption blamed one; else, when earlier attempts were interrupted but
    the last one shows neither a failure nor completion, the latest interruption; else `none` when
    some file's lines were read (no interruption in the sources read: a file no parser recognized was
    still screened line by line for error lines); else `unknown` (nothing read)."""
    crash_like = [x for x in inters if x["kind"] != "slowdown"]
    slow = [x for x in inters if x["kind"] == "slowdown"]
    last = int(attempts["index"].max()) if not attempts.is_empty() else None
    ending = [x for x in crash_like if x["attempt"] == last]
    drain = _drain(inters)
    done = last is not None and last in completed
    if ending:
        v = dict(ending[-1])
    elif slow and not crash_like:
        v = dict(next((x for x in slow if x["culprit"]["host"]), slow[0]))
        if done:
            v["summary"] = "The job completed, slowed down: " + v["summary"]
    elif done:
        n = len(crash_like)
        v = {"id": None, "attempt": last, "time": None, "kind": "completed", "category": None, "domain": None,
             "action": "none", "auto_recoverable": NOTHING_TO_RECOVER, "recurring": False, "culprit": dict(BLANK_CULPRIT),
             "confidence": 0.9, "method": "rules",
             "summary": "The job completed" + (f" after {n} interruption{'s' if n != 1 else ''}" if n else ""),
             "missing_evidence": [], "evidence": []}
        if drain:
            d = drain[0]
            by_id = {x["id"]: x for x in inters}
            v.update(culprit=dict(d["culprit"]), action=d["action"], auto_recoverable=True, recurring=d["recurring"],
                     evidence=list(by_id[d["interruption"]]["evidence"]))
            v["summary"] += (f"; drain {culprit_text(d['culprit'])} (interruption {d['interruption']}: "
                             f"{d['category']})")
    elif crash_like:
        v = dict(crash_like[-1])
        v["summary"] = ("The job's end is not in the logs (its last attempt shows neither a failure nor completion); "
                        "its last interruption: " + v["summary"])
    elif not _screened(files).is_empty():
        v = {"id": None, "attempt": last, "time": None, "kind": "none", "category": None, "domain": None,
             "action": "none", "auto_recoverable": NOTHING_TO_RECOVER, "recurring": False, "culprit": dict(BLANK_CULPRIT),
             "confidence": None, "method": "rules",
             "summary": f"No interruption found in the sources read ({_coverage_text(files)})",
             "missing_evidence": [], "evidence": []}
    else:
        u = info("unknown")
        v = {"id": None, "attempt": last, "time": None, "kind": "unknown", "category": "unknown", "domain": u.domain,
             "action": u.default_action, "auto_recoverable": False, "recurring": False,
             "culprit": dict(BLANK_CULPRIT), "confidence": 0.0, "method": "rules",
             "summary": "No recognizable log content found", "missing_evidence": [], "evidence": []}
    v["drain"] = drain
    return v


def build_report(name: str, root: Path, files: pl.DataFrame, events: pl.DataFrame, attempts: pl.DataFrame,
                 inters: list[Interruption], stragglers: list[Straggler], down: Downtime, ing, rmap: pl.DataFrame,
                 unparsed: pl.DataFrame, completed: set[int]) -> dict:
    hosts = sorted(set(events["host"].drop_nulls().to_list())) if not events.is_empty() else []
    inter_dicts = [_interruption(x) for x in inters]
    warnings = list(ing.warnings)
    recognized = files.filter(pl.col("parser").is_not_null())
    if files.is_empty():
        warnings.append("the job directory holds no files")
    elif recognized.is_empty():
        warnings.append("no file was recognized as a log this tool reads")
    for f in files.iter_rows(named=True):
        for w in f["warnings"] or []:
            if w.startswith("no timezone"):
                continue
            warnings.append(f"{f['path']}: {w}")
    rel = events.filter(pl.col("ts_quality") == "relative")
    if not rel.is_empty():
        warnings.append(f"{rel.height} kernel events carry only uptime stamps and no boot time is known; "
                        "they are kept without a wall-clock time (add boot_times to job.toml)")
    n_ranks = int(rmap["rank"].n_unique()) if not rmap.is_empty() else None
    job = {
        "name": name, "dir": str(root.resolve()), "hosts": hosts, "ranks": n_ranks, "gpus": down.gpus,
        "start": iso(attempts["start"].min()) if not attempts.is_empty() else None,
        "end": iso(attempts["end"].max()) if not attempts.is_empty() else None,
    }
    sources = [{"path": f["path"], "parser": f["parser"], "lines": f["lines"], "parsed": f["parsed"],
                "ignored": f["ignored"], "events": f["events"], "unparsed": f["unparsed"],
                "warnings": f["warnings"] or [], "size": f["size"], "digest": f["digest"],
                "digest_algo": f["digest_algo"],
                "sha256": None}  # schema v1 keeps the key; one digest per file now (digest_algo names it)
               for f in files.iter_rows(named=True)]
    unparsed_list = []
    if not unparsed.is_empty():
        paths = dict(zip(files["file_id"].to_list(), files["path"].to_list(), strict=True))
        for r in unparsed.sort("file_id", "line_no").head(MAX_UNPARSED_LISTED).iter_rows(named=True):
            unparsed_list.append({"path": paths[r["file_id"]], "line": r["line_no"], "text": r["text"]})
    return {
        "schema_version": SCHEMA_VERSION,
        "job": job,
        "sources": sources,
        "attempts": [{"index": a["index"], "start": iso(a["start"]), "end": iso(a["end"]),
                      "first_step": a["first_step"], "last_step": a["last_step"], "end_reason": a["end_reason"],
                      "resumed_from": a["resumed_from"], "first_step_time": iso(a.get("first_step_start")),
                      "last_progress": iso(a.get("last_progress")),
                      "last_durable_checkpoint": iso(a.get("last_durable_checkpoint")),
                      "witnesses": a["witnesses"].split(",") if a.get("witnesses") else []}
                     for a in attempts.iter_rows(named=True)],
        "verdict": _verdict(inter_dicts, attempts, completed, files),
        "interruptions": inter_dicts,
        "stragglers": [{"host": s.host, "rank": s.rank, "gpu": s.gpu, "start": iso(s.start), "end": iso(s.end),
                        "slowdown": s.slowdown, "cause": s.cause, "evidence": s.evidence} for s in stragglers],
        "downtime": down.as_report(),
        "warnings": warnings,
        "unparsed_errors": unparsed_list,
    }


def md_escape(text: str) -> str:
    """Log text inside Markdown: no raw HTML, no table breaks, no emphasis surprises."""
    out = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "|`*_[]#":
        out = out.replace(ch, "\\" + ch)
    return out


def culprit_text(c: dict | None) -> str:
    """'host h, rank r, GPU g, PCI p' from a culprit dict (what is known of it)."""
    c = c or {}
    parts = []
    if c.get("host"):
        parts.append(f"host {c['host']}")
    if c.get("rank") is not None:
        parts.append(f"rank {c['rank']}")
    if c.get("gpu") is not None:
        parts.append(f"GPU {c['gpu']}")
    if c.get("pci_bus_id"):
        parts.append(f"PCI {c['pci_bus_id']}")
    return ", ".join(parts) or "not localized"


def _known(value: object) -> str:
    """A value for the prose of report.md: null (unknown, never guessed) reads `unknown`, not `None`."""
    return "unknown" if value is None else str(value)


def _md_table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table; cells are rendered with str(), a null one as `—` (escape log text before
    passing it)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join("—" if c is None else str(c) for c in r) + " |" for r in rows]


def write_markdown(rep: dict, path: Path) -> None:
    v = rep["verdict"]
    j = rep["job"]
    lines = [f"# forensics report: {md_escape(j['name'])}", ""]
    drain = v.get("drain") or []
    quiet = v["kind"] in ("completed", "none") and not drain  # nothing to act on
    lines += ["## Verdict", "",
              f"**{v['kind']}**" + (f" · {v['category']} ({v['domain']})" if v.get("category") else ""), "",
              f"- What happened: {md_escape(v['summary'] or '')}"]
    if not quiet:
        lines.append(f"- Culprit: {md_escape(culprit_text(v['culprit']))}")
    lines += [f"- Action: `{v['action']}` (auto-recoverable: {'yes' if v['auto_recoverable'] else 'no'})",
              f"- Confidence: {v['confidence'] if v['confidence'] is not None else 'n/a'} ({v['method']})"]
    for d in drain:
        lines.append(f"- Drain: {md_escape(culprit_text(d['culprit']))} (interruption {d['interruption']}, "
                     f"{d['category']}): `{d['action']}`")
    lines.append("")
    if v.get("missing_evidence"):
        lines += [f"- Missing evidence: {md_escape(', '.join(v['missing_evidence']))}", ""]
    if v.get("evidence"):
        lines += ["Evidence:", ""]
        for e in v["evidence"]:
            lines.append(f"- `{e['path']}:{e['line']}` [{e['role']}, {e['signature']}] {md_escape(e['text'] or '')}")
        lines.append("")
    lines += ["## Job", "", f"- Directory: {md_escape(j['dir'])}", f"- Hosts: {len(j['hosts'])}; ranks: {_known(j['ranks'])}",
              f"- Start: {_known(stamp(j['start']))}; end: {_known(stamp(j['end']))} (all times UTC)", ""]
    if rep["interruptions"]:
        lines += ["## Interruptions", ""] + _md_table(
            ["id", "attempt", "time", "kind", "category", "culprit", "action", "confidence"],
            [[x["id"], x["attempt"], stamp(x["time"]), x["kind"], x["category"], md_escape(culprit_text(x["culprit"])),
              x["action"], x["confidence"]] for x in rep["interruptions"]]) + [""]
    if rep["attempts"]:
        lines += ["## Attempts", ""] + _md_table(
            ["index", "start", "end", "first step", "last step", "end reason"],
            [[a["index"], stamp(a["start"]), stamp(a["end"]), a["first_step"], a["last_step"], a["end_reason"]]
             for a in rep["attempts"]]) + [""]
    d = rep["downtime"]
    buckets = ("wall_s", "productive_s", "startup_s", "checkpoint_s", "lost_work_s", "termination_s", "restart_s",
               "slowdown_s")
    lines += ["## Downtime", ""] + _md_table(["bucket", "duration", "seconds"],
                                             [[k[:-2], duration(d[k]), d[k]] for k in buckets])
    lines += ["", f"Goodput: {_known(d['goodput'])}; GPU-hours lost: {_known(d['gpu_hours_lost'])}", ""]
    adv = rep.get("advice") or {}
    ck, to = adv.get("checkpoint") or {}, adv.get("collective_timeout") or {}
    if ck or to:
        lines += ["## Advice", ""]
        if ck.get("optimal_interval_s"):
            lines.append(f"- Checkpoint interval: now {duration(ck['current_interval_s'])}, Young/Daly optimum "
                         f"{duration(ck['optimal_interval_s'])} (save cost {duration(ck['save_cost_s'])}, mean time "
                         f"between interruptions {duration(ck['mtbi_s'])}); estimated GPU-hours saved on this job: "
                         f"{ck['gpu_hours_saved']}")
        elif ck.get("note"):
            lines.append(f"- Checkpoint interval: {ck['note']}")
        if to.get("hangs"):
            lines.append(f"- Collective timeout {duration(to['configured_timeout_s'])}: after {to['hangs']} "
                         f"interruption(s) the surviving ranks waited {duration(to['waited_s'])} for the watchdog; "
                         f"a {duration(to['shorter_timeout_s'])} timeout would have saved {to['gpu_hours_saved']} "
                         "GPU-hours")
        lines.append("")
    if rep["stragglers"]:
        lines += ["## Stragglers", ""] + _md_table(
            ["host", "rank", "GPU", "start", "end", "slowdown", "cause"],
            [[md_escape(str(s["host"])), s["rank"], s["gpu"], stamp(s["start"]), stamp(s["end"]), s["slowdown"], s["cause"]]
             for s in rep["stragglers"]]) + [""]
    lines += ["## Coverage", ""] + _md_table(
        ["file", "parser", "lines", "parsed", "ignored", "unparsed", "events"],
        [[md_escape(s["path"]), s["parser"] or "unrecognized", s["lines"], s["parsed"], s["ignored"], s["unparsed"],
          s["events"]] for s in rep["sources"]]) + [""]
    if rep.get("unparsed_errors"):
        lines += ["Unparsed lines that look like errors:", ""]
        for u in rep["unparsed_errors"]:
            lines.append(f"- `{u['path']}:{u['line']}` {md_escape(u['text'] or '')}")
        lines.append("")
    if rep["warnings"]:
        lines += ["## Warnings", ""] + [f"- {md_escape(w)}" for w in rep["warnings"]] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
