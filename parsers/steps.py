"""Training step and checkpoint logs: Megatron-LM, NeMo, Hugging Face Trainer, DeepSpeed,
torchtitan, PyTorch Lightning progress bars and plain JSON lines (`shared/reference/step_logs.md`).

Output:
- `train_steps` rows (one per step line; `framework` = megatron | nemo | hf | deepspeed |
  torchtitan | lightning | jsonl) and `step` events (`code` = step number). A step whose loss
  is nan/inf (or grad norm), whose `number of nan iterations` > 0, or that skipped steps at a loss scale
  of 1 or less (Megatron), is a `warning` and adds a `nan` event: code `nan` (error) when no good step
  is logged after it in the file (the NaN persisted), `nan_recovered` (warning) when one is.
- `checkpoints` rows (`save_start | save_end | load_start | load_end | save_failed`) and
  `checkpoint_save_start` / `checkpoint_save_end` / `checkpoint_load` events (`code` = step).
  `save_failed` (NeMo `Removing unfinished checkpoint`) has a table row only: the event vocabulary
  has no kind for it.
- `requeue` events (`code` enabled | signal | requeuing | requeued | failed | sigterm_bypassed): a
  launcher's own requeue machinery at work (Lightning's SLURM auto-requeue: the job saves an hpc
  checkpoint at the requeue signal and requeues itself), evidence that a requeue resumes the run.
- `train_start` (`code` start | fresh) and `train_end` (`code` intentional | done | stopped |
  data_exhausted) events; `nan` events for fp16 dynamic-loss-scale skips as DeepSpeed, Megatron, apex
  and fairseq print them: `overflow` (warning: a skipped step during warm-up or an occasional spike,
  which loss scaling recovers from), `loss_scale_min` (error: the scale is at its floor -- new scale
  not below the attempted one, or at most 1; for fairseq, whose floor is 1e-4, at most 8e-4 -- or the
  minimum-loss-scale abort), `overflow_persistent`
  (error: a run of PERSISTENT_RUN or more skips that ends the file with nothing after it and has brought the
  scale within NEAR_FLOOR_HALVINGS halvings of the floor, or prints no scale; a trailing run still at a high
  scale is the scaler finding its level, a warning).

Decisions:
- Megatron timer blocks (`(min, max) time across ranks (ms):` and its variants) are claimed and
  produce no event. The `save-checkpoint` / `load-checkpoint` timer's max time becomes
  `duration_s` of the checkpoint row just before the block (save_end / load_end).
  Otherwise a save_end/load_end row without a duration gets end ts - start ts of its start row.
- HF Trainer log dicts carry no step. `step` is the tqdm `N/M [` on the same line when there is
  one, else `resume_step + k * logging_steps` where k counts loss dicts since the last
  `***** Running training *****` banner, `resume_step` is `Continuing training from global step N`
  and `logging_steps` comes from a `logging_steps=` (TrainingArguments repr) anywhere in the file.
  Without it logging_steps is taken as 1 and a warning is added.
- NeMo ProgressPrinter: `step` is the printed `global_step` (else the printed iteration), both
  0-based as printed; `total_steps` = printed maximum + 1.
- Lightning bars: `step` = `global_step=` when the bar shows it, else epoch * total + n
  (global batch index; `total_steps` null since the bar's total is per epoch). A bar tqdm cut at the
  terminal width (format_meter's `disp_trim(res, ncols)`: no closing `]`) is read the same.
- `throughput` is in the framework's own unit: Megatron TFLOP/s/GPU, DeepSpeed samples/s,
  torchtitan tokens/s per device (tps/wps), JSON `throughput`/`tps`/`tokens_per_sec`.
- torchtitan `step_time_s` is derived from consecutive step-line stamps (seconds / steps).
- Generic step reader (rules after the named frameworks, so a line a named rule reads keeps that
  reading): MXNet Speedometer, Keras progress, fairseq, DLLogger, TF Estimator, tqdm bars with a
  `loss=`, tacotron2 `Train loss N X Grad Norm G Ts/it`, FlagScale straggler report headers, and
  any line with a step counter (`step 120/5000`, `Iteration 7:`, `global_step=3`) followed within
  200 characters by a numeric loss or a per-step time (`0.84 s/step`, `290ms/step`, `1.05s/it`,
  `0.12 sec/batch`, `step_time=`); Horovod's examples' `Step #N\tLoss: X` and `Iter #N: X img/sec per GPU`
  (throughput in img/s per GPU). `framework` = mxnet | keras | fairseq | dllogger | tf | tqdm |
  flagscale | generic. Loops that time their own data-loader wait fill `data_time_s` beside `step_time_s`
  (both the loop's mean over its logging interval): OpenMMLab's mmcv / mmengine text loggers (`framework`
  mmcv; `Epoch [e][i/n]` / `Iter [i/n]`, `time:`, `data_time:`), torchvision's MetricLogger (`metriclogger`;
  `[ i/n]  eta: ..  time: T  data: D`, a row wrapped over lines takes its step from its head line) and
  CenterNet's progress bar (`centernet`; `|Data v(avg)s |Net avg s`: the Net mean is the step time). Checkpoint lines `Saving/Saved/Loading/Loaded checkpoint to/from P`, `saved
  step N in X s` have `framework` generic; fairseq's `Preparing to save checkpoint for epoch E @ U
  updates`, `Saved checkpoint P (epoch E @ U updates, ...) (writing took X seconds)` and `Loaded
  checkpoint P (epoch E @ U updates)` have `framework` fairseq (step = U).
- Keras: step = (E - 1) * batches + n from the last `Epoch E/T` line (lines before the first one
  belong to epoch E - 1 of the next), total_steps = T * batches. MXNet prints no epoch length: `step`
  is the batch within its epoch as printed (it restarts each epoch), `epoch` the printed epoch (a
  counter that goes back at a new epoch is no restart). fairseq `step` = num_updates,
  `step_time_s` = 1 / ups. TF LoggingTensorHook's `(Y sec)` covers the whole logging interval: no
  step time. fp16 `OVERFLOW! Skipping step` (apex, tacotron2) adds a `nan` event (`code` overflow).
"""

from __future__ import annotations

import re
from functools import cache

import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.lines import literal_regex
from parsers.records import (
    UTC_DT,
    Extraction,
    ParseContext,
    empty_events,
    empty_table,
    events_frame,
    table_frame,
)
from parsers.spec import ParserSpec
from parsers.timestamps import epoch_seconds, iso

NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|[Nn]a[Nn]|[Ii]nf(?:inity)?)"
STAMP = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"
# a step skipped by dynamic loss scaling, as each fp16 optimizer prints it (DeepSpeed's ZeRO stage2.py /
# stage3.py tagged it `[deepscale]` before 0.5, `[deepspeed]` since: `[deepscale] OVERFLOW! Rank 0 Skipping step.
# Attempted loss scale: 16.0, reducing to 8.0`)
OVERFLOW = (
    r"^(?:\[deep(?:speed|scale)\] )?(?:OVERFLOW! (?:Rank \d+ )?Skipping step|fp16 dynamic loss scale overflow! Skipping step"
    r"|Overflow detected\. Skipping step|Gradient overflow\.\s+Skipping step|OVERFLOW within closure! Skipping step"
    r"|Reducing dynamic loss scale from|AMP: overflow detected)"
)
# fairseq's trainer catching the OverflowError its fp16 optimizer / DynamicLossScaler raises
# ("setting loss scale to: X"), as each era prints it: `print("| WARNING: overflow detected, " + str(e))`
# (<= 0.8), `logger.info("NOTE: overflow detected, " + str(e))` (0.9-0.10), `NOTE: gradient overflow
# detected, ignoring gradient, ...` (0.12). fairseq's floor is `--min-loss-scale` (default 1e-4), not 1.
FAIRSEQ_OVERFLOW = r"^(?:\| )?(?:WARNING: |NOTE: )?(?:gradient )?overflow detected, (?:ignoring gradient, )?setting loss scale to"
FAIRSEQ_MIN_LOSS_SCALE = 1e-4
# a fairseq scale within this many halvings of its default floor: the next overflows raise
# `FloatingPointError: Minimum loss scale reached` (the loss is exploding, fairseq's own words)
FAIRSEQ_NEAR_FLOOR_HALVINGS = 3
# the scale an overflow line attempted and the one it fell to
SCALE_FROM = rf"(?:Attempted loss scale: |loss scale from )({NUM})"
SCALE_TO = rf"(?:reducing to |reducing loss scale to |setting loss scale to:? |setting scale to (?:to )?|from {NUM} to )({NUM})"
# a run of skipped steps with nothing else after it, this long or longer, did not recover -- when it has driven
# the scale near the floor. DeepSpeed's DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py, and Megatron's
# legacy fp16 loss_scaler.py it was taken from: init_scale=2**32, scale_factor=2, scale_window=1000, min_scale=1;
# DeepSpeed's config default initial_scale_power=16) halves the scale on each overflow and doubles it after
# scale_window good steps; at min_scale it raises `Current loss scale already at minimum - cannot decrease scale
# anymore. Exiting run.`; Megatron's DynamicGradScaler (--min-loss-scale 1.0) and apex's scalers likewise. A run of
# skips halving down from a high scale is the scaler finding its level (the warm-up from 2**16 or 2**32 skips a
# step per halving; a spike skips a few), which it leaves by itself: a log that ends inside one (an excerpt, a
# job stopped for another reason) shows no collapse. A run ending within NEAR_FLOOR_HALVINGS halvings of the floor
# (1 for these, fairseq's 1e-4) is the collapse the abort follows; a run whose lines carry no scale stays persistent.
PERSISTENT_RUN = 3
NEAR_FLOOR_HALVINGS = 3

# Framework logging prefixes, stripped from `body` to give the message the rules match on.
PREFIX = (
    r"^\s*(?:"
    rf"\[(?P<bts>{STAMP})\](?: \[[A-Z]+\] \[[^\]]*\]|\[[\w.]+\]\[[A-Z]+\] -)?"  # Megatron [stamp] / DeepSpeed
    # [stamp] [LVL] [f:l:fn] / Hydra job logging [stamp][logger][LVL] -
    rf"|DLL (?P<dts>{STAMP}) -"  # NVIDIA DLLogger stdout backend
    rf"|(?P<fts>{STAMP}) \| [A-Z]+ \| [\w.]+ \|"  # fairseq: stamp | LVL | logger |
    # VITS utils.get_logger (so-vits-svc, Bert-VITS2, ...): "%(asctime)s\t%(name)s\t%(levelname)s\t%(message)s"
    rf"|(?P<vts>{STAMP})\t[^\t]+\t(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\t"
    rf"|(?P<lts>{STAMP})(?: - [\w.]+ -)?:?"  # Python logging / TF `stamp: ` (a level word follows, below)
    r"|\[NeMo [A-Z] (?P<nts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<nrest>[^\]]*)\]"  # NeMo
    r"|\[titan\] (?P<tts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?) - \S+ - [A-Z]+ -"  # torchtitan
    r"|\[[A-Z]+\|[^\]]*\] (?P<hts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?) >>"  # transformers
    r"|(?P<mdy>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d) - [A-Z]+ - [\w.]+ -"  # HF example scripts
    r"|INFO:(?:[\w.]+:)?"  # Lightning rank-zero info
    r")?\s*"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR)\b ?[-:|]? ?)?"  # a level word after a stamp
    r"(?:\[Rank (?P<crank>\d+)\]\s*)?"
)

