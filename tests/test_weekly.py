"""The weekly fleet report over 63 simulated jobs in three ISO weeks, checked against the simulated
truth (each case's expected.toml), computed here independently of the store."""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forensics import fleet
from forensics.simulate import load_scenario, simulate
from forensics.taxonomy import AUTO_RECOVERABLE
from forensics.weekly import build_weekly, trend_figures, write_weekly

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "fixtures" / "scenarios"
WEEKS = {"2026-W45": datetime(2026, 11, 2, tzinfo=UTC), "2026-W46": datetime(2026, 11, 9, tzinfo=UTC),
         "2026-W47": datetime(2026, 11, 16, tzinfo=UTC)}
WEEK = "2026-W46"
# small jobs: a few seconds each to analyze
SMALL = {"nccl_info_lines_per_rank": 12, "duration_s": 1800, "train_steps": 700, "checkpoint_interval": 100,
         "dcgm_interval_s": 300, "max_restarts": 1, "queue_s": 120}
ONE_NODE = ["collective_desync", "comm_hang", "ecc_uncorrectable", "gpu_fell_off_bus", "gsp_timeout", "healthy",
            "host_oom", "ib_link_error", "illegal_memory_access", "nan_loss", "nvlink_error", "preemption",
            "storage_error", "time_limit", "user_cancelled", "user_exception"]
TWO_NODE = ["gpu_fell_off_bus", "ib_link_error", "node_fail", "preemption", "healthy", "thermal_straggler"]
LEMON_NAME = "lemon<script>alert(1)"
IMPLICATING_DOMAINS = ("hardware", "network")


def scenario(kind: str, *, nodes: int, start: datetime, name: str, prefix: str, node: int | None = None,
             gpu: int | None = None) -> dict:
    s = load_scenario(SCEN / f"{kind}.toml")
    s["job"].update(SMALL, nodes=nodes, start=start.strftime("%Y-%m-%dT%H:%M:%SZ"), name=name, host_prefix=prefix)
    if kind == "thermal_straggler":
        s["job"]["dcgm_interval_s"] = 30  # the straggler is found from DCGM clocks
    for f in s.get("faults", []):
        f["at_s"] = min(f.get("at_s", 600), 700)
        f["node"] = min(f.get("node", 0), nodes - 1) if node is None else node
        if gpu is not None:
            f["gpu"] = gpu
        if "duration_s" in f:
            f["duration_s"] = 400
        if "ranks" in f:
            f["ranks"] = [r for r in f["ranks"] if r < nodes * 8]
    return s


def fleet_plan() -> list[tuple[str, str, dict, int]]:
    """(week, case name, scenario, seed): 20 jobs a week; segfault only in the middle week (a new
    signature); node-001 implicated by hardware faults in three jobs of the middle week (GPU 5 in
    two of them) and in one job of the week before; every other job has hosts of its own."""
    lemons = [
        ("2026-W45", "gpu_fell_off_bus", 5, WEEKS["2026-W45"] + timedelta(days=3), "lemon-a"),
        (WEEK, "gpu_fell_off_bus", 5, WEEKS[WEEK] + timedelta(days=1, hours=3), LEMON_NAME),
        (WEEK, "gpu_fell_off_bus", 5, WEEKS[WEEK] + timedelta(days=4, hours=9), "lemon-c"),
        (WEEK, "ecc_uncorrectable", 2, WEEKS[WEEK] + timedelta(days=5, hours=1), "lemon-d"),
        (WEEK, "user_exception", 0, WEEKS[WEEK] + timedelta(days=6, hours=2), "not-a-lemon"),  # user code: no blame
    ]
    plan = []
    for w, (week, monday) in enumerate(WEEKS.items()):
        for i in range(20 - sum(1 for lem in lemons if lem[0] == week)):
            start = monday + timedelta(days=i % 7, hours=(i * 5) % 20, minutes=i)
            two = i % 4 == 3
            pool = TWO_NODE if two else ONE_NODE + (["segfault"] if week == WEEK else [])
            kind = pool[(i * 7 + w * 3) % len(pool)]
            name = f"{kind}-{week[-3:]}-{i:02d}"
            s = scenario(kind, nodes=2 if two else 1, start=start, name=name, prefix=f"w{w}j{i:02d}")
            plan.append((week, f"{week}/{name}", s, 1000 * w + i))
    for k, (week, kind, gpu, start, name) in enumerate(lemons):
        s = scenario(kind, nodes=2, start=start, name=name, prefix="node", node=1, gpu=gpu)
        plan.append((week, f"{week}/lemon-{k}", s, 5000 + k))
    return plan


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("fleet")
    cases = tmp / "cases"
    truth = []
    for week, rel, spec, seed in fleet_plan():
        case = simulate(spec, cases / rel, seed)
        exp = tomllib.loads((case / "expected.toml").read_text())
        truth.append({"week": week, "case": case, "exp": exp})
    (cases / "2026-W46" / "broken.tar.gz").write_bytes(b"this is not an archive\n" * 10)
    store = tmp / "store"
    res = fleet.ingest([cases], store, workers=2, job_html=False)  # the job reports are tested elsewhere
    out = tmp / "weekly"
    rep = write_weekly(store, out, WEEK)
    return {"tmp": tmp, "cases": cases, "truth": truth, "store": store, "res": res, "out": out, "rep": rep}


