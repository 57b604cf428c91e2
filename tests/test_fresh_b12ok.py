"""The real healthy-trap logs of fixtures/fresh/b12ok (public threads held out from the real samples and from
every other fresh set; sources and what each thread says in its README.md), analyzed end to end: nothing was
interrupted in any of them (the alarming lines are warnings, notices or the experiment tracker's own errors), so
the verdict must be `none`: no interruption, action none, no culprit, no evidence. Then the families the fixes
cover, beyond the posted lines, and their counter-examples: the same files with a real failure after the noise
still read as that failure."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b12ok"

CASES = sorted([
    "deepspeed5779-loss-scaler-hysteresis-overflow",
    "hypertorch121-dataloader-worker-count-userwarning",
    "modelscope192-ddp-find-unused-parameters-notice",
    "opensloth17-destroy-process-group-not-called-at-exit",
    "sam2-492-grad-strides-userwarning-ignore",
    "segformer73-reducer-glog-grad-strides-4gpu",
    "tf43546-bfc-allocator-not-a-failure",
    "transformers9996-deepspeed-zero2-overflow-warmup-t5",
    "wandb4537-api-500-between-lightning-steps",
    "wandb8683-500-encountered-retrying-request",
])

# cases the analyzer still does not get right (none after this batch's family rules)
XFAIL: dict[str, str] = {}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == CASES


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(reason=XFAIL[c], strict=True)) if c in XFAIL else c
    for c in CASES
])
def test_fresh_b12ok_verdict_is_none(case: str, tmp_path: Path) -> None:
    report = analyze(FRESH / case, tmp_path / "out", html=False).report
    v = report["verdict"]
    assert (v["kind"], v["action"], v["culprit"]["host"], v["culprit"]["rank"], v["culprit"]["pci_bus_id"]) == (
        "none", "none", None, None, None), v["summary"]
    assert v["evidence"] == [] and report["interruptions"] == []
    # every file was read by a parser (a healthy log no parser claims reads as unknown)
    assert all(s["parser"] for s in report["sources"]), report["sources"]


# the families, beyond the posted lines: (file, text) that must read as no interruption
HEALTHY_VARIANTS = {
    # c10's TORCH_WARN, 2.2+ rendering behind a rank prefix (a reducer notice with its body lines)
    "torch-warn-stamped-rank-prefixed": ("rank3.log", (
        "[rank3]:[W1126 10:00:01.123456789 reducer.cpp:1400] Warning: find_unused_parameters=True was specified in "
        "DDP constructor, but did not find any unused parameters in the forward pass. This flag results in an "
        "extra traversal of the autograd graph every iteration,  which can adversely affect performance. "
        "(function operator())\n")),
    # Python's warnings module with its file:line head and the echoed source line, error words inside
    "python-futurewarning-with-source-line": ("train.log", (
        "/opt/conda/lib/python3.10/site-packages/torch/cuda/amp/grad_scaler.py:120: FutureWarning: "
        "`torch.cuda.amp.GradScaler(args...)` is deprecated and will fail in a future release.\n"
        "  warnings.warn(\n")),
    # a TORCH_WARN surfaced to Python: the reducer's stride notice, all three lines, with a step log around it
    "grad-strides-userwarning-between-steps": ("train.log", (
        "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300000\n"
        "/usr/lib/python3/dist-packages/torch/autograd/graph.py:744: UserWarning: Grad strides do not match "
        "bucket view strides. This may indicate grad was not created according to the gradient layout contract, "
        "or that the param's strides changed since DDP was constructed.  This is not an error, but may impair "
        "performance.\n"
        "grad.sizes() = [384, 384, 1, 1], strides() = [384, 1, 384, 384]\n"
        "bucket_view.sizes() = [384, 384, 1, 1], strides() = [384, 1, 1, 1] (Triggered internally at "
        "/pytorch/torch/csrc/distributed/c10d/reducer.cpp:334.)\n"
        "Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.100000\n")),
    # wandb's other trouble lines while the loop runs
    "wandb-network-retry-and-errors": ("slurm-77.out", (
        "wandb: Network error (ReadTimeout), entering retry loop.\n"
        "wandb: ERROR Error while calling W&B API: context deadline exceeded (<Response [500]>)\n"
        "wandb: ERROR Error while calling W&B API: An internal error occurred. Please contact support. "
        "(<Response [500]>)\n"
        "wandb: Network error (HTTPError), entering retry loop.\n")),
}


@pytest.mark.parametrize("variant", sorted(HEALTHY_VARIANTS))
def test_family_variants_read_as_no_interruption(variant: str, tmp_path: Path, job_of) -> None:
    name, text = HEALTHY_VARIANTS[variant]
    report = analyze(job_of({name: text}), tmp_path / "out", html=False).report
    assert report["verdict"]["kind"] == "none", report["verdict"]["summary"]
    assert all(s["parser"] for s in report["sources"])


# counter-examples: the noise does not hide a real failure after it
def test_a_traceback_after_wandb_errors_is_still_the_failure(tmp_path: Path, job_of) -> None:
    text = ("wandb: ERROR Run initialization has timed out after 90.0 sec.\n"
            "Traceback (most recent call last):\n"
            '  File "train.py", line 12, in <module>\n'
            "    wandb.init(project='x')\n"
            "wandb.errors.CommError: Run initialization has timed out after 90.0 sec.\n")
    v = analyze(job_of({"train.log": text}), tmp_path / "out", html=False).report["verdict"]
    # the exception ends the run (no signature names wandb's CommError: unknown cause, but a failure, seen
    # at the exception line, not at the tracker's own `wandb: ERROR` line, which is claimed)
    assert v["kind"] != "none" and "exception at train.log:5" in v["summary"], v["summary"]


def test_a_cuda_oom_after_a_python_warning_is_still_oom(tmp_path: Path, job_of) -> None:
    text = ("/opt/x/train.py:41: UserWarning: This DataLoader will create 16 worker processes in total. Our "
            "suggested max number of worker in current system is 8, which is smaller than what this DataLoader is "
            "going to create.\n"
            "Traceback (most recent call last):\n"
            '  File "train.py", line 50, in <module>\n'
            "    loss.backward()\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 79.15 GiB of which 1.50 GiB is free.\n")
    v = analyze(job_of({"train.log": text}), tmp_path / "out", html=False).report["verdict"]
    assert v["category"] == "oom", v["summary"]


def test_an_exception_line_named_like_a_warning_is_not_claimed_as_one(tmp_path: Path, job_of) -> None:
    """`RuntimeError: ...` (an exception) is no Python warning: a lone one is still a failure."""
    v = analyze(job_of({"train.log": "RuntimeError: Warning: expected all tensors to be on the same device\n"}),
                tmp_path / "out", html=False).report["verdict"]
    assert v["kind"] != "none"
