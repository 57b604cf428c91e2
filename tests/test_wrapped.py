"""A log behind each wrapper family reads as the same log unwrapped: fixtures/wrapped/plain.log
(a Megatron step line, a kernel Xid, a NCCL WARN with its host:pid:tid prefix, PyTorch watchdog
lines and a traceback) and the same lines behind docker, CRI, pdsh, uniq -c, mpirun, OpenMPI,
Horovod, srun -l, torchrun, Ray, Lightning, kubectl --prefix, a workflow engine, a web-UI export
and a nest of three. Through ingest, each gives the same events (line, kind, code, severity,
message), the same line accounting and the same routing, and the hints the wrapper carries:
host and rank where the content says none (content first, then the wrapper, then the path)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from forensics.config import JobConfig
from forensics.discovery import Limits, SourceFile, path_hints
from forensics.ingest import FileResult, parse_one, peeled_head
from parsers import registry

DIR = Path(__file__).resolve().parents[1] / "fixtures" / "wrapped"
T0 = datetime(2024, 5, 1, 10, 12, 3, tzinfo=UTC)  # the wrappers' first stamp (see fixtures/wrapped/README.md)

# file -> (host the wrapper names, rank it names, does it carry a stamp)
FAMILIES = {
    "docker_timestamps.log": (None, None, True),
    "cri_container.log": (None, None, True),
    "pdsh_dmesg_nccl.log": ("node-017", None, False),
    "uniq_c_pdsh.log": ("node-017", None, False),
    "mpirun_tag_output.log": (None, 3, False),
    "mpirun_iso_timestamp_tag.log": (None, 3, True),
    "openmpi_ctime_tag.log": (None, 3, True),
    "horovod_rank_stream.log": (None, 3, False),
    "srun_label.log": (None, None, False),
    "torchrun_tee.log": (None, None, False),
    "torchrun_role.log": (None, None, False),
    "ray_train_worker.log": ("10.0.0.7", None, False),
    "lightning_rank.log": (None, 3, False),
    "kubectl_prefix.log": ("trainer-worker-3", None, False),
    "workflow_engine.log": (None, None, True),
    "webui_export.log": (None, None, True),
    "nested_docker_pdsh_srun.log": ("node-017", None, True),
}
RANKED_SOURCES = ("nccl", "pytorch", "steps")  # sources whose events carry a rank (kernel lines do not)


def _read(name: str) -> FileResult:
    path = DIR / name
    rel = f"wrapped/{name}"
    h, r, a = path_hints(rel)
    sf = SourceFile(rel, path, None, path.stat().st_size, h, r, a)
    return parse_one(sf, JobConfig(), 2024, {}, registry(), Limits())


@pytest.fixture(scope="module")
def plain() -> FileResult:
    return _read("plain.log")


def test_the_plain_file_has_every_source(plain: FileResult) -> None:
    kinds = set(plain.events["kind"].to_list())
    assert {"step", "xid", "gpu_fell_off_bus", "nccl_ib_error", "watchdog_timeout", "dist_error"} <= kinds, kinds
    assert set(plain.events["source"].to_list()) >= {"kernel", "nccl", "pytorch", "steps"}
    nccl = plain.events.filter(pl.col("source") == "nccl")
    assert set(nccl["host"].to_list()) == {"node-017"}  # the content's host


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_wrapped_file_reads_as_the_plain_file(name: str, plain: FileResult) -> None:
    host, rank, stamped = FAMILIES[name]
    got = _read(name)
    assert (got.lines, got.parsed, got.ignored, got.unparsed) == (plain.lines, plain.parsed, plain.ignored,
                                                                  plain.unparsed), name
    assert got.parser == plain.parser and got.parsers == plain.parsers
    key = ["line_no", "source", "kind", "code", "severity", "message", "gpu", "pci_bus_id"]
    assert got.events.select(key).sort(key).equals(plain.events.select(key).sort(key)), name
    both = plain.events.join(got.events, on=["line_no", "source", "kind"], suffix="_w")
    assert both.height == plain.events.height
    for r in both.iter_rows(named=True):
        where = f"{name}:{r['line_no']} {r['kind']}"
        # host: the content's (NCCL host:pid:tid) first, then the wrapper's
        assert r["host_w"] == (r["host"] or host), where
        # rank: the content's ([rankN]:) first, then the wrapper's, for the sources that give one
        want_rank = r["rank"] if r["rank"] is not None or r["source"] not in RANKED_SOURCES else rank
        assert r["rank_w"] == want_rank, where
        # a stamp the content prints wins; an event without one takes the wrapper's (NCCL lines)
        if r["ts_quality"] == "exact":
            assert r["ts_w"] == r["ts"], where
        if stamped and r["source"] == "nccl":
            assert r["ts_quality_w"] == "exact" and r["ts_w"] is not None and r["ts_w"] >= T0, where


def test_wrapper_stamps_make_the_file_span() -> None:
    """The file's span (first/last stamp) also reads the wrappers' stamps: epoch ms and ctime included."""
    for name in ("webui_export.log", "openmpi_ctime_tag.log", "docker_timestamps.log"):
        got = _read(name)
        assert got.first_ts is not None and got.last_ts is not None
        assert got.last_ts >= T0, name  # the wrappers' stamps come after every stamp the content prints


def test_wrapper_only_lines_are_blank() -> None:
    """`[1,2]<stdout>:` with nothing after it is a blank line (ignored), as the line it wraps."""
    got = _read("mpirun_tag_output.log")
    plain_blank = _read("plain.log")
    assert got.ignored == plain_blank.ignored >= 1


def test_sniffs_see_peeled_heads() -> None:
    kernel = {p.name: p for p in registry()}["kernel"].module
    text = (DIR / "pdsh_dmesg_nccl.log").read_text()
    peeled = peeled_head(text)
    assert peeled == peeled_head((DIR / "plain.log").read_text())
    assert "node-017: " not in peeled and "[rank3]:" not in peeled
    assert kernel.sniff(text) == 0.0 < kernel.sniff(peeled)  # no line starts with a kernel stamp, before


def test_syslog_and_journald_headers_are_the_kernel_parsers(tmp_path: Path) -> None:
    """journald / syslog headers are not peeled (the kernel parser reads their host and stamp),
    also behind a pdsh host; the header's host (content) wins over the wrapper's."""
    text = ("node-017: May  1 10:00:00 gpu-a-17 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, "
            "GPU has fallen off the bus.\n"
            "2024-05-01T10:00:01.123456+00:00 gpu-a-18 kernel: NVRM: Xid (PCI:0000:5e:00): 48, pid=2, name=python, "
            "An uncorrectable double bit error\n")
    path = tmp_path / "syslog.log"
    path.write_text(text)
    sf = SourceFile("syslog.log", path, None, path.stat().st_size, None, None, None)
    ev = parse_one(sf, JobConfig(), 2024, {}, registry(), Limits()).events.filter(pl.col("kind") == "xid")
    assert ev.select("line_no", "code", "host", "ts_quality").rows() == [
        (1, "79", "gpu-a-17", "exact"), (2, "48", "gpu-a-18", "exact")]
    assert ev["ts"].to_list() == [datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC),
                                  datetime(2024, 5, 1, 10, 0, 1, 123456, tzinfo=UTC)]
