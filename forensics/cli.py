"""The `forensics` command: a thin layer over the Python API."""

from __future__ import annotations

import copy
import json
import os
import signal
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

# numpy's import (on the first analysis) starts OpenBLAS's thread pool, one thread per core, whose
# start costs about 0.1 s of CPU that a 2-core machine takes from the analysis; nothing here does BLAS
# work worth threads (the line classifier's dot products are a few hundred numbers). A value the user
# set is kept. (Set before anything imports numpy: tests/test_small_path.py.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer  # noqa: E402
from rich.markup import escape  # noqa: E402

from forensics import __version__  # noqa: E402
from forensics.cli_params import install as plain_params  # noqa: E402
from forensics.outpaths import dir_problem, file_problem  # noqa: E402
from forensics.terminal import console_for, interactive, stdout_gone  # noqa: E402

plain_params()  # str / Path / bool options without pydantic's adapters (forensics/cli_params.py)

# Plain (click) help: no rich markup to swallow "[ray]", no "<bool>" beside flags; -h as --help.
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) or SIGTERM: unwinds through every cleanup (temp dirs, the half-written
    output folder), then the CLI says what was kept in one line and exits 130."""


# what a Ctrl-C leaves behind, said in one line; commands that keep partial results say so
_on_interrupt = "interrupted, nothing written"


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted


# set by a command whose work is all done and closed (`analyze`): the process may then end without
# Python's teardown of its modules (`_end_now`)
_done = False


class _App(typer.Typer):
    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _interrupt)
        global _done
        _done = False  # a second call in one process (a notebook, a test) starts unlatched
        try:
            return typer.Typer.__call__(self._lean(args, kwargs), *args, **kwargs)
        except Interrupted:
            sys.stderr.write(f"\nforensics: {_on_interrupt}\n")
            sys.exit(130)
        except SystemExit as exc:
            if _done and exc.code in (0, None):
                _end_now()
            raise

    def _lean(self, args: tuple, kwargs: dict) -> typer.Typer:
        """This app with only the command the command line names: typer builds a click command, its
        parameters read from the signature, for every registered command on each run (0.04 s of a
        small bundle's 1 s); one is enough to run one. The whole app for everything else: no command
        or an unknown one (help, `No such command`), a group (`fleet`), shell completion."""
        argv = kwargs.get("args", args[0] if args else None)
        argv = sys.argv[1:] if argv is None else list(argv)
        name = next((a for a in argv if not a.startswith("-")), None)  # the app's own options take no value
        if name is None or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
            return self
        named = [c for c in self.registered_commands
                 if (c.name or typer.main.get_command_name(c.callback.__name__ if c.callback else "")) == name]
        if len(named) != 1:
            return self
        lean = copy.copy(self)
        lean.registered_commands, lean.registered_groups = named, []
        return lean


def _end_now() -> None:
    """End the process once its command's work is done and closed (outputs renamed into place, the
    store closed, every worker pool joined): what Python's own exit would add is the teardown of
    every module loaded (polars, numpy, DuckDB: 0.05-0.15 s), nothing the outputs need. Not under
    coverage measurement (it saves its data at exit), not when the terminal output cannot be
    flushed (the usual exit then reports it), and only in a process whose main program is this CLI
    (the `forensics` script or `python -m forensics.cli`): `app([...])` called from a notebook kernel
    or a test runner returns there as usual."""
    if "coverage" in sys.modules or not _cli_is_main():
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(0)


def _cli_is_main() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:  # python -m forensics.cli (this module runs as __main__, its spec keeps the name)
        return spec.name == "forensics.cli"
    # the console script: its __main__ is a file named like the script that imports `app`
    return Path(sys.argv[0]).stem == "forensics" and getattr(main, "app", None) is app


app = _App(no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT,
                  help="Offline forensic analysis of the post-mortem logs of GPU training jobs.")
JSON_HELP = "Also write the result as JSON to PATH; '-': JSON on stdout instead of the text output."


class Engine(StrEnum):
    local = "local"
    ray = "ray"


class DialectMode(StrEnum):
    default = "default"
    random = "random"


err = console_for(sys.stderr)
out = console_for(sys.stdout)


def _fail(msg: str, code: int = 2) -> None:
    sys.stderr.write(f"forensics: {msg}\n")
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        print(f"forensics {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Print the version and exit.")] = False,
         color: Annotated[bool | None, typer.Option(
             "--color/--no-color", show_default=False,
             help="Colour and rich output even when piped / never (default: on a terminal only, "
                  "off with NO_COLOR set).")] = None) -> None:
    """forensics: what happened to a training job, to which host/rank/GPU, and what to do."""
    global out, err
    out, err = console_for(sys.stdout, color), console_for(sys.stderr, color)


def _check_dir_out(path: Path | None, what: str = "--out") -> None:
    if path is not None and (msg := dir_problem(path, what)):
        _fail(msg)


def _check_file_out(path: str | Path | None, what: str = "--json") -> None:
    if path is not None and (msg := file_problem(path, what)):
        _fail(msg)


def _progress(text: str):  # noqa: ANN202 - a rich Progress
    """A transient progress bar on stderr (rich.progress loads only when one is shown)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(text), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                    transient=True)


