"""Regenerate `forensics/signatures/cuda_errors.csv` from an installed CUDA toolkit.

The table's columns `code`, `runtime_name`, `driver_name` and `message` come from the toolkit
itself: the `cudaError` enum of `include/driver_types.h`, the `CUresult` enum of
`include/cuda.h` (the driver name of the same numeric code, where the driver has one), and
`cudaGetErrorString()` of `lib64/libcudart.so`, which answers without a GPU. A driver-only code
(no runtime twin) has an empty runtime name and message. The `family`
column is ours (it says which signature family of `cuda.toml` the error belongs to) and is kept
from the committed table; a code the committed table does not know stops the script, naming it,
so that a new toolkit's errors are given a family by hand rather than silently.

    python tools/cuda_errors.py [--cuda /usr/local/cuda] [--check]

`--check` compares instead of writing and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import io
import re
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "forensics" / "signatures" / "cuda_errors.csv"
COLUMNS = ("code", "runtime_name", "driver_name", "message", "family")
_ENUM_ROW = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*,?", re.M)


def enum_block(text: str, opener: str) -> str:
    """The body of the enum whose declaration contains `opener`, up to its closing `}`."""
    start = text.index(opener)
    return text[text.index("{", start) + 1:text.index("}", start)]


def enum_codes(text: str, opener: str, prefix: str) -> dict[int, str]:
    """Code -> name of an enum's members whose name starts with `prefix` (first name wins)."""
    body = re.sub(r"/\*.*?\*/", "", enum_block(text, opener), flags=re.S)
    codes: dict[int, str] = {}
    for name, value in _ENUM_ROW.findall(body):
        if name.startswith(prefix):
            codes.setdefault(int(value), name)
    return codes


def runtime_messages(libcudart: Path, codes: list[int]) -> dict[int, str]:
    """`cudaGetErrorString(code)` for each code (the toolkit's own library, no device needed)."""
    lib = ctypes.CDLL(str(libcudart))
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorString.argtypes = [ctypes.c_int]
    return {c: lib.cudaGetErrorString(c).decode() for c in codes}


def committed_families(table: Path = TABLE) -> dict[int, str]:
    with table.open(newline="") as fh:
        return {int(r["code"]): r["family"] for r in csv.DictReader(fh)}


def build(cuda: Path, families: dict[int, str]) -> str:
    runtime = enum_codes((cuda / "include" / "driver_types.h").read_text(), "enum __device_builtin__ cudaError",
                         "cudaError")
    driver = enum_codes((cuda / "include" / "cuda.h").read_text(), "typedef enum cudaError_enum", "CUDA_")
    runtime.pop(0, None)  # cudaSuccess is not an error
    driver.pop(0, None)
    codes = sorted(set(runtime) | set(driver))  # driver-only codes (no runtime twin) too
    unknown = [c for c in codes if c not in families]
    if unknown:
        raise SystemExit("cuda_errors: no family for " + ", ".join(
            f"{c} {runtime.get(c) or driver[c]}" for c in unknown)
                         + f"; add them to {TABLE} by hand")
    libs = sorted((cuda / "lib64").glob("libcudart.so*"))
    if not libs:
        raise SystemExit(f"cuda_errors: no libcudart.so under {cuda / 'lib64'}")
    messages = runtime_messages(libs[0], sorted(runtime))
    out = io.StringIO()
    writer = csv.writer(out)  # the csv module's own line ends, as the committed table has them
    writer.writerow(COLUMNS)
    for code in codes:
        writer.writerow((code, runtime.get(code, ""), driver.get(code, ""), messages.get(code, ""), families[code]))
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", type=Path, default=Path("/usr/local/cuda"))
    ap.add_argument("--check", action="store_true", help="compare with the committed table; exit 1 if it differs")
    args = ap.parse_args(argv)
    if not (args.cuda / "include" / "driver_types.h").is_file():
        print(f"cuda_errors: no CUDA toolkit at {args.cuda}", file=sys.stderr)
        return 2
    text = build(args.cuda, committed_families())
    if args.check:
        same = text == TABLE.read_bytes().decode()
        print("cuda_errors: the table matches the toolkit" if same else "cuda_errors: the table differs")
        return 0 if same else 1
    TABLE.write_bytes(text.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
