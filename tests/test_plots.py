"""Plots: matplotlib figures from report.json and the analysis frames; deterministic PNGs; the
timeline's bucket segments add up to the downtime accounting."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib import colormaps
from matplotlib.figure import Figure
from PIL import Image

from forensics import downtime as dt
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


def test_attempt_of_many_attempts_is_the_last_start_at_or_before_each_time() -> None:
    """1,000 attempts (two starting at the same instant, one without a start) and times before,
    on and between their starts: each row gets the last attempt started by then, null before the
    first, as a scan of every attempt would say."""
    t0 = plots._dt("2026-01-01T00:00:00Z")
    atts = [{"index": i, "start": f"{t0 + timedelta(seconds=60 * i):%Y-%m-%dT%H:%M:%S}Z"} for i in range(1000)]
    atts[500]["start"] = atts[499]["start"]  # same instant: the later in start order wins
    atts.append({"index": 1000, "start": None})
    ts = [t0 + timedelta(seconds=s) for s in (-5, 0, 59.9, 60, 29_940, 30_000, 59_999, 10**6)]
    ts += [t0 + timedelta(seconds=37 * k + 0.5) for k in range(1700)]
    frame = pl.DataFrame({"ts": ts + [None]}).with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
    got = plots._attempt_of(frame["ts"], {"attempts": atts}).to_list()
    starts = sorted(((plots._dt(a["start"]), a["index"]) for a in atts if a["start"]), key=lambda x: x[0])
    want = [max((k for k, (s, _) in enumerate(starts) if s <= t), default=None) for t in ts]
    want = [starts[k][1] if k is not None else None for k in want] + [None]
    assert got == want
    assert got[:8] == [None, 0, 0, 1, 500, 500, 999, 999] and 499 not in got


def _many(n: int) -> tuple[dict, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Report, attempts, steps and checkpoints of n attempts of 100 s each, 20 s apart, all but the
    last crashed, eight logged steps and one save each."""
    t0 = plots._dt("2026-01-01T00:00:00Z")
    reps, rows, steps, ck, inters = [], [], [], [], []
    for i in range(n):
        s = t0 + timedelta(seconds=120 * i)
        reps.append({"index": i, "start": f"{s:%Y-%m-%dT%H:%M:%S}Z", "end": f"{s + timedelta(seconds=100):%Y-%m-%dT%H:%M:%S}Z",
                     "end_reason": "crash" if i < n - 1 else "completed", "resumed_from": None})
        rows.append({"index": i, "start": s, "end": s + timedelta(seconds=100), "first_step_start": s + timedelta(seconds=10),
                     "last_progress": s + timedelta(seconds=80), "end_reason": reps[-1]["end_reason"]})
        steps += [{"ts": s + timedelta(seconds=10 + 10 * k), "host": "h", "rank": 0, "step": k, "step_time_s": 10.0}
                  for k in range(8)]
        ck.append({"ts": s + timedelta(seconds=40), "event": "save_end", "step": 8 * i + 3, "duration_s": 2.0})
        if i < n - 1:
            inters.append({"id": f"i{i}", "attempt": i, "time": f"{s + timedelta(seconds=85):%Y-%m-%dT%H:%M:%S}Z",
                           "kind": "crash", "category": "gpu_lost"})
    utc = pl.col(pl.Datetime).dt.replace_time_zone("UTC")
    return ({"attempts": reps, "interruptions": inters, "downtime": {"wall_s": 120.0 * n - 20}},
            pl.DataFrame(rows).with_columns(utc), pl.DataFrame(steps).with_columns(utc), pl.DataFrame(ck).with_columns(utc))


def test_more_attempts_than_the_bound_are_drawn_together() -> None:
    n = dt.MANY_ATTEMPTS + 50
    rep, att, steps, ck = _many(n)
    fig = plots.timeline(rep, att, ck)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{n} attempts"]
    assert f"{n} attempts (more than {dt.MANY_ATTEMPTS}) drawn on one row" in ax.get_xlabel()
    # one collection per bucket and per interruption kind, plus the starts: not one artist per attempt
    assert len(ax.collections) <= len(plots.BUCKET_COLORS) + len(plots.KIND_COLORS) + 1 and not ax.patches
    drawn = sum(w for c in ax.collections if c.get_paths() and len(c.get_paths()[0].vertices) == 5
                for w in (p.vertices[:, 0].max() - p.vertices[:, 0].min() for p in c.get_paths()))
    segs = plots.segments(rep, att, ck)
    assert drawn * 86400 == pytest.approx(sum((e - s).total_seconds() for s, e, _, _ in segs), rel=1e-6)
    assert len(ax.texts) == plots.MARKS
    fig = plots.step_time(steps, rep, ck)
    ax = fig.axes[0]
    (line,) = ax.lines[:1]
    ys = [y for y in line.get_ydata() if y == y]
    assert len(ys) == steps.height and len(line.get_ydata()) == steps.height + n - 1  # a gap per restart
    restarts = [c for c in ax.collections if "restart" in c.get_label()]
    assert len(restarts) == 1 and len(restarts[0].get_segments()) == n - 1
    saves = [c for c in ax.collections if c.get_label().startswith("checkpoint saved")]
    assert len(saves) == 1 and len(saves[0].get_segments()) == n
    Image.open(io.BytesIO(plots.png_bytes(fig))).verify()


