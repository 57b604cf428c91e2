"""The parsers' tables load on first use (issue 17, small bundles): importing the registry reads no
file of parsers/data/, a parse that needs a table reads it once, and the tables read with the csv
module are the ones polars reads from the same files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from parsers import dcgm, kernel

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "parsers" / "data"

# In a fresh process: every open() of a file under parsers/data/ and every pl.read_csv, while the registry is imported, then
# while a dmesg Xid line is parsed (kernel reads xid.csv), then while a dmon table is parsed (dcgm
# reads its field table). Printed as `phase file` lines.
_PROBE = r"""
import sys
from pathlib import Path
phase = ["import"]
data = str(Path("parsers/data").resolve())
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(data):
        print(phase[0], Path(args[0]).name)
sys.addaudithook(hook)
import polars as pl
read_csv = pl.read_csv
def spy(source, *a, **k):  # a table read by polars opens it in Rust: no audit event
    print(phase[0], "read_csv", Path(str(source)).name)
    return read_csv(source, *a, **k)
pl.read_csv = spy
import parsers
from parsers import registry
mods = {p.name: p.module for p in registry()}
from parsers.lines import decode_lines, with_body
from parsers.records import ParseContext
def frame(text):
    return with_body(decode_lines(text.encode()).lines)
phase[0] = "kernel"
for _ in range(2):
    ext = mods["kernel"].parse(frame("[  12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"),
                               ParseContext(path="dmesg.log"))
print("severity", ext.events["severity"].to_list())
phase[0] = "dmon"
text = "#Entity   SMCLK   POWER\nID                 W\nGPU 0     1980    698.1\n"
ext = mods["dcgm"].parse(frame(text), ParseContext(path="dmon.txt"))
print("fields", sorted(set(ext.tables["dcgm_samples"]["field"].to_list())))
"""


def test_the_registry_reads_no_table_and_a_parse_reads_its_own_once() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith("import ")], lines
    assert not [ln for ln in lines if "read_csv" in ln], lines
    assert [ln for ln in lines if ln.startswith("kernel ")] == ["kernel xid.csv"]  # read once, cached
    assert "severity ['critical']" in lines  # Xid 79 is critical in parsers/data/xid.csv
    assert [ln for ln in lines if ln.startswith("dmon ")] == ["dmon dcgm_fields.csv"]
    assert "fields ['DCGM_FI_DEV_POWER_USAGE', 'DCGM_FI_DEV_SM_CLOCK']" in lines


def test_xid_severity_table_is_the_csv_as_polars_reads_it() -> None:
    df = pl.read_csv(DATA / "xid.csv", columns=["xid", "severity"])
    sev = {"info": "info", "low": "info", "medium": "warning", "high": "error", "critical": "critical"}
    want = {int(x): sev.get(str(s).strip().lower(), "error") for x, s in df.iter_rows()}
    assert kernel.xid_severity_table() == want
    assert len(want) > 100 and want[79] == "critical"


def test_dcgm_field_ids_and_names_are_the_csv_as_polars_reads_it() -> None:
    df = pl.read_csv(DATA / "dcgm_fields.csv", infer_schema=False)
    for i, name in df.select("id", "name").iter_rows():
        if i:
            assert dcgm.canonical_or_id(i) == name
    for name, others in df.select("name", "other_names").iter_rows():
        assert dcgm.canonical_field(name) == name
        for o in (others or "").replace("|", ";").replace(",", ";").split(";"):
            o = o.strip()
            if o and " " not in o:
                assert dcgm.canonical_field(o) in set(df["name"]), o
