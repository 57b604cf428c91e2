"""One clock: a host whose clock is off by ±90 s is detected, named and corrected, and the
verdict, culprit and downtime do not change; local-time logs with a zone in job.toml give the
same UTC times as UTC logs."""

from __future__ import annotations

import re
import tomllib
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "fixtures" / "scenarios"

_SHAPES = [
    # (regex, strptime format) of every stamp the simulator writes on a node
    (re.compile(r"\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d"), None),
    (re.compile(r"\b[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"), "%a %b %d %H:%M:%S %Y"),
    (re.compile(r"(?<=[IWEF])\d{4} \d\d:\d\d:\d\d(?=\.)"), "%m%d %H:%M:%S"),
]


def _shift_text(text: str, seconds: int, year: int) -> str:
    def iso(m: re.Match) -> str:
        raw = m.group(0)
        sep = raw[10]
        d = datetime.strptime(raw[:10] + " " + raw[11:], "%Y-%m-%d %H:%M:%S") + timedelta(seconds=seconds)
        return d.strftime(f"%Y-%m-%d{sep}%H:%M:%S")

    def fmt(f: str, pad_day: bool = False):  # noqa: ANN202
        def sub(m: re.Match) -> str:
            raw = m.group(0)
            if f.startswith("%m%d"):
                d = datetime.strptime(f"{year}{raw}", "%Y" + f) + timedelta(seconds=seconds)
                return d.strftime(f)
            d = datetime.strptime(re.sub(r" +", " ", raw), f.replace("%d", "%d")) + timedelta(seconds=seconds)
            return d.strftime("%a %b ") + f"{d.day:2d}" + d.strftime(" %H:%M:%S %Y")
        return sub

    text = _SHAPES[0][0].sub(iso, text)
    text = _SHAPES[1][0].sub(fmt(_SHAPES[1][1]), text)
    return _SHAPES[2][0].sub(fmt(_SHAPES[2][1]), text)


def shift_host_clock(job: Path, host: str, seconds: int, year: int) -> None:
    """Rewrite every stamp in the files of one host (its node folder and its rank logs)."""
    for p in sorted(job.rglob("*")):
        if p.is_file() and host in p.relative_to(job).parts:
            p.write_text(_shift_text(p.read_text(), seconds, year))


def _case(tmp: Path, name: str, seed: int = 5, **job_overrides: object) -> Path:
    spec = load_scenario(SCEN / f"{name}.toml")
    spec["job"].update(job_overrides)
    return simulate(spec, tmp / f"{name}-{len(list(tmp.iterdir()))}", seed)


def _summary(rep: dict) -> tuple:
    v = rep["interruptions"][0]
    return v["category"], v["culprit"]["host"], v["culprit"]["gpu"], v["kind"]


@pytest.mark.parametrize("seconds", [90, -90])
def test_skewed_host_is_named_and_corrected(tmp_path: Path, seconds: int) -> None:
    case = _case(tmp_path, "gpu_fell_off_bus")
    exp = tomllib.loads((case / "expected.toml").read_text())
    culprit = exp["interruptions"][0]["culprit_host"]
    base = analyze(case / "job", tmp_path / "base", html=False).report
    assert not any("clock skew" in w for w in base["warnings"])
    year = int(exp["job"]["start"][:4])
    shift_host_clock(case / "job", culprit, seconds, year)
    rep = analyze(case / "job", tmp_path / "skewed", html=False).report
    assert any(f"clock skew: host {culprit} runs 90.0 s {'ahead of' if seconds > 0 else 'behind'}" in w
               for w in rep["warnings"]), rep["warnings"]
    assert _summary(rep) == _summary(base)
    for k, v in base["downtime"].items():
        assert rep["downtime"][k] == pytest.approx(v, abs=1.0), k


def test_local_time_with_zone_equals_utc(tmp_path: Path) -> None:
    utc = analyze(_case(tmp_path, "ib_link_error", timezone="UTC") / "job", tmp_path / "u").report
    local = analyze(_case(tmp_path, "ib_link_error", timezone="America/New_York") / "job", tmp_path / "l").report
    assert [a["start"] for a in utc["attempts"]] == [a["start"] for a in local["attempts"]]
    assert [a["end"] for a in utc["attempts"]] == [a["end"] for a in local["attempts"]]
    assert [x["time"] for x in utc["interruptions"]] == [x["time"] for x in local["interruptions"]]
    assert utc["downtime"] == local["downtime"]
    assert [e["time"] for e in utc["verdict"]["evidence"]] == [e["time"] for e in local["verdict"]["evidence"]]
