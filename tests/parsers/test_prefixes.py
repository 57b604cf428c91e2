"""The prefix layer's table: every example (wrapped line -> body and hints) and counter-example
runs here, one at a time and all together (one frame, as ingest peels a file)."""

from __future__ import annotations

import re

import polars as pl
import pytest

from parsers.lines import decode_lines, with_body
from parsers.prefixes import MAX_PEELS, PATTERN, WRAPPERS, peel

CASES = [(w.name, line, body, hints) for w in WRAPPERS for line, body, hints in w.examples]
KEYS = {"prefix_host": "host", "prefix_rank": "rank", "prefix_local_rank": "local_rank",
        "prefix_task": "task", "prefix_ts": "stamp"}


def _hints(row: dict) -> dict:
    return {KEYS[k]: v for k, v in row.items() if k in KEYS and v is not None}


@pytest.mark.parametrize(("name", "line", "body", "hints"), CASES, ids=[f"{c[0][:30]}:{c[1][:30]}" for c in CASES])
def test_example(name: str, line: str, body: str, hints: dict) -> None:
    row = peel(pl.Series([line], dtype=pl.Utf8)).row(0, named=True)
    assert row["body"] == body, name
    assert _hints(row) == hints, name


def test_examples_together_equal_alone() -> None:
    out = peel(pl.Series([c[1] for c in CASES], dtype=pl.Utf8))
    for row, (name, _line, body, hints) in zip(out.iter_rows(named=True), CASES, strict=True):
        assert (row["body"], _hints(row)) == (body, hints), name


def test_every_wrapper_has_a_peeling_example() -> None:
    for w in WRAPPERS:
        assert any(line != body for line, body, _ in w.examples), w.name


def test_patterns_valid_in_python_re() -> None:
    re.compile(PATTERN)
    for w in WRAPPERS:
        re.compile(w.regex + w.guard)
        if w.veto:
            re.compile(w.veto)


def test_nesting_in_any_order() -> None:
    """docker stamp, pdsh host, srun task, torchrun local rank, PyTorch rank: nested in several orders."""
    core = "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 9] Watchdog caught collective operation timeout"
    lines = [
        f"2024-05-01T10:00:00.5Z node-017: [rank9]:{core}",
        f"node-017: 2024-05-01T10:00:00.5Z 3: [default1]:[rank9]:{core}",
        f"3: node-017: [default1]:[rank9]:{core}",
    ]
    out = peel(pl.Series(lines))
    assert out["body"].to_list() == [core] * 3
    assert out["prefix_host"].to_list() == ["node-017"] * 3
    assert out["prefix_rank"].to_list() == [9] * 3
    assert out["prefix_ts"].to_list() == ["2024-05-01T10:00:00.5Z", "2024-05-01T10:00:00.5Z", None]
    assert out["prefix_task"].to_list() == [None, 3, 3]
    assert out["prefix_local_rank"].to_list() == [None, 1, 1]


def test_peels_are_bounded() -> None:
    deep = "[rank1]:" * (MAX_PEELS + 2) + "x"
    body = peel(pl.Series([deep]))["body"][0]
    assert body == "[rank1]:" * 2 + "x"


def test_inner_wrapper_wins() -> None:
    """mpirun's rank and PyTorch's own `[rankN]:` disagree: the inner one (PyTorch's) is taken."""
    out = peel(pl.Series(["[1,4]<stdout>:[rank12]:hello"]))
    assert out.row(0, named=True)["prefix_rank"] == 12


def test_with_body_columns_and_plain_lines() -> None:
    text = "plain line\n  File \"x.py\", line 3, in f\n[1,2]<stderr>:boom\n"
    lines = with_body(decode_lines(text.encode()).lines)
    assert lines.columns == ["line_no", "text", "body", "prefix_host", "prefix_rank", "prefix_local_rank",
                             "prefix_task", "prefix_ts"]
    assert lines["body"].to_list() == ["plain line", "  File \"x.py\", line 3, in f", "boom"]
    assert lines["prefix_rank"].to_list() == [None, None, 2]


