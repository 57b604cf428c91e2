"""The NVRx / Megatron straggler-detector cases of fixtures/fresh/nvrx (sources, conclusions and which
are constructed in its README.md), analyzed end to end, and the message families of docs/nvrx.md in
variants beyond those cases (other versions' wordings, launcher prefixes, cut lines)."""
from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze

FRESH = Path(__file__).resolve().parents[1] / "fixtures" / "fresh" / "nvrx"

# case -> (verdict kind or "none", category, deciding signature, culprit (host, rank) or None where the
# source names no single one, auto_recoverable or None where the source states none, stragglers (host, rank))
CASES: dict[str, tuple] = {
    "nvrx348-ft-rendezvous-max-nodes-exceeded-hot-spare": (
        "crash", "framework_bug", "nvrx-rdzv-max-nodes-exceeded", None, False, []),
    "nemodocs-ft-heartbeat-hang-two-ranks": ("hang", "comm_hang_unknown", "nvrx-ft-heartbeat-timeout", None, True, []),
    "nemodocs-straggler-scores-512-healthy": ("none", None, None, None, None, []),
    "megatron-readme-straggler-minmax-healthy": ("none", None, None, None, None, []),
    "constructed-ptl-straggler-warning-rank5": (
        "slowdown", "straggler_hardware", "nvrx-straggler-flagged", ("node-02", 5), True, [("node-02", 5)]),
}

# cases whose log ends at the restart: the verdict (the last attempt's outcome) is unknown, and the
# interruption the restart answers is asserted instead: (kind, category, signature, culprit, restart)
RESTARTED = {
    "constructed-ft-section-timeout-rank-monitor": ("hang", "comm_hang_unknown", "nvrx-ft-section-timeout",
                                                    ("node-07", 3), True),
    "constructed-inprocess-hard-timeout-rank5": ("hang", "comm_hang_unknown", "nvrx-inprocess-timeout", (None, 5), True),
}


def test_every_fixture_dir_has_a_case() -> None:
    assert sorted(p.name for p in FRESH.iterdir() if p.is_dir()) == sorted([*CASES, *RESTARTED])


