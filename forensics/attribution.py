"""Incidents and attribution (DESIGN §6): for each attempt that ended, the earliest credible root
signal wins; cascades (watchdog timeouts, remote-peer errors, teardown signals) attach to it;
the culprit is localised to host / rank / GPU; action and recurrence follow the taxonomy.

Root choice follows signatures/precedence.toml (forensics/precedence.py): phase rules re-read
a root's category by when it happened, `outranks` rules take a root out of the running when a
stronger cause of the same incident is there (a hardware Xid over an application-class Xid, an
uncorrectable memory or NVLink Xid over the contained Xid it causes), then the earliest root and
those within the tie window compete, ordered by the stated tie-break keys (weight, then time,
rank, host, ...; never file order). This keeps a GPU's Xid 79 ahead of the CUDA error the
application prints a second later, and a Python exception ahead of the network errors its peers
log when it dies. Signals that only show teardown name no category.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache

import polars as pl

from forensics.classifier import arbitrate, classify_incident
from forensics.peers import GraphCulprit, decide, edges
from forensics.precedence import Precedence, apply_outranks, apply_phase, load_precedence, restart_recovers
from forensics.signatures import xid_table
from forensics.taxonomy import AUTO_RECOVERABLE, info
from parsers import evidence_wanted, source_names, source_with
from parsers.ascii_regex import ascii_classes
from parsers.kernel import NETFS_SERVER_RE
from parsers.pytorch import MISMATCH_PAIR_RE

# the sources attribution reads for a role of their own (parsers.spec.ROLES), by role, never by name
COLLECTIVES = source_with("collectives")  # network errors that name peers
LAUNCHER = source_with("launcher")  # per-rank failure records
FRAMEWORK = source_with("framework")  # a rank's own errors
NODE_SOURCES = source_names("node")  # node-level records (kernel, telemetry, BMC): they do not bound a job

MAX_EVIDENCE = 8
# Without a root or cascade hit, an attempt that is the job's last is an interruption only when a
# failure was still seen in it (`_failure_seen`); otherwise its logs just end (no interruption).
EXIT_KINDS = ("elastic_failure", "worker_failed", "launcher_exit", "slurm_task_exit")
SCHED_OK = ("COMPLETED", "RUNNING", "PENDING")  # scheduler states that are no failure (sacct State)


@dataclass
class Interruption:
    id: str
    attempt: int | None
    time: datetime | None
    kind: str
    category: str
    domain: str
    action: str
    auto_recoverable: bool
    recurring: bool
    culprit_host: str | None
    culprit_rank: int | None
    culprit_gpu: int | None
    culprit_pci_bus_id: str | None
    confidence: float
    method: str
    summary: str
    missing_evidence: list[str] = field(default_factory=list)
    evidence: list[dict] = field(default_factory=list)  # event rows: path, line, time, signature, role, text
    code: str | None = None  # the root event's code (e.g. exception type), for recurrence


def _ip_hosts(events: pl.DataFrame) -> dict[str, str]:
    ifs = events.filter((pl.col("kind") == "nccl_iface") & pl.col("code").is_not_null() & pl.col("host").is_not_null())
    out: dict[str, str] = {}
    for ip, host in ifs.select("code", "host").unique().sort("code", "host").iter_rows():
        out.setdefault(ip, host)
    return out


def _fill_culprit(row: dict, rmap: pl.DataFrame,
                  hosts: set[str] | None = None) -> tuple[str | None, int | None, int | None, str | None]:
    """Complete host / rank / GPU / PCI from the rank map. A rank found on several hosts (a
    spare took its slot after a restart) resolves to a host active in this attempt."""
    host, rank, gpu, pci = row.get("host"), row.get("rank"), row.get("gpu"), row.get("pci_bus_id")
    if rmap.is_empty():
        return host, rank, gpu, pci
    m = None
    if rank is not None:
        m = rmap.filter(pl.col("rank") == rank)
        if host is not None:
            m = m.filter(pl.col("host") == host)
        elif hosts and m.height > 1:
            m = m.filter(pl.col("host").is_in(sorted(hosts)))
    elif host is not None and pci is not None:
        m = rmap.filter((pl.col("host") == host) & (pl.col("pci_bus_id") == pci))
    elif host is not None and gpu is not None:
        m = rmap.filter((pl.col("host") == host) & (pl.coalesce("gpu", "local_rank") == gpu))
    if m is not None and m.height >= 1:
        r = m.row(0, named=True)
        host = host or r["host"]
        rank = rank if rank is not None else r["rank"]
        gpu = gpu if gpu is not None else (r["gpu"] if r["gpu"] is not None else r["local_rank"])
        pci = pci or r["pci_bus_id"]
    return host, rank, gpu, pci


def _evidence_rows(ev: pl.DataFrame) -> list[dict]:
    return [
        {"event_id": r["event_id"], "path": r["path"], "line": r["line_no"], "time": r["ts"],
         "signature": r["signature"], "role": r["role"], "text": r["message"]}
        for r in ev.iter_rows(named=True)
    ]


def _lagging_rank(attempt_events: pl.DataFrame, timeouts: pl.DataFrame | None,
                  rmap: pl.DataFrame) -> tuple[int | None, str]:
    """For a hang without a root event: the rank that never reported the timeout, or the one
    whose last completed collective lags the others."""
    if timeouts is None or timeouts.is_empty():
        return None, ""
    reporters = set(timeouts["rank"].drop_nulls().to_list())
    known = set(rmap["rank"].to_list()) if not rmap.is_empty() else set()
    missing = sorted(known - reporters)
    if reporters and len(missing) == 1:
        return missing[0], f"rank {missing[0]} never reported the collective timeout that every other rank hit"
    # sequence numbers count one process group's collectives: compared only within a group (its GUID, the
    # parser's `pg`), never across groups (rank 13's SeqNum 216 in one sub-group and rank 15's 57 in another
    # say nothing of who lags); a rank whose group is unknown is compared only with others of unknown group
    lc = (timeouts.filter(pl.col("last_completed").is_not_null() & pl.col("rank").is_not_null())
          .group_by("pg", "rank").agg(pl.col("last_completed").max()))
    found: list[tuple[int, int]] = []
    for (_pg,), grp in lc.group_by(["pg"], maintain_order=True):
        if grp.height < 2:
            continue
        lo = grp["last_completed"].min()
        lagging = grp.filter(pl.col("last_completed") == lo)
        if lagging.height == 1 and grp["last_completed"].max() > lo:
            found.append((int(lagging["rank"][0]), int(lo)))
    if len({r for r, _ in found}) == 1:
        r, lo = found[0]
        return r, f"rank {r} has the lowest last completed collective ({lo})"
    return None, ""


def _desync(timeouts: pl.DataFrame | None) -> tuple[str, int | None] | None:
    """Ranks timing out at the same sequence number on different collectives. Returns the
    description and, when one rank alone issued the odd collective, that rank."""
    if timeouts is None or timeouts.is_empty():
        return None
    t = timeouts.filter(pl.col("seq").is_not_null() & pl.col("op_type").is_not_null())
    g = t.group_by("pg", "seq").agg(pl.col("op_type").n_unique().alias("ops"),
                                    pl.col("op_type").unique().sort().alias("names"))
    bad = g.filter(pl.col("ops") > 1).sort("seq")
    if bad.is_empty():
        return None
    r = bad.row(0, named=True)
    at = t.filter((pl.col("seq") == r["seq"]) & (pl.col("pg").eq_missing(r["pg"]))).unique(["rank", "op_type"])
    counts = at.group_by("op_type").agg(pl.col("rank").n_unique().alias("n"), pl.col("rank").first().alias("r"))
    odd = counts.filter(pl.col("n") == 1)
    lone = int(odd["r"][0]) if odd.height == 1 and counts.height == 2 and counts["n"].max() > 1 else None
    desc = f"ranks disagree at collective #{r['seq']}: {' vs '.join(r['names'])}"
    if lone is not None:
        desc += f"; rank {lone} alone issued {odd['op_type'][0]}"
    return desc, lone


def _desync_report(ae: pl.DataFrame) -> tuple[str, list[int], dict] | None:
    """What ProcessGroupNCCL's desync report (TORCH_NCCL_DESYNC_DEBUG; TraceUtils.h retrieveDesyncReport)
    says of the oldest pending collective, as read by the pytorch parser: `not_joined` (ranks that
    never entered it: a collective desync, taxonomy.csv "one rank never entered the collective") or
    `lagging` (ranks that entered it and never left: stuck inside it, a plain hang), the ranks it names,
    and the first event saying so. A report naming ranks that never joined outranks one naming ranks
    stuck inside (both can be printed for the same collective: the stuck ones wait on the absent ones)."""
    if ae.is_empty() or "code" not in ae.columns:
        return None
    rep = ae.filter((pl.col("kind") == "watchdog_status") & pl.col("code").is_not_null()
                    & pl.col("code").str.contains(ascii_classes(r"^(?:not_joined|lagging):[\d,]+$")))
    if rep.is_empty():
        return None
    for what in ("not_joined", "lagging"):
        r = rep.filter(pl.col("code").str.starts_with(what + ":")).sort("ts", "event_id", nulls_last=True)
        if not r.is_empty():
            row = r.row(0, named=True)
            ranks = sorted({int(x) for c in r["code"].to_list() for x in c.split(":", 1)[1].split(",") if x})
            return what, ranks, row
    return None


def attribute(events: pl.DataFrame, hits: pl.DataFrame, attempts: pl.DataFrame, rmap: pl.DataFrame,
              tables: dict[str, pl.DataFrame], completed_attempts: set[int]) -> list[Interruption]:
    """One interruption per attempt that ended for a reason other than completion."""
    joined = hits.join(events, on="event_id", how="inner")
    ip_host = _ip_hosts(events)
    timeouts_all = tables.get("collective_timeouts")
    sources_present = set(events["source"].unique().to_list()) if not events.is_empty() else set()
    exits = tables.get("exits")
    last = int(attempts["index"].max()) if not attempts.is_empty() else None
    out: list[Interruption] = []
    for a in attempts.iter_rows(named=True):
        i = a["index"]
        if i in completed_attempts:
            continue
        aj = joined.filter(pl.col("attempt") == i)
        ae = events.filter(pl.col("attempt") == i)
        tmo = None
        if timeouts_all is not None and not timeouts_all.is_empty():
            fids = ae.select("file_id").unique()
            tmo = timeouts_all.join(fids, on="file_id")
        inter = _attribute_attempt(i, a, aj, ae, tmo, rmap, ip_host, sources_present, exits, i == last)
        if inter is not None:
            out.append(inter)
    _recurrence(out)
    hosts = set(events["host"].drop_nulls().to_list()) if "host" in events.columns else set()
    if not rmap.is_empty() and "host" in rmap.columns:
        hosts |= set(rmap["host"].drop_nulls().to_list())
    saved = not events.is_empty() and bool(events.select(
        (pl.col("kind").is_in(PROGRESS_KINDS)
         | ((pl.col("kind") == REQUEUE_KIND) & pl.col("code").is_in(REQUEUE_CODES))).any()).item())
    _restart_decision(out, hosts, load_precedence(), saved)
    return out


# event kinds that show a job keeping its progress (a training step, a checkpoint written or read, a
# launcher's own requeue machinery: Lightning's auto-requeue saves a checkpoint at the signal), and the
# scheduler codes of a requeue under way (Slurm's `DUE TO JOB REQUEUE`, submitit's requeue at its
# timeout or preemption signal): a requeue after a limit resumes from there (precedence.toml [restart]
# needs_saved_progress)
PROGRESS_KINDS = ("step", "checkpoint_save_start", "checkpoint_save_end", "checkpoint_load", "requeue")
REQUEUE_KIND, REQUEUE_CODES = "slurm_cancel", ("JOB_REQUEUE", "SUBMITIT_TIMEOUT", "SUBMITIT_PREEMPTED")


def _restart_decision(inters: list[Interruption], job_hosts: set[str], prec: Precedence,
                      progress_saved: bool = True) -> None:
    """`auto_recoverable` of each interruption, after its action is final (precedence.toml
    `[restart]`): a fault that stays in its node needs another node of the job to restart on; a
    limit that ends the run needs a job that keeps its progress."""
    for x in inters:
        x.auto_recoverable = restart_recovers(x.action, x.category, x.culprit_host, job_hosts, prec, progress_saved)
        if x.action in AUTO_RECOVERABLE and not x.auto_recoverable:
            x.summary += (" (the logs show no training step or checkpoint: a requeue runs the same work against "
                          "the same limit; raise the limit or checkpoint before it)"
                          if x.category in prec.needs_saved_progress else
                          " (the logs show no other node to restart on: the node must be repaired or "
                          "another one provided)")


def _exit_times(ae: pl.DataFrame) -> pl.DataFrame:
    """First failure time per rank in the attempt, from torchelastic tables and agent lines."""
    ex = ae.filter(((pl.col("kind").is_in(["elastic_failure", "worker_failed"]))
                    | ((pl.col("source") == LAUNCHER) & (pl.col("kind") == "exception"))) & pl.col("rank").is_not_null()
                   & pl.col("ts").is_not_null() & (pl.col("ts_quality") == "exact"))
    return ex.group_by("rank").agg(pl.col("ts").min().alias("exit_ts"))


def _pick_root(roots: pl.DataFrame, exit_times: pl.DataFrame, a: dict,
               prec: Precedence, node_only: bool = False) -> tuple[dict | None, list[str]]:
    """The root of the attempt and the notes of the precedence rules that decided (see the module
    docstring and signatures/precedence.toml). Lines without a stamp of their own (tracebacks, old
    NCCL WARNs) take their rank's failure time from the torchelastic table when there is one;
    candidates with neither are ranked after those that have a time. In an attempt seen only
    through node-level records (`node_only`), only the latest incident's roots compete
    (`_latest_incident`)."""
    if roots.is_empty():
        return None, []
    r = roots.join(exit_times, on="rank", how="left").with_columns(
        pl.when(pl.col("ts_quality") == "exact").then(pl.col("ts"))
        .otherwise(pl.coalesce("exit_ts", "ts")).alias("t_best"),
        ((pl.col("ts_quality") == "exact") | pl.col("exit_ts").is_not_null()).alias("reliable"),
    )
    r = apply_phase(r, a.get("first_step_start"), a.get("first_step") is not None, prec)
    r, notes = apply_outranks(r, prec)
    cols, desc = prec.sort_keys()
    timed = r.filter(pl.col("t_best").is_not_null())
    if timed.is_empty():
        return r.sort(cols, descending=desc, nulls_last=True).row(0, named=True), notes
    if node_only:
        timed, note = _latest_incident(timed, prec)
        if note:
            notes.append(note)
    rel = timed.filter(pl.col("reliable"))
    t0 = (rel if not rel.is_empty() else timed)["t_best"].min()
    pool = timed.filter((pl.col("t_best") <= t0 + prec.tie_window) | ~pl.col("reliable"))
    return pool.sort(cols, descending=desc, nulls_last=True).row(0, named=True), notes


def _latest_incident(timed: pl.DataFrame, prec: Precedence) -> tuple[pl.DataFrame, str | None]:
    """The roots of the latest incident, and a note naming the earlier ones (precedence.toml
    `node_incident_gap_s`). With no process log and no scheduler record, nothing bounds the job:
    a node's kernel log can hold days of its life, and roots that far apart are separate incidents
    (each may have ended a different job); the records were gathered after the latest. Incidents
    are split where consecutive reliably stamped roots lie more than the gap apart."""
    rel = timed.filter(pl.col("reliable")).sort("t_best")
    if rel.height < 2:
        return timed, None
    t = rel["t_best"]
    starts = t.filter(t.diff() > prec.node_incident_gap)
    if starts.is_empty():
        return timed, None
    cut = starts.max()
    earlier = rel.filter(pl.col("t_best") < cut)
    first = earlier.row(0, named=True)
    n = earlier.height
    hours = prec.node_incident_gap.total_seconds() / 3600
    note = (f"only node-level records, so the latest incident is taken; {n} earlier root signal{'s' if n != 1 else ''}, "
            f"from {first['t_best']:%Y-%m-%d %H:%M:%S} ({first['signature']}, {first['path']}:{first['line_no']}), "
            f"{'lie' if n != 1 else 'lies'} more than {hours:g} h before it")
    return timed.filter((pl.col("t_best") >= cut) | ~pl.col("reliable")), note


@cache
def _severe_xids() -> tuple[str, ...]:
    """Xids that make an interruption: those the catalog rates above informational, and the follow-ons."""
    t = xid_table()
    rated = t.filter(pl.col("severity").str.strip_chars().is_in(["medium", "high", "critical"]))["xid"]
    return tuple(sorted({x.strip() for x in rated.to_list()} | set(load_precedence().follow_on_xids)))


def _failure_seen(ae: pl.DataFrame, aj: pl.DataFrame, exits: pl.DataFrame | None, prec: Precedence) -> str | None:
    """What shows that the attempt failed when no signature of role root or cascade matched: an
    event its parser rates error or critical that no signature knows (a gap in the catalog; what
    the catalog calls context is no failure), a non-zero exit code or signal, the launcher
    restarting its workers, a scheduler state other than completed/running/pending, or an Xid that
    is no mere notice (nor one the driver reports as recovered). None when nothing does (a warning
    line, context-only signals, INFO chatter and steps are no failure)."""
    if ae.is_empty():
        return None
    unknown_errors = ae.filter(pl.col("severity").is_in(["error", "critical"])
                               & ~pl.col("event_id").is_in(aj["event_id"].implode()))
    if not unknown_errors.is_empty():
        r = unknown_errors.sort("ts", "event_id", nulls_last=True).row(0, named=True)
        return f"{r['kind']} at {r['path']}:{r['line_no']}"
    codes = ae.filter(pl.col("kind").is_in(EXIT_KINDS)).with_columns(
        pl.col("code").cast(pl.Int64, strict=False).alias("_c")).filter(pl.col("_c").is_not_null() & (pl.col("_c") != 0))
    if not codes.is_empty():
        return f"exit code {codes['_c'][0]} ({codes['path'][0]}:{codes['line_no'][0]})"
    if exits is not None and not exits.is_empty():
        mine = exits.join(ae.select("file_id", "line_no", "path"), on=["file_id", "line_no"], how="inner")
        bad = mine.filter((pl.col("exitcode").is_not_null() & (pl.col("exitcode") != 0)) | pl.col("signal").is_not_null())
        if not bad.is_empty():
            r = bad.row(0, named=True)
            what = f"exit code {r['exitcode']}" if r["exitcode"] is not None else f"signal {r['signal']}"
            return f"{what} ({r['path']}:{r['line_no']})"
    restarts = ae.filter(pl.col("kind") == "restart")
    if not restarts.is_empty():
        return f"the launcher restarted its workers ({restarts['path'][0]}:{restarts['line_no'][0]})"
    sched = ae.filter((pl.col("kind") == "sched_state") & pl.col("code").is_not_null()).filter(
        ~pl.any_horizontal([pl.col("code").str.to_uppercase().str.starts_with(ok) for ok in SCHED_OK]))
    if not sched.is_empty():
        return f"scheduler state {sched['code'][0]} ({sched['path'][0]}:{sched['line_no'][0]})"
    # an Xid the driver reports as recovered (precedence.toml [no_failure]: a Nonfatal NVLink5 event) is no failure
    recovered = aj.filter(pl.col("signature").is_in(list(prec.no_failure)))["event_id"].implode()
    xids = ae.filter(pl.col("kind").is_in(["xid", "dcgm_xid"]) & pl.col("code").is_in(list(_severe_xids()))
                     & ~pl.col("event_id").is_in(recovered))
    if not xids.is_empty():
        return f"Xid {xids['code'][0]} ({xids['path'][0]}:{xids['line_no'][0]})"
    return None


def _first_dead(aj: pl.DataFrame, ae: pl.DataFrame, rmap: pl.DataFrame, prec: Precedence
                ) -> tuple[tuple[str | None, int | None, int | None, str | None], str] | None:
    """The culprit of a verdict no signal explains (precedence.toml [first_dead]): the earliest process a
    launcher reports killed (host and/or rank known), with the note saying so; None when no launcher names one."""
    dead = aj.filter(pl.col("signature").is_in(list(prec.first_dead))
                     & (pl.col("host").is_not_null() | pl.col("rank").is_not_null()))
    if dead.is_empty():
        return None
    d = dead.sort("ts", "event_id", nulls_last=True).row(0, named=True)
    who = _fill_culprit(d, rmap, set(ae["host"].drop_nulls().to_list()))
    return who, (f"the launcher names the process that died first ({d['path']}:{d['line_no']}): host {who[0]}, "
                 f"rank {who[1]}; what killed it is not in the logs read")


def _attribute_attempt(i: int, a: dict, aj: pl.DataFrame, ae: pl.DataFrame, tmo: pl.DataFrame | None,
                       rmap: pl.DataFrame, ip_host: dict[str, str], sources_present: set[str],
                       exits: pl.DataFrame | None = None, is_last: bool = False) -> Interruption | None:
    prec = load_precedence()
    roots = aj.filter(pl.col("role") == "root")
    cascades = aj.filter(pl.col("role") == "cascade")
    node_only = not ae.is_empty() and bool(ae["source"].is_in(NODE_SOURCES).all())
    root, notes = _pick_root(roots, _exit_times(ae), a, prec, node_only)
    graph_decided = False
    hang_signals = cascades.filter(pl.col("signature").is_in(list(prec.hang_signals)))
    teardown_only = False
    exit_hang = False
    if root is None and cascades.is_empty():
        if ae.is_empty():
            return None
        seen = _failure_seen(ae, aj, exits, prec)
        if seen is None and is_last:
            return None  # the logs end without a failure: no interruption (the verdict may be `none`)
        category = "unknown"
        time = a["end"]
        host = rank = gpu = pci = None
        summary = (f"A failure was seen ({seen}) but no recognised signal names its cause" if seen else
                   "The attempt ended without any recognised failure signal, and the job was restarted")
        if (dead := _first_dead(aj, ae, rmap, prec)) is not None:
            (host, rank, gpu, pci), note = dead
            notes.append(note)
        conf = 0.3
        root_code = None
    elif root is None:
        desync = _desync(tmo)
        report = _desync_report(ae)
        lone = None
        why_lone = ""
        if report is not None and len(report[1]) == 1:
            lone = report[1][0]
            why_lone = (f"the desync report ({report[2]['path']}:{report[2]['line_no']}) names rank {lone} as "
                        + ("never joining the collective the others wait in" if report[0] == "not_joined"
                           else "stuck inside the collective the others finished"))
        if desync:
            category = "collective_desync"
            summary = f"Collective desync: {desync[0]}"
            lone = desync[1] if desync[1] is not None else lone
            conf = 0.7
        elif report is not None and report[0] == "not_joined":
            category = "collective_desync"
            names = ", ".join(str(r) for r in report[1])
            summary = (f"Collective desync: rank{'s' if len(report[1]) > 1 else ''} {names} never joined the "
                       f"collective the other ranks timed out in (desync report, {report[2]['path']}:"
                       f"{report[2]['line_no']})")
            why_lone = ""  # the summary already says it
            conf = 0.7
        elif not hang_signals.is_empty() and (prep := _preprocessing_wait(ae, prec)) is not None:
            category = prec.preproc_category
            summary = (f"Collective timed out before training started while one rank was still preparing data "
                       f"({prep['path']}:{prep['line_no']}): the other ranks waited past the timeout for it")
            conf = 0.6
        elif not hang_signals.is_empty() and (ex := _exit_wait(ae, hang_signals, prec)) is not None:
            category = prec.exit_category
            summary = (f"Collective watchdog fired after the job's processes began exiting without destroying their "
                       f"process groups ({ex['path']}:{ex['line_no']}): the work was done, the exit hung in the "
                       "process-group teardown")
            conf = 0.6
            exit_hang = True
        elif not hang_signals.is_empty():
            category = "comm_hang_unknown"
            summary = ("Communication hang: collectives timed out and no root event was found"
                       if not hang_signals["signature"].str.starts_with("pyspy-").all() else
                       "Communication hang: a stack dump shows the process waiting in a collective or on the GPU, "
                       "and no root event was found")
            conf = 0.6
        elif cascades.filter(~pl.col("signature").is_in(list(prec.teardown))).is_empty():
            first = cascades.sort("ts", "event_id", nulls_last=True).row(0, named=True)
            category = "unknown"
            summary = (f"Only teardown was seen ({first['summary']}, {first['path']}:{first['line_no']}): "
                       "the cause of the failure is not in the logs read")
            # a hint that names a category but proves none (a worker SIGKILLed: OOM killer, cgroup or a
            # hard kill) says more to a reader than the launcher's SIGTERM to the others: said beside it
            hint = aj.filter((pl.col("role") == "context") & ~pl.col("category").is_in(["unknown", "none"])
                             & pl.col("severity").is_in(["warning", "error", "critical"]))
            if not hint.is_empty():
                h = hint.sort("ts", "event_id", nulls_last=True).row(0, named=True)
                summary += f"; also seen, not proof: {h['summary']} ({h['path']}:{h['line_no']})"
            conf = 0.3
            teardown_only = True
        else:
            first = cascades.filter(~pl.col("signature").is_in(list(prec.teardown))).sort(
                "ts", "event_id", nulls_last=True).row(0, named=True)
            category = first["category"]
            summary = f"Only symptoms found: {first['summary']}"
            conf = 0.35
        lag, why = (lone, why_lone) if lone is not None else _lagging_rank(ae, tmo, rmap)
        host = gpu = pci = None
        rank = lag
        if lag is not None:
            host, rank, gpu, pci = _fill_culprit({"rank": lag}, rmap, set(ae["host"].drop_nulls().to_list()))
            if why:
                summary += f"; {why}"
        g = _graph_culprit(aj, ip_host, rmap, prec) if category != "collective_desync" else None
        if g is not None and g.host is not None:
            if g.host != host:  # what the peers report outranks a lagging rank elsewhere
                host, rank, gpu, pci = g.host, None, None, None
            summary += f"; culprit {g.host}: {g.rule}"
            graph_decided = True
        if teardown_only and host is None and rank is None and (dead := _first_dead(aj, ae, rmap, prec)) is not None:
            (host, rank, gpu, pci), note = dead
            notes.append(note)
        first_c = cascades.sort("ts", "event_id", nulls_last=True)
        time = first_c["ts"].drop_nulls().min() if not first_c.is_empty() else a["end"]
        root_code = None
    else:
        category = root["category"]
        time = root["ts"]
        seen_hosts = set(ae["host"].drop_nulls().to_list())
        host, rank, gpu, pci = _fill_culprit(root, rmap, seen_hosts)
        summary = root["summary"]
        root_code = root["code"]
        if host is None and rank is None and gpu is None and pci is None:
            sib = _sibling_location(root, roots)
            if sib is not None:
                host, rank, gpu, pci = _fill_culprit(sib, rmap, seen_hosts)
                notes.append(f"located by {sib['signature']} at {sib['path']}:{sib['line_no']}")
        server = _netfs_server(root, ip_host)
        if server is not None:
            # A network filesystem client reports its server silent (parsers/kernel.py NETFS_SERVER_RE):
            # the reporter is a victim, the host at fault is the server it names.
            if host is not None and host != server:
                notes.append(f"reported by the client {host}, which is not the culprit")
            host, rank, gpu, pci = server, None, None, None
        if category == "network_fabric":
            g = _graph_culprit(aj, ip_host, rmap, prec)
            if g is not None and g.host is not None:
                if g.host != host:
                    host, rank, gpu, pci = g.host, None, None, None
                summary += f"; culprit {g.host}: {g.rule}"
                graph_decided = True
            elif g is not None and g.unmapped:
                # The reporting host is a victim of a link or peer it names by address only:
                # do not blame it; say which address is suspect.
                notes.append(f"suspect peer address {', '.join(g.unmapped)} could not be mapped to a host "
                             "(no NCCL interface line for it)")
                host, rank, gpu, pci = None, None, None, None
        if root["signature"] in prec.outside_job and (host is not None or rank is not None):
            notes.append(f"{root['signature']} names a service outside the job; the reporting rank/host is not "
                         "the culprit")
            host, rank, gpu, pci = None, None, None, None
        if root["signature"] in prec.pair_report:
            odd = _pair_culprit(root, aj)
            if odd is None:
                if host is not None or rank is not None:
                    notes.append(f"{root['signature']} names two ranks that disagree; the reporting rank is not "
                                 "the culprit")
                host, rank, gpu, pci = None, None, None, None
            else:
                host, rank, gpu, pci = _fill_culprit({"rank": odd}, rmap, seen_hosts)
                notes.append(f"rank {odd} is the one rank every {root['signature']} report names")
        if category in prec.jobwide_categories and _jobwide(root, aj, prec):
            notes.append(f"every rank read reports {root['signature']}: a job-wide configuration fault, no culprit")
            host, rank, gpu, pci = None, None, None, None
        repeats = _app_fault_repeats(root, ae, aj, prec)
        if repeats >= prec.app_fault_processes:
            category = prec.app_fault_category
            where = "this GPU" if root.get("pci_bus_id") is not None else "this host"
            summary += (f"; it repeats on {where} across {repeats} different processes, so the GPU is suspect "
                        "rather than the code")
        if category == "comm_hang_unknown":
            desync = _desync(tmo)
            report = _desync_report(ae)
            if desync:
                category = "collective_desync"
                summary = f"Collective desync: {desync[0]}"
            elif report is not None and report[0] == "not_joined":
                category = "collective_desync"
                summary = (f"Collective desync: rank(s) {', '.join(str(r) for r in report[1])} never joined the "
                           f"collective (desync report, {report[2]['path']}:{report[2]['line_no']})")
        conf = min(0.95, 0.55 + 0.08 * int(root["weight"]))
        if root["ts_quality"] != "exact":
            conf -= 0.1
    # Teardown alone is a finding of the rules, not their silence: the cause is in no log read (a sibling
    # process, the scheduler, an operator). The incident classifier, which reads the same teardown lines,
    # has no more to go on and does not name a cause for it (b6app primerl1360: a launcher's SIGTERM after
    # another component crashed read as user_cancelled).
    category, conf, method = arbitrate(category, conf, None if teardown_only else classify_incident(aj, ae, a))
    cat = info(category)
    kind = cat.default_kind
    if (category in prec.may_hang and not hang_signals.is_empty() and not _process_failed(ae, aj)) or exit_hang:
        kind = "hang"
    action = cat.default_action
    if root is not None and category == root["category"]:
        action = prec.actions.get(root["signature"], action)
    missing = _missing(sources_present)
    if missing:
        conf -= 0.05 * len(missing)
    evidence_rows = _select_evidence(root, aj, host if graph_decided else None)
    return Interruption(
        id=f"a{i}", attempt=i, time=time, kind=kind, category=category, domain=cat.domain, action=action,
        auto_recoverable=action in AUTO_RECOVERABLE, recurring=False, culprit_host=host,
        culprit_rank=rank, culprit_gpu=gpu, culprit_pci_bus_id=pci, confidence=round(max(conf, 0.05), 2),
        method=method, summary=summary + ("" if not notes else " (" + "; ".join(notes) + ")"),
        missing_evidence=missing, evidence=evidence_rows, code=root_code,
    )


def _preprocessing_wait(ae: pl.DataFrame, prec: Precedence) -> dict | None:
    """precedence.toml [preprocessing_wait]: the attempt never logged a training step and shows one
    rank's data preparation still running; the last such line (the phase the others waited on)."""
    if not prec.preproc_kinds or ae.is_empty() or ae.filter(pl.col("kind") == "step").height:
        return None
    prep = ae.filter(pl.col("kind").is_in(list(prec.preproc_kinds)))
    if prec.preproc_codes:
        prep = prep.filter(pl.col("code").is_in(list(prec.preproc_codes)))
    if prep.is_empty():
        return None
    return prep.sort("line_no").row(-1, named=True)


