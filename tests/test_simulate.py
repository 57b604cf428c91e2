"""Tests of the scenario simulator (forensics/simulate.py)."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest

from forensics.simulate import load_scenario, simulate

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "scenarios").glob("*.toml"))
REQUIRED = ["gpu_fell_off_bus", "ib_link_error", "user_exception", "cuda_oom", "thermal_straggler", "preemption"]

# Regexes copied from the reference docs (nccl_log.md §2, xid_formats.md §5, pytorch_dist.md §2.1/§6.3).
NCCL_PREFIX = re.compile(
    r"^(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\] )?"
    r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) "
    r"(?:\[(?P<dev>\d+)\] )?"
    r"(?:(?P<ms>\d+\.\d+) (?P<tfunc>\S+):(?P<tline>\d+) )?"
    r"(?:(?P<file>\S+):(?P<line>\d+) (?:\((?P<func>[^)]+)\) )?)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL) (?P<msg>.*)$")
XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?"
    r"(?: GPU-I:(?P<gi>\d+))?(?: GPU-CI:(?P<ci>\d+))?\): (?P<xid>\d+),?\s*"
    r"(?:pid=(?P<pid>'?<unknown>'?|\d+),?\s*)?(?:name=(?P<name>[^,]*),?\s*)?(?P<body>.*)$")
FELL_OFF = re.compile(r"NVRM: GPU (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d): GPU has fallen off the bus")
# pytorch_dist.md §2.1 suggests `WorkNCCL\((?P<kv>[^)]*)\)`, which cannot match its own examples
# (`Timeout(ms)=...` contains a parenthesis); the lazy form below does.
WORK = re.compile(r"WorkNCCL\((?P<kv>.*?)\) ran for (?P<ms>\d+) milliseconds")
GLOG_24 = re.compile(r"^\[rank(?P<rank>\d+)\]:\[E(?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<ns>\d{9}) ProcessGroupNCCL\.cpp:\d+\] ")
OLD_PG = re.compile(r"^\[E ProcessGroupNCCL\.cpp:\d+\] \[Rank (?P<rank>\d+)\] Watchdog caught")
MEGATRON_ITER = re.compile(
    r"^ \[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\] iteration +(?P<it>\d+)/ +(?P<total>\d+) \|"
    r".*elapsed time per iteration \(ms\): (?P<ms>[\d.]+) \|.* lm loss: (?P<loss>\S+) \|.*\|$")
TABLE_ENTRY = re.compile(r"^  time      : \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d$")
DMESG_T = re.compile(r"^\[(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] ")
JOURNAL_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} \S+ kernel: ")
SYSLOG = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: \[ *\d+\.\d{6}\] ")
UPTIME = re.compile(r"^\[ *\d+\.\d{6}\] ")
SLURM_CANCEL = re.compile(r"^slurmstepd: error: \*\*\* (JOB|STEP) [\d.]+ ON \S+ CANCELLED AT "
                          r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d( DUE (TO|to) .+)? \*\*\*$")


def _sim(tmp: Path, name: str, seed: int = 11) -> tuple[Path, dict]:
    scen = load_scenario(Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / f"{name}.toml")
    out = simulate(scen, tmp / name, seed)
    return out, tomllib.loads((out / "expected.toml").read_text())


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _lines(paths: list[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        out += p.read_text().splitlines()
    return out


def test_required_scenarios_exist() -> None:
    names = {p.stem for p in SCENARIOS}
    assert set(REQUIRED) <= names


@pytest.mark.parametrize("name", ["gpu_fell_off_bus", "preemption", "thermal_straggler"])
def test_deterministic(tmp_path: Path, name: str) -> None:
    a, _ = _sim(tmp_path / "a", name, seed=5)
    b, _ = _sim(tmp_path / "b", name, seed=5)
    c, _ = _sim(tmp_path / "c", name, seed=6)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_simulates(tmp_path: Path, path: Path) -> None:
    out = simulate(load_scenario(path), tmp_path / path.stem, 1)
    truth = tomllib.loads((out / "expected.toml").read_text())
    for key in ("job", "verdict", "interruptions", "attempts", "downtime"):
        assert key in truth or key == "interruptions" and truth["verdict"]["kind"] == "completed"
    job = truth["job"]
    assert {"name", "hosts", "ranks", "gpus", "start", "end"} <= set(job)
    assert job["ranks"] == job["gpus"] > 0
    for a in truth["attempts"]:
        assert {"index", "start", "end", "first_step", "last_step", "end_reason"} <= set(a)
        assert a["end_reason"] in {"crash", "hang", "preempted", "completed"}
        assert a["start"] < a["end"]
    for item in truth.get("interruptions", []):
        assert {"attempt", "time", "kind", "category", "domain", "action"} <= set(item)
    d = truth["downtime"]
    buckets = ["productive_s", "startup_s", "checkpoint_s", "lost_work_s", "termination_s", "restart_s",
               "slowdown_s"]
    assert all(d[b] >= 0 for b in buckets)
    assert round(sum(d[b] for b in buckets), 6) == round(d["wall_s"], 6)
    assert d["goodput"] == pytest.approx(d["productive_s"] / d["wall_s"], abs=1e-6)
    assert d["gpu_hours_lost"] == pytest.approx((d["wall_s"] - d["productive_s"]) * job["gpus"] / 3600, abs=1e-5)
    n_hosts = len({h for a in truth["attempts"] for h in a["hosts"]})
    assert len(list((out / "job" / "nodes").iterdir())) == n_hosts
    assert (out / "job" / "slurm" / "sacct.txt").read_text().startswith("JobID|JobName|State|ExitCode|")


def test_gpu_fell_off_bus_truth_and_lines(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "gpu_fell_off_bus")
    first = truth["interruptions"][0]
    assert (first["category"], first["kind"], first["domain"]) == ("gpu_lost", "crash", "hardware")
    assert (first["culprit_host"], first["culprit_rank"], first["culprit_gpu"]) == ("node-002", 21, 5)
    assert first["culprit_pci_bus_id"] == "0000:ab:00"
    assert truth["verdict"]["kind"] == "completed"
    a0, a1 = truth["attempts"]
    assert a0["end_reason"] == "crash" and a1["end_reason"] == "completed"
    assert a1["first_step"] == 1501  # resumes after the last durable checkpoint (1500)
    assert "node-002" not in a1["hosts"]  # the culprit node was replaced
    d = truth["downtime"]
    assert d["lost_work_s"] > 0 and d["termination_s"] > 600 and d["restart_s"] > 300
    dmesg = (out / "job" / "nodes" / "node-002" / "dmesg.log").read_text().splitlines()
    assert all(DMESG_T.match(ln) for ln in dmesg)
    xids = [m for ln in dmesg if (m := XID.search(ln))]
    assert [m["xid"] for m in xids] == ["79", "154"]
    assert xids[0]["pci"] == "0000:ab:00" and xids[0]["pid"] == "'<unknown>'"
    assert any(FELL_OFF.search(ln) for ln in dmesg)
    ident = [i for i, ln in enumerate(dmesg) if "NVRM: GPU at PCI:0000:ab:00: GPU-" in ln]
    assert ident and ident[0] < next(i for i, ln in enumerate(dmesg) if XID.search(ln))
    logs = out / "job" / "logs" / "attempt-0"
    culprit = (logs / "node-002" / "rank-21.log").read_text()
    assert "Watchdog caught" not in culprit
    peer = (logs / "node-001" / "rank-8.log").read_text().splitlines()
    wd = [ln for ln in peer if (g := GLOG_24.match(ln)) and ln[g.end():].startswith("[Rank 8] Watchdog caught")]
    assert len(wd) == 1
    m = WORK.search(wd[0])
    assert m and int(m["ms"]) >= 600000
    seqs = set()
    for p in logs.glob("*/rank-*.log"):
        for ln in p.read_text().splitlines():
            if "Watchdog caught" in ln and (w := WORK.search(ln)):
                seqs.add(w["kv"].split(",")[0])
    assert len(seqs) == 1
    table = (logs / "node-002" / "torchrun.log").read_text()
    assert "Root Cause (first observed failure):" in table and "exitcode  : -6" in table
    assert "(local_rank: 5)" not in table  # the hung culprit is not reaped, it is SIGKILLed
    assert all(TABLE_ENTRY.match(ln) for ln in table.splitlines() if ln.startswith("  time      :"))


def test_nccl_lines_match_prefix(tmp_path: Path) -> None:
    out, _ = _sim(tmp_path, "gpu_fell_off_bus")
    lines = _lines(sorted((out / "job" / "logs").glob("attempt-0/*/rank-*.log")))
    nccl = [ln for ln in lines if " NCCL " in ln and not ln.startswith("[rank")]
    assert nccl and all(NCCL_PREFIX.match(ln) for ln in nccl)
    inits = [ln for ln in nccl if ln.endswith("Init COMPLETE")]
    assert len(inits) == 32
    assert all(re.search(r"rank \d+ nranks 32 cudaDev \d nvmlDev \d busId [0-9a-f]+ commId 0x[0-9a-f]{16}", ln)
               for ln in inits)
    assert lines.count("NCCL version 2.21.5+cuda12.4") == 1
    assert any("Bootstrap : Using eth0:10.64.0.13<0>" in ln and ln.startswith("node-002:") for ln in nccl)


def test_ib_link_error(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "ib_link_error")
    first = truth["interruptions"][0]
    assert (first["category"], first["kind"], first["culprit_host"]) == ("network_fabric", "hang", "node-001")
    lines = _lines(sorted((out / "job" / "logs" / "attempt-0").glob("*/rank-*.log")))
    warns = [m for ln in lines if (m := NCCL_PREFIX.match(ln)) and m["level"] == "WARN"]
    assert warns and all("status=12" in m["msg"] and "vendor err 129" in m["msg"] for m in warns)
    ip = re.search(r"peer (\S+)<\d+>", warns[0]["msg"])[1]  # type: ignore[index]
    owner = [ln for ln in lines if f"Bootstrap: Using eth0:{ip}<0>" in ln]
    assert owner and owner[0].startswith("node-001:")
    assert {m["host"] for m in warns} == {"node-000", "node-002"}
    idx = [i for i, ln in enumerate(lines) if NCCL_PREFIX.match(ln) and " NCCL WARN " in ln]
    assert all(lines[i - 1] == "" for i in idx)  # blank line before every WARN
    dmesg = (out / "job" / "nodes" / "node-001" / "dmesg.log").read_text().splitlines()
    assert all(JOURNAL_ISO.match(ln) for ln in dmesg)
    assert any("Link down" in ln for ln in dmesg)


def test_user_exception_old_formats(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "user_exception")
    v = truth["verdict"]
    assert (v["category"], v["culprit_host"], v["culprit_rank"]) == ("user_code", "node-001", 10)
    assert "culprit_gpu" not in v
    logs = out / "job" / "logs" / "attempt-0"
    culprit = (logs / "node-001" / "rank-10.log").read_text().splitlines()
    assert all(ln.startswith("10: ") for ln in culprit)  # srun -l prefix
    assert "10: Traceback (most recent call last):" in culprit and "10: KeyError: 'labels'" in culprit
    peer = [ln.split(": ", 1)[1] for ln in (logs / "node-000" / "rank-1.log").read_text().splitlines()]
    assert any(OLD_PG.match(ln) and "NumelIn" not in ln for ln in peer)
    table = (logs / "node-001" / "torchrun.log").read_text()
    root = table.split("Root Cause (first observed failure):")[1]
    assert "exitcode  : 1 (pid:" in root and "error.json" in root and "KeyError: 'labels'" in root
    assert "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 2" in table
    err = json.loads((logs / "node-001" / "torchelastic" / "2" / "error.json").read_text())
    assert err["message"]["message"] == "KeyError: 'labels'"
    slurm = (out / "job" / "slurm").glob("slurm-*.out")
    assert any("srun: error: node-001: task 1: Exited with exit code 1" in p.read_text() for p in slurm)
    dmesg = (out / "job" / "nodes" / "node-000" / "dmesg.log").read_text().splitlines()
    assert all(SYSLOG.match(ln) for ln in dmesg)


def test_cuda_oom_before_first_step(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "cuda_oom")
    assert truth["verdict"]["category"] == "oom" and truth["verdict"]["culprit_rank"] == 3
    (a0,) = truth["attempts"]
    assert a0["last_step"] == 0
    d = truth["downtime"]
    assert d["productive_s"] == 0.0 and d["lost_work_s"] == 0.0 and d["startup_s"] > 0
    text = "\n".join(_lines(sorted((out / "job" / "logs").glob("attempt-0/*/rank-*.log"))))
    assert text.count("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity") == 2
    assert "{'loss'" not in text
    node = out / "job" / "nodes" / "node-000"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n", (node / "uptime_since.txt").read_text())
    assert all(UPTIME.match(ln) for ln in (node / "dmesg.log").read_text().splitlines())


def test_thermal_straggler(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "thermal_straggler")
    assert truth["verdict"]["kind"] == "completed"
    (s,) = truth["stragglers"]
    assert (s["host"], s["gpu"], s["rank"], s["cause"], s["slowdown"]) == ("node-001", 6, 14, "thermal", 0.15)
    slow = [i for i in truth["interruptions"] if i["kind"] == "slowdown"]
    assert slow and slow[0]["category"] == "straggler_hardware"
    d = truth["downtime"]
    # ~2400 s episode at +15 %: roughly 0.15/1.15 of it is excess.
    assert 200 < d["slowdown_s"] < 400
    rows = (out / "job" / "nodes" / "node-001" / "dcgm.csv").read_text().splitlines()
    assert rows[0] == "timestamp,metric,gpu,UUID,pci_bus_id,Hostname,value"
    clocks = [r.split(",") for r in rows[1:] if ",DCGM_FI_DEV_SM_CLOCK,6," in r]
    assert min(int(c[-1]) for c in clocks) < 1400 and max(int(c[-1]) for c in clocks) == 1980
    reasons = {int(r.split(",")[-1]) for r in rows[1:] if ",DCGM_FI_DEV_CLOCKS_EVENT_REASONS,6," in r}
    assert any(x & 0x40 and x & 0x20 for x in reasons)
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ,", r) for r in rows[1:])
    steps = _lines(sorted((out / "job" / "logs" / "attempt-0").glob("*/rank-0.log")))
    assert any("step: " in ln and "\x1b[" in ln for ln in steps)  # torchtitan colours its metrics


def test_preemption_requeue(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "preemption")
    a0, a1 = truth["attempts"]
    assert a0["end_reason"] == "preempted" and a1["end_reason"] == "completed"
    assert a1["first_step"] == 501
    assert truth["interruptions"][0]["category"] == "preemption"
    sacct = (out / "job" / "slurm" / "sacct.txt").read_text().splitlines()
    states = [ln.split("|")[2] for ln in sacct[1:] if "." not in ln.split("|")[0]]
    assert states == ["PREEMPTED", "COMPLETED"]
    assert sacct[-4].split("|")[-1] == "1"  # Restarts of the second run
    out_lines = next((out / "job" / "slurm").glob("slurm-*.out")).read_text().splitlines()
    cancels = [ln for ln in out_lines if SLURM_CANCEL.match(ln)]
    assert cancels and all("DUE TO PREEMPTION" in ln for ln in cancels)
    assert "timezone = \"America/Los_Angeles\"" in (out / "job" / "job.toml").read_text()
    agent = (out / "job" / "logs" / "attempt-0" / "node-000" / "torchrun.log").read_text()
    assert "Received Signals.SIGTERM death signal, shutting down workers" in agent
    assert "SignalException: Process" in agent and "ChildFailedError" not in agent
    rank = (out / "job" / "logs" / "attempt-0" / "node-000" / "rank-3.log").read_text().splitlines()
    assert all(ln.startswith("[default3]:") for ln in rank)


def test_step_lines_and_truth_agree(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "gpu_fell_off_bus")
    last = (out / "job" / "logs" / "attempt-0" / "node-003" / "rank-31.log").read_text().splitlines()
    iters = [m for ln in last if (m := MEGATRON_ITER.match(ln))]
    assert iters and all(int(m["it"]) % 5 == 0 for m in iters)
    assert int(iters[-1]["it"]) <= truth["attempts"][0]["last_step"] < int(iters[-1]["it"]) + 5
    rank0 = (out / "job" / "logs" / "attempt-0" / "node-000" / "rank-0.log").read_text()
    assert "saving checkpoint at iteration    1500 to /ckpt" in rank0
    assert "successfully saved checkpoint from iteration    1500" in rank0


def test_scale_smoke(tmp_path: Path) -> None:
    scen = {
        "job": {"name": "scale", "nodes": 32, "gpus_per_node": 8, "train_steps": 200, "step_time_s": 1.0,
                "checkpoint_interval": 100, "startup_s": 60, "nccl_info_lines_per_rank": 20,
                "duration_s": 900, "dcgm": False},
        "faults": [{"type": "gpu_fell_off_bus", "attempt": 0, "at_s": 150, "node": 7, "gpu": 1}],
    }
    out = simulate(scen, tmp_path / "scale", 3)
    logs = list((out / "job" / "logs" / "attempt-0").glob("*/rank-*.log"))
    assert len(logs) == 256
    sizes = [p.stat().st_size for p in logs]
    assert min(sizes) > 1500 and sum(sizes) < 20_000_000
    info = (out / "job" / "logs" / "attempt-0" / "node-003" / "rank-30.log").read_text().count("NCCL INFO")
    assert 20 <= info <= 24  # init block plus the abort line
