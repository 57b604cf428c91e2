"""Tests for parsers.nvrx: each NVRx / Megatron straggler family becomes its event kind, with the rank
and host its prefix or message names (docs/nvrx.md), and cut lines are not misread."""
from __future__ import annotations

from pathlib import Path

from parsers import nvrx
from parsers.lines import decode_lines, with_body
from parsers.records import ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nvrx" / "families.log"


def _parse(text: str):  # noqa: ANN202
    return nvrx.parse(with_body(decode_lines(text.encode()).lines), ParseContext(path="x.log"))


def test_families_fixture() -> None:
    ev = nvrx.parse(with_body(decode_lines(FIX.read_bytes()).lines), ParseContext(path="families.log")).events
    got = [(r["kind"], r["code"], r["host"], r["rank"]) for r in ev.iter_rows(named=True)]
    assert got[:4] == [("ft_timeout", "heartbeat", None, 34), ("ft_timeout", "heartbeat_initial", "node-03", 0),
                       ("ft_timeout", "section", "node-07", 3), ("ft_timeout", "out_of_section", "node-11", 12)]
    assert ("ft_unhealthy", "gpu", "node-11", None) in got
    assert ("ft_rendezvous", "max_nodes_exceeded", None, None) in got
    assert ("inprocess_interruption", "HARD_TIMEOUT", None, 5) in got
    assert ("straggler_flagged", "relative", "node-02", 5) in got
    assert {k for k, *_ in got} == set(nvrx.SPEC.kinds)
    assert ev.filter(ev["kind"] == "ft_timeout")["ts"].null_count() == 1  # the first era prints no time


def test_prefixes_are_stripped_before_the_rules() -> None:
    ev = _parse("[default3]:[2025-01-07 02:00:00,100] [WARNING] [RankMonServer9@n-1:3] Did not get subsequent "
                "heartbeat. Waited 15.00 seconds.\n"
                "7: rank=7 fn_ex: RuntimeError('CUDA error: an illegal memory access was encountered')\n").events
    assert ev["kind"].to_list() == ["ft_timeout", "inprocess_exception"]
    assert ev["rank"].to_list() == [3, 7] and ev["code"].to_list()[1] == "RuntimeError"


def test_cut_lines_are_not_read_as_the_family() -> None:
    ex = _parse("[WARNING] [RankMonitorServer:3] Did not get subsequent heart\n"
                "STRAGGLER DETECTION WARNING: Some GPUs have worse relative perf\n"
                "rank=0 term_ex: RankShouldRestart('Interruption.HARD_TIM\n")
    assert ex.events.is_empty()


def test_restart_witnesses() -> None:
    ev = _parse("[default] Joining cluster restart (group_rank=3)\n"
                "2/3 restart attempts left; restarting worker group...\n"
                "[default] Worker group UNHEALTHY. 2/3 attempts left; will restart worker group\n"
                "rank=0 restart_ex: HealthCheckPassed() <- RankShouldRestart('x')\n").events
    assert ev["kind"].to_list() == ["restart"] * 4


def test_sniff() -> None:
    assert nvrx.sniff("Did not get subsequent heartbeat. Waited 1.00 seconds.") > 0
    assert nvrx.sniff("iteration 10/100 | loss 1.0") == 0.0
