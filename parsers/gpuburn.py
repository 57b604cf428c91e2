"""GPU burn-in tests' console output: wilicc/gpu-burn (`gpu_burn`) and huggingface/gpu-fryer, the
stress tests users run on a node after a training job failed on it (or before letting jobs on it).

gpu_burn (github:wilicc/gpu-burn gpu_burn-drv.cpp, 2018 .. 2025): one child per GPU multiplies
matrices and compares the results; the parent prints

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)                              (the device listing)
    Initialized device 0 with 81008 MB of memory (80540 MB available, using 72486 MB of it), using FLOATS
    Results are 268435456 bytes each, thus performing 280 iterations
    10.0%  proc'd: 3360 (52150 Gflop/s) - 3080 (51812 Gflop/s)   errors: 0 - 0   temps: 45 C - 47 C
            Summary at:   Tue Nov 19 02:52:36 PM PST 2024
    Killing processes with SIGTERM (soft kill)      (older: `Killing processes.. done`)
    Tested 2 GPUs:
            GPU 0: OK
            GPU 1: FAULTY

The progress line's `errors:` field has one count per GPU, `%d  (DIED!)` where the child died (its
calcs are -1: it failed to init, or a CUDA call failed while computing) and `%d  (WARNING!)` where
the comparison found wrong elements; a GPU with wrong elements is `FAULTY` in the final table. A
child that fails prints `Couldn't init a GPU test: <what>` / `Failure during compute: <what>`, the
what being gpu_burn's checkError text `Error in <call> (<file>:<line>): <cuGetErrorString>` (or
`Error (<file>:<line>): ...`): left unclaimed, those lines reach the CUDA signatures as error lines.
When every child is dead it ends with `No clients are alive!  Aborting`.

gpu-fryer (github:huggingface/gpu-fryer src/logging.rs, src/main.rs, 2025 .. 2026): `Detected GPU
#0: "NVIDIA H100 80GB HBM3" (...)`, `Using precision(s):  BF16`, `GPU #0: Using 72504 MB`, progress
lines `761 (836728 Gflops/s) - 0 (0 Gflops/s) | Temperatures: 46°C - 32°C | Throttling: None - None`,
then per GPU `GPU #0:   4444 Gflops/s (min: ..., max: ..., dev: ...)`, `Temperature: ...`,
`Throttling HW: false, Thermal SW: false, Thermal HW: false`, and the verdict: `All GPUs seem
healthy`, or `Some GPUs are not healthy. Reasons:` with one `  - GPU <n> - <reason>` line per problem
(BadResultReasons: `GPU is throttled. Check the throttling reasons and temperatures`, `GPU is not
performing as expected. Check the flops values and temperatures`, `GPU reported 0 FLOPS, meaning it
did not do any work. Check the GPU state for any XID errors and reset the GPU if needed`) and
`Error: Some GPUs are not healthy` on stderr.

Events (kind `burn_result`, gpu = the test's GPU index, no time stamp): code `FAULTY` (gpu_burn's
table), `errors` (a progress line's `(WARNING!)` count, first per GPU), `DIED` (a progress line's
`(DIED!)`, first per GPU), `aborted` (`No clients are alive!`), and gpu-fryer's `throttled`,
`low_flops`, `zero_flops`. Every other line above is claimed without an event: a healthy run gives none.
"""

from __future__ import annotations

import re

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import Extraction, ParseContext, empty_events, events_frame, line_host
from parsers.spec import ParserSpec

# gpu_burn
PROGRESS_RE = r"^\s*\d+(?:\.\d+)?%\s+proc'd: .*?\berrors: (?P<errs>.*?)\s+temps: "
LISTING_RE = r"^\s*GPU \d+: .+ \(UUID: GPU-[0-9a-fA-F-]+\)\s*$"
RESULT_RE = r"^\s*GPU (?P<gpu>\d+): (?P<res>OK|FAULTY)\s*$"
ABORT_RE = r"^\s*No clients are alive!\s+Aborting\s*$"
BURN_INFO_RE = (r"^\s*(?:Initialized device \d+ with \d+ MB of memory|Results are \d+ bytes each, thus performing \d+ "
                r"iterations|(?:Run length not specified in the command line\.\s*)?(?:Using compare file: \S+"
                r"|Burning for \d+ sec(?:ond)?s\.?)|Run length not specified in the command line\."
                r"|Summary at:\s|Tested \d+ GPUs:\s*$|Killing processes(?: with SIG(?:TERM|KILL) \((?:soft|force) kill\)"
                r"|\.\. done)\s*$|Freed memory for dev \d+\s*$|Uninitted cublas\s*$|done\s*$"
                r"|cuInit returned 0 \(no error\))")
