"""Tests for parsers.kernel: one test per wrapper/body variant of reference/xid_formats.md."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import dcgm, kernel, sacct, slurm
from parsers.lines import decode_lines, with_body
from parsers.records import EVENT_SCHEMA, TABLE_SCHEMAS, Extraction, ParseContext

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures" / "kernel"
REAL = ROOT.parent / "shared" / "real-samples"


def frame(text: str) -> pl.DataFrame:
    return with_body(decode_lines(text.encode()).lines)


def run(text: str, **ctx: object) -> Extraction:
    return kernel.parse(frame(text), ParseContext(path="dmesg.log", **ctx))  # type: ignore[arg-type]


def fixture(name: str, **ctx: object) -> Extraction:
    return run((FIX / name).read_text(), **ctx)


def real(case: str, name: str = "dmesg.log") -> str:
    if not REAL.exists():
        pytest.skip("../shared/real-samples is missing")
    hits = sorted(REAL.glob(f"{case}*/{name}"))
    if not hits:
        pytest.skip(f"real sample {case} missing")
    return hits[0].read_text()


def ev(ex: Extraction, kind: str | None = None) -> list[dict]:
    df = ex.events if kind is None else ex.events.filter(pl.col("kind") == kind)
    return df.to_dicts()


def check_contract(ex: Extraction, n_lines: int) -> None:
    assert dict(ex.events.schema) == EVENT_SCHEMA
    for name, t in ex.tables.items():
        assert dict(t.schema) == TABLE_SCHEMAS[name]
    claimed, ignored = set(ex.claimed.to_list()), set(ex.ignored.to_list())
    assert not claimed & ignored
    assert all(1 <= n <= n_lines for n in claimed | ignored)
    assert set(ex.events["line_no"].to_list()) <= claimed


# ---- wrappers ------------------------------------------------------------------------------

def test_dmesg_uptime_stamps_relative_without_boot_time() -> None:
    ex = fixture("dmesg_uptime.log", host_hint="node-1")
    x = ev(ex, "xid")
    assert [(e["line_no"], e["code"], e["pci_bus_id"]) for e in x] == [(5, "119", "0000:9b:00"), (12, "79", "0000:06:00")]
    assert x[0]["ts"] is None and x[0]["ts_quality"] == "relative" and x[0]["ts_raw"] == "155040.100020"
    assert x[0]["host"] == "node-1" and x[0]["pid"] == 2024380
    assert x[1]["severity"] == "critical"
    # RPC history table and serial number are claimed with their records; chatter ignored
    assert {4, 6, 7, 8, 9, 10} <= set(ex.claimed.to_list())
    assert set(ex.ignored.to_list()) == {2, 11}
    check_contract(ex, 12)


def test_ucx_epoch_stamp_is_not_a_dmesg_uptime() -> None:
    # UCX's ucs_log layout (src/ucs/debug/log.c: `[<sec>.<usec>] [host:pid:thread] file:line UCX  LEVEL msg`)
    # opens with a Unix epoch in brackets: 10 integer digits, 31.7 years of uptime. The sniffer does not take
    # such a file for dmesg, and the parser neither reads nor ignores its lines (left to the error-line path),
    # while a real 9-digit uptime (a host up for years) is still a kernel line.
    ucx = ("[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: "
           "Cannot allocate memory\n"
           "[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: "
           "Cannot allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)\n")
    assert kernel.sniff(ucx) == 0.0
    ex = run(ucx)
    assert ex.events.is_empty() and ex.claimed.is_empty() and ex.ignored.is_empty()
    long_up = "[123456789.123456] NVRM: Xid (PCI:0000:06:00): 79, pid=1234, GPU has fallen off the bus.\n"
    assert kernel.sniff(long_up) > 0.0
    assert [e["code"] for e in ev(run(long_up), "xid")] == ["79"]


def test_dmesg_uptime_with_boot_time_is_exact() -> None:
    # boot time + uptime is what `dmesg -T` prints (and that is `exact`): the same time, the same
    # quality, so a kernel root cause in an uptime-stamped dmesg is not ranked below stamped lines
    boot = datetime(2025, 2, 21, 0, 0, 0, tzinfo=UTC)
    ex = fixture("dmesg_uptime.log", host_hint="node-1", boot_times={"node-1": boot})
    x = ev(ex, "xid")[1]
    assert x["ts_quality"] == "exact"
    assert x["ts"] == datetime(2025, 2, 22, 19, 4, 4, 78590, tzinfo=UTC)
    # another host's boot time does not apply: the stamps stay relative
    other = ev(fixture("dmesg_uptime.log", host_hint="node-1", boot_times={"node-2": boot}), "xid")[1]
    assert other["ts"] is None and other["ts_quality"] == "relative"


def test_dmesg_caller_id_prefix() -> None:
    ex = fixture("dmesg_caller_id.log")
    (x,) = ev(ex, "xid")
    assert (x["code"], x["pid"], x["pci_bus_id"], x["ts_raw"]) == ("31", 1942, "0000:2b:00", "130.456250")
    assert ex.tables["xid_events"]["proc_name"].to_list() == ["llama-bench"]
    assert ex.ignored.to_list() == [2]


def test_dmesg_raw_printk_level_prefix() -> None:
    # `dmesg -r` (and kmsg dumps) print the printk level before the uptime stamp: `<0>` emerg .. `<7>`
    # debug, facility*8+level for userspace records (`<14>`); the message after both is read as usual
    text = ("<0>[2315424.098863] Kernel panic - not syncing: hung_task: blocked tasks\n"
            "<4>[2315424.099382] Call Trace:\n"
            "<3>[  155.1] NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
            "<14>[  156.2] EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0\n"
            "<6>not a stamped line\n")
    ex = run(text, host_hint="node-9")
    got = [(e["line_no"], e["kind"], e["code"], e["ts_raw"], e["ts_quality"]) for e in ev(ex)]
    assert got[0] == (1, "kernel_panic", "panic", "2315424.098863", "relative")
    assert (3, "xid", "79", "155.1", "relative") in got
    assert [e["line_no"] for e in ev(ex, "mce")] == [4]
    assert ev(ex, "xid")[0]["pci_bus_id"] == "0000:9b:00"
    assert 5 not in set(ex.claimed.to_list())
    check_contract(ex, 5)
    assert kernel.sniff(text) >= 0.85


def test_util_linux_dmesg_decode_iso_and_delta_forms() -> None:
    # util-linux dmesg print_record: `-x` facility:level first, then the --time-format stamp: iso
    # (comma before the microseconds, no host or process after it), `-d` deltas inside the brackets,
    # delta alone (`[<   0.000100>]`, no time); the message after them is read as usual
    text = ("2025-05-27T04:18:56,089671+00:00 NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off the bus\n"
            "syslog:err   : 2025-05-27T04:18:57,000001+00:00 NVRM: Xid (PCI:0000:04:00): 79, GPU has fallen off the bus\n"
            "kern  :err   : [  155.100000] NVRM: Xid (PCI:0000:04:00): 48, pid=1, name=python, An uncorrectable double bit error\n"
            "kern  :warn  : [Tue May 27 04:18:56 2025] mce: [Hardware Error]: Machine check events logged\n"
            "[  157.000000 <    0.800000>] NVRM: Xid (PCI:0000:04:00): 63, pid=1, name=python, Row Remapper\n"
            "[<    0.000100>] NVRM: Xid (PCI:0000:04:00): 64, pid=1, name=python, Row Remapper failure\n"
            "[Tue May 27 04:19:56 2025 <   60.000000>] mlx5_core 0000:3b:00.0 mlx5_0: Port: 1 Link DOWN\n")
    ex = run(text)
    got = [(e["line_no"], e["kind"], e["code"], e["ts_raw"], e["ts_quality"]) for e in ev(ex)]
    assert got == [
        (1, "xid", "79", "2025-05-27T04:18:56,089671+00:00", "exact"),
        (2, "xid", "79", "2025-05-27T04:18:57,000001+00:00", "exact"),
        (3, "xid", "48", "155.100000", "relative"),
        (4, "mce", "LOGGED", "Tue May 27 04:18:56 2025", "exact"),
        (5, "xid", "63", "157.000000", "relative"),
        (6, "xid", "64", None, "missing"),
        (7, "ib_port", "LINK_DOWN", "Tue May 27 04:19:56 2025", "exact"),
    ]
    assert ev(ex)[0]["ts"] == datetime(2025, 5, 27, 4, 18, 56, 89671, tzinfo=UTC)
    check_contract(ex, 7)
    assert kernel.sniff(text) >= 0.85


def test_journalctl_short_monotonic_unix_and_full_forms() -> None:
    # journalctl -o short-monotonic / short-unix / short-full: the host comes from the line in all three
    # (it names the culprit); another identifier's record is not a kernel line
    text = ("[ 1843.308145] gpu-node-1 kernel: NVRM: Xid (PCI:0000:04:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
            "1684567890.123456 gpu-node-2 kernel: NVRM: Xid (PCI:0000:04:00): 48, pid=1, name=python, DBE\n"
            "Tue 2023-05-20 10:11:12 UTC gpu-node-3 kernel: NVRM: Xid (PCI:0000:04:00): 63, pid=1, name=python, Row Remapper\n"
            "1684567891.000000 gpu-node-2 systemd[1]: Starting nvidia-persistenced.service...\n"
            "[    6.100000] mlx5_core 0000:3b:00.0 mlx5_0: Port: 1 Link DOWN\n")
    ex = run(text, ref_year=2023)
    got = [(e["line_no"], e["code"], e["host"], e["ts"], e["ts_quality"]) for e in ev(ex)]
    assert got == [
        (1, "79", "gpu-node-1", None, "relative"),
        (2, "48", "gpu-node-2", datetime(2023, 5, 20, 7, 31, 30, 123456, tzinfo=UTC), "exact"),
        (3, "63", "gpu-node-3", datetime(2023, 5, 20, 10, 11, 12, tzinfo=UTC), "exact"),
        (5, "LINK_DOWN", None, None, "relative"),
    ]
    assert 4 not in set(ex.claimed.to_list()) | set(ex.ignored.to_list())
    check_contract(ex, 5)


def test_dmesg_T_human_stamps_in_job_tz() -> None:
    ex = fixture("dmesg_T.log", tz=ZoneInfo("Europe/Berlin"))
    x = ev(ex, "xid")
    assert x[0]["ts"] == datetime(2025, 2, 23, 15, 24, 18, tzinfo=UTC)
    assert x[0]["ts_quality"] == "exact"
    assert x[1]["code"] == "154" and x[1]["pid"] is None
    assert ex.ignored.to_list() == [3]


def test_dmesg_H_relative_stamps() -> None:
    ex = fixture("dmesg_H.log", ref_year=2025)
    x = ev(ex, "xid")
    assert [e["code"] for e in x] == ["48", "63", "94"]
    assert x[0]["ts"] == datetime(2025, 2, 23, 16, 24, tzinfo=UTC)
    assert x[2]["ts"] == datetime(2025, 2, 23, 16, 24, 1, 750000, tzinfo=UTC)
    assert x[2]["ts_quality"] == "derived"


def test_dmesg_H_relative_without_anchor() -> None:
    ex = run(real("053"))
    assert all(e["ts"] is None and e["ts_quality"] == "relative" for e in ev(ex))
    assert ev(ex)[0]["ts_raw"] == "+0.000316"


def test_journal_short_uses_ref_year_and_hostname() -> None:
    ex = fixture("journal_short.log", ref_year=2025, host_hint="path-host")
    (x,) = ev(ex, "xid")
    assert x["host"] == "archbox" and x["ts"] == datetime(2025, 2, 1, 14, 25, 31, tzinfo=UTC)
    assert ex.tables["xid_events"]["host"].to_list() == ["archbox"]
    # the systemd line belongs to another process: neither claimed nor ignored
    assert 2 not in set(ex.claimed.to_list()) | set(ex.ignored.to_list())
    assert ex.ignored.to_list() == [3]


# journalctl / syslog print the month with strftime `%b` in the host's LC_TIME locale (glibc abmon,
# parsers/kernel.py LOCAL_MONTHS): zh_CN `11月` (NVIDIA/gpu-operator#610), pt `set` (pop-os/pop#3132),
# ru `фев` (GSConnect/gnome-shell-extension-gsconnect#1052), nb `jan.` (hirschmann/nbfc#181). Before,
# such a stamp was no prefix: the host was lost and `14:15:47` was read as the Xid's PCI address.
@pytest.mark.parametrize(("stamp", "month"), [
    ("11月 15 14:15:47", 11), ("set 09 14:54:33", 9), ("фев 12 00:48:02", 2), ("jan. 29 20:50:17", 1),
    ("Mär 03 08:01:02", 3), ("déc. 24 23:59:59", 12)])
def test_journal_short_localized_month(stamp: str, month: int) -> None:
    ex = run(f"{stamp} node7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
             "GPU has fallen off the bus.\n", ref_year=2024)
    (x,) = ev(ex, "xid")
    day, hms = stamp.split()[1:]
    h, m, sec = (int(p) for p in hms.split(":"))
    assert (x["host"], x["pci_bus_id"]) == ("node7", "0000:3b:00")
    assert x["ts"] == datetime(2024, month, int(day), h, m, sec, tzinfo=UTC) and x["ts_raw"] == stamp


# NVIDIA Fabric Manager in a journal (parsers/kernel.py FM_PROCS): its own stderr, the start script
# of the 550+ packages and systemd's lines about its unit become `fabric_manager` events of the host,
# the `[NV_WARN_...]` / `[NV_ERR_...]` status as the code (NVIDIA/gpu-operator#610; the start script:
# data-infra/cube-studio#29); other processes' lines stay with other parsers.
def test_journal_fabric_manager_lines() -> None:
    ex = run(
        "11月 15 14:15:47 leon-NF5468M6 systemd[1]: Starting NVIDIA fabric manager service...\n"
        "11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch device information "
        "from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n"
        "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4753]: \"/usr/bin/nv-fabricmanager -c "
        "/usr/share/nvidia/nvswitch/fabricmanager.cfg\" failed! Exit code: 1\n"
        "Nov 15 14:15:47 gpu46 nv-fabricmanager[3310]: fabric manager failed to initialize: detected driver "
        "version mismatch\n"
        "Nov 15 14:15:48 gpu46 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, "
        "status=1/FAILURE\n"
        "Nov 15 14:15:48 gpu46 systemd[1]: Started Session 12 of user root.\n", ref_year=2024)
    fm = ev(ex, "fabric_manager")
    assert [(x["line_no"], x["host"], x["code"], x["severity"]) for x in fm] == [
        (1, "leon-NF5468M6", None, "info"), (2, "leon-NF5468M6", "NV_WARN_NOTHING_TO_DO", "warning"),
        (3, "ubuntu2404", None, "warning"), (4, "gpu46", None, "error"), (5, "gpu46", None, "warning")]
    assert 6 not in set(ex.claimed.to_list())
    assert fm[3]["ts"] == datetime(2024, 11, 15, 14, 15, 47, tzinfo=UTC)
    assert kernel.sniff("11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: x\n") > 0



# Fabric Manager's package/driver version check, both wordings (FM 450-550 `don't match with driver
# version`, later `doesn't match ... with the matching`; NVIDIA/gpu-operator#544, siderolabs/pkgs#720),
# read as the host's fabric_manager event and by fabric-manager-driver-mismatch (gpu_driver_firmware).
def test_journal_fabric_manager_driver_version_mismatch() -> None:
    from forensics.signatures import load_catalog

    ex = run(
        "Feb 24 09:28:18 ip-172-31-92-157 systemd[1]: Starting NVIDIA fabric manager service...\n"
        "Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager NVIDIA GPU driver interface "
        "version 535.183.01 don't match with driver version 535.216.01. Please update with matching NVIDIA driver "
        "package.\n"
        "Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version "
        "550.127.05 doesn't match with driver version 550.120. Please update with the matching NVIDIA driver "
        "package.\n", ref_year=2025)
    fm = ev(ex, "fabric_manager")
    assert [(x["line_no"], x["host"], x["severity"]) for x in fm] == [
        (1, "ip-172-31-92-157", "info"), (2, "ip-172-31-92-157", "error"), (3, "node1", "error")]
    sig = next(s for s in load_catalog().signatures if s.id == "fabric-manager-driver-mismatch")
    assert [sig.matches_text(x["message"]) for x in fm] == [False, True, True]

def test_journal_short_without_year_keeps_raw() -> None:
    ex = fixture("journal_short.log")
    (x,) = ev(ex, "xid")
    assert x["ts"] is None and x["ts_raw"] == "Feb 01 14:25:31" and x["ts_quality"] == "missing"


def test_journal_short_iso() -> None:
    (x,) = ev(fixture("journal_short_iso.log"), "xid")
    assert x["host"] == "gpu-node-17" and x["ts"] == datetime(2025, 2, 23, 16, 24, 18, tzinfo=UTC)


def test_journal_short_precise() -> None:
    x = ev(fixture("journal_short_precise.log", ref_year=2025), "xid")
    assert x[0]["ts"] == datetime(2025, 2, 23, 16, 24, 18, 123456, tzinfo=UTC)
    assert [e["code"] for e in x] == ["13", "43"]


def test_syslog_with_both_stamps() -> None:
    ex = fixture("syslog_both_stamps.log", ref_year=2024)
    (x,) = ev(ex, "xid")
    assert x["ts"] == datetime(2024, 11, 22, 18, 29, 55, tzinfo=UTC) and x["host"] == "hostname"
    assert x["pci_bus_id"] == "0000:01:00" and x["pid"] is None
    no_year = ev(fixture("syslog_both_stamps.log"), "xid")[0]
    assert no_year["ts_quality"] == "relative" and no_year["ts_raw"] == "966.503025"


def test_rsyslog_rfc3339_and_fell_off_single_line() -> None:
    ex = fixture("rsyslog_rfc3339.log")
    x, f = ev(ex)
    assert x["kind"] == "xid" and x["ts"] == datetime(2025, 3, 4, 4, 6, 7, 123456, tzinfo=UTC)
    assert x["pci_bus_id"] == "0004:01:00" and x["pid"] is None
    assert ex.tables["xid_events"]["proc_name"].to_list() == [None]
    assert f["kind"] == "gpu_fell_off_bus" and f["pci_bus_id"] == "0004:01:00" and f["host"] == "node-3"


def test_bare_kernel_prefix_and_sxid() -> None:
    ex = fixture("bare_kernel.log")
    x, s = ev(ex)
    assert (x["code"], x["pci_bus_id"], x["pid"]) == ("74", "0000:c1:00", None)
    assert (s["kind"], s["code"], s["pci_bus_id"], s["severity"]) == ("nvswitch_sxid", "12028", "0000:05:00", "warning")


def test_no_prefix_nvrm_line() -> None:
    (x,) = ev(fixture("no_prefix.log"), "xid")
    assert (x["code"], x["pid"], x["line_no"], x["severity"]) == ("109", 4124, 1, "error")


# ---- Xid bodies ----------------------------------------------------------------------------

def test_xid_mig_gpu_i_form() -> None:
    t = fixture("xid_mig.log").tables["xid_events"]
    assert t["gpu_instance"].to_list() == [2, 2]
    assert t["pci_bus_id"].to_list() == ["0000:3b:00", "0000:3b:00"]


def test_xid_mig_gpu_ci_form() -> None:
    row = fixture("xid_mig.log").tables["xid_events"].row(1, named=True)
    assert (row["xid"], row["gpu_instance"], row["pid"], row["proc_name"]) == (43, 2, 5555, "python3")
    assert row["body"] == "Ch 00000008"


def test_xid_old_formats() -> None:
    t = fixture("xid_old_formats.log").tables["xid_events"]
    assert t["xid"].to_list() == [13, 63, 79, 43]
    assert t["pid"].to_list() == [None, 1896, None, 35521]
    assert t["body"][0].startswith("0005 00000000")
    assert t["body"][3] == ""  # truncated paste after pid=


def test_xid_nvlink5_bodies_and_redacted_pci() -> None:
    ex = fixture("xid_nvlink5.log")
    t = ex.tables["xid_events"]
    assert t["xid"].to_list() == [145, 149, 154, 145]
    assert t["pci_bus_id"].to_list() == ["0008:01:00"] * 3 + [None]
    assert t["body"][1].startswith("NETIR_LINK_EVT Fatal XC0 i0 Link 08")
    assert any("without a usable PCI" in w for w in ex.warnings)


def test_xid_caused_by_previous() -> None:
    t = run(real("024")).tables["xid_events"]
    assert t["caused_by_xid"].to_list() == [149, 145, 145, 145, 149, 145, 145]
    assert t["proc_name"].unique().to_list() == ["python3"]


def test_xid_pid_unknown() -> None:
    x = ev(fixture("dmesg_H.log"), "xid")[0]
    assert x["pid"] is None and x["severity"] == "critical"


# ---- companion lines -----------------------------------------------------------------------

def test_gpu_identity_line() -> None:
    (g,) = ev(fixture("dmesg_uptime.log"), "gpu_identity")
    assert g["code"] == "GPU-509665ad-b600-ac93-3616-d754b23d636d" and g["pci_bus_id"] == "0000:9b:00"


def test_fallen_off_bus_multiline() -> None:
    ex = fixture("fell_off_bus.log")
    f = ev(ex, "gpu_fell_off_bus")
    assert [(e["line_no"], e["pci_bus_id"]) for e in f] == [(2, "0000:01:00"), (3, "0000:18:00")]
    assert ex.claimed.to_list() == [1, 2, 3, 4, 5]
    assert ev(ex, "nvrm_error")[0]["code"] == "GPU_NOT_ATTACHED"  # API_GPU_ATTACHED_SANITY_CHECK failed


def test_gsp_and_nvrm_errors() -> None:
    ex = fixture("gsp_errors.log")
    codes = [(e["line_no"], e["kind"], e["code"]) for e in ev(ex)]
    assert codes == [
        (1, "gsp_error", "PMU_HALTED"), (2, "gsp_error", "GSP_CRASHCAT"), (4, "gsp_error", "RPC_SEND_FAILED"),
        (5, "gsp_error", "NV_ERR_GPU_IS_LOST"), (6, "gsp_error", "NV_ERR_RESET_REQUIRED"),
        (7, "nvrm_error", "UVM_FATAL"), (8, "nvrm_error", "API_MISMATCH"),
    ]
    assert 3 in ex.claimed.to_list()  # CrashCat detail line


def test_pcie_aer_record() -> None:
    ex = fixture("pcie_aer.log")
    a = ev(ex, "pcie_aer")
    assert [e["line_no"] for e in a] == [1, 2, 4, 5, 6, 8]
    assert a[5]["code"] == "Surprise Down Error" and a[5]["severity"] == "critical"
    assert a[2]["code"] == "Replay Timer Timeout" and a[2]["severity"] == "warning"
    assert {e["pci_bus_id"] for e in a} == {"0000:00:02"}
    assert ex.claimed.to_list() == list(range(1, 11))


def test_ib_port_events() -> None:
    i = ev(fixture("ib_port.log"), "ib_port")
    assert [(e["line_no"], e["code"], e["severity"]) for e in i] == [
        (1, "LINK_DOWN", "error"), (2, "DOWN", "error"), (3, "CARRIER_LOST", "warning"),
        (4, "LINK_UP", "info"), (5, "ACTIVE", "info")]
    assert i[0]["pci_bus_id"] == "0000:0c:00"


def test_mce_edac() -> None:
    ex = fixture("mce_edac.log")
    assert [(e["line_no"], e["code"]) for e in ev(ex, "mce")] == [(1, "LOGGED"), (2, "MCE"), (4, "CE"), (5, "UE")]
    assert 3 in ex.claimed.to_list()


def test_host_oom_killer() -> None:
    ex = fixture("host_oom.log")
    (o,) = ev(ex, "host_oom_kill")
    assert (o["line_no"], o["pid"], o["code"]) == (4, 1234, "python")
    assert ex.claimed.to_list() == [1, 3, 4, 5] and ex.ignored.to_list() == [2]


def test_kernel_panic_and_boot_markers() -> None:
    ex = fixture("panic_boot.log", ref_year=2026)
    assert [(e["line_no"], e["kind"]) for e in ev(ex)] == [
        (1, "boot"), (2, "boot"), (3, "kernel_panic"), (5, "boot"), (6, "boot")]
    assert ev(ex, "boot")[1]["code"] == "6.8.0-45-generic"
    assert ex.ignored.to_list() == [4]


# ---- real samples --------------------------------------------------------------------------

def test_real_021_dmesg_T_xid43_xid31() -> None:
    ex = run(real("021"))
    assert [e["line_no"] for e in ev(ex, "xid")] == [2, 3, 4, 5, 8, 9, 10]
    assert ev(ex, "xid")[4]["ts"] == datetime(2021, 1, 29, 23, 42, 34, tzinfo=UTC)
    assert ev(ex, "gpu_identity")[0]["line_no"] == 6
    check_contract(ex, 10)


def test_real_040_single_xid109() -> None:
    assert [e["line_no"] for e in ev(run(real("040")), "xid")] == [1]


def test_real_047_redacted_pci() -> None:
    ex = run(real("047"))
    assert [(e["line_no"], e["code"]) for e in ev(ex, "xid")] == [(2, "145"), (3, "137")]
    assert ex.ignored.to_list() == [1]


def test_real_053_aer_dmesg_H() -> None:
    ex = run(real("053"))
    assert [e["line_no"] for e in ev(ex, "pcie_aer")] == [1, 2, 4, 5, 6, 8, 9, 10, 12]
    assert ex.claimed.to_list() == list(range(1, 13))


def test_real_057_aer_then_xid79() -> None:
    ex = run(real("057"))
    assert [e["line_no"] for e in ev(ex, "pcie_aer")] == [1, 2, 4, 5, 6, 8]
    assert [e["line_no"] for e in ev(ex, "xid")] == [13]
    assert ev(ex, "xid")[0]["pci_bus_id"] == "0000:02:00"


# ---- properties and sniff ------------------------------------------------------------------

REAL_LINES = [ln for f in sorted(FIX.glob("*.log")) for ln in f.read_text().splitlines()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=120), max_size=15))
def test_property_arbitrary_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(ln.replace("\n", " ").replace("\r", " ") for ln in lines)
    n = decode_lines(text.encode()).lines.height
    check_contract(run(text, ref_year=2025), n)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 200), st.text(max_size=5)), max_size=12))
def test_property_mutated_real_lines(muts: list[tuple[str, int, str]]) -> None:
    text = "\n".join((ln[:i] + s + ln[i + len(s):]) for ln, i, s in muts)
    n = decode_lines(text.encode()).lines.height
    check_contract(run(text, ref_year=2025, host_hint="h"), n)


def test_sniff_ranks_kernel_fixtures_first() -> None:
    others = [dcgm, sacct, slurm]
    for f in sorted(FIX.glob("*.log")):
        head = f.read_text()
        assert kernel.sniff(head) > max(m.sniff(head) for m in others), f.name
    for folder in ("dcgm", "sacct", "slurm"):
        for f in sorted((ROOT / "fixtures" / folder).iterdir()):
            if f.name != "README.md":
                assert kernel.sniff(f.read_text()) < 0.5, f.name


def test_journalctl_json_kernel_records() -> None:
    ex = fixture("journal_json.log")
    got = [(r["line_no"], r["kind"], r["code"], r["host"], r["pci_bus_id"]) for r in ex.events.iter_rows(named=True)]
    assert got == [(1, "xid", "79", "gpu-node-17", "0000:9b:00"),
                   (3, "pcie_aer", "Uncorrected (Fatal)", "gpu-node-17", "0000:97:01"),
                   (4, "ib_port", "CABLE_UNPLUGGED", "gpu-node-17", "0000:5e:00")]
    assert ex.events["ts"][0] == datetime(2025, 2, 23, 16, 24, 18, 123456, tzinfo=UTC)
    assert set(ex.events["ts_quality"].to_list()) == {"exact"}
    assert 2 not in ex.claimed.to_list() and 2 not in ex.ignored.to_list()  # slurmd's record is not ours
    assert ex.tables["xid_events"]["xid"].to_list() == [79]
    check_contract(ex, 4)
    assert kernel.sniff((FIX / "journal_json.log").read_text()) >= 0.5


# ---- OOM partial records, hung tasks, lockups, filesystems, power key, GSP timeouts ------------

def test_oom_record_lines_stand_for_a_missing_kill_line() -> None:
    text = (
        "[  100.000001] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
        "[  100.000002] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
        "oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1/c1,task=python3,pid=4242,uid=0\n"
        "[  100.000003] Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1000kB, anon-rss:900kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:10kB oom_score_adj:0\n"
        "[  100.000004] oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n"
        "[  150.000001] Mem-Info:\n[  150.000002] Mem-Info:\n[  150.000003] Mem-Info:\n[  150.000004] Mem-Info:\n"
        "[  200.000001] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
        "oom_memcg=/slurm/job_7,task_memcg=/slurm/job_7/step_0,task=torchrun,pid=777,uid=1000\n"
        "[  250.000001] Out of memory (oom_kill_allocating_task): Killed process 99 (dataloader) total-vm:10kB\n"
        "[  300.000001] oom_reaper: reaped process 31337 (pt_main_thread), now anon-rss:0kB, file-rss:0kB\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["code"], e["pid"]) for e in ev(ex, "host_oom_kill")] == [
        (3, "python3", 4242), (9, "torchrun", 777), (10, "dataloader", 99), (11, "pt_main_thread", 31337)]
    assert {1, 2, 4} <= set(ex.claimed.to_list())  # the record's other lines are claimed with it
    check_contract(ex, 11)


def test_hung_task_lockups_and_rcu_stalls() -> None:
    text = (
        "[  300.000001] INFO: task python:1234 blocked for more than 122 seconds.\n"
        "[  300.000002]       Tainted: P           OE     5.15.0-91-generic #101-Ubuntu\n"
        '[  300.000003] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.\n'
        "[  400.000001] watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python:1234]\n"
        "[  400.000002] NMI watchdog: Watchdog detected hard LOCKUP on cpu 3\n"
        "[  400.000003] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:\n"
        "[  400.000004] rcu: INFO: rcu_preempt self-detected stall on CPU\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"], e["pid"]) for e in ev(ex)] == [
        (1, "hung_task", "python", 1234), (4, "kernel_lockup", "soft_lockup", None),
        (5, "kernel_lockup", "hard_lockup", None), (6, "kernel_lockup", "rcu_stall", None),
        (7, "kernel_lockup", "rcu_stall", None)]
    assert 3 in ex.claimed.to_list() and 2 in ex.ignored.to_list()
    check_contract(ex, 7)


def test_filesystem_and_block_errors() -> None:
    text = (
        "[  500.000001] EXT4-fs error (device sda1): ext4_find_entry:1455: inode #2: comm python: reading directory\n"
        "[  500.000002] EXT4-fs (sda1): Remounting filesystem read-only\n"
        "[  500.000003] XFS (nvme0n1): Corruption detected. Unmount and run xfs_repair\n"
        "[  500.000004] XFS (dm-0): Filesystem has been shut down due to log error (0x2).\n"
        "[  500.000005] nfs: server fs01 not responding, still trying\n"
        "[  500.000006] nfs: server fs01 OK\n"
        "[  500.000007] LustreError: 12345:0:(client.c:1234:ptlrpc_expire_one_request()) @@@ Request sent has timed out\n"
        "[  500.000008] blk_update_request: I/O error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1\n"
        "[  500.000009] Buffer I/O error on dev sdb1, logical block 0, lost async page write\n"
        "[  500.000010] nvme nvme0: I/O 123 QID 4 timeout, aborting\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["code"], e["severity"]) for e in ev(ex, "fs_error")] == [
        (1, "EXT4_ERROR", "error"), (2, "READ_ONLY", "error"), (3, "XFS_ERROR", "error"), (4, "XFS_ERROR", "error"),
        (5, "NFS_NOT_RESPONDING", "error"), (6, "NFS_OK", "info"), (7, "LUSTRE_ERROR", "error"),
        (8, "IO_ERROR", "error"), (9, "IO_ERROR", "error"), (10, "NVME_TIMEOUT", "error")]
    check_contract(ex, 10)



def test_network_filesystem_rpc_client_family() -> None:
    """The RPC client's `<prog>: server <name> not responding, still trying|timed out` / `... OK`
    (Linux net/sunrpc/clnt.c, any RPC program: nfs, lockd, rpcbind, ...) and the Solaris/BSD
    `NFS server <name> not responding` / `ok`, under syslog and dmesg headers (b7sys tigrlab525)."""
    text = (
        "May  3 09:30:47 backup kernel: [74505.779405] nfs: server rprshnas01.camh.ca not responding, still trying\n"
        "May  3 09:31:02 backup kernel: [74520.100000] lockd: server 10.20.0.5 not responding, still trying\n"
        "May  3 09:31:10 backup kernel: [74528.000000] nfs: server nas2 not responding, timed out\n"
        "May  3 09:32:00 backup kernel: [74578.000000] rpcbind: server nas2 not responding, timed out\n"
        "May  3 09:40:11 backup kernel: [75009.000000] nfs: server rprshnas01.camh.ca OK\n"
        "May  3 09:40:12 backup kernel: [75010.000000] lockd: server 10.20.0.5 OK\n"
        "May  3 09:41:00 backup kernel: NFS server fs02 not responding, still trying\n"
        "May  3 09:42:00 backup kernel: NFS server fs02 ok\n"
        "May  3 09:43:00 backup kernel: [75200.000000] nfsd: last server has exited, flushing export cache\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["code"]) for e in ev(ex, "fs_error")] == [
        (1, "NFS_NOT_RESPONDING"), (2, "NFS_NOT_RESPONDING"), (3, "NFS_NOT_RESPONDING"), (4, "NFS_NOT_RESPONDING"),
        (5, "NFS_OK"), (6, "NFS_OK"), (7, "NFS_NOT_RESPONDING"), (8, "NFS_OK")]
    check_contract(ex, 9)


@pytest.mark.parametrize(("line", "server"), [
    ("nfs: server rprshnas01.camh.ca not responding, still trying", "rprshnas01.camh.ca"),
    ("lockd: server 10.20.0.5 not responding, timed out", "10.20.0.5"),
    ("NFS server fs02 not responding, still trying", "fs02"),
    ("Lustre: lustre-OST0001-osc-ffff8803: Connection to lustre-OST0001 (at 10.0.0.5@o2ib) was lost; in progress "
     "operations using this service will wait for recovery to complete", "10.0.0.5"),
])
def test_netfs_server_named_by_the_client(line: str, server: str) -> None:
    import re

    m = re.search(kernel.NETFS_SERVER_RE, line)
    assert m is not None and (m.group(1) or m.group(2)) == server

def test_power_key_from_logind_in_a_journal_dump() -> None:
    text = (
        "Dec 01 09:00:00 node7 kernel: mlx5_core 0000:1a:00.0: Port module event[error]: module 0, Cable error, "
        "Bad or shorted cable/module\n"
        "Dec 01 09:00:05 node7 systemd-logind[1200]: Power key pressed.\n"
        "Dec 01 09:00:05 node7 systemd-logind[1200]: Powering Off...\n"
        "Dec 01 09:00:06 node7 sshd[900]: Power key pressed.\n"
    )
    ex = run(text, ref_year=2026)
    assert [(e["line_no"], e["kind"], e["code"], e["host"]) for e in ev(ex)] == [
        (1, "ib_port", "CABLE_ERROR", "node7"), (2, "power_key", "POWER_KEY", "node7")]
    assert ev(ex)[1]["ts"] == datetime(2026, 12, 1, 9, 0, 5, tzinfo=UTC)
    check_contract(ex, 4)


def test_gsp_heartbeat_and_rpc_timeout_are_not_gpu_lost() -> None:
    text = (
        "[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949\n"
        "[   84.300451] NVRM: GPU6 _threadNodeCheckTimeout: _threadNodeCheckTimeout: currentTime: f420db7018cc0 >= "
        "f420db7018cc0\n"
        "[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ****************** GSP Timeout ******************\n"
        "[   90.000000] NVRM: _threadNodeCheckTimeout: API_GPU_ATTACHED_SANITY_CHECK failed!\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["kind"], e["code"]) for e in ev(ex)] == [
        (1, "gsp_error", "HEARTBEAT_TIMEOUT"), (2, "nvrm_error", "THREAD_NODE_CHECK_TIMEOUT"),
        (3, "gsp_error", "RPC_TIMEOUT"), (4, "nvrm_error", "GPU_NOT_ATTACHED")]
    check_contract(ex, 4)


def test_oom_header_stands_for_a_record_cut_before_its_kill_line() -> None:
    """A dmesg cut inside the OOM report's call trace keeps only `<comm> invoked oom-killer`: that header
    is the record's event (victim unknown); a header whose record goes on to its kill line is not."""
    text = (
        "[Wed Sep 29 07:10:00 2021] pt_main_thread invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
        "[Wed Sep 29 07:10:00 2021] Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1000kB, anon-rss:900kB\n"
        "[Wed Sep 29 07:12:20 2021] GC Thread#9 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
        "[Wed Sep 29 07:12:20 2021] Call Trace:\n"
        "[Wed Sep 29 07:12:20 2021]  oom_kill_process+0xe6/0x120\n"
        "[Wed Sep 29 07:12:20 2021]  mem_cgroup_out_of_memory+0xbb/0xd0\n"
    )
    ex = run(text)
    assert [(e["line_no"], e["code"], e["pid"]) for e in ev(ex, "host_oom_kill")] == [
        (2, "python3", 4242), (3, None, None)]
    assert 1 in ex.claimed.to_list()
    check_contract(ex, 6)


