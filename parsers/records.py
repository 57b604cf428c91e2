"""Shared record types for every parser: the event frame schema, typed-table schemas,
the parse context handed to a parser and the extraction it returns.

This is the one leaf module that `forensics` may import from `parsers` for types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

import polars as pl

UTC_DT = pl.Datetime("us", "UTC")

# One row per meaningful record from any source (DESIGN §4). `event_id` and `file_id` are
# added by the store; parsers fill the rest (unknown values stay null).
EVENT_SCHEMA: dict[str, pl.DataType] = {
    "line_no": pl.Int64,  # 1-based, as editors show it
    "source": pl.Utf8,  # parser name: kernel, nccl, pytorch, elastic, steps, dcgm, sacct, slurm
    "kind": pl.Utf8,  # e.g. xid, nccl_warn, watchdog_timeout, traceback, step, checkpoint
    "ts": UTC_DT,
    "ts_raw": pl.Utf8,
    "ts_quality": pl.Utf8,  # exact | derived | relative | missing
    "host": pl.Utf8,
    "rank": pl.Int64,
    "local_rank": pl.Int64,
    "gpu": pl.Int64,  # CUDA device ordinal / DCGM gpu index when known
    "pci_bus_id": pl.Utf8,  # normalized "0000:3b:00" (domain:bus:device, lowercase)
    "pid": pl.Int64,
    "severity": pl.Utf8,  # info | warning | error | critical
    "code": pl.Utf8,  # xid number, exit code, ibv status, ... as text
    "message": pl.Utf8,  # the line's text (launcher prefix removed)
}

# Typed tables. Every row carries `line_no` (0 when it summarises a whole file).
TABLE_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "xid_events": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "pci_bus_id": pl.Utf8,
        "xid": pl.Int64, "pid": pl.Int64, "proc_name": pl.Utf8, "gpu_instance": pl.Int64,
        "caused_by_xid": pl.Int64, "body": pl.Utf8,
    },
    "nccl_comms": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "pid": pl.Int64, "event": pl.Utf8,
        "comm_ptr": pl.Utf8, "rank": pl.Int64, "nranks": pl.Int64, "cuda_dev": pl.Int64,
        "nvml_dev": pl.Int64, "bus_id": pl.Utf8, "pci_bus_id": pl.Utf8, "comm_id": pl.Utf8,
    },
    "nccl_errors": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "pid": pl.Int64, "gpu": pl.Int64,
        "kind": pl.Utf8, "status": pl.Int64, "vendor_err": pl.Int64, "peer_ip": pl.Utf8,
        "peer_port": pl.Int64, "hca": pl.Utf8, "result": pl.Int64, "text": pl.Utf8,
    },
    "collective_timeouts": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "rank": pl.Int64, "pg": pl.Utf8,
        "seq": pl.Int64, "op_type": pl.Utf8, "numel_in": pl.Int64, "numel_out": pl.Int64,
        "timeout_ms": pl.Int64, "ran_for_ms": pl.Int64, "last_enqueued": pl.Int64,
        "last_completed": pl.Int64,
    },
    "train_steps": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "rank": pl.Int64, "framework": pl.Utf8,
        "step": pl.Int64, "total_steps": pl.Int64, "step_time_s": pl.Float64, "loss": pl.Float64,
        "grad_norm": pl.Float64, "skipped": pl.Int64, "nan_iters": pl.Int64,
        "throughput": pl.Float64,
        "epoch": pl.Int64,  # the epoch as printed, where `step` counts within it (MXNet); else null
        # the part of `step_time_s` the loop itself says it waited on the data loader (mmcv `data_time`,
        # torchvision MetricLogger `data`, CenterNet `Data`); null where the line prints none
        "data_time_s": pl.Float64,
    },
    "checkpoints": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "rank": pl.Int64,
        "event": pl.Utf8,  # save_start | save_end | load_start | load_end | save_failed
        "step": pl.Int64, "duration_s": pl.Float64, "path": pl.Utf8,
    },
    "exits": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "rank": pl.Int64,
        "local_rank": pl.Int64, "pid": pl.Int64, "exitcode": pl.Int64, "signal": pl.Utf8,
        "origin": pl.Utf8,  # elastic | deepspeed | slurm | k8s | mpi
        "first_observed": pl.Boolean, "error_file": pl.Utf8, "message": pl.Utf8,
    },
    "pod_nodes": {  # a Kubernetes pod and the node kubectl shows it on (parsers/k8s.py)
        "line_no": pl.Int64, "pod": pl.Utf8, "namespace": pl.Utf8, "node": pl.Utf8,
    },
    "dcgm_samples": {
        "line_no": pl.Int64, "ts": UTC_DT, "host": pl.Utf8, "gpu": pl.Int64, "uuid": pl.Utf8,
        "pci_bus_id": pl.Utf8, "field": pl.Utf8, "value": pl.Float64,
    },
    "sched_records": {
        "line_no": pl.Int64, "job_id": pl.Utf8, "step_id": pl.Utf8, "name": pl.Utf8,
        "state": pl.Utf8, "exit_code": pl.Int64, "signal": pl.Int64, "start": UTC_DT,
        "end": UTC_DT, "node_list": pl.Utf8, "failed_node": pl.Utf8, "restarts": pl.Int64,
        "reason": pl.Utf8,
    },
}

SEVERITIES = ("info", "warning", "error", "critical")


@dataclass(frozen=True)
class ParseContext:
    """What a parser may know about a file besides its content."""

    path: str  # relative to the job directory, '/'-separated
    host_hint: str | None = None  # from the path (node-017/, dmesg.node-3.log)
    rank_hint: int | None = None  # from the path (rank12.log)
    ref_year: int | None = None  # year for stamps that carry none (syslog, glog)
    tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))  # zone of naive stamps
    boot_times: dict[str, datetime] = field(default_factory=dict)  # host -> boot time (UTC)
    # Batched: the lines of many files in one frame (forensics/bulk.py). The per-file hints are
    # then the columns `hint_host`, `hint_rank` and `hint_file` of the lines frame, and state that
    # a parser keys on (host:pid, runs of lines) must also be keyed on `hint_file`.
    batched: bool = False


def host_hint(ctx: ParseContext) -> pl.Expr:
    """The host the file's path names (a literal; the `hint_host` column when batched)."""
    return pl.col("hint_host") if ctx.batched else pl.lit(ctx.host_hint, dtype=pl.Utf8)