# gpu-fryer
FRYER_PROBLEM_RE = (r"^\s*- GPU (?P<fgpu>\d+) - (?P<why>GPU is throttled\.|GPU is not performing as expected\."
                    r"|GPU reported 0 FLOPS)")
FRYER_INFO_RE = (r"^\s*(?:Detected GPU #\d+: |Using precision\(s\):|Creating random matrices\s*$|Matrices created\s*$"
                 r"|GPU #\d+: Using \d+ MB\s*$|\d+ \(\d+ Gflops/s\)(?: - \d+ \(\d+ Gflops/s\))* \| Temperatures: "
                 r"|GPU #\d+:\s+\d+ Gflops/s \(min: |Temperature: -?[\d.]+°C \(min: |Throttling HW: (?:true|false), "
                 r"Thermal SW: (?:true|false), Thermal HW: (?:true|false)\s*$|All GPUs seem healthy\s*$"
                 r"|Some GPUs are not healthy\. Reasons:\s*$|(?:Error: )?Some GPUs are not healthy\s*$"
                 r"|Freeing GPUs\.\.\.\s*$)")
WHY_CODE = {"GPU is throttled.": "throttled", "GPU is not performing as expected.": "low_flops",
            "GPU reported 0 FLOPS": "zero_flops"}
_TRIGGER = ("proc'd: ", "Tested ", "No clients are alive", "Gflops/s", "GPUs seem healthy", "GPUs are not healthy",
            "Burning for ", "Initialized device ")
# Every head `sniff` scores above 0 holds one of these
SNIFF_NEEDS = tuple((w, False) for w in _TRIGGER)
_SNIFF_STRONG = re.compile(r"(?m)proc'd: .*errors: .*temps: |^\s*Tested \d+ GPUs:\s*$|^\s*GPU \d+: (?:OK|FAULTY)\s*$"
                           r"|No clients are alive!\s+Aborting|Gflops/s \(min: |\| Temperatures: .*\| Throttling: "
                           r"|^All GPUs seem healthy\s*$|^Some GPUs are not healthy")


def sniff(head: str) -> float:
    if not any(w in head for w in _TRIGGER):
        return 0.0
    n = len(_SNIFF_STRONG.findall(head))
    return 0.0 if n == 0 else 0.6 if n == 1 else 0.9