# Literal pre-filter: a line none of these occur in is not looked at further.
# Parsed file by file (step times come from consecutive lines), and only in files with a line
# holding one of these: without one `parse` finds nothing (the KEYWORDS pre-filter; SPEC.trigger).
KEYWORDS = [
    "iteration", "checkpoint", "Checkpoint", "datetime:", "loss", "step", "Running training",
    "train_runtime", "Training", "Num ", "Total ", "Number of", "Gradient Accumulation",
    "Instantaneous", "Continuing training", "Will skip", "OVERFLOW", "overflow", "Epoch",
    "memory (MB)", "load any checkpoints", "metadata file", "saving model to", "Restor",
    "Loaded model", "Loading", "Saving", "Saved", "Loaded", "training ...", "Ran out of data",
    "[GC]", "Trainer.fit", "auto-requeue", "requeing job", "Requeued SLURM job", "Requeuing SLURM job",
    "Bypassing SIGTERM", "across ranks", "RunningAvgSamplesPerSec", "time (ms)",
    "zero partition", "Removing unfinished", "Removed checkpoint", "Checkpointing active", "loss scale",
    "fresh start", "Validation", "Dumping", "Deleting older", "Model weights saved",
    # generic step readers (MXNet, Keras, fairseq, DLLogger, tqdm, FlagScale, custom loops)
    "Epoch[", "Speed:", "/step", "s/it", "/batch", "num_updates", "DLL ", "Iteration", "Step ",
    "Straggler Report", "Grad Norm", "ETA:", "epoch took", "epoch: ", "img/sec", "Test Error",
    # the experiment tracker's terminal lines (wandb), claimed by the rule below
    "wandb: ",
    # loops that print their data-loader wait (mmcv / mmengine, torchvision MetricLogger, CenterNet), MXNet 0.x
    "data_time", "data: ", "time: ", "eta: ", "|Tot: ", "train: [", "workflow: ", "Start training with",
]

# The rules' own literals: every match of a rule's pattern holds one of these (RULE_LITERALS
# exactly, RULE_LITERALS_CI in any ASCII case); tests/parsers/test_steps.py checks each pattern against
# them (`forensics.triage.literal_factor`). A KEYWORDS line without one (a dmesg's `nvidia-uvm:
# Loaded the UVM driver`) matches no rule and is not read (`_prepare`).
RULE_LITERALS = [
    "heckpoint", "loss", "Epoch", "epoch", "Running training", "across ranks", "Training", "training", "Trainer",
    "Num ", "Total ", "Gradient Accumulation", "Instantaneous", "Continuing", "Will skip", "Number of",
    "Model weights", "Loading model", "Validat", "valid on", "Sanity Checking", "Testing", "Predicting",
    "samples/sec", "overflow", "OVERFLOW", "datetime: ", "memory (MB)", "metadata file", "[GC]", "Dumping",
    "RunningAvgSamplesPerSec", "zero partition", "ReduceLROnPlateau", "early stopping", "did not improve",
    "was not in top", "[Torch] ", "- ", " : ", "'eval_", "NaN", "saved!", "save!", "ready now!", "skipped=",
    "Time cost=", "Train-", "num_updates", "saving model", "time (ms)", "train_runtime", "img/sec", "wandb: ", "Test Error",
    "auto-requeue", "requeing job", "Requeued SLURM job", "Requeuing SLURM job", "Bypassing SIGTERM",
    "data: ", "data_time: ", "time: ", "eta: ", "|Tot: ", "train: [", "workflow: ",
]
RULE_LITERALS_CI = ["step", "iter"]

# Megatron timer blocks.
TIMER_HEADER = r"^(?:\(min, max\) time|max time|times) across ranks \(ms\):\s*$"
TIMER_MEMBER = (
    r"^\s+(?:rank\s+\d+: (?P<rv>[\d.]+)"
    r"|(?P<name>\S[^:]*?) ?\.*: (?:\((?P<mn>[\d.]+), (?P<mx>[\d.]+)\)|(?P<one>[\d.]+))"
    r"|(?P<sub>[^\s:][^:]*):)\s*$"
)

REC_SCHEMA: dict[str, pl.DataType] = {
    "line_no": pl.Int64, "message": pl.Utf8, "ts": UTC_DT, "ts_raw": pl.Utf8, "ts_quality": pl.Utf8,
    "rank": pl.Int64, "kind": pl.Utf8, "severity": pl.Utf8, "code": pl.Utf8, "tbl": pl.Utf8,
    "framework": pl.Utf8, "step": pl.Int64, "total_steps": pl.Int64, "step_time_s": pl.Float64,
    "loss": pl.Float64, "grad_norm": pl.Float64, "skipped": pl.Int64, "nan_iters": pl.Int64,
    "throughput": pl.Float64, "loss_scale": pl.Float64, "ck_event": pl.Utf8, "duration_s": pl.Float64, "path": pl.Utf8,
    "epoch": pl.Int64, "data_time_s": pl.Float64,
    "detail": pl.Boolean, "ignore": pl.Boolean, "aux": pl.Utf8,
}

STEP_EVENT_KIND = {
    "save_start": "checkpoint_save_start", "save_end": "checkpoint_save_end",
    "load_start": "checkpoint_load", "load_end": "checkpoint_load",
}

_G = "_g"


def g(name: str) -> pl.Expr:
    """A named group of the rule's pattern."""
    return pl.col(_G).struct.field(name)


def fnum(e: pl.Expr) -> pl.Expr:
    """Number text ('1,234', '2.3E+00', 'nan', 'inf') -> Float64."""
    return e.str.replace_all(",", "").str.strip_chars("'\" ").cast(pl.Float64, strict=False)


def epoch_ts(e: pl.Expr) -> pl.Expr:
    """Epoch seconds (or milliseconds, when > 1e11) -> UTC; implausible values -> null."""
    v = e.cast(pl.Float64, strict=False)
    v = pl.when(v > 1e11).then(v / 1000.0).otherwise(v)
    return epoch_seconds(pl.when(v.is_between(0.0, 1e11)).then(v))


def inum(e: pl.Expr) -> pl.Expr:
    return fnum(e).cast(pl.Int64, strict=False)


def field(pattern: str) -> pl.Expr:
    """First capture group of `pattern` anywhere in the message, as Float64."""
    return fnum(pl.col("message_m").str.extract(ascii_classes(pattern), 1))


def step_from_path(col: str = "path") -> pl.Expr:
    p = pl.col(col)
    return pl.coalesce(
        p.str.extract(ascii_classes(r"global_step(\d+)"), 1), p.str.extract(ascii_classes(r"checkpoint-(\d+)"), 1),
        p.str.extract(ascii_classes(r"step[=_-](\d+)"), 1), p.str.extract(ascii_classes(r"iter_(\d+)"), 1),
    ).cast(pl.Int64, strict=False)


def ckpt(event: str, fw: str, **extra: pl.Expr) -> dict[str, pl.Expr]:
    out = {"tbl": pl.lit("ckpt"), "ck_event": pl.lit(event), "framework": pl.lit(fw)}
    if event in STEP_EVENT_KIND:
        out["kind"] = pl.lit(STEP_EVENT_KIND[event])
    out.update(extra)
    return out


def ev(kind: str, code: str | pl.Expr, severity: str = "info", **extra: pl.Expr) -> dict[str, pl.Expr]:
    out = {"kind": pl.lit(kind), "code": code if isinstance(code, pl.Expr) else pl.lit(code),
           "severity": pl.lit(severity)}
    out.update(extra)
    return out


IGNORE = {"ignore": pl.lit(True)}
CLAIM: dict[str, pl.Expr] = {}  # claimed as part of a record, no row of its own


def steprow(fw: str, **extra: pl.Expr) -> dict[str, pl.Expr]:
    out = {"tbl": pl.lit("step"), "framework": pl.lit(fw)}
    out.update(extra)
    return out


# generic loss key (`loss`, `train_loss`, `lm loss`; not `val_loss`, `loss_scale`) and per-step time units
LOSS_KEY = r"(?:\b(?:train|training|lm)[_ ]loss|\bloss)\b"
TIME_UNIT = r"(?:m?s|sec|seconds)/(?:step|it|iter|batch)\b"


def _step_time() -> pl.Expr:
    """Seconds per step from `0.84 s/step`, `290ms/step`, `1.05s/it`, `(0.12 sec/batch)`,
    `step_time: 0.8`."""
    return pl.coalesce(
        field(rf"({NUM})\s*(?:s|sec|seconds)/(?:step|it|iter|batch)\b"),
        field(rf"({NUM})\s*ms/(?:step|it|iter|batch)\b") / 1000.0,
        field(rf"\b(?:step_time|time_per_step|iter_time)(?:_s)?\s*[:=]\s*({NUM})\s*s?\b"),
    )


def _tqdm_time(inner: pl.Expr) -> pl.Expr:
    """Seconds per step from a tqdm bar's rate (`5.0it/s` or `1.2s/it`)."""
    rate = inner.str.extract_groups(rf"({NUM})(it/s|s/it)")
    v = fnum(rate.struct.field("1"))
    return pl.when(rate.struct.field("2") == "s/it").then(v).when(v > 0).then(1.0 / v)


