"""The declared contract of a parser module: one `ParserSpec`, assigned to `SPEC` at the end of the
module (docs/architecture.md "Adding a source"). Everything the rest of the project needs to know
about a source without its name comes from here: the registry (`parsers.registry`) and the lists
derived from it (`parsers.source_names`, `parsers.source_with`) replace name literals elsewhere.

    name        the source's name: events' `source`, files' `parser`, signatures' `source`; equal
                to the module's name
    scope       what its records describe: `process` (a rank's or launcher's own output: it makes
                and stretches attempts), `node` (a host's kernel log or GPU telemetry) or `job`
                (scheduler and orchestrator records of the whole job)
    description one line for the README's parser table
    formats     the formats it reads (README)
    kinds       the event kinds it can emit (README; the parser-catalog seam test reads them)
    tables      the typed tables (`records.TABLE_SCHEMAS`) it fills
    exclusive   a structured whole-file format: when it wins the sniff, it alone reads the file
    batch       (line parsers) may run once over the lines of many files (forensics/bulk.py):
                hints from `records.host_hint`/`rank_hint`, per-file state keyed also on
                `records.file_keys(ctx)`
    trigger     (line parsers) a regex, or a tuple of literals: a frame (a file, a chunk, a batch) with
                no line whose `body` matches gives nothing, so its parse call is skipped there
                (`bulk.triggered`; tests/test_line_triggers.py); required of a line parser that is
                not batch
    reads_bytes (exclusive parsers) has `parse_bytes_many(datas, hosts, ctx)` and `BYTES_STRIDE`:
                whole plain files read straight from their bytes
    roles       what the analysis relies on this source for (closed set `ROLES`; each role is held
                by exactly one source)
    evidence    how a report names this source when it is missing from a job (None: never asked for)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["process", "node", "job"]
SCOPES: tuple[str, ...] = ("process", "node", "job")

ROLES: dict[str, str] = {
    "collectives": "the collective library's log: communicator inits map ranks to hosts and GPUs; its "
                   "network errors name the peers (attribution's who-reports-whom graph)",
    "launcher": "the launcher's per-rank failure records (exit codes, failure times, error files)",
    "framework": "the training framework's own errors: a root error there means a rank failed on its own",
    "scheduler": "the scheduler's accounting: job window, steps and requeues (an attempt witness)",
    "uptime_clock": "stamps that count from boot: a time derived at parse is a conversion, not a carry",
}


@dataclass(frozen=True)
class ParserSpec:
    name: str
    scope: Scope
    description: str
    formats: tuple[str, ...]
    kinds: tuple[str, ...]
    tables: tuple[str, ...] = ()
    exclusive: bool = False
    batch: bool = False
    trigger: str | tuple[str, ...] | None = None
    reads_bytes: bool = False
    roles: tuple[str, ...] = ()
    evidence: str | None = None
    # a line (regex on its body) that the lines after it need to be read, a CSV header: a large file
    # read in chunks hands the last one seen to the parser again with each later chunk
    header: str | None = None

    @property
    def extracts(self) -> tuple[str, ...]:
        """Event kinds, then tables: the README's "extracts" column."""
        return self.kinds + self.tables

    def problems(self, table_names: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """What is wrong with this spec on its own (empty when valid)."""
        out = []
        if not self.name or not self.name.isidentifier() or self.name != self.name.lower():
            out.append(f"name {self.name!r} is not a lower-case identifier")
        if self.scope not in SCOPES:
            out.append(f"scope {self.scope!r} is not one of {SCOPES}")
        if not self.description or "\n" in self.description:
            out.append("description must be one non-empty line")
        if not self.formats or not self.kinds:
            out.append("formats and kinds must not be empty")
        if len(set(self.extracts)) != len(self.extracts):
            out.append("kinds and tables repeat a name")
        if table_names:
            out += [f"table {t!r} is not in records.TABLE_SCHEMAS" for t in self.tables if t not in table_names]
            out += [f"kind {k!r} is a table name: list it under tables" for k in self.kinds if k in table_names]
        if self.exclusive and (self.batch or self.trigger is not None):
            out.append("an exclusive parser reads whole files: no batch, no trigger")
        if not self.exclusive and not self.batch and self.trigger is None:
            out.append("a line parser declares batch=True or a trigger (else bulk ingest cannot skip it)")
        if self.reads_bytes and not self.exclusive:
            out.append("reads_bytes is for exclusive (whole-file) parsers")
        out += [f"role {r!r} is not one of {sorted(ROLES)}" for r in self.roles if r not in ROLES]
        return out
