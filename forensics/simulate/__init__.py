"""Scenario simulator: turn a scenario (TOML) into a realistic job directory plus the truth.

`simulate(scenario, out_dir, seed)` writes `<out>/job/` (what a person would collect after the
job ended: per-rank logs, torchrun agent logs, per-node kernel logs and DCGM exports, Slurm
records) and `<out>/expected.toml` (the ground truth: verdict, interruptions, attempts, downtime
per DESIGN §7, stragglers). Line formats follow `reference/` (see docs/simulator.md).

Determinism: every random draw comes from `random.Random` instances seeded from `seed` (and from
stable string keys); no wall-clock time, no global RNG, sorted iteration. Times are integer
microseconds since the job start, so the downtime buckets sum to the wall time exactly.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from forensics.simulate.attempts import build_timeline
from forensics.simulate.config import make_config, make_faults
from forensics.simulate.dialects import draw
from forensics.simulate.frameworks import benign_noise, render_framework
from forensics.simulate.timeline import Case
from forensics.simulate.truth import dumps_toml, toml_value, truth
from forensics.simulate.write_dcgm import write_dcgm
from forensics.simulate.write_kernel import kernel_style, write_kernel_logs
from forensics.simulate.write_ranks import write_agent_logs, write_rank_logs
from forensics.simulate.write_slurm import write_slurm

# ----------------------------------------------------------------------------- entry points


def load_scenario(path: str | Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


DIALECTS = ("default", "random")


def simulate(scenario: dict[str, Any], out_dir: Path, seed: int, dialect: str | None = None,
             dialect_seed: int | None = None) -> Path:
    """Write `<out_dir>/job/` and `<out_dir>/expected.toml` for the scenario; return out_dir.

    `dialect` (else the scenario's `[job] dialect`, else "default"): "default" writes the
    scenario's own formats; "random" draws the line dialects per host and per source
    (`dialects.draw`) from `dialect_seed` (else `[job] dialect_seed`, else `seed`) and records
    the draw in `<out_dir>/dialect.json`. The truth does not depend on the dialect."""
    out_dir = Path(out_dir)
    job_spec = scenario.get("job", {})
    mode = str(dialect if dialect is not None else job_spec.get("dialect", "default"))
    if mode not in DIALECTS:
        raise ValueError(f"unknown dialect {mode!r}; one of {', '.join(DIALECTS)}")
    cfg = make_config(job_spec, seed)
    case = Case(cfg, make_faults(scenario.get("faults", [])), seed)
    build_timeline(case)
    if mode == "random":
        dseed = int(dialect_seed if dialect_seed is not None else job_spec.get("dialect_seed", seed))
        case.dialect = draw(case.hosts, dseed, cfg.name)
    for a in case.attempts:
        render_framework(case, a)
    benign_noise(case)
    job = out_dir / "job"
    job.mkdir(parents=True, exist_ok=True)
    meta = [f"name = {toml_value(cfg.name)}", f"gpus_per_node = {cfg.gpus_per_node}"]
    if cfg.timezone_set:
        meta.append(f"timezone = {toml_value(cfg.tz_name)}")
    if any(kernel_style(case, h) == "syslog" for h in case.hosts):
        meta.append(f"year = {cfg.start.astimezone(cfg.tz).year}")
    (job / "job.toml").write_text("\n".join(meta) + "\n", encoding="utf-8")
    write_slurm(case, job)
    write_agent_logs(case, job)
    write_kernel_logs(case, job)
    write_dcgm(case, job)
    write_rank_logs(case, job)
    (out_dir / "expected.toml").write_text(dumps_toml(truth(case)), encoding="utf-8")
    if case.dialect is not None:
        (out_dir / "dialect.json").write_text(json.dumps(case.dialect.describe(), indent=1, sort_keys=True) + "\n",
                                              encoding="utf-8")
    return out_dir