def _progress_events(df: pl.DataFrame) -> pl.DataFrame:
    """One row per GPU whose count in a progress line's `errors:` field is marked DIED or WARNING, at
    the first line that marks it so (gpu = its position in the field)."""
    p = df.filter(pl.col("_errs").is_not_null())
    if p.is_empty():
        return p.select("line_no", pl.lit(None, dtype=pl.Int64).alias("gpu"), pl.lit(None, dtype=pl.Utf8).alias("code"))
    # each GPU's cell is `%d ` plus ` (DIED!)` / ` (WARNING!)`, cells joined by `- ` (no space before the
    # dash after a note: `-524288000  (WARNING!)- 0`), so the cells are read as numbers with their note
    cells = (p.select("line_no", pl.col("_errs").str.extract_all(ascii_classes(r"-?\d+(?:\s*\((?:DIED|WARNING)!\))?")).alias("_c"))
             .with_columns(pl.int_ranges(0, pl.col("_c").list.len()).alias("gpu")).explode("_c", "gpu"))
    cells = cells.with_columns(
        pl.when(pl.col("_c").str.contains(r"\(DIED!\)")).then(pl.lit("DIED"))
        .when(pl.col("_c").str.contains(r"\(WARNING!\)")).then(pl.lit("errors")).alias("code"))
    return (cells.filter(pl.col("code").is_not_null()).sort("line_no")
            .group_by("gpu", "code", maintain_order=True).agg(pl.col("line_no").first())
            .select("line_no", pl.col("gpu").cast(pl.Int64), "code"))


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    if lines.is_empty():
        return Extraction(events=empty_events())
    b = pl.col("body") if "body" in lines.columns else pl.col("text")
    if not lines.select(b.str.contains_any(list(_TRIGGER)).any()).item():
        return Extraction(events=empty_events())  # the trigger: a frame with no such line gives nothing
    df = lines.select(
        "line_no", b.alias("b"),
        b.str.extract(ascii_classes(PROGRESS_RE), 1).alias("_errs"),
        b.str.extract_groups(ascii_classes(RESULT_RE)).alias("_r"),
        b.str.extract_groups(ascii_classes(FRYER_PROBLEM_RE)).alias("_f"),
        b.str.contains(ascii_classes(ABORT_RE)).alias("_abort"),
        (b.str.contains(ascii_classes(LISTING_RE)) | b.str.contains(ascii_classes(BURN_INFO_RE)) | b.str.contains(ascii_classes(FRYER_INFO_RE))).alias("_info"),
    ).unnest("_r", "_f")
    ours = df.filter(pl.col("_errs").is_not_null() | pl.col("res").is_not_null() | pl.col("why").is_not_null()
                     | pl.col("_abort") | pl.col("_info"))
    # the burn test's own structure must be there: a progress line, its result table, the abort, or
    # gpu-fryer's report lines (a lone `Initialized device` / `Burning for` line of another tool is not enough)
    strong = ours.filter(pl.col("_errs").is_not_null() | pl.col("res").is_not_null() | pl.col("why").is_not_null()
                         | pl.col("_abort") | pl.col("b").str.contains(ascii_classes(_SNIFF_STRONG.pattern.replace("(?m)", ""))))
    if strong.is_empty():
        return Extraction(events=empty_events())
    prog = _progress_events(ours)
    table = ours.filter(pl.col("res") == "FAULTY").select(
        "line_no", pl.col("gpu").cast(pl.Int64), pl.lit("FAULTY").alias("code"))
    fryer = ours.filter(pl.col("why").is_not_null()).select(
        "line_no", pl.col("fgpu").cast(pl.Int64).alias("gpu"), pl.col("why").replace_strict(WHY_CODE, default=None).alias("code"))
    abort = ours.filter(pl.col("_abort")).select(
        "line_no", pl.lit(None, dtype=pl.Int64).alias("gpu"), pl.lit("aborted").alias("code"))
    hits = pl.concat([prog, table, fryer, abort]).sort("line_no", "gpu", nulls_last=True)
    claimed = ours["line_no"].unique().sort()
    if hits.is_empty():
        return Extraction(events=empty_events(), claimed=claimed.clear(), ignored=claimed)
    msg = df.select("line_no", "b").join(
        lines.select("line_no", *[c for c in ("prefix_host",) if c in lines.columns]), on="line_no", how="left")
    if "prefix_host" not in msg.columns:
        msg = msg.with_columns(pl.lit(None, dtype=pl.Utf8).alias("prefix_host"))
    c = pl.col("code")
    ev = hits.join(msg, on="line_no", how="left").select(
        "line_no", pl.lit(SPEC.name).alias("source"), pl.lit("burn_result").alias("kind"),
        pl.lit("missing").alias("ts_quality"), line_host(ctx).alias("host"), "gpu",
        pl.when(c.is_in(["FAULTY", "errors", "zero_flops"])).then(pl.lit("error"))
        .otherwise(pl.lit("warning")).alias("severity"),
        "code", pl.col("b").alias("message"))
    events = events_frame(ev)
    hit_lines = events["line_no"].unique()
    return Extraction(events=events, claimed=hit_lines.sort(),
                      ignored=claimed.filter(~claimed.is_in(hit_lines.implode())).sort())


SPEC = ParserSpec(
    name="gpuburn",
    scope="node",
    description="GPU burn-in tests: gpu_burn (wilicc/gpu-burn) and gpu-fryer (huggingface) console output",
    formats=("gpu_burn stdout (device listing, progress lines, Tested N GPUs: OK / FAULTY)",
             "gpu-fryer report (per-GPU Gflops/s, throttling, All GPUs seem healthy / Some GPUs are not healthy)"),
    kinds=("burn_result",),
    trigger=_TRIGGER,
)