def _in(truth: list[dict], week: str) -> list[dict]:
    return [t["exp"] for t in truth if t["week"] == week]


def _gpu_hours(exps: list[dict]) -> float:
    return sum(e["job"]["gpus"] * e["downtime"]["wall_s"] for e in exps) / 3600.0


def _goodput(exps: list[dict]) -> float:
    return (sum(e["job"]["gpus"] * e["downtime"]["productive_s"] for e in exps)
            / sum(e["job"]["gpus"] * e["downtime"]["wall_s"] for e in exps))


def _stopping(exps: list[dict]) -> list[dict]:
    return [x for e in exps for x in e.get("interruptions", []) if x["kind"] != "slowdown"]


def test_fleet_has_60_jobs_in_three_weeks_and_the_broken_one_is_skipped(world: dict) -> None:
    truth, res = world["truth"], world["res"]
    assert len(truth) >= 60
    assert {t["week"] for t in truth} == set(WEEKS)
    for t in truth:  # the plan's weeks are the truth's weeks
        assert fleet.iso_week(t["exp"]["job"]["start"]) == t["week"]
    assert len(res.ingested) == len(truth)
    assert [Path(f["dir"]).name for f in res.failed] == ["broken.tar.gz"]
    assert "not a directory or archive" in res.failed[0]["error"]
    assert Counter(x["week"] for x in res.ingested) == Counter(t["week"] for t in truth)


def test_weekly_counts_gpu_hours_goodput_match_the_truth(world: dict) -> None:
    rep, exps = world["rep"], _in(world["truth"], WEEK)
    s = rep["summary"]
    assert rep["week"] == WEEK
    assert s["jobs"] == len(exps) == s["jobs_with_gpus"]
    gh = _gpu_hours(exps)
    assert math.isclose(s["gpu_hours"], gh, rel_tol=0.01), (s["gpu_hours"], gh)
    assert abs(s["goodput"] - _goodput(exps)) <= 0.01, (s["goodput"], _goodput(exps))
    lost = sum(e["job"]["gpus"] * (e["downtime"]["wall_s"] - e["downtime"]["productive_s"]) for e in exps) / 3600
    assert math.isclose(s["gpu_hours_lost"], lost, rel_tol=0.03, abs_tol=0.5), (s["gpu_hours_lost"], lost)
    stop = _stopping(exps)
    assert s["interruptions"] == len(stop)
    assert s["slowdowns"] == sum(1 for e in exps for x in e.get("interruptions", []) if x["kind"] == "slowdown")
    assert math.isclose(s["interruptions_per_1000_gpu_hours"], len(stop) * 1000 / gh, rel_tol=0.01)
    assert math.isclose(s["mtbi_gpu_hours"], gh / len(stop), rel_tol=0.01)
    auto = sum(1 for x in stop if x["action"] in AUTO_RECOVERABLE) / len(stop)
    assert abs(s["auto_recoverable_share"] - auto) < 1e-3, (s["auto_recoverable_share"], auto)
    # the other weeks, in the trend
    trend = {t["week"]: t for t in rep["trend"]}
    assert "2026-W47" not in trend and list(trend)[-1] == WEEK
    prev = _in(world["truth"], "2026-W45")
    assert trend["2026-W45"]["jobs"] == len(prev)
    assert math.isclose(trend["2026-W45"]["gpu_hours"], _gpu_hours(prev), rel_tol=0.01)
    assert abs(trend["2026-W45"]["goodput"] - _goodput(prev)) <= 0.01
    assert trend["2026-W44"]["jobs"] == 0