def line_host(ctx: ParseContext) -> pl.Expr:
    """The host a line's wrapper names (`prefix_host`: pdsh host, Ray ip, kubectl pod; see
    `parsers.prefixes`), else the path's (`host_hint`). What the content says comes before both."""
    return pl.coalesce(pl.col("prefix_host"), host_hint(ctx))


def rank_hint(ctx: ParseContext) -> pl.Expr:
    """The rank the file's path names (a literal; the `hint_rank` column when batched)."""
    return pl.col("hint_rank") if ctx.batched else pl.lit(ctx.rank_hint, dtype=pl.Int64)


def file_keys(ctx: ParseContext) -> list[str]:
    """Extra group/join keys that keep per-file state apart when many files are parsed at once."""
    return ["hint_file"] if ctx.batched else []


@dataclass
class Extraction:
    """What one parser got out of (part of) a file.

    `claimed` are the line numbers this parser parsed (including continuation lines absorbed
    into a multi-line record); `ignored` are lines it recognised and deliberately dropped
    (e.g. NCCL INFO chatter). A line in neither is unparsed, unless another parser claims it.
    """

    events: pl.DataFrame
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    claimed: pl.Series = field(default_factory=lambda: pl.Series("line_no", [], dtype=pl.Int64))
    ignored: pl.Series = field(default_factory=lambda: pl.Series("line_no", [], dtype=pl.Int64))
    warnings: list[str] = field(default_factory=list)


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_SCHEMA)


def empty_table(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=TABLE_SCHEMAS[name])


def own_strings(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with its text columns copied into buffers of their own: a filtered or grouped text
    column shares the buffers of the frame it came from, which would keep every such frame (a
    block, a chunk) in memory while the part is kept."""
    cols = [c for c, t in df.schema.items() if t == pl.Utf8]
    return df.with_columns([pl.concat_str([pl.col(c), pl.lit("")]).alias(c) for c in cols]) if cols else df


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Select/cast `df` to exactly `schema`: missing columns become typed nulls."""
    cols = []
    for name, dtype in schema.items():
        if name in df.columns:
            cols.append(pl.col(name).cast(dtype, strict=False).alias(name))
        else:
            cols.append(pl.lit(None, dtype=dtype).alias(name))
    # the row index keeps literal-only selections at the frame's height (also 0 rows)
    return df.with_row_index("__row").select([pl.col("__row"), *cols]).drop("__row")


def events_frame(df: pl.DataFrame) -> pl.DataFrame:
    return conform(df, EVENT_SCHEMA)


def table_frame(name: str, df: pl.DataFrame) -> pl.DataFrame:
    return conform(df, TABLE_SCHEMAS[name])


def normalize_pci(expr: pl.Expr) -> pl.Expr:
    """'00000000:3B:00.0' / '0000:3b:00' / '3b:00.0' -> '0000:3b:00' (domain:bus:device)."""
    s = expr.str.to_lowercase().str.strip_chars()
    # drop the function
    s = s.str.replace(r"\.[0-9a-f]$", "")
    parts = s.str.extract_groups(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})$")
    dom = parts.struct.field("1").fill_null("0")
    dom = dom.str.slice(-4).str.pad_start(4, "0")
    return (
        pl.when(parts.struct.field("2").is_not_null())
        .then(
            pl.concat_str(
                [dom, parts.struct.field("2").str.pad_start(2, "0"),
                 parts.struct.field("3").str.pad_start(2, "0")],
                separator=":",
            )
        )
        .otherwise(None)
    )


def nccl_busid_to_pci(expr: pl.Expr) -> pl.Expr:
    """NCCL busId '18000' / '7000' / '1b000' (hex, no 0x) -> '0000:18:00'."""
    s = expr.str.to_lowercase().str.pad_start(5, "0")
    bus = s.str.slice(-5, 2)
    dev = s.str.slice(-3, 2)
    dom = pl.when(s.str.len_chars() > 5).then(s.str.slice(0, s.str.len_chars() - 5)).otherwise(pl.lit("0"))
    return pl.concat_str([dom.str.pad_start(4, "0"), bus, dev], separator=":")