def test_empty_and_unicode() -> None:
    assert peel(pl.Series([], dtype=pl.Utf8)).height == 0
    out = peel(pl.Series(["node-017: é [rank1]:ü", "ü: x"]))
    assert out["body"].to_list() == ["é [rank1]:ü", "ü: x"]


@pytest.mark.parametrize(("name", "line", "body", "hints"), CASES, ids=[f"{c[0][:30]}:{c[1][:30]}" for c in CASES])
def test_prefix_cut_without_the_guard_is_the_same(name: str, line: str, body: str, hints: dict) -> None:
    """`peel` cuts a prefix by the wrapper's pattern without its guard (no capture pass): on every
    example the first wrapper that matches (Python `re`, the whole table as one pattern) cuts the
    same text either way."""
    m = re.match(PATTERN, line)
    if m is None:
        return
    i = next(int(k[1:]) for k, v in m.groupdict().items() if v is not None and k[1:].isdigit())
    w = WRAPPERS[i]
    assert re.match("^(?:" + w.regex + ")", line).group(0) == m.group(f"w{i}"), name


def test_bounded_on_adversarial_lines() -> None:
    """Long hostile lines (1 MiB each) of the characters the wrappers start with: peeled quickly."""
    import time

    n = 1 << 20
    lines = ["[" * n, "(" * n, "1" * n, " " * n + "1: x", "a-" * (n // 2) + ": [x", "node-1: " * (n // 8),
             "[rank1]:" * (n // 8), "2024-05-01T10:00:00Z " * (n // 21), "[1,2]<stdout>:" * (n // 14),
             "a1." * (n // 3) + ": x", "      1 " * (n // 8)]
    t0 = time.monotonic()
    out = peel(pl.Series(lines))
    assert time.monotonic() - t0 < 30.0
    assert out["body"][5] == "node-1: " * (n // 8 - MAX_PEELS)
    assert out["prefix_host"][5] == "node-1"


def test_update_and_cut_equal_scatter_and_a_slice_by_column() -> None:
    # peel's copy-free helpers give what a scatter and a per-row slice give, on every path they take
    import random

    from parsers.prefixes import CUT_WIDTHS, _cut, _update

    rnd = random.Random(7)
    col = pl.Series("body", [f"line {k} " + "x" * rnd.randint(0, 30) for k in range(400)])
    for idx in ([*range(400)], rnd.sample(range(400), 50), sorted(rnd.sample(range(400), 350)),
                rnd.sample(range(400), 390), []):
        ix = pl.Series(idx, dtype=pl.Int64)
        vals = pl.Series([f"new {k}" if k % 7 else None for k in idx], dtype=pl.Utf8)
        other = pl.Series("h", [None] * 400, dtype=pl.Utf8)
        got = _update({"b": col, "h": other}, ix, {"b": vals, "h": vals.str.to_uppercase()})
        assert got["b"].equals(col.clone().scatter(ix, vals), null_equal=True)
        assert got["h"].equals(other.clone().scatter(ix, vals.str.to_uppercase()), null_equal=True)
    for n_widths in (1, 3, CUT_WIDTHS + 5):
        width = pl.Series([rnd.randrange(n_widths) for _ in range(400)], dtype=pl.UInt32)
        want = pl.DataFrame({"r": col, "n": width}).select(pl.col("r").str.slice(pl.col("n")))["r"]
        assert _cut(col, width).equals(want)


def test_a_weak_host_seen_as_a_prefix_is_the_prefix_of_its_other_lines() -> None:
    """pdsh prefixes every line of a host's output: once a host without a digit is seen in front of a
    log line, its continuation lines (C++ frames, indented traceback lines) lose it too; a `host: ` the
    file never shows in front of a log line stays, and so do exception names and tables."""
    lines = [
        "mpi-rc1ou1aw-launcher: [rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 0] Process group watchdog",
        "mpi-rc1ou1aw-launcher: Exception raised from checkTimeout at ProcessGroupNCCL.cpp:565 (most recent call first):",
        "mpi-rc1ou1aw-launcher: frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57",
        "mpi-rc1ou1aw-launcher: ",
        "head-node: rsync finished",
        "non-fatal: retrying the operation",
        "RuntimeError: NCCL error",
    ]
    out = peel(pl.Series(lines))
    assert out["body"].to_list() == [
        "[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 0] Process group watchdog",
        "Exception raised from checkTimeout at ProcessGroupNCCL.cpp:565 (most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57",
        "",
        "head-node: rsync finished",
        "non-fatal: retrying the operation",
        "RuntimeError: NCCL error",
    ]
    assert out["prefix_host"].to_list() == ["mpi-rc1ou1aw-launcher"] * 4 + [None] * 3
    assert out["prefix_rank"].to_list() == [0, None, None, None, None, None, None]


def test_ray_dedup_suffix_is_cut() -> None:
    """Ray's log deduplication appends ` [repeated Nx across cluster]` (dim when coloured, the first time
    with its note): not part of the line the worker printed. Text that merely mentions it stays."""
    lines = [
        "(WorkerDict pid=3944197) [rank2]:[E816 01:09:38.174648046 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) "
        "Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 600034 milliseconds "
        "before timing out. [repeated 2x across cluster]",
        "(RayWorkerWrapper pid=92234, ip=172.19.24.110) mlx5: host_unknown: got completion with error: "
        "[repeated 2x across cluster]",
        "(pid=12) step 3 loss 0.5\x1b[2m [repeated 7x across cluster] (Ray deduplicates logs by default. Set "
        "RAY_DEDUP_LOGS=0 to disable log deduplication, or see https://docs.ray.io/en/master/ray-observability/"
        "user-guides/configure-logging.html#log-deduplication for more options.)\x1b[0m",
        "a log line [repeated 3x across cluster] with more after it",
    ]
    out = peel(pl.Series(lines))
    assert out["body"].to_list() == [
        "[E816 01:09:38.174648046 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 2] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1) ran for 600034 milliseconds before timing out.",
        "mlx5: host_unknown: got completion with error:",
        "step 3 loss 0.5",
        "a log line [repeated 3x across cluster] with more after it",
    ]
    assert out["prefix_host"].to_list() == [None, "172.19.24.110", None, None]
    assert out["prefix_rank"].to_list() == [2, None, None, None]


def test_console_copy_with_the_stamp_alone_on_its_line() -> None:
    """The CloudWatch console's Timestamp | Message rows copied as text (SageMaker job logs): the stamp
    line is the wrapper (body empty) and the next line's stamp; a message with its own wrapper stamp
    keeps it; a stamp inside a line is content."""
    lines = ["2024-12-04T05:26:25.055Z", "open files (-n) 65536", "2024-12-04T05:26:27.056Z",
             "W1204 05:26:26.878000 17959 site-packages/torch/distributed/run.py:793]",
             "  2024-01-12T19:26:34.787+08:00  ", "2024-01-12T19:26:35.000Z torch.cuda.OutOfMemoryError: CUDA out of memory.",
             "started at 2024-12-04T05:26:25.055Z"]
    out = peel(pl.Series(lines))
    assert out["body"].to_list() == ["", "open files (-n) 65536", "",
                                     "W1204 05:26:26.878000 17959 site-packages/torch/distributed/run.py:793]",
                                     "", "torch.cuda.OutOfMemoryError: CUDA out of memory.",
                                     "started at 2024-12-04T05:26:25.055Z"]
    assert out["prefix_ts"].to_list() == ["2024-12-04T05:26:25.055Z", "2024-12-04T05:26:25.055Z",
                                          "2024-12-04T05:26:27.056Z", "2024-12-04T05:26:27.056Z",
                                          "2024-01-12T19:26:34.787+08:00", "2024-01-12T19:26:35.000Z", None]


def test_a_task_label_is_not_read_inside_a_process_tag() -> None:
    """srun's `N: ` is put on outside the task's output: after an MPI / gloo / Ray / torchrun tag, `0: [..]`
    is the process's text (Horovod's stall inspector rows), while srun outside the tags still peels."""
    lines = ["Fri Sep 18 03:11:09 2020[0]<stderr>:0: [broadcast_object_fn.sz]",
             "[1,3]<stderr>:7: [allreduce.grad_0, allreduce.grad_1]",
             "[default0]:2: x",
             "3: [1,3]<stderr>:RuntimeError: boom"]
    out = peel(pl.Series(lines))
    assert out["body"].to_list() == ["0: [broadcast_object_fn.sz]", "7: [allreduce.grad_0, allreduce.grad_1]", "2: x",
                                     "RuntimeError: boom"]
    assert out["prefix_task"].to_list() == [None, None, None, 3]
    assert out["prefix_rank"].to_list() == [0, 3, None, 3]


@pytest.mark.parametrize(("fmt", "datefmt"), [("%(message)s", None), ("%(asctime)s %(message)s", "[%X]"),
                                              ("%(message)s", "[%Y-%m-%d %H:%M:%S]")])
def test_rich_handler_output_is_peeled_to_its_messages(fmt: str, datefmt: str | None) -> None:
    """What rich's RichHandler itself prints (the emitter, run here on a plain 110-column console): each
    record's first row peels to its message, the level word kept at ERROR / CRITICAL, the path column cut;
    a row the message wrapped onto stays as printed."""
    import io
    import logging

    from rich.console import Console
    from rich.logging import RichHandler

    buf = io.StringIO()
    handler = RichHandler(console=Console(file=buf, width=110, color_system=None, force_terminal=False))
    handler.setFormatter(logging.Formatter(fmt, datefmt=datefmt))
    log = logging.getLogger(f"forensics-test-rich-{fmt}-{datefmt}")
    log.propagate, log.handlers = False, [handler]
    log.setLevel(logging.DEBUG)
    msgs = [(logging.DEBUG, "debug message"), (logging.INFO, "Epoch 1 step 20 loss 2.5"),
            (logging.WARNING, "a warning"), (logging.ERROR, "RuntimeError: CUDA error: an illegal memory access"),
            (logging.CRITICAL, "critical thing"), (logging.INFO, "word " * 30)]
    for level, msg in msgs:
        log.log(level, msg)
    lines = buf.getvalue().rstrip("\n").split("\n")
    out = peel(pl.Series(lines))["body"].to_list()
    # `%(asctime)s` prints the time again inside the message: the wrapper cuts it below error level
    again = r"\[[\d:\- ]+\] " if "asctime" in fmt else ""
    assert out[:3] == ["debug message", "Epoch 1 step 20 loss 2.5", "a warning"]
    assert re.fullmatch("ERROR    " + again + re.escape(msgs[3][1]), out[3]), out[3]
    assert re.fullmatch("CRITICAL " + again + "critical thing", out[4]), out[4]
    assert re.fullmatch(r"(?:word ){5,}word", out[5]), out[5]  # the long message's first row, path cut
    assert len(lines) > 6 and out[6:] == lines[6:]  # the wrapped rows of the long message


def test_byte_order_mark_before_a_line_is_not_its_text() -> None:
    # a file saved by Notepad / PowerShell `Out-File -Encoding utf8` starts with U+FEFF; files concatenated
    # with `cat` carry one in the middle: the line reads as without it (its stamp, its wrapper)
    lines = ["\ufeff2024-05-01T10:00:00.123+00:00 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234>",
             "\ufeffnode-7: [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered",
             "plain line", "\ufeff"]
    out = peel(pl.Series("text", lines))
    alone = peel(pl.Series("text", [ln.removeprefix("\ufeff") for ln in lines]))
    assert out.equals(alone)
    assert out["body"].to_list() == ["NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234>",
                                     "RuntimeError: CUDA error: an illegal memory access was encountered",
                                     "plain line", ""]
    assert out["prefix_ts"][0] == "2024-05-01T10:00:00.123+00:00"
    assert (out["prefix_host"][1], out["prefix_rank"][1]) == ("node-7", 3)


# (record as a collector stores it, body, host hint, stamp hint, rank hint)
JSON_RECORDS = [
    # docker's json-file driver (kubelet's node logs before CRI, fluentd's tail input)
    ('{"log":"[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\\n","stream":"stderr",'
     '"time":"2024-05-01T10:00:00.123456789Z"}',
     "RuntimeError: CUDA error: an illegal memory access was encountered", None, "2024-05-01T10:00:00.123456789Z", 3),
    # fluentd's kubernetes metadata: the node
    ('{"log":"node-7:12:34 [3] NCCL INFO comm 0x1 rank 3 nranks 8 - Init COMPLETE\\n","stream":"stdout",'
     '"kubernetes":{"host":"gke-pool-1-node-7","pod_name":"trainer-worker-3"}}',
     "node-7:12:34 [3] NCCL INFO comm 0x1 rank 3 nranks 8 - Init COMPLETE", "gke-pool-1-node-7", None, None),
    # GCP Cloud Logging export: textPayload, the pod, a multi-line message as one line
    ('{"insertId":"abc","textPayload":"Traceback (most recent call last):\\n  File \\"train.py\\", line 3",'
     '"resource":{"type":"k8s_container","labels":{"pod_name":"trainer-worker-3"}},"timestamp":"2024-05-01T10:00:02.123Z"}',
     'Traceback (most recent call last):   File "train.py", line 3', "trainer-worker-3", "2024-05-01T10:00:02.123Z", None),
    # Elastic / Filebeat (ECS): @timestamp, host.name
    ('{"@timestamp":"2024-05-01T10:00:03.000Z","host":{"name":"node-9"},"message":"torch.cuda.OutOfMemoryError: CUDA '
     'out of memory."}', "torch.cuda.OutOfMemoryError: CUDA out of memory.", "node-9", "2024-05-01T10:00:03.000Z", None),
    # zap's production encoder: ts in epoch seconds; CloudWatch export: timestamp in ms
    ('{"level":"error","ts":1714557600.123,"msg":"NCCL WARN Cuda failure \'out of memory\'","hostname":"gpu-3"}',
     "NCCL WARN Cuda failure 'out of memory'", "gpu-3", "2024-05-01T10:00:00.123000+00:00", None),
    ('{"timestamp":1714557600123,"message":"Watchdog caught collective operation timeout"}',
     "Watchdog caught collective operation timeout", None, "2024-05-01T10:00:00.123000+00:00", None),
]
# records that stay whole: their own parsers read the object (journald: the kernel parser; torchelastic's
# status events and error file: elastic; step metrics: steps), or no message key holds a string
JSON_WHOLE = [
    '{"__REALTIME_TIMESTAMP":"1714557600123456","MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 79","_HOSTNAME":"n1"}',
    '{"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "timestamp": 0, "metadata": {"state": "FAILED"}}',
    '{"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "...", "timestamp": "1714557600"}}}',
    '{"step": 10, "loss": 2.3, "time": "2024-05-01T10:00:00Z"}',
    '{"log": 5, "time": "2024-05-01T10:00:00Z"}',
    '{"log": ["a", "b"]}',
]


def test_json_log_records_read_as_their_message() -> None:
    out = peel(pl.Series("text", [r for r, *_ in JSON_RECORDS] + JSON_WHOLE))
    got = list(zip(out["body"], out["prefix_host"], out["prefix_ts"], out["prefix_rank"], strict=True))
    assert got[:len(JSON_RECORDS)] == [tuple(c[1:]) for c in JSON_RECORDS]
    assert got[len(JSON_RECORDS):] == [(r, None, None, None) for r in JSON_WHOLE]
