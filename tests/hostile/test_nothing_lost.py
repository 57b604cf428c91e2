"""Nothing lost: for every file lines = parsed + ignored + unparsed, and every unparsed line that looks
like an error is kept (report.json lists the first 200 and says how many more there are)."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

from forensics.analysis import analyze
from forensics.ingest import ERRORISH

ROOT = Path(__file__).resolve().parents[2]
ERR = re.compile(ERRORISH)


def _messy_job(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    for i, p in enumerate(sorted((ROOT / "fixtures").rglob("*"))):
        if p.is_file() and p.suffix != ".toml" and p.name != "README.md":
            dest = job / f"node-{i % 4:03d}" / f"{p.parent.name}-{p.name}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
    (job / "node-000" / "mixed.log").write_bytes(
        b"\xef\xbb\xbfstartup\r\n\x00\x00\x00\n"
        b"node-000:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        b"Something FAILED badly\r\nwarn: disk almost full\n\xff\xfe broken Xid-like text xid\n"
        b"[rank0]: RuntimeError: weird\n" + b"progress 10%\rprogress 20% timeout\n" + b"no newline at end error")
    (job / "node-001" / "compressed.log.gz").write_bytes(gzip.compress(b"ok\nFATAL: compressed\n" * 10))
    (job / "node-002" / "many-errors.log").write_text("".join(f"custom error number {i}\n" for i in range(300)))
    return job


def test_every_line_is_accounted_and_error_lines_kept(tmp_path: Path) -> None:
    job = _messy_job(tmp_path)
    a = analyze(job, tmp_path / "out")
    rep = a.report
    assert len(rep["sources"]) > 90
    for s in rep["sources"]:
        assert s["lines"] == s["parsed"] + s["ignored"] + s["unparsed"], s
        assert min(s["parsed"], s["ignored"], s["unparsed"]) >= 0
    kept = a.sql("SELECT f.path, u.line_no, u.text FROM unparsed_lines u JOIN files f USING (file_id) "
                 "ORDER BY u.file_id, u.line_no")
    kept_set = set(zip(kept["path"].to_list(), kept["line_no"].to_list(), strict=True))
    src = {s["path"]: s for s in rep["sources"]}
    # files no parser read: every error-looking line is kept, with its line number
    for path in ("node-002/many-errors.log", "node-001/compressed.log.gz"):
        assert src[path]["parser"] is None
    for i in range(300):
        assert ("node-002/many-errors.log", i + 1) in kept_set
    assert sum(1 for p, _ in kept_set if p == "node-001/compressed.log.gz") == 10
    mixed = {no: t for p, no, t in zip(kept["path"], kept["line_no"], kept["text"], strict=True)
             if p == "node-000/mixed.log"}
    assert mixed[4] == "Something FAILED badly" and mixed[5] == "warn: disk almost full"
    assert 6 in mixed and mixed[8] == "progress 20% timeout" and mixed[9] == "no newline at end error"
    assert 3 not in mixed  # the NCCL line was parsed
    # kept lines are unparsed lines that look like errors, never parsed ones
    ev = a.sql("SELECT f.path, e.line_no FROM events e JOIN files f USING (file_id) WHERE e.source <> 'generic'")
    claimed = set(zip(ev["path"].to_list(), ev["line_no"].to_list(), strict=True))
    assert not (kept_set & claimed)
    # and each kept line is a generic `error_line` event at its own line, so attribution sees it (a
    # parser may give the lines it claims that kind too, nccl_tests its own failure lines: not kept)
    el = a.sql("SELECT f.path, e.line_no FROM events e JOIN files f USING (file_id) "
               "WHERE e.kind = 'error_line' AND e.source = 'generic'")
    assert set(zip(el["path"].to_list(), el["line_no"].to_list(), strict=True)) == kept_set
    assert all(ERR.search(t) for t in kept["text"].to_list())
    # the report lists the first 200 and says how many more exist
    listed = [(u["path"], u["line"]) for u in rep["unparsed_errors"]]
    assert len(listed) == 200 and listed == list(zip(kept["path"], kept["line_no"], strict=True))[:200]
    total = kept.height
    assert any(f"{total} unparsed lines look like errors" in w and f"{total - 200} more" in w
               for w in rep["warnings"])


def test_few_error_lines_are_all_listed(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "a.log").write_text("fine\nsegfault? no: Exception in thread\nok\nXid 999 odd\nWARN low\n")
    rep = analyze(job, tmp_path / "out").report
    assert [(u["line"], u["text"]) for u in rep["unparsed_errors"]] == [
        (2, "segfault? no: Exception in thread"), (4, "Xid 999 odd"), (5, "WARN low")]
    assert not any("look like errors" in w for w in rep["warnings"])


def test_error_strings_without_an_error_word_are_kept(tmp_path: Path) -> None:
    """Error texts that carry none of the generic words (CUDA's cudaGetErrorString strings in a sample's
    own `<string> in <file> at line <n>` check, the kernel's and libc's fault and strerror texts) are
    error-like lines of a file no parser reads: kept, with their line numbers; ordinary words that
    contain such a word are not."""
    lines = [
        "an illegal memory access was encountered in kernel.cu at line 88",  # kept
        "using the default settings for the run",
        "Segmentation fault (core dumped)",  # read (the native-crash rule)
        "write(): No space left on device",  # kept
        "open /data/ckpt: Permission denied",  # kept
        "dial tcp 10.0.0.7:29500: connect: connection refused",  # kept
        "faulty cable suspected on port 3",  # kept
        "the defaults are fine",
    ]
    job = tmp_path / "job"
    job.mkdir()
    (job / "run.out").write_text("\n".join(lines) + "\n")
    a = analyze(job, tmp_path / "out", html=False)
    kept = a.sql("SELECT line_no FROM unparsed_lines ORDER BY line_no")["line_no"].to_list()
    read = a.sql("SELECT line_no FROM events WHERE source <> 'generic'")["line_no"].to_list()
    assert kept == [1, 4, 5, 6, 7] and read == [3]
    assert sorted(kept + read) == [i + 1 for i, t in enumerate(lines) if ERR.search(t)]
