"""`py-spy dump` output: the Python stacks of a running (usually stuck) process.

Format (benfred/py-spy `src/dump.rs` write_traces / write_trace, `src/stack_trace.rs` status_str and
format_threadid; 0.3 - 0.4):

    Process 307: /usr/bin/python -u train.py ...          (dump.rs: "Process {pid}: {cmdline}")
    Python v3.11.9 (/usr/bin/python3.11)                  (dump.rs: "Python v{version} ({exe})")
    Parent Process 12: ...                                (--subprocesses)
    Thread 3297 (active): "MainThread"                    ("Thread {tid}{ (status)}: \"{name}\"")
    Thread 0x7F3A2C5FF640 (idle): "Thread-1"              (no native id: the pthread id in hex)
    Thread 4076 (idle)                                    (no name)
        all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)    (innermost frame first)
        ncclAllReduce (collectives.cc:49)                 (--native)
            Arguments: / Locals: / name: repr             (--locals)

status is `idle`, `active`, `active+gil` (or `gil` when activity is not shown). Someone dumps a
process's stacks when it is stuck, so a thread whose innermost frame waits in a collective (a
torch.distributed / DeepSpeed comm / NCCL call) or on the GPU (torch.cuda.synchronize, a CUDA
stream/device/event synchronize) is the picture of a rank waiting on the others: event `pyspy_wait`
(code = `collective` | `cuda_sync`; message = the frame), on the frame's line (the evidence a person
would cite). A dump has no time stamps: the events' ts is null. Every header, thread, frame and
locals line of a dump is claimed.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import UTC_DT, Extraction, ParseContext, empty_events, events_frame, host_hint, rank_hint
from parsers.spec import ParserSpec

_THREAD_HEAD = r"^Thread (?:0x[0-9A-Fa-f]+|\d+)(?: \((?:idle|active\+gil|active|gil)\))?"  # `Thread 0x7f.. (idle)`
THREAD_RE = _THREAD_HEAD + r'(?:: ".*")?\s*$'
HEADER_RE = r"^(?:Process \d+: |Parent Process \d+: |Python v\d+\.\d+\S* \()"
FRAME_RE = r"^ {4}(?P<func>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$"
LOCALS_RE = r"^ {8}(?:Arguments:|Locals:|    \S)"
# innermost frames that wait on other ranks: the torch.distributed Python API and c10d's wrappers,
# DeepSpeed's comm layer, NCCL's own entry points and ProcessGroupNCCL (native frames)
COLLECTIVE = (r"torch/distributed/(?:distributed_c10d|c10d_logger)\.py|deepspeed/comm/"
              r"|^(?:nccl[A-Z]\w*|pnccl[A-Z]\w*) \(|c10d::ProcessGroupNCCL::")
# innermost frames that wait on the GPU
CUDA_SYNC = (r"^synchronize \(torch/cuda/(?:__init__|streams)\.py|^(?:cudaStreamSynchronize|cudaDeviceSynchronize"
             r"|cudaEventSynchronize|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize)\b")

# native frames of the C library's own waiting (a busy-wait's yield, a futex, a poll) under the frame that
# waits: skipped, the first frame above them decides (--native stacks: `sched_yield (libc.so.6)` on top of
# `ncclLaunchKernelBefore_NoUncapturedCuda (enqueue.cc:968)`)
SYSTEM_FRAME = (r"^(?:sched_yield|syscall|poll|ppoll|epoll_wait|nanosleep|clock_nanosleep|__\w+|futex\w*|pthread_\w+)"
                r" \(|\((?:libc[.-]|libpthread|ld-linux|libgcc_s)[^()]*\)$")

_TRIGGER = _THREAD_HEAD + r"(?::|\s*$)"


def sniff(head: str) -> float:
    return 0.5 if re.search(THREAD_RE, head, re.M) and re.search(r"^ {4}\S.* \([^()]*\)\s*$", head, re.M) else 0.0


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    b = pl.col("body")
    df = lines.select("line_no", "body").sort("line_no").with_columns(
        b.str.contains(ascii_classes(THREAD_RE)).alias("_thr"),
        b.str.contains(ascii_classes(HEADER_RE)).alias("_hdr"),
        b.str.contains(ascii_classes(FRAME_RE)).alias("_frm"),
        b.str.contains(ascii_classes(LOCALS_RE)).alias("_loc"),
    )
    if not df["_thr"].any():
        return Extraction(events=empty_events())
    # a dump block: a thread header and the frame / locals lines that follow it, contiguous
    blk = pl.col("_thr").cum_sum()
    df = df.with_columns(blk.alias("_blk"), (pl.col("_frm") | pl.col("_loc")).alias("_body"))
    # the run of frame/locals lines right after each header: a line belongs while every line between it
    # and its block's header is one too
    df = df.with_columns(
        (~pl.col("_body") & ~pl.col("_thr")).cast(pl.Int32).cum_sum().over("_blk").alias("_breaks"))
    in_dump = (pl.col("_blk") > 0) & (pl.col("_breaks") == 0)
    claimed_rows = df.filter(pl.col("_thr") | pl.col("_hdr") | (in_dump & pl.col("_body")))
    frames = df.filter(in_dump & pl.col("_frm")).with_columns(b.str.strip_chars().alias("_f"))
    frames = frames.filter(~pl.col("_f").str.contains(ascii_classes(SYSTEM_FRAME)))
    innermost = frames.group_by("_blk").agg(pl.col("line_no").min()).join(frames, on=["_blk", "line_no"])
    innermost = innermost.with_columns(
        pl.when(pl.col("_f").str.contains(ascii_classes(COLLECTIVE))).then(pl.lit("collective"))
        .when(pl.col("_f").str.contains(ascii_classes(CUDA_SYNC))).then(pl.lit("cuda_sync"))
        .otherwise(None).alias("code")
    ).filter(pl.col("code").is_not_null())
    if innermost.is_empty():
        return Extraction(events=empty_events(), claimed=claimed_rows["line_no"].sort())
    ev = innermost.select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("pyspy_wait").alias("kind"),
        pl.lit(None, dtype=UTC_DT).alias("ts"), pl.lit(None, dtype=pl.Utf8).alias("ts_raw"),
        pl.lit("missing").alias("ts_quality"), host_hint(ctx).alias("host"), rank_hint(ctx).alias("rank"),
        pl.lit("warning").alias("severity"), "code", pl.col("_f").alias("message"),
    )
    return Extraction(events=events_frame(ev), claimed=claimed_rows["line_no"].sort())


SPEC = ParserSpec(
    name="pyspy",
    scope="process",
    description="py-spy dump output: the Python (and native) stacks of a stuck process's threads",
    formats=("py-spy dump (text, with or without --native, --locals, --subprocesses)",),
    kinds=("pyspy_wait",),
    trigger=_TRIGGER,
)
