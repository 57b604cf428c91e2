"""NVIDIA Resiliency Extension (NVRx) and Megatron-LM straggler-detector lines.

The families, their format strings and the source lines they come from are in docs/nvrx.md. Read here:

- ft_launcher's rank monitors (`fault_tolerance/rank_monitor_server.py`): heartbeat and section
  timeouts, the hang detection of one rank. Three prefix eras name the rank (and host):
  `[WARNING] [RankMonitorServer:34] ...` (first releases), `[2025-03-02 12:10:44,918] [WARNING]
  [RankMonServer2211@node-07:3] ...` (v0.2-v0.7 RankMonitorLogger), and the `nvrx` logger's
  `2025-03-02 12:10:44,918 [WARNING] [node-07] [workload:3(3) infra:3(3)] file.py:N ...`; a
  `[Cycle N] ` may precede the message. -> `ft_timeout` (code heartbeat_initial | heartbeat | section
  | out_of_section), rank and host from the prefix.
- node health checks before a rendezvous / in the rank monitor (`ft_rendezvous_barrier.py`
  `_run_health_check`, `shared_utils/health_check.py`) and the launcher's UnhealthyNodeException ->
  `ft_unhealthy` (code gpu | nic | storage | node | nvlink | excluded; host from the message).
- the barrier rendezvous closing or NVRx deciding no restart -> `ft_rendezvous` (code
  max_nodes_exceeded | no_progress | attribution_stop | no_restart).
- restarts by ft_launcher that torchelastic's own line does not cover (`Joining cluster restart`,
  min-healthy `restart attempts left; restarting worker group`) and in-process restarts
  (`rank=N restart_ex: HealthCheckPassed()`) -> `restart` (an attempt boundary, forensics/timeline.py).
- in-process restart interruption records (`inprocess/attribution.py`): `Interruption.HARD_TIMEOUT
  affecting ranks {5}` (v0.4+), `Interruption.HARD_TIMEOUT on ranks={5}` / `ranks=[5]` (v0.2-v0.3)
  inside a `rank=N term_ex: RankShouldRestart(...)` line -> `inprocess_interruption` (code = the
  interruption; rank = the one rank affected, null when several); any other `rank=N fn_ex: ...` line
  (the rank's own exception) -> `inprocess_exception` (code = the exception type).
- straggler detection (`ptl_resiliency/straggler_det_callback.py`): `STRAGGLER DETECTION WARNING:
  ... Affected ranks: {StragglerId(rank=5, node='node-02')}` -> `straggler_flagged` (code relative |
  individual; rank and host = the first id; forensics/stragglers.py reads every id of the line), and
  the periodic `GPU relative/individual performance:` report and its `Rank=N Node=X Score=S` lines
  (claimed; one `straggler_report` event per report header, code = nvrx).
- Megatron-LM's StragglerDetector (`megatron/core/utils.py` report): the per-interval
  `MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: ...` line and its `^^^^ Bottom/Top N Ranks` lines ->
  `straggler_report` (code = megatron).
"""

from __future__ import annotations

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, events_frame, line_host, rank_hint
from parsers.spec import ParserSpec
from parsers.timestamps import iso

# the prefixes that name the rank monitor's rank (and host)
RM_NEW = r"RankMon\w*?\d*@([A-Za-z0-9._-]+):(\d+)\]"
RM_OLD = r"\[RankMonitorServer:(\d+)\]"
NVRX_LOGGER = r"\[([A-Za-z0-9._-]+)\] \[workload:(\d+)\("
TS_RE = r"^.{0,40}?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?)"  # [ts], ts, [NeMo W ts, INFO:x:[ts]

FT_TIMEOUT = (r"Did not get (initial|subsequent) heartbeat\. Waited [\d.]+ seconds"
              r"|Section '[^']*' has been open for [\d.]+ seconds\. Timeout is"
              r"|Was out of section for [\d.]+ seconds\. Timeout is")
FT_UNHEALTHY = (r"(GPU|NIC link state|Storage|Storage path|Node) health check failed for node"
                r"|Unexpected error during \w[\w ]* health check for node"
                r"|Agent \.run\(\) raised UnhealthyNodeException"
                r"|GPU \d+: (?:Requires (?:a reset|a node reboot|peer-to-peer traffic)|Operating at reduced capacity)"
                r"|NIC device \S+: Port state changed from \S+ to \S+\. Health check FAILED"
                r"|GPU \d+: NVL link \d+ is in DISABLED state"
                r"|is excluded from the training due to an user request")
FT_RDZV = (r"Maximum number of nodes \(\d+\) exceeded"
           r"|Progress tracker detected no progress across restarts"
           r"|Attribution recommended stopping the job"
           r"|NVRx decided the job must not be restarted"
           r"|Another launcher reported a no-restart decision")
