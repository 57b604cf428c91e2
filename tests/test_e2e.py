"""End to end: every bundled scenario is simulated, analyzed, and checked against its truth."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from datetime import datetime
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml"))
E2E_SEED = 101  # not a seed the simulator tests or the demo use


def _case(tmp: Path, scenario: Path, seed: int = E2E_SEED) -> tuple[Path, dict]:
    case = simulate(load_scenario(scenario), tmp / scenario.stem, seed)
    return case, tomllib.loads((case / "expected.toml").read_text())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_scenario_verdict_culprit_and_downtime(tmp_path: Path, scenario: Path, downtime_holds, primary) -> None:
    case, exp = _case(tmp_path, scenario)
    rep = analyze(case / "job", tmp_path / "out", html=False).report
    # downtime (DESIGN §7): every bucket within max(30 s, 1 % of wall), goodput within 0.01
    d, truth = rep["downtime"], exp["downtime"]
    downtime_holds(d, truth)
    assert abs(sum(d[k] for k in d if k.endswith("_s") and k != "wall_s") - d["wall_s"]) < 1e-6 * max(1.0, d["wall_s"])
    want, got = primary(exp, rep)
    assert got["kind"] == want["kind"], (got["summary"], got.get("evidence"))
    if want["kind"] != "completed":
        assert got["category"] == want["category"], got["summary"]
    if want.get("culprit_host"):
        assert got["culprit"]["host"] == want["culprit_host"], got["summary"]
    if got["kind"] not in ("completed",):
        assert got["evidence"] or got["kind"] == "slowdown", "a verdict must cite its evidence"
        for e in got["evidence"]:
            path = case / "job" / e["path"]
            lines = path.read_text(errors="replace").split("\n")
            assert e["text"].strip() and e["text"].strip() in lines[e["line"] - 1]


def test_line_accounting_and_sources_command(tmp_path: Path) -> None:
    case, _ = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml")
    job = case / "job"
    rep = analyze(job, tmp_path / "out").report
    assert rep["sources"]
    for s in rep["sources"]:
        data = (job / s["path"]).read_bytes()
        n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        assert s["lines"] == n, s["path"]
        assert s["lines"] == s["parsed"] + s["ignored"] + s["unparsed"], s["path"]
    by_parser = {s["parser"] for s in rep["sources"]}
    assert {"kernel", "dcgm", "sacct", "nccl", "elastic"} <= by_parser
    r = subprocess.run([sys.executable, "-m", "forensics.cli", "sources", str(job), "--json", "-"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    listed = {s["path"]: s for s in json.loads(r.stdout)["sources"]}
    for s in rep["sources"]:
        got = listed[s["path"]]
        assert (got["parser"], got["lines"], got["parsed"], got["ignored"], got["unparsed"]) == (
            s["parser"], s["lines"], s["parsed"], s["ignored"], s["unparsed"])
    table = subprocess.run([sys.executable, "-m", "forensics.cli", "sources", str(job)],
                           capture_output=True, text=True, timeout=300)
    assert table.returncode == 0 and "unparsed" in table.stdout and "kernel" in table.stdout


def test_same_input_same_report(tmp_path: Path) -> None:
    case, _ = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "ib_link_error.toml")
    a = analyze(case / "job", tmp_path / "o1").report
    b = analyze(case / "job", tmp_path / "o2").report
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (tmp_path / "o1" / "report.md").read_text() == (tmp_path / "o2" / "report.md").read_text()


STAMPS = (  # the leading stamps of the simulated files: Megatron/NCCL WARN, DCGM CSV, dmesg -T, glog (torchrun)
    (re.compile(r"^\s*\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), "%Y-%m-%d %H:%M:%S"),
    (re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z"), "%Y-%m-%dT%H:%M:%S"),
    (re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]"), "%a %b %d %H:%M:%S %Y"),
    (re.compile(r"^[IWEF](\d{4} \d\d:\d\d:\d\d)"), "%m%d %H:%M:%S"),
)


def _collected_at(src: Path, dst: Path, cutoff: datetime) -> None:
    """The bundle a person collects from a job still running at `cutoff`: every file up to its first
    line stamped later; no scheduler accounting yet (sacct is written when the job ends)."""
    for f in sorted(src.rglob("*")):
        if not f.is_file() or "slurm" in f.relative_to(src).parts:
            continue
        kept = []
        for line in f.read_text().split("\n"):
            t = next((datetime.strptime(m.group(1), fmt) for rx, fmt in STAMPS if (m := rx.match(line))), None)
            if t is not None and t.replace(year=cutoff.year) > cutoff:
                break
            kept.append(line)
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(kept))


def test_healthy_job_collected_mid_run_is_none(tmp_path: Path) -> None:
    """Steps, NCCL init, a benign Xid 63 and DCGM samples, no end line: no interruption, verdict `none`
    (it was `unknown · investigate` with an interruption that said nothing)."""
    case, _ = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "healthy.toml")
    job = tmp_path / "collected"
    _collected_at(case / "job", job, datetime(2026, 11, 2, 8, 40))
    assert "Xid (PCI:0000:5d:00): 63" in (job / "nodes" / "node-001" / "dmesg.log").read_text()
    a = analyze(job, tmp_path / "out")
    rep = a.report
    v = rep["verdict"]
    assert (v["kind"], v["category"], v["action"], v["auto_recoverable"]) == ("none", None, "none", True)
    assert v["culprit"] == {"host": None, "rank": None, "gpu": None, "pci_bus_id": None} and v["drain"] == []
    assert rep["interruptions"] == []
    parsers = {s["parser"] for s in rep["sources"]}
    assert {"steps", "nccl", "kernel", "dcgm"} <= parsers
    assert v["summary"].startswith("No interruption found in the sources read (")
    for p in ("steps", "nccl", "kernel", "dcgm"):
        assert f" {p}" in v["summary"], v["summary"]
    assert 0 < rep["attempts"][0]["last_step"] < 2000
    assert any(e["kind"] == "xid" and e["code"] == "63" for e in a.events.iter_rows(named=True))
    page = (a.out_dir / "report.html").read_text()
    card = page.split('<section id="verdict"', 1)[1].split("</section>", 1)[0]
    assert 'class="none"' in card and "none: no interruption found" in card and "Culprit" not in card


def _repeated(tmp: Path, scenario: str, attempts: int) -> dict:
    """The scenario's fault in each of the first `attempts` attempts, two restarts allowed."""
    sc = load_scenario(ROOT / "fixtures" / "scenarios" / f"{scenario}.toml")
    sc["job"]["max_restarts"] = 2
    sc["faults"] = [{**sc["faults"][0], "attempt": k} for k in range(attempts)]
    case = simulate(sc, tmp / scenario, E2E_SEED)
    return analyze(case / "job", tmp / f"{scenario}-out", html=False).report