@cache
def _rules() -> tuple[tuple[str, dict[str, pl.Expr]], ...]:
    """(pattern over the message, columns) in matching order; the first matching rule wins. Built
    on first use (a few hundred polars expressions: a bundle without step lines never builds them)."""
    mloss = pl.coalesce(field(rf"\|\s*lm loss:\s*({NUM})"), field(rf"\|\s*[^|:]*loss:\s*({NUM})"))
    return (
        # --- the experiment tracker beside the loop: every line of wandb's terminal printer (wandb/sdk
        # termlog / termwarn / termerror and the Go core's printer: a `wandb: ` head, then the text or
        # `WARNING ` / `ERROR `): run start / sync / summary, and the tracker's own troubles (`wandb: ERROR
        # Error while calling W&B API: ... (<Response [500]>)`, `wandb: Network error (ReadTimeout),
        # entering retry loop.`, `wandb: 500 encountered (...), retrying request`). They are about the
        # metrics upload, not the job: training goes on while wandb retries, and a run the tracker does end
        # (wandb.init timing out, a CommError) dies by a Python exception that the traceback rules read.
        # Claimed, no row
        (r"^wandb: ", CLAIM),
        # --- Megatron-LM
        (r"^iteration\s+(?P<it>\d+)\s*/\s*(?P<tot>\d+)\s*\|", steprow(
            "megatron", step=inum(g("it")), total_steps=inum(g("tot")),
            step_time_s=field(rf"elapsed time per iteration \(ms\):\s*({NUM})") / 1000.0,
            throughput=field(rf"throughput per GPU(?: \(TFLOP/s/GPU\))?:\s*({NUM})"),
            loss=mloss, grad_norm=field(rf"grad norm:\s*({NUM})"),
            skipped=field(r"number of skipped iterations:\s*(\d+)").cast(pl.Int64, strict=False),
            nan_iters=field(r"number of nan iterations:\s*(\d+)").cast(pl.Int64, strict=False),
            loss_scale=field(rf"\|\s*loss scale:\s*({NUM})"))),
        (r"^saving checkpoint at iteration\s+(?P<step>\d+) to (?P<path>\S+)",
         ckpt("save_start", "megatron", step=inum(g("step")), path=g("path"))),
        (r"^successfully saved checkpoint (?:from|at) iteration\s+(?P<step>\d+) to (?P<path>\S+)",
         ckpt("save_end", "megatron", step=inum(g("step")), path=g("path"))),
        (r"^loading (?:distributed )?checkpoint from (?P<path>\S+) at iteration\s+(?P<step>\d+)",
         ckpt("load_start", "megatron", step=inum(g("step")), path=g("path"))),
        (r"^successfully loaded checkpoint from (?P<path>\S+)(?: \[[^\]]*\])? at iteration\s+(?P<step>\d+)",
         ckpt("load_end", "megatron", step=inum(g("step")), path=g("path"))),
        (r"^(?:WARNING: )?could not find the metadata file", {"aux": pl.lit("fresh1")}),
        (r"^will not load any checkpoints", ev("train_start", "fresh", framework=pl.lit("megatron"))),
        (rf"^\[(?P<phase>[^\]]+)\] datetime: (?P<pts>{STAMP})", {"aux": pl.lit("phase")}),
        (r"^(?:\(after \d+ iterations\) )?memory \(MB\) \|", IGNORE),
        (r"^training \.\.\.\s*$", IGNORE),
        (r"^Non-persistent checkpoints scheduled for removal", IGNORE),
        (TIMER_HEADER, {"aux": pl.lit("timer_header")}),
        # --- NeMo
        (r"^Training epoch (?P<ep>\d+), iteration (?P<it>\d+)/(?P<tot>\d+)", steprow(
            "nemo",
            step=pl.coalesce(field(rf"\|\s*global_step:\s*({NUM})"), fnum(g("it"))).cast(pl.Int64, strict=False),
            total_steps=inum(g("tot")) + 1,
            loss=pl.coalesce(field(rf"\|\s*reduced_train_loss:\s*({NUM})"),
                             field(rf"\|\s*(?:train_loss|loss|lm_loss):\s*({NUM})")),
            step_time_s=field(rf"\|\s*train_step_timing in s:\s*({NUM})"),
            grad_norm=field(rf"\|\s*grad_norm:\s*({NUM})"))),
        (r"^Validation: iteration", IGNORE),
        (r"^Checkpoint save for step (?P<step>\d+) started at (?P<ep>\d+(?:\.\d+)?)",
         ckpt("save_start", "nemo", step=inum(g("step")), aux=pl.lit("epoch:") + g("ep"))),
        (r"^Scheduled async checkpoint save for (?P<path>\S+)",
         ckpt("save_start", "nemo", path=g("path"), detail=pl.lit(True))),
        (r"^Async checkpoint save for step (?P<step>\d+) \((?P<path>[^)]*)\) finalized successfully"
         r"(?: at (?P<ep>\d+(?:\.\d+)?))?",
         ckpt("save_end", "nemo", step=inum(g("step")), path=g("path"), aux=pl.lit("epoch:") + g("ep"))),
        (r"^Removing unfinished (?:dist )?checkpoint: (?P<path>\S+)",
         ckpt("save_failed", "nemo", path=g("path"), severity=pl.lit("warning"))),
        (r"^Removed checkpoint: ", IGNORE),
        # --- Lightning
        (r"^Epoch (?P<ep>\d+), global step (?P<step>\d+): .*saving model to '(?P<path>[^']*)'",
         ckpt("save_start", "lightning", step=inum(g("step")), path=g("path"))),
        (r"^Epoch \d+, global step \d+: .* was not in top", IGNORE),
        (r"^Restoring states from the checkpoint path at (?P<path>\S+)",
         ckpt("load_start", "lightning", path=g("path"))),
        (r"^(?:Restored all states from the checkpoint at|Loaded model weights from the checkpoint at)"
         r" (?P<path>\S+)", ckpt("load_end", "lightning", path=g("path"))),
        # Lightning's SLURM auto-requeue (trainer/connectors/signal_connector.py, SLURMEnvironment(auto_requeue=True),
        # the default under Slurm): armed at start, then at the requeue signal an hpc checkpoint is saved and the
        # job requeued with `scontrol requeue`; the SIGTERM handler it installs beside it says it bypasses the signal
        (r"^SLURM auto-requeueing enabled\. Setting signal handlers\.", ev("requeue", "enabled", framework=pl.lit("lightning"))),
        (r"^Handling auto-requeue signal: ", ev("requeue", "signal", framework=pl.lit("lightning"))),
        (r"^requeing job \S+\.\.\.", ev("requeue", "requeuing", framework=pl.lit("lightning"))),
        (r"^Requeued SLURM job: ", ev("requeue", "requeued", framework=pl.lit("lightning"))),
        (r"^Requeuing SLURM job \S+ failed\b",
         ev("requeue", "failed", "warning", framework=pl.lit("lightning"))),
        (r"^Bypassing SIGTERM: \d+", ev("requeue", "sigterm_bypassed", framework=pl.lit("lightning"))),
        (r"^`Trainer\.fit` stopped: (?P<why>.*)$",
         ev("train_end", pl.when(g("why").str.contains("reached")).then(pl.lit("done")).otherwise(pl.lit("stopped")),
            framework=pl.lit("lightning"))),
        # (tqdm's format_meter ends with `disp_trim(res, ncols)`: a bar whose postfix is wider than the terminal
        # is cut there, its closing `]` with it; the rate stays, it comes first)
        (r"^Epoch (?P<ep>\d+):(?: :)?\s*(?P<pct>\d+)%\|[^|]*\|\s*(?P<n>\d+)/(?P<tot>\d+) \[(?P<inner>[^\]]*)(?:\]|$)",
         steprow("lightning", aux=pl.lit("bar"))),
        (r"^(?:Validation|Validating|Sanity Checking|Testing|Predicting)(?: DataLoader \d+)?:.*%\|", IGNORE),
        # --- the speech-model trainers built on NVIDIA's tacotron2 / waveglow train.py and jaywalnut310's VITS
        # utils.py (so-vits-svc, Bert-VITS2, GPT-SoVITS, RVC copy it): save_checkpoint prints `Saving model and
        # optimizer state at iteration {} to {}` (some forks: `epoch`, tacotron2 forks append `. Validation
        # score = ...`) before its torch.save, and prints no end; load_checkpoint prints VITS' `Loaded checkpoint
        # '{}' (iteration {})` or tacotron2's `Loading checkpoint '{}'` then `Loaded checkpoint '{}' from
        # iteration {}`. The iteration VITS prints is its epoch, so it is kept as the event's aux, not a step.
        (r"^Saving model and optimizer state at (?:iteration|epoch) (?P<it>\d+) to (?P<path>\S+?)\.?(?:\s|$)",
         ckpt("save_start", "vits", path=g("path"), aux=pl.lit("iteration:") + g("it"))),
        (r"^Loading checkpoint '(?P<path>[^']+)'\s*$", ckpt("load_start", "vits", path=g("path"))),
        (r"^Loaded checkpoint '(?P<path>[^']+)' (?:\((?:iteration|epoch) (?P<it>\d+)\)|from iteration (?P<it2>\d+))",
         ckpt("load_end", "vits", path=g("path"), aux=pl.lit("iteration:") + pl.coalesce(g("it"), g("it2")))),
        # --- Hugging Face Trainer
        (r"^\*{5} Running training \*{5}", ev("train_start", "start", framework=pl.lit("hf"), aux=pl.lit("banner"))),
        (r"^Continuing training from global step (?P<step>\d+)",
         ckpt("load_end", "hf", step=inum(g("step")), aux=pl.lit("resume"))),
        (r"^(?:Num examples|Num Epochs|Instantaneous batch size per device|Training with DataParallel"
         r"|Total train batch size|Gradient Accumulation steps|Total optimization steps"
         r"|Number of trainable parameters|Continuing training from|Will skip the first"
         r"|Num update steps per epoch) ", {"aux": pl.lit("banner_kv")}),
        (r"^\{'[^']*': .*'train_runtime': |^\{'train_runtime': ",
         ev("train_end", "done", framework=pl.lit("hf"))),
        (r"^\{'eval_", IGNORE),
        # --- the PyTorch basics tutorial's test loop (pytorch/tutorials beginner_source/basics/quickstart_tutorial.py,
        # optimization_tutorial.py; copied by Ray Train's and many others' examples): `print(f"Test Error: \n
        # Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")`: the header line is an eval report
        (r"^Test Error: ?$", IGNORE),
        (r"^\{'[^']*'.*'loss': |^\{'loss': ", steprow(
            "hf", aux=pl.lit("hfdict"),
            loss=field(rf"'loss': '?({NUM})"), grad_norm=field(rf"'grad_norm': '?({NUM})"),
            step=field(r"(\d+)/\d+ \[").cast(pl.Int64, strict=False), total_steps=field(r"\d+/(\d+) \[").cast(pl.Int64, strict=False))),
        (r"^Training completed\. Do not forget", ev("train_end", "done", framework=pl.lit("hf"))),
        (r"^Saving model checkpoint to (?P<path>\S+?)\.?\s*$",
         ckpt("save_start", "hf", path=g("path"))),
        # transformers' save_pretrained: the end of a Trainer checkpoint save
        (r"^Model weights saved in (?P<path>\S+?)\.?\s*$", ckpt("save_end", "hf", path=g("path"))),
        (r"^Deleting older checkpoint", IGNORE),
        (r"^Loading model from (?P<path>\S+?)\.?\s*$", ckpt("load_start", "hf", path=g("path"))),
        # --- DeepSpeed
        (r"^step=(?P<step>\d+), skipped=(?P<sk>\d+)",
         steprow("deepspeed", step=inum(g("step")), skipped=inum(g("sk")))),
        (rf"^epoch=\d+/micro_step=\d+/global_step=(?P<step>\d+), RunningAvgSamplesPerSec=(?P<avg>{NUM})"
         rf"(?:, CurrSamplesPerSec=(?P<cur>{NUM}))?",
         steprow("deepspeed", step=inum(g("step")), throughput=pl.coalesce(fnum(g("cur")), fnum(g("avg"))))),
        (rf"^steps: (?P<step>\d+) loss: (?P<loss>{NUM}) iter time \(s\): (?P<t>{NUM})"
         rf"(?: samples/sec: (?P<sps>{NUM}))?",
         steprow("deepspeed", step=inum(g("step")), loss=fnum(g("loss")), step_time_s=fnum(g("t")),
                 throughput=fnum(g("sps")))),
        # SynchronizedWallClockTimer.log (deepspeed/utils/timer.py, `wall_clock_breakdown`; borrowed from Megatron's
        # `time (ms) | name: x.xx | ...`): through log_dist (`[Rank 0] ` stripped above); DeepSpeed 0.9-0.14 put
        # `rank={rank} ` before it. Per-step component times without a step number: read, no row
        (r"^(?:rank=\d+ )?time \(ms\) \|", IGNORE),
        # --- fp16 dynamic loss scaling (DeepSpeed loss_scaler / fused / unfused optimizers, Megatron's and
        # tacotron's fp16 optimizers, apex amp and fp16_utils, fairseq): one `nan` event per skipped step;
        # `_overflow_states` decides which are a healthy warm-up and which a cascade
        (OVERFLOW, ev("nan", "overflow", "warning", aux=pl.lit("ovf"))),
        (FAIRSEQ_OVERFLOW, ev("nan", "overflow", "warning", aux=pl.lit("ovf_fs"), framework=pl.lit("fairseq"))),
        (r"^\n?Grad overflow on iteration:? \d+|^Using static loss scale of", {"aux": pl.lit("ovf_note")}),
        (r"^No Grad overflow for \d+ iterations|^Increasing dynamic loss scale from", IGNORE),
        (r"^(?:\w+: )?(?:Current loss scale already at minimum|(?:AMP: )?Minimum loss scale reached)",
         ev("nan", "loss_scale_min", "error")),
        # TF Estimator's NanTensorHook (basic_session_run_hooks): `logging.error("Model diverged with loss =
        # NaN.")` through Python logging (`ERROR:tensorflow:` here `tensorflow:` after the level word) or absl
        # (`E0606 09:34:26.659411 4691 basic_session_run_hooks.py:760] `), then NanLossDuringTrainingError's
        # `NaN loss during training.` (fail_on_nan_loss=True, the default)
        (r"^(?:tensorflow:|[EW]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] )?(?:Model diverged with loss = NaN"
         r"|(?:[\w.]+\.)?NanLossDuringTrainingError: NaN loss during training)",
         ev("nan", "diverged", "error")),
        (r"^(?:\[Torch\] )?Checkpoint (?P<tag>\S+) is (?:about to be saved|begin to save)!",
         ckpt("save_start", "deepspeed", path=pl.lit(None, pl.Utf8), aux=g("tag"))),
        (r"^(?:\[Torch\] )?Checkpoint (?P<tag>\S+) is ready now!",
         ckpt("save_end", "deepspeed", aux=g("tag"))),
        (r"^Saving model checkpoint: (?P<path>\S+)",
         ckpt("save_start", "deepspeed", path=g("path").str.replace(r"/[^/]*\.pt$", ""), detail=pl.lit(True))),
        (r"^\[Torch\] (?:Begin Load|Loading) checkpoint from (?P<path>\S+?)\.*$",
         ckpt("load_start", "deepspeed", path=g("path"))),
        (r"^\[Torch\] (?:End Load|Loaded) checkpoint from (?P<path>\S+?)\.*$",
         ckpt("load_end", "deepspeed", path=g("path"))),
        (r"^\[Torch\] (?:Saving|Saved) ", CLAIM),
        (r"^loading \d+ zero partition checkpoints for rank", IGNORE),
        # ZeRO-3's parameter coordinator (deepspeed/runtime/zero/partitioned_param_coordinator.py trace_prologue,
        # print_rank_0 force=log_trace_cache_warnings): the module order of this step differs from the recorded
        # trace, so the trace is dropped and recorded again (prefetching pauses): a notice, nothing failed. Often
        # glued behind a tqdm bar (the prefix layer peels a bar only before a log-looking record): whatever is
        # before it (an unbounded `.*?`: bounded repeats of the bar's shape made the dispatch regex 2x dearer to compile)
        (r"^.*?Invalidate trace cache @ step \d+(?:: expected module \d+, but got module \d+"
         r"| and module \d+: cache has only \d+ modules)", IGNORE),
        # --- torchtitan
        (rf"^step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{NUM})", steprow(
            "torchtitan", step=inum(g("step")), loss=fnum(g("loss")),
            grad_norm=field(rf"grad_norm:\s*({NUM})"),
            throughput=field(r"\b(?:tps|wps):\s*(\d[\d,]*(?:\.\d+)?)"))),
        (r"^validate step:", IGNORE),
        (r"^(?:Saving|Staging) the checkpoint(?: \(or staging if async is enabled\))?\.",
         ckpt("save_start", "torchtitan")),
        (r"^Saving a .*checkpoint.* at last step, step (?P<step>\d+)",
         ckpt("save_start", "torchtitan", step=inum(g("step")))),
        (rf"^Finished (?:saving|staging) the checkpoint(?: \(or staging if async is enabled\))? in (?P<d>{NUM}) seconds",
         ckpt("save_end", "torchtitan", duration_s=fnum(g("d")))),
        (r"^Loading the checkpoint at step (?P<step>\d+)",
         ckpt("load_start", "torchtitan", step=inum(g("step")))),
        (r"^Loading the checkpoint from (?P<path>\S+?)\.?\s*$", ckpt("load_start", "torchtitan", path=g("path"))),
        (rf"^Finished loading the checkpoint in (?P<d>{NUM}) seconds",
         ckpt("load_end", "torchtitan", duration_s=fnum(g("d")))),
        (r"^Training starts at step (?P<step>\d+)", ev("train_start", "start", framework=pl.lit("torchtitan"))),
        (r"^No checkpoint was provided, this is a fresh start",
         ev("train_start", "fresh", framework=pl.lit("torchtitan"))),
        (r"^Ran out of data; last step was canceled",
         ev("train_end", "data_exhausted", "warning", framework=pl.lit("torchtitan"))),
        (r"^(?:\[GC\] |Checkpointing active|Dumping profiler traces|Dumping memory snapshot)", IGNORE),
        # --- JSON lines
        (r"^\{\s*\"[^\"]*\"\s*:.*\"(?:step|iteration|global_step|iter)\"\s*:\s*\d|^\{\s*\"(?:step|iteration|global_step|iter)\"\s*:\s*\d",
         steprow("jsonl", aux=pl.lit("json"))),
        # --- MXNet (Speedometer, fit): the batch counter restarts every epoch and no epoch length is
        # printed, so `step` is the batch in its epoch as printed (see the module notes)
        # MXNet's Speedometer (python/mxnet/callback.py) prints `Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-%s=%f`
        # with an eval metric and `Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec` without one (the Scala binding the
        # same); the earliest releases' model.py also wrote `Iter[%d] Train-..` / `Iter[%d] Time cost=..`
        (rf"^(?:Epoch|Iter)\[(?P<ep>\d+)\] Batch \[(?P<n>\d+)\]\s+Speed: (?P<sps>{NUM}) samples/sec", steprow(
            "mxnet", step=inum(g("n")), epoch=inum(g("ep")), throughput=fnum(g("sps")),
            loss=field(rf"\b(?:loss|cross-entropy|ce|nll-loss|perplexity)=({NUM})"))),
        (r"^(?:Epoch|Iter)\[\d+\] (?:Train-|Validation-|Time cost=|Resetting Data Iterator)", CLAIM),
        (r"^Start training with \[(?:[cg]pu\(\d+\)(?:, )?)+\]\s*$", ev("train_start", "start", framework=pl.lit("mxnet"))),
        # --- OpenMMLab's text loggers: mmcv's TextLoggerHook (mmcv/runner/hooks/logger/text.py `_log_info`):
        # `Epoch [{epoch}][{iter}/{len(data_loader)}]\t` (by epoch) or `Iter [{iter}/{max_iters}]\t`, then
        # `lr: {:.3e}, eta: {}, time: {:.3f}, data_time: {:.3f}, memory: {}, ` and the losses `name: {:.4f}`;
        # mmengine's LogProcessor (mmengine/runner/log_processor.py) the same as `Epoch(train)  [{e}][{i}/{n}]  `
        # / `Iter(train) [{i}/{n}]  ` with two-space separators. `time` and `data_time` are the means over the
        # logging interval; the iteration counts within its epoch (by epoch), as printed. Val / test rows
        # (`Epoch(val) [1][500]`) time the evaluation loop, not training steps: read, no row
        (r"^(?:Epoch|Iter)\((?:val|test)\)\s*\[", IGNORE),
        (rf"^(?:Epoch(?:\(train\))?\s*\[(?P<ep>\d+)\]|Iter(?:\(train\))?\s*)\[\s*(?P<n>\d+)/(?P<tot>\d+)\]"
         rf"\s+lr: .*?\btime: (?P<t>{NUM}),?\s+data_time: (?P<d>{NUM})", steprow(
             "mmcv", step=inum(g("n")), epoch=inum(g("ep")), total_steps=inum(g("tot")), step_time_s=fnum(g("t")),
             data_time_s=fnum(g("d")), loss=field(rf"(?:,|\s)\s*loss: ({NUM})"))),
        (r"^workflow: \[\('train', \d+\)", CLAIM),
        # --- torchvision references' MetricLogger.log_every (references/classification/utils.py; copied by DETR,
        # MAE, BLIP, ALBEF, VindLU, ...): `delimiter.join([header, "[{0:Nd}/{1}]", "eta: {eta}", "{meters}",
        # "time: {time}", "data: {data}", "max mem: {memory:.0f}"])` with the delimiter two spaces, printed at
        # `i % print_freq == 0`; `time` / `data` are SmoothedValue(fmt="{avg:.4f}"): the mean over its window
        # (20 iterations). A row wrapped over lines (a terminal or a post) keeps its head (`[ 200/10175]  eta:`)
        # and its tail (`time: 40.19  data: 38.06  max mem: ...`) apart: the tail takes its step from the last
        # head above it (`_metriclogger_steps`)
        (rf"^(?P<head>.{{0,120}}?)\[\s*(?P<n>\d+)/(?P<tot>\d+)\]\s+eta: .*?\btime: (?P<t>{NUM})\s+data: (?P<d>{NUM})"
         r"(?:\s+max mem: \d+)?", steprow(
             "metriclogger", step=inum(g("n")), total_steps=inum(g("tot")), step_time_s=fnum(g("t")),
             data_time_s=fnum(g("d")), loss=field(rf"\s{LOSS_KEY}: ({NUM})"))),
        (r"^(?P<head>.{0,120}?)\[\s*(?P<n>\d+)/(?P<tot>\d+)\]\s+eta: ", {
            "aux": pl.lit("mlhead"), "code": g("n"), "total_steps": inum(g("tot"))}),
        (rf"^time: (?P<t>{NUM})\s+data: (?P<d>{NUM})(?:\s+max mem: \d+)?", steprow(
            "metriclogger", aux=pl.lit("mltail"), step_time_s=fnum(g("t")), data_time_s=fnum(g("d")))),
        # --- CenterNet (src/lib/trains/base_trainer.py run_epoch): the `progress.Bar` row `Bar.suffix = '{phase}:
        # [{0}][{1}/{2}]|Tot: {total:} |ETA: {eta:} '` + `'|{} {:.4f} '` per loss + `'|Data {dt.val:.3f}s({dt.avg:.3f}s)
        # |Net {bt.avg:.3f}s'` (unless --hide_data_time); Net is the whole iteration (data wait included), so the
        # step time is the Net mean and the data wait the Data mean over the epoch so far
        (rf"^(?:\S+ \|[^|]*\| )?train: \[(?P<ep>\d+)\]\[(?P<n>\d+)/(?P<tot>\d+)\]\|Tot: .*?\|Data {NUM}s\((?P<d>{NUM})s\)"
         rf" \|Net (?P<t>{NUM})s", steprow(
             "centernet", step=inum(g("n")), epoch=inum(g("ep")), total_steps=inum(g("tot")), step_time_s=fnum(g("t")),
             data_time_s=fnum(g("d")), loss=field(rf"\|loss ({NUM})"))),
        # --- the PyTorch examples' loop (pytorch/examples mnist/main.py, copied by Horovod's and
        # Kubeflow's MNIST examples and countless scripts): `'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss:
        # {:.6f}'.format(epoch, batch_idx * len(data), len(dataset), ...)`, Kubeflow's `\tloss={:.4f}`;
        # extra fields may follow. The counter is the sample offset in the epoch, as printed (it restarts
        # each epoch, as MXNet's batch does): `step` that offset, `epoch` the printed epoch
        (rf"^Train Epoch: (?P<ep>\d+) \[(?P<n>\d+)/(?P<tot>\d+) \(\d+%\)\]\s*(?:Loss: |loss=)(?P<loss>{NUM})",
         steprow("generic", step=inum(g("n")), epoch=inum(g("ep")), loss=fnum(g("loss")))),
        # --- nnU-Net: the trainer's print_to_log_file lines (`<datetime>: ` head, stripped by PREFIX). v1
        # (nnunet/training/network_training/network_trainer.py run_training) prints `\nepoch: ` with the
        # epoch number (`epoch:  232` on its own line) at the start of each epoch and `This epoch took %f s`
        # at its end; v2 (nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py on_epoch_start / on_epoch_end)
        # prints `Epoch 12` and `Epoch time: 287.45 s`. step = the epoch, from the last epoch line
        # (`_nnunet_steps`); the epoch time is the step time.
        (r"^(?:epoch:\s+|Epoch )(?P<ep>\d+)\s*$", {"aux": pl.lit("nnepoch"), "code": g("ep")}),
        (rf"^(?:This epoch took|Epoch time:) (?P<t>{NUM}) ?s\b", steprow(
            "nnunet", aux=pl.lit("nnunet"), step_time_s=fnum(g("t")))),
        # --- Keras: `Epoch 3/50`, then the epoch's progress line (batch n of tot)
        (r"^Epoch (?P<ep>\d+)/(?P<tot>\d+)\s*$", {"aux": pl.lit("kepoch"), "code": g("ep"),
                                                 "total_steps": inum(g("tot"))}),
        (r"^(?P<n>\d+)/(?P<tot>\d+) (?:\[[=>.]*\] )?- (?:ETA: \S+|\d+(?:\.\d+)?m?s\b)", steprow(
            "keras", aux=pl.lit("keras"), step=inum(g("n")), total_steps=inum(g("tot")),
            loss=field(rf" - loss: ({NUM})"), step_time_s=_step_time())),
        (r"^Epoch (?P<ep>\d+): .*\bsaving model to (?P<path>\S+)",
         ckpt("save_start", "keras", path=g("path").str.strip_chars("'\"").str.strip_chars_end("."))),
        (r"^Epoch \d+: (?:ReduceLROnPlateau|early stopping|val_\S+ did not improve)", CLAIM),
        # --- fairseq: `epoch 001:  100 / 1000 loss=7.12, ..., num_updates=100` and the epoch summary
        # `epoch 001 | loss 7.12 | ... | num_updates 100`; ups (updates/s) gives the step time
        (r"^\|? ?epoch \d+ \| valid on ", IGNORE),
        (r"^\|? ?epoch (?P<ep>\d+)(?::\s*\d+ / (?P<tot>\d+)| \|).*?\bnum_updates[= ](?P<step>\d+)", steprow(
            "fairseq", step=inum(g("step")), loss=field(rf"\bloss[= ]({NUM})"),
            step_time_s=1.0 / field(rf"\bups[= ]({NUM})").replace(0.0, None),
            grad_norm=field(rf"\bgnorm[= ]({NUM})"), throughput=field(rf"\bwps[= ]({NUM})"))),
        # fairseq checkpoint_utils / trainer: `Preparing to save checkpoint for epoch E @ U updates`,
        # `Saved checkpoint P (epoch E @ U updates, score S) (writing took X seconds)` (`| saved ...`
        # in the print-era releases, `@ N steps` in scripts that copied it), `Loaded checkpoint P
        # (epoch E @ U updates)`; the step is the update count
        (r"^\|? ?[Pp]reparing to save checkpoint for epoch \d+ @ (?P<step>\d+) updates",
         ckpt("save_start", "fairseq", step=inum(g("step")))),
        (rf"^\|? ?[Ss]aved checkpoint (?P<path>\S+) \(epoch \d+ @ (?P<step>\d+) (?:updates|steps)[^)]*\)"
         rf"(?: \(writing took (?P<d>{NUM}) seconds\))?",
         ckpt("save_end", "fairseq", step=inum(g("step")), path=g("path"), duration_s=fnum(g("d")))),
        (r"^\|? ?[Ll]oaded checkpoint (?P<path>\S+) \(epoch \d+ @ (?P<step>\d+) updates\)",
         ckpt("load_end", "fairseq", step=inum(g("step")), path=g("path"))),
        # --- NVIDIA DLLogger stdout: `DLL <stamp> - (epoch, step[, ...]) key : value ...`
        (r"^\((?P<ep>\d+), (?P<step>\d+)(?:, \d+)*\) +[\w./]+ : ", steprow(
            "dllogger", step=inum(g("step")),
            loss=field(rf"\b(?:train[._]|step_)?loss : ({NUM})"),
            step_time_s=field(rf"\b(?:train[._])?(?:step_time|iter_time|time_per_step) : ({NUM})"))),
        # --- TF Estimator LoggingTensorHook: `loss = X, step = N (Y sec)`; Y covers the whole log
        # interval, so no step time
        (rf"^loss = (?P<loss>{NUM}), step = (?P<step>\d+)\b",
         steprow("tf", step=inum(g("step")), loss=fnum(g("loss")))),
        # --- tacotron2 / waveglow-style `Train loss 123 0.532 Grad Norm 1.2 1.05s/it`
        (rf"^Train (?:loss|iter)\s+(?P<step>\d+)\s+(?:loss\s+)?(?P<loss>{NUM})\s+Grad Norm\s+(?P<gn>{NUM})"
         rf"(?:\s+(?P<t>{NUM})s/it)?", steprow(
             "generic", step=inum(g("step")), loss=fnum(g("loss")), grad_norm=fnum(g("gn")),
             step_time_s=fnum(g("t")))),
        # --- apex / tacotron2 fp16 optimizers: a skipped step on overflow
        (rf"^(?:OVERFLOW! Skipping step\. Attempted loss scale: {NUM}"
         rf"|Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to {NUM})",
         ev("nan", "overflow", "warning", framework=pl.lit("apex"))),
        # --- FlagScale straggler detector report header: the step it was taken at
        (r"^=+ Straggler Report at Step (?P<step>\d+) =+\s*$", steprow("flagscale", step=inum(g("step")))),
        # --- tqdm bars with a loss in the postfix (Lightning's `Epoch N:` bars are read above)
        (r"^(?:[^|]{0,80}?:? *)?\d+%\|[^|]*\| *(?P<n>\d+)/(?P<tot>\d+) \[(?P<inner>[^\]]*\bloss=[^\]]*)(?:\]|$)",
         steprow("tqdm", step=inum(g("n")), total_steps=inum(g("tot")),
                 loss=fnum(g("inner").str.extract(ascii_classes(rf"\bloss=({NUM})"), 1)), step_time_s=_tqdm_time(g("inner")))),
        # --- generic checkpoint lines (Python logging, custom loops)
        (r"^(?:[Ss]aving|[Ww]riting) (?:model )?checkpoint (?:to|at|in):? ['\"]?(?P<path>[^'\"\s]+?)['\"]?\s*\.{0,3}\s*$",
         ckpt("save_start", "generic", path=g("path"))),
        (rf"^(?:[Ss]aved|[Ww]rote) (?:model )?checkpoint (?:to|at|in):? ['\"]?(?P<path>[^'\"\s]+?)['\"]?"
         rf"(?: in (?P<d>{NUM}) ?s(?:ec(?:onds)?)?)?\.?\s*$",
         ckpt("save_end", "generic", path=g("path"), duration_s=fnum(g("d")))),
        (rf"^[Ss]aved (?:checkpoint (?:at|for) )?step (?P<step>\d+)(?: to ['\"]?(?P<path>[^'\"\s]+?)['\"]?)?"
         rf" in (?P<d>{NUM}) ?s(?:ec(?:onds)?)?\b",
         ckpt("save_end", "generic", step=inum(g("step")), path=g("path"), duration_s=fnum(g("d")))),
        (r"^(?:[Ll]oading|[Rr]estoring) (?:model )?checkpoint (?:from|at):? ['\"]?(?P<path>[^'\"\s]+?)['\"]?\s*\.{0,3}\s*$",
         ckpt("load_start", "generic", path=g("path"))),
        (rf"^(?:[Ll]oaded|[Rr]estored) (?:model )?checkpoint (?:from|at):? ['\"]?(?P<path>[^'\"\s]+?)['\"]?"
         rf"(?: in (?P<d>{NUM}) ?s(?:ec(?:onds)?)?)?\.?\s*$",
         ckpt("load_end", "generic", path=g("path"), duration_s=fnum(g("d")))),
        # --- Horovod's examples (horovod/examples): tensorflow2_mnist.py / keras `print('Step #%d\tLoss: %.6f'
        # % (batch, loss_value))`, the synthetic benchmarks' `print('Iter #%d: %.1f img/sec per GPU' % (x, img_sec))`
        (rf"^Step #(?P<step>\d+)\s+Loss: (?P<loss>{NUM})\s*$",
         steprow("generic", step=inum(g("step")), loss=fnum(g("loss")))),
        (rf"^Iter #(?P<step>\d+): (?P<tp>{NUM}) img/sec per GPU\s*$",
         steprow("generic", step=inum(g("step")), throughput=fnum(g("tp")))),
        # --- the same counter written number first, as custom loops print it (`000 epoch, 06000 iter, average time
        # 0.6607, loss nan`, `[1200 iters] loss=2.10`, `epoch 3 | 450 steps | loss: 1.93`): the count directly
        # before the word, then within 200 characters a numeric loss or a per-step time
        (rf"^(?:.{{0,80}}?[\s|,;\[(])?(?P<step>\d+) ?(?i:iter(?:ation)?s?|steps?)\b(?:\s*[,:|\]])?"
         rf".{{0,200}}?(?:{LOSS_KEY}\s*[:=]?\s*{NUM}|{NUM}\s*{TIME_UNIT})",
         steprow("generic", step=inum(g("step")), loss=field(rf"{LOSS_KEY}\s*[:=]?\s*({NUM})"),
                 step_time_s=_step_time(), grad_norm=field(rf"\bgrad[_ ]?norm\s*[:=]?\s*({NUM})"))),
        # --- generic step line: a step counter (`step 120/5000`, `Iteration 7`, `global_step=3`), then
        # within 200 characters a numeric loss or a per-step time. Last: every named rule wins over it.
        (rf"^(?:.{{0,80}}?[\s|,;\[(])?(?i:global[_ ]step|step|iter(?:ation)?)\s*[:=#]?\s*(?P<step>\d+)\b"
         rf"(?:\s*/\s*(?P<tot>\d+)\b)?.{{0,200}}?(?:{LOSS_KEY}\s*[:=]?\s*{NUM}|{NUM}\s*{TIME_UNIT})",
         steprow("generic", step=inum(g("step")), total_steps=inum(g("tot")),
                 loss=field(rf"{LOSS_KEY}\s*[:=]?\s*({NUM})"), step_time_s=_step_time(),
                 grad_norm=field(rf"\bgrad[_ ]?norm\s*[:=]?\s*({NUM})"))),
    )


