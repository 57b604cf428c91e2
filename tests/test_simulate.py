"""Tests of the scenario simulator (forensics/simulate/)."""

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


def _scenario_path(name: str) -> Path:
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    path = fixtures / "scenarios" / f"{name}.toml"
    if not path.exists():  # large scenarios live apart so the end-to-end suites stay quick
        path = fixtures / "scenarios-large" / f"{name}.toml"
    return path


def _sim(tmp: Path, name: str, seed: int = 11) -> tuple[Path, dict]:
    scen = load_scenario(_scenario_path(name))
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


# ----------------------------------------------------------------------------- added fault types

NEW = ["gpu_microcontroller", "job_wide_slowdown", "network_congestion", "periodic_gc", "periodic_gc_megatron",
       "dataloader_stall", "silent_kill", "power_straggler", "clocks_low_straggler", "pcie_straggler",
       "power_brake_straggler_512", "noisy_dcgm_sample"]
ITER_MS = re.compile(r"iteration +(?P<it>\d+)/ +\d+ \|.*elapsed time per iteration \(ms\): (?P<ms>[\d.]+) \|")
TIMER = re.compile(r"^    (?P<name>[a-z-]+) \.+: \((?P<min>[\d.]+), (?P<max>[\d.]+)\)$")


def _dcgm(out: Path, host: str) -> list[tuple[str, str, int, str]]:
    """(timestamp, metric, gpu, value) rows of one host's DCGM export."""
    rows = (out / "job" / "nodes" / host / "dcgm.csv").read_text().splitlines()[1:]
    return [(c[0], c[1], int(c[2]), c[6]) for c in (r.split(",") for r in rows)]


def _series(rows: list[tuple[str, str, int, str]], metric: str, gpu: int) -> list[tuple[str, str]]:
    return [(ts, v) for ts, m, g, v in rows if m == f"DCGM_FI_{metric}" and g == gpu]


def _in(ts: str, start: str, end: str) -> bool:
    return start[:19] <= ts[:19] <= end[:19]


def _iters(path: Path) -> list[tuple[int, float, list[str]]]:
    """Megatron iteration lines with the timer lines that follow them."""
    lines = path.read_text().splitlines()
    out = []
    for i, ln in enumerate(lines):
        if m := ITER_MS.search(ln):
            out.append((int(m["it"]), float(m["ms"]), lines[i + 1:i + 6]))
    return out


def _timers(block: list[str]) -> dict[str, tuple[float, float]]:
    return {m["name"]: (float(m["min"]), float(m["max"])) for ln in block if (m := TIMER.match(ln))}


def test_new_scenarios_exist() -> None:
    large = (Path(__file__).resolve().parents[1] / "fixtures" / "scenarios-large").glob("*.toml")
    assert set(NEW) <= {p.stem for p in SCENARIOS} | {p.stem for p in large}


@pytest.mark.parametrize("name", [n for n in NEW if n != "power_brake_straggler_512"])
def test_new_scenarios_deterministic_and_small(tmp_path: Path, name: str) -> None:
    a, ta = _sim(tmp_path / "a", name, seed=5)
    b, tb = _sim(tmp_path / "b", name, seed=5)
    c, _ = _sim(tmp_path / "c", name, seed=6)
    assert _digest(a) == _digest(b) and ta == tb
    assert _digest(a) != _digest(c)