def _table(title: str):  # noqa: ANN202 - a rich Table
    from rich.table import Table  # loads only for the commands that print a table

    return Table(title=title)


def _status(text: str):  # noqa: ANN202 - a context manager
    """A spinner with `text` on a terminal; nothing when piped."""
    import contextlib

    return err.status(text) if interactive(sys.stderr) else contextlib.nullcontext()


def _emit_json(path: str, data: dict) -> None:
    """--json PATH|-, the same in every command: '-' prints `data` on stdout, else writes it to PATH."""
    text = json.dumps(data, indent=2, default=str) + "\n"
    if path == "-":
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `--json - | head`: the reader took what it wanted
            stdout_gone()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write --json {path}: {exc.strerror or exc}")


def _check_job_path(job_dir: Path) -> None:
    if not job_dir.exists():
        _fail(f"no such file or directory: {job_dir}")
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.discovery import is_archive

    if not (job_dir.is_dir() or (job_dir.is_file() and is_archive(job_dir))):
        _fail(f"not a directory or archive: {job_dir}")


@app.command()
def analyze(
    job_dir: Annotated[Path, typer.Argument(metavar="JOB_DIR", help="Job directory (or .tar/.tar.gz of one).", show_default=False)],
    out_dir: Annotated[Path | None, typer.Option("--out", metavar="DIR", help="Output directory (default ./forensics-out/<job>).")] = None,
    json_path: Annotated[str | None, typer.Option("--json", metavar="PATH|-", help=JSON_HELP)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar and no summary.")] = False,
    no_html: Annotated[bool, typer.Option("--no-html", help="Skip the plots and report.html (the verdict "
                                          "sooner; report.json, report.md and the store are still written).")] = False,
) -> None:
    """Analyze a job directory: verdict, culprit, action, evidence, downtime."""
    _check_job_path(job_dir)  # a wrong path fails before the analysis' imports
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.analysis import OutputDirError
    from forensics.analysis import analyze as run
    from forensics.discovery import JobDirError
    from forensics.outpaths import inside

    if json_path and json_path != "-" and job_dir.is_dir() and inside(json_path, job_dir):
        _fail(f"refusing to write inside the job directory (it is evidence): {json_path}")
    if out_dir is not None and job_dir.is_dir() and inside(out_dir, job_dir):
        _fail(f"refusing to write inside the job directory (it is evidence): {out_dir}")
    _check_dir_out(out_dir if out_dir is not None else Path("forensics-out"))
    _check_file_out(json_path)
    show_progress = not quiet and interactive(sys.stderr) and json_path != "-"
    prog = None

    def verdict_first(rep: dict, where: Path) -> None:  # printed before the outputs are written
        if prog is not None:
            prog.stop()
        if not quiet and json_path != "-":
            _summary(rep, where, html=not no_html)  # (a closed stdout silences it: terminal.py)

    try:
        if show_progress:
            with _progress("{task.description}") as prog:
                task = prog.add_task("reading logs", total=None)

                def stage(name: str) -> None:  # later steps have no count: the bar pulses
                    prog.update(task, description=name, total=None, completed=0)

                result = run(job_dir, out_dir, progress=lambda d, t: prog.update(task, completed=d, total=t),
                             html=not no_html, on_report=verdict_first, stage=stage)
        else:
            result = run(job_dir, out_dir, html=not no_html, on_report=verdict_first)
    except (JobDirError, OutputDirError) as exc:
        _fail(str(exc))
        return
    except OSError as exc:  # the disk filled or a folder vanished mid-way: one line, not a traceback
        _fail(f"cannot write the outputs: {exc}")
        return
    rep = result.report
    if json_path:
        _emit_json(json_path, rep)
    global _done
    _done = True


def _describe(x: dict, label: str) -> None:
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.report import culprit_text

    head = f"[bold]{x['kind']}[/bold]" + (f" · {x['category']} ({x['domain']})" if x.get("category") else "")
    out.print(f"{label}: {head}")
    out.print(f"  {escape(x['summary'] or '')}")
    drain = x.get("drain") or []
    if x["kind"] in ("completed", "none") and not drain:
        return
    out.print(f"  culprit: {escape(culprit_text(x['culprit']))}   action: {x['action']}   "
              f"auto-recoverable: {'yes' if x['auto_recoverable'] else 'no'}   confidence: {x['confidence']}")
    own = (x["culprit"].get("host"), x["culprit"].get("gpu"))
    for d in drain:
        if (d["culprit"].get("host"), d["culprit"].get("gpu")) != own:
            out.print(f"  also drain: {escape(culprit_text(d['culprit']))}   action: {d['action']}   "
                      f"(interruption {d['interruption']}, {d['category']})")
    if x["kind"] == "completed":
        return  # the evidence is the interruption's, printed below
    # a line two signatures cite (a parser's event and the generic rule's) is printed once; report.md lists both
    lines: dict[tuple[str, int], dict] = {}
    for e in x.get("evidence", []):
        lines.setdefault((e["path"], e["line"]), e)
    for e in list(lines.values())[:5]:
        out.print(f"  [dim]{escape(e['path'])}:{e['line']}[/dim] {escape((e['text'] or '').strip()[:160])}",
                  highlight=False)


def _summary(rep: dict, out_dir: Path, html: bool = True) -> None:
    v = rep["verdict"]
    _describe(v, "Verdict")
    others = [x for x in rep["interruptions"] if x.get("id") != v.get("id")]
    if others:
        _describe(others[0], f"Interruption {others[0]['id']} (attempt {others[0]['attempt']})")
        if len(others) > 1:
            out.print(f"{len(others) - 1} more interruption(s) in the report")
    d = rep["downtime"]
    if d.get("wall_s"):
        out.print(f"Goodput {d['goodput']}, GPU-hours lost {d['gpu_hours_lost']}")
    for w in rep["warnings"][:3]:
        out.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    out.print(f"Report: {escape(str(out_dir / ('report.html' if html else 'report.json')))}", soft_wrap=True)


@app.command()
def sources(
    job_dir: Annotated[Path, typer.Argument(metavar="JOB_DIR", help="Job directory (or .tar/.tar.gz of one).", show_default=False)],
    json_path: Annotated[str | None, typer.Option("--json", metavar="PATH|-", help=JSON_HELP)] = None,
) -> None:
    """Dry run: every file, what it was recognized as, and its line accounting."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.config import load_job_config
    from forensics.discovery import JobDirError, discover
    from forensics.ingest import ingest
    from forensics.outpaths import inside

    _check_job_path(job_dir)
    if json_path and json_path != "-" and job_dir.is_dir() and inside(json_path, job_dir):
        _fail(f"refusing to write inside the job directory (it is evidence): {json_path}")
    _check_file_out(json_path)
    try:
        disc = discover(job_dir)
    except JobDirError as exc:
        _fail(str(exc))
        return
    try:
        ing = ingest(disc, load_job_config(job_dir, disc))
    finally:
        disc.close()
    rows = [{"path": f.rel_path, "parser": f.parser, "lines": f.lines, "parsed": f.parsed, "ignored": f.ignored,
             "unparsed": f.unparsed, "events": f.events.height, "warnings": f.warnings} for f in ing.files]
    if json_path:
        _emit_json(json_path, {"sources": rows, "warnings": ing.warnings})
        if json_path == "-":
            return
    t = _table(title=f"{len(rows)} files")
    for col in ("path", "parser", "lines", "parsed", "ignored", "unparsed", "events"):
        t.add_column(col, justify="right" if col not in ("path", "parser") else "left")
    for r in rows:
        t.add_row(escape(r["path"]), r["parser"] or "[dim]unrecognized[/dim]", *(str(r[k]) for k in (
            "lines", "parsed", "ignored", "unparsed", "events")))
    out.print(t)
    for w in ing.warnings:
        out.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)


@app.command(name="explain-time")
def explain_time(
    path: Annotated[Path, typer.Argument(metavar="PATH", show_default=False, help=(
        "An output directory of `analyze` (its report.json is read), a report.json, or a job directory "
        "or archive (analyzed into a temporary directory first)."))],
    json_path: Annotated[str | None, typer.Option("--json", metavar="PATH|-", help=JSON_HELP)] = None,
) -> None:
    """Where each second of the downtime split comes from: per attempt, every bucket's seconds
    and the lines (path:line) that bound it."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.analysis import OutputDirError
    from forensics.explain_time import ExplainError, as_json, explain_path, render

    if not path.exists():
        _fail(f"no such file or directory: {path}")
    _check_file_out(json_path)
    try:
        with _status(f"reading {escape(str(path))}"):
            rep, lines = explain_path(path)
    except (ExplainError, OutputDirError) as exc:
        _fail(str(exc))
        return
    if json_path:
        _emit_json(json_path, {"job": (rep.get("job") or {}).get("name"), "lines": as_json(lines)})
        if json_path == "-":
            return
    sys.stdout.write(render(rep, lines))


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(metavar="SCENARIO", help="Scenario TOML (see docs/simulator.md).")],
    out_dir: Annotated[Path, typer.Option("--out", metavar="DIR", help="Where to write the case (job/ and expected.toml).")] = Path("sim-out"),
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Random seed; same seed, same bytes.")] = 0,
    dialect: Annotated[DialectMode | None, typer.Option("--dialect", metavar="default|random", help="Line dialects: 'default' (the scenario's own formats) or 'random' (drawn per host and per source; see docs/simulator.md). Default: the scenario's [job] dialect, else 'default'.")] = None,
    dialect_seed: Annotated[int | None, typer.Option("--dialect-seed", metavar="N", help="Seed of the random dialect draw (default: the scenario's [job] dialect_seed, else --seed).")] = None,
) -> None:
    """Write a realistic job directory for a scenario, with its truth in expected.toml."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.simulate import load_scenario
    from forensics.simulate import simulate as run

    if not scenario.is_file():
        _fail(f"no such scenario file: {scenario}")
    _check_dir_out(out_dir)
    try:
        spec = load_scenario(scenario)
    except Exception as exc:  # noqa: BLE001 - a bad scenario is user input: one line, no traceback
        _fail(f"invalid scenario {scenario}: {exc}")
        return
    global _on_interrupt
    _on_interrupt = f"interrupted; the case under {out_dir} is incomplete (run simulate again)"
    try:
        with _status(f"simulating {escape(scenario.name)} (seed {seed})"):
            case = run(spec, out_dir, seed, dialect=None if dialect is None else str(dialect), dialect_seed=dialect_seed)
    except ValueError as exc:  # an unknown dialect (here or in the scenario): one line, no traceback
        _fail(f"invalid scenario {scenario}: {exc}")
        return
    except OSError as exc:
        _fail(f"cannot write the case to {out_dir}: {exc.strerror or exc}")
        return
    out.print(f"Simulated {escape(str(scenario))} (seed {seed}) -> {escape(str(case))}", soft_wrap=True)


fleet_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT,
                        help="Many jobs: analyze job dirs into a Parquet store for the weekly report.")
app.add_typer(fleet_app, name="fleet")


@fleet_app.command("ingest")
def fleet_ingest(
    roots: Annotated[list[Path], typer.Argument(metavar="ROOT", help="Folders holding job dirs (or job dirs / .tar.gz bundles).")],
    store: Annotated[Path, typer.Option("--store", metavar="DIR", help="The fleet store (Parquet, partitioned by ISO week).")],
    workers: Annotated[int | None, typer.Option("--workers", min=1, metavar="N", help="Parallel analyses (default: CPUs, at most 8; ray: all CPUs of the Ray).")] = None,
    engine: Annotated[Engine, typer.Option("--engine", metavar="local|ray", help="Execution engine: local (process pool) or ray "
                                           "(Ray tasks; needs pip install 'forensics[ray]').")] = Engine.local,
    address: Annotated[str | None, typer.Option("--address", metavar="ADDR", help="With --engine ray: the Ray cluster "
                                                 "(auto, ray://head:10001); default: start a local Ray.")] = None,
    job_html: Annotated[bool, typer.Option("--job-html/--no-job-html",
                                           help="Also write each job's report.html and plots.")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors.")] = False,
) -> None:
    """Analyze every job dir under ROOT... and replace its rows in the store (see docs/fleet.md)."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.fleet import ENGINES, EngineError
    from forensics.fleet import ingest as run

    for r in roots:
        if not r.exists():
            _fail(f"no such file or directory: {r}")
    if engine.value not in ENGINES:  # pragma: no cover - the choices are the engines
        _fail(f"unknown engine {engine.value!r}; one of: {', '.join(ENGINES)}")
    if address is not None and engine is not Engine.ray:
        _fail("--address is for --engine ray")
    _check_dir_out(store, "--store")

    global _on_interrupt
    _on_interrupt = (f"interrupted; the jobs reported ingested are in {store}, the others were not ingested "
                     "(run the same command again to finish)")
    bar = _progress("analyzing jobs") if interactive(sys.stderr) and not quiet else None
    task = bar.add_task("fleet", total=None) if bar else None

    def progress(item: dict) -> None:
        if bar is not None:
            bar.update(task, completed=item["done"], total=item["total"])
        if item["ok"]:
            if not quiet:
                err.print(f"ingested {escape(item['dir'])}", highlight=False, soft_wrap=True)
        else:
            err.print(f"[red]failed[/red] {escape(item['dir'])}: {escape(item['error'])}", highlight=False,
                      soft_wrap=True)

    try:
        if bar is not None:
            bar.start()
        res = run(roots, store, workers=workers, engine=engine.value, progress=progress, job_html=job_html,
                  address=address)
    except (EngineError, NotImplementedError) as exc:
        _fail(str(exc))
        return
    finally:
        if bar is not None:
            bar.stop()
    weeks = sorted({x["week"] for x in res.ingested})
    if not quiet:
        out.print(f"{len(res.ingested)} job(s) ingested into {escape(str(store))}"
                  + (f" (weeks {', '.join(weeks)})" if weeks else "") + f"; {len(res.failed)} not ingested",
                  soft_wrap=True)
    if not res.ingested and not res.failed:
        _fail(f"no job directories found under {', '.join(str(r) for r in roots)}", code=1)
    if res.failed and not res.ingested:
        raise typer.Exit(1)


