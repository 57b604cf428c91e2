"""The real healthy and benign-warning logs of fixtures/fresh/b6ok (public threads held out from the
real samples and from every other fresh set; sources and what each thread says in its README.md),
analyzed end to end: nothing failed in any of them, so the verdict must be `none` (no interruption,
action none, no culprit). The batch measures the false-alarm rate: a healthy log in a format no parser
claims, or a benign warning read as a fault, reads as a failure."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "b6ok"

CASES = sorted([
    "awsk8s464-mnist-train-epoch-loss-log",
    "awsk8s503-mpirun-stdout-prefixed-allreduce-p5",
    "coreweave43-nvl72-allreduce-results-healthy",
    "csm953-dcgm2-dlopen-libdcgm-so1-fallback",
    "nccl352-all-reduce-perf-lo-no-plugin-works",
    "pytorch137745-c10d-debug-successful-run-torch24",
    "pytorch60716-distributed-launch-19-info-config",
    "pytorch71864-server-socket-not-yet-listening",
    "ray47292-raytrainworker-nccl-async-error-handling-deprecated",
    "torchcomms2358-tcpstore-recvvalue-reset-then-succeeds",
])

# cases the analyzer still does not get right; the reason is what it does
XFAIL = {
    "torchcomms2358-tcpstore-recvvalue-reset-then-succeeds": (
        "TCPStore's `[W…] recvValue failed on SocketImpl(...): Connection reset by peer` is C10D_WARNING "
        "before a rethrow: at init the caller retries (as here, the test then passed), at teardown it is "
        "the symptom of a store server that went away; the lines alone do not say which, and a lone "
        "store peer-closed line is teardown-only evidence, read as unknown"),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == CASES


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(reason=XFAIL[c], strict=True)) if c in XFAIL else c
    for c in CASES
])
def test_fresh_b6ok_verdict_is_none(case: str, tmp_path: Path) -> None:
    v = analyze(FRESH / case, tmp_path / "out", html=False).report["verdict"]
    assert (v["kind"], v["action"], v["culprit"]["host"], v["culprit"]["pci_bus_id"]) == ("none", "none", None, None)


def _verdict(tmp_path: Path, files: dict[str, str]) -> dict:
    job = tmp_path / "job"
    for name, text in files.items():
        (job / name).parent.mkdir(parents=True, exist_ok=True)
        (job / name).write_text(text)
    return analyze(job, tmp_path / "out", html=False).report["verdict"]


# c10d's own info/debug logging (C10D_INFO / C10D_DEBUG / C10D_TRACE, torch/csrc/distributed/c10d/
# logging.h): glog `I` lines tagged `[c10d]`, `[c10d - debug]`, `[c10d - trace]`, with or without the
# glog stamp and thread id, behind a `[rankN]:` prefix or torchrun's `[defaultN]:` tag
C10D_INFO_VARIANTS = {
    "debug-stamped": (
        "[I1010 23:53:41.820038800 TCPStore.cpp:312] [c10d - debug] The server has started on port = 2222.\n"
        "[I1010 23:53:41.825145144 socket.cpp:720] [c10d - debug] The client socket will attempt to connect "
        "to an IPv6 address of (33.193.19.246, 2222).\n"),
    "rank-prefixed-info": (
        "[rank3]:[I1126 10:00:01.123456789 TCPStoreLibUvBackend.cpp:1067] [c10d - debug] Uv main loop running\n"
        "[rank3]:[I1126 10:00:01.223456789 socket.cpp:946] [c10d] The client socket has connected to "
        "[node-7]:29500 on SocketImpl(fd=12, addr=[node-3]:51234, remote=[node-7]:29500).\n"),
    "torchrun-tag-trace-thread-id": (
        "[default0]:[I1126 10:00:02.000001 1234 TCPStore.cpp:275] [c10d - trace] waitForKeys: rank0 done\n"),
    "unstamped-info": "[I socket.cpp:447] [c10d] The server socket has started to listen on [::]:29500.\n",
}


@pytest.mark.parametrize("variant", sorted(C10D_INFO_VARIANTS))
def test_c10d_info_logging_is_no_fault(variant: str, tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"train.log": C10D_INFO_VARIANTS[variant]})
    assert (v["kind"], v["action"]) == ("none", "none")


def test_c10d_error_lines_still_a_fault_beside_info_lines(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"train.log": (
        "[I1126 10:00:01.123456789 socket.cpp:720] [c10d - debug] The client socket will attempt to connect "
        "to an IPv6 address of (10.0.0.5, 40323).\n"
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to [::ffff:0.0.0.5]:40323 "
        "(errno: 110 - Connection timed out).\n"
        "[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of "
        "(05, 40323).\n")})
    assert (v["kind"], v["category"], v["evidence"][0]["signature"], v["evidence"][0]["line"]) == (
        "crash", "nccl_config", "pt-store-rendezvous-failed", 3)


# c10d's renamed environment variables (Utils.hpp getCvarString/getCvarInt/getCvarBool: `Environment
# variable X is deprecated; use TORCH_X instead (function getCvar...)`) and ProcessGroupNCCL's
# `TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is thus deprecated.`
DEPRECATION_VARIANTS = {
    "ray-rank-getcvarstring": (
        "(RayTrainWorker pid=2273, ip=172.24.21.66) [rank7]:[W Utils.hpp:108] Warning: Environment variable "
        "NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead "
        "(function getCvarString)\n"),
    "getcvarint-bare": (
        "[W Utils.hpp:133] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)\n"),
    "getcvarbool-health-check-stamped": (
        "[rank0]:[W1126 10:00:00.111222333 Utils.hpp:164] Warning: Environment variable ENABLE_NCCL_HEALTH_CHECK "
        "is deprecated; use TORCH_ENABLE_NCCL_HEALTH_CHECK instead (function getCvarBool)\n"),
    "avoid-record-streams-default": (
        "[W924 02:01:18.426673989 ProcessGroupNCCL.cpp:981] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the "
        "default now, this environment variable is thus deprecated. (function operator())\n"),
}


@pytest.mark.parametrize("variant", sorted(DEPRECATION_VARIANTS))
def test_c10d_env_deprecation_is_no_fault(variant: str, tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"train.log": DEPRECATION_VARIANTS[variant]})
    assert (v["kind"], v["action"]) == ("none", "none")


# the PyTorch examples' training loop line (pytorch/examples mnist/main.py `'Train Epoch: {} [{}/{}
# ({:.0f}%)]\tLoss: {:.6f}'`, Horovod's copy, Kubeflow's `\tloss={:.4f}`, scripts that append fields)
MNIST_VARIANTS = {
    "examples-tab": "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300039\nTrain Epoch: 1 [640/60000 (1%)]\tLoss: 2.213470\n",
    "kubeflow-loss-eq": "Train Epoch: 2 [0/60000 (0%)]\tloss=0.3021\nTrain Epoch: 2 [10240/60000 (17%)]\tloss=0.2011\n",
    "extra-fields-indented": (
        "        Train Epoch: 3 [16000/60000 (27%)]      Loss: 0.043236\tAcc:0.981\n"
        "        Train Epoch: 3 [16640/60000 (28%)]      Loss: 0.146848\tAcc:0.977\n"),
}


@pytest.mark.parametrize("variant", sorted(MNIST_VARIANTS))
def test_examples_train_epoch_lines_are_steps(variant: str, tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"pytorch-mnist.log": MNIST_VARIANTS[variant]})
    assert (v["kind"], v["action"]) == ("none", "none")


def test_examples_train_epoch_nan_loss_is_numerics(tmp_path: Path) -> None:
    v = _verdict(tmp_path, {"pytorch-mnist.log": (
        "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300039\nTrain Epoch: 1 [640/60000 (1%)]\tLoss: nan\n"
        "Train Epoch: 1 [1280/60000 (2%)]\tLoss: nan\n")})
    assert (v["category"], v["evidence"][0]["signature"], v["evidence"][0]["line"]) == ("numerics", "steps-nan-loss", 2)