def _exit_wait(ae: pl.DataFrame, hang_signals: pl.DataFrame, prec: Precedence) -> dict | None:
    """precedence.toml [exit_wait]: the first exit notice (a process tearing its groups down without
    destroy_process_group) that comes before the attempt's first hang signal: by time where both are
    stamped, by line where both lie in one file and either is unstamped. None when no notice precedes
    the hang (the notice after it is the hung process's own abort, no evidence of an exit hang)."""
    if not prec.exit_kinds or ae.is_empty() or hang_signals.is_empty():
        return None
    ex = ae.filter(pl.col("kind").is_in(list(prec.exit_kinds)))
    if ex.is_empty():
        return None
    first = hang_signals.sort("ts", "event_id", nulls_last=True).row(0, named=True)
    for r in ex.sort("ts", "event_id", nulls_last=True).iter_rows(named=True):
        if r["ts"] is not None and first["ts"] is not None:
            if r["ts"] <= first["ts"]:
                return r
        elif r["path"] == first["path"] and r["line_no"] < first["line_no"]:
            return r
    return None


def _sibling_location(root: dict, roots: pl.DataFrame) -> dict | None:
    """A root that names no host, rank or GPU (an application's CUDA error string in a file with no
    host in its content or path) takes its location from the attempt's other root hits of the same
    category that do name one, when they all name the same place: the kernel's Xid for the same fault
    names the GPU (`NVRM: Xid (PCI:0000:41:00): 13, ...` beside `an illegal instruction was
    encountered`). Several places, or none: no location (unknown stays null)."""
    located = roots.filter((pl.col("category") == root["category"]) & (pl.col("event_id") != root["event_id"])
                           & (pl.col("host").is_not_null() | pl.col("pci_bus_id").is_not_null()
                              | pl.col("rank").is_not_null()))
    if located.is_empty() or located.select("host", "rank", "pci_bus_id").unique().height != 1:
        return None
    return located.sort("ts", "event_id", nulls_last=True).row(0, named=True)