# ---- the literal screen and the uptime fast path give the plain path's result ---------------

def _plain_and_screened(lines: pl.DataFrame, ctx: ParseContext, monkeypatch: pytest.MonkeyPatch
                        ) -> tuple[Extraction, Extraction]:
    # the screen, and the rule columns computed per distinct input on every frame (`_per_distinct`),
    # against the plain path
    monkeypatch.setattr(kernel, "PER_DISTINCT_ROWS", 0)
    monkeypatch.setattr(kernel, "PER_DISTINCT_SHARE", 1)
    got = kernel.parse(lines, ctx)
    monkeypatch.setattr(kernel, "SCREEN", False)
    monkeypatch.setattr(kernel, "PER_DISTINCT_ROWS", 10**12)
    want = kernel.parse(lines, ctx)
    monkeypatch.setattr(kernel, "SCREEN", True)
    return want, got


def _same(want: Extraction, got: Extraction) -> None:
    assert got.events.equals(want.events, null_equal=True)
    assert got.tables.keys() == want.tables.keys()
    for name, t in want.tables.items():
        assert got.tables[name].equals(t, null_equal=True), name
    assert got.claimed.to_list() == want.claimed.to_list()
    assert got.ignored.to_list() == want.ignored.to_list()
    assert got.warnings == want.warnings


