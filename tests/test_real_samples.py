"""Every file of ../shared/real-samples/, routed the way discovery routes it (forensics.ingest.
parse_one on a SourceFile that points at the sample, which is only read): it goes to the right
parser, and each line that carries an Xid, an NCCL WARN, a watchdog timeout, a traceback's final
exception line, an OOM, an ECC error or a training step is an event at its own 1-based line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forensics.config import JobConfig
from forensics.discovery import Limits, SourceFile, path_hints
from forensics.ingest import FileResult, parse_one
from parsers import registry

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "real-samples"
if not REAL.is_dir():
    pytest.skip("../shared/real-samples is missing", allow_module_level=True)

# file -> (dominant parser, exact (line, kind) events)
EXPECTED: dict[str, tuple[str, list[tuple[int, str]]]] = {
    "001-nccl-ib-status12-vendor129-kp-ddp/nccl.log":
        ("nccl", [(1, "nccl_ib_error"), (6, "nccl_ib_error"), (11, "nccl_ib_error")]),
    "007-pg-watchdog-allreduce-pg1-llamafactory/nccl.log":
        ("pytorch", [(1, "watchdog_timeout"), (2, "watchdog_timeout"), (3, "watchdog_status"),
                     (4, "watchdog_status")]),
    "008-pg-watchdog-reducescatter-llamafactory/nccl.log":
        ("pytorch", [(1, "watchdog_timeout"), (2, "watchdog_status"), (3, "watchdog_timeout"),
                     (4, "watchdog_status"), (5, "watchdog_timeout")]),
    "009-pg-watchdog-allreduce-pgid-guid-basicsr/nccl.log":
        ("pytorch", [(1, "watchdog_timeout"), (2, "watchdog_status"), (3, "watchdog_timeout"),
                     (4, "watchdog_status"), (5, "watchdog_timeout")]),
    "010-pg-watchdog-oldformat-v100-after-hours/nccl.log":
        ("pytorch", [(n, "watchdog_timeout") for n in range(1, 6)]),
    "012-pg-watchdog-optype-mismatch-broadcast-vs-allreduce/nccl.log":
        ("pytorch", [(1, "watchdog_timeout"), (2, "watchdog_status"), (3, "watchdog_timeout")]),
    "015-nccl-ras-healthy-watchdog-256ranks/nccl.log":
        ("nccl", [(1, "nccl_version"), (16, "nccl_ras"), (24, "watchdog_timeout"), (25, "watchdog_status")]),
    "016-pg-watchdog-dump-signal-syncbn-deadlock/nccl.log":
        ("pytorch", [(1, "watchdog_status"), (4, "watchdog_status")]),
    "019-traceback-ecc-thc-old-format-8gpu/traceback.txt":
        ("pytorch", [(1, "ecc_error"), (1, "exception")]),  # a lone exception line too
    "021-dmesg-xid43-xid31-two-gpus-faulty-device/dmesg.log":
        ("kernel", [(2, "xid"), (3, "xid"), (4, "xid"), (5, "xid"), (6, "gpu_identity"), (8, "xid"), (9, "xid"),
                    (10, "xid")]),
    "024-dmesg-xid45-caused-by-xid149-145-nvlink/dmesg.log":
        ("kernel", [(n, "xid") for n in range(1, 8)]),
    "029-dcgm-exporter-xid45-metric-xid62-missing/dcgm.prom":
        ("dcgm", [(1, "dcgm_xid")]),
    "031-nccl-ib-local-catastrophic-error-after-830k-iters/nccl.log":
        ("nccl", [(n, "nccl_ib_error") for n in (1, 3, 5, 7, 9, 11)]),
    "033-elastic-sigabrt-table-after-watchdog-picotron/traceback.txt":
        ("elastic", [(1, "elastic_failure"), (8, "elastic_failure"), (17, "elastic_failure")]),
    "040-dmesg-xid109-ctx-switch-timeout-rtx4090-unspecified-launch/dmesg.log":
        ("kernel", [(1, "xid")]),
    "042-elastic-sigkill-table-rank0-grpo/traceback.txt":
        ("elastic", [(10, "exception"), (22, "elastic_failure")]),
    "044-nccl-ofi-undeliverable-remote-error/traceback.txt":
        ("pytorch", [(5, "dist_error"), (5, "exception"), (8, "dist_error"), (8, "nccl_ib_error")]),
    "047-dmesg-xid145-xid137-b200-allgather-deadlock/dmesg.log":
        ("kernel", [(2, "xid"), (3, "xid")]),
    "053-nvidia-smi-gpu-lost-pcie-aer-dll-timeout-cn234/dmesg.log":
        ("kernel", [(n, "pcie_aer") for n in (1, 2, 4, 5, 6, 8, 9, 10, 12)]),
    "053-nvidia-smi-gpu-lost-pcie-aer-dll-timeout-cn234/nvidia-smi.txt":
        ("nvsmi", [(1, "gpu_lost")]),
    "057-dmesg-aer-surprise-down-then-xid79-gpuburn/dmesg.log":
        ("kernel", [(1, "pcie_aer"), (2, "pcie_aer"), (4, "pcie_aer"), (5, "pcie_aer"), (6, "pcie_aer"),
                    (8, "pcie_aer"), (11, "gpu_identity"), (13, "xid")]),
}

# lines a person would grep for; each must be an event on that very line
SIGNAL_RE = re.compile(
    r"NVRM: Xid|NCCL WARN|Watchdog caught collective operation timeout|failure detected by watchdog"
    r"|uncorrectable ECC|out of memory|OutOfMemoryError|^(?:\[rank\d+\]: )?[\w.]+(?:Error|Exception): "
    r"|iteration\s+\d+/\s*\d+|Unable to determine the device handle|AER: .*error received|Surprise Down"
    r"|DCGM_FI_DEV_XID_ERRORS|exitcode\s*:\s*-?\d+")


# signal-looking lines that continue the message of the event above them (not events themselves)
CONTINUATION = {
    # `ncclRemoteError: A call failed ...`: the second line of the DistBackendError message (line 5)
    "044-nccl-ofi-undeliverable-remote-error/traceback.txt": {6},
}


def _files() -> list[str]:
    out = []
    for d in sorted(REAL.iterdir()):
        if d.is_dir():
            out += [f"{d.name}/{f.name}" for f in sorted(d.iterdir()) if f.is_file() and f.name != "case.toml"]
    return out


def _route(rel: str) -> FileResult:
    path = REAL / rel
    h, r, a = path_hints(rel)
    sf = SourceFile(rel, path, None, path.stat().st_size, h, r, a)
    return parse_one(sf, JobConfig(), None, {}, registry(), Limits())


def test_every_sample_file_is_in_the_table() -> None:
    # the exact tables are of the first collection (0NN); every file of both collections is held to
    # the independent key-line patterns of tests/test_real_sample_key_lines.py
    assert sorted(f for f in _files() if f[:1] == "0") == sorted(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_real_sample(rel: str) -> None:
    if not (REAL / rel).is_file():
        pytest.skip(f"{rel} missing")
    parser, expected = EXPECTED[rel]
    res = _route(rel)
    assert res.parser == parser, (rel, res.parsers)
    got = [(int(n), k) for n, k in res.events.select("line_no", "kind").iter_rows()]
    assert sorted(got) == sorted(expected)
    raw = (REAL / rel).read_text(encoding="utf-8", errors="replace").splitlines()
    # each event sits on its own line: its message is that line's text (launcher prefix removed)
    for n, msg in res.events.select("line_no", "message").iter_rows():
        assert msg and msg.strip() in raw[n - 1], (n, msg)
    signal_lines = {i for i, line in enumerate(raw, 1) if SIGNAL_RE.search(line)} - CONTINUATION.get(rel, set())
    assert signal_lines <= {n for n, _ in got}, sorted(signal_lines - {n for n, _ in got})
    # accounting: every line is parsed, ignored or unparsed, once
    assert res.lines == len(raw) == res.parsed + res.ignored + res.unparsed
    assert res.unparsed_errors.is_empty(), res.unparsed_errors


def test_real_053_gpu_lost_names_the_gpu() -> None:
    res = _route("053-nvidia-smi-gpu-lost-pcie-aer-dll-timeout-cn234/nvidia-smi.txt")
    row = res.events.row(0, named=True)
    assert (row["pci_bus_id"], row["code"], row["severity"]) == ("0000:03:00", "Unknown Error", "critical")
    aer = _route("053-nvidia-smi-gpu-lost-pcie-aer-dll-timeout-cn234/dmesg.log").events
    assert set(aer["pci_bus_id"].to_list()) == {"0000:00:03"}
    assert aer.filter(aer["line_no"] == 4)["code"].to_list() == ["Timeout"]
    # dmesg -H deltas without an absolute anchor: relative, no invented time
    assert aer["ts"].is_null().all() and set(aer["ts_quality"].to_list()) == {"relative"}


def test_real_015_ras_table_not_taken_by_elastic() -> None:
    res = _route("015-nccl-ras-healthy-watchdog-256ranks/nccl.log")
    assert res.parsers == "nccl,pytorch"
