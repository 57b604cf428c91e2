"""Amazon SageMaker training-job status: the `SecondaryStatusTransitions` of DescribeTrainingJob as the
console's status-history table prints them (copied as cells joined by ` | ` or tabs):

    Stopping | Apr 12, 2022 08:51 UTC | Apr 12, 2022 08:54 UTC | Stopping the training job
    Uploading | Apr 12, 2022 08:54 UTC | - | Uploading generated training model

status | start | end (`-` while current) | status message; times as the console prints them
(`Apr 12, 2022 08:51 UTC`, seconds optional) or ISO 8601 as the API returns them. The statuses are the
API's `SecondaryStatus` values (SageMaker API reference, DescribeTrainingJob): Starting,
LaunchingMLInstances, PreparingTrainingStack, Downloading, DownloadingTrainingImage, Training,
Uploading, Updating, Pending, Restarting, Stopping, Stopped, Completed, Failed, Interrupted,
MaxRuntimeExceeded, MaxWaitTimeExceeded.

Rows in a state that ends or interrupts the job (Stopping, Stopped, Completed, Failed, Interrupted,
MaxRuntimeExceeded, MaxWaitTimeExceeded, Restarting) are `sched_state` events, code = the status as
printed, ts = the row's start; the in-progress rows are parsed and make no event.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.records import Extraction, ParseContext, empty_events, events_frame, line_host
from parsers.spec import ParserSpec
from parsers.timestamps import iso

IN_PROGRESS = ("Starting", "LaunchingMLInstances", "PreparingTrainingStack", "Downloading",
               "DownloadingTrainingImage", "Training", "Uploading", "Updating", "Pending")
TERMINAL = ("Stopping", "Stopped", "Completed", "Failed", "Interrupted", "MaxRuntimeExceeded",
            "MaxWaitTimeExceeded", "Restarting")
SEVERITY = {"Completed": "info", "Stopping": "warning", "Stopped": "warning", "Restarting": "warning",
            "Interrupted": "warning", "MaxRuntimeExceeded": "warning", "MaxWaitTimeExceeded": "warning",
            "Failed": "error"}
_TIME = r"[A-Z][a-z]{2} \d{1,2}, \d{4} \d\d:\d\d(?::\d\d)?(?: [A-Z]{2,5})?|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?"
_SEP = r"\s*(?:\||\t)\s*"
ROW_RE = (r"^\s*(?P<status>" + "|".join(IN_PROGRESS + TERMINAL) + r")" + _SEP + r"(?P<start>" + _TIME + r")"
          + _SEP + r"(?P<end>" + _TIME + r"|-)" + _SEP + r"(?P<msg>.*?)\s*$")
_TRIGGER = r"^\s*(?:" + "|".join(IN_PROGRESS + TERMINAL) + r")\s*(?:\||\t)"


def _time(raw: pl.Expr, ctx: ParseContext) -> pl.Expr:
    """Console `Apr 12, 2022 08:51 UTC` (UTC/GMT honoured, else the job's zone) or ISO 8601."""
    c = raw.str.extract_groups(r"^([A-Z][a-z]{2}) (\d{1,2}), (\d{4}) (\d\d:\d\d)(:\d\d)?(?: ([A-Z]{2,5}))?$")
    mon = c.struct.field("1").replace_strict(
        {m: f"{i + 1:02d}" for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep",
                                                  "Oct", "Nov", "Dec"])}, default=None)
    console = pl.concat_str([c.struct.field("3"), pl.lit("-"), mon, pl.lit("-"), c.struct.field("2").str.pad_start(2, "0"),
                             pl.lit(" "), c.struct.field("4"), c.struct.field("5").fill_null(":00"),
                             pl.when(c.struct.field("6").is_in(["UTC", "GMT"])).then(pl.lit("Z")).otherwise(pl.lit(""))])
    return iso(pl.coalesce(console, raw), ctx.tz)


def sniff(head: str) -> float:
    n = len(re.findall(r"(?m)" + ROW_RE, head))
    return 0.0 if n == 0 else 0.9


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    cand = lines.filter(b.str.contains(_TRIGGER))
    if cand.is_empty():
        return Extraction(events=empty_events())
    rec = cand.with_columns(b.str.extract_groups(ROW_RE).alias("_g")).filter(
        pl.col("_g").struct.field("status").is_not_null())
    status = pl.col("_g").struct.field("status")
    start = pl.col("_g").struct.field("start")
    ev = rec.filter(status.is_in(TERMINAL)).with_columns(_time(start, ctx).alias("ts")).select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("sched_state").alias("kind"), "ts", start.alias("ts_raw"),
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        line_host(ctx).alias("host"), status.replace_strict(SEVERITY, default="warning").alias("severity"),
        status.alias("code"), b.alias("message"))
    events = events_frame(ev) if not ev.is_empty() else empty_events()
    return Extraction(events=events, claimed=rec["line_no"].sort())


SPEC = ParserSpec(
    name="sagemaker",
    scope="job",
    description="Amazon SageMaker training-job status history (SecondaryStatusTransitions table)",
    formats=("SageMaker status history table (console / DescribeTrainingJob SecondaryStatusTransitions)",),
    kinds=("sched_state",),
    batch=True,  # no per-file state: many files' lines may be parsed in one frame
    trigger=_TRIGGER,
)