def test_gpu_microcontroller(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "gpu_microcontroller")
    v = truth["verdict"]
    assert (v["kind"], v["category"], v["domain"], v["action"]) == ("crash", "gpu_other_hardware", "hardware",
                                                                      "exclude_node_and_restart")
    assert (v["culprit_host"], v["culprit_rank"], v["culprit_gpu"], v["culprit_pci_bus_id"]) == \
        ("node-000", 4, 4, "0000:9a:00")
    dmesg = (out / "job" / "nodes" / "node-000" / "dmesg.log").read_text().splitlines()
    xids = [(i, m) for i, ln in enumerate(dmesg) if (m := XID.search(ln))]
    assert [m["xid"] for _, m in xids] == ["62", "45", "45", "45"]
    assert all(m["pci"] == "0000:9a:00" for _, m in xids)
    assert xids[0][1]["pid"] == "'<unknown>'" and {m["name"] for _, m in xids[1:]} == {"python3"}
    assert [m["body"] for _, m in xids[1:]] == ["Ch 00000008", "Ch 00000009", "Ch 0000000a"]
    ident = next(i for i, ln in enumerate(dmesg) if "NVRM: GPU at PCI:0000:9a:00: GPU-" in ln)
    assert ident < xids[0][0]
    logs = out / "job" / "logs" / "attempt-0"
    culprit = (logs / "node-000" / "rank-4.log").read_text()
    assert "[rank4]: RuntimeError: CUDA error: unspecified launch failure" in culprit
    assert "[rank4]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1" in culprit
    assert "Watchdog caught" not in culprit
    assert "Watchdog caught" in (logs / "node-001" / "rank-12.log").read_text()
    table = (logs / "node-000" / "torchrun.log").read_text()
    root = table.split("Root Cause (first observed failure):")[1]
    assert "(local_rank: 4)" in root and "exitcode  : 1 (pid:" in root
    assert not any("Xid" in ln for ln in (out / "job" / "nodes" / "node-001" / "dmesg.log").read_text().splitlines())


def _no_gpu_deviates(out: Path, hosts: list[str], start: str, end: str) -> None:
    for host in hosts:
        rows = _dcgm(out, host)
        for g in range(8):
            clocks = [int(v) for ts, v in _series(rows, "DEV_SM_CLOCK", g) if _in(ts, start, end)]
            reasons = {int(v) for ts, v in _series(rows, "DEV_CLOCKS_EVENT_REASONS", g) if _in(ts, start, end)}
            assert clocks and min(clocks) >= 1950, (host, g)
            assert reasons <= {0, 4}, (host, g, reasons)


@pytest.mark.parametrize("name", ["job_wide_slowdown", "network_congestion"])
def test_job_wide_slowdowns(tmp_path: Path, name: str) -> None:
    out, truth = _sim(tmp_path, name)
    scen = load_scenario(_scenario_path(name))
    f = scen["faults"][0]
    assert truth["verdict"]["kind"] == "completed" and "stragglers" not in truth
    (item,) = truth["interruptions"]
    assert (item["kind"], item["category"], item["action"], item["fault"]) == ("slowdown", "slowdown_transient",
                                                                             "none", name)
    assert not any(k.startswith("culprit") for k in item)
    # excess of a (1 + s) slowdown over duration D is about D * s / (1 + s)
    want = f["duration_s"] * f["slowdown"] / (1 + f["slowdown"])
    assert want * 0.85 < truth["downtime"]["slowdown_s"] < want * 1.15
    end = truth["attempts"][0]["end"]
    _no_gpu_deviates(out, truth["job"]["hosts"], truth["attempts"][0]["start"][:11] + "08:03:00", end)
    iters = _iters(out / "job" / "logs" / "attempt-0" / "node-001" / "rank-15.log")
    slow = [ms for _, ms, _ in iters if ms > 2000 * (1 + f["slowdown"] * 0.7)]
    assert len(slow) >= f["duration_s"] / (2.0 * (1 + f["slowdown"])) / 5 * 0.8  # the logged step time rises
    if name == "network_congestion":
        t = [_timers(block) for _, ms, block in iters]
        assert all(set(x) == {"forward-backward", "batch-generator", "all-grads-sync", "optimizer"} for x in t)
        hot = [x["all-grads-sync"][0] for (_, ms, _), x in zip(iters, t, strict=True) if ms > 2400]
        cold = [x["all-grads-sync"][0] for (_, ms, _), x in zip(iters, t, strict=True) if ms < 2100]
        assert hot and cold and min(hot) > 3 * max(cold)  # the excess is communication time
        fb = [x["forward-backward"][1] for x in t]
        assert max(fb) < 1.1 * min(fb)


def test_periodic_gc_torchtitan(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "periodic_gc")
    (item,) = truth["interruptions"]
    assert (item["kind"], item["category"], item["fault"]) == ("slowdown", "slowdown_workload", "periodic_gc")
    assert not any(k.startswith("culprit") for k in item) and "stragglers" not in truth
    rank0 = (out / "job" / "logs" / "attempt-0" / "node-000" / "rank-0.log").read_text().splitlines()
    gc = [float(m[1]) for ln in rank0 if (m := re.search(r" - root - INFO - \[GC\] Performing periodic GC collection "
                                                          r"took (\d+\.\d\d) seconds$", ln))]
    assert len(gc) == 1500 // 50 - 0 and all(2.8 <= x <= 3.2 for x in gc)
    assert truth["downtime"]["slowdown_s"] == pytest.approx(sum(gc), abs=0.01 * len(gc))
    assert item["time"] < truth["attempts"][0]["start"][:11] + "08:04:00"
    _no_gpu_deviates(out, truth["job"]["hosts"], "2026-11-02T08:03:00", truth["attempts"][0]["end"])


