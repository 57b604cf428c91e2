"""Parsers: one module per log source. Each is pure: a frame of numbered lines in, typed polars
frames and counted warnings out. The registry below is the list the discovery layer routes
files through; README's parser table is checked against it by a test.

Contract of a parser module (see `parsers.records`):
    NAME: str
    EXCLUSIVE: bool            # structured whole-file format: when it wins the sniff, it alone reads the file
    DESCRIPTION: str           # one line for the README
    FORMATS: tuple[str, ...]   # formats it reads
    EXTRACTS: tuple[str, ...]  # event kinds / tables it produces
    sniff(head: str) -> float  # 0..1, from the first ~64 KiB of decoded text
    parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction
`lines` has columns line_no, text, body (launcher/collector wrappers removed, `parsers.prefixes`),
prefix_host, prefix_rank, prefix_local_rank, prefix_task, prefix_ts (see `parsers.lines.with_body`).

A line parser (EXCLUSIVE False) also declares how forensics/bulk.py may run it over many files:
    BATCH = True               # once over the lines of many files: hints from `records.host_hint`,
                               # `rank_hint`, per-file state keyed also on `records.file_keys(ctx)`
    TRIGGER: str | list[str]   # else: a regex / literals; a file with no matching line gives nothing

A structured parser (EXCLUSIVE True) may also read a whole plain file straight from its bytes:
    parse_bytes(data: bytes, ctx: ParseContext) -> Extraction | None
                               # exactly what `parse` gives on the file's lines, or None: the file
                               # needs `parse` (ingest then reads it the usual way; dcgm's long CSV)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

PARSER_MODULES = ("dcgm", "sacct", "elastic", "kernel", "nccl", "pytorch", "steps", "slurm", "nvsmi", "k8s",
                  "ipmi", "sagemaker")


@dataclass(frozen=True)
class ParserInfo:
    name: str
    exclusive: bool
    description: str
    formats: tuple[str, ...]
    extracts: tuple[str, ...]
    module: ModuleType


def registry() -> list[ParserInfo]:
    out = []
    for modname in PARSER_MODULES:
        mod = importlib.import_module(f"parsers.{modname}")
        out.append(ParserInfo(mod.NAME, mod.EXCLUSIVE, mod.DESCRIPTION, tuple(mod.FORMATS),
                              tuple(mod.EXTRACTS), mod))
    return out
