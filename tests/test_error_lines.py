"""error_line events: unparsed error-like lines become events of source `generic` with the file's
host/rank hints, their own stamp or a neighbour's, and their body (launcher prefix peeled)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import polars as pl

from forensics.error_lines import error_line_events
from parsers.records import EVENT_SCHEMA

UTC_TZ = ZoneInfo("UTC")


def _unparsed(rows: list[tuple[int, int, str]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"file_id": pl.Int32, "line_no": pl.Int64, "text": pl.Utf8}, orient="row")


def _events(rows: list[tuple[int, int, datetime | None]]) -> pl.DataFrame:
    df = pl.DataFrame(rows, schema={"file_id": pl.Int32, "line_no": pl.Int64, "ts": EVENT_SCHEMA["ts"]}, orient="row")
    return df.with_columns(pl.lit("exact").alias("ts_quality"))


def test_lines_become_events_with_hints_stamps_and_bodies() -> None:
    un = _unparsed([
        (0, 3, "2024-05-01T10:00:05Z [rank3]: RuntimeError: Address already in use"),
        (0, 9, "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device"),
        (1, 1, "E0501 10:00:07.123456 12 foo.cc:1] Check failed: x"),
        (2, 4, "some warning: deprecated"),
    ])
    ev = _events([(0, 5, datetime(2024, 5, 1, 10, 0, 6, tzinfo=UTC))])
    out = error_line_events(un, {0: "n1/rank3.log", 1: "n2/x.log", 2: "n3/y.log"}, {0: "n1", 1: "n2"}, {1: 7},
                            ev, ref_year=2024, tz=UTC_TZ)
    assert out.columns[: len(EVENT_SCHEMA)] == list(EVENT_SCHEMA)
    rows = out.to_dicts()
    assert [(r["file_id"], r["line_no"]) for r in rows] == [(0, 3), (0, 9), (1, 1), (2, 4)]
    assert {r["source"] for r in rows} == {"generic"} and {r["kind"] for r in rows} == {"error_line"}
    a, b, c, d = rows
    assert a["message"] == "RuntimeError: Address already in use" and a["rank"] == 3  # wrappers peeled
    assert a["ts"] == datetime(2024, 5, 1, 10, 0, 5, tzinfo=UTC) and a["ts_quality"] == "exact"
    assert a["host"] == "n1" and a["path"] == "n1/rank3.log" and a["severity"] == "error"
    # no stamp of its own: the nearest earlier stamped event of the same file lends its time
    assert b["ts"] == datetime(2024, 5, 1, 10, 0, 6, tzinfo=UTC) and b["ts_quality"] == "derived"
    assert b["message"].startswith("include/shm.h:28 NCCL WARN")
    # glog stamp with the job's year; the file's rank hint
    assert c["ts"] == datetime(2024, 5, 1, 10, 0, 7, 123456, tzinfo=UTC) and c["rank"] == 7 and c["host"] == "n2"
    # no stamp anywhere in the file: missing, never guessed
    assert d["ts"] is None and d["ts_quality"] == "missing" and d["severity"] == "warning" and d["host"] is None


def test_wrapper_host_comes_before_the_path() -> None:
    out = error_line_events(_unparsed([(0, 1, "node-017: fatal: cannot open shared object libnccl.so.2")]),
                            {0: "n1/a.log"}, {0: "n1"}, {}, _events([]), tz=UTC_TZ)
    assert out["host"].to_list() == ["node-017"] and out["message"].to_list()[0].startswith("fatal:")


def test_launcher_prefix_gives_the_rank() -> None:
    out = error_line_events(_unparsed([(0, 1, "[rank12]: torch.OutOfMemoryError: boom")]), {0: "a.log"}, {}, {},
                            _events([]), tz=UTC_TZ)
    assert out["rank"].to_list() == [12] and out["message"].to_list() == ["torch.OutOfMemoryError: boom"]


def test_nothing_unparsed_nothing_made() -> None:
    empty = _unparsed([])
    assert error_line_events(empty, {}, {}, {}, _events([]), tz=UTC_TZ).is_empty()


def test_an_emitters_own_level_below_error_wins_over_its_error_words() -> None:
    """A line that states its emitter's level as informational (NCCL's `NCCL INFO` word on a line
    posted without its prefix, glog `I`) or opens with gdb's / a compiler's `warning: ` (or a Python
    warning) is no error for its words; the same words without such a level are (nccl#1292,
    nccl#258: both threads concluded nothing failed)."""
    texts = [
        " NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
        "h1:12:12 [0] NCCL INFO NET/Plugin: Plugin load (libnccl-net.so) returned 2 : failed to open",
        "I0501 10:00:07.123456 12 loader.cc:1] failed to read optional config, using defaults",
        "warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)",
        "/opt/x/data.py:41: UserWarning: failed to load image extension",
        "NCCL WARN Cuda failure 'invalid argument'",
        "E0501 10:00:07.123456 12 loader.cc:1] failed call to cuInit: CUDA_ERROR_NO_DEVICE",
        "RuntimeError: warning: this is the error text of an exception",
        "Test NCCL failure common.cu:892 'invalid device ordinal'",
    ]
    out = error_line_events(_unparsed([(0, i + 1, t) for i, t in enumerate(texts)]), {0: "a.log"}, {}, {},
                            _events([]), tz=UTC_TZ)
    assert out["severity"].to_list() == ["info", "info", "info", "warning", "warning",
                                         "error", "error", "error", "error"]


def test_a_zero_count_of_failures_is_no_failure() -> None:
    """An error word that only labels a counter of 0 (`"failed": 0`, `errors: 0`, `error_code: 0`, `0 errors`)
    makes an `info` line; a non-zero count, or another error word on the line, keeps it an error."""
    texts = ['  "failed": 0,', "60.0%  proc'd: 10 (2047 Gflop/s)   errors: 0   temps: 46 C",
             '  "error_code": 0,', "Tests run: 12, Failures: 0, Errors: 0", "summary: 0 errors",
             '  "failed": 2,', "errors: 0 - -524288000  (WARNING!)", "RuntimeError: failed: 0",
             "errors: 0.5"]
    out = error_line_events(_unparsed([(0, i + 1, t) for i, t in enumerate(texts)]), {0: "x.log"}, {}, {},
                            pl.DataFrame(schema={"file_id": pl.Int32, "line_no": pl.Int64}))
    assert out["severity"].to_list() == ["info"] * 5 + ["error"] * 4


def test_tensorflow_xla_logger_levels_info_and_warning_are_below_error() -> None:
    """TensorFlow / XLA's C++ logger (tsl/platform/default/logging.cc: `%Y-%m-%d %H:%M:%S.%06d: <I|W|E|F>[ tid]
    file:line] msg`) states its level: an `I` line is info and a `W` line a warning whatever its words (verlab
    DescriptorReasoning_ACCV_2024#5, a run that trained on: oneDNN's `... round-off errors ...` notice); `E` and
    `F` lines, and the same words without the logger's head, stay errors."""
    texts = [
        "2024-11-21 15:10:51.071692: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You may see "
        "slightly different numerical results due to floating-point round-off errors from different computation orders.",
        # with TF_CPP_LOG_THREAD_ID=1 (` %7u`)
        "2023-06-02 09:00:01.000001: I  123456 tensorflow/core/common_runtime/executor.cc:1197] [/device:CPU:0] (DEBUG "
        "INFO) Executor start aborting (this does not indicate an error and you can ignore this message): "
        "INVALID_ARGUMENT: You must feed a value for placeholder tensor 'Placeholder/_0' with dtype int32",
        "2020-06-08 05:30:15.889706: W tensorflow/core/kernels/data/generator_dataset_op.cc:103] Error occurred when "
        "finalizing GeneratorDataset iterator: Cancelled: Operation was cancelled",
        "2024-06-24 15:23:20.794655: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to "
        "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
        "2024-06-24 15:23:21.000000: F tensorflow/core/platform/statusor.cc:33] Attempting to fetch value instead of "
        "handling error INTERNAL: failed initializing StreamExecutor for CUDA device ordinal 0",
        # a stamp that is not the logger's (no level letter then `file:line] `) states no level
        "2024-11-21 15:10:51,071 - train - I round-off errors grew",
        "Error occurred when finalizing GeneratorDataset iterator: Cancelled: Operation was cancelled",
    ]
    out = error_line_events(_unparsed([(0, i + 1, t) for i, t in enumerate(texts)]), {0: "train.log"}, {}, {},
                            _events([]), tz=UTC_TZ)
    assert out["severity"].to_list() == ["info", "info", "warning", "error", "error", "error", "error"]
