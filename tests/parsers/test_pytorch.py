"""Tests for parsers.pytorch (variants of ../shared/reference/pytorch_dist.md §1-4)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import pytorch
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "pytorch"
REAL = ROOT.parent / "shared" / "real-samples"


def run(text: str, **ctx):
    ctx.setdefault("ref_year", 2025)
    lines = with_body(decode_lines(text.encode()).lines)
    return pytorch.parse(lines, ParseContext(path="train.log", **ctx))


def fixture(name: str, **ctx):
    return run((FIX / name).read_text(), **ctx)


def real(case: str, name: str) -> str:
    hits = sorted(REAL.glob(f"{case}-*/{name}")) if REAL.exists() else []
    if not hits:
        pytest.skip("../shared/real-samples not available")
    return hits[0].read_text()


def ev(ex, kind: str) -> pl.DataFrame:
    return ex.events.filter(pl.col("kind") == kind)


def check_accounting(ex, n_lines: int) -> None:
    c, i = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not c & i
    assert c | i <= set(range(1, n_lines + 1))
    assert set(ex.events["line_no"].to_list()) <= c
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]


def test_watchdog_1x_no_rank_prefix():
    ex = fixture("watchdog_1x_no_rank_prefix.log")
    assert ev(ex, "watchdog_timeout").select("line_no", "rank", "code", "ts_quality").rows() == \
        [(1, 1, "469508", "missing")]
    row = ex.tables["collective_timeouts"].row(0, named=True)
    assert (row["seq"], row["op_type"], row["numel_in"], row["timeout_ms"], row["ran_for_ms"]) == \
        (469508, "ALLREDUCE", None, 1800000, 1802212)
    assert ex.claimed.to_list() == [1, 2]


def test_watchdog_2_2_pg_rank_form_and_companions():
    ex = fixture("watchdog_2_2_pg_rank.log")
    assert ex.events.select("line_no", "kind", "rank").rows() == [
        (1, "watchdog_timeout", 3), (2, "watchdog_status", 3)]
    ct = ex.tables["collective_timeouts"]
    assert ct.select("seq", "op_type", "numel_in", "numel_out", "pg", "last_enqueued", "last_completed").rows() == [
        (2070, "ALLGATHER", 1024, 8192, None, None, None), (2070, None, None, None, "0", 2082, 2069)]
    assert ex.claimed.to_list() == list(range(1, 10))  # companions, frames, terminate, what()


def test_watchdog_pg_desc_form():
    ex = fixture("watchdog_pg_desc_form.log")
    e = ev(ex, "watchdog_timeout").row(0, named=True)
    assert e["rank"] == 7 and e["ts"] == datetime(2025, 8, 16, 1, 45, 40, 183009, tzinfo=UTC)
    assert e["ts_quality"] == "exact"
    st_row = ex.tables["collective_timeouts"].row(1, named=True)
    assert (st_row["pg"], st_row["seq"], st_row["last_enqueued"], st_row["last_completed"]) == ("0", 80078, 80078, 80077)


def test_watchdog_pg_guid_form():
    ex = fixture("watchdog_pg_guid_form.log")
    st_row = ex.tables["collective_timeouts"].row(1, named=True)
    assert (st_row["rank"], st_row["seq"], st_row["last_enqueued"], st_row["last_completed"]) == \
        (118, 2398459, 2398578, 2398458)


def test_glog_without_ref_year_keeps_raw():
    ex = fixture("watchdog_pg_guid_form.log", ref_year=None)
    e = ev(ex, "watchdog_timeout").row(0, named=True)
    assert e["ts"] is None and e["ts_quality"] == "missing" and e["ts_raw"].startswith("603 17:48:01")


def test_heartbeat_monitor():
    ex = fixture("heartbeat_monitor.log")
    assert ev(ex, "heartbeat_timeout").select("line_no", "code", "rank").rows() == [(1, None, 25), (3, "600", 25)]
    assert ex.claimed.to_list() == [1, 2, 3]


def test_victim_global_timeout():
    ex = fixture("victim_global_timeout.log")
    assert ev(ex, "watchdog_status").select("line_no", "code", "rank").rows() == [(1, "victim", 5), (2, "victim", 5)]


def test_dump_signal_and_flightrecorder_hint():
    ex = fixture("dump_signal.log")
    assert ex.events.select("line_no", "kind", "code").rows() == [(2, "watchdog_status", "dump")]
    row = ex.tables["collective_timeouts"].row(0, named=True)
    assert (row["last_enqueued"], row["last_completed"]) == (747, 715)
    assert ex.claimed.to_list() == [1, 2]


def test_desync_report():
    ex = fixture("desync_report.log")
    assert ev(ex, "watchdog_status").select("line_no", "code").rows() == [(4, "lagging:47"), (8, "not_joined:12,13")]
    assert ex.claimed.to_list() == list(range(1, 9))


def test_dist_backend_error_with_last_error():
    ex = fixture("dist_backend_error.log")
    assert ex.events.select("line_no", "kind", "code").rows() == [
        (4, "dist_error", "ncclSystemError"), (4, "exception", "torch.distributed.DistBackendError"),
        (7, "dist_error", "ncclSystemError")]
    assert ex.claimed.to_list() == list(range(1, 8))


def test_cuda_errors_and_ecc():
    ex = fixture("cuda_errors.log")
    assert ex.events.filter(pl.col("kind") != "exception").select("line_no", "kind", "code").rows() == [
        (1, "cuda_error", "an illegal memory access was encountered"),
        (3, "cuda_error", "unspecified launch failure"),
        (4, "cuda_error", "device-side assert triggered"),
        (5, "cuda_error", "CUBLAS_STATUS_EXECUTION_FAILED"),
        (6, "ecc_error", "39"),
        (7, "ecc_error", "uncorrectable ECC error encountered")]
    # each is a lone Python exception line too (no traceback around it): an exception event
    assert ev(ex, "exception").select("line_no", "code").rows() == [(n, "RuntimeError") for n in (1, 3, 4, 5, 6, 7)]


def test_oom_new_and_old_forms():
    ex = fixture("oom.log")
    assert ev(ex, "oom").select("line_no", "gpu", "code").rows() == [(1, 3, "gpu"), (2, 0, "gpu")]
    assert ev(ex, "exception").select("line_no", "code").rows() == [(1, "torch.OutOfMemoryError"), (2, "RuntimeError")]


def test_interleaved_tracebacks_segfault_nan():
    ex = fixture("interleaved_tracebacks.log")
    assert ex.events.select("line_no", "kind", "code", "rank").rows() == [
        (7, "exception", "KeyError", 0), (8, "exception", "ZeroDivisionError", 1),
        (9, "segfault", "SIGSEGV", None), (10, "segfault", "SIGSEGV", None), (11, "nan", "nan", None)]
    assert ex.claimed.to_list() == list(range(1, 12))


def test_rank_hint_fallback():
    ex = run("RuntimeError: CUDA error: unspecified launch failure\n", rank_hint=9)
    assert ex.events.select("kind", "rank").rows() == [("cuda_error", 9), ("exception", 9)]


def test_real_007_pg1():
    ex = run(real("007", "nccl.log"))
    assert ex.events.select("line_no", "kind", "rank", "code").rows() == [
        (1, "watchdog_timeout", 0, "1580"), (2, "watchdog_timeout", 4, "1580"),
        (3, "watchdog_status", 0, "1580"), (4, "watchdog_status", 3, "1580")]
    assert ex.events["ts"][0] == datetime(2025, 3, 21, 2, 7, 8, 408271, tzinfo=UTC)
    ct = ex.tables["collective_timeouts"]
    assert ct["last_enqueued"].to_list() == [None, None, 1582, 1582]


def test_real_008_reduce_scatter():
    ex = run(real("008", "nccl.log"))
    ct = ex.tables["collective_timeouts"].filter(pl.col("op_type").is_not_null())
    assert ct.select("line_no", "rank", "op_type", "numel_in", "numel_out").rows() == [
        (1, 0, "_REDUCE_SCATTER_BASE", 544997376, 68124672), (3, 4, "_REDUCE_SCATTER_BASE", 544997376, 68124672),
        (5, 3, "_REDUCE_SCATTER_BASE", 544997376, 68124672)]


def test_real_009_pgid_guid():
    ex = run(real("009", "nccl.log"))
    assert ev(ex, "watchdog_timeout")["line_no"].to_list() == [1, 3, 5]
    assert ev(ex, "watchdog_status").select("line_no", "rank").rows() == [(2, 1), (4, 0)]


def test_real_010_old_format():
    ex = run(real("010", "nccl.log"))
    assert ev(ex, "watchdog_timeout").select("line_no", "rank").rows() == [(1, 1), (2, 3), (3, 2), (4, 6), (5, 7)]


def test_real_012_optype_mismatch():
    ex = run(real("012", "nccl.log"))
    ct = ex.tables["collective_timeouts"].filter(pl.col("op_type").is_not_null())
    assert ct.select("line_no", "rank", "seq", "op_type").rows() == [
        (1, 7, 80078, "BROADCAST"), (3, 3, 80078, "ALLREDUCE")]
    assert ev(ex, "watchdog_status")["line_no"].to_list() == [2]


def test_real_015_not_claiming_ras_lines():
    ex = run(real("015", "nccl.log"))
    assert ex.events.select("line_no", "kind", "rank").rows() == [(24, "watchdog_timeout", 118), (25, "watchdog_status", 118)]
    assert ex.claimed.to_list() == [24, 25]


def test_real_016_dump_signal():
    ex = run(real("016", "nccl.log"))
    assert ex.events.select("line_no", "kind", "code").rows() == [
        (1, "watchdog_status", "716"), (4, "watchdog_status", "dump")]
    assert ex.claimed.to_list() == [1, 2, 3, 4]


def test_real_019_thc_ecc():
    ex = run(real("019", "traceback.txt"))
    assert ex.events.select("line_no", "kind", "code").rows() == [(1, "ecc_error", "39"), (1, "exception", "RuntimeError")]
    assert ex.claimed.to_list() == [1, 2]


def test_real_044_headless_traceback_and_dist_error():
    ex = run(real("044", "traceback.txt"))
    assert ex.events.select("line_no", "kind", "code", "rank").rows() == [
        (5, "dist_error", "ncclRemoteError", 3), (5, "exception", "torch.distributed.DistBackendError", 3),
        (8, "dist_error", "ncclRemoteError", 3)]
    assert ex.claimed.to_list() == list(range(1, 15))


def test_sniff():
    assert pytorch.sniff((FIX / "watchdog_pg_guid_form.log").read_text()) >= 0.9
    assert pytorch.sniff("Traceback (most recent call last):\n  File \"x\"\n") > 0
    assert pytorch.sniff("n1:1:2 [0] NCCL INFO Channel 00\n") == 0.0


LINES = [ln for p in sorted(FIX.glob("*.log")) for ln in p.read_text().splitlines()]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=120), st.sampled_from(LINES)), max_size=30), st.randoms())
def test_property_never_raises_and_accounting(chunks, rnd):
    mutated = []
    for c in chunks:
        if c and rnd.random() < 0.3:
            i = rnd.randrange(len(c))
            c = c[:i] + rnd.choice(["", "(", ")", ":", " ", "[rank1]:", "\t", "=", "Traceback (most recent call last):"]) + c[i + 1:]
        mutated.append(c.replace("\n", " ").replace("\r", " "))
    text = "\n".join(mutated) + "\n"
    check_accounting(run(text), len(decode_lines(text.encode()).lines))


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.log")))
def test_fixture_accounting(name):
    text = (FIX / name).read_text()
    check_accounting(run(text), len(decode_lines(text.encode()).lines))


def test_oom_families_of_every_framework():
    """Device/host/shared memory exhaustion as PyTorch, JAX/XLA, TensorFlow and CUDA libraries print it."""
    ex = run(
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 2 has a total capacity of 79.10 GiB of which 312.00 MiB is free.\n"
        "RuntimeError: CUDA error: out of memory\n"
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE\n"
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.\n"
        "2023-11-01 10:00:00.000000: W external/xla/xla/tsl/framework/bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.44GiB (rounded to 4770354432)requested by op \n"
        "2023-11-01 10:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:290] Allocator (GPU_1_bfc) ran out of memory trying to allocate 2.20GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.\n"
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[64,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc [Op:MatMul]\n"
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to allocate 34359738368 bytes.\n"
        "RuntimeError: unable to write to file </torch_1261_2916379624_0>: No space left on device (28)\n"
        "BufferAssignment OOM Debugging.\n"
        "             parameter allocation:  372.76MiB\n"
        "2021-01-01 10:00:00 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of memory. Tried to allocate 20.00 MiB\n"
        "2021-01-01 10:00:09 | ERROR | fairseq.trainer | OOM during optimization, irrecoverable\n")
    assert ev(ex, "oom").select("line_no", "code", "gpu").rows() == [
        (1, "gpu", 2), (2, "gpu", None), (3, "gpu", None), (4, "gpu", None), (5, "gpu", None), (6, "gpu", 0),
        (7, "retry", 1), (8, "gpu", 0), (9, "host", None), (10, "shm", None), (13, "retry", None), (14, "gpu", None)]
    assert ev(ex, "cuda_error").is_empty()  # an OOM is not a CUDA kernel fault
    assert ev(ex, "exception")["code"].to_list() == [
        "torch.OutOfMemoryError", "RuntimeError", "RuntimeError", "RuntimeError",
        "jaxlib.xla_extension.XlaRuntimeError", "tensorflow.python.framework.errors_impl.ResourceExhaustedError",
        "RuntimeError", "RuntimeError"]
    assert ex.claimed.to_list() == list(range(1, 15))


def test_host_allocation_failure_family():
    """The allocation-failure words of the runtimes beside PyTorch in a training process are host OOM:
    Rust's alloc-error hook (tokenizers; interleaved by two processes as posted), NumPy, CPython MemoryError;
    the GPU caching allocator's OutOfMemoryError stays gpu, and prose about allocations is no OOM."""
    ex = run(
        "memory allocation of memory allocation of 20971522097152 bytes failed\n"
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.20 GiB for an array with shape (429496730,) and data type float64\n"
        "MemoryError\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "WARNING: memory allocation of the cache is slow, consider an Error-free pinning\n")
    assert ev(ex, "oom").select("line_no", "code").rows() == [(1, "host"), (2, "host"), (3, "host"), (4, "gpu")]


def test_lone_exception_lines_and_cut_traceback():
    """Issue 14: an exception line with no traceback, and one after frames whose header was cut."""
    ex = run(
        "Start training ...\n"
        "KeyError: 'labels'\n"
        "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[5760,4,4,2048]\n"
        "    data = self.data_queue.get(timeout=timeout)\n"
        '  File "/opt/conda/lib/python3.6/queue.py", line 173, in get\n'
        "    self.not_empty.wait(remaining)\n"
        "ValueError: too many values to unpack (expected 2)\n"
        "UserWarning: this is a warning, not an exception\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n")
    assert ev(ex, "exception").select("line_no", "code").rows() == [
        (2, "KeyError"), (3, "ResourceExhaustedError"), (7, "ValueError")]
    # the `UserWarning:` line is no exception (no event); it is claimed as a Python warning (fresh/b12ok), the
    # plain `Start training ...` line is not claimed
    assert 8 not in ex.events["line_no"].to_list() and 8 in ex.claimed.to_list()
    assert 1 not in ex.claimed.to_list()


def test_checkpoint_write_failure_in_save_frames():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 210, in <module>\n'
        "    trainer.save_checkpoint(step)\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 850, in save\n'
        "    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)\n"
        "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 3262003776 vs 3262003664\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 212, in save_checkpoint\n'
        "    pickle.dumps(self.model)\n"
        "TypeError: cannot pickle '_thread.lock' object\n")
    ex = run(text)
    assert ev(ex, "checkpoint_error").select("line_no", "code").rows() == [(6, "RuntimeError")]
    assert ev(ex, "exception").select("line_no", "code").rows() == [(6, "RuntimeError"), (10, "TypeError")]


