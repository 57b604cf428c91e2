"""parsers/ibstat.py on the fixtures (shapes from rdma-core's ibstat.c): which ports are events,
their state and physical state, every line accounted for, and the sniff."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers import ibstat
from parsers.lines import decode_lines, with_body
from parsers.records import ParseContext

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ibstat"


def _parse(name: str, host: str | None = "node-07"):  # noqa: ANN202
    lines = with_body(decode_lines((FIX / name).read_bytes()).lines)
    return lines, ibstat.parse(lines, ParseContext(path=name, host_hint=host))


def test_down_and_initializing_ports_are_events_and_active_ports_are_not() -> None:
    lines, ext = _parse("ibstat_hdr_node.txt")
    rows = ext.events.select("line_no", "kind", "host", "severity", "code", "ts", "ts_quality").rows()
    assert rows == [(26, "ib_port_state", "node-07", "error", "Polling", None, "missing"),
                    (60, "ib_port_state", "node-07", "warning", "LinkUp", None, "missing")]
    text = dict(zip(lines["line_no"], lines["text"], strict=True))
    assert text[26] == "\t\tState: Down" and text[27] == "\t\tPhysical state: Polling"
    assert text[18] == "CA 'mlx5_1'"  # the Down port belongs to the second device
    assert ext.events["message"].to_list() == ["\t\tState: Down", "\t\tState: Initializing"]


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.txt")))
def test_every_line_is_claimed_or_ignored_once(name: str) -> None:
    lines, ext = _parse(name)
    claimed, ignored = set(ext.claimed.to_list()), set(ext.ignored.to_list())
    assert not claimed & ignored
    assert claimed | ignored == set(lines["line_no"].to_list())
    per_event = (0,) if name.startswith("rdma_link") else (0, 1)  # rdma: one line; ibstat: State + Physical state
    assert claimed == {e + d for e in ext.events["line_no"].to_list() for d in per_event}


def test_a_healthy_host_gives_no_event() -> None:
    _, ext = _parse("ibstat_ndr_healthy.txt")
    assert ext.events.is_empty() and ext.claimed.len() == 0


def test_the_single_port_form_without_indentation() -> None:
    _, ext = _parse("ibstat_one_port_disabled.txt", host=None)
    assert ext.events.select("line_no", "severity", "code", "host", "message").rows() == [
        (3, "error", "Disabled", None, "State: Down")]


def test_rdma_link_show_ports_not_active_or_not_link_up() -> None:
    _, ext = _parse("rdma_link_show.txt")
    assert ext.events.select("line_no", "kind", "host", "severity", "code", "ts_quality").rows() == [
        (2, "ib_port_state", "node-07", "error", "POLLING", "missing"),
        (3, "ib_port_state", "node-07", "warning", "LINK_UP", "missing"),
        (5, "ib_port_state", "node-07", "error", "DISABLED", "missing")]
    _, old = _parse("rdma_link_show_old.txt")
    assert old.events.select("line_no", "severity", "code").rows() == [(2, "error", "LINK_ERROR_RECOVER")]


def test_sniff() -> None:
    for f in FIX.glob("*.txt"):
        assert ibstat.sniff(f.read_text(encoding="utf-8")) == 0.95, f.name
    assert ibstat.sniff("State: Down\nPhysical state: Polling\n") == 0.0  # no device header
    assert ibstat.sniff("[  12.5] mlx5_core 0000:3b:00.0: Port module event: module 0, Cable unplugged\n") == 0.0
    nccl = "node-07:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.7<0>\n"
    assert ibstat.sniff(nccl) == 0.0
    # `rdma link` lines are the file only when they are most of it
    rdma = (FIX / "rdma_link_show.txt").read_text(encoding="utf-8")
    assert ibstat.sniff(rdma.splitlines()[1] + "\n" + nccl * 3) == 0.0