MIXED_DMESG = """\
[    0.000000] Linux version 5.15.0-1063-nvidia (buildd@lcy02) #64-Ubuntu SMP
[   12.000001] docker0: port 1(veth1) entered blocking state
[May27 04:18] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 9
[  +0.000123] docker0: port 1(veth1) entered forwarding state
<6>[   13.500000] NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, GPU has fallen off the bus.
[  +1.500000] NVRM: Xid (PCI:0000:9b:00): 48, pid=1234, An uncorrectable double bit error
[   14.000000] [T812] pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0
[   14.000001] nvidia 0000:01:00.0: AER:   error status/mask=00004000/00000000
[   14.000002] nvidia 0000:01:00.0:    [14] CmpltTO                (First)
[   14.000003] pcieport 0000:00:01.0:    [ 5] SDES
  [   15.000000] NVRM: The NVIDIA GPU 0000:3b:00.0
[   15.000001] NVRM: (PCI ID: 10de:2330) installed in this system has
[   15.000002] NVRM: fallen off the bus and is not responding to commands.
[   16.000000] node-7 kernel: Out of memory: Killed process 4242 (python3) total-vm:1kB
[   16.500000] audit: type=1400 audit(1.2:3): apparmor="STATUS" operation="profile_load"
[May27 04:19] nfs: server storage-01 OK
[  +2.000000] Lustre: Mounted lustre-client
[  +0.500000] EXT4-fs error (device nvme0n1p2): ext4_find_entry: reading directory
Sep 23 10:00:01 node-7 kernel: [   17.000000] mlx5_core 0000:5e:00.0: mlx5_ib0: link down
[   18.000000] Lustre: lustre-OST0003-osc-ffff9a: Connection to lustre-OST0003 (at 10.0.0.3@o2ib) was lost; in progress operations using this service will wait for recovery to complete
"""


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.log")) + ["wrapped/pdsh_dmesg_nccl.log",
                                                                              "wrapped/uniq_c_pdsh.log"])