def test_glog_checks_on_a_cuda_status_are_cuda_errors():
    """A glog CHECK on a CUDA library status (Caffe's device_alternate.hpp CUDA_CHECK / CUBLAS_CHECK /
    CUDNN_CHECK, `CHECK_EQ(error, cudaSuccess) << " " << cudaGetErrorString(error)`) is a CUDA error, code =
    the appended error string, else the failing value; a CHECK on anything else stays a native crash."""
    ex = run(
        "WARNING: Logging before InitGoogleLogging() is written to STDERR\n"
        "F1122 12:29:18.252681  3480 gpu_memory.cpp:152] Check failed: error == cudaSuccess (46 vs. 0)  "
        "all CUDA-capable devices are busy or unavailable\n"
        "*** Check failure stack trace: ***\n"
        "F0101 12:00:00.123456  4242 cuda_graph.cc:88] Check failed: status == CUDA_SUCCESS (2 vs. 0)\n"
        "F0312 08:15:42.000001 99 math_functions.cu:79] Check failed: status == CUBLAS_STATUS_SUCCESS (13 vs. 0)  "
        "CUBLAS_STATUS_EXECUTION_FAILED\n"
        "F0312 08:15:43.000001 99 cudnn_conv_layer.cu:28] Check failed: status == CUDNN_STATUS_SUCCESS (8 vs. 0)  "
        "CUDNN_STATUS_EXECUTION_FAILED\n"
        "F0725 03:11:09.101010 17 common.cpp:152] Check failed: cudaSuccess == cudaGetDevice(&device) (0 vs. 100)\n"
        "F0101 12:00:01.000000  4242 tensor_shape.cc:345] Check failed: size >= 0 (-1 vs. 0)\n")
    assert ev(ex, "cuda_error").select("line_no", "code").rows() == [
        (2, "all CUDA-capable devices are busy or unavailable"), (4, "2"), (5, "CUBLAS_STATUS_EXECUTION_FAILED"),
        (6, "CUDNN_STATUS_EXECUTION_FAILED"), (7, "100")]
    assert ev(ex, "segfault").select("line_no", "code").rows() == [(8, "check_failed")]