def test_periodic_gc_megatron(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "periodic_gc_megatron")
    iters = _iters(out / "job" / "logs" / "attempt-0" / "node-001" / "rank-15.log")
    assert [it for it, _, _ in iters] == list(range(1, 1001))  # log_interval 1
    spikes = [it for it, ms, _ in iters if ms > 3500]
    assert spikes == list(range(100, 1001, 100))
    excess = sum(ms - 2000 for it, ms, _ in iters if it in spikes) / 1000
    assert truth["downtime"]["slowdown_s"] == pytest.approx(excess, abs=1.0)
    assert truth["interruptions"][0]["category"] == "slowdown_workload"


def test_dataloader_stall(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "dataloader_stall")
    (item,) = truth["interruptions"]
    assert (item["category"], item["fault"]) == ("slowdown_workload", "dataloader_stall")
    iters = _iters(out / "job" / "logs" / "attempt-0" / "node-001" / "rank-15.log")
    stalls = [(it, ms, _timers(block)) for it, ms, block in iters if ms > 5000]
    assert len(stalls) >= 10
    gaps = {b[0] - a[0] for a, b in zip(stalls, stalls[1:], strict=False)}
    assert len(gaps) > 3  # irregular, not periodic
    for _, ms, t in stalls:
        lo, hi = t["batch-generator"]
        assert lo < 5 and hi > 3000 and hi > 0.5 * (ms - 2000)  # the wait is in batch fetch
    assert truth["downtime"]["slowdown_s"] == pytest.approx(sum(ms - 2000 for _, ms, _ in stalls) / 1000, rel=0.02)
    _no_gpu_deviates(out, truth["job"]["hosts"], "2026-11-02T08:03:00", truth["attempts"][0]["end"])


def test_silent_kill(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "silent_kill")
    v = truth["verdict"]
    assert (v["kind"], v["category"], v["domain"], v["action"]) == ("unknown", "unknown", "unknown", "investigate")
    assert truth["attempts"][0]["end_reason"] == "crash"
    assert not any(k.startswith("culprit") for k in v)
    logs = out / "job" / "logs" / "attempt-0"
    for host in ("node-000", "node-001"):
        table = (logs / host / "torchrun.log").read_text()
        codes = re.findall(r"exitcode  : (-?\d+) \(pid", table)
        assert len(codes) == 8 and set(codes) == {"-9"}
        assert "Signal 9 (SIGKILL) received by PID" in table and "SIGTERM" not in table
        dmesg = (out / "job" / "nodes" / host / "dmesg.log").read_text()
        assert "oom" not in dmesg.lower() and "Xid" not in dmesg
    ranks = "\n".join(_lines(sorted(logs.glob("*/rank-*.log"))))
    assert "Traceback" not in ranks and "Watchdog caught" not in ranks and "Error" not in ranks
    slurm = next((out / "job" / "slurm").glob("slurm-*.out")).read_text()
    assert "CANCELLED" not in slurm and "oom_kill" not in slurm
    assert "|FAILED|1:0|" in (out / "job" / "slurm" / "sacct.txt").read_text()


STRAGGLERS = {
    # scenario: (host, gpu, rank, cause, slowdown)
    "power_straggler": ("node-000", 3, 3, "power", 0.10),
    "clocks_low_straggler": ("node-005", 2, 42, "clocks_low", 0.20),
    "pcie_straggler": ("node-001", 1, 9, "pcie_degraded", 0.30),
}