@app.command()
def weekly(
    store: Annotated[Path, typer.Option("--store", metavar="DIR", help="The fleet store written by `forensics fleet ingest`.")],
    out_dir: Annotated[Path, typer.Option("--out", metavar="DIR", help="Where to write weekly.html, weekly.md, weekly.json.")],
    week: Annotated[str | None, typer.Option("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (default: the latest).")] = None,
) -> None:
    """The weekly fleet reliability report: goodput, failure mix, repeat-offender nodes, trends."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.weekly import WeeklyError, write_weekly

    _check_dir_out(out_dir)
    try:
        with _status(f"building the weekly report from {escape(str(store))}"):
            rep = write_weekly(store, out_dir, week)
    except WeeklyError as exc:
        _fail(str(exc))
        return
    except OSError as exc:
        _fail(f"cannot write the weekly report to {out_dir}: {exc.strerror or exc}")
        return
    s = rep["summary"]
    goodput = "–" if s["goodput"] is None else f"{s['goodput']:.1%}"
    out.print(f"{rep['week']}: {s['jobs']} jobs, {s['gpu_hours']} GPU-hours, goodput {goodput}, "
              f"{s['interruptions']} interruptions, {len(rep['repeat_offenders']['hosts'])} lemon candidate(s)")
    out.print(f"Report: {escape(str(out_dir / 'weekly.html'))}", soft_wrap=True)


def _eval_real_samples(cases_dir: Path, out_dir: Path | None, json_path: str | None) -> None:
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.evaluate import evaluate_real_samples, real_sample_summary, real_sample_table

    with _status(f"analyzing the real samples under {escape(str(cases_dir))}"):
        results = evaluate_real_samples(cases_dir, out_dir)
    summary = real_sample_summary(results)
    if json_path:
        _emit_json(json_path, {"summary": summary, "cases": [vars(r) for r in results]})
        if json_path == "-":
            return
    sys.stdout.write(real_sample_table(results))
    h, n = summary["category_high_medium"]
    q, nq = summary["healthy_quiet"]
    r, nr = summary["restart_agreement"]
    sys.stdout.write(f"all cases {summary['right']}/{summary['cases']}; category (high+medium labels) {h}/{n}; "
                     f"healthy controls quiet {q}/{nq}; restart decision {r}/{nr}\n")


@app.command(name="eval")
def eval_cmd(
    cases_dir: Annotated[Path, typer.Argument(metavar="CASES_DIR", help="Directory of cases: each holds expected.toml and the job (in job/ or beside it), or real samples (case.toml beside the excerpt files).")],
    out_dir: Annotated[Path | None, typer.Option("--out", metavar="DIR", help="Where the per-case analyses go.")] = None,
    json_path: Annotated[str | None, typer.Option("--json", metavar="PATH|-", help=JSON_HELP)] = None,
) -> None:
    """Score the analyzer on labelled cases: accuracy per field, confusion, calibration, failures."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    from forensics.evaluate import FIELDS, evaluate, is_real_samples

    if not cases_dir.is_dir():
        _fail(f"no such directory: {cases_dir}")
    _check_dir_out(out_dir)
    _check_file_out(json_path)
    if is_real_samples(cases_dir):
        _eval_real_samples(cases_dir, out_dir, json_path)
        return
    with _status(f"analyzing the labelled cases under {escape(str(cases_dir))}"):
        res = evaluate(cases_dir, out_dir)
    if json_path:
        _emit_json(json_path, res.as_dict())
        if json_path == "-":
            return
    if not res.cases:
        _fail(f"no case (a directory with expected.toml) under {cases_dir}", 1)
    t = _table(title=f"{len(res.cases)} cases")
    t.add_column("field")
    t.add_column("accuracy", justify="right")
    t.add_column("scored", justify="right")
    for k in FIELDS:
        acc = res.accuracy.get(k)
        t.add_row(k, "-" if acc is None else f"{acc:.3f}", str(res.counts.get(k, 0)))
    out.print(t)
    cm = _table(title="confusion (expected -> got)")
    for col in ("expected", "got", "n"):
        cm.add_column(col)
    for r in res.confusion.iter_rows(named=True):
        cm.add_row(str(r["expected"]), str(r["got"]), str(r["n"]))
    out.print(cm)
    out.print(f"Brier score (confidence vs category correct): {res.brier}")
    rel = _table(title="reliability")
    for col in ("from", "to", "n", "mean confidence", "accuracy"):
        rel.add_column(col, justify="right")
    for r in res.reliability.iter_rows(named=True):
        rel.add_row(f"{r['from']:.1f}", f"{r['to']:.1f}", str(r["n"]), f"{r['mean_confidence']:.2f}", f"{r['accuracy']:.2f}")
    out.print(rel)
    for c in res.failures:
        wrong = ", ".join(f"{k}: want {c.expected.get(k)!r} got {c.got.get(k)!r}" for k, ok in c.correct.items() if not ok)
        out.print(f"[red]FAIL[/red] {escape(c.name)}: {escape(c.error or wrong)}")