def test_native_crash_dumps():
    ex = run(
        "*** Aborted at 1700000000 (unix time) try \"date -d @1700000000\" if you are using GNU date ***\n"
        "PC: @     0x7f3a2b1c4d5e (unknown)\n"
        "*** SIGSEGV (@0x0) received by PID 4242 (TID 0x7f3a00000700) from PID 0; stack trace: ***\n"
        "*** SIGBUS received at time=1700000001 on cpu 7 ***\n"
        "F0101 12:00:00.123456  4242 tensor_shape.cc:345] Check failed: size >= 0 (-1 vs. 0)\n"
        "Fatal Python error: Aborted\n"
        "Bus error (core dumped)\n"
        "ERROR: Unexpected segmentation fault encountered in worker.\n")
    assert ev(ex, "segfault").select("line_no", "code").rows() == [
        (3, "SIGSEGV"), (4, "SIGBUS"), (5, "check_failed"), (6, "SIGABRT"), (7, "SIGBUS"), (8, "SIGSEGV")]
    assert ex.claimed.to_list() == list(range(1, 9))


def test_store_and_rendezvous_errors():
    ex = run(
        "[W socket.cpp:401] [c10d] The server socket has failed to bind to [::]:29400 (errno: 98 - Address already in use).\n"
        "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network address.\n"
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n"
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [node-1]:29500 (errno: 111 - Connection refused).\n"
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.\n"
        "[W TCPStore.cpp:131] [c10d] recvVector failed on SocketImpl(fd=12, addr=[node-1]:45678, remote=[node-0]:29500): failed to recv, got 0 bytes\n")
    assert ev(ex, "store_error").select("line_no", "code").rows() == [
        (1, "EADDRINUSE"), (2, "listen_failed"), (3, "EADDRINUSE"), (4, "refused_retry"), (5, "timeout"),
        (6, "connect_failed"), (7, "peer_closed")]


def test_rendezvous_closed_is_its_own_code_not_a_socket_close():
    """RendezvousClosedError (torch/distributed/elastic/rendezvous/api.py; torchelastic's RendezvousClosedException
    before it) is raised when the run_id's rendezvous state is marked closed, not by a socket: its own code, in
    every shape it is printed (a traceback's last line, bare or with a message, the error handler's indented JSON
    record, the old torchelastic name); a socket closed by the store's peer stays peer_closed."""
    ex = run(
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError: The rendezvous 'job-7' is closed.\n"
        '    "message": "RendezvousClosedError: ",\n'
        "torchelastic.rendezvous.api.RendezvousClosedException\n"
        "[W TCPStore.cpp:131] [c10d] recvVector failed on SocketImpl(fd=12, addr=[node-1]:45678, remote=[node-0]:29500): failed to recv, got 0 bytes\n"
        "[E socket.cpp:860] [c10d] Connection reset by peer while reading from [node-0]:29500\n")
    assert ev(ex, "store_error").select("line_no", "code").rows() == [
        (1, "rdzv_closed"), (2, "rdzv_closed"), (3, "rdzv_closed"), (4, "rdzv_closed"), (5, "peer_closed"),
        (6, "peer_closed")]


def test_store_timeouts_of_older_and_newer_torch():
    """tcputil::connect of PyTorch <= 1.12 raised a bare `RuntimeError: connect() timed out. Original timeout
    was N ms.` (no [c10d] tag); TCPStore::wait of 2.x raises `DistStoreError: wait timeout after N ms`. Both
    are store timeouts; a plain `connect() timed out` from some other library is not."""
    ex = run(
        "RuntimeError: connect() timed out. Original timeout was 60000 ms.\n"
        "torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//cuda//0\n"
        "requests.exceptions.ConnectTimeout: connect() timed out after 10s\n")
    assert ev(ex, "store_error").select("line_no", "code").rows() == [(1, "timeout"), (2, "timeout")]


def test_nan_families():
    ex = run(
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the learning rate, using gradient clipping or increasing the batch size.\n"
        "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.\n"
        "Rank 3, node n1, device 3, iteration 1201: Unexpected result inf (message='found Inf in local grad norm for bucket #0 in backward pass before data-parallel communication collective')\n"
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n"
        "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training.\n"
        "FloatingPointError: invalid value (nan) encountered in jit(train_step)\n"
        "ValueError: loss must be finite, got 3.2 (checked with jnp.isfinite; NaN handling on)\n")
    assert ev(ex, "nan")["line_no"].to_list() == [1, 2, 3, 4, 5, 6]