def test_screen_gives_the_plain_result_on_every_fixture(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = FIX / name if "/" not in name else ROOT / "fixtures" / name
    boot = datetime(2025, 2, 21, tzinfo=UTC)
    ctx = ParseContext(path="dmesg.log", host_hint="node-1", ref_year=2025, boot_times={"node-1": boot})
    want, got = _plain_and_screened(frame(path.read_text()), ctx, monkeypatch)
    assert want.claimed.len() + want.ignored.len() > 0
    _same(want, got)


def test_screen_keeps_dmesg_H_sums_and_neighbour_records(monkeypatch: pytest.MonkeyPatch) -> None:
    # uptime noise between `dmesg -H` anchors and their `[+delta]` lines, the 3-line fallen-off-the-bus
    # form, AER bit lines after the mask line: the screen drops the noise, never what they add up to
    ctx = ParseContext(path="dmesg.log", host_hint="node-7", ref_year=2025,
                       boot_times={"node-7": datetime(2025, 5, 27, 4, 0, tzinfo=UTC)})
    want, got = _plain_and_screened(frame(MIXED_DMESG), ctx, monkeypatch)
    _same(want, got)
    kinds = dict(zip(got.events["line_no"].to_list(), got.events["kind"].to_list(), strict=True))
    assert kinds[3] == "nvswitch_sxid" and kinds[5] == "xid" and kinds[11] == "gpu_fell_off_bus"
    assert kinds[7] == "pcie_aer" and kinds[10] == "pcie_aer"  # line 10's bit: the one above it is a bit line
    assert kinds[14] == "host_oom_kill" and kinds[18] == "fs_error"
    assert kinds[19] == "ib_port" and 8 in set(got.claimed.to_list())  # the mask line: the record's
    assert got.events.filter(pl.col("line_no") == 20)["code"].to_list() == ["LUSTRE_LOST"]
    # line 6: the +1.5 s delta after the 04:18 anchor, with the 0.000123 s of line 4 before it
    ts6 = got.events.filter(pl.col("line_no") == 6)["ts"][0]
    assert ts6 == datetime(2025, 5, 27, 4, 18, 1, 500123, tzinfo=UTC)
    assert got.ignored.to_list() == [2, 4, 9, 15, 17]  # a bit line of a device with no keyword: chatter


def test_screen_in_a_batch_keeps_files_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # two files as forensics/bulk.py joins them: per-file keys, line numbers far apart
    a = frame(MIXED_DMESG).with_columns(pl.lit(0, dtype=pl.Int64).alias("hint_file"))
    b = frame((FIX / "fell_off_bus.log").read_text()).with_columns(
        pl.col("line_no") + 1_000_000, pl.lit(1, dtype=pl.Int64).alias("hint_file"))
    lines = pl.concat([a, b]).with_columns(pl.lit("node-7").alias("hint_host"), pl.lit(None, dtype=pl.Int64)
                                           .alias("hint_rank"))
    ctx = ParseContext(path="<batch>", ref_year=2025, batched=True,
                       boot_times={"node-7": datetime(2025, 5, 27, 4, 0, tzinfo=UTC)})
    want, got = _plain_and_screened(lines, ctx, monkeypatch)
    _same(want, got)
    assert got.events.filter(pl.col("line_no") > 1_000_000).height > 0


@pytest.mark.parametrize("text", [
    # a rank log (no kernel line): nothing read, nothing ignored
    "gpu46:78367:78492 [0] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'\n"
    "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: boom\n",
    # kernel noise only: every line a kernel line, none a rule's candidate
    "[   12.000001] docker0: port 1(veth1) entered blocking state\n"
    "[  +0.000123] docker0: port 1(veth1) entered forwarding state\n"
    "Sep 23 10:00:01 node-7 kernel: [   17.000000] audit: type=1400 audit(1.2:3): apparmor=\"STATUS\"\n",
])
def test_no_candidate_gives_the_plain_result(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # `parse` returns early when no line is a rule's candidate: the rules' own result for none
    ctx = ParseContext(path="x.log", host_hint="node-7", ref_year=2025)
    want, got = _plain_and_screened(frame(text), ctx, monkeypatch)
    _same(want, got)
    assert got.events.is_empty() and got.claimed.len() == 0
    assert got.ignored.to_list() == ([] if "NCCL" in text else [1, 2, 3])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(picked=st.lists(st.sampled_from(REAL_LINES + MIXED_DMESG.splitlines()), max_size=25))
def test_property_screen_gives_the_plain_result(picked: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ParseContext(path="dmesg.log", host_hint="node-7", ref_year=2025,
                       boot_times={"node-7": datetime(2025, 5, 27, 4, 0, tzinfo=UTC)})
    _same(*_plain_and_screened(frame("\n".join(picked)), ctx, monkeypatch))


# patterns of `parse` that read a value, or that only ever stand beside a test with literals
# (IB_DEV_RE beside ib_code, PCI_FN_RE beside AER_CONT_RE, the AER severity words, an Xid's body),
# or that are a neighbour's flag (read on every line `_screened` keeps: NEIGHBOUR_LITERALS; on its
# own line `fallen off the bus` counts beside `NVRM:`, `not supported` beside `NVRM: The NVIDIA GPU`);
# AER_BIT_RE has no literal: `kernel._rule_line` matches AER_BIT_ANY_RE instead
_VALUE_OR_PAIRED = {kernel.PCI_ANY_RE, kernel.PCI_FN_RE, kernel.IB_DEV_RE, kernel.AER_BIT_RE, "Uncorrected", "Fatal",
                    "Non-Fatal", r"caused by previous Xid (\d+)", "fallen off the bus", "not supported"}


def _parse_patterns() -> list[str]:
    """Every pattern `kernel.parse` hands to a polars string test (literal ones escaped, `starts_with`
    anchored), with the file-system table it loops over."""
    import ast
    import inspect
    import re

    out = [rx for rx, _ in kernel.FS_CODES]
    for node in ast.walk(ast.parse(inspect.getsource(kernel.parse))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and node.func.attr in {"contains", "starts_with", "extract", "extract_groups", "ends_with"}):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "ascii_classes":
            arg = arg.args[0]  # the pattern as written (parsers/ascii_regex.py)
        if isinstance(arg, ast.Name) and arg.id == "rx":  # the FS_CODES loop, added above
            continue
        val = getattr(kernel, arg.id) if isinstance(arg, ast.Name) else ast.literal_eval(arg)
        literal = node.func.attr in {"starts_with", "ends_with"} or any(
            k.arg == "literal" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords)
        if val not in _VALUE_OR_PAIRED:
            out.append(("^" if node.func.attr == "starts_with" else "") + re.escape(val) if literal else val)
    return out


def test_every_rule_pattern_holds_a_rule_literal() -> None:
    # the screen is sound: a line without a rule literal matches none of the rules' patterns, because
    # each pattern's required literals (every match holds one) each hold a rule literal
    from forensics.triage import literal_factor

    pats = _parse_patterns()
    assert len(pats) > 60 and kernel.OOM_HEADER_RE in pats and kernel.FS_CODES[0][0] in pats
    # a pattern `A.*(B)` (a concatenation): every match holds a match of its last group, whose
    # literals are rarer than A's (`Lustre: ` begins every Lustre mount line)
    tails = {r"Lustre: .*(?:Connection to \S+ .*was lost|evicted)": r"(?:Connection to \S+ .*was lost|evicted)"}
    for pat, tail in tails.items():
        assert pat in pats and pat.endswith(tail) and "|" not in pat[:-len(tail)]
    for pat in pats:
        req = literal_factor(tails.get(pat, pat))
        assert req is not None, pat
        for text, caseless in req:
            low = text.lower()
            assert (any(r.lower() in low for r in kernel.RULE_LITERALS_CI)
                    or (not caseless and any(r in text for r in kernel.RULE_LITERALS))), (pat, text)


def test_every_neighbour_literal_holds_a_keyword_but_one() -> None:
    # `_screened` looks for the neighbour literals on KEYWORDS lines (and `not supported` lines) only
    for lit in kernel.NEIGHBOUR_LITERALS:
        assert any(k in lit for k in [*kernel.KEYWORDS, "not supported"]), lit


def test_user_space_faults_the_kernel_reports() -> None:
    """show_signal_msg (x86 page fault), traps.c (trap / general protection) and arm64's unhandled
    fault lines are `user_fault` events with the process's pid and the fault type; the library stays
    in the message. An oops (a kernel-mode general protection fault) is not one."""
    ex = run("Mar 24 09:53:55 cn110 kernel: python[3551]: segfault at 1378 ip 00007fff859dbeff sp 00007fff3b60ce60"
             " error 4 in libcuda.so.418.67[7fff858c5000+dec000]\n"
             "[ 1234.500000] traps: python3[4242] general protection fault ip:7f3c2a1b sp:7ffd0c2e error:0 in"
             " libnvidia-ptxjitcompiler.so.535.104.05[7f3b00000000+1c00000]\n"
             "[   99.100000] python3[77]: unhandled level 2 translation fault (11) at 0x00000010, esr 0x92000006, in"
             " libcuda.so.1[ffff8e000000+1e6f000]\n"
             "[    5.000000] traps: gnome-shell[900] trap int3 ip:7f3a sp:7ffc error:0 in libglib-2.0.so.0.7200.4[7f3a0000+8d000]\n"
             "[   12.000000] general protection fault, probably for non-canonical address 0xdead: 0000 [#1] SMP NOPTI\n",
             ref_year=2021)
    assert ex.events.select("line_no", "kind", "code", "pid").rows() == [
        (1, "user_fault", "segfault", 3551), (2, "user_fault", "general_protection", 4242),
        (3, "user_fault", "unhandled", 77), (4, "user_fault", "trap", 900), (5, "kernel_panic", "oops", None)]
    assert ex.events["host"][0] == "cn110" and "in libcuda.so.418.67[" in ex.events["message"][0]


def test_a_line_without_a_prefix_start_has_no_prefix_group() -> None:
    """`_screened` leaves out the lines PREFIX_START_RE does not match (and no rule or neighbour test
    reads): sound because on such a line every group of PREFIX_RE is null and the prefix is the
    line's leading blanks. Checked on every line of every fixture and real sample, and on lines made
    to come close to each alternative."""
    import re

    made = ["[E1102 08:03:30.2 ProcessGroupNCCL.cpp:1418] x", "[Torch] Saving", "[PG 0 Rank 3] x", "  [T12] x",
            "  [ 12.5] x", "<6>[  1.0] x", "kern  :err   : x", "kernel: NVRM: x", "node-1:12:12 [0] NCCL WARN x",
            "frame #1: c10d::x", "  time      : 2026-11-02_08:03:30", "-- Reboot", "Mon 2025-05-20 10:11:12 UTC h k: x",
            "May 27 04:18:56 host kernel: x", "1684567890.123456 host kernel: x", "\t[+0.5] x", "[<  0.1>] x",
            "Traceback (most recent call last):", "[May27 04:18] x", "[Tue May 27 04:18:56 2025] x", "  "]
    texts = list(made)
    for f in sorted((ROOT / "fixtures").rglob("*")) + sorted(REAL.rglob("*") if REAL.is_dir() else []):
        if f.is_file() and f.suffix in (".log", ".txt", "") and f.stat().st_size < 2_000_000:
            texts += f.read_text(errors="replace").splitlines()
    s = pl.Series("body", texts, dtype=pl.Utf8)
    bare = s.filter(~s.str.contains(kernel.PREFIX_START_RE))
    assert 1000 < bare.len() < s.len()
    g = bare.to_frame().select(pl.col("body").str.extract_groups(kernel.PREFIX_RE)).unnest("body")
    assert g.drop("pre").null_count().row(0) == (bare.len(),) * (g.width - 1)
    assert g["pre"].to_list() == [re.match(r"\s*", t).group(0) for t in bare.to_list()]
    assert {"[E1102 08:03:30.2 ProcessGroupNCCL.cpp:1418] x", "frame #1: c10d::x", "-- Reboot"} <= set(bare.to_list())


# `dmesg -T` in the host's locale (util-linux sys-utils/dmesg.c `record_ctime`: strftime of the
# translated "%a %b %e %H:%M:%S %Y", po/*.po at util-linux 39465c780), each stamp 2023-10-11 09:14:02
# (the French one a Tuesday, 10 October: its `mar.` is the weekday, not March)
LOCAL_DMESG_T = {
    "de": ("Mi, 11. Okt 2023, 09:14:02", 11),                 # "%a, %e. %b %Y, %H:%M:%S"
    "fr": ("mar. 10 oct. 09:14:02 2023", 10),                 # "%a %e %b %H:%M:%S %Y"
    "es": ("mié 11 oct 09:14:02 2023", 11),
    "cs": ("st 11. říj 2023 09:14:02", 11),                   # "%a %e. %b %Y %H:%M:%S"
    "sv": ("ons 11 okt 2023 09.14.02", 11),                   # "%a %e %b %Y %H.%M.%S"
    "sr": ("sre. 11. okt. 2023. 09:14:02", 11),               # "%a. %e. %b. %Y. %H:%M:%S"
    "ja": ("10月11日(水) 09:14:02 2023", 11),                  # "%b%e日(%a) %H:%M:%S %Y"
    "ko": ("10월 11일 (수) 09:14:02", 11),                     # "%b %e일 (%a) %H:%M:%S": the year from context
    "zh_CN": ("三 10月 11 09:14:02 2023", 11),                 # untranslated format, the locale's names
    "ru": ("Ср окт 11 09:14:02 2023", 11),
    "uk": ("ср жов 11 09:14:02 2023", 11),
    "it": ("mer ott 11 09:14:02 2023", 11),
    "de-delta": ("Mi, 11. Okt 2023, 09:14:02 <    0.000123>", 11),   # `dmesg -T -d`
}


@pytest.mark.parametrize("locale", sorted(LOCAL_DMESG_T))
def test_dmesg_T_in_any_locale_gives_the_stamp_and_keeps_it_out_of_the_message(locale: str) -> None:
    """Before, the stamp was left in the message: no time, and the `09:14:02` of it read as the GPU's
    PCI address by the fallen-off-the-bus rule (culprit `0009:14:02`)."""
    stamp, day = LOCAL_DMESG_T[locale]
    ex = run(f"[{stamp}] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python3, GPU has fallen off the bus.\n"
             f"[{stamp}] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n", ref_year=2023)
    ev = ex.events.sort("line_no")
    assert ev["ts"].to_list() == [datetime(2023, 10, day, 9, 14, 2, tzinfo=UTC)] * 2
    assert ev["pci_bus_id"].to_list() == ["0000:3b:00", "0000:3b:00"]
    assert ev["ts_raw"][0] == stamp.split(" <")[0]


def test_fabric_managers_own_stamp_is_no_localized_dmesg_stamp() -> None:
    # `[Jan 03 2025 10:00:01]`: month first with the year before the time, which no dmesg -T prints
    lines = pl.DataFrame({"line_no": [1], "body": ["[Jan 03 2025 10:00:01] [INFO] [tid 2231] Fabric Manager"],
                          "prefix_host": [None]}, schema_overrides={"prefix_host": pl.Utf8})
    got = kernel._split_prefix(lines, ParseContext(path="fm.log"), kernel.PREFIX_RE)
    assert got["lct"].to_list() == [None]
    assert got["msg"].to_list() == lines["body"].to_list()


@pytest.mark.parametrize(("text", "pci"), [
    ("NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", "0000:3b:00"),
    ("NVRM: GPU 00000000:3B:00.0: GPU has fallen off the bus.", "0000:3b:00"),
    ("NVRM: GPU at PCI:0000:18:00: GPU-5b1e2c8a", "0000:18:00"),
    ("09:14:02 NVRM: GPU has fallen off the bus.", None),        # a time of day is no address
    ("2024-03-02T11:20:41.007820012Z NVRM: GPU has fallen off the bus.", None),   # nor one with a fraction
])
def test_a_pci_address_is_never_a_time_of_day(text: str, pci: str | None) -> None:
    got = pl.select(pl.lit(text).str.extract(kernel.PCI_ANY_RE, 1)).item()
    assert (None if got is None else pl.select(kernel.normalize_pci(pl.lit(got))).item()) == pci


def test_talosctl_dmesg_lines() -> None:
    """`talosctl -n <node> dmesg`: `<node>: kern:    info: [<RFC 3339 nano>]: message` (siderolabs/talos
    website/content/docs/v0.14/Guides/logging.md); the node is the prefix layer's. Before, the level's
    padding kept the whole prefix in the message and the stamp's `11:20:41.007` was read as a PCI address."""
    text = ("172.20.0.5: kern:    info: [2024-03-02T11:04:12.491238012Z]: NVRM: loading NVIDIA UNIX Open Kernel Module "
            "for x86_64  550.54.14\n"
            "172.20.0.5: kern: warning: [2024-03-02T11:20:41.007716012Z]: NVRM: Xid (PCI:0000:01:00): 79, "
            "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
            "172.20.0.5: kern:     err: [2024-03-02T11:20:41.007820012Z]: NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n")
    ev = run(text).events.sort("line_no")
    got = [(r["line_no"], r["kind"], r["host"], r["pci_bus_id"], r["ts"]) for r in ev.iter_rows(named=True)
           if r["kind"] in ("xid", "gpu_fell_off_bus")]
    assert got == [(2, "xid", "172.20.0.5", "0000:01:00", datetime(2024, 3, 2, 11, 20, 41, 7716, tzinfo=UTC)),
                   (3, "gpu_fell_off_bus", "172.20.0.5", "0000:01:00", datetime(2024, 3, 2, 11, 20, 41, 7820, tzinfo=UTC))]
    assert kernel.sniff("kern:    info: [2024-03-02T11:04:12.491238012Z]: usb 1-1: new device\n") > 0.5


def test_wall_broadcast_headers_name_the_host_of_the_record_under_them() -> None:
    """rsyslog's RSYSLOG_WallFmt (`Message from syslogd@HOST at ...`, the record on the next line) and
    journald's ForwardToWall (`Broadcast message from systemd-journald@HOST (...):`, a blank line, then
    `kernel[pid]: ...`) as a terminal shows them: the record is read and takes the header's host."""
    ex = run("Message from syslogd@badass at Apr  3 04:50:06 ...\n"
             " kernel:[2615390.401038] watchdog: BUG: soft lockup - CPU#20 stuck for 23s! [pytest:3756011]\n"
             "\n"
             "Broadcast message from systemd-journald@gpu-node-3 (Fri 2022-05-06 09:51:02 UTC):\n"
             "\n"
             "kernel[304]: [  224.240838] Kernel panic - not syncing: Fatal exception\n"
             "[  225.000000] watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [python:77]\n")
    got = [(e["line_no"], e["kind"], e["host"]) for e in ev(ex)]
    assert (2, "kernel_lockup", "badass") in got and (6, "kernel_panic", "gpu-node-3") in got
    assert (7, "kernel_lockup", None) in got  # a record under no header keeps no host


def test_wall_header_host_yields_to_a_wrapper_host_and_stays_in_its_file() -> None:
    lines = frame("Message from syslogd@badass at Apr  3 04:50:06 ...\n"
                  " kernel:[2615390.401038] watchdog: BUG: soft lockup - CPU#20 stuck for 23s! [pytest:3756011]\n"
                  " kernel:[2615390.401038] watchdog: BUG: soft lockup - CPU#20 stuck for 23s! [pytest:3756011]\n")
    lines = lines.with_columns(pl.Series("prefix_host", [None, None, "n9"], dtype=pl.Utf8),
                               pl.Series("hint_host", [None, None, None], dtype=pl.Utf8),
                               pl.Series("hint_rank", [None, None, None], dtype=pl.Int64),
                               pl.Series("hint_file", [0, 0, 1]))
    got = {e["line_no"]: e["host"] for e in kernel.parse(lines, ParseContext(path="", batched=True)).events
           .iter_rows(named=True)}
    assert got == {2: "badass", 3: "n9"}


def test_amdgpu_records_by_code() -> None:
    """The amdgpu driver's fault / hang / RAS / reset records (parsers/kernel.py AMDGPU_CODES) in the formats the
    driver versions print: one event per record, code the record, the GPU's PCI address; the page-fault block's
    decoded lines and the ACA bank dump are its continuation, claimed but no event."""
    ex = run(
        "[ 4778.915423] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)\n"
        "[ 4778.916081] amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12924)\n"
        "[ 4778.916571] amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)\n"
        "[ 4778.917054] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031\n"
        "[ 4778.917532] amdgpu 0000:c6:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)\n"
        "[ 4778.918012] amdgpu 0000:c6:00.0: amdgpu: \t MORE_FAULTS: 0x1\n"
        "[ 5071.443221] amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32772)\n"
        "[ 5071.443234] amdgpu 0000:c2:00.0: amdgpu:  Process python pid 15426 thread python pid 15426\n"
        "[ 5072.1] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=159760, emitted seq=159762\n"
        "[ 5072.2] amdgpu 0000:03:00.0: amdgpu: ring comp_1.1.0 timeout, signaled seq=7, emitted seq=9\n"
        "[ 5073.1] amdgpu 0000:68:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!\n"
        "[ 5073.2] amdgpu 0000:9e:00.0: {1}[Hardware Error]: Accelerator Check Architecture events logged\n"
        "[ 5073.3] amdgpu 0000:9e:00.0: {1}[Hardware Error]: aca entry[00].STATUS=0x98000800003e0000\n"
        "[ 5074.1] amdgpu 0000:05:00.0: amdgpu: socket: 0, die: 1, 2 new uncorrectable hardware errors detected in umc block\n"
        "[ 5074.2] amdgpu 0000:05:00.0: amdgpu: 12 correctable hardware errors detected in umc block\n"
        "[ 5075.1] amdgpu 0000:03:00.0: amdgpu: GPU mode1 reset failed\n"
        "[ 5075.2] [drm:psp_resume [amdgpu]] *ERROR* PSP resume failed\n"
        "[ 5075.3] [drm:amdgpu_device_fw_loading [amdgpu]] *ERROR* resume of IP block <psp> failed -62\n"
        "[ 5076.1] amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE\n"
        "[ 5076.2] [drm:mes_v11_0_submit_pkt_and_poll_completion.constprop.0 [amdgpu]] *ERROR* MES failed to response msg=3\n"
        "[ 5077.1] amdgpu 0000:04:00.0: device lost from bus!\n"
        "[ 5078.1] amdgpu 0000:2f:00.0: amdgpu: GPU reset begin!\n"
        "[ 5078.2] amdgpu 0000:2f:00.0: amdgpu: GPU reset(2) succeeded!\n"
        "[ 5078.3] [drm] VRAM is lost due to GPU reset!\n"
        "[ 5079.1] amdgpu 0000:2f:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0\n")
    assert [(e["line_no"], e["code"], e["pci_bus_id"]) for e in ev(ex, "amdgpu")] == [
        (1, "PAGE_FAULT", "0000:c6:00"), (7, "PAGE_FAULT", "0000:c2:00"), (9, "RING_TIMEOUT", None),
        (10, "RING_TIMEOUT", "0000:03:00"), (11, "RAS_UE", "0000:68:00"), (12, "ACA_LOGGED", "0000:9e:00"),
        (14, "RAS_UE_UMC", "0000:05:00"), (15, "RAS_CE", "0000:05:00"), (16, "RESET_FAILED", "0000:03:00"),
        (17, "RESET_FAILED", None), (18, "RESET_FAILED", None), (19, "MES_FAILED", "0000:c5:00"),
        (20, "MES_FAILED", None), (21, "GPU_LOST", "0000:04:00"), (22, "GPU_RESET", "0000:2f:00"),
        (23, "GPU_RESET", "0000:2f:00"), (24, "GPU_RESET", None)]
    assert {e["code"]: e["severity"] for e in ev(ex, "amdgpu")} == {
        "PAGE_FAULT": "error", "RING_TIMEOUT": "error", "RAS_UE": "critical", "ACA_LOGGED": "warning",
        "RAS_UE_UMC": "critical", "RAS_CE": "warning", "RESET_FAILED": "critical", "MES_FAILED": "error",
        "GPU_LOST": "critical", "GPU_RESET": "warning"}
    # the page-fault blocks' detail lines and the ACA bank line are claimed as the records' continuation
    assert {2, 3, 4, 5, 6, 8, 13} <= set(ex.claimed.to_list())
    assert 25 not in set(ex.events["line_no"].to_list())


# ---- a hung task's call trace through a network / FUSE filesystem client: hung_task_fs ------------
# whamcloud/integrated-manager-for-lustre#329 (a Lustre client thread, x86 frames with their modules)
HUNG_LUSTRE = """[ 3600.832490] INFO: task ll_cfg_requeue:4037 blocked for more than 120 seconds.
[ 3600.834247] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.
[ 3600.835946] ll_cfg_requeue  D 0000000000000001     0  4037      2 0x00000080
[ 3600.843176] Call Trace:
[ 3600.844367]  [<ffffffff816a94c9>] schedule+0x29/0x70
[ 3600.845770]  [<ffffffff816a6fd9>] schedule_timeout+0x239/0x2c0
[ 3600.848761]  [<ffffffff816a987d>] wait_for_completion+0xfd/0x140
[ 3600.851751]  [<ffffffffc05523b4>] llog_process_or_fork+0x244/0x450 [obdclass]
[ 3600.853517]  [<ffffffffc05525d4>] llog_process+0x14/0x20 [obdclass]
[ 3600.856750]  [<ffffffffc0fff5a8>] mgc_process_cfg_log+0x788/0xc40 [mgc]
"""
# raspberrypi/linux#2482 (an NFS client on ARM: `(caller) from (callee+off/len)` frames)
HUNG_NFS_ARM = """[ 3438.580109] INFO: task objcopy:24916 blocked for more than 120 seconds.
[ 3438.583905]       Tainted: G         C      4.14.31-1-ARCH #1
[ 3438.587697] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.
[ 3438.595231] objcopy         D    0 24916  24912 0x00000000
[ 3438.599109] [<80a87848>] (__schedule) from [<80a88018>] (schedule+0x3c/0xa0)
[ 3438.603019] [<80a88018>] (schedule) from [<8015c138>] (io_schedule+0x14/0x3c)
[ 3438.606896] [<8015c138>] (io_schedule) from [<80230be4>] (wait_on_page_bit+0x110/0x15c)
[ 3438.614435] [<80230be4>] (wait_on_page_bit) from [<80230d0c>] (__filemap_fdatawait_range+0xdc/0x128)
[ 3438.622018] [<80230d0c>] (__filemap_fdatawait_range) from [<80233190>] (filemap_write_and_wait_range+0x54/0x88)
[ 3438.629666] [<80233190>] (filemap_write_and_wait_range) from [<803db1c4>] (nfs_file_fsync+0x30/0x280)
"""
# aws/aws-parallelcluster#1150 (syslog): the NFS frames end the trace of the task before this one
NFS_FRAMES_THEN_HUNG = """Jun 17 20:18:09 ip-172-31-27-211 kernel: [<ffffffffa12761ae>] vfs_fsync+0x2e/0x40
Jun 17 20:18:09 ip-172-31-27-211 kernel: [<ffffffffc08f1b66>] nfs_file_flush+0x46/0x60 [nfs]
Jun 17 20:18:09 ip-172-31-27-211 kernel: [<ffffffffa123ec67>] filp_close+0x37/0x90
Jun 17 20:18:09 ip-172-31-27-211 kernel: INFO: task strat1_sim:80601 blocked for more than 120 seconds.
Jun 17 20:18:09 ip-172-31-27-211 kernel: "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.
"""
# openzfs/zfs#6332: a local ZFS pool's thread (spl / zfs frames): no network filesystem
HUNG_ZFS = """[ 6242.256995] INFO: task txg_quiesce:32802 blocked for more than 120 seconds.
[ 6242.257000] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.
[ 6242.257021] Call Trace:
[ 6242.257037]  [<ffffffff8168c8f9>] schedule+0x29/0x70
[ 6242.257070]  [<ffffffffa027e36d>] cv_wait_common+0x10d/0x130 [spl]
[ 6242.257174]  [<ffffffffa17b4973>] txg_quiesce_thread+0x2a3/0x3a0 [zfs]
"""


@pytest.mark.parametrize("text,line,fs,pid", [(HUNG_LUSTRE, 8, "lustre", 4037), (HUNG_NFS_ARM, 10, "nfs", 24916)])
def test_a_hung_task_waiting_in_a_network_filesystem_client(text: str, line: int, fs: str, pid: int) -> None:
    ex = run(text)
    check_contract(ex, text.count("\n"))
    assert [(e["line_no"], e["code"]) for e in ev(ex, "hung_task")] == [(1, text.split("task ")[1].split(":")[0])]
    got = ev(ex, "hung_task_fs")
    assert [(e["line_no"], e["code"], e["pid"], e["severity"]) for e in got] == [(line, fs, pid, "error")]


@pytest.mark.parametrize("text", [NFS_FRAMES_THEN_HUNG, HUNG_ZFS])
def test_no_hung_task_fs_without_a_network_filesystem_frame_in_its_own_trace(text: str) -> None:
    ex = run(text)
    assert len(ev(ex, "hung_task")) == 1 and ev(ex, "hung_task_fs") == []


def test_hung_task_fs_frames_stay_in_their_file_and_record() -> None:
    # the second hung task's trace shows no filesystem frame; the first's does, once
    text = HUNG_NFS_ARM + HUNG_NFS_ARM.replace("nfs_file_fsync+0x30/0x280", "vfs_fsync+0x24/0x2c").replace(
        "3438.", "3560.")
    ex = run(text)
    assert [e["line_no"] for e in ev(ex, "hung_task")] == [1, 11]
    assert [e["line_no"] for e in ev(ex, "hung_task_fs")] == [10]
