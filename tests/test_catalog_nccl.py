"""The NCCL / CUDA / NVML / Fabric Manager catalog (docs/catalog-cat-nccl.md): the CUDA error table
is covered family by family, the IB completion statuses are partitioned, and a small job directory
per family (lines as the emitters print them, launcher prefixes included) goes through `analyze`
to the expected category with evidence citing the key line (path:line)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.signatures import load_catalog

CATALOG = load_catalog()
CUDA = [s for s in CATALOG.signatures if s.origin == "cuda.toml"]


def _cuda_rows() -> list[dict]:
    text = resources.files("forensics").joinpath("signatures/cuda_errors.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _cuda_families(text: str) -> list[str]:
    return [s.id for s in CUDA if s.matches_text(text)]


def test_cuda_table_is_the_whole_enum():
    rows = _cuda_rows()
    codes = {int(r["code"]) for r in rows}
    # cudaError_t and CUresult values of CUDA 13.0, both sides of the table
    assert {0, 1} - codes == {0} and {2, 35, 46, 214, 220, 226, 700, 719, 802, 999} <= codes
    assert len(rows) == len(codes) == 134
    assert {r["family"] for r in rows} == {s.id for s in CUDA}


@pytest.mark.parametrize("row", _cuda_rows(), ids=lambda r: r["code"])
def test_every_cuda_error_matches_its_family_only(row):
    """The runtime string (as PyTorch prints it), the runtime name (CuPy, HPC codes), the driver
    name (TF, JAX, cuInit callers) and a glog CHECK on the status value each hit the row's family and
    no other CUDA family."""
    forms = []
    if row["message"]:
        forms += [f"RuntimeError: CUDA error: {row['message']}", f"Cuda failure {row['code']} '{row['message']}'"]
    if row["runtime_name"]:
        forms.append(f"cupy_backends.cuda.api.runtime.CUDARuntimeError: {row['runtime_name']}")
    if row["driver_name"]:
        forms.append(f"F0101 10:00:00.000 12 gpu_init.cc:80] Failed call to cuInit: {row['driver_name']}")
    forms.append(f"THCudaCheck FAIL file=/pytorch/aten/src/THC/x.cu line=66 error={row['code']} : cuda runtime error ({row['code']})")
    # glog CHECKs on the status (Caffe's CUDA_CHECK appends cudaGetErrorString; code-only and reversed forms)
    forms.append(f"F1122 12:29:18.252681  3480 gpu_memory.cpp:152] Check failed: error == cudaSuccess ({row['code']} vs. 0)"
                 f"  {row['message']}".rstrip())
    forms.append(f"F0101 12:00:00.123456  4242 cuda_graph.cc:88] Check failed: status == CUDA_SUCCESS ({row['code']} vs. 0)")
    forms.append(f"Check failed: cudaSuccess == cudaGetLastError() (0 vs. {row['code']})")
    # RELION's HANDLE_ERROR (`ERROR: <string> in <file> at line <n> (error-code <n>)`) and the CUDA by Example
    # HandleError shape in a CUDA source file
    forms.append(f"ERROR: {row['message'] or 'x'} in /home/u/relion/src/acc/cuda/custom_allocator.cuh at line 176 "
                 f"(error-code {row['code']})")
    if row["message"] and row["family"] != "cuda-api-misuse":
        forms.append(f"{row['message']} in /src/kernels/reduce.cu at line 88")
    for text in forms:
        assert _cuda_families(text) == [row["family"]], text


@pytest.mark.parametrize(("code", "category"), [
    ("802", "nvlink"), ("220", "nvlink"), ("214", "gpu_memory"), ("226", "nvlink"), ("35", "nccl_config"),
    ("34", "nccl_config"), ("100", "nccl_config"), ("46", "nccl_config"), ("803", "gpu_driver_firmware"),
    ("700", "cuda_error"), ("719", "cuda_error"), ("999", "cuda_error"), ("2", "oom"), ("209", "framework_bug"),
    ("500", "framework_bug"), ("1", "cuda_error"),
])
def test_cuda_family_categories(code, category):
    row = next(r for r in _cuda_rows() if r["code"] == code)
    assert CATALOG.by_id(row["family"]).category == category


def test_generic_cuda_messages_need_a_cuda_wrapper():
    # the API-misuse strings are ordinary English: only inside an explicit CUDA error
    assert _cuda_families("ValueError: invalid argument for --lr") == []
    assert _cuda_families("OSError: file not found: /data/x") == []
    # distinctive ones need only a CUDA word on the line
    assert _cuda_families("Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
                          "calling NumCudaDevices() that might have already set an error? Error 802: system not yet "
                          "initialized") == ["cuda-system-not-ready"]
    assert _cuda_families("the fabric is not ready: system not yet initialized") == []
    # the HandleError shape counts in CUDA source only; the bare `(error-code N)` of RELION needs its `at line`
    assert _cuda_families("out of memory in /src/alloc.cpp at line 9") == []
    assert _cuda_families("invalid argument in /src/kernels/reduce.cu at line 88") == []
    assert _cuda_families("ERROR: out of memory in /src/acc/cuda/custom_allocator.cuh at line 176") == ["cuda-oom"]
    assert _cuda_families("exit status (error-code 700)") == []


def test_ib_completion_statuses_are_partitioned():
    """Each ibv_wc_status 1..23 belongs to exactly one code-keyed IB completion signature."""
    ib = [s for s in CATALOG.signatures if s.kind == ("nccl_ib_error",) and s.code]
    owners = {c: [s.id for s in ib if c in s.code] for c in map(str, range(1, 24))}
    assert all(len(v) == 1 for v in owners.values()), owners
    assert owners["4"] == ["nccl-ib-local-setup-error"] and owners["12"] == ["nccl-ib-retry-exceeded"]
    assert CATALOG.by_id("nccl-ib-local-setup-error").category == "nccl_config"
    assert CATALOG.by_id("nccl-ib-flush-error").role == "cascade"


# --- end to end ------------------------------------------------------------------------------

CASES = {
    "shm-prefixless": ({"nccl.log": (
        "NCCL version 2.7.3+cuda10.1\n"
        "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n"
        "include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-9a1c0e22b1f4d5e6-0-2-1 (size 9637888)\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        "    dist.all_reduce(t)\n"
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled system error, NCCL version 2.7.3\n"
    )}, "nccl_config", "nccl.log", 2),
    "shm-extend-enospc": ({"rank0.log": (
        "[2025-02-03 11:00:00] node-a:3016:3235 [0] NCCL INFO Channel 00/02 :    0   1   2   3\n"
        "[2025-02-03 11:00:01] node-a:3016:3235 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend "
        "/dev/shm/nccl-Qm31xT to 9637892 bytes, error: No space left on device (28)\n"
        "\n"
        "[2025-02-03 11:00:01] node-a:3016:3235 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory "
        "segment /dev/shm/nccl-Qm31xT (size 9637888), error: No space left on device (28)\n"
        "node-a:3016:3235 [0] NCCL INFO transport/shm.cc:551 -> 2\n"
        "node-a:3016:3240 [0] NCCL INFO misc/socket.cc:28 -> 3\n"
        "[2025-02-03 11:00:02] node-a:3016:3240 [0] proxy.cc:1326 NCCL WARN Socket recv failed while polling for opId=0x7f1c2c0\n"
    )}, "nccl_config", "rank0.log", 2),
    "nccl-tests-system-error": ({"nccltest.txt": (
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#\n"
        "# Using devices\n"
        "#   Rank  0 Pid   1688 on    box7 device  0 [0x18] GeForce RTX 2080 Ti\n"
        "#   Rank  1 Pid   1688 on    box7 device  1 [0x3b] GeForce RTX 2080 Ti\n"
        "box7: Test NCCL failure common.cu:777 'unhandled system error'\n"
    )}, "nccl_config", "nccltest.txt", 6),
    "bootstrap-truncated": ({"slurm-4411.out": (
        "1: node-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n"
        "1: node-2:4827:6900 [4] NCCL INFO bootstrap.cc:554 -> 3\n"
        "1: node-2:4827:6900 [4] NCCL INFO transport.cc:204 -> 3\n"
        "1: node-2:4827:4827 [4] NCCL INFO group.cc:418 -> 3\n"
    )}, "nccl_config", "slurm-4411.out", 1),
    "duplicate-gpu": ({"horovod.log": (
        "[1,2]<stdout>:\n"
        "[1,2]<stdout>:gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000\n"
        "[1,2]<stdout>:gpu-03:29880:30398 [0] NCCL INFO init.cc:867 -> 5\n"
        "[1,0]<stdout>:\n"
        "[1,0]<stdout>:gpu-03:29878:30419 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000\n"
        "[1,0]<stdout>:gpu-03:29878:30419 [0] NCCL INFO init.cc:867 -> 5\n"
    )}, "nccl_config", "horovod.log", 2),
    "nvls-bind": ({"nccl.log": (
        "[2026-06-23 15:45:07] pod-x:420:437 [5] transport/nvls.cc:379 (nvlsAllocateMem) NCCL WARN Failed to bind "
        "NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in "
        "the present state'.\n"
        "[2026-06-23 15:45:07] pod-x:420:437 [5] NCCL INFO transport/nvls.cc:420 -> 1\n"
    )}, "nvlink", "nccl.log", 1),
    "ib-local-protection": ({"rank5.log": (
        "node-9:771:790 [5] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.9<0>\n"
        "node-9:771:790 [5] transport/net_ib.cc:1695 NCCL WARN NET/IB : Got completion from peer 10.0.0.4<53211> with "
        "status=4 opcode=1 len=0 vendor err 81 (Write) localGid ::ffff:10.0.0.9 remoteGids::ffff:10.0.0.4 hca mlx5_0\n"
        "node-9:771:790 [5] NCCL INFO transport/net.cc:1310 -> 6\n"
    )}, "nccl_config", "rank5.log", 2),
    "cuda-802-fabric-manager": ({"rank0.log": (
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 12, in <module>\n'
        "    torch.cuda.set_device(local_rank)\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", line 408, in set_device\n'
        "    torch._C._cuda_setDevice(device)\n"
        "RuntimeError: CUDA error: system not yet initialized\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    )}, "nvlink", "rank0.log", 6),
    "cuda-insufficient-driver": ({"rank0.log": (
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 20, in <module>\n'
        "    model = model.cuda()\n"
        "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
    )}, "nccl_config", "rank0.log", 4),
    "cuda-illegal-address-hpl": ({"hpl.log": (
        "HPL ERROR: CUDART Error: cudaMemcpyAsync( ipiv_l, ipiv + step * nb, nb * sizeof(int64_t), "
        "cudaMemcpyDeviceToDevice, fact_stream) = 700 (an illegal memory access was encountered) on node-4 at "
        "(cugetrfs_mp/getrfs_mp.cu:750)\n"
    )}, "cuda_error", "hpl.log", 1),
    "nvml-gpu-lost": ({"monitor.log": (
        "2025-07-01 10:00:00,000 INFO gpu monitor started\n"
        "2025-07-01 10:05:00,000 ERROR collector failed: pynvml.nvml.NVMLError_GpuIsLost: GPU is lost\n"
    )}, "gpu_lost", "monitor.log", 2),
    "fabric-manager-down": ({"fm.log": (
        "[Jan 03 2025 10:00:01] [INFO] [tid 2231] Fabric Manager version 550.90.07 is running with the following configuration options\n"
        "[Jan 03 2025 10:00:02] [ERROR] [tid 2231] fabric manager failed to initialize: detected driver version mismatch\n"
    )}, "nvlink", "fm.log", 2),
}


def _analyze(job_of: Callable[[dict[str, str]], Path], tmp_path: Path, files: dict[str, str]) -> dict:
    return analyze(job_of(files), tmp_path / "out", html=False).report


@pytest.mark.parametrize("case", sorted(CASES))
def test_family_end_to_end(tmp_path: Path, job_of: Callable[[dict[str, str]], Path], case: str) -> None:
    files, category, path, line = CASES[case]
    v = _analyze(job_of, tmp_path, files)["verdict"]
    assert v["category"] == category, (case, v["category"], v["summary"])
    assert any(e["path"] == path and e["line"] == line for e in v["evidence"]), v["evidence"]


def test_shm_failure_outranks_its_socket_cascade(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    v = _analyze(job_of, tmp_path, CASES["shm-extend-enospc"][0])["verdict"]
    assert v["culprit"]["host"] == "node-a"
    assert "/dev/shm" in v["summary"]


def test_nvls_cuda_failure_outranks_an_application_cuda_fault(tmp_path: Path, job_of: Callable[[dict[str, str]], Path]) -> None:
    """A CUDA failure inside NCCL's NVLS transport is a node (NVSwitch) fault; the illegal address
    another program on the node hits is not preferred over it (no stamps: weight decides)."""
    v = _analyze(job_of, tmp_path, {
        "a_hpl.log": "HPL ERROR: CUDART Error: cudaMemcpyAsync( a, b, n, cudaMemcpyDeviceToDevice, s) = 700 "
                     "(an illegal memory access was encountered) on gpu46 at (getrfs_mp.cu:750)\n",
        "nccl.log": "gpu46:78367:78492 [0] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'\n"
                    "gpu46:78367:78492 [0] NCCL INFO transport/nvls.cc:300 -> 1\n",
    })["verdict"]
    assert v["category"] == "nvlink", v["summary"]
    assert any(e["path"] == "nccl.log" and e["line"] == 1 for e in v["evidence"]), v["evidence"]



IBV_ALLOC = [s for s in CATALOG.signatures if s.id == "nccl-ibv-resource-alloc"][0]


@pytest.mark.parametrize("fn", ["ibv_alloc_pd", "ibv_create_cq", "ibv_create_qp", "ibv_reg_mr", "ibv_reg_mr_iova2",
                                "ibv_reg_dmabuf_mr"])
def test_every_verbs_allocation_in_both_wrapper_forms_is_a_limit(fn: str) -> None:
    """src/misc/ibvwrap.cc creates every verbs object through IBV_PTR_CHECK ("Call to <fn> failed") or
    IBV_PTR_CHECK_ERRNO ("... failed with error %s"); both forms, for each allocating call, are the pinned-memory /
    resource-limit family (NCCL troubleshooting guide: remove the memlock limits), a configuration root."""
    for text in (f"host1:10:11 [0] misc/ibvwrap.cc:200 NCCL WARN Call to {fn} failed",
                 f"host1:10:11 [0] misc/ibvwrap.cc:200 NCCL WARN Call to {fn} failed with error Cannot allocate memory",
                 f"ibvwrap.c:130 NCCL WARN Call to {fn} failed with error Resource temporarily unavailable"):
        assert IBV_ALLOC.matches_text(text), text
    assert (IBV_ALLOC.category, IBV_ALLOC.role) == ("nccl_config", "root")


@pytest.mark.parametrize("text", [
    "NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT",
    "NCCL WARN Call to ibv_dereg_mr failed with error Invalid argument errno 22",
    "NCCL WARN Call to ibv_destroy_qp failed with error Device or resource busy errno 16",
    "NCCL WARN Call to ibv_query_port failed with error No such device errno 19",
    "NCCL WARN Call to ibv_create_qp failed with error No such device",
    "NCCL WARN Call to ibv_reg_mr failed with error Input/output error",
])
def test_verbs_calls_outside_the_allocation_family(text: str) -> None:
    """QP state changes, teardown and queries are not allocations; an allocation refused because the device is
    gone (ENODEV / EIO) is no limit either."""
    assert not IBV_ALLOC.matches_text(text)


@pytest.mark.parametrize(("text", "family"), [
    # the library rejected the call: parameters, build, architecture or version (cublas_api.h, cudnn_graph.h,
    # curand.h, cusparse.h, cusolver_common.h status enums)
    ("RuntimeError: cuDNN error: CUDNN_STATUS_VERSION_MISMATCH", "pt-cuda-library-misuse"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasLtMatmul(ltHandle, ...)`",
     "pt-cuda-library-misuse"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH", "pt-cuda-library-misuse"),
    ("F0101 10:00:00.000000 7 random.cu:31] Check failed: status == CURAND_STATUS_SUCCESS (104 vs. 0)  "
     "CURAND_STATUS_OUT_OF_RANGE", "pt-cuda-library-misuse"),
    ("cusolverDnSgetrf failed: CUSOLVER_STATUS_INVALID_VALUE", "pt-cuda-library-misuse"),
    # the others belong elsewhere: memory, a kernel that died, a handle that could not be made
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", None),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm(...)`", None),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", None),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`", None),
])
def test_cuda_library_status_names(text: str, family: str | None) -> None:
    s = CATALOG.by_id("pt-cuda-library-misuse")
    assert s.matches_text(text) is (family is not None), text
    assert _cuda_families(text) == []  # no cudaError_t family claims a library status