def test_trainers_raising_on_a_non_finite_loss_are_nan():
    """Trainers that raise on a non-finite loss: detectron2's SimpleTrainer (detectron2/engine/train_loop.py
    `_write_metrics`, `raise FloatingPointError(f"Loss became infinite or NaN at iteration={iter}!\\n"
    f"loss_dict = {metrics_dict}")`; forks put `loss_dict={...}.` on the same line), an mmcv
    CheckIsfiniteHook-style `assert torch.isfinite(loss), 'loss become infinite or NaN!'`, and MosaicML
    Composer's NaNMonitor (composer/callbacks/nan_monitor.py `raise RuntimeError('Train loss contains a
    NaN.')`). The printed loss_dict line and a healthy `loss is normal` are not NaN reports."""
    ex = run(
        "FloatingPointError: Loss became infinite or NaN at iteration=27!\n"
        "loss_dict = {'loss_cls': tensor(nan, device='cuda:0', grad_fn=), 'loss_box_reg': tensor(0.2576, device='cuda:0', grad_fn=)}\n"
        "FloatingPointError: Loss became infinite or NaN at iteration=1999! loss_dict={'loss_ce': inf}.\n"
        "AssertionError: loss become infinite or NaN!\n"
        "RuntimeError: Train loss contains a NaN.\n"
        "loss is normal\n")
    assert ev(ex, "nan")["line_no"].to_list() == [1, 3, 4, 5]


def test_processgroupnccl_exit_and_barrier_warnings_are_claimed_without_an_error():
    """ProcessGroupNCCL's warnings of a normal run (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; the
    line numbers are the ones the logs print): the destructor's shutdown notice in the 2.4-2.5 wording
    (`process group has NOT been destroyed before we destruct ProcessGroupNCCL`, :1250) and the 2.6+ one
    (`destroy_process_group() was not called before program exit`, :1496), and barrier()'s
    `using GPU N to perform barrier as devices used by this process are currently unknown` (:4115), are
    claimed companions, not errors (the exit notice is an info `pg_exit` context event: precedence.toml
    [exit_wait] reads a watchdog firing after it as a hang in the exit); a real error next to them is still
    read."""
    ex = run(
        "[rank1]:[W414 16:54:27.214824770 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 (function operator())\n"
        "[rank2]:[W219 03:41:15.167016385 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 2]  using GPU 2 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular device,or call init_process_group() with a device_id.\n"
        "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[rank0]:[W604 08:55:15.856186408 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())\n")
    errors = ex.events.filter(pl.col("severity").is_in(["error", "critical"]))
    assert set(errors["line_no"].to_list()) == {3} and "cuda_error" in errors["kind"].to_list()
    assert ev(ex, "pg_exit")["line_no"].to_list() == [1, 4]
    assert set(ex.events["line_no"].to_list()) == {1, 3, 4}
    assert {1, 2, 4} <= set(ex.claimed.to_list())


def test_tpu_allocator_oom_family():
    """The TPU runtime's allocator refusals (torch_xla/XRT glog lines, JAX on TPU, the bare continuation
    line of TF1's `Resource exhausted: From /job:tpu_worker`) are device OOM; TF's OOM hint is a claimed
    companion, not an error of its own; XLA's status summary is not an OOM. TF's TF_CHECK_OK fatal
    `Non-OK-status: ... status: Internal: out of memory` is one too; the same line with another CUDA status
    (no kernel image) is not."""
    ex = run(
        "2022-04-04 00:27:49.642380: E tensorflow/compiler/xla/xla_client/xla_util.cc:88]   (1) RESOURCE_EXHAUSTED: Attempting to reserve 6.48G at the bottom of memory. That was not possible. There are 6.78G free, 0B reserved, and 3.33G reservable.\n"
        "2022-04-04 00:27:49.642390: E tensorflow/compiler/xla/xla_client/xla_util.cc:88] Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info. This isn't available when running in Eager mode.\n"
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)\n"
        "Attempting to reserve 3.95G at the bottom of memory. That was not possible. There are 1.92G free, 0B reserved, and 1.92G reservable.; \n"
        "2022-04-04 00:27:49.642399: E tensorflow/compiler/xla/xla_client/xla_util.cc:88] 0 successful operations.\n"
        "2020-08-05 10:00:00.278898: F .\\tensorflow/core/kernels/random_op_gpu.h:232] Non-OK-status: GpuLaunchKernel(FillPhiloxRandomKernelLaunch<Distribution>, num_blocks, block_size, 0, d.stream(), gen, data, size, dist) status: Internal: out of memory\n"
        "Non-OK-status: GpuLaunchKernel (FillPhiloxRandomKernelLaunch <Distribution>, num_blocks, block_size, 0, d.stream (), gen, data, size, dist) status: INTERNAL: out of memory\n"
        "2020-10-09 20:52:00.278898: F .\\tensorflow/core/kernels/random_op_gpu.h:232] Non-OK-status: GpuLaunchKernel(FillPhiloxRandomKernelLaunch<Distribution>, num_blocks, block_size, 0, d.stream(), gen, data, size, dist) status: Internal: no kernel image is available for execution on the device\n")
    assert ev(ex, "oom").select("line_no", "code").rows() == [(1, "gpu"), (3, "gpu"), (4, "gpu"), (6, "gpu"), (7, "gpu")]
    assert 2 in ex.claimed.to_list()


def test_megatron_nan_checks_name_rank_node_and_device():
    """Megatron's NaN checks say who found the NaN (global rank, os.uname node, CUDA device), in both the
    assertion form and the rerun state machine's form; the parser takes host/rank/gpu from that content."""
    ex = run(
        "AssertionError: Rank 3: found NaN in local grad norm in backwards pass. Device: 3, node: set-zw04-kubernetes-pc133.mt\n"
        "ValueError: Rank 12: found NaN in local forward loss calculation. Device: 4, node: gpu-node-017\n"
        "RuntimeError: Rank 7, node ed04b71d5c00, device 7, iteration -1: Unexpected result nan (message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')\n"
        "ValueError: loss is nan on rank 2\n")
    assert ev(ex, "nan").select("line_no", "host", "rank", "gpu").rows() == [
        (1, "set-zw04-kubernetes-pc133.mt", 3, 3), (2, "gpu-node-017", 12, 4), (3, "ed04b71d5c00", 7, 7),
        (4, None, None, None)]


def test_megatron_nan_checks_without_a_node_still_name_the_rank():
    """The older / forked wording (`Rank 11: found NaN in local grad norm ... Device: 3`, no node; `found Inf`)
    names the rank that found it; a bare `Rank N` elsewhere in a line is not a self-report."""
    ex = run(
        "AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 3\n"
        "AssertionError: Rank 0: found Inf in local grad norm in backward pass before data-parallel communication collective. Device: 0\n"
        "ValueError: Rank 5: found NaN in local forward loss calculation. Device: 5\n"
        "RuntimeError: Function 'SolveBackward' returned nan values in its 0th output. Rank 4 of 8\n")
    assert ev(ex, "nan").select("line_no", "host", "rank", "gpu").rows() == [
        (1, None, 11, 3), (2, None, 0, 0), (3, None, 5, 5), (4, None, None, None)]


def test_cpp_terminate_what_line_is_the_exception():
    # libstdc++'s verbose terminate handler: the thrown type, then `what():` with the error itself.
    # Non-c10 types become exception events (code = the type); c10:: errors restate lines PyTorch
    # printed on their own, and a what() line already read as a CUDA error is not read twice.
    ex = run(
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  Error (gpu_burn-drv.cpp:298): system not yet initialized\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: unknown error\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
        "NCCL error: unhandled system error\n"
        "terminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc\n"
        "terminate called without an active exception\n"
        # PyTorch < 2.2: the watchdog's own timeout line, restated as a std::runtime_error
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
        "Timeout(ms)=1800000) ran for 1800064 milliseconds before timing out.\n")
    exc = ev(ex, "exception")
    assert list(zip(exc["line_no"].to_list(), exc["code"].to_list(), strict=True)) == [
        (2, "std::runtime_error"), (8, "std::bad_alloc")]
    assert ev(ex, "cuda_error")["line_no"].to_list() == [4]
    assert ev(ex, "watchdog_timeout").is_empty()
    assert set(range(1, 12)) <= set(ex.claimed.to_list())


