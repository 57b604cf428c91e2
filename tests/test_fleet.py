"""`forensics fleet ingest`: job-dir discovery, stable keys, the week-partitioned Parquet store,
replacement on re-ingest, failures reported and skipped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from forensics import fleet
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "fixtures" / "scenarios"
SMALL = {"nodes": 1, "nccl_info_lines_per_rank": 12, "duration_s": 1800, "train_steps": 700,
         "checkpoint_interval": 100, "dcgm_interval_s": 300, "max_restarts": 1, "queue_s": 120}


def _sim(kind: str, out: Path, seed: int, start: str, **job) -> Path:
    s = load_scenario(SCEN / f"{kind}.toml")
    s["job"].update(SMALL, start=start, **job)
    for f in s.get("faults", []):
        f["at_s"] = min(f.get("at_s", 600), 700)
        f["node"] = 0
    return simulate(s, out, seed)


def _read(store: Path, table: str) -> list[dict]:
    files = fleet.parquet_files(store, table)
    if not files:
        return []
    return duckdb.read_parquet(files).pl().to_dicts()


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("fleet")
    cases = tmp / "cases"
    a = _sim("gpu_fell_off_bus", cases / "a", 1, "2026-11-03T10:00:00Z", name="bus")
    b = _sim("preemption", cases / "sub" / "b", 2, "2026-11-10T10:00:00Z", name="preempted")
    (cases / "junk.tgz").write_bytes(b"not a tarball")
    store = tmp / "store"
    res = fleet.ingest([cases], store, workers=2)
    return {"tmp": tmp, "cases": cases, "a": a, "b": b, "store": store, "res": res}


def test_find_job_dirs_rule(tmp_path: Path) -> None:
    (tmp_path / "case1" / "job").mkdir(parents=True)
    (tmp_path / "case1" / "job" / "job.toml").write_text('name = "x"\n')
    (tmp_path / "case1" / "job" / "logs" / "deep").mkdir(parents=True)
    (tmp_path / "case1" / "job" / "logs" / "deep" / "job.toml").write_text("")  # not searched: inside a job
    (tmp_path / "case1" / "expected.toml").write_text("")
    (tmp_path / "team" / "run7" / "slurm").mkdir(parents=True)
    (tmp_path / "team" / "run8").mkdir(parents=True)
    (tmp_path / "team" / "run8" / "train.log").write_text("hello\n")
    (tmp_path / "team" / "bundle.tar.gz").write_bytes(b"")
    (tmp_path / "team" / "notes.txt").write_text("")
    (tmp_path / ".hidden" / "logs").mkdir(parents=True)
    (tmp_path / "store" / "jobs" / "k" / "logs").mkdir(parents=True)
    got = [p.relative_to(tmp_path).as_posix() for p in fleet.find_job_dirs(tmp_path, exclude=[tmp_path / "store"])]
    assert got == ["case1/job", "team/bundle.tar.gz", "team/run7", "team/run8"]
    # a job dir given directly is itself; a missing root has none
    assert fleet.find_job_dirs(tmp_path / "team" / "run7") == [tmp_path / "team" / "run7"]
    assert fleet.find_job_dirs(tmp_path / "nope") == []


def test_keys_and_weeks(tmp_path: Path) -> None:
    d = tmp_path / "j"
    d.mkdir()
    k = fleet.job_key(d)
    assert k == fleet.job_key(tmp_path / "." / "j") == fleet.job_key(d, "j")
    assert len(k) == 16 and k != fleet.job_key(d, "other-name")
    assert fleet.iso_week("2026-11-02T00:00:00Z") == "2026-W45"
    assert fleet.iso_week(datetime(2026, 11, 1, 23, 59, tzinfo=UTC)) == "2026-W44"
    assert fleet.iso_week("2027-01-01T00:00:00Z") == "2026-W53"
    assert fleet.iso_week(None) == "unknown"


def test_ingest_writes_week_partitions_and_outputs_outside_the_job(two_jobs: dict) -> None:
    res, store = two_jobs["res"], two_jobs["store"]
    assert [Path(x["dir"]).parent.name for x in res.ingested] == ["a", "b"]
    assert [x["week"] for x in res.ingested] == ["2026-W45", "2026-W46"]
    assert [Path(f["dir"]).name for f in res.failed] == ["junk.tgz"]
    for x in res.ingested:
        for t in fleet.TABLES:
            assert (store / f"week={x['week']}" / t / f"{x['key']}.parquet").is_file()
        rep = json.loads((store / "jobs" / x["key"] / "report.json").read_text())
        assert (store / "jobs" / x["key"] / "report.html").is_file()
        assert rep["job"]["dir"] == str(Path(x["dir"]).resolve())
    for case in (two_jobs["a"], two_jobs["b"]):  # nothing written into the job dirs
        assert not list((case / "job").glob("forensics*")) and not (case / "job" / "report.json").exists()
    log = [json.loads(line) for line in (store / "ingest.jsonl").read_text().splitlines()]
    assert sorted(x["ok"] for x in log) == [False, True, True]


def test_store_rows_match_report_and_truth(two_jobs: dict) -> None:
    store = two_jobs["store"]
    jobs = {j["name"]: j for j in _read(store, "jobs")}
    assert set(jobs) == {"bus", "preempted"}
    for name, case in (("bus", two_jobs["a"]), ("preempted", two_jobs["b"])):
        exp = tomllib.loads((case / "expected.toml").read_text())
        j = jobs[name]
        assert j["gpus"] == exp["job"]["gpus"] == 8
        assert abs(j["wall_s"] - exp["downtime"]["wall_s"]) <= 30
        assert abs(j["goodput"] - exp["downtime"]["goodput"]) <= 0.01
        assert j["gpu_hours"] == pytest.approx(j["wall_s"] * 8 / 3600, rel=1e-3)
        assert j["attempts"] == len(exp["attempts"])
        assert j["checkpoint_cost_s"] == pytest.approx(30, rel=0.15)
        assert sum(j[f"{b}_s"] for b in fleet.BUCKETS) == pytest.approx(j["wall_s"], abs=0.01)
        assert j["verdict_kind"] == exp["verdict"]["kind"]
    inters = _read(store, "interruptions")
    bus = [x for x in inters if x["job_key"] == jobs["bus"]["job_key"]]
    assert len(bus) == 1 and bus[0]["category"] == "gpu_lost" and bus[0]["culprit_host"] == "node-000"
    assert bus[0]["evidence_signature"] and bus[0]["evidence_path"] and bus[0]["evidence_line"] > 0
    line = (two_jobs["a"] / "job" / bus[0]["evidence_path"]).read_text().split("\n")[bus[0]["evidence_line"] - 1]
    assert bus[0]["evidence_text"].strip() in line
    assert bus[0]["stopping"] and bus[0]["week"] == "2026-W45"
    health = _read(store, "node_health")
    xids = {(h["host"], h["gpu"], h["code"]) for h in health if h["signal"] == "xid" and h["job_key"] == bus[0]["job_key"]}
    assert ("node-000", 5, "79") in xids
    assert any(h["signal"] == "signature" and h["code"] == "xid-79" for h in health)


def test_reingest_replaces_never_duplicates(two_jobs: dict) -> None:
    store = two_jobs["store"]
    before = {t: sorted(json.dumps(r, sort_keys=True, default=str) for r in _read(store, t)) for t in fleet.TABLES}
    res = fleet.ingest([two_jobs["cases"]], store, workers=1)  # as the fixture did (later tests compare its reports)
    assert len(res.ingested) == 2 and len(res.failed) == 1
    after = {t: sorted(json.dumps(r, sort_keys=True, default=str) for r in _read(store, t)) for t in fleet.TABLES}
    assert after == before
    assert len(fleet.parquet_files(store, "jobs")) == 2


def test_reingest_moves_a_job_whose_start_changed(tmp_path: Path) -> None:
    case = _sim("healthy", tmp_path / "c" / "x", 3, "2026-11-03T10:00:00Z", name="moving")
    store = tmp_path / "store"
    first = fleet.ingest([tmp_path / "c"], store, workers=1, job_html=False)
    assert first.ingested[0]["week"] == "2026-W45"
    _sim("healthy", tmp_path / "c" / "x", 3, "2026-11-24T10:00:00Z", name="moving")  # same dir, new logs
    second = fleet.ingest([case / "job"], store, workers=1, job_html=False)
    assert second.ingested[0]["key"] == first.ingested[0]["key"]
    rows = _read(store, "jobs")
    assert [r["week"] for r in rows] == ["2026-W48"]
    assert not list(store.glob("week=2026-W45/*/*.parquet"))


def test_parquet_schema_is_stable(two_jobs: dict) -> None:
    for t, schema in fleet.TABLES.items():
        for f in fleet.parquet_files(two_jobs["store"], t):
            assert pq.read_schema(f).remove_metadata().equals(schema), (t, f)


def test_engines(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown engine"):
        fleet.ingest([tmp_path], tmp_path / "s", engine="spark")
    with pytest.raises(ValueError, match="address is for the ray engine"):
        fleet.ingest([tmp_path], tmp_path / "s", address="auto")


def _normalized_rows(store: Path) -> dict[str, list[str]]:
    """Every table's rows, sorted; `out_dir` (DIR/jobs/<key>, so it names the store) made relative."""
    out = {}
    for t in fleet.TABLES:
        rows = _read(store, t)
        for r in rows:
            if "out_dir" in r:
                r["out_dir"] = Path(r["out_dir"]).relative_to(store).as_posix()
        out[t] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def test_ray_engine_gives_the_local_engines_store_and_weekly_report(two_jobs: dict, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same job dirs through a local Ray (2 CPUs) and through the process pool (the fixture):
    same ingest results, same Parquet rows, same per-job reports, same weekly reports. Ray must be
    installed (`make install` installs the `ray` extra): without it this test fails."""
    import ray

    from forensics.weekly import write_weekly

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    local, store = two_jobs["store"], tmp_path / "ray-store"
    res = fleet.ingest([two_jobs["cases"]], store, workers=2, engine="ray")
    assert not ray.is_initialized()  # the engine started its own Ray, and shut it down
    assert res.ingested == two_jobs["res"].ingested and len(res.ingested) == 2
    assert res.failed == two_jobs["res"].failed and [Path(f["dir"]).name for f in res.failed] == ["junk.tgz"]
    log = (store / "ingest.jsonl").read_text().splitlines()  # in order of completion
    assert len(log) == 3 and set(log) == set((local / "ingest.jsonl").read_text().splitlines())
    rows = _normalized_rows(store)
    assert rows == _normalized_rows(local)
    assert len(rows["jobs"]) == 2 and len(rows["node_health"]) > 0
    for x in res.ingested:
        assert (json.loads((store / "jobs" / x["key"] / "report.json").read_text())
                == json.loads((local / "jobs" / x["key"] / "report.json").read_text()))

    # the weekly reports of both stores: identical but for the store's own path (`store`, in JSON,
    # Markdown and HTML); the plots byte for byte
    reports = {}
    for name, st in (("local", local), ("ray", store)):
        for week in ("2026-W45", "2026-W46"):
            out = tmp_path / f"weekly-{name}-{week}"
            rep = write_weekly(st, out, week)
            assert rep.pop("store") == str(st.resolve())
            # the job report links run from the weekly folder into the store: the store's place, too
            rel = os.path.relpath(st.resolve(), out.resolve())
            texts = {f: re.sub(r"Store: [^\n<]*", "Store: <store>", (out / f).read_text(), count=1).replace(
                Path(rel).as_posix() + "/", "<store>/") for f in ("weekly.md", "weekly.html")}
            parent = st.resolve().parent.name  # the store's path was on that line only (Markdown escapes "_")
            assert not any(v in t for t in texts.values() for v in (parent, parent.replace("_", "\\_")))
            plots = {p.name: p.read_bytes() for p in sorted((out / "plots").glob("*.png"))}
            saved = json.loads((out / "weekly.json").read_text())
            assert saved.pop("store") == str(st.resolve())
            for r in (rep, saved):  # each job's report path lies in its own store
                for j in r.get("jobs", []):
                    if j.get("report"):
                        j["report"] = Path(os.path.relpath(j["report"], st.resolve())).as_posix()
            reports[name, week] = (rep, saved, texts, plots)
    for week in ("2026-W45", "2026-W46"):
        assert reports["ray", week] == reports["local", week], week
    w45 = reports["ray", "2026-W45"][0]
    assert w45["summary"]["jobs"] == 1 and w45["summary"]["interruptions"] == 1
    assert [(c["category"], c["interruptions"]) for c in w45["by_category"]] == [("gpu_lost", 1)]
    assert reports["ray", "2026-W46"][0]["summary"]["jobs"] == 1
    assert len(reports["ray", "2026-W45"][3]) == 3


def test_ray_engine_without_ray(two_jobs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(fleet.EngineError, match=r"pip install 'forensics\[ray\]'"):
        fleet.ingest([two_jobs["a"]], tmp_path / "s", engine="ray")
    r = CliRunner().invoke(app, ["fleet", "ingest", str(two_jobs["a"]), "--store", str(tmp_path / "s"),
                                 "--engine", "ray"])
    assert r.exit_code == 2 and "pip install 'forensics[ray]'" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "s" / "ingest.jsonl").exists()


def test_ray_is_imported_only_by_the_ray_engine() -> None:
    code = ("import sys, forensics.cli, forensics.fleet, forensics.analysis, forensics.weekly; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_fleet_cli(two_jobs: dict, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app

    store = tmp_path / "cli-store"
    r = CliRunner().invoke(app, ["fleet", "ingest", str(two_jobs["a"]), "--store", str(store), "--workers", "1",
                                 "--no-job-html"])
    assert r.exit_code == 0, r.output
    assert [p.name for p in (store / "jobs").iterdir()] and not list((store / "jobs").glob("*/report.html"))
    assert "1 job(s) ingested" in r.output and "2026-W45" in r.output
    assert len(fleet.parquet_files(store, "jobs")) == 1
    bad = CliRunner().invoke(app, ["fleet", "ingest", str(tmp_path / "missing"), "--store", str(store)])
    assert bad.exit_code == 2
    none = CliRunner().invoke(app, ["fleet", "ingest", str(tmp_path / "cli-store" / "week=2026-W45"),
                                    "--store", str(tmp_path / "s2")])
    assert none.exit_code == 1 and "no job directories" in none.output
    eng = CliRunner().invoke(app, ["fleet", "ingest", str(two_jobs["a"]), "--store", str(store), "--engine", "x"])
    assert eng.exit_code == 2
    addr = CliRunner().invoke(app, ["fleet", "ingest", str(two_jobs["a"]), "--store", str(store), "--address", "auto"])
    assert addr.exit_code == 2 and "--address is for --engine ray" in addr.output


def test_fleet_cli_passes_engine_and_address(two_jobs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app

    seen = {}

    def fake_ingest(roots, store, **kw):
        seen.update(kw)
        return fleet.IngestResult(Path(store), ingested=[{"key": "k", "name": "n", "dir": "d", "week": "2026-W45"}])

    monkeypatch.setattr(fleet, "ingest", fake_ingest)
    r = CliRunner().invoke(app, ["fleet", "ingest", str(two_jobs["a"]), "--store", str(tmp_path / "s"),
                                 "--engine", "ray", "--address", "ray://head:10001", "--workers", "3"])
    assert r.exit_code == 0, r.output
    assert seen["engine"] == "ray" and seen["address"] == "ray://head:10001" and seen["workers"] == 3