def _check_straggler(out: Path, truth: dict, name: str, host: str, gpu: int, rank: int, cause: str,
                     slowdown: float) -> None:
    assert truth["verdict"]["kind"] == "completed"
    (s,) = truth["stragglers"]
    assert (s["host"], s["gpu"], s["rank"], s["cause"], s["slowdown"]) == (host, gpu, rank, cause, slowdown)
    (item,) = truth["interruptions"]
    assert (item["kind"], item["category"], item["culprit_host"], item["culprit_gpu"]) == \
        ("slowdown", "straggler_hardware", host, gpu)
    assert truth["downtime"]["slowdown_s"] > 0
    rows = _dcgm(out, host)
    inside = lambda ts: s["start"][:19] < ts[:19] < s["end"][:19]  # noqa: E731
    clock = [int(v) for ts, v in _series(rows, "DEV_SM_CLOCK", gpu) if inside(ts)]
    reasons = {int(v) for ts, v in _series(rows, "DEV_CLOCKS_EVENT_REASONS", gpu) if inside(ts)}
    power = [float(v) for ts, v in _series(rows, "DEV_POWER_USAGE", gpu) if inside(ts)]
    peer = (gpu + 1) % 8
    peer_clock = [int(v) for ts, v in _series(rows, "DEV_SM_CLOCK", peer) if inside(ts)]
    assert clock and min(peer_clock) >= 1950
    if cause == "power":
        scen = load_scenario(_scenario_path(name))
        cap = scen["faults"][0]["power_limit_w"]
        assert max(clock) < 1950
        assert all(cap * 0.98 <= p <= cap for p in power)
        want = 0x84 if scen["faults"][0].get("power_brake") else 0x4
        assert reasons == {want}
    elif cause == "clocks_low":
        assert max(clock) < 1950 and reasons == {0}
    else:  # pcie_degraded: clocks normal, replays growing, link downtrained
        assert min(clock) >= 1950 and reasons <= {0, 4}
        replay = [int(v) for ts, v in _series(rows, "DEV_PCIE_REPLAY_COUNTER", gpu) if inside(ts)]
        assert replay == sorted(replay) and replay[-1] - replay[0] > 20 * len(replay)
        assert {int(v) for ts, v in _series(rows, "DEV_PCIE_REPLAY_COUNTER", peer)} == {0}
        assert {v for ts, v in _series(rows, "DEV_PCIE_LINK_WIDTH", gpu) if inside(ts)} == {"8"}
        assert {v for ts, v in _series(rows, "DEV_PCIE_LINK_GEN", gpu) if inside(ts)} == {"4"}
        assert {v for ts, v in _series(rows, "DEV_PCIE_LINK_WIDTH", peer)} == {"16"}
    before = [int(v) for ts, v in _series(rows, "DEV_SM_CLOCK", gpu)
              if "2026-11-02T08:03:00" <= ts < s["start"][:19]]
    assert before and min(before) >= 1950  # normal before the episode


@pytest.mark.parametrize("name", sorted(STRAGGLERS))
def test_straggler_causes(tmp_path: Path, name: str) -> None:
    out, truth = _sim(tmp_path, name)
    _check_straggler(out, truth, name, *STRAGGLERS[name])


def test_power_straggler_persistent_and_timers(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "power_straggler")
    (s,) = truth["stragglers"]
    assert s["end"] == truth["job"]["end"]  # persistent: slow until the end
    assert truth["job"]["gpus"] == 8
    iters = _iters(out / "job" / "logs" / "attempt-0" / "node-000" / "rank-7.log")
    late = [_timers(block) for it, ms, block in iters if it > 1000]
    # the straggler computes longer (forward-backward max), its peers wait in all-grads-sync
    assert all(t["forward-backward"][1] - t["forward-backward"][0] > 100 for t in late)


def test_512_gpu_straggler(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "power_brake_straggler_512")
    assert truth["job"]["gpus"] == 512 and len(truth["job"]["hosts"]) == 64
    _check_straggler(out, truth, "power_brake_straggler_512", "node-041", 6, 334, "power", 0.08)


def test_noisy_dcgm_sample_is_not_a_straggler(tmp_path: Path) -> None:
    out, truth = _sim(tmp_path, "noisy_dcgm_sample")
    assert truth["verdict"] == {"kind": "completed", "action": "none"}
    assert not truth.get("interruptions") and "stragglers" not in truth
    assert truth["downtime"]["slowdown_s"] == 0.0
    low = [(h, g, ts) for h in truth["job"]["hosts"] for ts, m, g, v in _dcgm(out, h)
           if m == "DCGM_FI_DEV_SM_CLOCK" and 600 < int(v) < 1900]
    assert len(low) == 1 and low[0][:2] == ("node-001", 2)
