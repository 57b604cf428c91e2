"""The fast paths of ingest give each file exactly the result of the plain way: forensics/bulk.py
(many files parsed at once) against parsing each alone (ingest.parse_one), on every fixture folder,
the labelled real-sample jobs and simulated jobs with NCCL INFO chatter; a parser's `parse_bytes`
(whole structured files read from their bytes) against its `parse` of the lines; and the per-file
parsers' trigger contract (`spec.trigger`) holds on every fixture."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import forensics.ingest as ingest_mod
from forensics.bulk import Item, clean, parse_batch
from forensics.config import load_job_config
from forensics.discovery import Limits, ReadPath, discover
from forensics.simulate import load_scenario, simulate
from parsers import registry
from parsers.lines import decode_lines, with_body
from parsers.records import ParseContext

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
PARSER_DIRS = sorted(d for d in FIXTURES.iterdir() if d.is_dir() and d.name not in ("jobs", "scenarios", "scenarios-large"))
JOB_DIRS = sorted(d for d in (FIXTURES / "jobs").iterdir() if d.is_dir())
SCENARIOS = ["gpu_fell_off_bus", "ib_link_error", "cuda_oom", "node_fail", "ecc_uncorrectable", "collective_desync",
             "nccl_init_failure", "storage_error", "periodic_gc", "host_oom"]


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns, nulls_last=True) if not df.is_empty() else df


def _ingest(job: Path, on: bool, flag: str = "bulk", base: Limits | None = None) -> dict[str, ingest_mod.FileResult]:
    """Every file's result with one read route (`ReadPath` field `flag`) on or off, small files file by file."""
    limits = replace(base or Limits(), read=ReadPath(**{flag: on, "screen_small_files": False}))
    disc = discover(job)
    try:
        ing = ingest_mod.ingest(disc, load_job_config(job), limits)
    finally:
        disc.close()
    return {f.rel_path: f for f in ing.files}


def _assert_same(job: Path, flag: str = "bulk", base: Limits | None = None) -> int:
    fast, slow = _ingest(job, True, flag, base), _ingest(job, False, flag, base)
    assert fast.keys() == slow.keys()
    for path, a in fast.items():
        b = slow[path]
        where = f"{job.name}/{path}"
        assert (a.lines, a.parsed, a.ignored, a.unparsed) == (b.lines, b.parsed, b.ignored, b.unparsed), where
        assert (a.parser, a.parsers, a.digest, a.first_ts, a.last_ts) == (b.parser, b.parsers, b.digest, b.first_ts,
                                                                          b.last_ts), where
        assert a.unparsed_error_lines == b.unparsed_error_lines, where
        assert a.unparsed_errors.equals(b.unparsed_errors), where
        assert sorted(a.warnings) == sorted(b.warnings), where
        assert _sorted(a.events).equals(_sorted(b.events)), where
        assert sorted(k for k, v in a.tables.items() if not v.is_empty()) == \
            sorted(k for k, v in b.tables.items() if not v.is_empty()), where
        for name, t in a.tables.items():
            if not t.is_empty():
                assert _sorted(t).equals(_sorted(b.tables[name])), f"{where} table {name}"
    return sum(f.events.height for f in fast.values())