def test_open_mpi_signal_handler_and_glibc_heap_corruption():
    """Open MPI's signal handler (opal/util/stacktrace.c) names the signal by strsignal on its
    `Signal:` line; its other lines are companions. glibc's malloc_printerr messages are a native
    crash of their own (code heap_corruption), in the current and the pre-2.26 wrappings."""
    ex = run("free(): corrupted unsorted chunks\n"
             "[rack1-93-slot7:186363] *** Process received signal ***\n"
             "[rack1-93-slot7:186363] Signal: Aborted (6)\n"
             "[rack1-93-slot7:186363] Signal code:  (-6)\n"
             "[gpu-07:4242] Signal: Segmentation fault (11)\n"
             "[gpu-07:4242] Signal code: Address not mapped (1)\n"
             "[gpu-07:4242] Failing at address: 0x10\n"
             "[gpu-07:4242] *** End of error message ***\n"
             "*** Error in `python3': double free or corruption (!prev): 0x0000000001a2b3c0 ***\n"
             "Epoch 3: corrupted batch skipped, free(): called by loader\n")
    assert ev(ex, "segfault").select("line_no", "code").rows() == [
        (1, "heap_corruption"), (3, "SIGABRT"), (5, "SIGSEGV"), (9, "heap_corruption")]
    assert set(range(1, 10)) <= set(ex.claimed.to_list())
    assert 10 not in ex.claimed.to_list()


def test_desync_report_families() -> None:
    """TraceUtils.h retrieveDesyncReport: ranks stuck inside the oldest pending collective (`lagging:`) and
    ranks that never entered it (`not_joined:`), with and without the report's tab indentation, behind a
    `[rankN]:` prefix, and the old `ranks [..] are the lagging ranks` wording."""
    ex = run("[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] Rank 0\n"
             "\t - [0] Timeout at collective: ALLREDUCE, #315\n"
             "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
             "\t   - [5, 6] joined but didn't finish collective #183 (count from 1)\n"
             "\t     [7] finished collective #182, but didn't join collective #183 (count from 1)\n"
             "[rank2]:\t - To our best knowledge, ranks [3] are the lagging ranks that caused this timeout. "
             "They never joined any collectives\n"
             "             [0, 1] finished collective #9, but didn't join collective #10 (count from 1)\n")
    assert ev(ex, "watchdog_status").select("line_no", "code").rows() == [
        (4, "lagging:5,6"), (5, "not_joined:7"), (6, "not_joined:3"), (7, "not_joined:0,1")]
    assert ex.claimed.to_list() == list(range(1, 8))  # the `...cpp:1937] Rank 0` head too


def test_device_side_assert_rows_family():
    """A kernel's failed assert() as the device runtime prints it (CUDA `block: [..], thread: [..] Assertion
    `cond` failed.`, ROCm `Device-side assertion `cond' failed.`, PyTorch's TORCH_USE_CUDA_DSA summary): one
    cuda_error event per run of rows, code `device-side assert`; every row claimed; glibc's host assert is not one."""
    rows = "".join(
        f"../aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [5,0,0], thread: [{t},0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.\n" for t in range(96, 100))
    text = (rows
            + "some other output\n"
            + "/tmp/torchinductor_root/7x/c7xabc.py:25: unknown: block: [12,0,0], thread: [64,0,0] Assertion "
              "`index out of bounds: 0 <= tmp3 < 50257` failed.\n"
            + "/opt/rocm/include/hip/amd_detail/amd_hip_runtime.h:120: indexSelectLargeIndex: Device-side assertion "
              "`srcIndex < srcSelectDimSize' failed.\n"
            + "/pytorch/aten/src/THCUNN/SpatialClassNLLCriterion.cu:106: cunn_SpatialClassNLLCriterion_updateOutput_kernel:"
              " block: [0,0,0], thread: [725,0,0] Assertion `t >= 0 && t < n_classes` failed\n"
            + "python: train.c:12: main: Assertion `n > 0' failed.\n"
            + "1 CUDA device-side assertion failures were found on GPU #3!\n")
    ex = run(text)
    da = ev(ex, "cuda_error").filter(pl.col("code") == "device-side assert")
    assert da["line_no"].to_list() == [1, 6, 7, 8, 10]
    assert da.filter(pl.col("line_no") == 10)["gpu"].to_list() == [3]
    claimed = set(ex.claimed.to_list())
    assert {1, 2, 3, 4, 6, 7, 8, 10} <= claimed and 5 not in claimed and 9 not in claimed


WD_MAIN = ("[rank2]:[E816 01:09:38.174648046 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
           "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 "
           "milliseconds before timing out.\n")
WD_LOGGED = ("[rank2]:[E816 01:09:38.174648046 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 2] Process group "
             "watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 "
             "milliseconds before timing out.\n")


def test_watchdog_restatement_is_the_timeout_when_the_main_line_is_missing():
    # ncclCommWatchdog's `Process group watchdog thread terminated with exception: <what()>`: with the main
    # line in the file it restates it (one timeout); alone (an excerpt, Ray's dedup) it is the record
    both = ev(run(WD_MAIN + WD_LOGGED), "watchdog_timeout")
    assert both["line_no"].to_list() == [1]
    alone = ev(run(WD_LOGGED + WD_LOGGED.replace("[rank2]", "[rank3]").replace("Rank 2]", "Rank 3]")),
               "watchdog_timeout")
    assert list(zip(alone["line_no"].to_list(), alone["rank"].to_list(), alone["code"].to_list(), strict=True)) == [
        (1, 2, "1"), (2, 3, "1")]
    # 2.3 bare severity, behind an MPIJob launcher's host prefix (LlamaFactory#5558)
    bare = ev(run("mpi-rc1ou1aw-launcher: [rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 0] Process group watchdog "
                  "thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
                  "WorkNCCL(SeqNum=635, OpType=ALLREDUCE, NumelIn=576156928, NumelOut=576156928, Timeout(ms)=600000) "
                  "ran for 600005 milliseconds before timing out.\n"
                  "mpi-rc1ou1aw-launcher: frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57\n"),
              "watchdog_timeout")
    assert list(zip(bare["rank"].to_list(), bare["code"].to_list(), bare["host"].to_list(), strict=True)) == [
        (0, "635", "mpi-rc1ou1aw-launcher")]
    # the terminate handler's `what():` copy after the logged one stays a restatement
    what = ev(run(WD_LOGGED + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
                  "  what():  " + WD_LOGGED.split("]:", 1)[1].split("] ", 1)[1]), "watchdog_timeout")
    assert what["line_no"].to_list() == [1]


STALL_OLD = ("[2021-02-02 21:19:07.345988: W /tmp/pip-install-dxtho7yu/horovod/common/stall_inspector.cc:105] One or "
             "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
             "for remainder of ranks for more than 10 seconds. This may indicate that different ranks are trying to "
             "submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \n"
             "Missing ranks:\n"
             "0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0]\n")
STALL_NEW = ("[2023-05-01 10:00:00.000000: E /horovod/common/stall_inspector.cc:106] One or more tensors were submitted "
             "to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more "
             "than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that "
             "only subset of ranks is submitting tensors, which will cause deadlock. \n"
             "Stalled ranks:\n"
             "1!: [allreduce.grad_0, allreduce.grad_1]\n"
             "3!: [allreduce.grad_0]\n"
             "One or more rank (marked by \"!\") is stalled for longer than 120 seconds. Will shutdown.\n")
STALL_CERR = ("WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
              "are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are "
              "trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause "
              "deadlock. \n")


@pytest.mark.parametrize(("text", "code", "rank"), [
    (STALL_OLD, "warning", 0),       # one rank listed: that rank never submitted
    (STALL_NEW, "shutdown", None),   # two ranks: no single one
    (STALL_CERR, "warning", None),   # Horovod 0.16 operations.cc (std::cerr)
])
def test_horovod_stall_inspector(text: str, code: str, rank):
    ex = run(text, rank_hint=5)
    st_ = ev(ex, "stall_warning")
    assert st_["line_no"].to_list() == [1]
    assert st_["code"].to_list() == [code]
    assert st_["rank"].to_list() == [rank]
    n = text.count("\n")
    assert set(range(1, n + 1)) <= set(ex.claimed.to_list())
    check_accounting(ex, n)