@app.command()
def train(
    scenarios: Annotated[Path, typer.Option("--scenarios", metavar="DIR", help="Folder of scenario TOMLs to simulate.")] = Path("fixtures/scenarios"),
    seeds: Annotated[int | None, typer.Option("--seeds", min=1, metavar="N", help="Training seeds per scenario (default 3; from 1000 up).")] = None,
    out_path: Annotated[Path | None, typer.Option("--out", metavar="PATH", help="Artifact path (default forensics/data/classifier.json).")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", min=1, metavar="N", help="Parallel simulations (default: CPUs, at most 4).")] = None,
    workdir: Annotated[Path | None, typer.Option("--workdir", metavar="DIR", help="Scratch folder for the simulated cases (default: a temp dir).")] = None,
    json_path: Annotated[str | None, typer.Option("--json", metavar="PATH|-", help=JSON_HELP)] = None,
) -> None:
    """Train the attribution classifier on simulated scenarios and write its JSON artifact."""
    # lazy: each command loads only the modules it runs (`forensics --help` and the verdict stay fast)
    import tempfile

    from forensics import classifier as clf
    from forensics.training import train_from_scenarios

    paths = sorted(scenarios.glob("*.toml")) if scenarios.is_dir() else []
    if not paths:
        _fail(f"no scenario TOMLs in {scenarios}")
    n = seeds if seeds is not None else clf.DEFAULT_SEEDS
    if n > len(clf.TRAIN_SEEDS):
        _fail(f"--seeds is at most {len(clf.TRAIN_SEEDS)}")
    target = out_path or Path(clf.__file__).parent / "data" / "classifier.json"
    _check_file_out(target, "--out")
    _check_dir_out(workdir, "--workdir")
    _check_file_out(json_path)
    show = json_path != "-" and interactive(sys.stderr)
    with tempfile.TemporaryDirectory(prefix="forensics-train-") as tmp:
        work = workdir or Path(tmp)
        try:
            if show:
                with _progress("simulating + analyzing") as prog:
                    task = prog.add_task("train", total=len(paths) * n)
                    model, rep = train_from_scenarios(paths, n, work, jobs=jobs,
                                                      progress=lambda d, t: prog.update(task, completed=d))
            else:
                model, rep = train_from_scenarios(paths, n, work, jobs=jobs)
        except ValueError as exc:
            _fail(str(exc), 1)
            return
    model.to_json(target)
    rep = {**rep, "artifact": str(target), "bytes": target.stat().st_size}
    if json_path:
        _emit_json(json_path, rep)
        if json_path == "-":
            return
    out.print(f"{rep['samples']} labelled interruptions from {len(rep['scenarios'])} scenarios x {n} seeds; "
              f"{len(model.classes)} categories")
    if rep["cv_accuracy"] is not None:
        out.print(f"cross-validated (grouped by seed, {rep['cv_folds']} folds): accuracy {rep['cv_accuracy']:.3f}, "
                  f"Brier {rep['cv_brier']:.3f}")
    for e in rep["cv_errors"][:10]:
        out.print(f"  [dim]cv miss[/dim] {escape(e)}", highlight=False)
    for e in rep["failed_cases"]:
        out.print(f"[yellow]skipped:[/yellow] {escape(e)}", highlight=False)
    out.print(f"Model: {escape(str(target))} ({rep['bytes']} bytes)", soft_wrap=True)


if __name__ == "__main__":  # pragma: no cover
    app()
