"""The report's plots drawn by a second process that is started at launch (`forensics analyze`
without `--no-html`): it imports matplotlib (about half a second of CPU for a fresh process)
on the other core while this process reads the logs and reaches the verdict, then draws the PNGs
while this one writes the store.

`prewarm()` starts it; `render_all()` hands it the report and the plots' frames once (pickled
over its stdin; a LazyFrame travels as its plan) and reads back the PNG bytes and the plot errors
(pickled over its stdout; both ends are this program, never a file). Without a started worker, or
when it fails in any way (no interpreter, a frame that cannot be pickled, a crash, a timeout), the
plots are drawn here by `plots.render_all`: the same function on the same data, so the same bytes.
The worker starts only when a core is idle at launch (`_core_free`: the tasks runnable at that
instant leave a core free besides this process): on a busy machine it could not run beside the analysis and would only add its own
imports (polars and numpy again, about 0.5 s of CPU). `FORENSICS_PLOT_WORKER=always|never`
overrides that. The verdict path never imports matplotlib (tests/test_verdict_path.py); with the
worker, the analysing process does not import it at all.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["ENV_VAR", "TIMEOUT_S", "prewarm", "render_all", "serve"]

ENV_VAR = "FORENSICS_PLOT_WORKER"  # always | never | idle (the default)
TIMEOUT_S = 900.0  # the worker must answer within this (then it is killed and the plots drawn here)
_ROOT = str(Path(__file__).resolve().parents[1])  # this checkout's forensics, whatever the cwd holds
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from forensics.plot_worker import serve; serve()"

_worker: subprocess.Popen | None = None


def _runnable_now() -> int | None:
    """Tasks running or runnable at this instant, this one included (/proc/loadavg's fourth
    field); None where there is no such file."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _core_free() -> bool:
    """A core is idle besides this process' own: the tasks runnable right now (Linux) or the
    1-minute load average (elsewhere) leave one of this process' cores free. On a busy machine the
    worker would not run beside the analysis, only add its own imports' CPU. (The load average
    alone would also count this tool's own previous runs, seconds ago.)"""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    now = _runnable_now()
    if now is not None:
        return now - 1 <= cores - 2
    try:
        return os.getloadavg()[0] <= cores - 1
    except OSError:
        return False


def prewarm(when: str | None = None) -> bool:
    """Start the worker (once per process) if `when` (default: the FORENSICS_PLOT_WORKER
    variable) says so: "always", "never", or "idle" (the default: when a core is free besides
    this process', see `_core_free`). False when no worker runs: the plots will be drawn in this process."""
    global _worker
    if _worker is not None:
        return True
    when = when or os.environ.get(ENV_VAR) or "idle"
    if when == "never" or (when != "always" and not _core_free()):
        return False
    try:
        _worker = subprocess.Popen([sys.executable, "-c", _BOOT, _ROOT], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
    except OSError:
        return False
    atexit.register(_discard)
    return True


def _discard() -> None:
    """At exit: a worker that was never given a job (the analysis failed) is stopped."""
    global _worker
    proc, _worker = _worker, None
    if proc is not None and proc.poll() is None:
        proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)


def _ask(proc: subprocess.Popen, report: dict, frames: dict) -> tuple[dict[str, bytes], dict[str, str]] | None:
    try:
        job = pickle.dumps((report, frames), protocol=pickle.HIGHEST_PROTOCOL)
        out, _ = proc.communicate(job, timeout=TIMEOUT_S)
    except (Exception, subprocess.TimeoutExpired):  # noqa: BLE001 - any failure: draw the plots here
        proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        return None
    if proc.returncode != 0 or not out:
        return None
    try:
        pngs, errs = pickle.loads(out)  # noqa: S301 - our own child's answer over a pipe
    except Exception:  # noqa: BLE001
        return None
    return pngs, errs


def render_all(report: dict, frames: dict[str, pl.DataFrame | pl.LazyFrame | None] | None = None,
               errors: dict[str, str] | None = None) -> dict[str, bytes]:
    """`plots.render_all`, by the started worker if there is one (it takes one job), else here."""
    global _worker
    proc, _worker = _worker, None
    if proc is not None:
        got = _ask(proc, report, dict(frames or {}))
        if got is not None:
            if errors is not None:
                errors.update(got[1])
            return got[0]
    from forensics import plots  # matplotlib loads here only when no worker drew the plots

    return plots.render_all(report, frames, errors)


def serve() -> None:
    """The worker's side: import the plots (the point of starting early), draw one job, answer."""
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing a library prints may corrupt the answer
    from forensics import plots

    job = sys.stdin.buffer.read()
    if not job:  # the analysis ended without plots
        return
    report, frames = pickle.loads(job)  # noqa: S301 - our own parent's job over a pipe
    errors: dict[str, str] = {}
    pngs = plots.render_all(report, frames, errors)
    answer.write(pickle.dumps((pngs, errors), protocol=pickle.HIGHEST_PROTOCOL))
    answer.flush()