def test_horovod_stall_inspector_terminal_wrapped_is_one_report():
    # hard-wrapped by the terminal (horovod#2285): the head line and its continuation are one report
    ex = run("Fri Sep 18 03:11:09 2020[0]<stderr>:[2020-09-18 03:11:09.347196: W /tmp/pip-req-build-dc48wa7r/horovod/"
             "common/stall_inspector.cc:105] One or more ten[283/1927]\n"
             "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
             "ranks for more than 60 seconds. This may indicate that dif\n"
             "ferent ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, "
             "which will cause deadlock.\n"
             "Fri Sep 18 03:11:09 2020[0]<stderr>:Missing ranks:\n"
             "Fri Sep 18 03:11:09 2020[0]<stderr>:0: [broadcast_object_fn.sz]\n"
             "Fri Sep 18 03:11:09 2020[0]<stderr>:8: [training/DistributedAdadelta_Allreduce/cond/HorovodAllreduce_0]\n")
    st_ = ev(ex, "stall_warning")
    assert st_["line_no"].to_list() == [1] and st_["rank"].to_list() == [None]
    assert set(range(1, 7)) <= set(ex.claimed.to_list())


def test_rank_rows_without_a_stall_report_are_not_claimed():
    ex = run("0: [1, 2, 3]\nRuntimeError: boom\n")
    assert ev(ex, "stall_warning").is_empty()
    assert 1 not in set(ex.claimed.to_list())


def test_hip_errors_are_cuda_error_events():
    """PyTorch on ROCm raises the hipified check as `HIP error: <hipGetErrorString>`: the same cuda_error event,
    code the error string (RuntimeError and ROCm 7's torch.AcceleratorError), its hint lines no event."""
    ex = run("RuntimeError: HIP error: invalid device function\n"
             "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
             "might be incorrect.\n"
             "For debugging consider passing AMD_SERIALIZE_KERNEL=3\n"
             "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n"
             "torch.AcceleratorError: HIP error: an illegal memory access was encountered\n"
             "RuntimeError: HIP error: out of memory\n")
    assert ev(ex, "cuda_error").select("line_no", "code").rows() == [
        (1, "invalid device function"), (5, "an illegal memory access was encountered"), (6, "out of memory")]
    assert pytorch.sniff("RuntimeError: HIP error: invalid device function\n") > 0


def test_warnings_are_claimed_without_events_but_store_warnings_and_exceptions_stay():
    """TORCH_WARN through c10's handler (`[W file:line] Warning: ...`, unstamped < 2.2 and stamped 2.2+ behind
    `[rankN]:`), Python's warnings module (with and without the `file:line: ` head, and the echoed
    `warnings.warn(` source line) and the DDP reducer notices' bodies (posted without a head) are warnings:
    claimed, no event (fresh/b12ok sam2-492, segformer73, modelscope192, hypertorch121). A C10D_WARNING glog `W`
    line without `Warning: ` (TCPStore) stays a store event, and an exception line stays an exception."""
    text = (
        "[W reducer.cpp:347] Warning: Grad strides do not match bucket view strides. This is not an error, "
        "but may impair performance.\n"
        "grad.sizes() = [19, 256, 1, 1], strides() = [256, 1, 256, 256]\n"
        "bucket_view.sizes() = [19, 256, 1, 1], strides() = [256, 1, 1, 1] (function operator())\n"
        "[rank1]:[W1126 10:00:01.123456789 reducer.cpp:1400] Warning: find_unused_parameters=True was specified in "
        "DDP constructor, but did not find any unused parameters in the forward pass. (function operator())\n"
        "/opt/x/dataloader.py:554: UserWarning: This DataLoader will create 8 worker processes in total.\n"
        "  warnings.warn(_create_warning_msg(\n"
        "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated and will fail in a future release.\n"
        "find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters in "
        "the forward pass.\n"
        "Grad strides do not match bucket view strides. This may indicate grad was not created according to the "
        "gradient layout contract.\n"
        "[W506 00:43:56.240378877 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=3, addr=[h]:1, "
        "remote=[h]:2): Connection reset by peer\n"
        "RuntimeError: Warning: expected all tensors to be on the same device\n"
        # a handler that wraps at the console width (rich, fresh/b13store sovits330): the message on the next line
        "C:\\venv\\lib\\site-packages\\torch\\_utils.py:776: UserWarning:\n"
    )
    ex = run(text)
    check_accounting(ex, 12)
    assert set(range(1, 10)) | {12} <= set(ex.claimed.to_list())
    assert sorted(ex.events["line_no"].to_list()) == [10, 11]
    assert ev(ex, "exception")["line_no"].to_list() == [11]


def test_tensorflow_optional_library_notices_are_claimed_but_its_w_level_failures_stay():
    """TensorFlow's notices that an optional library is absent (dso_loader.cc `Could not load dynamic library
    '%s'; dlerror: %s`, cudart_stub.cc `Ignore above cudart dlerror ...`, TF-TRT's `Cannot dlopen some
    TensorRT libraries`), through TF's C++ logger or bare, are claimed without an event: TF goes on without
    the library (fresh/b14env lightweightmmm23). TF logs failures at the same `W` level: the BFC allocator's
    out-of-memory stays an oom event (fresh/b7app t5x870), and an OP_REQUIRES failure is not claimed (it stays
    for the error-line reader and tf-checkpoint-op-failed)."""
    text = (
        "2022-06-22 15:44:53.578885: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not "
        "load dynamic library 'cudart64_110.dll'; dlerror: cudart64_110.dll not found\n"
        "2022-12-09 16:44:07.597312: W tensorflow/compiler/xla/stream_executor/platform/default/dso_loader.cc:64] "
        "Could not load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared "
        "object file: No such file or directory\n"
        "2022-12-09 16:44:07.597403: I tensorflow/compiler/xla/stream_executor/cuda/cudart_stub.cc:29] Ignore "
        "above cudart dlerror if you do not have a GPU set up on your machine.\n"
        "2024-12-28 16:10:57.627819: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: "
        "Cannot dlopen some TensorRT libraries. If you would like to use Nvidia GPU with TensorRT, please make "
        "sure the missing libraries mentioned above are installed properly.\n"
        "Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object file: "
        "No such file or directory\n"
        "2022-10-25 21:52:08.138224: W external/org_tensorflow/tensorflow/tsl/framework/bfc_allocator.cc:479] "
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate 27.93GiB (rounded to 29994184448)requested by "
        "op\n"
        "2020-03-02 10:11:12.345678: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at "
        "save_restore_v2_ops.cc:109 : Permission denied: /ckpt/model.ckpt-100_temp; Permission denied\n"
    )
    ex = run(text)
    check_accounting(ex, 7)
    assert set(range(1, 6)) <= set(ex.claimed.to_list())
    assert 7 not in ex.claimed.to_list()
    assert ev(ex, "oom")["line_no"].to_list() == [6]
    assert sorted(ex.events["line_no"].to_list()) == [6]


