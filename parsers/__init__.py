"""Parsers: one module per log source. Each is pure: a frame of numbered lines in, typed polars
frames and counted warnings out. The registry below is the list the discovery layer routes
files through; every list of source names elsewhere is derived from it (`source_names`,
`source_with`), and README's parser table is checked against it by a test.

Contract of a parser module (see `parsers.records` and `parsers.spec`):
    sniff(head: str) -> float  # 0..1, from the first ~64 KiB of decoded text
    parse(lines: pl.DataFrame, ctx: ParseContext) -> Extraction
    SNIFF_NEEDS = ((literal, caseless), ...)  # optional (structured parsers): ASCII literals, one of
                               # which every head `sniff` scores above 0 holds; ingest looks for them
                               # all in one pass over a head and skips the sniffs they rule out
    SPEC = ParserSpec(...)     # last statement of the module: name, scope, description, formats,
                               # kinds, tables, exclusive, batch / trigger, reads_bytes, roles
`lines` has columns line_no, text, body (launcher/collector wrappers removed, `parsers.prefixes`),
prefix_host, prefix_rank, prefix_local_rank, prefix_task, prefix_ts (see `parsers.lines.with_body`).

A line parser (exclusive False) declares how forensics/bulk.py may run it over many files:
`batch=True` (once over the lines of many files: hints from `records.host_hint`, `rank_hint`,
per-file state keyed also on `records.file_keys(ctx)`) or a `trigger` (a regex or a tuple of
literals; a file with no matching line gives nothing).

A structured parser (exclusive True) may also read whole plain files straight from their bytes
(`reads_bytes=True`):
    parse_bytes(data: bytes, ctx: ParseContext) -> Extraction | None
    parse_bytes_many(datas, hosts, ctx, newlines=None) -> (Extraction, taken flags); BYTES_STRIDE: int
                               # (newlines: each file's newline offsets, numpy, as the caller found them)
                               # exactly what `parse` gives on the file's lines, or not taken: the
                               # file needs `parse` (ingest then reads it the usual way; dcgm's long CSV)

Adding a source: its module ending with `SPEC`, and one line in PARSER_MODULES below
(docs/architecture.md "Adding a source"; tests/parsers/test_spec.py checks every piece).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from parsers.spec import ROLES, ParserSpec

# The registry: one module name a line. Order matters where two parsers claim the same head
# (the sniff's ties go to the earlier one).
PARSER_MODULES = (
    "dcgm",
    "sacct",
    "elastic",
    "kernel",
    "nccl",
    "pytorch",
    "steps",
    "slurm",
    "nvsmi",
    "k8s",
    "ibstat",
    "ipmi",
    "rasdaemon",
    "sagemaker",
    "nccl_tests",
    "nvrx",
    "pyspy",
    "mpi",
    "gpuburn",
    "ray_cluster",
)


@dataclass(frozen=True)
class ParserInfo:
    spec: ParserSpec
    module: ModuleType

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def exclusive(self) -> bool:
        return self.spec.exclusive

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def formats(self) -> tuple[str, ...]:
        return self.spec.formats

    @property
    def extracts(self) -> tuple[str, ...]:
        return self.spec.extracts


def legacy_spec(mod: ModuleType) -> ParserSpec:
    """A module still in the constant style (NAME, EXCLUSIVE, DESCRIPTION, FORMATS, EXTRACTS,
    BATCH, TRIGGER) read as a spec, so that it runs; its scope is unknown (it is in no list derived
    by scope) and tests/parsers/test_spec.py fails until it declares its SPEC."""
    from parsers.records import TABLE_SCHEMAS  # noqa: PLC0415 - only for modules without a SPEC

    extracts = tuple(mod.EXTRACTS)
    trig = getattr(mod, "TRIGGER", None)
    return ParserSpec(
        name=mod.NAME, scope=None, description=mod.DESCRIPTION, formats=tuple(mod.FORMATS),  # type: ignore[arg-type]
        kinds=tuple(e for e in extracts if e not in TABLE_SCHEMAS),
        tables=tuple(e for e in extracts if e in TABLE_SCHEMAS), exclusive=bool(mod.EXCLUSIVE),
        batch=bool(getattr(mod, "BATCH", False)), trigger=trig if isinstance(trig, str) or trig is None else tuple(trig),
        reads_bytes=hasattr(mod, "parse_bytes_many"))


@lru_cache(maxsize=1)
def _registry() -> tuple[ParserInfo, ...]:
    out = []
    for modname in PARSER_MODULES:
        mod = importlib.import_module(f"parsers.{modname}")
        spec = getattr(mod, "SPEC", None)
        out.append(ParserInfo(spec if isinstance(spec, ParserSpec) else legacy_spec(mod), mod))
    return tuple(out)


def registry() -> list[ParserInfo]:
    return list(_registry())


def source_names(scope: str | None = None, *, not_scope: str | None = None) -> tuple[str, ...]:
    """Names of the registered sources, in registry order; only those of `scope`, or only those
    not of `not_scope`, when given."""
    return tuple(p.name for p in _registry()
                 if (scope is None or p.spec.scope == scope) and (not_scope is None or p.spec.scope != not_scope))


def source_with(role: str) -> str:
    """The one source that holds `role` (`parsers.spec.ROLES`)."""
    if role not in ROLES:
        raise KeyError(f"unknown role {role!r}")
    names = [p.name for p in _registry() if role in p.spec.roles]
    if len(names) != 1:
        raise LookupError(f"role {role!r} is held by {names or 'no source'}; exactly one must hold it")
    return names[0]


def evidence_wanted() -> dict[str, str]:
    """source -> how a report names it when a job lacks it (sources that declare `evidence`)."""
    return {p.name: p.spec.evidence for p in _registry() if p.spec.evidence}