def _netfs_server(root: dict, ip_host: dict[str, str]) -> str | None:
    """The server a network-filesystem client line names as not answering (the Linux RPC client's
    `<prog>: server <name> not responding`, the Solaris/BSD `NFS server <name> not responding`, a
    Lustre import's `Connection to <target> (at <addr>@<net>) was lost`), as a job host where an
    address of one is known, else as printed; None for any other root."""
    if root.get("kind") != "fs_error" or root.get("code") not in ("NFS_NOT_RESPONDING", "LUSTRE_LOST"):
        return None
    m = re.search(NETFS_SERVER_RE, root.get("message") or "")
    if m is None:
        return None
    name = (m.group(1) or m.group(2)).rstrip(",")
    return ip_host.get(name, name)


def _pair_culprit(root: dict, aj: pl.DataFrame) -> int | None:
    """The one rank named by every report of the root's signature in the attempt, when two or more
    distinct pairs are read (precedence.toml [pair_report]); None from one report, or none in common."""
    msgs = aj.filter(pl.col("signature") == root["signature"])["message"].drop_nulls().to_list()
    pairs = set()
    for m in msgs:
        hit = MISMATCH_PAIR_RE.search(m)
        if hit is not None:
            pairs.add(frozenset((int(hit.group(1)), int(hit.group(2)))))
    if len(pairs) < 2:
        return None
    common = frozenset.intersection(*pairs)
    return next(iter(common)) if len(common) == 1 else None