def test_at_the_bound_every_attempt_keeps_its_row() -> None:
    rep, att, steps, ck = _many(dt.MANY_ATTEMPTS)
    ax = plots.timeline(rep, att, ck).axes[0]
    assert len(ax.get_yticklabels()) == dt.MANY_ATTEMPTS and len(ax.patches) == dt.MANY_ATTEMPTS


def test_an_explosion_of_attempts_is_warned_and_still_plotted(tmp_path: Path) -> None:
    """A job of per-attempt folders past the bound: the report warns, the plots are drawn."""
    n = dt.MANY_ATTEMPTS + 5
    t0 = plots._dt("2026-03-01T00:00:00Z")
    for i in range(n):
        d = tmp_path / "job" / f"attempt-{i}"
        d.mkdir(parents=True)
        lines = [f" [{t0 + timedelta(seconds=300 * i + 10 * k):%Y-%m-%d %H:%M:%S}.000000] iteration {k + 1:8d}/    1000 "
                 f"| consumed samples: {512 * (k + 1):12d} | elapsed time per iteration (ms): 10000.0 | lm loss: 2.0E+00 |"
                 for k in range(3)]
        (d / "rank0.log").write_text("\n".join(lines) + "\n")
    a = analyze(tmp_path / "job", tmp_path / "out")
    assert len(a.report["attempts"]) == n
    assert any(w.startswith(f"{n} attempts were reconstructed, more than {dt.MANY_ATTEMPTS}")
               for w in a.report["warnings"])
    assert {p.name for p in (tmp_path / "out" / "plots").iterdir()} >= {"timeline.png", "step_time.png"}


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


def test_heatmap_cells_idle_grey_busy_viridis_missing_transparent() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [{"ts": t0 + timedelta(seconds=10 * k), "host": "n1", "gpu": g, "field": plots.SM_CLOCK,
             "value": (0.0 if (g == 0 and k < 5) else 1400.0 + 20 * g + k)}
            for g in range(2) for k in range(30) if not (g == 1 and k >= 20)]  # GPU 1 stops reporting
    fig = plots.straggler_heatmap(pl.DataFrame(rows), {})
    (img,) = fig.axes[0].images  # one RGBA layer
    cells = img.get_array()
    assert cells.shape == (2, 30, 4) and cells.dtype.name == "uint8"
    assert tuple(cells[0, 0]) == (0xCF, 0xD8, 0xDC, 255)  # idle: the grey
    assert cells[1, 25, 3] == 0  # no sample: transparent
    busy = sorted(r["value"] for r in rows if r["value"] > 0)
    cb = fig.axes[1]  # the colour bar spans the busy samples, from 80% of their median to the fastest
    lo, hi = cb.get_ylim()
    assert (lo, hi) == pytest.approx((min(busy[0], 0.8 * busy[len(busy) // 2]), busy[-1]))
    want = colormaps["viridis"]((1400.0 + 20 + 10 - lo) / (hi - lo), bytes=True)
    assert tuple(cells[1, 10]) == tuple(want)  # busy: viridis over that range


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def test_png_bytes_are_the_pixels_savefig_draws(crashed: Analysis) -> None:
    """png_bytes lays out and draws once and writes RGB: the picture is savefig's, pixel for pixel
    (each of a fresh figure: a second constrained layout of a figure with a colour bar moves it),
    and the figure keeps its layout engine."""
    samples = _fleet_of_clocks()
    report = {"job": {"gpus": 256}, "stragglers": [{"host": "node-20", "gpu": 5, "start": None, "end": None}]}
    makers = [lambda: plots.downtime_breakdown(crashed.report), lambda: plots.straggler_heatmap(samples, report),
              lambda: plots.step_time(None, crashed.report)]
    for make in makers:
        fig = make()
        engine = fig.get_layout_engine()
        got = plots.png_bytes(fig)
        assert fig.get_layout_engine() is engine
        assert Image.open(io.BytesIO(got)).mode == "RGB"  # every pixel opaque: no alpha channel
        buf = io.BytesIO()
        make().savefig(buf, format="png", dpi=plots.DPI, facecolor="white")
        want = _pixels(buf.getvalue())
        assert want.shape == _pixels(got).shape and (want[..., 3] == 255).all()
        assert np.array_equal(_pixels(got), want)
        assert plots.png_bytes(make()) == got  # deterministic


@pytest.mark.parametrize("rows", [7, 8, 700])
def test_column_medians_are_numpys_nanmedian(rows: int) -> None:
    rng = np.random.default_rng(rows)
    a = rng.normal(1400.0, 60.0, (rows, 50)).round(1)
    a[rng.random(a.shape) < 0.3] = np.nan
    a[:, 0] = np.nan
    a[0, 0] = 900.0  # one finite value
    a[:, 1] = 1500.0  # ties
    assert np.array_equal(plots._column_medians(a), np.nanmedian(a, axis=0))