FT_RESTART = (r"Joining cluster restart \(group_rank=\d+\)|\d+/\d+ restart attempts left; restarting worker group"
              r"|Worker group UNHEALTHY\. \d+/\d+ attempts left; will restart worker group"
              r"|rank=\d+ restart_ex: ")
INPROC_INT = r"Interruption\.([A-Z_]+) (?:affecting ranks \{([^}]*)\}|on ranks=[\[{]([^\]}]*)[\]}])"
INPROC_LOG = r"rank=(\d+) ((?:fn|other|init|health|finalize|exit|terminate|completion|abort)_ex): (\w+)"  # not term_ex/restart_ex (the restart itself)
STRAGGLER = r"STRAGGLER DETECTION WARNING: Some GPUs (have worse relative performance|performance dropped)\. Affected ranks:"
STRAGGLER_ID = r"StragglerId\(rank=(\d+), node='([^']*)'\)"
PTL_REPORT = r"^\s*GPU (?:relative|individual) performance:\s*$"
PTL_SCORE = r"^\s*(?:Rank=\d+ Node=\S* Score=[\d.]+|(?:Worst|Best) performing \d+/\d+ ranks:|Straggler report processing time: [\d.]+ sec\.)\s*$"
MEGATRON = r"MnRtt/Rnk: [\d.]+ms/\d+ \| MxRtt/Rnk: [\d.]+ms/\d+"
MEGATRON_MINMAX = r"\^\^\^\^ (?:Bottom|Top) +\d+ Ranks with (?:lowest|highest) +Etpt\(TF\):"

_TRIGGER = ("heartbeat. Waited", "has been open for", "out of section for", "health check", "UnhealthyNodeException",
            "GPU ", "NIC device", "Maximum number of nodes", "no progress across restarts", "Attribution recommended",
            "must not be restarted", "no-restart decision", "cluster restart", "restart attempts left",
            "Worker group UNHEALTHY", "_ex: ", "STRAGGLER DETECTION", "performance:", "Rank=", "performing ",
            "Straggler report", "MnRtt/Rnk", "^^^^ ", "excluded from the training")

# (kind, pattern, severity): the first that matches a line decides its kind
RULES: tuple[tuple[str, str, str], ...] = (
    ("ft_timeout", FT_TIMEOUT, "warning"),
    ("ft_unhealthy", FT_UNHEALTHY, "error"),
    ("ft_rendezvous", FT_RDZV, "error"),
    ("inprocess_interruption", r"rank=\d+ \w+_ex: .*" + INPROC_INT, "warning"),
    ("restart", FT_RESTART, "info"),
    ("inprocess_exception", INPROC_LOG, "error"),
    ("straggler_flagged", STRAGGLER, "warning"),
    ("straggler_report", PTL_REPORT + "|" + MEGATRON, "info"),
    ("", PTL_SCORE + "|" + MEGATRON_MINMAX, "info"),  # claimed, no event
)


# literals only one of these families prints (a sniff by substring: linear on any head)
SNIFF_LITERALS = ("Did not get initial heartbeat", "Did not get subsequent heartbeat", "has been open for",
                  "Was out of section for", "health check failed for node", "UnhealthyNodeException",
                  "Maximum number of nodes", "STRAGGLER DETECTION WARNING", "GPU relative performance:",
                  "GPU individual performance:", "MnRtt/Rnk:", "affecting ranks {", " on ranks=", "restart_ex: ",
                  "Joining cluster restart")


def sniff(head: str) -> float:
    return 0.5 if any(lit in head for lit in SNIFF_LITERALS) else 0.0


def _code(kind: str) -> pl.Expr:
    b = pl.col("body")
    if kind == "ft_timeout":
        return (pl.when(b.str.contains("Did not get initial")).then(pl.lit("heartbeat_initial"))
                .when(b.str.contains("Did not get subsequent")).then(pl.lit("heartbeat"))
                .when(b.str.contains("has been open for")).then(pl.lit("section"))
                .otherwise(pl.lit("out_of_section")))
    if kind == "ft_unhealthy":
        return (pl.when(b.str.contains(r"NVL link")).then(pl.lit("nvlink"))
                .when(b.str.contains(r"NIC")).then(pl.lit("nic"))
                .when(b.str.contains(r"Storage")).then(pl.lit("storage"))
                .when(b.str.contains(r"GPU")).then(pl.lit("gpu"))
                .when(b.str.contains(r"excluded from the training")).then(pl.lit("excluded"))
                .otherwise(pl.lit("node")))
    if kind == "ft_rendezvous":
        return (pl.when(b.str.contains("Maximum number of nodes")).then(pl.lit("max_nodes_exceeded"))
                .when(b.str.contains("no progress")).then(pl.lit("no_progress"))
                .when(b.str.contains("Attribution")).then(pl.lit("attribution_stop"))
                .otherwise(pl.lit("no_restart")))
    if kind == "inprocess_interruption":
        return b.str.extract(ascii_classes(INPROC_INT), 1)
    if kind == "inprocess_exception":
        return b.str.extract(ascii_classes(INPROC_LOG), 3)
    if kind == "straggler_flagged":
        return pl.when(b.str.contains("relative")).then(pl.lit("relative")).otherwise(pl.lit("individual"))
    if kind == "straggler_report":
        return pl.when(b.str.contains("MnRtt")).then(pl.lit("megatron")).otherwise(pl.lit("nvrx"))
    return pl.lit(None, dtype=pl.Utf8)