def test_pg_tag_group_key_is_the_guid_and_sub_group_ranks_are_not_global():
    """ProcessGroupNCCL::createLogPrefix: `[PG ID <local id> PG GUID <uid>(<desc>) Rank <group rank>]`. The
    group's key is the GUID (the same on its member ranks; the local ID counts this process's groups); the
    tag's rank is the global rank only in the default group, and `[rankN]:` names the global rank anyway."""
    ex = run(
        "[E501 10:00:00.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 6] Exception "
        "(either an error or timeout) detected by watchdog at work: 9, last enqueued NCCL work: 9, last completed "
        "NCCL work: 8.\n"
        "[E501 10:00:00.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 12 PG GUID 99(EXPERT_MODEL_PARALLEL_GROUP) "
        "Rank 4] Exception (either an error or timeout) detected by watchdog at work: 3, last enqueued NCCL work: "
        "3, last completed NCCL work: 2.\n"
        "[rank15]:[E501 10:00:00.000000000 ProcessGroupNCCL.cpp:1795] [PG ID 11 PG GUID 112 Rank 0] Exception "
        "(either an error or timeout) detected by watchdog at work: 57, last enqueued NCCL work: 57, last "
        "completed NCCL work: 56.\n"
        "[E501 10:00:00.000000000 ProcessGroupNCCL.cpp:1414] [PG 5 Rank 2] Exception (either an error or timeout) "
        "detected by watchdog at work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.\n")
    ct = ex.tables["collective_timeouts"]
    assert ct.select("line_no", "rank", "pg", "seq").rows() == [
        (1, 6, "0", 9), (2, None, "99", 3), (3, 15, "112", 57), (4, None, "5", 7)]


def test_exit_notice_is_a_pg_exit_context_event():
    ex = run(
        "[rank0]:[W616 21:29:33.762196891 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was "
        "not called before program exit, which can leak resources. For more info, please see "
        "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())\n"
        "[rank1]:[W515 07:06:42.829549331 ProcessGroupNCCL.cpp:1117] WARNING: process group has NOT been destroyed "
        "before it is being destructed. On normal program exit, the application should call destroy_process_group\n")
    assert ev(ex, "pg_exit").select("line_no", "rank", "severity", "code").rows() == [
        (1, 0, "info", "exit"), (2, 1, "info", "exit")]
    check_accounting(ex, 2)


def test_last_error_takes_the_next_line_with_text_and_nothing_when_the_file_ends():
    """`Last error:` is followed by the last NCCL WARN text: the next line of the stream that holds text (a
    blank line between is skipped); an excerpt cut right after `Last error:` has no such line, and no event
    is made of nothing (fresh/b13hf ds2931, whose file ends there; in a batch the next row is forensics/bulk's
    separator, which is no line of the file)."""
    head = ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system "
            "error, NCCL version 2.14.3\n"
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n"
            "Last error:\n")
    cut = run(head)
    assert ev(cut, "dist_error").select("line_no", "code").rows() == [(1, "ncclSystemError")]
    check_accounting(cut, 3)
    full = run(head + "\n" + "NET/IB : Got completion from peer 10.0.0.2<44372> with error 12, opcode 32537, len 0, "
               "vendor err 129 (Recv)\n")
    assert ev(full, "dist_error").select("line_no", "code").rows() == [(1, "ncclSystemError"), (5, "ncclSystemError")]
    check_accounting(full, 5)


def test_gloo_errors_by_family():
    """The Gloo transport under ProcessGroupGloo (pytorch/gloo gloo/transport/tcp/{device,pair,helpers}.cc,
    torch ProcessGroupGloo.cpp): each message family gets its code (GLOO_BY_TEXT), whatever wraps it (a traceback's
    RuntimeError, the glog `[E ProcessGroupGloo.cpp:N]` line behind `[rankN]:`, a Ray worker prefix); device.cc's
    enforce hard-wrapped onto its own line still reads; the loopback fallback TORCH_WARN is a warning; a line that
    only names gloo (`backend=gloo`) is no event."""
    text = (
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
        "Unable to find address for: vx00\n"
        "RuntimeError: [enforce fail at .../gloo/transport/tcp/device.cc:84]\n"
        "  ifa != nullptr. Unable to find address for: ^lo\n"
        "[rank8]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with "
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
        "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152]\n"
        "  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:14215\n"
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895\n"
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.92]:25266: "
        "Connection reset by peer\n"
        "[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with Connection reset by peer\n"
        "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
        "1800000ms for recv operation to complete\n"
        "RuntimeError: Application timeout caused pair closure\n"
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
        "op.nbytes. 881920 vs 58880. Received data size doesn't match expected size. Is there a distributed "
        "collective mismatch in your code?\n"
        "[rank1]:[W427 03:10:15.764108557 ProcessGroupGloo.cpp:715] Warning: Unable to resolve hostname to a (local) "
        "address. Using the loopback address as fallback. Manually set the network interface to bind to with "
        "GLOO_SOCKET_IFNAME. (function operator())\n"
        "INFO 05-04 14:43:16 parallel_state.py:803] world_size=2 rank=0 backend=gloo\n"
    )
    ex = run(text)
    check_accounting(ex, 15)
    g = ev(ex, "gloo_error")
    assert g.select("line_no", "code", "severity").rows() == [
        (1, "address", "error"), (2, "address", "error"), (3, "address", "error"), (4, "connect_failed", "error"),
        (5, "connect_failed", "error"), (6, "connect_failed", "error"), (7, "peer_closed", "error"),
        (8, "peer_closed", "error"), (9, "peer_closed", "error"), (10, "timeout", "error"), (11, "timeout", "error"),
        (12, "size_mismatch", "error"), (13, "loopback_fallback", "warning")]
    assert g.filter(pl.col("line_no") == 4)["rank"].to_list() == [8]
    assert g.filter(pl.col("line_no") == 13)["rank"].to_list() == [1]
    assert 14 not in ex.events["line_no"].to_list()


def test_gloo_words_elsewhere_are_not_gloo_errors():
    """Gloo's condition texts are read only in Gloo's lines: another program's `Unable to find address for`, or a
    c10d store's own reset (TCPStore, a store_error), is no gloo_error."""
    ex = run(
        "Unable to find address for Device 0\n"
        "[W506 00:43:56.240378877 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=3, addr=[h]:1, "
        "remote=[h]:2): Connection reset by peer\n")
    assert ev(ex, "gloo_error").is_empty()
    assert ev(ex, "store_error")["line_no"].to_list() == [2]


# --- exceptions Python reports and ignores (IGNORED_HEAD, IGNORED_PY2, FINALIZER_FRAME): exception_ignored
IGNORED_DEL = """Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3b1c2d9ee0>
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__
    self._shutdown_workers()
  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1443, in _shutdown_workers
    if w.is_alive():
  File "/opt/conda/lib/python3.10/multiprocessing/process.py", line 160, in is_alive
    assert self._parent_pid == os.getpid(), 'can only test a child process'
AssertionError: can only test a child process
"""
FINALIZER_NFS = """Traceback (most recent call last):
  File "/usr/lib/python3.7/multiprocessing/util.py", line 265, in _run_finalizers
    finalizer()
  File "/usr/lib/python3.7/multiprocessing/util.py", line 189, in __call__
    res = self._callback(*self._args, **self._kwargs)
  File "/usr/lib/python3.7/shutil.py", line 491, in rmtree
    _rmtree_safe_fd(fd, path, onerror)
  File "/usr/lib/python3.7/shutil.py", line 449, in _rmtree_safe_fd
    onerror(os.unlink, fullname, sys.exc_info())
  File "/usr/lib/python3.7/shutil.py", line 447, in _rmtree_safe_fd
    os.unlink(entry.name, dir_fd=topfd)
OSError: [Errno 16] Device or resource busy: '.nfs00000000160c011a00063458'
"""
ATEXIT_OLD = """Error in atexit._run_exitfuncs:
Traceback (most recent call last):
  File "/usr/lib/python3.6/site-packages/wandb/sdk/wandb_run.py", line 1612, in _atexit_cleanup
    self._on_finish()
ConnectionResetError: [Errno 104] Connection reset by peer
"""
PY2_DEL = ("Exception AttributeError: \"'NoneType' object has no attribute 'close'\" in <bound method "
           "_DataLoaderIter.__del__ of <torch.utils.data.dataloader._DataLoaderIter object at 0x7f2c0a8e5d50>> ignored\n")