def _jobwide(root: dict, aj: pl.DataFrame, prec: Precedence) -> bool:
    """The root's signature is reported by `jobwide_ranks` or more distinct ranks, or hosts
    (precedence.toml [jobwide])."""
    same = aj.filter(pl.col("signature") == root["signature"])
    return (same["rank"].drop_nulls().n_unique() >= prec.jobwide_ranks
            or same["host"].drop_nulls().n_unique() >= prec.jobwide_ranks)


def _app_fault_repeats(root: dict, ae: pl.DataFrame, aj: pl.DataFrame, prec: Precedence) -> int:
    """Distinct processes that hit an application-class fault (precedence.toml app_fault_repeats):
    an application-class Xid on the root's GPU, or (a fault that names no GPU, such as a crash
    inside the GPU driver's library) the root's signature on the root's host."""
    if root["signature"] not in prec.app_fault_signatures:
        return 0
    if not root["signature"].startswith("xid-"):
        same = aj.filter((pl.col("signature") == root["signature"]) & pl.col("host").eq_missing(root.get("host")))
        return int(same["pid"].drop_nulls().n_unique())
    if root.get("pci_bus_id") is None:
        return 0
    codes = [s.removeprefix("xid-") for s in prec.app_fault_signatures if s.startswith("xid-")]
    same = ae.filter((pl.col("kind") == "xid") & pl.col("code").is_in(codes)
                     & (pl.col("pci_bus_id") == root["pci_bus_id"]) & pl.col("host").eq_missing(root.get("host")))
    return int(same["pid"].drop_nulls().n_unique())