def test_weekly_by_size_and_by_category_match_the_truth(world: dict) -> None:
    rep, exps = world["rep"], _in(world["truth"], WEEK)
    sizes = {b["size"]: b for b in rep["by_size"]}
    assert set(sizes) == {"1-8", "9-64"}
    for label, gpus in (("1-8", 8), ("9-64", 16)):
        group = [e for e in exps if e["job"]["gpus"] == gpus]
        assert sizes[label]["jobs"] == len(group)
        assert math.isclose(sizes[label]["gpu_hours"], _gpu_hours(group), rel_tol=0.01)
        assert abs(sizes[label]["goodput"] - _goodput(group)) <= 0.01
        assert sizes[label]["interruptions"] == len(_stopping(group))
    want = Counter((x["category"], x["domain"]) for e in exps for x in e.get("interruptions", []))
    got = Counter({(c["category"], c["domain"]): c["interruptions"] for c in rep["by_category"]})
    assert got == want
    dom = Counter()
    for (_, d), n in want.items():
        dom[d] += n
    assert Counter({c["domain"]: c["interruptions"] for c in rep["by_domain"]}) == dom
    # GPU-hours lost per category: the job's lost work + termination + restart (+ slowdown) time
    lost = Counter()
    for e in exps:
        xs = e.get("interruptions", [])
        d = e["downtime"]
        stops = [x for x in xs if x["kind"] != "slowdown"]
        for x in xs:
            secs = (d["slowdown_s"] / sum(1 for y in xs if y["kind"] == "slowdown") if x["kind"] == "slowdown"
                    else (d["lost_work_s"] + d["termination_s"] + d["restart_s"]) / len(stops))
            lost[x["category"]] += secs * e["job"]["gpus"] / 3600
    for c in rep["by_category"]:
        assert math.isclose(c["gpu_hours_lost"], lost[c["category"]], rel_tol=0.05, abs_tol=0.2), (c, lost)


def test_repeat_offenders_match_the_truth(world: dict) -> None:
    rep, exps = world["rep"], _in(world["truth"], WEEK)
    hosts: dict[str, set[str]] = {}
    gpus: dict[tuple[str, int], set[str]] = {}
    for e in exps:
        for x in e.get("interruptions", []):
            if x.get("culprit_host") and (x["domain"] in IMPLICATING_DOMAINS or x["action"] == "exclude_node_and_restart"):
                hosts.setdefault(x["culprit_host"], set()).add(e["job"]["name"])
                if x.get("culprit_gpu") is not None:
                    gpus.setdefault((x["culprit_host"], x["culprit_gpu"]), set()).add(e["job"]["name"])
        for s in e.get("stragglers", []):
            hosts.setdefault(s["host"], set()).add(e["job"]["name"])
            gpus.setdefault((s["host"], s["gpu"]), set()).add(e["job"]["name"])
    want_hosts = {h: js for h, js in hosts.items() if len(js) >= 2}
    want_gpus = {g: js for g, js in gpus.items() if len(js) >= 2}
    assert set(want_hosts) == {"node-001"} and set(want_gpus) == {("node-001", 5)}  # the plan is what we think
    ro = rep["repeat_offenders"]
    got_hosts = {h["host"]: {j["job_name"] for j in h["implicated_by"]} for h in ro["hosts"]}
    assert got_hosts == want_hosts
    got_gpus = {(g["host"], g["gpu"]): {j["job_name"] for j in g["implicated_by"]} for g in ro["gpus"]}
    assert got_gpus == want_gpus
    lemon = ro["hosts"][0]
    assert lemon["jobs"] == 3 and lemon["jobs_previous_weeks"] == 1
    assert "not-a-lemon" not in got_hosts["node-001"]
    assert any(x["xid"] == "79" for x in lemon["xids"])
    for j in lemon["implicated_by"]:  # each job comes with the evidence that implicates the host
        ev = [e for e in j["evidence"] if e["path"]]
        assert ev, j
        case = next(t["case"] for t in world["truth"] if t["exp"]["job"]["name"] == j["job_name"])
        for e in ev:
            line = (case / "job" / e["path"]).read_text().split("\n")[e["line"] - 1]
            assert e["text"].strip() in line


def test_new_signatures_and_checkpoint_advice(world: dict) -> None:
    rep, exps = world["rep"], _in(world["truth"], WEEK)
    new = rep["new_signatures"]
    assert new["lookback_weeks"] == ["2026-W42", "2026-W43", "2026-W44", "2026-W45"]
    cats = {n["category"] for n in new["signatures"]}
    assert "framework_bug" in cats  # segfaults appear first in this week
    names = {n["signature"] for n in new["signatures"]}
    assert "xid-79" not in names and names  # the GPU fell off the bus in the previous week too
    for a in rep["checkpoint_advice"]:
        gpus = 8 if a["size"] == "1-8" else 16
        group = [e for e in exps if e["job"]["gpus"] == gpus]
        mtbi = sum(e["downtime"]["wall_s"] for e in group) / len(_stopping(group))
        assert math.isclose(a["mtbi_s"], mtbi, rel_tol=0.02)
        assert a["checkpoint_cost_s"] == pytest.approx(30.0, rel=0.15)  # checkpoint_cost_s = 30 (±10 %)
        assert math.isclose(a["advised_interval_s"], math.sqrt(2 * a["checkpoint_cost_s"] * a["mtbi_s"]), rel_tol=1e-3)


