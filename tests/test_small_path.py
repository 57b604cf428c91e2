"""The small-bundle path (issue 17): the catalog compiled once and cached (forensics/cache.py),
the catalog matched a source at a time (signatures.match), the CLI's plain options read without
pydantic (forensics/cli_params.py). Each gives what the slow way gives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import cache, signatures
from forensics.analysis import analyze
from forensics.signatures import build_catalog, load_catalog, match

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "fixtures" / "jobs"


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(d))
    return d


def _same(a: signatures.Catalog, b: signatures.Catalog) -> None:
    assert [s.id for s in a.signatures] == [s.id for s in b.signatures]
    assert a.signatures == b.signatures and a.context_only == b.context_only
    for s, t in zip(a.signatures, b.signatures, strict=True):  # the types too: tuples stay tuples
        assert all(type(getattr(s, f)) is type(getattr(t, f)) for f in s.__dataclass_fields__)


def test_catalog_is_built_once_then_read_from_the_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = build_catalog()
    first = load_catalog()
    entries = list(cache_dir.glob("catalog-*.json"))
    assert len(entries) == 1
    _same(first, built)

    def no_build() -> signatures.Catalog:
        raise AssertionError("the cached catalog must be read, not rebuilt")

    monkeypatch.setattr(signatures, "build_catalog", no_build)
    _same(load_catalog(), built)
    assert len(built.signatures) >= 120 and "xid-79" in {s.id for s in built.signatures}


def test_a_changed_catalog_file_is_rebuilt(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_catalog()
    inputs = signatures._catalog_inputs()
    calls = []
    real_build = signatures.build_catalog

    def spy() -> signatures.Catalog:
        calls.append(1)
        return real_build()

    monkeypatch.setattr(signatures, "build_catalog", spy)
    # an edited TOML changes the bytes the key is made of: a new entry, built (and validated) again
    monkeypatch.setattr(signatures, "_catalog_inputs", lambda: [*inputs, b"nccl.toml", b"# edited\n"])
    load_catalog()
    assert calls == [1] and len(list(cache_dir.glob("catalog-*.json"))) == 2
    load_catalog()
    assert calls == [1]  # and that one is reused


def test_entries_are_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = []
    for name in ("a", "b"):
        monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / name))
        load_catalog()
        (entry,) = (tmp_path / name).glob("catalog-*.json")
        blobs.append((entry.name, entry.read_bytes()))
    assert blobs[0] == blobs[1]


def test_a_broken_or_unusable_cache_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = build_catalog()
    d = tmp_path / "c"
    monkeypatch.setenv(cache.CACHE_ENV, str(d))
    load_catalog()
    (entry,) = d.glob("catalog-*.json")
    entry.write_text('{"key": "')  # torn
    _same(load_catalog(), built)
    assert json.loads(entry.read_text())["key"]  # rewritten whole
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker / "sub"))
    _same(load_catalog(), built)
    monkeypatch.setenv(cache.CACHE_ENV, "")  # switched off: nothing written anywhere
    assert cache.cache_dir() is None
    _same(load_catalog(), built)


def test_default_cache_dir_is_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "forensics"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "forensics"


@pytest.mark.parametrize("job", ["021-dmesg-xid43-xid31-two-gpus-faulty-device", "001-nccl-ib-status12-vendor129-kp-ddp",
                                 "033-elastic-sigabrt-table-after-watchdog-picotron"])
def test_match_by_source_equals_match_by_signature(job: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = analyze(JOBS / job / "job", tmp_path / "out", html=False).events
    cat = load_catalog()
    together = match(cat, events)  # a small job: each source's signatures in one polars call
    assert not together.is_empty()
    for cells in (1, 5):  # one signature per call (a large job), and a few per call
        monkeypatch.setattr(signatures, "MATCH_CELLS", cells)
        alone = match(cat, events)
        assert alone.equals(together) and alone.schema == together.schema
    # each hit is what the Python regex of its signature says about that event
    msg = dict(zip(events["event_id"].to_list(), events["message"].to_list(), strict=True))
    for ev, sid in together.select("event_id", "signature").iter_rows():
        sig = cat.by_id(sid)
        assert re.search(sig.pattern, msg[ev] or "") is not None or sig.pattern == "."


def test_plain_options_coerce_as_typer_does(tmp_path: Path) -> None:
    import typer.main
    from typer import _coercion, core

    from forensics import cli, cli_params

    assert cli_params.installed()  # the installed typer has the internals it needs
    click_app = typer.main.get_command(cli.app)
    existing = tmp_path / "there"
    existing.mkdir()
    (tmp_path / "f.txt").write_text("x")
    values = ["", ".", "-", "a b", str(existing), str(tmp_path / "f.txt"), str(tmp_path / "missing"), "~/x", "ünï"]
    seen, ctx = 0, None
    for name, sub in click_app.commands.items():  # type: ignore[attr-defined]
        for param in sub.params:
            desc = getattr(param, "type_descriptor", None)
            if desc is None or desc.annotation not in (str, Path, bool):
                continue
            fast, slow = core.build_runtime_param(desc), _coercion.build_runtime_param(desc)
            assert type(fast).__name__ == "PlainRuntimeParam"
            for v in ([True, False, None] if desc.annotation is bool else [*values, None]):
                got, want = _outcome(fast, v, param, ctx), _outcome(slow, v, param, ctx)
                assert got == want, (name, param.name, v, got, want)
                seen += 1
    assert seen > 50


def _outcome(rp: object, value: object, param: object, ctx: object) -> tuple:
    try:
        out = rp.coerce(value, param=param, ctx=ctx)  # type: ignore[attr-defined]
        return ("ok", type(out).__name__, out)
    except Exception as exc:  # noqa: BLE001 - the same error, or the same value
        return ("error", type(exc).__name__, str(exc))


def test_analyze_imports_no_pydantic(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), cache.CACHE_ENV: str(tmp_path / "cache")}
    job = JOBS / "001-nccl-ib-status12-vendor129-kp-ddp" / "job"
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "forensics.cli", "analyze", str(job), "--no-html",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    mods = {m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", run.stderr, re.M)}
    assert "typer" in mods and "polars" in mods  # the listing is real
    assert not {"pydantic", "pydantic_core", "matplotlib"} & mods
    assert run.stdout.startswith("Verdict: crash · network_fabric")
    assert list((tmp_path / "cache").glob("catalog-*.json"))  # the catalog went to the cache, not the job dir


def test_the_cli_builds_only_the_command_it_runs() -> None:
    """`forensics analyze ...` builds the click command of `analyze` alone (typer would build every
    command's from its signature on each run); help, an unknown name, a group or no command get the
    whole app, and the command built alone is the one the whole app has."""
    import typer.main

    from forensics import cli

    def names(argv: list[str]) -> list[str]:
        lean = cli.app._lean((argv,), {})
        return sorted(typer.main.get_command(lean).commands)  # type: ignore[attr-defined]

    every = names(["--help"])
    assert {"analyze", "explain-time", "eval", "fleet", "sources"} <= set(every)
    assert names(["analyze", "job", "--no-html"]) == ["analyze"]
    assert names(["--no-color", "explain-time", "out"]) == ["explain-time"]
    assert names(["eval", "cases"]) == ["eval"]
    assert names(["fleet", "ingest", "x"]) == names(["nosuch"]) == names([]) == every
    alone = typer.main.get_command(cli.app._lean((["analyze"],), {})).commands["analyze"]  # type: ignore[attr-defined]
    whole = typer.main.get_command(cli.app).commands["analyze"]  # type: ignore[attr-defined]
    assert [p.opts for p in alone.params] == [p.opts for p in whole.params] and alone.help == whole.help


def test_sorted_unique_is_numpys_unique() -> None:
    """triage's line numbers of the matches: sorted and unique as `np.unique` gives them (which would
    load numpy.ma on a small bundle's run), same values and dtype, empty and repeated inputs too."""
    import numpy as np

    from forensics import triage

    rng = np.random.default_rng(17)
    for n in (0, 1, 2, 3, 50, 5000):
        for hi in (1, 7, 10**9):
            a = rng.integers(-3, hi, n).astype(np.int64)
            got, want = triage._sorted_unique(a), np.unique(a)
            assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_analyze_ends_early_only_as_the_cli_program(tmp_path: Path) -> None:
    """`forensics analyze` ends without Python's module teardown once its outputs are written and
    closed; `app([...])` called inside another program (a notebook kernel, a test runner) must come
    back to it: the process goes on after the command's SystemExit, twice in a row."""
    job = JOBS / "057-dmesg-aer-surprise-down-then-xid79-gpuburn"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "import sys\n"
        "from forensics.cli import app\n"
        "for n in (1, 2):\n"
        "    try:\n"
        f"        app(['analyze', {str(job)!r}, '--out', {str(tmp_path)!r} + f'/out{{n}}', '--no-html'])\n"
        "    except SystemExit as e:\n"
        "        print(f'came back {n} code', e.code, flush=True)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "came back 1 code 0" in run.stdout and "came back 2 code 0" in run.stdout
    script = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(job), "--out",
                             str(tmp_path / "cli"), "--no-html"], capture_output=True, text=True, env=env, timeout=300)
    assert script.returncode == 0, script.stderr
    assert json.loads((tmp_path / "cli" / "report.json").read_text())["verdict"]["category"] == "gpu_lost"
    assert (tmp_path / "cli" / "forensics.duckdb").stat().st_size > 0


def test_the_cli_keeps_openblas_to_one_thread_unless_told() -> None:
    """numpy's first import under the CLI starts OpenBLAS with one thread (its pool of one per core
    costs ~0.1 s of CPU at start), unless the user set OPENBLAS_NUM_THREADS; the CLI's own import
    loads no numpy, so the setting comes first."""
    code = "import os, sys; import forensics.cli; print('numpy' in sys.modules, os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    assert run.stdout.split() == ["False", "1"]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "OPENBLAS_NUM_THREADS": "3"}, timeout=120, check=True)
    assert run.stdout.split() == ["False", "3"]
