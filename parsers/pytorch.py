"""PyTorch distributed (ProcessGroupNCCL) and Python failure output.

Reference: `../shared/reference/pytorch_dist.md` §1-4. Reads the watchdog timeout of every era
(`[E ProcessGroupNCCL.cpp:N]`, `[rankN]:[E ...]`, glog `[E1218 20:27:21.426415540 file:line]`),
the watchdog status lines, heartbeat monitor, desync report, NCCL errors surfacing in PyTorch, CUDA
errors, OOM, segfaults, NaN and Python tracebacks (grouped per rank when ranks interleave).

Events: watchdog_timeout, watchdog_status (code = work seq, `victim`, `dump`, or `lagging:<ranks>` / `not_joined:<ranks>`
for desync reports), heartbeat_timeout, dist_error (code = ncclResult name), cuda_error, ecc_error,
oom (code = `gpu` | `host` | `shm` | `retry`: which memory ran out, or an allocator's non-fatal notice;
device OOM of PyTorch, JAX/XLA and TensorFlow alike), exception (code = exception type: the final line
of a traceback, of one whose head was cut, or a lone exception line), exception_ignored (code = exception
type, or `ignored` for the head line: an exception Python reported and ignored: the unraisable hook's
`Exception ignored in: ...`, an atexit callback's error, a multiprocessing finalizer's traceback, Python 2's
`Exception X: ... in <...> ignored`, a thread's `Exception in thread <name>:` traceback), checkpoint_error (code = exception
type: an I/O-class exception whose traceback passes through a checkpoint-saving frame), segfault (code =
the signal: SIGSEGV | SIGBUS | SIGFPE | SIGILL | SIGABRT, or `check_failed` for a glog CHECK), nan,
store_error (c10d TCPStore / socket / rendezvous; code = EADDRINUSE | listen_failed | timeout |
connect_failed | peer_closed | refused_retry | rdzv_closed | uniqueid_timeout: a rank waited past the timeout for rank 0
to publish the ncclUniqueId), data_preprocess (context: single-rank data preparation seen in the log,
code = running | done: Hugging Face datasets map/filter progress bars, the faiss k-means banner),
stall_warning (Horovod's stall inspector: ranks that have not submitted a collective's tensors; code =
warning | shutdown), gloo_error (the Gloo transport under ProcessGroupGloo; code = address | connect_failed |
peer_closed | timeout | size_mismatch | loopback_fallback, GLOO_BY_TEXT).
Table: collective_timeouts (one row per timeout line and per status line).
Claimed without an event: companion lines (`Some NCCL operations have failed...`, `To avoid data
inconsistency...`, dump/FlightRecorder lines, `terminate called...`, `what():` and `Exception raised
from ...` / `frame #N:` C++ stacks, desync report detail, CUDA error hints, glog `*** Aborted at` / `PC: @`
lines, XLA BufferAssignment OOM reports), traceback frames.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from parsers.ascii_regex import ascii_classes
from parsers.records import (
    Extraction,
    ParseContext,
    empty_events,
    empty_table,
    events_frame,
    file_keys,
    line_host,
    rank_hint,
    table_frame,
)
from parsers.spec import ParserSpec
from parsers.timestamps import iso, mmdd_time

ANCHORS = (
    r"ProcessGroupNCCL|[Ww]atchdog|WorkNCCL|NCCL error|NCCL operations|NCCL work|NCCLPG|TORCH_NCCL|Traceback|File \"|Error|error|Exception|CUDA|cuda"
    r"|terminate called|what\(\)|frame #|Segmentation fault|Caught signal|NaN|nan|Heartbeat|heartbeat"
    r"|lagging|collective|ranks|started |finished |CUBLAS|CUDNN|ECC|FlightRecorder|dump|During handling"
    r"|The above exception|Last error|memory|RESOURCE_EXHAUSTED|OOM|BufferAssignment|allocation:|fragmentation:"
    r"|\*\*\* |PC: @|Check failed|Bus error|Aborted|Floating point exception|Illegal instruction|Interrupt"
    r"|socket|TCPStore|Rendezvous|rendezvous|store|segmentation fault|floating-point"
    r"|\(\): |double free|corrupted |Signal: |Signal code: |Failing at address: "
    r"|is deprecated; use |environment variable is thus deprecated"
    r"|Warning:|warnings\.warn\(|^grad\.sizes\(\) = |^bucket_view\.sizes\(\) = |find_unused_parameters=True was specified|bucket view strides"
    r"|examples/s|ba/s|exampl|^Clustering \d+ points in "
    r"|Assertion `|Device-side assertion `|device-side assertion failures"
    r"|stall_inspector|submitted to be reduced|^\s*\d+!?: \[|Will shutdown"
    r"|[Gg]loo|Unable to find (?:address|interface) for|timed out connecting: SO_ERROR|Application timeout caused pair"
)

GLOG_RE = r"^\[(?:[IWEF](?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?) (?:\d+ )?|[IWEF] )[^\s\]]+:\d+\] "
PG_TAG_RE = (r"\[(?:PG (?:ID )?(?P<pg>\d+) (?:PG GUID (?P<guid>[^\]]*?) |\((?P<pgdesc>[^)]*)\) )?)?"
             r"Rank (?P<tag_rank>\d+)\]")
# the two ranks of a collective fingerprint mismatch (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp
# checkCollectiveFingerPrint: `Detected mismatch between collectives on ranks. Rank {self} is running collective:
# {fp}, but Rank {other} is running collective: {fp}.`), read by forensics/attribution.py ([pair_report])
MISMATCH_PAIR_RE = re.compile(r"Rank (\d+) is running collective: .*?, but Rank (\d+) is running collective")
WORK_RE = r"WorkNCCL\((?P<kv>(?:[^()]|\([^()]*\))*)\)"

TIMEOUT_MAIN = "Watchdog caught collective operation timeout"
STATUS_SEQ = r"(?:Timeout at NCCL work|detected by watchdog at work|work sequence id): (-?\d+)"
STATUS_ENQ = r"[Ll]ast enqueued (?:NCCL )?work: (-?\d+)"
STATUS_COMP = r"[Ll]ast completed (?:NCCL )?work: (-?\d+)"
VICTIM = r"Received a global timeout from another rank|detected a collective timeout and notified current rank"
HEARTBEAT = r"Heartbeat monitor timed out|watchdog got stuck for \d+ seconds"
STALL = r"stall_inspector\.cc:\d+\]|(?:tensors were )?submitted to be reduced, gathered or broadcasted by subset of"
STALL_SHUTDOWN = r"is stalled for longer than \d+ seconds\. Will shutdown"
STALL_ROW = r"^\s*(?:Missing|Stalled) ranks:\s*$|^\s*\d+!?: \[|ranks are trying to submit different tensors|subset of ranks is submitting tensors"
DESYNC = (
    r"Timeout at collective: |lagging/dead/mismatched ranks|joined but didn't finish collective"
    r"|finished collective #\d+, but didn't join|Snapshot of ranks' latest states|#\d+ (?:started|finished) ranks:"
    r"|^\s*(?:- )?\[[\d, .]+\] (?:started|finished) \w+|are the lagging ranks|Failed to retrieve TORCH_NCCL_DESYNC_DEBUG"
    # the report's head: ProcessGroupNCCL logs `Rank N` and the report's own lines follow (2.x)
    r"|ProcessGroupNCCL\.cpp:\d+\] Rank \d+\s*$"
)
# The desync report's verdict lines (torch/csrc/distributed/c10d/TraceUtils.h, retrieveDesyncReport:
# analyzeLaggingRanks / analyzeMissingRanks, PyTorch 1.11 - 2.x): ranks that entered the oldest pending
# collective and never left it (`[R] joined but didn't finish collective #N`: stuck inside it, code
# `lagging:R`), and ranks that never entered it (`[R] finished collective #N, but didn't join collective
# #N+1`, `ranks [R] are the lagging ranks that caused this timeout. They never joined any collectives`:
# code `not_joined:R`).
# Flight Recorder's analyzer (tools/flight_recorder, `torchfrtrace` / `python -m
# torch.distributed.flight_recorder.fr_trace`, components/builder.py and utils.py match_coalesced_groups /
# check_no_missing_dump_files): a collective some ranks of the group never recorded, in its three wordings
# (PyTorch 2.5's print `Not all ranks joining collective for group <pg>:<desc> collective <name> Missing ranks
# are {3, 4}`, 2.5/2.6's log `Not all ranks joining collective <seq> at entry <id>` and 2.6+'s `Not all ranks
# joining collective, sequence number: <seq>`, both followed by a `missing ranks: {1}` line): code
# `not_joined:R`, as the desync report's never-joined ranks.
FR_NOT_JOINED = r"Not all ranks joining collective"
FR_MISSING = r"(?i)missing ranks(?: are|:) ?\{([\d, ]+)\}"
LAGGING = r"\[([\d, .]+)\] joined but didn't finish"
NOT_JOINED = r"\[([\d, .]+)\] finished collective #\d+, but didn't join|ranks \[([\d, .]+)\] are the lagging"
NCCL_ERR = r"NCCL error in: |NCCL error: "
NCCL_DETAIL = r"^\s*(?P<res>ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidArgument|ncclInvalidUsage|ncclRemoteError|ncclInProgress|ncclTimeout): "
RESULT_BY_TEXT = [
    ("remote process exited or there was a network error", "ncclRemoteError"),
    ("unhandled system error", "ncclSystemError"),
    ("unhandled cuda error", "ncclUnhandledCudaError"),
    ("internal error", "ncclInternalError"),
    ("invalid argument", "ncclInvalidArgument"),
    ("invalid usage", "ncclInvalidUsage"),
    ("NCCL operation in progress", "ncclInProgress"),
    ("timeout", "ncclTimeout"),
]
# a glog/absl CHECK on a CUDA library status is a CUDA error check, not a native crash: Caffe's
# include/caffe/util/device_alternate.hpp `CUDA_CHECK` = `CHECK_EQ(error, cudaSuccess) << " " <<
# cudaGetErrorString(error)` (and CUBLAS_CHECK / CURAND_CHECK / CUDNN_CHECK / CUSPARSE_CHECK with the
# library's `*_SUCCESS` and its error string), the many `CHECK_EQ(cudaSuccess, e)` / `CHECK_EQ(status,
# CUDA_SUCCESS)` copies; glog prints `Check failed: <a> == <b> (<va> vs. <vb>) <message>`.
CUDA_CHECK = (r"Check failed: .*\b(?:cudaSuccess|CUDA_SUCCESS|CUBLAS_STATUS_SUCCESS|CUDNN_STATUS_SUCCESS"
              r"|CURAND_STATUS_SUCCESS|CUSPARSE_STATUS_SUCCESS|CUSOLVER_STATUS_SUCCESS|CUFFT_SUCCESS)\b")
# PyTorch on ROCm raises the same check through hipify: c10/hip's C10_HIP_CHECK prints `HIP error: <hipGetErrorString>`
# (`RuntimeError: HIP error: invalid device function`, `torch.AcceleratorError: HIP error: ...`, followed by
# `Search for `hipErrorInvalidDeviceFunction' in ...` and the `AMD_SERIALIZE_KERNEL=3` / `TORCH_USE_HIP_DSA` hints)
CUDA_ERR = (r"(?:CUDA|HIP) error: |cuda runtime error \(\d+\)|CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+|uncorrectable ECC error|"
            + CUDA_CHECK)
# ggml's CUDA backend (ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_error, behind CUDA_CHECK / CUBLAS_CHECK / CU_CHECK):
# `GGML_LOG_ERROR(GGML_CUDA_NAME " error: %s\n", msg)` (`CUDA`, `ROCm` or `MUSA`), then `"  current device: %d, in
# function %s at %s:%d\n"` (id from cudaGetDevice, -1 when that failed), `"  %s\n"` (the failing statement) and
# GGML_ABORT(GGML_CUDA_NAME " error"), which prints `<file>:<line>: CUDA error` (before ggml's GGML_ABORT,
# `GGML_ASSERT: <file>:<line>: !"CUDA error"`). The device line names the GPU (an index among the process'
# visible devices) of the error line right above it; the abort line restates the error
GGML_DEVICE = r"^\s*current device: (-?\d+), in function \S+ at \S+:\d+\s*$"
GGML_ABORT = r'^\s*(?:GGML_ASSERT: \S+:\d+: !"(?:CUDA|ROCm|MUSA) error"|\S+:\d+: (?:CUDA|ROCm|MUSA) error)\s*$'
# a kernel's own failed assert(), printed by the device runtime once per failing thread before the host sees
# `device-side assert triggered`: NVIDIA's `<file>:<line>: <function>: block: [x,y,z], thread: [x,y,z] Assertion
# `<cond>` failed.` (CUDA C++ Programming Guide, "Assertion"; ATen's CUDA_KERNEL_ASSERT, c10/macros/Macros.h,
# calls __assert_fail; Triton's and Inductor's tl.device_assert print the same, file `unknown` or the kernel's
# .py), ROCm's `<file>:<line>: <function>: Device-side assertion `<cond>' failed.` (hip's __assert_fail,
# amd_device_functions.h), and PyTorch's device-side-assertion summary under TORCH_USE_CUDA_DSA
# (c10/cuda/CUDADeviceAssertionHost.cpp: `N CUDA device-side assertion failures were found on GPU #G!`).
# One event per run of rows (code `device-side assert`); the other rows are claimed
DEVICE_ASSERT = (r":\d+: .*?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `.*` failed\.?\s*$"
                 r"|:\d+: .*?Device-side assertion `.*' failed\.?\s*$"
                 r"|\bCUDA device-side assertion failures were found on GPU #\d+")
# native crashes: shell job-control messages, Python faulthandler, glog/absl failure-signal handlers,
# PyTorch DataLoader worker signal handlers (torch/csrc/DataLoader.cpp), glog CHECK failures, Open MPI's
# signal handler (opal/util/stacktrace.c: `[host:pid] *** Process received signal ***`, then
# `[host:pid] Signal: <strsignal> (<n>)`), and glibc's heap-consistency checks (malloc/malloc.c
# malloc_printerr, which abort(): `free(): invalid pointer`, `double free or corruption (out)`,
# `malloc(): corrupted top size`, `corrupted size vs. prev_size`, `munmap_chunk(): invalid pointer`;
# glibc < 2.26 wraps them as `*** Error in `prog': <msg>: 0x... ***` or `*** glibc detected *** prog: <msg>`)
HEAP_CORRUPTION = (
    r"(?:^\s*|\*\*\* Error in `[^`]*': |\*\*\* glibc detected \*\*\* \S+: )"
    r"(?:(?:free|malloc|realloc|calloc|malloc_consolidate|munmap_chunk|_int_free|_int_malloc|_int_realloc"
    r"|tcache_thread_shutdown)\(\): (?:invalid|corrupted|double free|unaligned|mismatching|memory corruption"
    r"|smallbin|largebin|unsorted)|double free or corruption|corrupted (?:size vs\. prev_size|double-linked list))"
)
SIGNAL_BY_TEXT = [
    (HEAP_CORRUPTION, "heap_corruption"),
    (r"Segmentation fault|Caught signal 11\b|\*\*\* SIGSEGV|segmentation fault encountered in worker", "SIGSEGV"),
    (r"Bus error \(core dumped\)|Fatal Python error: Bus error|\*\*\* SIGBUS|\bSignal: Bus error \(7\)", "SIGBUS"),
    (r"Floating point exception|\*\*\* SIGFPE|floating-point exception encountered in worker", "SIGFPE"),
    (r"Illegal instruction|\*\*\* SIGILL", "SIGILL"),
    (r"^Aborted \(core dumped\)|Fatal Python error: Aborted|\*\*\* SIGABRT|\bSignal: Aborted \(6\)", "SIGABRT"),
    (r"Check failed: ", "check_failed"),
]
SEGFAULT = (
    r"Segmentation fault|Caught signal 11\b|^\s*\*\*\* SIG[A-Z]+ (?:\(@[^)]*\) )?received"
    r"|^(?:Bus error|Aborted|Floating point exception|Illegal instruction) \(core dumped\)"
    r"|Fatal Python error: (?:Bus error|Aborted|Floating point exception|Illegal instruction)"
    r"|ERROR: Unexpected (?:segmentation fault|floating-point exception) encountered in worker"
    r"|^\[?F\d{4} [\d:.]+ +\d+ [^\]]+\] Check failed: |^\s*Check failed: "
    r"|\bSignal: (?:Segmentation fault|Bus error|Floating point exception|Illegal instruction|Aborted) \(\d+\)"
    + "|" + HEAP_CORRUPTION
)
SIGNAL_COMPANION = (r"^\s*\*\*\* Aborted at \d+ \(unix time\)|^\s*PC: @ |^\s*\*\*\* Check failure stack trace: \*\*\*"
                    r"|\*\*\* Process received signal \*\*\*|\*\*\* End of error message \*\*\*"
                    r"|\] Signal code: |\] Failing at address: ")
# NaN / Inf reported by frameworks (Megatron rerun state machine and grad-norm checks, fairseq, torch
# anomaly mode, clip_grad_norm_(error_if_nonfinite), TF check_numerics, Keras TerminateOnNaN,
# Lightning EarlyStopping(check_finite), DeepSpeed / fairseq minimum loss scale, TF Estimator's
# NanTensorHook (`Model diverged with loss = NaN.` logged, then NanLossDuringTrainingError `NaN loss during
# training.`), JAX's jax_debug_nans / jax_debug_infs (`FloatingPointError: invalid value (nan) encountered in
# <primitive>`), and the trainers that raise on a non-finite loss: detectron2's SimpleTrainer
# (detectron2/engine/train_loop.py `_write_metrics` / forks' `_detect_anomaly`: `FloatingPointError: Loss
# became infinite or NaN at iteration=N!`), mmcv CheckIsfiniteHook-style asserts (`loss become infinite or
# NaN!`), MosaicML Composer's NaNMonitor (composer/callbacks/nan_monitor.py: `Train loss contains a NaN.`)
NAN = (
    r"found (?:NaN|Inf) in local|Unexpected result (?:nan|-?inf)\b|(?i:loss is (?:nan|inf)\b)"
    r"|(?i:loss bec(?:ame|ome) infinite or nan)|Train loss contains a NaN"
    r"|Minimum loss scale reached|loss scale already at minimum|returned nan values in its"
    r"|gradients are Nan/Inf|Detected nan/inf grad norm|for gradients from `parameters` is non-finite"
    r"|Tensor had (?:NaN|Inf) values|Invalid loss, terminating training|is not finite\. Previous best value"
    r"|Model diverged with loss = NaN|NaN loss during training|invalid value \((?:nan|inf)\) encountered in"
)
# who reported it, in the reporter's own words: Megatron's NaN checks name rank, node (os.uname) and device,
# `Rank 3: found NaN in local grad norm ... Device: 3, node: host-a` (param_and_grad_buffer, optimizer
# clip_grads, loss functions) and its rerun state machine `Rank 7, node host-a, device 7, iteration 9: ...`
SELF_REPORT = (r"\bRank (\d+)(?::.*?,|,) node:? ([A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?)(?:[,;)'\"]|\s|$)")
SELF_DEVICE = r"\bRank \d+[:,].*?(?:Device: |, device )(\d+)\b"
# the same checks in the wording without the node (Megatron-core 0.5-0.7 param_and_grad_buffer.py / forks:
# `Rank 11: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 3`;
# `Rank 0: found Inf in local grad norm ...`): the rank that found it, still the reporter's own
SELF_RANK = r"\bRank (\d+): found (?:NaN|Inf) in local\b"
# Device memory exhaustion in every framework: PyTorch (CUDA/HIP/XPU/MPS caching allocator, cuBLAS/cuDNN
# handles and workspaces), JAX/XLA (RESOURCE_EXHAUSTED, BFC allocator), TensorFlow (ResourceExhaustedError,
# OOM when allocating), CUDA driver; host memory (CPU allocator, ENOMEM); shared memory (/dev/shm, used by
# DataLoader workers: PyTorch's SIGBUS handler and storage sharing errors)
OOM_GPU = (
    r"(?:CUDA|HIP|XPU|NPU|MPS backend) out of memory|CUDA (?:driver )?error: out of memory|OutOfMemoryError"
    r"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_ENOUGH_WORKSPACE"
    r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|cuda(?:Malloc|MallocAsync)? failed: out of memory"
    r"|RESOURCE_EXHAUSTED: .*(?:[Oo]ut of memory|[Ff]ailed to allocate|[Rr]an out of memory|OOM)"
    r"|OOM when allocating tensor|ran out of memory trying to allocate|ResourceExhaustedError.*\bOOM\b"
    r"|OOM during optimization, irrecoverable"
    # the TPU runtime's allocator (torch_xla / XRT, JAX, TF on TPU): `Attempting to reserve 6.48G at the
    # bottom of memory. That was not possible.`, `Error allocating device buffer: Attempting to allocate
    # 15.65G. That was not possible.` (the XLA:TPU compiler's `Ran out of memory in memory space hbm` is above)
    r"|Attempting to (?:reserve|allocate) \S+(?: at the bottom of memory)?\. That was not possible"
    # TensorFlow's TF_CHECK_OK fatal (`F .../random_op_gpu.h:232] Non-OK-status: GpuLaunchKernel(...) status:
    # Internal: out of memory`, `INTERNAL:` in newer TF): the CUDA status string of a failed launch
    r"|Non-OK-status: .*\bstatus: [A-Za-z ]+: out of memory"
)
# host memory: PyTorch's CPU allocator, ENOMEM from fork/mmap, and the allocation-failure words of the other
# runtimes in a training process: Rust's default alloc-error hook (tokenizers, safetensors: `memory allocation
# of N bytes failed`, then abort), NumPy (`_ArrayMemoryError: Unable to allocate 3.2 GiB for an array`),
# CPython's MemoryError
OOM_HOST = (
    r"DefaultCPUAllocator: (?:can't allocate|not enough) memory|\[Errno 12\] Cannot allocate memory"
    r"|memory allocation of \d+ bytes failed|Unable to allocate [\d.]+ [KMGTPE]?i?B for an array"
    r"|^(?:[\w.]+\.)?(?:_Array)?MemoryError\b"
)
OOM_SHM = (
    r"insufficient shared memory \(shm\)|out of shared memory|is killed by signal: Bus error"
    r"|unable to (?:write to|mmap \d+ bytes from|allocate shared memory\(shm\) for) file </torch_"
)
# retried, not fatal: TF/XLA BFC allocator notices; fairseq catching an OOM and skipping the batch
OOM_RETRY = r"The caller indicates that this is not a failure|OOM: Ran out of memory with exception|attempting to recover from OOM"
# Ray's memory monitor's kill of a worker (`ray.exceptions.OutOfMemoryError: Task was killed due to the node running
# low on memory.`): host memory of the node, Ray's record (parsers/ray_cluster.py), not this process's allocator failing
RAY_OOM_KILL = r"ray\.exceptions\.OutOfMemoryError|Task was killed due to the node running low on memory"
OOM_COMPANION = (r"^BufferAssignment (?:OOM Debugging|stats:)|^\s+(?:[\w-]+ )*(?:allocation|fragmentation):\s+\d"
                 r"|Hint: If you want to see a list of allocated tensors when OOM happens")
# c10d TCPStore / socket / torchelastic rendezvous (torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp,
# torch/distributed/elastic/rendezvous): code = what failed
STORE_BY_TEXT = [
    # ProcessGroupNCCL::broadcastUniqueNCCLID (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp): a non-zero
    # rank's store->get of the ncclUniqueId rank 0 publishes; `retreiving` up to PyTorch 2.0, `retrieving`
    # after; e.what() is the store's own timeout (TCPStore `Socket Timeout`, `wait timeout after Nms, keys:`,
    # FileStore/older `Timeout waiting for key`). Rank 0 never published it: rank 0 is busy elsewhere (still
    # preparing data before its first collective) or crashed ("This may indicate a possible application crash
    # on rank 0 or a network set up issue", the suffix PyTorch >= 2.1 adds). Not a rendezvous failure: the
    # store answered. A reset / broken pipe there stays peer_closed (the store's server went away).
    (r"setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[0\].*got error: "
     r"(?:Socket Timeout|wait timeout after|Timeout waiting for key|[Tt]imed out)", "uniqueid_timeout"),
    (r"Address already in use|EADDRINUSE|errno: 98\b", "EADDRINUSE"),
    (r"server socket has failed to listen on any local network address|server could not be initialized on any address",
     "listen_failed"),
    (r"client socket has timed out after|RendezvousTimeout(?:Error|Exception)|Timed out after \d+ seconds waiting for clients"
     r"|rendezvous .*timed out|Socket Timeout|connect\(\) timed out\. Original timeout was"
     r"|wait timeout after \d+ ?ms|Timeout waiting for key", "timeout"),
    (r"RendezvousConnectionError|client socket has failed to connect to any network address"
     r"|network addresses of \(.*\) cannot be retrieved", "connect_failed"),
    # torchelastic's RendezvousClosedError (torch/distributed/elastic/rendezvous/api.py, torchelastic's
    # RendezvousClosedException before it: "Raised when a rendezvous for the specified run_id is closed. This is
    # used to signal completion to nodes that arrive late"): raised by next_rendezvous when the run_id's state
    # is marked closed (dynamic_rendezvous.py / etcd_rendezvous.py), not by a socket; before the socket codes,
    # whose `closed` it is not
    (r"RendezvousClosedError|RendezvousClosedException", "rdzv_closed"),
    (r"Connection reset by peer|recvBytes failed|failed to recv, got 0 bytes|Broken pipe",
     "peer_closed"),
    (r"Connection refused|is not yet listening|No socket on \(.*\) is listening yet", "refused_retry"),
]
STORE = (
    # torchelastic < 0.2.2 (torchelastic/rendezvous/api.py) named them RendezvousClosedException /
    # RendezvousTimeoutException / RendezvousNonRetryableError
    r"\[c10d\]|TCPStore|socket\.cpp|Rendezvous\w*(?:Error|Exception)|DistNetworkError|DistStoreError|c10d store"
    r"|server socket has failed|client socket has (?:timed out|failed)"
    # PyTorch <= 1.12 tcputil::connect (torch/csrc/distributed/c10d/Utils.hpp): a bare RuntimeError
    r"|connect\(\) timed out\. Original timeout was"
    r"|NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[0\] via c10d key-value store"
)
# Gloo (pytorch/gloo, the TCP transport under ProcessGroupGloo: the CPU process groups of torch.distributed, and the
# `backend="gloo"` side groups vLLM, SGLang, Megatron and DeepSpeed build next to NCCL). Its errors reach the log as
# `RuntimeError: [<path>/gloo/...cc:N] <msg>` (GLOO_ERROR_MSG, an IoException), `[enforce fail at <path>/gloo/...cc:N]
# <cond>. <msg>` (GLOO_ENFORCE), wrapped by ProcessGroupGloo's `Gloo connectFullMesh failed with <e.what()>` when they
# happen while the process group forms (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, logAndThrow /
# runtimeFailure). A line is Gloo's when it names Gloo (its path, ProcessGroupGloo, `Gloo connectFullMesh`) or is the
# bare condition of one of device.cc's enforces (a paste that hard-wraps the enforce head onto its own line), or is the
# one message Gloo raises without its path (tcp::Context::signalException's `Application timeout caused pair closure`).
# (pattern, code), first match wins:
GLOO = (r"[Gg]loo|^\s*(?:ifa|rp) != nullptr\. Unable to find (?:address|interface) for"
        r"|^\s*bind_rv == 0\. Unable to find address for|^\s*timed out connecting: SO_ERROR: "
        r"|Application timeout caused pair closure")
GLOO_BY_TEXT = [
    # pair.cc prepareRead: GLOO_ENFORCE_LE(op.preamble.length, op.nbytes, "Received data size doesn't match expected
    # size. Is there a distributed collective mismatch in your code?"): a peer sent more than this rank's collective
    # expects, the ranks run different collectives (sizes) at the same point
    (r"Received data size doesn't match expected size", "size_mismatch"),
    # transport/tcp/device.cc, picking the address the device binds (CreateDeviceAttr): lookupAddrForIface
    # `ifa != nullptr. Unable to find address for: <GLOO_SOCKET_IFNAME>` (the variable names no interface of this
    # host, or is given NCCL's `^lo,docker` exclusion syntax, which Gloo does not take), lookupAddrForHostname
    # `Unable to find address for <host>; bind(2) for <addr> failed with: <strerror>` / `rp != nullptr. Unable to
    # find address for: <host>` (the hostname resolves to nothing this host can bind), sockaddrToInterfaceName
    # `Unable to find interface for: <addr>`; any other enforce of device.cc is the same lookup (getifaddrs,
    # getaddrinfo, `Cannot connect to self`). The interface / hostname configuration, before any peer is involved
    (r"Unable to find (?:address|interface) for|gloo/transport/(?:tcp|uv)/device\.cc", "address"),
    # a pair whose peer went away: pair.cc read() `Connection closed by peer <addr>` (EOF: "typically caused by a
    # remote worker crashing"), `Read error <addr>: <strerror>` ("a remote worker hanging or bugs in the
    # application"), write() `writev <addr>: <strerror>`, `Socket closed` / `Socket unexpectedly closed`, and the
    # older wording `Connection reset by peer` / `Broken pipe`; also when it ends connectFullMesh (`Gloo
    # connectFullMesh failed with Connection reset by peer`): this rank saw a peer die, the peer's own log has the
    # cause
    (r"Connection closed by peer|Connection reset by peer|Broken pipe|Read error \[|writev \[|Socket (?:unexpectedly )?closed",
     "peer_closed"),
    # a pair that waited past the process group's timeout: pair.cc `Read timeout <addr>` / `Write timeout <addr>`,
    # unbound_buffer.cc waitRecv / waitSend `Timed out waiting <N>ms for recv operation to complete` (send likewise),
    # and the `Application timeout caused pair closure` it signals to every other pair of the context: the peer never
    # reached the same collective
    (r"Read timeout|Write timeout|Timed out waiting \d+ ?ms for (?:recv|send) operation"
     r"|Application timeout caused pair closure", "timeout"),
    # the full mesh never formed while the group was created: helpers.cc ConnectOperation `timed out connecting:
    # SO_ERROR: <strerror>, remote=<addr>` (connection refused or unanswered on the address the peer advertised:
    # typically a loopback or unroutable address from the hostname lookup, the wrong interface chosen, or a
    # firewall), and `connectFullMesh failed with [...pair.cc:N] no error` (the connect returned without an errno:
    # the well-known multi-node interface mismatch, set GLOO_SOCKET_IFNAME)
    (r"connectFullMesh failed|timed out connecting: SO_ERROR", "connect_failed"),
    # ProcessGroupGloo::createDefaultDevice's TORCH_WARN_ONCE when the hostname does not resolve to a usable local
    # address: `Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set
    # the network interface to bind to with GLOO_SOCKET_IFNAME.` Harmless on one host, the cause of the connect
    # failures above across hosts: context
    (r"Using the loopback address as fallback", "loopback_fallback"),
]

# Python exception line with no traceback around it (an excerpt, or a logger printing str(e)):
# a dotted name ending in Error/Exception/Interrupt, a colon, then the message
LONE_EXC = r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)(?: \(see above for traceback\))?:(?:\s|$)"
# Single-rank data preparation (context for a collective that timed out before training started,
# forensics/signatures/precedence.toml [preprocessing_wait]). Hugging Face datasets' map/filter bars
# (datasets/arrow_dataset.py Dataset.map / Dataset.filter: hf_tqdm(unit=" examples", desc=desc or "Map" /
# "Filter"); datasets < 2.x counted batches, unit " ba") whatever desc the caller gives: transformers'
# examples/run_clm.py "Running tokenizer on dataset" and "Grouping texts in chunks of N", LLaMA-Factory
# "Running tokenizer on dataset (num_proc=16)", axolotl "Tokenizing Prompts (num_proc=64)". A bar a
# terminal cut mid-unit (`122.64 exampl`) still counts. faiss' k-means banner (faiss/Clustering.cpp
# Clustering::train_encoded, verbose: "Clustering %zd points in %zdD to %zd clusters, redo %d times, %d
# iterations"). code: done for a bar at 100 % (n == total), else running.
PREPROC_BAR = (r"(?:^|\]:?)\s*[^\[\]|]{2,100}?:\s+(\d{1,3})%\|[^|]*\|\s*(\d+)/(\d+)\s*\[[\d:?]+<[^\]]*?"
               r"(?:\bexamples?/s|\bexampl|\bba/s)")
PREPROC_BANNER = r"^Clustering \d+ points in \d+D to \d+ clusters, redo \d+ times, \d+ iterations"
# a traceback through a checkpoint write (torch.save, DCP, safetensors, framework save helpers): an I/O-class
# exception there is a storage failure, not a bug in the training code
CKPT_FRAME = (
    r'^\s+File "[^"]*", line \d+, in (?:save|_save|_legacy_save|save_checkpoint|_save_checkpoint|save_state|save_model'
    r"|save_file|write_data|_write_files_from_queue|write_record|_write_item|save_pretrained|_save_zero_checkpoint"
    r"|save_sharded_modelopt_state|_save_to_state_dict_file|upload_file|upload_fileobj)\b"
)
CKPT_EXC = (r"^(?:[\w.]+\.)?(?:OSError|IOError|RuntimeError|TimeoutError|BlockingIOError|ConnectionError"
            r"|ConnectionResetError|BrokenPipeError|\w*UploadFailedError|ClientError|EndpointConnectionError"
            r"|\w*TimeoutError)$")
COMPANION = (
    r"Some NCCL operations have failed or timed out|To avoid data inconsistency|To avoid this inconsistency"
    r"|preparing to dump debug info|Finished writing NCCLPG debug info|First PG on this rank"
    r"|Stack trace of the failed collective|FlightRecorder|terminate called|what\(\):"
    r"|Exception raised from .*\(most recent call first\)|^\s*frame #\d+: |watchdog thread terminated with exception"
    r"|CUDA kernel errors might be asynchronously reported|For debugging consider passing CUDA_LAUNCH_BLOCKING"
    r"|Compile with .TORCH_USE_CUDA_DSA|^\s*Last error:\s*$|During handling of the above exception"
    r"|The above exception was the direct cause"
    # ProcessGroupNCCL's warnings of a normal run (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, as
    # TORCH_WARN / LOG(WARNING)): the destructor's shutdown notice in its three wordings (2.4 nightly
    # `process group has NOT been destroyed before it is being destructed`, 2.4-2.5 `... before we destruct
    # ProcessGroupNCCL`, 2.6+ `destroy_process_group() was not called before program exit, which can leak
    # resources`), printed at every exit that skips destroy_process_group; and barrier()'s `using GPU N to
    # perform barrier as devices used by this process are currently unknown` (before a device is bound)
    r"|process group has NOT been destroyed before (?:it is being destructed|we destruct ProcessGroupNCCL)"
    r"|destroy_process_group\(\) was not called before program exit"
    r"|using GPU \d+ to perform barrier as devices used by this process are currently unknown"
    # c10d's renamed environment variables, read at start-up: `TORCH_WARN("Environment variable " + env[i]
    # + " is deprecated; use " + env[0] + " instead")` in getCvarString / getCvarInt / getCvarBool
    # (torch/csrc/distributed/c10d/Utils.hpp, 2.2+: NCCL_ASYNC_ERROR_HANDLING, NCCL_BLOCKING_WAIT,
    # NCCL_DESYNC_DEBUG, ENABLE_NCCL_HEALTH_CHECK ... -> TORCH_*), and ProcessGroupNCCL.cpp's
    # `TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is thus deprecated.`
    r"|Environment variable \S+ is deprecated; use \S+ instead"
    r"|\S+ is the default now, this environment variable is thus deprecated"
    # c10d's own info/debug logging: C10D_INFO / C10D_DEBUG / C10D_TRACE (torch/csrc/distributed/c10d/
    # logging.h) are glog INFO lines, tagged `[c10d]`, `[c10d - debug]` or `[c10d - trace]` in 2.x
    # (TCPStore / libuv backend start, socket connect attempts, store waits). An `I` line is progress,
    # never a fault; the `W`/`E` lines of the same files stay store_error events (STORE_BY_TEXT)
    r"|^\[I(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)? (?:\d+ )?| )[^\s\]]+:\d+\] \[c10d(?: - (?:debug|trace))?\] "
    # warnings, never a failure by themselves (a run that a warned-about condition then kills dies by an
    # exception, an error line or a signal, which the rules above read):
    # - c10's TORCH_WARN / TORCH_WARN_ONCE through the default warning handler (c10/util/Warning.cpp,
    #   c10/util/Logging.cpp): `[W file:line] Warning: msg (function f)` (< 2.2), `[W<mmdd> hh:mm:ss.us
    #   pid file:line] Warning: msg (function f)` (2.2+), often behind `[rankN]:`. glog-style `W` lines
    #   without the `Warning: ` word (C10D_WARNING, LOG(WARNING): TCPStore, socket) are not this: they
    #   stay the store / socket events above
    r"|^\[W(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)? (?:\d+ )?| )[^\s\]]+:\d+\] Warning: "
    # - Python's warnings module (Lib/warnings.py formatwarning: `file:line: Category: message`, then the
    #   warned-at source line, indented), also when a TORCH_WARN reaches Python (`UserWarning: msg
    #   (Triggered internally at file:line.)`) or a paste drops the `file:line: ` head; the category is a
    #   Warning subclass (UserWarning, FutureWarning, DeprecationWarning, RuntimeWarning, ...), never an
    #   exception (`RuntimeError: ...` stays an exception line); the message may start on the next line
    #   (a handler that wraps at the console's width, rich's RichHandler: `file:line: UserWarning:` alone)
    r"|^(?:\S+:\d+: )?[A-Z]\w*Warning:(?: |$)|^\s+warnings\.warn\("
    # - TensorFlow's optional-library notices (tensorflow/tsl stream_executor platform/default/dso_loader.cc
    #   `Could not load dynamic library '%s'; dlerror: %s`, cuda/cudart_stub.cc `Ignore above cudart dlerror if
    #   you do not have a GPU set up on your machine.`, tf2tensorrt/utils/py_utils.cc `TF-TRT Warning: Cannot
    #   dlopen some TensorRT libraries.`), through TF's C++ logger (`2022-06-22 15:44:53.578885: W
    #   .../dso_loader.cc:64] ...`) or bare: TF goes on without the library, on the CPU when it is the CUDA
    #   runtime. Only these: TF also logs real failures at its `W` level (`OP_REQUIRES failed at ...`,
    #   `BaseCollectiveExecutor::StartAbort ...`, the BFC allocator's `ran out of memory`), which stay events
    r"|dso_loader\.cc:\d+\] Could not load dynamic library '[^']+'; dlerror: |^Could not load dynamic library '[^']+'; dlerror: "
    r"|cudart_stub\.cc:\d+\] Ignore above cudart dlerror if you do not have a GPU set up on your machine"
    r"|TF-TRT Warning: Cannot dlopen some TensorRT libraries"
    # - the bodies of the DDP reducer's TORCH_WARN_ONCE performance notices (torch/csrc/distributed/c10d/
    #   reducer.cpp: check_grad_layout's `Grad strides do not match bucket view strides. ... This is not an
    #   error, but may impair performance.` with its `grad.sizes() = ...` / `bucket_view.sizes() = ...`
    #   lines; `find_unused_parameters=True was specified in DDP constructor, but did not find any unused
    #   parameters in the forward pass.`), when posted without the warning's head
    r"|^Grad strides do not match bucket view strides\.|^grad\.sizes\(\) = \[|^bucket_view\.sizes\(\) = \["
    r"|^find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters"
)
PG_EXIT = (r"process group has NOT been destroyed before (?:it is being destructed|we destruct ProcessGroupNCCL)"
           r"|destroy_process_group\(\) was not called before program exit")
TERMINATE_TYPE = r"terminate called after throwing an instance of '([^']+)'"
WATCHDOG_RESTATED = TIMEOUT_MAIN + "|" + HEARTBEAT + r"|watchdog thread terminated with exception"
EXC_LINE = r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?::.*)?$"
# Exceptions that Python reports and then ignores (the process goes on, or exits as it would have):
# - the unraisable hook (Python/errors.c, 3.8+ sys.unraisablehook: `Exception ignored in: <obj>`, 3.12+
#   `Exception ignored in atexit callback: <func>`, `Exception ignored on calling ctypes callback function`,
#   and the other `Exception ignored ...` contexts), then the traceback and its exception line; before 3.8 an
#   atexit callback's error was `Error in atexit._run_exitfuncs:` and a traceback (Modules/atexitmodule.c);
#   Python 2 printed a `__del__` error on one line: `Exception <Type>: <msg> in <bound method ...> ignored`;
# - multiprocessing's finalizers (Lib/multiprocessing/util.py _run_finalizers, and its `multiprocess` fork):
#   each finalizer runs in `try: finalizer() except Exception: traceback.print_exc()`, so its traceback starts
#   at the `_run_finalizers` frame (the temp dir's rmtree at exit, a queue's feeder thread cleanup).
# - a thread's uncaught exception (Lib/threading.py: 3.8+ `threading.excepthook`'s default prints
#   `Exception in thread {thread.name}:` and the traceback, 3.10+ names like `Thread-5 (worker)`; before 3.8
#   `Thread._bootstrap_inner` printed `Exception in thread %s:\n%s`, or `Exception in thread %s (most likely
#   raised during interpreter shutdown):`; `_thread.start_new_thread`'s `Unhandled exception in thread started
#   by <func>` before 3.8, since then the unraisable hook's `Exception ignored in thread started by: <func>`):
#   the thread ends, the interpreter and its other threads go on (a W&B uploader's, a metrics pusher's);
#   what that did to the run, if anything, is another line (the main thread's own error, a watchdog).
# Their final lines are `exception_ignored` events, not `exception`: seen, never the failure of the run.
IGNORED_HEAD = (r"^Exception ignored\b|^Error in atexit\._run_exitfuncs:"
                r"|^Exception in thread \S.*?:(?:\s|$)|^Unhandled exception in thread started by ")
IGNORED_PY2 = r"^Exception [A-Za-z_][\w.]*(?::.*)? in <.*> ignored$"
FINALIZER_FRAME = r'^\s+File "[^"]*multiprocess(?:ing)?[/\\]util\.py", line \d+, in _run_finalizers$'
TB_HEADER = "Traceback (most recent call last):"


def sniff(head: str) -> float:
    if "ProcessGroupNCCL" in head or "WorkNCCL(" in head:
        return 0.9
    if TB_HEADER in head or re.search(r"(?:CUDA|HIP) error: |(?:CUDA|HIP) out of memory|NCCL error", head):
        return 0.6
    return 0.0


def _prep(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """msg (body without a `[rankN]:` left in it and the space after `[rankN]: `), stream, rank."""
    rb = pl.col("body").str.extract(ascii_classes(r"^\s*\[rank(\d+)\]:"), 1).cast(pl.Int64, strict=False)
    spaced = pl.col("text").str.contains(ascii_classes(r"\[rank\d+\]: "), literal=False)
    msg = pl.col("body").str.replace(ascii_classes(r"^\s*\[rank\d+\]:"), "")
    msg = pl.when(spaced & msg.str.starts_with(" ")).then(msg.str.slice(1)).otherwise(msg)
    out = df.with_columns(rb.alias("_rb"), msg.alias("msg"))
    r = pl.coalesce(pl.col("prefix_rank"), pl.col("_rb"))
    stream = (pl.when(r.is_not_null()).then(r)
              .when(pl.col("prefix_local_rank").is_not_null()).then(1_000_000 + pl.col("prefix_local_rank"))
              .when(pl.col("prefix_task").is_not_null()).then(2_000_000 + pl.col("prefix_task"))
              .otherwise(-1))
    if ctx.batched:  # the streams of different files never join
        stream = stream + pl.col("hint_file") * 100_000_000
    return out.with_columns(stream.alias("stream"))


def _group_uid() -> pl.Expr:
    """The PG GUID of a `[PG ID .. PG GUID <uid>(<desc>) Rank N]` tag without its description."""
    return pl.col("guid").str.replace(r"\(.*$", "").str.strip_chars()


def _default_group() -> pl.Expr:
    """Whether a line's `[PG ... Rank N]` tag is the default (world) group's, whose rank is the global rank.
    ProcessGroupNCCL::createLogPrefix (2.4+) writes `[PG ID <local_id_> PG GUID <pg_uid_>(<pg_desc_>) Rank
    <rank_>] `: local_id_ counts the groups this process created (0: the default group, made first), pg_uid_
    is the group's name, the same on every member rank ("a global unique ID across ranks"), and rank_ is the
    rank inside that group; 2.3 wrote `[PG <uid> Rank <rank>] `. In a sub-group (`[PG ID 11 PG GUID 119
    Rank 1]`, `(EXPERT_MODEL_PARALLEL_GROUP)`) `Rank N` is not the global rank, so it names no rank; a bare
    `[Rank N]` (the watchdog's own lines, older releases) is read as before. The group's key is its GUID
    (the member ranks share it; the local ID they do not), or the 2.3 uid."""
    guid = _group_uid()
    return (pl.col("pg").is_null()
            | pl.col("guid").str.contains("(default_pg)", literal=True).fill_null(False)
            | pl.when(guid.is_not_null()).then(guid == "0").otherwise(pl.col("pg") == "0"))


def _common(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """ts, host, rank, pg columns for candidate lines."""
    g = pl.col("msg").str.extract_groups(ascii_classes(GLOG_RE))
    tag = pl.col("msg").str.extract_groups(ascii_classes(PG_TAG_RE))
    df = df.with_columns(g.alias("_g"), tag.alias("_t")).unnest("_g", "_t")
    glog_ts = mmdd_time(pl.col("mmdd"), pl.col("hms"), ctx.ref_year, ctx.tz)
    return df.with_columns(
        pl.coalesce(glog_ts, iso(pl.col("prefix_ts"), ctx.tz)).alias("ts"),
        pl.coalesce(pl.concat_str([pl.col("mmdd"), pl.col("hms")], separator=" "), pl.col("prefix_ts"))
        .alias("ts_raw"),
        pl.coalesce(pl.col("prefix_rank"), pl.col("_rb"),
                    pl.when(_default_group()).then(pl.col("tag_rank").cast(pl.Int64, strict=False)),
                    pl.col("msg").str.extract(ascii_classes(SELF_REPORT), 1).cast(pl.Int64, strict=False),
                    pl.col("msg").str.extract(ascii_classes(SELF_RANK), 1).cast(pl.Int64, strict=False),
                    rank_hint(ctx)).alias("rank"),
        pl.col("prefix_local_rank").alias("local_rank"),
        pl.coalesce(pl.col("msg").str.extract(ascii_classes(SELF_REPORT), 2), line_host(ctx)).alias("host"),
        pl.col("body").alias("message"),
        pl.coalesce(_group_uid(), pl.col("pg")).alias("pg"),
    ).with_columns(
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("exact")).otherwise(pl.lit("missing")).alias("ts_quality")
    )


def _kv(name: str) -> pl.Expr:
    return pl.col("_kv").str.extract(rf"(?:^|, ){re.escape(name)}=([^,]+)", 1).str.strip_chars()


def _work_fields(rows: pl.DataFrame, m: pl.Expr) -> pl.DataFrame:
    """`rows` (watchdog timeout lines, message `m`) with the fields of their `WorkNCCL(...)` record and
    the milliseconds the collective ran for."""
    return rows.with_columns(
        m.str.extract(ascii_classes(WORK_RE), 1).alias("_kv"),
        m.str.extract(ascii_classes(r"ran for (\d+) milliseconds"), 1).cast(pl.Int64, strict=False).alias("ran_for_ms"),
    ).with_columns(
        _kv("SeqNum").cast(pl.Int64, strict=False).alias("seq"),
        _kv("OpType").alias("op_type"),
        _kv("NumelIn").cast(pl.Int64, strict=False).alias("numel_in"),
        _kv("NumelOut").cast(pl.Int64, strict=False).alias("numel_out"),
        _kv("Timeout(ms)").cast(pl.Int64, strict=False).alias("timeout_ms"),
    )


def _tracebacks(lines: pl.DataFrame, cand: pl.DataFrame, ctx: ParseContext
                ) -> tuple[list[int], list[tuple[int, str]], list[int], list[int]]:
    """Claimed line numbers of tracebacks, (final_line_no, exception type) per traceback, the
    final lines of tracebacks that pass through a checkpoint-saving frame (CKPT_FRAME), and those of
    tracebacks Python reported and ignored (after an IGNORED_HEAD line, or through a FINALIZER_FRAME)."""
    starts = cand.filter(pl.col("msg").str.contains(TB_HEADER, literal=True)
                         | pl.col("msg").str.contains(r'^\s+File "'))
    if starts.is_empty():
        return [], [], [], []
    streams = starts["stream"].unique()
    full = _prep(lines, ctx).filter(pl.col("stream").is_in(streams.implode())).sort(["stream", "line_no"])
    m = pl.col("msg")
    full = full.select(
        "line_no", "stream", "msg",
        m.str.contains(TB_HEADER, literal=True).alias("hdr"),
        m.str.contains(r"^\s+\S").alias("ind"),
        m.str.contains(r'^\s+File "').alias("fil"),
        m.str.contains(ascii_classes(EXC_LINE)).alias("exc"),
        m.str.contains(ascii_classes(CKPT_FRAME)).alias("ckf"),
        m.str.contains(ascii_classes(IGNORED_HEAD)).alias("ign_head"),
        m.str.contains(ascii_classes(FINALIZER_FRAME)).alias("fin_frame"),
    )
    nos = full["line_no"].to_numpy()
    st = full["stream"].to_numpy()
    hdr = full["hdr"].to_numpy()
    ind = full["ind"].to_numpy()
    fil = full["fil"].to_numpy()
    exc = full["exc"].to_numpy()
    ckf = full["ckf"].to_numpy()
    ign_head = full["ign_head"].to_numpy()
    fin_frame = full["fin_frame"].to_numpy()
    n = len(nos)
    same_prev = np.zeros(n, dtype=bool)
    if n > 1:
        same_prev[1:] = st[1:] == st[:-1]
    prev_tb = np.zeros(n, dtype=bool)
    prev_tb[1:] = (ind[:-1] | hdr[:-1]) & same_prev[1:]
    # a traceback starts at its header, or (excerpt cut mid-traceback, header lost to interleaving)
    # at the first line of an indented run that contains a `File "` frame line
    run_start = ind & ~prev_tb
    run_id = np.cumsum(run_start | ~ind)
    has_file = np.zeros(run_id.max() + 2 if n else 1, dtype=bool)
    has_file[run_id[fil & ind]] = True
    start_idx = np.flatnonzero(hdr | (run_start & has_file[run_id]))
    claimed: list[int] = []
    finals: list[tuple[int, str]] = []
    ckpt: list[int] = []
    ignored: list[int] = []
    msgs = full["msg"]
    for i in start_idx:
        j = i + 1 if hdr[i] else i
        while j < n and st[j] == st[i] and ind[j] and not hdr[j]:
            j += 1
        claimed.extend(nos[i:j].tolist())
        if j < n and st[j] == st[i] and exc[j] and j > i + (1 if hdr[i] else 0) and not hdr[j]:
            text = msgs[int(j)].strip()
            finals.append((int(nos[j]), text.split(":", 1)[0].strip()))
            claimed.append(int(nos[j]))
            if ckf[i:j].any():
                ckpt.append(int(nos[j]))
            if fin_frame[i:j].any() or (hdr[i] and i > 0 and st[i - 1] == st[i] and ign_head[i - 1]):
                ignored.append(int(nos[j]))
    return claimed, finals, ckpt, ignored


def parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction:
    cand = lines.filter(pl.col("body").str.contains(ascii_classes(ANCHORS)))
    if cand.is_empty():
        return Extraction(empty_events())
    cand = _common(_prep(cand, ctx), ctx).sort("line_no")
    m = pl.col("msg")
    parts: list[pl.DataFrame] = []
    claimed: list[pl.Series] = []

    def add(df: pl.DataFrame, kind: str, severity: str, code: pl.Expr | None = None) -> None:
        if df.is_empty():
            return
        df = df.with_columns(pl.lit(kind).alias("kind"), pl.lit(severity).alias("severity"),
                             (code if code is not None else pl.lit(None, dtype=pl.Utf8)).cast(pl.Utf8).alias("code"))
        parts.append(df)
        claimed.append(df["line_no"])

    # --- watchdog timeout main lines
    wrapped = m.str.contains("terminated with exception", literal=True) | m.str.contains("what():", literal=True)
    is_to = (m.str.contains(TIMEOUT_MAIN, literal=True) & ~wrapped) | (
        m.str.contains("timed out in blocking wait", literal=True) & m.str.contains("WorkNCCL", literal=True))
    to = _work_fields(cand.filter(is_to), m)
    add(to, "watchdog_timeout", "error", pl.col("seq"))
    # ProcessGroupNCCL's watchdog thread rethrows the timeout: ncclCommWatchdog logs `[PG ...] Process group
    # watchdog thread terminated with exception: <e.what()>` (2.2+; `NCCL watchdog thread terminated with
    # exception` before), the main line's text inside, and std::terminate then prints `what():  <e.what()>`.
    # A restatement when the main line is in the file; the only record of the timeout when it is not (an
    # excerpt; Ray's log deduplication printing only the repeat): then the first logged restatement of
    # each (rank, seq) is the timeout. The `what():` copy stays a restatement (it follows the logged one)
    logged = m.str.contains("terminated with exception", literal=True) & ~m.str.contains(r"^\s*what\(\):")
    rest = _work_fields(cand.filter(m.str.contains(TIMEOUT_MAIN, literal=True) & logged), m)
    if not rest.is_empty():
        key = ["rank", "seq", *file_keys(ctx)]  # a batch's files never meet
        rest = rest.join(to.select(key).unique(), on=key, how="anti", nulls_equal=True)
        add(rest.unique(key, keep="first", maintain_order=True), "watchdog_timeout", "error", pl.col("seq"))

    # --- watchdog status lines
    is_status = m.str.contains(r"[Ll]ast enqueued", literal=False) & m.str.contains(ascii_classes(STATUS_ENQ))
    st = cand.filter(is_status & ~is_to).with_columns(
        m.str.extract(ascii_classes(STATUS_SEQ), 1).cast(pl.Int64, strict=False).alias("seq"),
        m.str.extract(ascii_classes(STATUS_ENQ), 1).cast(pl.Int64, strict=False).alias("last_enqueued"),
        m.str.extract(ascii_classes(STATUS_COMP), 1).cast(pl.Int64, strict=False).alias("last_completed"),
    )
    add(st, "watchdog_status", "error",
        pl.when(m.str.contains(ascii_classes(VICTIM))).then(pl.lit("victim"))
        .when(pl.col("seq").is_not_null()).then(pl.col("seq").cast(pl.Utf8))
        .when(m.str.contains("dump signal", literal=True)).then(pl.lit("dump")))
    victim = cand.filter(m.str.contains(ascii_classes(VICTIM)) & ~is_status & ~is_to)
    add(victim, "watchdog_status", "warning", pl.lit("victim"))
    ct = pl.concat([to, st], how="diagonal_relaxed") if not st.is_empty() else to
    collective = table_frame("collective_timeouts", ct.sort("line_no")) if not ct.is_empty() \
        else empty_table("collective_timeouts")

    # --- Horovod's stall inspector (horovod/common/stall_inspector.cc CheckForStalledTensors; 0.16-0.20
    # operations.cc): `One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
    # ranks and are waiting for remainder of ranks for more than N seconds. This may indicate that different
    # ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which
    # will cause deadlock.`, then `Missing ranks:` (`Stalled ranks:` in later releases) and one `R: [tensor,
    # ...]` row per rank that has not submitted them (`R!:` past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, with
    # `One or more rank (marked by "!") is stalled for longer than N seconds. Will shutdown.`). One event
    # per report (code `shutdown` or `warning`); its rows are claimed. The coordinator (rank 0) prints it:
    # the event's rank is the one rank its rows name, when they name one, else unknown (not the printer)
    is_stall = m.str.contains(ascii_classes(STALL))
    stall = cand.filter(is_stall).filter(
        (pl.col("line_no") - pl.col("line_no").shift(1)).fill_null(99) > 1)
    if not stall.is_empty():
        heads = stall.select("line_no", pl.col("line_no").alias("_head")).sort("line_no")
        rows = (cand.select("line_no", m.str.extract(ascii_classes(r"^\s*(\d+)!?: \["), 1).cast(pl.Int64, strict=False).alias("_sr"),
                            m.str.contains(ascii_classes(STALL_SHUTDOWN)).alias("_down"))
                .filter(pl.col("_sr").is_not_null() | pl.col("_down")).sort("line_no")
                .join_asof(heads, on="line_no", strategy="backward").drop_nulls("_head")
                .group_by("_head").agg(pl.col("_sr").drop_nulls().unique().alias("_u"), pl.col("_down").any()))
        rep = rows.select(pl.col("_head").alias("line_no"),
                          pl.when(pl.col("_u").list.len() == 1).then(pl.col("_u").list.first()).alias("_one"),
                          "_down")
        stall = stall.join(rep, on="line_no", how="left").with_columns(
            pl.col("_one").cast(pl.Int64).alias("rank"))
        add(stall, "stall_warning", "warning",
            pl.when(pl.col("_down").fill_null(False)).then(pl.lit("shutdown")).otherwise(pl.lit("warning")))
        claimed.append(cand.filter(is_stall | m.str.contains(ascii_classes(STALL_ROW)) | m.str.contains(ascii_classes(STALL_SHUTDOWN)))["line_no"])

    # --- heartbeat monitor
    hb = cand.filter(m.str.contains(ascii_classes(HEARTBEAT)))
    add(hb, "heartbeat_timeout", "error", m.str.extract(ascii_classes(r"stuck for (\d+) seconds"), 1))

    # --- desync report
    ds = cand.filter(m.str.contains(ascii_classes(DESYNC)))
    lag = ds.with_columns(
        m.str.extract(ascii_classes(LAGGING), 1).str.replace_all(r"\s", "").alias("_lag"),
        pl.coalesce([m.str.extract(ascii_classes(NOT_JOINED), i) for i in (1, 2)]).str.replace_all(r"\s", "").alias("_nj"),
    )
    add(lag.filter(pl.col("_lag").is_not_null()), "watchdog_status", "error",
        pl.concat_str([pl.lit("lagging:"), pl.col("_lag")]))
    add(lag.filter(pl.col("_lag").is_null() & pl.col("_nj").is_not_null()), "watchdog_status", "error",
        pl.concat_str([pl.lit("not_joined:"), pl.col("_nj")]))
    claimed.append(ds["line_no"])

    # --- Flight Recorder analysis: ranks that never joined a collective (FR_NOT_JOINED)
    fr = cand.filter(m.str.contains(FR_NOT_JOINED, literal=True))
    if not fr.is_empty():
        miss = cand.filter(m.str.contains(ascii_classes(FR_MISSING))).select(
            "line_no", "stream", m.str.extract(ascii_classes(FR_MISSING), 1).str.replace_all(r"\s", "").alias("_miss"))
        fr = fr.sort("line_no").join_asof(
            miss.sort("line_no").rename({"line_no": "_mline"}), left_on="line_no", right_on="_mline", by="stream",
            strategy="forward", tolerance=16, check_sortedness=False)
        fr = fr.filter(pl.col("_miss").is_not_null() & (pl.col("_miss") != ""))
        add(fr.drop("_miss", "_mline"), "watchdog_status", "error",
            pl.concat_str([pl.lit("not_joined:"), fr["_miss"]]) if not fr.is_empty() else None)
        claimed.append(miss["line_no"])

    # --- NCCL errors through PyTorch
    res_expr = pl.lit(None, dtype=pl.Utf8)
    for text, name in reversed(RESULT_BY_TEXT):
        res_expr = pl.when(m.str.contains(text, literal=True)).then(pl.lit(name)).otherwise(res_expr)
    cand = cand.with_columns(
        m.str.contains(ascii_classes(NCCL_ERR)).alias("_nerr"),
        m.str.extract(ascii_classes(NCCL_DETAIL), 1).alias("_detail"),
    ).with_columns(
        pl.when(pl.col("_nerr")).then(res_expr).otherwise(pl.col("_detail")).alias("_res"),
    ).with_columns(
        (pl.col("_nerr") | pl.col("_detail").is_not_null()).shift(1).over("stream").fill_null(False)
        .alias("_prev_err"),
    )
    derr = cand.filter(pl.col("_nerr") | (pl.col("_detail").is_not_null() & ~pl.col("_prev_err")))
    add(derr, "dist_error", "error", pl.col("_res"))
    claimed.append(cand.filter(pl.col("_detail").is_not_null())["line_no"])
    # `Last error:` + the next line of the same stream (the last NCCL WARN text)
    last = cand.filter(m.str.contains(r"^\s*Last error:\s*$"))
    if not last.is_empty():
        errs_so_far = cand.filter(pl.col("_res").is_not_null()).select("line_no", "stream", "_res")
        nxt_rows = []
        for ln, stream in last.select("line_no", "stream").iter_rows():
            win = _prep(lines.filter(pl.col("line_no").is_between(ln + 1, ln + 64)), ctx)
            # the next line with text: neither blank nor the separator a batch puts between files (forensics/bulk.py)
            win = win.filter((pl.col("stream") == stream) & pl.col("text").str.contains(r"[^\s\x1e]")).head(1)
            if not win.is_empty():
                nxt_rows.append(win)
        if nxt_rows:
            nxt = _common(pl.concat(nxt_rows), ctx).sort("line_no")
            nxt = nxt.join_asof(errs_so_far.sort("line_no").rename({"line_no": "_el"}), left_on="line_no",
                                right_on="_el", by="stream", strategy="backward", check_sortedness=False)
            add(nxt, "dist_error", "error", pl.col("_res"))
        claimed.append(last["line_no"])

    # --- CUDA errors, ECC, OOM, segfault, NaN
    is_oom = (m.str.contains(ascii_classes(OOM_GPU)) | m.str.contains(ascii_classes(OOM_HOST)) | m.str.contains(ascii_classes(OOM_SHM))) & ~m.str.contains(ascii_classes(RAY_OOM_KILL))
    cu = cand.filter(m.str.contains(ascii_classes(CUDA_ERR)) & ~is_oom)
    cuda_code = pl.coalesce(
        # a CUDA_CHECK: the error string glog appends after `(<va> vs. <vb>)`, else the failing status value
        m.str.extract(ascii_classes(CUDA_CHECK + r".*?\(-?\d+ vs\. -?\d+\)\s+(\S.*?)\s*$"), 1),
        pl.when(m.str.contains(ascii_classes(CUDA_CHECK))).then(pl.coalesce(
            m.str.extract(ascii_classes(r"== \w+ \((-?\d+) vs\. 0\)"), 1), m.str.extract(ascii_classes(r"\(0 vs\. (-?\d+)\)"), 1))),
        m.str.extract(r"(CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+)", 1),
        m.str.extract(r"(?:CUDA|HIP) error: ([^.\n]+?)\.?\s*$", 1),
        m.str.extract(r"(?:CUDA|HIP) error: ([^.]+)", 1),
        m.str.extract(ascii_classes(r"cuda runtime error \((\d+)\)"), 1),
        m.str.extract(r"(CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+)", 1),
        m.str.extract(r"(uncorrectable ECC error encountered)", 1),
    ).str.strip_chars()
    dev = lines.filter(pl.col("body").str.contains(ascii_classes(GGML_DEVICE)))
    if not dev.is_empty() and not cu.is_empty():
        # the `current device: N` line right below a CUDA error line of the same stream (ggml_cuda_error)
        dev = _prep(dev, ctx).select(
            "line_no", "stream", pl.col("msg").str.extract(ascii_classes(GGML_DEVICE), 1).cast(pl.Int64, strict=False).alias("_gdev"))
        cu = cu.join(dev.with_columns((pl.col("line_no") - 1).alias("_above")).select("_above", "stream", "_gdev"),
                     left_on=["line_no", "stream"], right_on=["_above", "stream"], how="left")
        own = pl.col("gpu") if "gpu" in cu.columns else pl.lit(None, dtype=pl.Int64)
        cu = cu.with_columns(pl.coalesce(own, pl.when(pl.col("_gdev") >= 0).then(pl.col("_gdev"))).alias("gpu")).drop("_gdev")
        read = dev.join(cu.select((pl.col("line_no") + 1).alias("line_no"), "stream"), on=["line_no", "stream"], how="semi")
        claimed.append(read["line_no"])
        # GGML_ABORT's restatement, within the two lines after the statement line
        ab = lines.filter(pl.col("body").str.contains(ascii_classes(GGML_ABORT)))
        if not ab.is_empty() and not read.is_empty():
            near = pl.concat([read.select((pl.col("line_no") + k).alias("line_no"), "stream") for k in (2, 3)])
            claimed.append(_prep(ab, ctx).join(near, on=["line_no", "stream"], how="semi")["line_no"])
    is_ecc = m.str.contains("ECC error", literal=True)
    add(cu.filter(is_ecc), "ecc_error", "critical", cuda_code)
    add(cu.filter(~is_ecc), "cuda_error", "error", cuda_code)
    da = cand.filter(m.str.contains(ascii_classes(DEVICE_ASSERT)) & ~m.str.contains(ascii_classes(CUDA_ERR))).with_columns(
        m.str.extract(ascii_classes(r"^(.*?:\d+): "), 1).fill_null("").alias("_site"),
        m.str.extract(ascii_classes(r"found on GPU #(\d+)"), 1).cast(pl.Int64, strict=False).alias("gpu"))
    # a run: the next lines of one stream failing the same assert (file:line); each run is one event
    da = da.with_columns(((pl.col("line_no").diff().over("stream") != 1)
                          | (pl.col("_site") != pl.col("_site").shift(1).over("stream"))).fill_null(True)
                         .alias("_new"))
    add(da.filter(pl.col("_new")), "cuda_error", "error", pl.lit("device-side assert"))
    claimed.append(da["line_no"])
    oom = cand.filter(is_oom).with_columns(
        pl.coalesce(m.str.extract(ascii_classes(r"GPU (\d+) has a total capacity"), 1), m.str.extract(ascii_classes(r"GPU (\d+);"), 1),
                    m.str.extract(ascii_classes(r"device:GPU:(\d+)"), 1), m.str.extract(ascii_classes(r"\(GPU_(\d+)_bfc\)"), 1))
        .cast(pl.Int64, strict=False).alias("gpu"))
    # code: which memory ran out (gpu | host | shm), or `retry` for an allocator's non-fatal notice
    add(oom, "oom", "error", pl.when(m.str.contains(ascii_classes(OOM_RETRY))).then(pl.lit("retry"))
        .when(m.str.contains(ascii_classes(OOM_SHM))).then(pl.lit("shm"))
        .when(m.str.contains(ascii_classes(OOM_HOST))).then(pl.lit("host")).otherwise(pl.lit("gpu")))
    sig_code = pl.lit(None, dtype=pl.Utf8)
    for pattern, name in reversed(SIGNAL_BY_TEXT):
        sig_code = pl.when(m.str.contains(ascii_classes(pattern))).then(pl.lit(name)).otherwise(sig_code)
    add(cand.filter(m.str.contains(ascii_classes(SEGFAULT)) & ~m.str.contains(ascii_classes(CUDA_CHECK))), "segfault", "critical",
        sig_code.fill_null("SIGSEGV"))
    add(cand.filter(m.str.contains(ascii_classes(NAN))).with_columns(
        m.str.extract(ascii_classes(SELF_DEVICE), 1).cast(pl.Int64, strict=False).alias("gpu")), "nan", "warning", pl.lit("nan"))
    bar = cand.filter(m.str.contains(ascii_classes(PREPROC_BAR)) | m.str.contains(ascii_classes(PREPROC_BANNER)))
    add(bar, "data_preprocess", "info",
        pl.when(m.str.contains(ascii_classes(PREPROC_BAR)) & (m.str.extract(ascii_classes(PREPROC_BAR), 2) == m.str.extract(ascii_classes(PREPROC_BAR), 3)))
        .then(pl.lit("done")).otherwise(pl.lit("running")))
    # the process group torn down without destroy_process_group(): ProcessGroupNCCL's destructor / exit
    # notice in its three wordings (PG_EXIT), printed while the process exits. Context (`pg_exit`, info):
    # on a healthy run the last line; a watchdog firing after it hung in that exit (precedence.toml
    # [exit_wait])
    add(cand.filter(m.str.contains(ascii_classes(PG_EXIT))), "pg_exit", "info", pl.lit("exit"))
    store_code = pl.lit(None, dtype=pl.Utf8)
    for pattern, name in reversed(STORE_BY_TEXT):
        store_code = pl.when(m.str.contains(ascii_classes(pattern))).then(pl.lit(name)).otherwise(store_code)
    store = cand.filter((m.str.contains(ascii_classes(STORE)) | m.str.contains(ascii_classes(r"^(?:[\w.]+\.)?\w*Error: Address already in use")))
                        & store_code.is_not_null())
    add(store, "store_error", "error", store_code)
    gloo_code = pl.lit(None, dtype=pl.Utf8)
    for pattern, name in reversed(GLOO_BY_TEXT):
        gloo_code = pl.when(m.str.contains(ascii_classes(pattern))).then(pl.lit(name)).otherwise(gloo_code)
    gloo = cand.with_columns(gloo_code.alias("_gloo")).filter(m.str.contains(ascii_classes(GLOO)) & pl.col("_gloo").is_not_null())
    add(gloo.filter(pl.col("_gloo") != "loopback_fallback"), "gloo_error", "error", pl.col("_gloo"))
    add(gloo.filter(pl.col("_gloo") == "loopback_fallback"), "gloo_error", "warning", pl.col("_gloo"))

    # --- C++ exceptions that reach std::terminate: libstdc++'s __verbose_terminate_handler prints
    # `terminate called after throwing an instance of 'T'` and then `  what():  <e.what()>`, the error
    # itself. PyTorch's own c10:: errors restate what it printed (and this parser read) on their own
    # lines, and so does the NCCL watchdog of PyTorch < 2.2 (std::runtime_error with the watchdog's
    # timeout line); the other what() lines (std::runtime_error of a tool, a library's exception class)
    # become `exception` events, code = T. A what() line that already made an event above (CUDA error,
    # NCCL error, OOM) is not read twice.
    seen = pl.concat([p["line_no"] for p in parts]) if parts else pl.Series("line_no", [], dtype=pl.Int64)
    thrown = cand.with_columns(
        m.str.extract(ascii_classes(TERMINATE_TYPE), 1).shift(1).over("stream").alias("_thrown"),
    ).filter(m.str.contains(r"^\s*what\(\):") & pl.col("_thrown").is_not_null()
             & ~pl.col("_thrown").str.starts_with("c10::") & ~m.str.contains(ascii_classes(WATCHDOG_RESTATED))
             & ~pl.col("line_no").is_in(seen.implode()))
    add(thrown, "exception", "error", pl.col("_thrown"))

    claimed.append(cand.filter(m.str.contains(ascii_classes(COMPANION)) | (m.str.contains(TIMEOUT_MAIN, literal=True) & wrapped)
                               | m.str.contains(ascii_classes(SIGNAL_COMPANION)) | m.str.contains(ascii_classes(OOM_COMPANION)))["line_no"])

    # --- Python tracebacks (a loop over the few traceback lines only)
    tb_claimed, finals, ckpt, ignored = _tracebacks(lines, cand, ctx)
    fin = pl.DataFrame(finals, schema={"line_no": pl.Int64, "_exc": pl.Utf8}, orient="row")
    # lone exception lines (no traceback around them: an excerpt, a logger printing the error) and the
    # exception line after a traceback whose frames were cut (issue 14: partial records are events)
    lone = cand.filter(m.str.contains(ascii_classes(LONE_EXC)) & ~m.str.contains(ascii_classes(NCCL_DETAIL))).join(fin, on="line_no", how="anti").select(
        "line_no", m.str.extract(r"^([^:]*?)(?: \(see above for traceback\))?:", 1).alias("_exc"))
    fin = pl.concat([fin, lone]).sort("line_no")
    if not fin.is_empty():
        ex = _common(_prep(lines.join(fin, on="line_no", how="semi"), ctx), ctx).join(fin, on="line_no")
        # reported and ignored (IGNORED_HEAD, FINALIZER_FRAME): its own kind, never the run's failure
        add(ex.filter(pl.col("line_no").is_in(ignored)), "exception_ignored", "warning", pl.col("_exc"))
        ex = ex.filter(~pl.col("line_no").is_in(ignored))
        add(ex, "exception", "error", pl.col("_exc"))
        # a write failure inside checkpoint-saving frames: storage, whatever the exception's wording
        ck = ex.filter(pl.col("line_no").is_in(ckpt) & pl.col("_exc").str.contains(ascii_classes(CKPT_EXC))
                       & ~pl.col("msg").str.contains(ascii_classes(CUDA_ERR)) & ~pl.col("msg").str.contains(ascii_classes(NCCL_ERR))
                       & ~pl.col("msg").str.contains(ascii_classes(OOM_GPU)))
        add(ck, "checkpoint_error", "error", pl.col("_exc"))
    claimed.append(pl.Series("line_no", tb_claimed, dtype=pl.Int64))
    # the heads of reported-and-ignored exceptions, and Python 2's one-line form of them
    add(cand.filter(m.str.contains(ascii_classes(IGNORED_HEAD)) | m.str.contains(ascii_classes(IGNORED_PY2))), "exception_ignored", "warning",
        pl.when(m.str.contains(ascii_classes(IGNORED_PY2))).then(m.str.extract(ascii_classes(r"^Exception ([A-Za-z_][\w.]*)"), 1))
        .otherwise(pl.lit("ignored")))

    events = pl.concat(parts, how="diagonal_relaxed") if parts else empty_events()
    events = events_frame(events.with_columns(pl.lit(SPEC.name).alias("source"))) if parts else events
    events = events.sort("line_no", maintain_order=True)
    all_claimed = pl.concat([c.cast(pl.Int64, strict=False).rename("line_no") for c in claimed]).unique().sort()
    return Extraction(events=events, tables={"collective_timeouts": collective}, claimed=all_claimed)


SPEC = ParserSpec(
    name="pytorch",
    scope="process",
    description="PyTorch distributed: NCCL watchdog timeouts/status, heartbeat, NCCL/CUDA errors, c10d store errors; "
                "Python tracebacks and exception lines; OOM (PyTorch, JAX/XLA, TensorFlow), NaN, native crashes",
    formats=("pytorch_log", "python_traceback"),
    kinds=("watchdog_timeout", "watchdog_status", "heartbeat_timeout", "dist_error", "cuda_error", "ecc_error",
           "oom", "exception", "exception_ignored", "segfault", "nan", "store_error", "checkpoint_error", "data_preprocess",
           "stall_warning", "pg_exit", "gloo_error"),
    tables=("collective_timeouts",),
    batch=True,
    trigger=ANCHORS,  # `parse` returns nothing when no line matches it
    roles=("framework",),
    evidence="rank logs with PyTorch output",
)