def _process_failed(ae: pl.DataFrame, aj: pl.DataFrame) -> bool:
    """Some rank failed on its own: a root-role PyTorch/Python error (not the launcher's
    ChildFailedError, not a watchdog abort), or a positive exit code."""
    if aj.filter((pl.col("role") == "root") & (pl.col("source") == FRAMEWORK)).height:
        return True
    ex = ae.filter(pl.col("kind").is_in(["elastic_failure", "worker_failed", "launcher_exit"]))
    codes = ex["code"].cast(pl.Int64, strict=False).drop_nulls()
    return bool((codes > 0).any())


def _graph_culprit(aj: pl.DataFrame, ip_host: dict[str, str], rmap: pl.DataFrame, prec: Precedence) -> GraphCulprit | None:
    """The culprit graph over the attempt's root and cascade hits (forensics/peers.py)."""
    hits = aj.filter(pl.col("role").is_in(["root", "cascade"]))
    if hits.is_empty():
        return None
    rank_host: dict[int, str] = {}
    if not rmap.is_empty():
        for r, h in rmap.select("rank", "host").drop_nulls().unique().sort("rank", "host").iter_rows():
            rank_host.setdefault(int(r), h)
    hosts = set(aj["host"].drop_nulls().to_list()) | set(ip_host.values()) | set(rank_host.values())
    e = edges(hits, ip_host, rank_host, hosts)
    return decide(e, hits.filter(pl.col("role") == "root"), prec.many_peers, prec.many_reporters)