def test_recurrence_marks_only_the_repeats(tmp_path: Path) -> None:
    rep = _repeated(tmp_path, "ib_link_error", 2)
    xs = [x for x in rep["interruptions"] if x["kind"] != "slowdown"]
    assert [x["attempt"] for x in xs] == [0, 1]
    assert xs[0]["culprit"]["host"] == xs[1]["culprit"]["host"] is not None
    assert (xs[0]["recurring"], xs[0]["action"]) == (False, "restart")  # the first occurrence keeps its action
    assert (xs[1]["recurring"], xs[1]["action"]) == (True, "exclude_node_and_restart")
    v = rep["verdict"]  # completed on the third attempt; the repeat names the node to drain
    assert v["kind"] == "completed" and v["culprit"]["host"] == xs[1]["culprit"]["host"]
    assert [d["interruption"] for d in v["drain"]] == [xs[1]["id"]]

    rep = _repeated(tmp_path, "user_exception", 3)  # the restart loop ends the job
    xs = rep["interruptions"]
    assert [(x["attempt"], x["category"], x["recurring"]) for x in xs] == [
        (0, "user_code", False), (1, "user_code", True), (2, "user_code", True)]
    assert rep["verdict"]["id"] == xs[2]["id"] and rep["verdict"]["recurring"]


def test_culprit_graph_names_the_host_that_reports_many_peers(tmp_path: Path) -> None:
    """ib_link_many_peers: node-002's link dies and its kernel log does not show it; its own ranks
    report completion errors with peers on every other node, and its two ring neighbours report
    it. The host with many distinct peers is named, not one of the peers it names."""
    case, exp = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "ib_link_many_peers.toml")
    rep = analyze(case / "job", tmp_path / "out", html=False).report
    (x,) = [i for i in rep["interruptions"] if i["kind"] != "slowdown"]
    want = exp["interruptions"][0]["culprit_host"]
    assert x["category"] == "network_fabric"
    assert x["culprit"]["host"] == want == "node-002", x["summary"]
    assert f"culprit {want}: it reports failures with 5 distinct peers" in x["summary"]
    # the evidence cites the culprit's own reports as well as its peers'
    job = case / "job"
    texts = [(job / e["path"]).read_text().split("\n")[e["line"] - 1] for e in x["evidence"]]
    assert any(want in t for t in texts), texts


def test_culprit_graph_names_the_host_its_peers_report(tmp_path: Path) -> None:
    """gpu_lost_peers_report: a GPU of node-002 falls off the bus and the node's kernel log was lost
    in the reboot; the ranks of node-001 and node-003 report IB errors naming node-002's address.
    node-002 is named, and the summary says which rule decided."""
    case, exp = _case(tmp_path, ROOT / "fixtures" / "scenarios" / "gpu_lost_peers_report.toml")
    rep = analyze(case / "job", tmp_path / "out", html=False).report
    (x,) = [i for i in rep["interruptions"] if i["kind"] != "slowdown"]
    want = exp["interruptions"][0]["culprit_host"]
    assert (x["kind"], x["category"]) == ("hang", "comm_hang_unknown")
    assert x["culprit"]["host"] == want == "node-002", x["summary"]
    assert f"culprit {want}: 2 hosts report it (node-001, node-003)" in x["summary"]
    assert rep["verdict"]["kind"] == "completed"


def test_nvidia_smi_query_csv_monitor_names_the_lost_gpu(tmp_path: Path) -> None:
    # a GPU monitor left running in the job (`nvidia-smi --query-gpu=... --format=csv -l 1`) beside a
    # healthy one: the lost GPU's first `[GPU is lost]` row is the evidence, with its node and index
    job = tmp_path / "job"
    (job / "node-003").mkdir(parents=True)
    (job / "node-003" / "gpu-monitor.csv").write_bytes((ROOT / "fixtures" / "nvsmi" / "query_csv_units.csv").read_bytes())
    (job / "node-004").mkdir()
    (job / "node-004" / "gpu-monitor.csv").write_bytes(
        (ROOT / "fixtures" / "nvsmi" / "query_csv_mindminer627_unknown_error_one_field.csv").read_bytes())
    rep = analyze(job, tmp_path / "out", html=False).report
    v = rep["verdict"]
    assert (v["category"], v["culprit"]["host"], v["culprit"]["gpu"]) == ("gpu_lost", "node-003", 1)
    assert v["evidence"][0]["path"] == "node-003/gpu-monitor.csv" and v["evidence"][0]["line"] == 9