@pytest.mark.parametrize("case", sorted(CASES))
def test_fresh_nvrx_verdict(case: str, tmp_path: Path) -> None:
    kind, category, signature, culprit, restart, stragglers = CASES[case]
    rep = analyze(FRESH / case, tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert [(s["host"], s["rank"]) for s in rep["stragglers"]] == stragglers
    if kind == "none":
        assert (v["kind"], v["action"], v["culprit"]["host"]) == ("none", "none", None)
        return
    assert (v["kind"], v["category"], v["evidence"][0]["signature"]) == (kind, category, signature)
    if culprit is not None:
        assert (v["culprit"]["host"], v["culprit"]["rank"]) == culprit
    if restart is not None:
        assert v["auto_recoverable"] is restart


@pytest.mark.parametrize("case", sorted(RESTARTED))
def test_fresh_nvrx_restarted_interruption(case: str, tmp_path: Path) -> None:
    kind, category, signature, culprit, restart = RESTARTED[case]
    rep = analyze(FRESH / case, tmp_path / "out", html=False).report
    assert len(rep["attempts"]) == 2  # the restart line is an attempt boundary
    first = next(i for i in rep["interruptions"] if i["attempt"] == 0)
    assert (first["kind"], first["category"], first["evidence"][0]["signature"]) == (kind, category, signature)
    assert (first["culprit"]["host"], first["culprit"]["rank"]) == culprit
    assert first["auto_recoverable"] is restart


@pytest.mark.xfail(strict=True, reason=(
    "the two-rank heartbeat hang names ranks 34 and 58; the analyzer takes the first rank monitor's rank "
    "as the culprit (34) where the source names no single one"))
def test_two_rank_hang_has_no_single_culprit(tmp_path: Path) -> None:
    v = analyze(FRESH / "nemodocs-ft-heartbeat-hang-two-ranks", tmp_path / "out", html=False).report["verdict"]
    assert v["culprit"]["rank"] is None


def _verdict(tmp_path: Path, text: str) -> dict:
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.log").write_text(text)
    return analyze(job, tmp_path / "out", html=False).report


# rank-monitor timeouts in each prefix era and behind launcher wrappers (rank_monitor_server.py,
# v0.1.3:204/212, v0.4.0:72/394/402/416/426, HEAD:487/497/522/539; the nvrx logger, log_manager.py:274)
FT_TIMEOUTS = {
    "old-prefix-srun": ("12: [WARNING] [RankMonitorServer:12] Did not get subsequent heartbeat. Waited 60.00 seconds.\n",
                        "nvrx-ft-heartbeat-timeout", None, 12),
    "rmlogger-initial": ("[2025-01-07 02:00:00,100] [WARNING] [RankMonServer901@gpu-a-17:40] Did not get initial "
                         "heartbeat. Waited 3600.00 seconds.\n", "nvrx-ft-heartbeat-timeout", "gpu-a-17", 40),
    "rmlogger-cycle-section": ("[2026-02-01 05:00:00,000] [WARNING] [RankMonServer77@dgx-b200-003:9] [Cycle 3] Section "
                               "'checkpointing' has been open for 1900.22 seconds. Timeout is 1800.00 seconds.\n",
                               "nvrx-ft-section-timeout", "dgx-b200-003", 9),
    "nvrx-logger-out-of-section": ("2026-06-01 09:00:01,250 [WARNING] [node-11] [workload:12(4) infra:12(4)] "
                                   "rank_monitor_server.py:522 [Cycle 2] Was out of section for 905.10 seconds. "
                                   "Timeout is 900.00 seconds.\n", "nvrx-ft-section-timeout", "node-11", 12),
    "torchrun-tag": ("[default0]:[2025-01-07 02:00:00,100] [WARNING] [RankMonServer901@gpu-a-17:0] Did not get "
                     "subsequent heartbeat. Waited 15.00 seconds.\n", "nvrx-ft-heartbeat-timeout", "gpu-a-17", 0),
}


@pytest.mark.parametrize("variant", sorted(FT_TIMEOUTS))
def test_ft_timeout_family(variant: str, tmp_path: Path) -> None:
    text, sig, host, rank = FT_TIMEOUTS[variant]
    v = _verdict(tmp_path, text)["verdict"]
    assert (v["kind"], v["category"], v["evidence"][0]["signature"]) == ("hang", "comm_hang_unknown", sig)
    assert (v["culprit"]["host"], v["culprit"]["rank"]) == (host, rank)


def test_ft_timeout_yields_to_a_root_cause(tmp_path: Path) -> None:
    """The rank monitor's timeout is hang evidence, not a cause: an earlier real root (here a CUDA
    error on the same rank) decides the category."""
    rep = _verdict(tmp_path, (
        "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[2025-03-02 12:10:44,918] [WARNING] [RankMonServer2211@node-07:3] Section 'step' has been open for "
        "612.34 seconds. Timeout is 600.00 seconds.\n"))
    assert rep["verdict"]["category"] != "comm_hang_unknown"


# node health checks (ft_rendezvous_barrier.py:2618 `_run_health_check`, health_check.py:415-435, 843, 970)
HEALTH = {
    "gpu-node": ("2026-06-01 09:01:00,002 [ERROR] [node-11] [workload:None(None) infra:1(0)] ft_rendezvous_barrier.py:2618 "
                 "GPU health check failed for node node-11: Node node-11 has an unhealthy GPU.\n",
                 "gpu_other_hardware", "node-11"),
    "gpu-recovery-action": ("[2025-09-01 10:00:00,000] [WARNING] [RankMonServer5@h100-b-02:3] GPU 3: Requires a reset "
                            "to recover. Terminate GPU processes and reset the GPU.\n", "gpu_other_hardware", "h100-b-02"),
    "nic-port": ("[2025-09-01 10:00:00,000] [ERROR] [RankMonServer5@h100-b-02:1] NIC device mlx5_1: Port state changed "
                 "from ACTIVE to DOWN. Health check FAILED.\n", "network_fabric", "h100-b-02"),
    "nvlink-disabled": ("[2025-09-01 10:00:00,000] [WARNING] [RankMonServer5@h100-b-02:6] GPU 6: NVL link 11 is in "
                        "DISABLED state\n", "nvlink", "h100-b-02"),
    "storage": ("Storage health check failed for node nid004211: Node nid004211 has unhealthy storage state.\n",
                "storage", "nid004211"),
}


@pytest.mark.parametrize("variant", sorted(HEALTH))
def test_health_check_family(variant: str, tmp_path: Path) -> None:
    text, category, host = HEALTH[variant]
    v = _verdict(tmp_path, text)["verdict"]
    assert (v["category"], v["culprit"]["host"]) == (category, host)


# in-process restart interruption records in their three eras (inprocess/attribution.py: v0.2.0:55
# `on ranks=[..]`, v0.3.0:56 `on ranks={..}`, HEAD:55 `affecting ranks {..}`), the log_exc line with
# and without its timestamp (inprocess/utils.py HEAD:154, v0.3.0:46)
INPROC = {
    "v02-list": ("rank=2 term_ex: RankShouldRestart('Interruption.HARD_TIMEOUT on ranks=[7]') <- "
                 "RuntimeError('x')\n", 7),
    "v03-set": ("rank=2 term_ex: RankShouldRestart('Interruption.SOFT_TIMEOUT on ranks={7}')\n", 7),
    "head-brief-many": ("[2025-05-20 03:12:40.118233] rank=0 term_ex: RankShouldRestart('Interruption.HARD_TIMEOUT "
                        "affecting ranks {0, 1, 2...61, 62 (total: 64)}')\n", None),
    "srun-prefix": ("5: [2025-05-20 03:12:40.118233] rank=5 term_ex: RankShouldRestart('Interruption.UNRESPONSIVE "
                    "affecting ranks {5}')\n", 5),
}


@pytest.mark.parametrize("variant", sorted(INPROC))
def test_inprocess_timeout_family(variant: str, tmp_path: Path) -> None:
    text, rank = INPROC[variant]
    v = _verdict(tmp_path, text)["verdict"]
    assert (v["kind"], v["category"], v["evidence"][0]["signature"]) == ("hang", "comm_hang_unknown",
                                                                          "nvrx-inprocess-timeout")
    assert v["culprit"]["rank"] == rank  # several ranks affected: no single culprit (null, not guessed)


# straggler warnings: both kinds, several ids on one line, NeMo and plain logging prefixes
# (ptl_resiliency/straggler_det_callback.py:125/129; straggler/reporting.py StragglerId)
STRAGGLERS = {
    "individual-two": ("[NeMo W 2025-04-10 08:15:02 straggler_det_callback:129] STRAGGLER DETECTION WARNING: Some GPUs "
                       "performance dropped. Affected ranks: {StragglerId(rank=9, node='nid001'), "
                       "StragglerId(rank=14, node='nid002')}\n", [("nid001", 9), ("nid002", 14)]),
    "plain-logging": ("WARNING:nemo_logger.StragglerDetectionCallback:STRAGGLER DETECTION WARNING: Some GPUs have worse "
                      "relative performance. Affected ranks: {StragglerId(rank=0, node='a100-07')}\n", [("a100-07", 0)]),
}


@pytest.mark.parametrize("variant", sorted(STRAGGLERS))
def test_straggler_warning_family(variant: str, tmp_path: Path) -> None:
    text, want = STRAGGLERS[variant]
    rep = _verdict(tmp_path, text)
    assert sorted((s["host"], s["rank"]) for s in rep["stragglers"]) == want
    assert all(s["evidence"].endswith("train.log:1") and s["slowdown"] is None for s in rep["stragglers"])
    assert rep["verdict"]["category"] == "straggler_hardware"


def test_healthy_reports_are_read_and_not_failures(tmp_path: Path) -> None:
    """A score report with no warning, and Megatron's min/max lines (with the Bottom/Top lines of
    --straggler-minmax-count > 1, megatron/core/utils.py report), are read (the file is nvrx's) and are
    no interruption."""
    rep = _verdict(tmp_path, (
        "[default0]:GPU individual performance:\n[default0]:  Rank=0 Node=n1 Score=0.99\n"
        "[default0]:  Rank=1 Node=n1 Score=0.98\n"
        "[2024-06-01 10:00:00] | MnRtt/Rnk: 1446.49ms/13 | MxRtt/Rnk: 1570.32ms/30 | MnPwr/Rnk: 617.00W/0\n"
        "^^^^ Bottom 2 Ranks with lowest  Etpt(TF): 560.82TF/30, 561.10TF/2,\n"))
    assert rep["verdict"]["kind"] == "none" and rep["stragglers"] == []
    assert [s["parser"] for s in rep["sources"]] == ["nvrx"] and rep["sources"][0]["unparsed"] == 0