def _one_rank(group: int) -> pl.Expr:
    """The rank an interruption record names when it names exactly one (null for several)."""
    s = pl.col("body").str.extract(ascii_classes(INPROC_INT), group).str.strip_chars()
    return pl.when(s.str.contains(ascii_classes(r"^\d+$"))).then(s.cast(pl.Int64, strict=False)).otherwise(None)


def _rank_host(kind: str, ctx: ParseContext) -> tuple[pl.Expr, pl.Expr]:
    b = pl.col("body")
    host = pl.coalesce(b.str.extract(ascii_classes(RM_NEW), 1), b.str.extract(ascii_classes(NVRX_LOGGER), 1))
    rank = pl.coalesce(b.str.extract(ascii_classes(RM_NEW), 2), b.str.extract(ascii_classes(RM_OLD), 1),
                       b.str.extract(ascii_classes(NVRX_LOGGER), 2)).cast(pl.Int64, strict=False)
    if kind == "ft_unhealthy":
        host = pl.coalesce(b.str.extract(r"for node (\S+?):? ", 1), b.str.extract(r"Node (\S+) (?:has|is) ", 1), host)
    if kind == "inprocess_interruption":
        return pl.coalesce(_one_rank(2), _one_rank(3)), line_host(ctx)
    if kind == "inprocess_exception":
        rank = b.str.extract(ascii_classes(INPROC_LOG), 1).cast(pl.Int64, strict=False)
    if kind == "straggler_flagged":
        rank = b.str.extract(ascii_classes(STRAGGLER_ID), 1).cast(pl.Int64, strict=False)
        host = b.str.extract(ascii_classes(STRAGGLER_ID), 2)
    return pl.coalesce(rank, pl.col("prefix_rank"), rank_hint(ctx)), pl.coalesce(host, line_host(ctx))


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    cand = lines.filter(b.str.contains_any(list(_TRIGGER)))
    if cand.is_empty():
        return Extraction(events=empty_events())
    kind = pl.lit(None, dtype=pl.Utf8)
    for k, p, _ in reversed(RULES):
        kind = pl.when(b.str.contains(ascii_classes(p))).then(pl.lit(k)).otherwise(kind)
    cand = cand.with_columns(kind.alias("_kind")).filter(pl.col("_kind").is_not_null())
    if cand.is_empty():
        return Extraction(events=empty_events())
    raw = b.str.extract(ascii_classes(TS_RE), 1)
    parts = []
    for k, _, sev in RULES:
        if not k:
            continue
        sub = cand.filter(pl.col("_kind") == k)
        if sub.is_empty():
            continue
        rank, host = _rank_host(k, ctx)
        ts = pl.coalesce(iso(raw.str.replace(",", "."), ctx.tz), iso(pl.col("prefix_ts"), ctx.tz))
        parts.append(sub.with_columns(ts.alias("ts")).select(
            "line_no", pl.lit(SPEC.name).alias("source"), pl.lit(k).alias("kind"), "ts",
            pl.coalesce(raw, pl.col("prefix_ts")).alias("ts_raw"),
            pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
            host.alias("host"), rank.alias("rank"), pl.lit(sev).alias("severity"), _code(k).alias("code"),
            b.alias("message")))
    events = events_frame(pl.concat(parts, how="vertical_relaxed")) if parts else empty_events()
    return Extraction(events=events, claimed=cand["line_no"].sort())


SPEC = ParserSpec(
    name="nvrx",
    scope="process",
    description="NVIDIA Resiliency Extension (ft_launcher rank monitors, health checks, in-process restart, "
                "straggler detection) and Megatron-LM StragglerDetector lines",
    formats=("ft_launcher / rank monitor log lines (three prefix eras)", "NVRx in-process restart log_exc lines",
             "NVRx straggler detection reports and warnings", "Megatron-LM StragglerDetector min/max report"),
    kinds=("ft_timeout", "ft_unhealthy", "ft_rendezvous", "restart", "inprocess_interruption", "inprocess_exception",
           "straggler_flagged", "straggler_report"),
    batch=True,  # no per-file state
    trigger=_TRIGGER,
)