def _missing(sources_present: set[str]) -> list[str]:
    wanted = evidence_wanted()  # the sources whose spec says how a report names them
    return [desc for src, desc in wanted.items() if src not in sources_present]


def _select_evidence(root: dict | None, aj: pl.DataFrame, culprit_host: str | None = None) -> list[dict]:
    """The root, then (when the culprit graph named a host) that host's own first root hit (else its
    first cascade), then the
    earliest hit of each other signature, roots first, then two context lines."""
    if aj.is_empty():
        return []
    rows = []
    if root is not None:
        # the root event's row of the deciding signature: an event may also match a context one
        mine = aj.filter(pl.col("event_id") == root["event_id"])
        if root.get("signature") is not None:
            mine = mine.with_columns((pl.col("signature") != root["signature"]).alias("_o")).sort(
                "_o", maintain_order=True).drop("_o")
        rows.append(mine.head(1))
    if culprit_host is not None:
        own = aj.filter(pl.col("role").is_in(["root", "cascade"]) & (pl.col("host") == culprit_host))
        rows.append(own.with_columns((pl.col("role") != "root").alias("_c")).sort(
            "_c", "ts", "event_id", nulls_last=True).drop("_c").head(1))
    rest = aj.filter(pl.col("role").is_in(["root", "cascade"]))
    if root is not None:
        rest = rest.filter(pl.col("event_id") != root["event_id"])
    # the earliest hit of each signature, roots first
    rest = (rest.sort("ts", "event_id", nulls_last=True).group_by("signature", maintain_order=True).first()
            .with_columns((pl.col("role") == "root").alias("_r"))
            .sort(["_r", "ts", "event_id"], descending=[True, False, False], nulls_last=True).drop("_r"))
    rows.append(rest.head(MAX_EVIDENCE - len(rows)))
    ctx = aj.filter(pl.col("role") == "context").sort("ts", "event_id", nulls_last=True).group_by(
        "signature", maintain_order=True).first().head(2)
    rows.append(ctx)
    ev = pl.concat([r.select(aj.columns) for r in rows if not r.is_empty()]) if any(
        not r.is_empty() for r in rows) else aj.head(0)
    return _evidence_rows(ev.unique("event_id", maintain_order=True))


def _recurrence(inters: list[Interruption]) -> None:
    """The same host implicated again: hardware suspicion, exclude it. The same user error on
    consecutive attempts: a restart loop, stop and fix. Only the repeats are `recurring` (and take
    the recurrence's action); the first occurrence keeps its own. `inters` is in attempt order."""
    seen_hosts: set[str] = set()
    for x in inters:
        if x.culprit_host and x.domain in ("hardware", "network", "system_software"):
            if x.culprit_host in seen_hosts:
                x.recurring = True
                x.action = "exclude_node_and_restart"
            seen_hosts.add(x.culprit_host)
    for prev, cur in zip(inters, inters[1:], strict=False):
        if (cur.attempt is not None and prev.attempt is not None and cur.attempt == prev.attempt + 1
                and cur.domain == "user" and cur.category == prev.category and cur.code == prev.code):
            cur.recurring = True
            cur.action = "stop_and_fix"