# threading.excepthook's default (3.8+), a W&B uploader thread (wandb#2100); 3.10+ names carry the target
THREAD_WANDB = """Exception in thread Thread-5:
Traceback (most recent call last):
  File "/opt/conda/lib/python3.8/threading.py", line 932, in _bootstrap_inner
    self.run()
  File "/opt/conda/lib/python3.8/site-packages/wandb/sdk/internal/file_stream.py", line 277, in _handle_response
    raise response
requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: https://api.wandb.ai/files/u/p/r/file_stream
"""
THREAD_310 = """Exception in thread Thread-3 (_pin_memory_loop):
Traceback (most recent call last):
  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner
    self.run()
RuntimeError: Pin memory thread exited unexpectedly
"""
THREAD_SHUTDOWN = """Exception in thread QueueFeederThread (most likely raised during interpreter shutdown):
Traceback (most recent call last):
  File "/usr/lib/python2.7/threading.py", line 801, in __bootstrap_inner
TypeError: 'NoneType' object is not callable
"""
THREAD_OLD = """Unhandled exception in thread started by <function worker at 0x7f0c2a1b2d30>
Traceback (most recent call last):
  File "push.py", line 9, in worker
    send(metrics)
ConnectionRefusedError: [Errno 111] Connection refused
"""
FATAL = """Traceback (most recent call last):
  File "train.py", line 12, in <module>
    main()
KeyError: 'labels'
"""


@pytest.mark.parametrize("text,codes", [
    (IGNORED_DEL, ["ignored", "AssertionError"]),
    (FINALIZER_NFS, ["OSError"]),
    (ATEXIT_OLD, ["ignored", "ConnectionResetError"]),
    (PY2_DEL, ["AttributeError"]),
    (THREAD_WANDB, ["ignored", "requests.exceptions.HTTPError"]),
    (THREAD_310, ["ignored", "RuntimeError"]),
    (THREAD_SHUTDOWN, ["ignored", "TypeError"]),
    (THREAD_OLD, ["ignored", "ConnectionRefusedError"]),
])
def test_reported_and_ignored_exceptions_are_their_own_kind(text: str, codes: list[str]) -> None:
    ex = run(text)
    assert ev(ex, "exception").is_empty()
    assert ev(ex, "exception_ignored")["code"].to_list() == codes
    assert (ev(ex, "exception_ignored")["severity"] == "warning").all()


def test_an_ignored_traceback_does_not_hide_the_fatal_one_after_it() -> None:
    ex = run(IGNORED_DEL + FATAL)
    assert ev(ex, "exception")["code"].to_list() == ["KeyError"]
    assert ev(ex, "exception_ignored")["code"].to_list() == ["ignored", "AssertionError"]
    ex = run(THREAD_WANDB + FATAL)  # a thread's exception, then the main thread's: the second is the failure
    assert ev(ex, "exception")["code"].to_list() == ["KeyError"]


def test_a_thread_head_is_read_only_at_the_line_start() -> None:
    """`Exception in thread` inside another message, or a CUDA error a thread died of: not an ignored head."""
    ex = run("RuntimeError: Exception in thread pool worker: CUDA error: an illegal memory access was encountered\n")
    assert ev(ex, "exception_ignored").is_empty()
    assert not ev(ex, "cuda_error").is_empty()


def test_a_cuda_error_a_thread_died_of_is_still_read() -> None:
    """The ignored head only changes the traceback's exception line into `exception_ignored`: a CUDA error
    in it (a pin-memory thread's) stays a cuda_error event for the rules."""
    ex = run("Exception in thread Thread-3 (_pin_memory_loop):\n"
             "Traceback (most recent call last):\n"
             '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner\n'
             "    self.run()\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert ev(ex, "cuda_error")["line_no"].to_list() == [5]


# Flight Recorder's analyzer (tools/flight_recorder components/builder.py): `Not all ranks joining collective`
# in its three wordings, the ranks from the same line or the `missing ranks:` line that follows
def test_fr_trace_not_all_ranks_joining_three_wordings():
    # 2.6+ (entry_state.log): the output posted in pytorch/pytorch#140969's test plan
    new = ("Not all ranks joining collective: sequence number: 31117\ninternal record id: 31116\n"
           "group info: 0:default_pg\ncollective: nccl:all_reduce\nmissing ranks: {3, 4, 5, 6, 7}\n"
           "input sizes: [[1571911]]\noutput sizes: [[1571911]]\nworld size: 8\n"
           "expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}\ncollective state: scheduled\n")
    ex = run(new)
    e = ev(ex, "watchdog_status")
    assert e.select("line_no", "code", "severity").rows() == [(1, "not_joined:3,4,5,6,7", "error")]
    assert 5 in ex.claimed.to_list()
    # 2.5 / 2.6 logger wording: the torchfrtrace output of pytorch/tutorials' flight recorder tutorial
    mid = ("Not all ranks joining collective 5 at entry 4\ngroup info: 0:default_pg\ncollective: nccl:all_reduce\n"
           "missing ranks: {1}\ninput sizes: [[3, 4]]\noutput sizes: [[3, 4]]\nexpected ranks: 2\n"
           "collective state: scheduled\n")
    assert ev(run(mid), "watchdog_status").select("line_no", "code").rows() == [(1, "not_joined:1")]
    # 2.5's print: both parts on one line (builder.py `print(f"Not all ranks joining collective for group
    # {pg_name}:{desc} collective {profiling_name}", f"Missing ranks are {...}")`)
    old = "Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce Missing ranks are {2}\n"
    assert ev(run(old), "watchdog_status").select("line_no", "code").rows() == [(1, "not_joined:2")]
    # without a missing-ranks set nearby nothing is said of who
    assert ev(run("Not all ranks joining collective 5 at entry 4\n"), "watchdog_status").is_empty()


def test_ggml_cuda_error_current_device_names_the_gpu():
    # ggml_cuda_error (ggml/src/ggml-cuda/ggml-cuda.cu): `CUDA error: <msg>`, `  current device: <id>, in function
    # <f> at <file>:<line>`, `  <stmt>`, then the abort line (GGML_ASSERT before GGML_ABORT; `<file>:<line>: CUDA
    # error` since); lines of fixtures/fresh/b22cuda/llamacpp5347 (ggml-org/llama.cpp#5347) and ik_llama.cpp#425
    text = ("CUDA error: peer access is already enabled\n"
            "  current device: 0, in function ggml_cuda_set_peer_access at /w/vendor/llama.cpp/ggml-cuda.cu:8001\n"
            "  cudaDeviceEnablePeerAccess(id_other, 0)\n"
            'GGML_ASSERT: /w/vendor/llama.cpp/ggml-cuda.cu:225: !"CUDA error"\n'
            "CUDA error: an illegal memory access was encountered\n"
            "  current device: 3, in function ggml_backend_cuda_synchronize at /h/ggml/src/ggml-cuda.cu:3067\n"
            "  cudaStreamSynchronize(cuda_ctx->stream())\n"
            "/h/ggml/src/ggml-cuda.cu:110: CUDA error\n"
            "CUDA error: initialization error\n"
            "  current device: -1, in function ggml_cuda_init at /h/ggml/src/ggml-cuda.cu:200\n"
            "  current device: 5, in function f at /h/x.cu:1\n")
    ex = run(text)
    cu = ev(ex, "cuda_error").sort("line_no")
    assert cu["line_no"].to_list() == [1, 5, 9]
    assert cu["code"].to_list() == ["peer access is already enabled", "an illegal memory access was encountered",
                                    "initialization error"]
    # -1 (cudaGetDevice failed) is unknown; a device line not right below an error line names nothing
    assert cu["gpu"].to_list() == [0, 3, None]
    claimed = set(ex.claimed.to_list())
    assert {2, 4, 6, 8, 10} <= claimed and 11 not in claimed