@cache
def _dispatch() -> str:
    """All rule patterns in one regex: `r<i>` is the group of rule i (inner named groups made
    non-capturing); leftmost-first alternation picks the first rule that matches, as the rule order
    intends."""
    return "^(?:" + "|".join(f"(?P<r{i}>{re.sub(r'[(][?]P<[A-Za-z_]+>', '(?:', p)})"
                             for i, (p, _) in enumerate(_rules())) + ")"


def sniff(head: str) -> float:
    strong = (
        r"^\s*(?:\[[^\]]*\] )?iteration\s+\d+/\s*\d+ \|", r"\[NeMo [IWEDC] ", r"^\{'loss': ",
        r"\*{5} Running training \*{5}", r"RunningAvgSamplesPerSec=", r"steps: \d+ loss: .* iter time",
        r"\[titan\] .* step:\s*\d+\s+loss:", r"^Epoch \d+:.*\d+/\d+ \[", r"Training epoch \d+, iteration \d+/",
        r"^\{\"(?:step|iteration|global_step)\"\s*:", r"step=\d+, skipped=\d+",
        r"Epoch\[\d+\] Batch \[\d+\]\s+Speed:", r"\bnum_updates[= ]\d+", r"DLL \d{4}-\S+ \S+ - \(\d+, \d+",
        r"(?:^|\s)\d+/\d+ (?:\[[=>.]*\] )?- .*(?:- loss: |\d+m?s/step)", r"Train (?:loss|iter)\s+\d+ .*Grad Norm",
        r"\bloss = \S+, step = \d+", r"\d+%\|[^|]*\| *\d+/\d+ \[[^\]]*\bloss=",
        r"Train Epoch: \d+ \[\d+/\d+ \(\d+%\)\]\s*(?:Loss: |loss=)",
        r": (?:This epoch took|Epoch time:) \d+(?:\.\d+)? ?s\s*$",
        r"^Step #\d+\s+Loss: \d", r"^Iter #\d+: [\d.]+ img/sec per GPU",
    )
    weak = (
        r"saving checkpoint at iteration", r"successfully saved checkpoint", r"Saving model checkpoint",
        r"Saving model and optimizer state at (?:iteration|epoch) \d+ to ", r"Loaded checkpoint '[^']+' (?:\((?:iteration|epoch) \d+\)|from iteration \d+)",
        r"Checkpoint \S+ is (?:about to be saved|begin to save|ready now)!", r"across ranks \(ms\):",
        r"Finished saving the checkpoint", r"Checkpoint save for step \d+", r"\[titan\]",
        r"^\[[^\]]+\] datetime: \d{4}-", r"will not load any checkpoints",
        r"Straggler Report at Step \d+", r"global step \d+: .*saving model to", r"OVERFLOW! (?:Rank \d+ )?Skipping step",
        r"(?:^|\] )(?:rank=\d+ )?time \(ms\) \| \w[\w.-]*: \d", r"Invalidate trace cache @ step \d+",
        r"(?i:\b(?:step|iter(?:ation)?)\s*[:=]?\s*\d+\b.{0,200}?\bloss\s*[:=]?\s*\d)",
        r"(?i:(?:^|[\s,;|\[(])\d+ ?(?:iter(?:ation)?s?|steps?)\b.{0,200}?\bloss\s*[:=]?\s*-?\d)",
    )
    if not any(w in head for w in SNIFF_WORDS):
        return 0.0
    lines = pl.Series(head.split("\n"), dtype=pl.Utf8)  # Rust regex, line by line: linear on hostile heads
    if lines.str.contains(ascii_classes("|".join(f"(?:{p})" for p in strong))).any():
        return 0.9
    if lines.str.contains(ascii_classes("|".join(f"(?:{p})" for p in weak))).any():
        return 0.5
    return 0.0