@pytest.mark.parametrize("folder", PARSER_DIRS + JOB_DIRS, ids=lambda p: p.name)
def test_bulk_equals_file_by_file_on_fixtures(folder: Path) -> None:
    _assert_same(folder)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_bulk_equals_file_by_file_on_simulated_info_logs(scenario: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_scenario(FIXTURES / "scenarios" / f"{scenario}.toml")
    spec["job"]["nccl_debug"] = "INFO"
    spec["job"]["nccl_info_lines_per_rank"] = 200
    simulate(spec, tmp_path / "case", 5)
    # small batches: many of them, screened apart and parsed together, a few at a time (ingest._bulk_group)
    monkeypatch.setattr(ingest_mod, "BULK_BATCH_BYTES", 48 * 1024)
    monkeypatch.setattr(ingest_mod, "BULK_GROUP_REST_BYTES", 64 * 1024)
    n_events = _assert_same(tmp_path / "case" / "job")
    assert n_events > 10


def _dcgm_whole_files(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the files the dcgm parser reads from their bytes (while the test runs)."""
    from parsers import dcgm

    taken: list[int] = []
    real = dcgm.parse_bytes_many

    def counting(datas: list[bytes], hosts: list, ctx: ParseContext, **kw):  # noqa: ANN003, ANN202
        ext, took = real(datas, hosts, ctx, **kw)
        taken.extend(took)
        return ext, took

    monkeypatch.setattr(dcgm, "parse_bytes_many", counting)
    return taken


@pytest.mark.parametrize("folder", [FIXTURES / "dcgm", *(d for d in JOB_DIRS if "dcgm" in d.name)],
                         ids=lambda p: p.name)
def test_parse_bytes_equals_parse_on_fixtures(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _dcgm_whole_files(monkeypatch)
    _assert_same(folder, flag="parse_bytes")
    if folder.name == "dcgm":
        assert sum(taken) == 1  # long_timeseries.csv (the other CSV quotes a cell: read as lines)


def test_parse_bytes_equals_parse_on_simulated_dcgm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    simulate(load_scenario(FIXTURES / "scenarios" / "gpu_fell_off_bus.toml"), tmp_path / "case", 5)
    job = tmp_path / "case" / "job"
    n_dcgm = len(list(job.rglob("dcgm.csv")))
    taken = _dcgm_whole_files(monkeypatch)
    n_events = _assert_same(job, flag="parse_bytes")
    assert sum(taken) == n_dcgm > 0 and n_events > 10


def test_parse_bytes_declines_unusual_dcgm_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DCGM CSVs the byte path must not take (CRLF, a NUL, invalid UTF-8, a line over the line
    limit, a gzip copy) go the usual way: same results as without the byte path, and the usual
    warnings."""
    base = (FIXTURES / "dcgm" / "long_timeseries.csv").read_bytes()
    hdr, _, body = base.partition(b"\n")
    (tmp_path / "node-1").mkdir()
    (tmp_path / "node-1" / "dcgm.csv").write_bytes(base)  # taken
    (tmp_path / "node-2").mkdir()
    (tmp_path / "node-2" / "dcgm.csv").write_bytes(base.replace(b"\n", b"\r\n"))
    (tmp_path / "node-3").mkdir()
    (tmp_path / "node-3" / "dcgm.csv").write_bytes(base.replace(b"node-17", b"node-\x0017"))
    (tmp_path / "node-4").mkdir()
    (tmp_path / "node-4" / "dcgm.csv").write_bytes(base.replace(b"node-17", b"node-\xff17"))
    (tmp_path / "node-5").mkdir()
    (tmp_path / "node-5" / "dcgm.csv").write_bytes(hdr + b"\n" + body + b"2024-06-10T06:14:00Z,X," + b"9" * 3000 + b"\n")
    (tmp_path / "node-6").mkdir()
    (tmp_path / "node-6" / "dcgm.csv.gz").write_bytes(gzip.compress(base))
    short = Limits(max_line_bytes=2000)
    taken = _dcgm_whole_files(monkeypatch)
    fast = _ingest(tmp_path, True, "parse_bytes", short)
    assert sum(taken) == 1
    _assert_same(tmp_path, flag="parse_bytes", base=short)
    assert any("cut" in w for w in fast["node-5/dcgm.csv"].warnings)
    assert any("NUL" in w for w in fast["node-3/dcgm.csv"].warnings)
    assert all(f.parser == "dcgm" for f in fast.values())


def test_chatter_is_ignored_and_the_rest_parsed(tmp_path: Path) -> None:
    """Two rank logs in one batch: INFO chatter counted as ignored, init lines parsed, the WARN an
    event of the right file and line, with the host and rank its path names."""
    a = ("node-1:11:11 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
         "node-1:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
         "node-1:11:11 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC\n\n"
         "node-1:11:11 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45074> with status=12 opcode=0\n")
    b = "node-2:22:22 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\nsomething else\n"
    files = []
    for name, text in (("node-1/rank-0.log", a), ("node-2/rank-1.log", b)):
        p = tmp_path / name
        p.parent.mkdir(parents=True)
        p.write_text(text)
    disc = discover(tmp_path)
    files = {sf.rel_path: sf for sf in disc.files}
    items = [Item(i, files[n], (tmp_path / n).read_bytes()) for i, n in enumerate(("node-1/rank-0.log", "node-2/rank-1.log"))]
    got, again = parse_batch(items, load_job_config(tmp_path), 2026, {}, registry())
    assert again == []
    r0, r1 = got[0], got[1]
    assert (r0.lines, r0.parsed, r0.ignored, r0.unparsed) == (5, 2, 3, 0)
    assert (r1.lines, r1.parsed, r1.ignored, r1.unparsed) == (2, 0, 1, 1)
    warn = r0.events.filter(pl.col("kind") == "nccl_ib_error").row(0, named=True)
    assert (warn["line_no"], warn["host"], warn["rank"]) == (5, "node-1", 0)
    assert r1.events.is_empty()


UNCLEAN = [b"nul\x00\n", b"cr\r\n", b"\x1b[31mred\n", b"\xff\xfe bad utf8\n", b"", b"rs \x1e sep\n",
           b"us \x1f field\n", b"cut \xe2\x9c\n"]


def test_unclean_bytes_are_left_to_parse_one() -> None:
    assert clean(b"plain text\n") and clean("utf-8 \u2713\n".encode())
    for bad in UNCLEAN:
        assert not clean(bad)
        # the byte far from the start too (`plain_kind` looks at a window at a time)
        assert not bad or not clean(b"x" * (3 << 18) + b"\n" + bad + b"y\n" * 1000)


def _screen_items(datas: list[bytes]) -> list[Item]:
    from forensics.discovery import SourceFile

    return [Item(i, SourceFile(f"node-1/rank-{i}.log", Path(f"/x/rank-{i}.log"), None, len(d)), d)
            for i, d in enumerate(datas)]


@pytest.mark.parametrize("engine", ["hyperscan", "polars"])
@pytest.mark.parametrize("pieces", [True, False], ids=["pieces", "joined"])
def test_screen_leaves_unclean_files_to_parse_one_and_counts_the_rest(pieces: bool, engine: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unclean file of a batch (NUL, CR, ESC, invalid UTF-8, empty, the separator byte 0x1e,
    0x1f) goes back to `parse_one`; the others get their real line counts, chatter counts, digests,
    kept lines and span lines, whether polars reads the files as pieces or joined, with the
    hyperscan pass (which also finds the unclean bytes) on ASCII batches, polars on a batch holding
    UTF-8, and without hyperscan (`plain_kind`)."""
    import forensics.bulk as bulk_mod
    from forensics import triage
    from forensics.accounting import SPAN_LINES
    from forensics.bulk import SEP, digest, screen
    from parsers.nccl import chatter

    if engine == "hyperscan" and not triage.hyperscan_available():
        pytest.skip("hyperscan is not installed")
    monkeypatch.setenv(triage.ENGINE_ENV, engine)
    monkeypatch.setattr(bulk_mod, "PIECES_MIN_BYTES", 0 if pieces else 1 << 40)
    info = "node-1:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
    good = [(info * 3 + "[2026-11-02 10:00:01] step 1 loss 2.5\n" + info).encode(),
            b"no newline at the end",
            (info * (SPAN_LINES + 300) + "12:00:00 late\n\n" + info).encode(),  # more lines than two spans
            b"\n\n",
            ("caf\u00e9 " + info).encode()]
    for batch in (good[:4], good):  # ASCII (hyperscan), then one UTF-8 file in it (polars)
        datas = [d for pair in zip(batch, UNCLEAN, strict=False) for d in pair] + UNCLEAN[len(batch):]
        items = _screen_items(datas)
        sc, again = screen(items, load_job_config(FIXTURES), 2026)
        want_bad = [it.index for it in items if it.data in UNCLEAN]
        assert sorted(again) == want_bad
        kept = [it for it in items if it.index not in want_bad]
        assert [it.index for it in sc.items] == [it.index for it in kept]
        for f, it in enumerate(kept):
            lines = decode_lines(it.data).lines
            assert sc.n[f] == lines.height == it.data.count(b"\n") + (not it.data.endswith(b"\n"))
            chat = lines.select(chatter(pl.col("text")).fill_null(False))[:, 0]
            assert sc.chat[f] == chat.sum()
            assert sc.sha[f] == digest(it.data)
            mine = sc.rest.filter((pl.col("hint_file") == f) & ~pl.col("_sep"))
            assert mine["text"].to_list() == lines.filter(~chat)["text"].to_list()
            assert (mine["line_no"] - sc.bases[f]).to_list() == mine["_local"].to_list() == \
                lines.filter(~chat)["line_no"].to_list()
            seps = sc.rest.filter((pl.col("hint_file") == f) & pl.col("_sep"))
            assert seps["text"].to_list() == [SEP, SEP]
            stamped = lines.filter(pl.col("text").str.contains(r"\d\d:\d\d:\d\d"))["line_no"]
            stamped = stamped.filter((stamped <= SPAN_LINES) | (stamped > lines.height - SPAN_LINES))
            assert (sc.span.filter(pl.col("hint_file") == f)["line_no"] - sc.bases[f]).to_list() == stamped.to_list()
        assert sc.n.tolist() == [1 + 4, 1, SPAN_LINES + 303, 2, 1][:len(batch)]


def test_screen_refuses_rows_that_are_not_the_files_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """When polars' rows are not each file's lines exactly (a row lost, rows of another split),
    the whole batch goes to `parse_one`: the line counts come from the rows and their bytes."""
    import forensics.bulk as bulk_mod

    items = _screen_items([b"a\nb\n", b"c\n\nd\n"])
    read = bulk_mod._read_lines
    cfg = load_job_config(FIXTURES)
    for spoil in (lambda s: s.slice(1), lambda s: s.filter(s != ""),
                  lambda s: pl.concat([s.slice(0, 1), pl.Series(["x"]), s.slice(1)]),
                  lambda s: s.str.replace("b", "bb"), lambda s: s.slice(0, s.len() - 1)):
        monkeypatch.setattr(bulk_mod, "_read_lines", lambda p, spoil=spoil: spoil(read(p)))
        sc, again = bulk_mod.screen(items, cfg, 2026)
        assert sc is None and sorted(again) == [0, 1]
    monkeypatch.setattr(bulk_mod, "_read_lines", read)
    sc, again = bulk_mod.screen(items, cfg, 2026)
    assert again == [] and sc.n.tolist() == [2, 3]


@pytest.mark.parametrize("parser", [p for p in registry() if p.spec.trigger is not None and not p.exclusive],
                         ids=lambda p: p.name)
def test_trigger_contract(parser) -> None:  # noqa: ANN001
    """A file without a trigger line gives the parser nothing to claim, ignore or report, so the
    bulk path may skip it: checked on every fixture file."""
    checked = 0
    for f in sorted(FIXTURES.rglob("*")):
        if not f.is_file() or f.suffix in (".toml", ".md") or f.stat().st_size > 4_000_000:
            continue
        lines = with_body(decode_lines(f.read_bytes()).lines)
        mod = parser.module
        trig = parser.spec.trigger
        hit = lines["body"].str.contains_any(list(trig)) if isinstance(trig, list | tuple) else \
            lines["body"].str.contains(trig)
        if hit.any():
            continue
        ext = mod.parse(lines, ParseContext(path=f.name))
        checked += 1
        assert ext.events.is_empty() and ext.claimed.len() == 0 and ext.ignored.len() == 0, f
        assert all(t.is_empty() for t in ext.tables.values()), f
    assert checked > 20


def test_a_failing_batch_falls_back_to_file_by_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the batched path costs speed, not the analysis: the files are read one by one."""
    import forensics.bulk as bulk_mod

    (tmp_path / "node-1").mkdir()
    (tmp_path / "node-1" / "rank-0.log").write_text(
        "node-1:11:11 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45074> with status=12 opcode=0\n")

    def broken(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("bug in the batched path")

    monkeypatch.setattr(bulk_mod, "parse_screened", broken)
    files = _ingest(tmp_path, True)
    r = files["node-1/rank-0.log"]
    assert (r.lines, r.parsed, r.parser) == (1, 1, "nccl")
    assert r.events["kind"].to_list() == ["nccl_ib_error"]


CHATTER_LINES = [
    "node-1:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "node-1:100:100 [0] NCCL INFO comm 0x1 rank 0 nranks 64 cudaDev 0 busId 18000 - Init START",  # interesting
    "node-1:100:105 [0] NCCL TRACE Using something - Init COMPLETE",  # interesting, but TRACE: chatter
    "node-1:100:105 [0] NCCL CALL ncclAllReduce(...)",
    "[1,3]<stdout>:node-1:100:100 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC",  # a wrapper before
    "12: node-1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB",  # interesting (Using)
    "node-1:100:100 [0] 1.234 misc.cc:12 NCCL INFO Trees [0] 1/-1/-1->0->63",
    "node-1:100:100 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with error 12",
    "NCCL INFO a bare INFO line without its prefix",
    "node-1:100:100 [0] NCCL INFO",  # no space after INFO: no prefix match
    "",
    "Traceback (most recent call last):",
    "node-1:100:100 [0] NCCL INFO misc/socket.cc:50 -> 6",  # an error trace: interesting
]


def test_chatter_mask_equals_chatter() -> None:
    """bulk.chatter_mask (literal prefixes, the regex on the rest) is parsers.nccl.chatter, line for
    line, on hand-made edge cases and on every fixture file, with the interesting mask given or not."""
    from forensics.bulk import chatter_mask
    from parsers.lines import plain_lines
    from parsers.nccl import INFO_INTERESTING, chatter

    texts = [pl.Series("text", CHATTER_LINES * 50 + CHATTER_LINES[::-1], dtype=pl.Utf8),
             pl.Series("text", CHATTER_LINES[:1] * 40 + CHATTER_LINES, dtype=pl.Utf8)]  # one prefix starts most
    for p in sorted(FIXTURES.rglob("*")):
        data = p.read_bytes() if p.is_file() and p.suffix not in (".gz", ".zst", ".tar") else b""
        s = plain_lines(data) if data and clean(data) else None
        if s is not None:
            texts.append(s)
    n_chat = 0
    for s in texts[2:]:
        n_chat += int(pl.DataFrame({"t": s}).select(chatter(pl.col("t")).fill_null(False).sum())[0, 0])
    for s in texts:
        want = pl.DataFrame({"t": s}).select(chatter(pl.col("t")).fill_null(False))[:, 0].to_numpy()
        inter = pl.DataFrame({"t": s}).select(pl.col("t").str.contains(INFO_INTERESTING))[:, 0].to_numpy()
        assert chatter_mask(s).tolist() == want.tolist()
        assert chatter_mask(s, inter).tolist() == want.tolist()
    # many files at once (as `screen` calls it): each file's prefixes sampled, looked up batch-wide
    many = pl.concat(texts)
    bounds = np.cumsum([0] + [s.len() for s in texts])
    want = pl.DataFrame({"t": many}).select(chatter(pl.col("t")).fill_null(False))[:, 0].to_numpy()
    assert chatter_mask(many, None, bounds).tolist() == want.tolist()
    assert texts[0].len() and chatter_mask(texts[0])[:len(CHATTER_LINES)].tolist() == [
        True, False, True, True, True, False, True, False, False, False, False, False, False]
    assert n_chat > 0  # the fixtures hold real chatter (simulated INFO logs: test_bulk_equals_..._info_logs)


def _digest_job(tmp: Path) -> Path:
    job = tmp / "job"
    (job / "node-1").mkdir(parents=True)
    (job / "node-1" / "rank-0.log").write_text(
        "".join(f"node-1:100:100 [0] NCCL INFO Channel {i:02d}/0 : 0[0] -> 1[1] via P2P/IPC\n" for i in range(50))
        + "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    head = "timestamp,metric,gpu,Hostname,value\n"
    rows = "".join(f"2026-11-02T08:00:{i % 60:02d}Z,DCGM_FI_DEV_SM_CLOCK,{i % 8},node-1,{1400 + i}\n" for i in range(400))
    (job / "dcgm-small.csv").write_text(head + rows[:2000])  # read whole from its bytes
    (job / "dcgm-big.csv").write_text(head + rows)  # larger than a chunk: the block reader
    (job / "notes.txt").write_text("nothing to see\n")
    (job / "core.bin").write_bytes(bytes(range(256)) * 4)
    with gzip.open(job / "old.log.gz", "wt") as fh:
        fh.write("node-1:100:100 [0] NCCL WARN Cuda failure 'out of memory'\n")
    return job


@pytest.mark.parametrize("algo", ["blake3", "blake2b-256"])
def test_file_digests_come_from_the_read_pass_and_name_their_algorithm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algo: str) -> None:
    """Every file's digest (the `files` table's `digest`, `digest_algo`) is that of its stored bytes,
    whichever path read it: the bulk line path, a structured file read whole, the CSV block reader,
    a small-file batch, a binary file, a compressed file (its compressed bytes). Without the blake3
    package it is BLAKE2b-256, and says so."""
    import hashlib
    import sys

    from forensics import triage

    if algo == "blake3":
        blake3 = pytest.importorskip("blake3")
        want = lambda b: blake3.blake3(b).hexdigest()  # noqa: E731
    else:
        monkeypatch.setitem(sys.modules, "blake3", None)  # as if not installed: the import fails
        want = lambda b: hashlib.blake2b(b, digest_size=32).hexdigest()  # noqa: E731
    assert triage.digest_algo() == algo
    job = _digest_job(tmp_path)
    disc = discover(job, Limits(chunk_bytes=4096))
    try:
        ing = ingest_mod.ingest(disc, load_job_config(job), Limits(chunk_bytes=4096))
    finally:
        disc.close()
    got = {f.rel_path: f for f in ing.files}
    assert sorted(got) == ["core.bin", "dcgm-big.csv", "dcgm-small.csv", "node-1/rank-0.log", "notes.txt", "old.log.gz"]
    for path, f in got.items():
        assert (f.digest, f.digest_algo) == (want((job / path).read_bytes()), algo), path
    assert any("read by polars' CSV reader in blocks" in w for w in got["dcgm-big.csv"].warnings)
    assert got["node-1/rank-0.log"].ignored == 50 and got["dcgm-big.csv"].parsed == 400


@pytest.mark.parametrize("engine", ["hyperscan", "polars"])
def test_chunk_screen_is_chatter_on_every_fixture_chunk(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """bulk.ChunkScreen (the chatter screen of a large file's chunks in `parse_one`) gives
    parsers.nccl.chatter line for line, with hyperscan's pass over the bytes and without it, on every
    plain fixture file as a chunk, on the hand-made chatter lines, and on a chunk holding many
    interesting lines (the offsets turned into rows through each line's start)."""
    from forensics import bulk, triage
    from parsers.nccl import chatter

    if engine == "hyperscan" and not triage.hyperscan_available():
        pytest.skip("hyperscan is not installed")
    monkeypatch.setenv(triage.ENGINE_ENV, engine)
    chunks = [("\n".join(CHATTER_LINES * 50) + "\n").encode(),
              ("\n".join(["node-1:42:43 [0] NCCL INFO Using network IB"] * 5000 + CHATTER_LINES) + "\n").encode()]
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file() and p.suffix not in (".gz", ".zst", ".tar"):
            chunks.append(p.read_bytes())
    checked = 0
    for data in chunks:
        cs = bulk.ChunkScreen()
        plain = cs.scan(data)
        dec = decode_lines(data, 1, plain)
        want = dec.lines.select(chatter(pl.col("text")).fill_null(False))[:, 0].to_numpy()
        assert cs.chatter(dec.lines["text"]).tolist() == want.tolist()
        checked += int(want.sum())
    assert checked > 200  # chatter lines were there to find
