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

The SageMaker Python SDK's `estimator.fit(logs=...)` prints the same transitions as it polls the job
(sagemaker/_utils.py `secondary_training_status_message`: `"{} {} - {}".format(<UTC time
%Y-%m-%d %H:%M:%S>, Status, StatusMessage)`):

    2019-04-09 21:42:19 Uploading - Uploading generated training model
    2019-04-09 21:42:25 Completed - Training job completed

read the same way (the time is UTC). When the job did not complete, the SDK raises with the job's
`FailureReason` (session.py `_check_job_status`: `Error for Training job <job>: Failed. Reason: <reason>`;
older SDKs `Error training <job>: Failed Reason: <reason>`; the API's JSON `"FailureReason": "<reason>"`).
SageMaker's reasons start with the error's type (SageMaker developer guide, "Troubleshoot training
jobs"; the SDK tests `"CapacityError" in reason`): `AlgorithmError:` (the training code or algorithm
exited non-zero; sagemaker-training's `ExecuteUserScriptError` with `ExitCode` / `ErrorMessage`),
`ClientError:` (the request or its resources: role, image, data location, limits), `InternalServerError:`
(SageMaker's own failure), `CapacityError:` (no instances of the type could be provisioned). A line
naming one is a `sched_failure` event, code = the type, and the line is claimed (a parsed line is never
also kept as an unparsed error line: tests/hostile/test_nothing_lost.py); an error the reason's text
carries is read where a parser of its own reads the same file (the pytorch parser, say). SageMaker's own
agent writes `Platform Error: <what>` into the algorithm's log (Pipe-mode input: `SageMaker pipe
channel timed out.`): a `sched_failure` event of code `PlatformError`.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
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
# the SDK's `<UTC time> <Status> - <StatusMessage>` lines
SDK_ROW_RE = (r"^\s*(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<status>" + "|".join(IN_PROGRESS + TERMINAL)
              + r") - (?P<msg>.*?)\s*$")
FAILURE_TYPES = ("AlgorithmError", "ClientError", "InternalServerError", "CapacityError")
FAILURE_RE = (r"(?:\bFailed\.? Reason: |\bFailureReason[\"']?\s*[:=]\s*[\"']?)(?P<ftype>" + "|".join(FAILURE_TYPES)
              + r"):")
PLATFORM_RE = r"\bPlatform Error: \S"
_TRIGGER = (r"^\s*(?:" + "|".join(IN_PROGRESS + TERMINAL) + r")\s*(?:\||\t)|^\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:"
            + "|".join(IN_PROGRESS + TERMINAL) + r") - |Reason[\"']?\s*[:=]\s*[\"']?(?:" + "|".join(FAILURE_TYPES)
            + r"):|Platform Error: ")


def _time(raw: pl.Expr, ctx: ParseContext) -> pl.Expr:
    """Console `Apr 12, 2022 08:51 UTC` (UTC/GMT honoured, else the job's zone) or ISO 8601."""
    c = raw.str.extract_groups(ascii_classes(r"^([A-Z][a-z]{2}) (\d{1,2}), (\d{4}) (\d\d:\d\d)(:\d\d)?(?: ([A-Z]{2,5}))?$"))
    mon = c.struct.field("1").replace_strict(
        {m: f"{i + 1:02d}" for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep",
                                                  "Oct", "Nov", "Dec"])}, default=None)
    console = pl.concat_str([c.struct.field("3"), pl.lit("-"), mon, pl.lit("-"), c.struct.field("2").str.pad_start(2, "0"),
                             pl.lit(" "), c.struct.field("4"), c.struct.field("5").fill_null(":00"),
                             pl.when(c.struct.field("6").is_in(["UTC", "GMT"])).then(pl.lit("Z")).otherwise(pl.lit(""))])
    return iso(pl.coalesce(console, raw), ctx.tz)


def sniff(head: str) -> float:
    n = len(re.findall(r"(?m)" + ROW_RE, head)) + len(re.findall(r"(?m)" + SDK_ROW_RE, head))
    if n:
        return 0.9
    return 0.6 if re.search(FAILURE_RE, head) or re.search(PLATFORM_RE, head) else 0.0


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    cand = lines.filter(b.str.contains(ascii_classes(_TRIGGER)))
    if cand.is_empty():
        return Extraction(events=empty_events())
    g, sg = pl.col("_g"), pl.col("_s")
    rec = cand.with_columns(b.str.extract_groups(ascii_classes(ROW_RE)).alias("_g"), b.str.extract_groups(ascii_classes(SDK_ROW_RE)).alias("_s"),
                            b.str.extract(ascii_classes(FAILURE_RE), 1).alias("_f"),
                            b.str.contains(ascii_classes(PLATFORM_RE)).alias("_p"))
    rows = rec.filter(g.struct.field("status").is_not_null() | sg.struct.field("status").is_not_null())
    status = pl.coalesce(g.struct.field("status"), sg.struct.field("status"))
    start = pl.coalesce(g.struct.field("start"), sg.struct.field("time"))
    # the SDK prints UTC (datetime.utcfromtimestamp) without a zone
    stamp = pl.when(g.struct.field("start").is_not_null()).then(_time(g.struct.field("start"), ctx)).otherwise(
        iso(sg.struct.field("time").str.replace(" ", "T") + "Z", ctx.tz))
    cols = ["line_no", "source", "kind", "ts", "ts_raw", "ts_quality", "host", "severity", "code", "message"]
    ev = rows.filter(status.is_in(TERMINAL)).with_columns(stamp.alias("ts")).select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("sched_state").alias("kind"), "ts", start.alias("ts_raw"),
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality"),
        line_host(ctx).alias("host"), status.replace_strict(SEVERITY, default="warning").alias("severity"),
        status.alias("code"), b.alias("message"))
    fail = rec.filter(pl.col("_f").is_not_null() | pl.col("_p")).select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("sched_failure").alias("kind"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("ts"), pl.lit(None, dtype=pl.Utf8).alias("ts_raw"),
        pl.lit("missing").alias("ts_quality"), line_host(ctx).alias("host"), pl.lit("error").alias("severity"),
        pl.coalesce(pl.col("_f"), pl.lit("PlatformError")).alias("code"), b.alias("message"))
    parts = [f.select(cols) for f in (ev, fail) if not f.is_empty()]
    events = events_frame(pl.concat(parts, how="vertical_relaxed")) if parts else empty_events()
    claimed = pl.concat([rows["line_no"], fail["line_no"]]).unique().sort()
    return Extraction(events=events, claimed=claimed)


SPEC = ParserSpec(
    name="sagemaker",
    scope="job",
    description="Amazon SageMaker training-job status history (SecondaryStatusTransitions table)",
    formats=("SageMaker status history table (console / DescribeTrainingJob SecondaryStatusTransitions)",
             "SageMaker Python SDK job status lines and FailureReason",),
    kinds=("sched_state", "sched_failure"),
    batch=True,  # no per-file state: many files' lines may be parsed in one frame
    trigger=_TRIGGER,
)