# every sniff pattern above needs one of these words (a cheap test before any regex)
SNIFF_WORDS = ("iteration", "NeMo", "'loss'", "Running training", "RunningAvgSamplesPerSec", "steps: ", "titan",
               "Epoch ", "Training epoch", "step", "checkpoint", "Checkpoint", "across ranks", "datetime: ",
               "Epoch[", "num_updates", "DLL ", "/step", "Grad Norm", "Straggler", "loss = ", "saving model",
               "OVERFLOW", "loss=", "Step", "Iteration", "epoch took", "Epoch time", "img/sec", "iter", "time (ms)")


@cache
def _keywords_re() -> str:
    return literal_regex(KEYWORDS)


def _prepare(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Candidates: message (prefix stripped), stamp, rank."""
    b = pl.col("body")
    cand = lines.filter(b.str.contains(ascii_classes(_keywords_re())))  # (= str.contains_any(KEYWORDS), read faster)
    cand = cand.filter(b.str.contains_any(RULE_LITERALS) | b.str.contains_any(RULE_LITERALS_CI, ascii_case_insensitive=True))
    p = pl.col("body").str.extract_groups(ascii_classes(PREFIX))
    mdy = p.struct.field("mdy").str.extract_groups(ascii_classes(r"^(\d\d)/(\d\d)/(\d{4}) (.*)$"))
    mdy_iso = pl.concat_str([mdy.struct.field("3"), pl.lit("-"), mdy.struct.field("1"), pl.lit("-"),
                             mdy.struct.field("2"), pl.lit(" "), mdy.struct.field("4")])
    raw = pl.coalesce(p.struct.field("bts"), p.struct.field("nts"), p.struct.field("tts"),
                      p.struct.field("hts"), mdy_iso, p.struct.field("dts"), p.struct.field("fts"),
                      p.struct.field("vts"), p.struct.field("lts"))
    rank_hint = pl.lit(ctx.rank_hint, dtype=pl.Int64)
    return cand.with_columns(
        pl.col("body").str.replace(ascii_classes(PREFIX), "").str.strip_chars_end().alias("message_m"),
        raw.alias("_raw"),
        pl.coalesce(p.struct.field("crank").cast(pl.Int64, strict=False),
                    p.struct.field("nrest").str.extract(ascii_classes(r"rank:(\d+)"), 1).cast(pl.Int64, strict=False),
                    pl.col("prefix_rank"), rank_hint).alias("rank"),
    ).with_columns(iso(pl.col("_raw"), ctx.tz).alias("_ts"))


def _match_rules(cand: pl.DataFrame) -> pl.DataFrame:
    """Tag each candidate with the first rule whose pattern matches, then build each rule's columns."""
    if cand.is_empty():
        return pl.DataFrame()
    rules = _rules()
    d = pl.col("_d")
    which = pl.coalesce([pl.when(d.struct.field(f"r{i}").is_not_null()).then(pl.lit(i, pl.Int32))
                         for i in range(len(rules))])
    tagged = (cand.with_columns(pl.col("message_m").str.extract_groups(ascii_classes(_dispatch())).alias("_d"))
              .with_columns(which.alias("_rule")).drop("_d").filter(pl.col("_rule").is_not_null()))
    out = []
    for (idx,), sub in tagged.partition_by("_rule", as_dict=True, maintain_order=True).items():
        pattern, cols = rules[int(idx)]
        sub = sub.with_columns(pl.col("message_m").str.extract_groups(ascii_classes(pattern)).alias(_G))
        sub = sub.with_columns(**cols)
        out.append(sub.select(["line_no", "body", "message_m", "rank", "_ts", "_raw", "prefix_ts", *cols.keys()]))
    if not out:
        return pl.DataFrame()
    return pl.concat(out, how="diagonal_relaxed")


def _finish_rows(m: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Phase stamps, epoch stamps, JSON and bar fields; final ts and schema."""
    for c, dt in REC_SCHEMA.items():
        if c not in m.columns and c != "message" and c not in ("ts", "ts_raw", "ts_quality"):
            m = m.with_columns(pl.lit(None, dtype=dt).alias(c))
    msg = pl.col("message_m")
    aux = pl.col("aux").fill_null("")
    # Megatron phase stamps
    phase = msg.str.extract(r"^\[([^\]]+)\] datetime:", 1)
    pts_raw = msg.str.extract(rf"\] datetime: ({STAMP})", 1)
    m = m.with_columns(
        pl.when(aux == "phase").then(
            pl.when(phase.str.starts_with("exiting program")).then(pl.lit("train_end"))
            .when(phase == "after training is done").then(pl.lit("train_end"))
            .when(phase == "before the start of training step").then(pl.lit("train_start")))
        .otherwise(pl.col("kind")).alias("kind"),
        pl.when(aux == "phase").then(
            pl.when(phase.str.starts_with("exiting program")).then(pl.lit("intentional"))
            .when(phase == "after training is done").then(pl.lit("done"))
            .when(phase == "before the start of training step").then(pl.lit("start")))
        .otherwise(pl.col("code")).alias("code"),
        pl.when(aux == "phase").then(pl.lit("megatron")).otherwise(pl.col("framework")).alias("framework"),
    ).with_columns(
        pl.when((aux == "phase") & pl.col("kind").is_null()).then(pl.lit(True))
        .otherwise(pl.col("ignore")).alias("ignore"),
    )
    # JSON lines
    jkey = msg.str.extract(ascii_classes(r"\"(?:step|global_step|iteration|iter)\"\s*:\s*(\d+)"), 1)
    jts = msg.str.extract(r"\"(?:timestamp|time|ts)\"\s*:\s*(\"[^\"]*\"|[-+0-9.eE]+)", 1)
    jts_num = jts.cast(pl.Float64, strict=False)
    jts_val = pl.when(jts_num.is_not_null()).then(epoch_ts(jts_num)).otherwise(
        iso(jts.str.strip_chars("\""), ctx.tz))
    jnum = lambda keys: fnum(msg.str.extract(rf"\"(?:{keys})\"\s*:\s*\"?({NUM}|Infinity|-Infinity)", 1))  # noqa: E731
    is_json = aux == "json"
    # Lightning bars
    inner = msg.str.extract(ascii_classes(r"\| *\d+/\d+ \[([^\]]*)(?:\]|$)"), 1)  # (cut at ncols: no `]`)
    rate = inner.str.extract_groups(rf"({NUM})(it/s|s/it)")
    bar_gs = fnum(inner.str.extract(ascii_classes(rf"\bglobal_step=({NUM})"), 1))
    bar = msg.str.extract_groups(ascii_classes(r"^Epoch (\d+):(?: :)?\s*\d+%\|[^|]*\|\s*(\d+)/(\d+) \["))
    is_bar = aux == "bar"
    # epoch-seconds stamps in NeMo checkpoint lines
    ep_raw = pl.when(aux.str.starts_with("epoch:")).then(aux.str.slice(6)).otherwise(None)
    m = m.with_columns(
        pl.when(is_json).then(inum(jkey)).when(is_bar).then(
            pl.coalesce(bar_gs.cast(pl.Int64, strict=False),
                        inum(bar.struct.field("1")) * inum(bar.struct.field("3")) + inum(bar.struct.field("2"))))
        .otherwise(pl.col("step")).alias("step"),
        pl.when(is_json).then(pl.coalesce(jnum("loss|train_loss|train/loss|lm_loss|lm loss"), pl.col("loss")))
        .when(is_bar).then(fnum(inner.str.extract(ascii_classes(
            rf"\b(?:reduced_train_loss|train_loss_step|train_loss|loss)=({NUM})"), 1)))
        .otherwise(pl.col("loss")).alias("loss"),
        pl.when(is_json).then(jnum("grad_norm|grad-norm|train/grad_norm"))
        .otherwise(pl.col("grad_norm")).alias("grad_norm"),
        pl.when(is_json).then(pl.coalesce(
            jnum("step_time|iter_time|step_time_s|time_per_step|iteration_time"),
            jnum("elapsed_ms|step_time_ms|iter_time_ms|elapsed_time_per_iteration_ms") / 1000.0))
        .when(is_bar).then(pl.coalesce(
            fnum(inner.str.extract(rf"train_step_timing in s=({NUM})", 1)),
            pl.when(rate.struct.field("2") == "s/it").then(fnum(rate.struct.field("1")))
            .when(fnum(rate.struct.field("1")) > 0).then(1.0 / fnum(rate.struct.field("1")))))
        .otherwise(pl.col("step_time_s")).alias("step_time_s"),
        pl.when(is_json).then(jnum("throughput|tps|tokens_per_sec|tokens_per_second|samples_per_sec"))
        .otherwise(pl.col("throughput")).alias("throughput"),
        pl.when(is_json).then(jnum("total_steps|max_steps|train_iters").cast(pl.Int64, strict=False))
        .otherwise(pl.col("total_steps")).alias("total_steps"),
        # stamp fallbacks: phase datetime, JSON time, NeMo epoch seconds, mpirun stamp
        pl.coalesce(pl.col("_ts"), pl.when(aux == "phase").then(iso(pts_raw, ctx.tz)),
                    pl.when(is_json).then(jts_val), epoch_ts(ep_raw),
                    iso(pl.col("prefix_ts"), ctx.tz)).alias("ts"),
        pl.coalesce(pl.col("_raw"), pl.when(aux == "phase").then(pts_raw),
                    pl.when(is_json).then(jts.str.strip_chars("\"")), ep_raw, pl.col("prefix_ts")).alias("ts_raw"),
    )
    return m.with_columns(
        pl.when(pl.col("ts").is_null()).then(pl.lit("missing")).otherwise(pl.lit("exact")).alias("ts_quality"),
        pl.col("body").alias("message"),
    )


def _timers(lines: pl.DataFrame, m: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Member lines of timer blocks (claimed) and the save/load-checkpoint durations."""
    headers = m.filter(pl.col("aux") == "timer_header").select("line_no") if "aux" in m.columns else None
    empty = pl.DataFrame(schema={"line_no": pl.Int64, "name": pl.Utf8, "dur_s": pl.Float64})
    if headers is None or headers.is_empty():
        return pl.DataFrame(schema={"line_no": pl.Int64}), empty
    hdr = set(headers["line_no"].to_list())
    f = lines.select("line_no", "body").with_columns(
        pl.col("line_no").is_in(list(hdr)).alias("_hdr"),
        (pl.col("body").str.starts_with(" ") & pl.col("body").str.contains(ascii_classes(TIMER_MEMBER))).alias("_mem"),
    ).filter(pl.col("_hdr") | pl.col("_mem"))
    # block = run of members directly after a header (consecutive line numbers)
    f = f.sort("line_no").with_columns(
        ((pl.col("line_no") != pl.col("line_no").shift(1) + 1) | pl.col("_hdr")).fill_null(True).cum_sum().alias("_run"),
    )
    starts = f.group_by("_run").agg(pl.col("_hdr").first().alias("_ok"))
    f = f.join(starts, on="_run").filter(pl.col("_ok") & pl.col("_mem"))
    mem = f.with_columns(pl.col("body").str.extract_groups(ascii_classes(TIMER_MEMBER)).alias(_G)).with_columns(
        pl.coalesce(g("name"), g("sub")).str.strip_chars().alias("name"),
        pl.coalesce(fnum(g("mx")), fnum(g("one")), fnum(g("rv"))).alias("val"),
    ).sort("line_no").with_columns(pl.col("name").forward_fill().over("_run"))
    dur = (mem.filter(pl.col("name").is_in(["save-checkpoint", "load-checkpoint"]) & pl.col("val").is_not_null())
           .group_by("_run", "name").agg(pl.col("line_no").min(), (pl.col("val").max() / 1000.0).alias("dur_s"))
           .select("line_no", "name", "dur_s").sort("line_no"))
    return mem.select("line_no"), dur


def _hf_steps(m: pl.DataFrame, lines: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    aux = pl.col("aux").fill_null("")
    if m.filter(aux == "hfdict").is_empty():
        return m
    ls_hit = lines.filter(pl.col("body").str.contains("logging_steps=", literal=True))
    ls_txt = ls_hit["body"].str.extract(ascii_classes(r"logging_steps=(\d+(?:\.\d+)?)"), 1).drop_nulls()
    tot_txt = m.filter(aux == "banner_kv")["message_m"].str.extract(ascii_classes(r"^Total optimization steps = ([\d,]+)"), 1)
    tot_digits = tot_txt.drop_nulls().str.replace_all(",", "")
    total = int(tot_digits[0]) if tot_digits.len() and len(tot_digits[0]) <= 15 else None
    logging_steps = 1
    if ls_txt.len() and 0 < float(ls_txt[0]) < 1e9:
        v = float(ls_txt[0])
        if v >= 1:
            logging_steps = int(v)
        elif total:
            logging_steps = max(1, int(-(-v * total // 1)))
        else:
            warnings.append("steps: hf logging_steps is a ratio and the total is unknown; step = count of loss dicts")
    else:
        warnings.append("steps: hf logging_steps unknown; step = resume step + count of loss dicts")
    seq = m.filter(aux.is_in(["hfdict", "banner", "resume"])).select("line_no", "aux", "step").sort("line_no")
    seq = seq.with_columns((pl.col("aux") == "banner").cum_sum().alias("_seg")).with_columns(
        pl.when(pl.col("aux") == "resume").then(pl.col("step")).forward_fill().over("_seg").fill_null(0).alias("_base"),
        (pl.col("aux") == "hfdict").cast(pl.Int64, strict=False).cum_sum().over("_seg").alias("_k"),
    ).filter(pl.col("aux") == "hfdict").select(
        "line_no", (pl.col("_base") + pl.col("_k") * logging_steps).alias("_dstep"))
    return m.join(seq, on="line_no", how="left").with_columns(
        pl.coalesce("step", "_dstep").alias("step"),
        pl.when(aux == "hfdict").then(pl.coalesce("total_steps", pl.lit(total, pl.Int64)))
        .otherwise(pl.col("total_steps")).alias("total_steps"),
    ).drop("_dstep")


def _keras_steps(m: pl.DataFrame) -> pl.DataFrame:
    """Keras progress lines count batches within the epoch: with an `Epoch E/T` line before them,
    step = (E - 1) * batches + n and total_steps = T * batches. Lines before the first `Epoch` line
    (a log cut at its head) belong to the epoch before the next one, E - 1."""
    aux = pl.col("aux").fill_null("")
    if m.filter(aux == "keras").is_empty():
        return m
    is_ep = aux == "kepoch"
    ep = pl.when(is_ep).then(pl.col("code").cast(pl.Int64, strict=False))
    tot = pl.when(is_ep).then(pl.col("total_steps"))
    m = m.sort("line_no").with_columns(
        pl.coalesce(ep.forward_fill(), ep.backward_fill() - 1).alias("_kep"),
        pl.coalesce(tot.forward_fill(), tot.backward_fill()).alias("_ktot"))
    k = (aux == "keras") & (pl.col("_kep") >= 1).fill_null(False)
    return m.with_columns(
        pl.when(k).then((pl.col("_kep") - 1) * pl.col("total_steps") + pl.col("step"))
        .otherwise(pl.col("step")).alias("step"),
        pl.when(k).then(pl.col("_ktot") * pl.col("total_steps")).when(is_ep).then(None)
        .otherwise(pl.col("total_steps")).alias("total_steps"),
        pl.when(is_ep).then(None).otherwise(pl.col("code")).alias("code"),
    ).drop("_kep", "_ktot")


def _nnunet_steps(m: pl.DataFrame) -> pl.DataFrame:
    """nnU-Net epoch-time lines take their step (the epoch) from the last `epoch: N` / `Epoch N` line
    above them; one with none above (a log cut at its head) keeps a null step (no step row)."""
    aux = pl.col("aux").fill_null("")
    if m.filter(aux == "nnunet").is_empty():
        return m
    is_ep = aux == "nnepoch"
    ep = pl.when(is_ep).then(pl.col("code").cast(pl.Int64, strict=False))
    m = m.sort("line_no").with_columns(ep.forward_fill().alias("_nep"))
    return m.with_columns(
        pl.when(aux == "nnunet").then(pl.col("_nep")).otherwise(pl.col("step")).alias("step"),
        pl.when(aux == "nnunet").then(pl.col("_nep")).otherwise(pl.col("epoch")).alias("epoch"),
        pl.when(is_ep).then(None).otherwise(pl.col("code")).alias("code"),
    ).drop("_nep")


def _metriclogger_steps(m: pl.DataFrame) -> pl.DataFrame:
    """A MetricLogger row wrapped over lines: its tail (`time: ..  data: ..`) takes the step and total of the
    last head (`[ 200/10175]  eta: ..`) above it; a tail with none above keeps a null step (no step row)."""
    aux = pl.col("aux").fill_null("")
    if m.filter(aux == "mltail").is_empty():
        return m
    is_head = aux == "mlhead"
    m = m.sort("line_no").with_columns(
        pl.when(is_head).then(pl.col("code").cast(pl.Int64, strict=False)).forward_fill().alias("_mls"),
        pl.when(is_head).then(pl.col("total_steps")).forward_fill().alias("_mlt"))
    tail = aux == "mltail"
    return m.with_columns(
        pl.when(tail).then(pl.col("_mls")).otherwise(pl.col("step")).alias("step"),
        pl.when(tail).then(pl.col("_mlt")).when(is_head).then(None).otherwise(pl.col("total_steps")).alias("total_steps"),
        pl.when(is_head).then(None).otherwise(pl.col("code")).alias("code"),
    ).drop("_mls", "_mlt")


def _torchtitan_times(steps: pl.DataFrame) -> pl.DataFrame:
    tt = pl.col("framework") == "torchtitan"
    s = steps.sort("line_no")
    prev_ts = pl.col("ts").shift(1).over("framework")
    prev_step = pl.col("step").shift(1).over("framework")
    dt = (pl.col("ts") - prev_ts).dt.total_microseconds() / 1e6
    ds = pl.col("step") - prev_step
    return s.with_columns(
        pl.when(tt & pl.col("step_time_s").is_null() & (ds > 0) & (dt >= 0))
        .then(dt / ds).otherwise(pl.col("step_time_s")).alias("step_time_s"))


def _checkpoints(ck: pl.DataFrame, steps: pl.DataFrame, dur: pl.DataFrame) -> pl.DataFrame:
    """Merge detail lines into their start rows; fill step, path and duration."""
    if ck.is_empty():
        return ck
    ck = ck.sort("line_no").with_columns(pl.col("detail").fill_null(False))
    # DeepSpeed tag -> step
    ck = ck.with_columns(pl.coalesce(
        pl.col("step"),
        pl.when(pl.col("framework") == "deepspeed").then(
            pl.col("aux").str.extract(ascii_classes(r"(\d+)$"), 1).cast(pl.Int64, strict=False)),
        step_from_path()).alias("step"))
    # detail rows (path only) fold into the nearest earlier start row of the same framework
    det = ck.filter(pl.col("detail"))
    main = ck.filter(~pl.col("detail"))
    if not det.is_empty():
        starts = main.filter(pl.col("ck_event") == "save_start").select(
            pl.col("line_no").alias("_sline"), "framework", pl.col("line_no").alias("_key"))
        j = det.join_asof(starts, left_on="line_no", right_on="_key", by="framework", strategy="backward", check_sortedness=False)
        j = j.with_columns(((pl.col("line_no") - pl.col("_sline")) <= 50).fill_null(False).alias("_fold"))
        fold = j.filter(pl.col("_fold")).group_by("_sline").agg(pl.col("path").first().alias("_dpath"),
                                                                pl.col("step").first().alias("_dstep"))
        main = main.join(fold, left_on="line_no", right_on="_sline", how="left").with_columns(
            pl.coalesce("path", "_dpath").alias("path"), pl.coalesce("step", "_dstep").alias("step"),
        ).drop("_dpath", "_dstep")
        own = j.filter(~pl.col("_fold")).drop("_sline", "_key", "_fold")
        main = pl.concat([main, own], how="diagonal_relaxed").sort("line_no")
    # torchtitan save/load rows without a step: last step logged before them
    if not steps.is_empty():
        last = steps.filter(pl.col("framework") == "torchtitan").select(
            pl.col("line_no").alias("_k"), pl.col("step").alias("_last")).sort("_k")
        if not last.is_empty():
            main = main.join_asof(last, left_on="line_no", right_on="_k", strategy="backward", check_sortedness=False).with_columns(
                pl.when((pl.col("framework") == "torchtitan") & (pl.col("ck_event") == "save_start"))
                .then(pl.coalesce("step", "_last")).otherwise(pl.col("step")).alias("step"),
            ).drop("_k", "_last")
    # Megatron save-/load-checkpoint timers -> duration of the row just before the block
    if not dur.is_empty():
        prev = main.select(pl.col("line_no").alias("_cl"), pl.col("ck_event").alias("_ce"),
                           pl.col("line_no").alias("_k")).sort("_k")
        d = dur.join_asof(prev, left_on="line_no", right_on="_k", strategy="backward", check_sortedness=False).filter(
            ((pl.col("name") == "save-checkpoint") & (pl.col("_ce") == "save_end"))
            | ((pl.col("name") == "load-checkpoint") & (pl.col("_ce") == "load_end"))
        ).select(pl.col("_cl").alias("line_no"), "dur_s").unique("line_no", keep="first")
        main = main.join(d, on="line_no", how="left").with_columns(
            pl.coalesce("duration_s", "dur_s").alias("duration_s")).drop("dur_s")
    # end rows: step/path from, and duration against, the nearest earlier start of the same framework
    for end, start in (("save_end", "save_start"), ("load_end", "load_start")):
        st = main.filter(pl.col("ck_event") == start).select(
            pl.col("line_no").alias("_k"), "framework", pl.col("ts").alias("_sts"),
            pl.col("step").alias("_sstep"), pl.col("path").alias("_spath")).sort("_k")
        if st.is_empty():
            continue
        main = main.sort("line_no").join_asof(st, left_on="line_no", right_on="_k", by="framework",
                                              strategy="backward", check_sortedness=False)
        is_end = pl.col("ck_event") == end
        same = pl.col("step").is_null() | pl.col("_sstep").is_null() | (pl.col("step") == pl.col("_sstep"))
        secs = (pl.col("ts") - pl.col("_sts")).dt.total_microseconds() / 1e6
        main = main.with_columns(
            pl.when(is_end & same).then(pl.coalesce("step", "_sstep")).otherwise(pl.col("step")).alias("step"),
            pl.when(is_end & same).then(pl.coalesce("path", "_spath")).otherwise(pl.col("path")).alias("path"),
            pl.when(is_end & same & pl.col("duration_s").is_null() & (secs >= 0)).then(secs)
            .otherwise(pl.col("duration_s")).alias("duration_s"),
        ).drop("_k", "_sts", "_sstep", "_spath")
    return main.sort("line_no")


def _overflow_states(m: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    """Tell a healthy loss-scale warm-up from a numerics failure. Each skipped-step line stays `overflow`
    (a warning: dynamic loss scaling doing its job) unless the scale is at its floor (the new scale is not
    below the attempted one, or either is at most 1: every later step will overflow too; for fairseq, whose
    floor is 1e-4, a scale within FAIRSEQ_NEAR_FLOOR_HALVINGS halvings of it) -> `loss_scale_min`,
    or it belongs to the run of PERSISTENT_RUN or more skipped steps that ends the file with no other line
    after it and has brought the scale within NEAR_FLOOR_HALVINGS halvings of the floor (or prints no scale):
    the run never recovered -> `overflow_persistent`. A trailing run still at a high scale stays `overflow`."""
    aux = pl.col("aux").fill_null("")
    is_fs = aux == "ovf_fs"
    is_ovf = (aux == "ovf") | is_fs
    if m.filter(is_ovf).is_empty():
        return m
    msg = pl.col("message_m")
    frm = fnum(msg.str.extract(ascii_classes(SCALE_FROM), 1))
    to = fnum(msg.str.extract(ascii_classes(SCALE_TO), 1))
    fs_floor = FAIRSEQ_MIN_LOSS_SCALE * 2 ** FAIRSEQ_NEAR_FLOOR_HALVINGS
    floor = (pl.when(is_fs).then(to <= fs_floor)
             .otherwise((to <= 1.0) | (frm <= 1.0) | (to >= frm))).fill_null(False)
    # the last line of the file that is neither blank nor part of an overflow record
    family = m.filter(aux.is_in(["ovf", "ovf_fs", "ovf_note"]) | (pl.col("code") == "loss_scale_min"))["line_no"]
    others = lines.filter(~pl.col("line_no").is_in(family.implode()) & (pl.col("body").str.strip_chars() != ""))
    last_other = others["line_no"].max() if not others.is_empty() else 0
    run = (m.filter(is_ovf & (pl.col("line_no") > last_other)).sort("line_no")
           .with_columns(pl.coalesce(to, frm).alias("_scale"), is_fs.alias("_fs")))
    near = False
    if run.height >= PERSISTENT_RUN:
        last_scale, last_fs = run["_scale"][-1], bool(run["_fs"][-1])
        band = fs_floor if last_fs else 2.0 ** NEAR_FLOOR_HALVINGS
        near = last_scale is None or last_scale != last_scale or last_scale <= band
    persistent = (pl.col("line_no") > last_other) & pl.lit(near)
    return m.with_columns(
        pl.when(is_ovf & floor).then(pl.lit("loss_scale_min"))
        .when(is_ovf & persistent).then(pl.lit("overflow_persistent"))
        .otherwise(pl.col("code")).alias("code"),
        pl.when(is_ovf & (floor | persistent)).then(pl.lit("error")).otherwise(pl.col("severity")).alias("severity"),
    )


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    warnings: list[str] = []
    empty = Extraction(events=empty_events(),
                       tables={"train_steps": empty_table("train_steps"), "checkpoints": empty_table("checkpoints")})
    if lines.is_empty():
        return empty
    cand = _prepare(lines, ctx)
    m = _match_rules(cand)
    if m.is_empty():
        return empty
    m = _finish_rows(m, ctx)
    # Megatron fresh start: the metadata-file warning belongs to the following 'will not load' line
    aux = pl.col("aux").fill_null("")
    fresh2 = set(m.filter((pl.col("kind") == "train_start") & (pl.col("code") == "fresh")
                          & (pl.col("framework") == "megatron"))["line_no"].to_list())
    f1 = m.filter(aux == "fresh1")["line_no"].to_list()
    lone = [n for n in f1 if not any((n + k) in fresh2 for k in (1, 2, 3))]
    m = m.with_columns(
        pl.when(pl.col("line_no").is_in(lone)).then(pl.lit("train_start")).otherwise(pl.col("kind")).alias("kind"),
        pl.when(pl.col("line_no").is_in(lone)).then(pl.lit("fresh")).otherwise(pl.col("code")).alias("code"),
        pl.when(pl.col("line_no").is_in(lone)).then(pl.lit("megatron")).otherwise(pl.col("framework")).alias("framework"),
    )
    m = _hf_steps(m, lines, warnings)
    m = _keras_steps(m)
    m = _nnunet_steps(m)
    m = _metriclogger_steps(m)
    m = _overflow_states(m, lines)
    timer_lines, dur = _timers(lines, m)
    host = pl.lit(ctx.host_hint, dtype=pl.Utf8).alias("host")

    # train_steps
    steps = m.filter((pl.col("tbl") == "step") & pl.col("step").is_not_null()).with_columns(host)
    steps = _torchtitan_times(steps) if not steps.is_empty() else steps
    # a bad step: loss or grad norm NaN/Inf, NaN iterations counted, or steps skipped at the minimum loss scale
    bad = ((pl.col("loss").is_nan() | pl.col("loss").is_infinite()).fill_null(False)
           | (pl.col("grad_norm").is_nan() | pl.col("grad_norm").is_infinite()).fill_null(False)
           | (pl.col("nan_iters") > 0).fill_null(False)
           | ((pl.col("skipped") > 0) & (pl.col("loss_scale") <= 1.0)).fill_null(False))
    steps = steps.with_columns(bad.alias("_bad"))
    # recovered: a good step was logged after it in this file (code nan_recovered, a warning); otherwise the
    # NaN persisted to the end of the log (code nan, an error)
    last_good = steps.filter(~pl.col("_bad"))["line_no"].max() if not steps.is_empty() else None
    recovered = pl.col("line_no") < pl.lit(last_good if last_good is not None else -1)
    step_events = steps.with_columns(
        pl.lit("step").alias("kind"), pl.col("step").cast(pl.Utf8).alias("code"),
        pl.when(pl.col("_bad")).then(pl.lit("warning")).otherwise(pl.lit("info")).alias("severity"))
    nan_events = steps.filter(pl.col("_bad")).with_columns(
        pl.lit("nan").alias("kind"),
        pl.when(recovered).then(pl.lit("nan_recovered")).otherwise(pl.lit("nan")).alias("code"),
        pl.when(recovered).then(pl.lit("warning")).otherwise(pl.lit("error")).alias("severity"))

    # checkpoints
    ck = _checkpoints(m.filter(pl.col("tbl") == "ckpt").with_columns(host), steps, dur)
    ck_events = ck.filter(pl.col("kind").is_not_null()).with_columns(
        pl.col("step").cast(pl.Utf8).alias("code"), pl.col("severity").fill_null("info"))
    other = m.filter(pl.col("kind").is_not_null() & pl.col("tbl").is_null()).with_columns(
        host, pl.col("severity").fill_null("info"))
    parts = [events_frame(x.with_columns(pl.lit(SPEC.name).alias("source")))
             for x in (step_events, nan_events, ck_events, other) if not x.is_empty()]
    events = pl.concat(parts).sort("line_no", "kind") if parts else empty_events()

    ignored = m.filter(pl.col("ignore").fill_null(False))["line_no"]
    claimed_rule = m.filter(~pl.col("ignore").fill_null(False))["line_no"]
    claimed = pl.concat([claimed_rule, timer_lines["line_no"]]).unique().sort()
    ignored = ignored.filter(~ignored.is_in(claimed.implode())).unique().sort()
    return Extraction(
        events=events,
        tables={"train_steps": table_frame("train_steps", steps), "checkpoints": table_frame(
            "checkpoints", ck.rename({"ck_event": "event"}) if "ck_event" in ck.columns else ck)},
        claimed=claimed.alias("line_no").cast(pl.Int64, strict=False),
        ignored=ignored.alias("line_no").cast(pl.Int64, strict=False),
        warnings=warnings,
    )


SPEC = ParserSpec(
    name="steps",
    scope="process",
    description="Training step and checkpoint lines (Megatron-LM, NeMo, HF Trainer, DeepSpeed, "
                "torchtitan, Lightning, JSON lines)",
    formats=("megatron", "nemo", "hf_trainer", "deepspeed", "torchtitan", "lightning", "jsonl"),
    kinds=("step", "checkpoint_save_start", "checkpoint_save_end", "checkpoint_load", "train_start",
           "train_end", "nan", "requeue"),
    tables=("train_steps", "checkpoints"),
    trigger=tuple(KEYWORDS),
)
