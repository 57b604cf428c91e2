"""The simulator's dialect mode (docs/simulator.md, forensics/simulate/dialects.py): the default is
byte-identical to the simulator before the mode existed, a random dialect wraps and stamps each
host's files as drawn, and the analyzer reaches the same verdict, culprit, stragglers, downtime and
attempts in random dialects as the truth says.

Every end-to-end scenario of fixtures/scenarios/ runs in three random dialects (dialect seeds 1, 2
and 3; about 120 small analyses); the attempt scenarios also have their attempts checked."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from datetime import datetime
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate
from forensics.simulate.dialects import DCGM_LAYOUTS, KERNEL_STAMPS, RANK_PREFIXES, STEP_STYLES, TABLES, draw

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "fixtures" / "scenarios"
SCENARIOS = sorted(p.stem for p in SCEN.glob("*.toml"))
SEED = 101  # the e2e seed: the default dialect of these cases passes tests/test_e2e.py

# sha256 over (relative path, NUL, bytes) of every file of the case, sorted by path, taken from the
# simulator BEFORE the dialect mode (commit a4b7198, forensics/simulate.py moved, unchanged), seed 1
PINNED = {
    "user_exception": "4aeee95f3dcf7caf9688af941e3d7bc677834e525045f275bd9fdb8ede9e6e59",  # syslog, srun, megatron
    "cuda_oom": "aba48738dac049b1d0f40c29b7f80a6d036e6e1dbc8632c5bebdf425a5629687",  # uptime, hf
    "ib_link_error": "d81142426a80c1588e12381e63ec04093a46faea3e62f1926d36628085874c4f",  # journal_iso, deepspeed
    "preemption": "14f4a7ab4bab79f5cc906d3ddcbd19c455d518d1bbe44f4ea78f5c737c444170",  # torchrun prefix, requeue
    "thermal_straggler": "86f5228b2891ce6fc310945b578f665b294f5b2efc489761bc84e0595df7b6ec",  # torchtitan, DCGM
}

ATTEMPTS = ("requeue_append", "step_retry", "attempt_dirs_named", "hf_unstamped_saves", "kernel_days_before",
            "two_restarts_complete")
DIALECT_SEEDS = (1, 2, 3)  # three random dialects per scenario
XFAIL: dict[tuple[str, int], str] = {}  # (scenario, dialect seed) -> why it is a strict xfail; none now


def _digest(case: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in case.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(case)).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_default_dialect_is_byte_identical_to_before(tmp_path: Path, name: str) -> None:
    scen = load_scenario(SCEN / f"{name}.toml")
    assert _digest(simulate(scen, tmp_path / "a", 1)) == PINNED[name]
    assert _digest(simulate(scen, tmp_path / "b", 1, dialect="default", dialect_seed=9)) == PINNED[name]
    assert not (tmp_path / "a" / "dialect.json").exists()


def test_draw_is_deterministic_and_reaches_every_variant() -> None:
    hosts = [f"node-{i:03d}" for i in range(16)]
    assert draw(hosts, 5) == draw(hosts, 5)
    assert draw(hosts, 5) != draw(hosts, 6)
    seen: dict[str, set[str]] = {k: set() for k in TABLES}
    for seed in range(12):
        d = draw(hosts, seed)
        for src in ("rank_prefix", "kernel", "dcgm"):
            seen[src] |= {v.name for v in getattr(d, src).values()}
        seen["steps"].add(d.steps.name)
    assert {k: sorted(v) for k, v in seen.items()} == {k: sorted(v.name for v in t) for k, t in TABLES.items()}
    assert len(RANK_PREFIXES) - 1 >= 3 and len(KERNEL_STAMPS) >= 3 and len(DCGM_LAYOUTS) == 3
    assert [v.name for v in STEP_STYLES] == ["native", "pylogging", "fairseq"]  # native: the 4 frameworks' own


def test_unknown_dialect_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown dialect 'fancy'"):
        simulate(load_scenario(SCEN / "healthy.toml"), tmp_path, 1, dialect="fancy")


# what each variant's line looks like at the start of the file's lines (independent of the templates)
KERNEL_RE = {"dmesg_T": r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] ",
             "uptime": r"\[ *\d+\.\d{6}\] ",
             "syslog": r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d {host} kernel: \[ *\d+\.\d{6}\] ",
             "journal_iso": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} {host} kernel: "}
PREFIX_RE = {"none": r"(?!\d+: |\[1,|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\.\d{3}[Z ]|{host}: )", "srun_label": r"{rank}: ", "pdsh": r"{host}: ",
             "kubectl": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ", "mpirun": r"\[1,{rank}\]<stdout>:",
             "workflow": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[\d+/train/{rank} \(pid \d+\)\] "}
DCGM_HEAD = {"long": "timestamp,metric,gpu,UUID,pci_bus_id,Hostname,value",
             "quoted": '"timestamp","metric","gpu","UUID","pci_bus_id","Hostname","value"',
             "wide": "timestamp,gpu,UUID,pci_bus_id,Hostname,DCGM_FI_DEV_SM_CLOCK,"}


@pytest.mark.parametrize("dseed", [1, 2, 3])  # thermal_straggler's steps: native, fairseq, pylogging
def test_random_dialect_files_carry_the_drawn_shapes(tmp_path: Path, dseed: int) -> None:
    scen = load_scenario(SCEN / "thermal_straggler.toml")
    case = simulate(scen, tmp_path / "c", SEED, dialect="random", dialect_seed=dseed)
    drawn = json.loads((case / "dialect.json").read_text())
    assert drawn["seed"] == dseed
    job = case / "job"
    for host, style in drawn["kernel"].items():
        lines = (job / "nodes" / host / "dmesg.log").read_text().splitlines()
        pat = re.compile(KERNEL_RE[style].replace("{host}", host))
        assert lines and all(pat.match(ln) for ln in lines), (host, style, lines[0])
        assert (job / "nodes" / host / "uptime_since.txt").exists() == (style == "uptime")
    assert ("year = " in (job / "job.toml").read_text()) == ("syslog" in drawn["kernel"].values())
    for host, layout in drawn["dcgm"].items():
        text = (job / "nodes" / host / "dcgm.csv").read_text().splitlines()
        assert text[0].startswith(DCGM_HEAD[layout]), (host, layout, text[0])
        width = len(text[0].split(","))
        assert all(len(r.split(",")) == width for r in text[1:]), layout
        if layout == "quoted":
            assert all(r.startswith('"') and r.endswith('"') for r in text[1:])
    for host, pre in drawn["rank_prefix"].items():
        for log in sorted((job / "logs").glob(f"*/{host}/rank-*.log")):
            rank = int(log.stem.split("-")[1])
            pat = re.compile(PREFIX_RE[pre].replace("{host}", host).replace("{rank}", str(rank)))
            lines = log.read_text().splitlines()
            assert lines and all(pat.match(ln) for ln in lines), (log, pre, lines[0])
    rank0 = "\n".join(p.read_text() for p in sorted((job / "logs").glob("*/*/rank-0.log")))
    marks = {"native": "[titan] ", "pylogging": " - INFO - step ", "fairseq": " | INFO | train_inner | epoch 001: "}
    assert marks[drawn["steps"]] in rank0
    assert all(m not in rank0 for k, m in marks.items() if k != drawn["steps"])
    # the truth is the dialect's too
    default = simulate(scen, tmp_path / "d", SEED)
    assert (case / "expected.toml").read_text() == (default / "expected.toml").read_text()


def _cases() -> list:
    out = []
    for name in SCENARIOS:
        for s in DIALECT_SEEDS:
            marks = [pytest.mark.xfail(strict=True, reason=XFAIL[(name, s)])] if (name, s) in XFAIL else []
            out.append(pytest.param(name, s, id=f"{name}-d{s}", marks=marks))
    return out


@pytest.mark.parametrize(("name", "dseed"), _cases())
def test_same_analysis_in_random_dialects(tmp_path: Path, name: str, dseed: int, downtime_holds, primary) -> None:
    case = simulate(load_scenario(SCEN / f"{name}.toml"), tmp_path / name, SEED, dialect="random", dialect_seed=dseed)
    exp = tomllib.loads((case / "expected.toml").read_text())
    rep = analyze(case / "job", tmp_path / "out", html=False).report
    drawn = (case / "dialect.json").read_text()
    d, truth = rep["downtime"], exp["downtime"]
    downtime_holds(d, truth, drawn)
    want, got = primary(exp, rep)
    assert got["kind"] == want["kind"], (got["summary"], drawn)
    if want["kind"] != "completed":
        assert got["category"] == want["category"], (got["summary"], drawn)
    if want.get("culprit_host"):
        assert got["culprit"]["host"] == want["culprit_host"], (got["summary"], drawn)
    assert sorted((s["host"], s["gpu"]) for s in rep["stragglers"]) == \
        sorted((s["host"], s["gpu"]) for s in exp.get("stragglers", [])), drawn
    if name in ATTEMPTS:  # tests/test_attempts.py's checks
        assert len(rep["attempts"]) == len(exp["attempts"]), (rep["attempts"], drawn)
        for g, w in zip(rep["attempts"], exp["attempts"], strict=True):
            assert abs((datetime.fromisoformat(g["start"]) - datetime.fromisoformat(w["start"])).total_seconds()) <= 30
            assert g["end_reason"] in (w["end_reason"], "preemption"), (g, w, drawn)