def test_weekly_outputs_are_self_contained_escaped_and_deterministic(world: dict) -> None:
    out, tmp = world["out"], world["tmp"]
    doc = (out / "weekly.html").read_text()
    assert "<script" not in doc.lower() and "&lt;script&gt;alert(1)" in doc
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", doc)
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,', doc)
    assert len(imgs) == 3
    md = (out / "weekly.md").read_text()
    assert "<script>" not in md and "lemon&lt;script&gt;alert(1)" in md
    assert json.loads((out / "weekly.json").read_text())["summary"] == world["rep"]["summary"]
    again = tmp / "weekly-again"
    write_weekly(world["store"], again, WEEK)
    for name in ("weekly.html", "weekly.md", "weekly.json", "plots/trend_goodput.png",
                 "plots/trend_gpu_hours.png", "plots/trend_interruptions.png"):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    # default week: the latest in the store
    assert build_weekly(world["store"])["week"] == "2026-W47"


def test_reingest_replaces_rows(world: dict) -> None:
    store, truth = world["store"], world["truth"]
    one = next(t for t in truth if t["exp"]["job"]["name"] == "lemon-c")
    before = build_weekly(store, WEEK)
    res = fleet.ingest([one["case"]], store, workers=1, job_html=False)
    assert len(res.ingested) == 1 and not res.failed
    after = build_weekly(store, WEEK)
    for k in ("jobs", "gpu_hours", "interruptions", "goodput"):
        assert after["summary"][k] == before["summary"][k], k
    assert after["repeat_offenders"] == before["repeat_offenders"]
    assert len(fleet.parquet_files(store, "jobs")) == len(truth)


def test_weekly_cli(world: dict) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app

    out = world["tmp"] / "cli-weekly"
    r = CliRunner().invoke(app, ["weekly", "--store", str(world["store"]), "--week", "2026-W45", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "2026-W45" in r.output and (out / "weekly.html").is_file()
    assert json.loads((out / "weekly.json").read_text())["summary"]["jobs"] == len(_in(world["truth"], "2026-W45"))
    bad = CliRunner().invoke(app, ["weekly", "--store", str(world["store"]), "--week", "2026-48", "--out", str(out)])
    assert bad.exit_code == 2
    empty = CliRunner().invoke(app, ["weekly", "--store", str(world["tmp"] / "nothing"), "--out", str(out)])
    assert empty.exit_code == 2


def test_weekly_links_each_jobs_own_report(world: dict) -> None:
    rep, out = world["rep"], world["out"]
    assert len(rep["jobs"]) == rep["summary"]["jobs"] == 20
    doc = (out / "weekly.html").read_text()
    md = (out / "weekly.md").read_text()
    for j in rep["jobs"]:
        assert j["report"] and Path(j["report"]).is_file()  # job_html=False: the job's report.md
        href = Path(os.path.relpath(j["report"], out.resolve())).as_posix()
        assert f'<a href="{href}">{Path(j["report"]).name}</a>' in doc, href
        assert (out / href).resolve() == Path(j["report"]).resolve()
        assert f"]({href})" in md


def test_cascade_signatures_are_not_news(world: dict) -> None:
    from forensics.signatures import load_catalog

    roles = {s.id: s.role for s in load_catalog().signatures}
    names = [n["signature"] for n in world["rep"]["new_signatures"]["signatures"]]
    assert names and all(roles.get(n, "root") == "root" for n in names), names
    for teardown in ("sacct-failed", "elastic-sigabrt", "nccl-abort"):
        assert roles[teardown] != "root" and teardown not in names


def test_trend_plots_have_the_job_reports_size_and_style(world: dict) -> None:
    from PIL import Image

    from forensics import plots

    width = int(plots.WIDTH * plots.DPI)
    for name in ("trend_goodput.png", "trend_gpu_hours.png", "trend_interruptions.png"):
        im = Image.open(world["out"] / "plots" / name)
        assert im.size[0] == width and im.size[1] >= 300, (name, im.size)
    figs = trend_figures(world["rep"])
    for fig in figs.values():
        ax = fig.axes[0]
        assert not ax.spines["top"].get_visible() and ax.get_title(loc="left")
