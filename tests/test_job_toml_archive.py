"""job.toml inside a .tar/.tar.gz job is read exactly as in the directory: at the archive's root
(members with or without `./`) or under its single top folder. Name, timezone, year, boot times
and host aliases all take effect."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from forensics.analysis import Analysis, analyze
from forensics.config import load_job_config, pick_job_toml
from forensics.discovery import discover

JOB_TOML = """name = "llm-run-42"
timezone = "America/Los_Angeles"
year = 2026
[boot_times]
"node-07" = "2026-08-22T14:00:00"
[host_aliases]
"node-07" = "gpu-node-07.cluster"
"""
# naive local step stamps (timezone), an uptime-stamped dmesg (boot time), a syslog-style
# stamp without a year (year)
RANK0 = "".join(
    f" [2026-08-22 15:{m:02d}:00.000000] iteration {100 * m:8d}/  500000 | consumed samples: {512 * m:12d} | "
    "elapsed time per iteration (ms): 60000.0 | learning rate: 1.500000E-04 | global batch size:   512 | "
    "lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.567 | number of skipped iterations:   0 | "
    "number of nan iterations:   0 |\n" for m in range(1, 6))
DMESG = ("[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-054) #115-Ubuntu SMP\n"
         "[ 4200.000001] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n"
         "[ 4200.000002] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n")
FILES = {"job.toml": JOB_TOML, "logs/node-07/rank-0.log": RANK0, "nodes/node-07/dmesg.log": DMESG}


def _job_dir(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _tar(path: Path, prefix: str, mode: str) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        if prefix.endswith("/") and prefix != "./":
            d = tarfile.TarInfo(prefix.rstrip("/"))
            d.type = tarfile.DIRTYPE
            tf.addfile(d)
        for rel, text in FILES.items():
            data = text.encode()
            ti = tarfile.TarInfo(prefix + rel)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path


LAYOUTS = [("flat.tar.gz", "", "w:gz"), ("dotslash.tar.gz", "./", "w:gz"), ("flat.tar", "", "w"),
           ("topfolder.tar.gz", "llm-job/", "w:gz"), ("topfolder.tar", "llm-job/", "w")]


def _facts(a: Analysis) -> dict:
    rep = a.report
    xid = a.sql("SELECT strftime(ts, '%Y-%m-%dT%H:%M:%S') AS t FROM events WHERE kind = 'xid'")["t"].to_list()
    return {"name": rep["job"]["name"], "hosts": rep["job"]["hosts"], "start": rep["job"]["start"],
            "xid_time": xid[0] if xid else None,
            "tz_warning": any("no timezone in job.toml" in w for w in rep["warnings"])}


@pytest.fixture(scope="module")
def from_dir(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("dir")
    return _facts(analyze(_job_dir(root / "job"), root / "out", html=False))


def test_directory_reads_every_setting(from_dir: dict) -> None:
    # 15:01 Los Angeles (PDT, UTC-7) is 22:01 UTC; the Xid 4200 s after a 14:00 PDT boot is 22:10 UTC
    assert from_dir["name"] == "llm-run-42"
    assert from_dir["start"].startswith("2026-08-22T22:0")
    assert from_dir["xid_time"] is not None and from_dir["xid_time"].startswith("2026-08-22T22:10:00")
    assert "gpu-node-07.cluster" in from_dir["hosts"] and "node-07" not in from_dir["hosts"]
    assert not from_dir["tz_warning"]


@pytest.mark.parametrize(("fname", "prefix", "mode"), LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_archive_reads_job_toml_as_the_directory(fname: str, prefix: str, mode: str, tmp_path: Path,
                                                 from_dir: dict) -> None:
    bundle = _tar(tmp_path / fname, prefix, mode)
    cfg = load_job_config(bundle)  # streamed (what fleet uses to name a job)
    assert cfg.name == "llm-run-42" and cfg.year == 2026 and str(cfg.timezone) == "America/Los_Angeles"
    assert cfg.host_aliases == {"node-07": "gpu-node-07.cluster"}
    assert set(cfg.boot_times) == {"node-07", "gpu-node-07.cluster"}
    disc = discover(bundle)
    try:
        assert load_job_config(bundle, disc) == cfg  # from the unpacked members: the same
    finally:
        disc.close()
    a = analyze(bundle, html=False, out=tmp_path / "out")
    assert _facts(a) == from_dir


def test_default_out_dir_takes_the_configured_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = _tar(tmp_path / "bundle.tar.gz", "llm-job/", "w:gz")
    monkeypatch.chdir(tmp_path)
    a = analyze(bundle, html=False)
    assert a.out_dir == Path("forensics-out") / "llm-run-42"


def test_pick_job_toml_rules() -> None:
    assert pick_job_toml(["./job.toml", "./a.log"]) == "./job.toml"
    assert pick_job_toml(["top/job.toml", "top/x/a.log"]) == "top/job.toml"
    assert pick_job_toml(["top/job.toml", "other/a.log"]) is None  # two top folders: no root
    assert pick_job_toml(["top/deep/job.toml", "top/a.log"]) is None  # inside the job, not at its root
    assert pick_job_toml(["job.toml"]) == "job.toml"
    assert pick_job_toml([]) is None
