"""Plots: matplotlib figures from report.json and the analysis frames; deterministic PNGs; the
timeline's bucket segments add up to the downtime accounting."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from matplotlib.figure import Figure
from PIL import Image

from forensics import plots
from forensics.analysis import Analysis, analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
SEED = 23


def _analyzed(factory: pytest.TempPathFactory, scenario: str) -> Analysis:
    tmp = factory.mktemp(scenario)
    case = simulate(load_scenario(ROOT / "fixtures" / "scenarios" / f"{scenario}.toml"), tmp / "case", SEED)
    return analyze(case / "job", tmp / "out")


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    """Two attempts: a GPU fell off the bus, the job was restarted and completed."""
    return _analyzed(tmp_path_factory, "gpu_fell_off_bus")


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return _analyzed(tmp_path_factory, "thermal_straggler")


def _frames(a: Analysis) -> dict[str, pl.DataFrame]:
    return {"attempts": a.attempts, "steps": a.steps, "checkpoints": a.sql("SELECT * FROM checkpoints"),
            "dcgm_samples": a.sql(f"SELECT * FROM dcgm_samples WHERE field = '{plots.SM_CLOCK}'")}


def _texts(fig: Figure) -> str:
    return " ".join(t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")))


@pytest.mark.parametrize("which", ["crashed", "straggler"])
def test_timeline_segments_add_up_to_the_downtime_buckets(which: str, request: pytest.FixtureRequest) -> None:
    a: Analysis = request.getfixturevalue(which)
    f = _frames(a)
    segs = plots.segments(a.report, f["attempts"], f["checkpoints"])
    d = a.report["downtime"]
    total: dict[str, float] = {}
    for s, e, lab, _ in segs:
        assert e > s
        total[lab] = total.get(lab, 0.0) + (e - s).total_seconds()
    assert sum(total.values()) == pytest.approx(d["wall_s"], abs=0.01)
    for b in ("startup", "checkpoint", "lost_work", "termination", "restart"):
        assert total.get(b, 0.0) == pytest.approx(d[f"{b}_s"], abs=1.0), b
    # slowdown has no place in time: it is carved out of the productive segments
    assert total.get("productive", 0.0) == pytest.approx(d["productive_s"] + d["slowdown_s"], abs=1.0)
    # contiguous, in order, no overlap
    for (_, e1, _, _), (s2, _, _, _) in zip(segs, segs[1:], strict=False):
        assert abs((s2 - e1).total_seconds()) < 1e-3


def test_timeline_places_restart_and_termination(crashed: Analysis) -> None:
    f = _frames(crashed)
    segs = plots.segments(crashed.report, f["attempts"], f["checkpoints"])
    by = {lab: [(s, e, att) for s, e, la, att in segs if la == lab] for lab in plots.BUCKET_COLORS}
    first, second = crashed.report["attempts"]
    assert [att for *_, att in by["termination"]] == [first["index"]]
    assert all(att == second["index"] for *_, att in by["restart"])
    # the termination bucket ends where the failed attempt ends
    end0 = plots._dt(first["end"])
    assert abs((by["termination"][-1][1] - end0).total_seconds()) < 1e-3


def test_timeline_from_report_alone(crashed: Analysis) -> None:
    """Without the frames only what report.json says is placed: restart gaps and the tail of a
    failed attempt after its fault; the rest is 'running', never a guessed bucket."""
    segs = plots.segments(crashed.report)
    labels = {lab for _, _, lab, _ in segs}
    assert labels <= {"running", "termination", "restart"}
    assert "restart" in labels and "termination" in labels
    wall = sum((e - s).total_seconds() for s, e, _, _ in segs)
    assert wall == pytest.approx(crashed.report["downtime"]["wall_s"], abs=0.01)
    fig = plots.timeline(crashed.report)
    assert "running" in _texts(fig)


def test_every_plot_is_a_figure_with_what_it_promises(crashed: Analysis, straggler: Analysis) -> None:
    f = _frames(crashed)
    tl = plots.timeline(crashed.report, f["attempts"], f["checkpoints"])
    assert isinstance(tl, Figure)
    assert "gpu_lost" in _texts(tl)  # the interruption is marked with its category
    assert "attempt 1" in _texts(tl)
    st = plots.step_time(f["steps"], crashed.report, f["checkpoints"])
    assert "restart" in _texts(st) and "checkpoint saved" in _texts(st)
    sf = _frames(straggler)
    st2 = plots.step_time(sf["steps"], straggler.report, sf["checkpoints"])
    assert "slow episode" in _texts(st2)
    hm = plots.straggler_heatmap(sf["dcgm_samples"], straggler.report)
    s = straggler.report["stragglers"][0]
    red = [t.get_text() for t in hm.axes[0].get_yticklabels() if t.get_color() == "#d32f2f"]
    assert red == [f"{s['host']} GPU {s['gpu']}"]
    db = plots.downtime_breakdown(crashed.report)
    assert "goodput" in _texts(db)
    assert {p.get_width() > 0 for p in db.axes[0].patches} == {True, False}  # zero slowdown, the rest not


def test_empty_inputs_give_a_figure_with_a_note(crashed: Analysis) -> None:
    hm = plots.straggler_heatmap(None, crashed.report)
    assert "No DCGM" in _texts(hm)
    hm2 = plots.straggler_heatmap(pl.DataFrame(schema={"ts": pl.Datetime("us", "UTC"), "host": pl.Utf8,
                                                       "gpu": pl.Int64, "field": pl.Utf8, "value": pl.Float64}),
                                  crashed.report)
    assert "No DCGM" in _texts(hm2)
    assert "No training step" in _texts(plots.step_time(None, crashed.report))
    empty = {**crashed.report, "attempts": [], "downtime": {"wall_s": 0.0}}
    assert "No attempts" in _texts(plots.timeline(empty))
    assert "No wall time" in _texts(plots.downtime_breakdown(empty))
    for fig in (hm, plots.timeline(empty)):
        Image.open(io.BytesIO(plots.png_bytes(fig))).verify()


def test_pngs_are_deterministic_and_carry_no_metadata(crashed: Analysis) -> None:
    f = _frames(crashed)
    a = plots.render_all(crashed.report, f)
    b = plots.render_all(crashed.report, f)
    assert set(a) == set(plots.PLOT_NAMES)
    assert a == b
    for name, png in a.items():
        im = Image.open(io.BytesIO(png))
        assert im.format == "PNG", name
        assert not {"Software", "Creation Time", "date:create", "Date"} & set(im.info), (name, im.info)
        w, h = im.size
        assert w == plots.WIDTH * plots.DPI and 100 < h < 1300
    # the PNGs analyze wrote are the same bytes
    for name in plots.PLOT_NAMES:
        assert (crashed.out_dir / "plots" / f"{name}.png").read_bytes() == a[name]


def test_a_plot_that_fails_is_reported_not_fatal(crashed: Analysis) -> None:
    errors: dict[str, str] = {}
    broken = {"steps": pl.DataFrame({"ts": [1], "step_time_s": ["x"]})}
    out = plots.render_all(crashed.report, broken, errors)
    assert "step_time" in errors and "step_time" not in out
    assert {"timeline", "downtime", "straggler_heatmap"} <= set(out)


def test_analysis_plot_methods(crashed: Analysis) -> None:
    reopened = Analysis.open(crashed.out_dir)
    for fig in (reopened.plot_timeline(), reopened.plot_step_time(), reopened.plot_straggler_heatmap(),
                reopened.plot_downtime()):
        assert isinstance(fig, Figure)
        Image.open(io.BytesIO(plots.png_bytes(fig))).verify()


def test_step_series_uses_one_reporter_per_attempt() -> None:
    t0 = plots._dt("2026-01-01T00:00:00Z")
    rows = []
    for rank in (0, 1):
        for k in range(10):
            rows.append({"ts": t0 + timedelta(seconds=10 * k + rank * 0.1), "host": "h", "rank": rank, "step": k,
                         "step_time_s": 1.0 + rank})
    steps = pl.DataFrame(rows).with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
    rep = {"attempts": [{"index": 0, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:02:00Z"}]}
    s = plots._step_series(steps, rep)
    assert s.height == 10 and s["rank"].unique().to_list() == [0]


def _fleet_of_clocks(hosts: int = 32, per_host: int = 8) -> pl.DataFrame:
    """SM-clock samples of 256 GPUs as DCGM exports them (long: ts, host, gpu, field, value): all
    at 1980 MHz except a GPU that died half-way (no samples after), a straggler at 1400 MHz and
    an unreported slow one at 1700 MHz."""
    t0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    rows = []
    for h in range(1, hosts + 1):
        for g in range(per_host):
            for k in range(60):
                if (h, g) == (7, 3) and k >= 30:
                    continue
                v = 1400.0 if (h, g) == (20, 5) else 1700.0 if (h, g) == (30, 1) else 1980.0 - (k % 3)
                rows.append((t0 + timedelta(seconds=10 * k), f"node-{h}", g, "DCGM_FI_DEV_SM_CLOCK", v))
    return pl.DataFrame(rows, schema={"ts": pl.Datetime("us", "UTC"), "host": pl.Utf8, "gpu": pl.Int64,
                                      "field": pl.Utf8, "value": pl.Float64}, orient="row")


def test_heatmap_names_flagged_and_worst_rows_at_scale() -> None:
    samples = _fleet_of_clocks()
    report = {"job": {"gpus": 256},
              "interruptions": [{"kind": "crash", "culprit": {"host": "node-7", "gpu": 3}}],
              "stragglers": [{"host": "node-20", "gpu": 5, "start": None, "end": None}]}
    fig = plots.straggler_heatmap(samples, report)
    ax = fig.axes[0]
    ticks = {t.get_text(): t for t in ax.get_yticklabels()}
    for name in ("node-7 GPU 3", "node-20 GPU 5", "node-30 GPU 1"):
        assert name in ticks, sorted(ticks)
    assert ticks["node-7 GPU 3"].get_color() == "#d32f2f" and ticks["node-20 GPU 5"].get_color() == "#d32f2f"
    assert ticks["node-30 GPU 1"].get_color() != "#d32f2f"  # named as one of the worst, not flagged
    assert len(ticks) <= 2 + plots.WORST_LABELLED
    rows = [int(round(y)) for y in ax.get_yticks()]
    # rows sorted by host in natural order: node-7 < node-20 < node-30; 8 rows per host
    assert rows == sorted(rows) and rows[:3] == [6 * 8 + 3, 19 * 8 + 5, 29 * 8 + 1][:3]
    title = ax.get_title(loc="left")
    assert "(256 GPUs)" in title and "node-7 GPU 3" in title
    other = plots.straggler_heatmap(samples, {**report, "job": {"gpus": 512}})
    assert "256 of the job's 512 GPUs" in other.axes[0].get_title(loc="left")
    assert plots.flagged_gpus(report) == [("node-20", 5), ("node-7", 3)]
