"""Signatures as data (DESIGN §6): load the TOML catalog, validate every entry (both Python `re`
and the Rust regex engine polars uses), and match the catalog against the events frame.

Xid signatures are generated from the Xid table (`parsers/data/xid.csv`, a copy of
`reference/xid.csv`) plus the per-Xid category overrides in `signatures/xid.toml`.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path

import polars as pl

from forensics.cache import cached_json
from forensics.triage import LiteralSet, literal_factor, literal_set, trigger_patterns
from parsers import source_names
from parsers.ascii_regex import ascii_classes

ROLES = ("root", "cascade", "context")
SEVERITIES = ("info", "warning", "error", "critical")
CATEGORIES = (
    "gpu_lost", "gpu_memory", "nvlink", "gpu_driver_firmware", "gpu_other_hardware", "network_fabric",
    "host_hardware", "storage", "nccl_config", "cuda_error", "oom", "user_code", "framework_bug",
    "numerics", "collective_desync", "comm_hang_unknown", "preemption", "time_limit", "user_cancelled",
    "straggler_hardware", "slowdown_transient", "slowdown_workload", "unknown",
)
SOURCES = source_names()  # every registered parser (parsers.PARSER_MODULES)
# events no parser made: `error_line` (forensics/error_lines.py); a signature of source ANY matches
# the events of every source (a message family that one parser claims in one log and nobody in another)
GENERIC = "generic"
ANY = "any"


@dataclass(frozen=True)
class Signature:
    id: str
    source: str
    pattern: str
    category: str
    role: str
    severity: str
    summary: str
    kind: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    unless: str | None = None
    weight: int = 3
    examples: tuple[str, ...] = ()
    counter_examples: tuple[str, ...] = ()
    origin: str = ""  # file the entry came from
    # literals every line the pattern matches holds one of, declared where the pattern has none of
    # MIN_LITERAL characters that forensics.triage can derive (checked at load against the examples)
    literals: tuple[str, ...] = ()

    def matches_text(self, message: str) -> bool:
        """Python-side match (used by tests and the catalog checker)."""
        if not re.search(self.pattern, message):
            return False
        return not (self.unless and re.search(self.unless, message))

    @property
    def kind_only(self) -> bool:
        """A signature that matches every message (`.`) of its kinds or codes: the event's kind
        selects its lines, not a literal."""
        return self.pattern == "." and bool(self.kind or self.code)

    def literal_set(self) -> LiteralSet | None:
        """The literals every message this signature matches holds one of (its declared
        `literals`, else those `forensics.triage.literal_factor` derives from the pattern); None
        when there are none (a kind-only signature, or a pattern with no literal)."""
        if self.literals:
            ci = bool(re.compile(self.pattern).flags & re.IGNORECASE)
            return LiteralSet.of((lit, ci) for lit in self.literals)
        got = None if self.kind_only else literal_factor(self.pattern)
        return LiteralSet.of(got) if got else None


class CatalogError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("signature catalog invalid:\n" + "\n".join(f"  - {e}" for e in errors))
        self.errors = errors


@dataclass
class Catalog:
    signatures: list[Signature] = field(default_factory=list)
    # source -> event kinds no signature judges (signatures/context.toml; tests/test_seam.py)
    context_only: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # signature id -> its literal set (None: kind-only, or no literal), derived once per catalog and
    # kept in its cache entry (deriving all of them walks ~400 regex trees, ~0.1 s of CPU)
    literal_sets: dict[str, LiteralSet | None] = field(default_factory=dict, repr=False, compare=False)

    def literal_set(self, sig: Signature) -> LiteralSet | None:
        """`sig.literal_set()` (None for a kind-only signature), computed at most once."""
        if sig.id not in self.literal_sets:
            self.literal_sets[sig.id] = None if sig.kind_only else sig.literal_set()
        return self.literal_sets[sig.id]

    def by_id(self, sid: str) -> Signature:
        for s in self.signatures:
            if s.id == sid:
                return s
        raise KeyError(sid)


def _check_regex(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a valid Python regex ({exc})"
    try:
        pl.select(pl.lit("x").str.contains(ascii_classes(pattern)))
    except Exception as exc:  # polars raises ComputeError for Rust-invalid patterns
        return f"not valid in the Rust regex engine ({str(exc).splitlines()[0]})"
    return None


def _check_literals(sig: Signature, where: str) -> list[str]:
    """A declared literal set must hold for the signature's own examples: each one the pattern
    matches contains one of the literals (case-insensitively under a `(?i)` pattern)."""
    ci = bool(re.compile(sig.pattern).flags & re.IGNORECASE)
    out = []
    for ex in sig.examples:
        if re.search(sig.pattern, ex) and not any((lit.lower() in ex.lower()) if ci else (lit in ex)
                                                   for lit in sig.literals):
            out.append(f"{where}: example {ex!r} holds none of its literals {list(sig.literals)}")
    return out


def _as_tuple(v: object) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, (list, tuple)):
        return tuple(str(x) for x in v)
    return (str(v),)


def parse_catalog(docs: dict[str, dict]) -> Catalog:
    """Build a catalog from {origin: parsed TOML}; raise CatalogError listing every bad entry."""
    errors: list[str] = []
    sigs: list[Signature] = []
    seen: set[str] = set()
    context_only: dict[str, tuple[str, ...]] = {}
    for origin, doc in docs.items():
        for src, kinds in doc.get("context_only", {}).items():
            if src not in (*SOURCES, GENERIC):
                errors.append(f"{origin}: context_only: unknown source {src!r}")
            context_only[src] = tuple(sorted({*context_only.get(src, ()), *_as_tuple(kinds)}))
        for i, raw in enumerate(doc.get("signature", [])):
            sid = raw.get("id", f"#{i}")
            where = f"{origin}: {sid}"
            missing = [k for k in ("id", "source", "pattern", "category", "role", "severity", "summary") if k not in raw]
            if missing:
                errors.append(f"{where}: missing {', '.join(missing)}")
                continue
            if sid in seen:
                errors.append(f"{where}: duplicate id")
            seen.add(sid)
            if raw["source"] not in (*SOURCES, GENERIC, ANY):
                errors.append(f"{where}: unknown source {raw['source']!r}")
            if raw["category"] not in CATEGORIES:
                errors.append(f"{where}: unknown category {raw['category']!r}")
            if raw["role"] not in ROLES:
                errors.append(f"{where}: unknown role {raw['role']!r}")
            if raw["severity"] not in SEVERITIES:
                errors.append(f"{where}: unknown severity {raw['severity']!r}")
            for key in ("pattern", "unless"):
                if raw.get(key) is not None:
                    problem = _check_regex(str(raw[key]))
                    if problem:
                        errors.append(f"{where}: {key} {problem}")
            lits = raw.get("literals", [])
            if not isinstance(lits, list) or not all(isinstance(x, str) and x.strip() for x in lits):
                errors.append(f"{where}: literals must be a list of non-empty strings")
                lits = []
            sig = Signature(
                id=sid, source=raw["source"], pattern=str(raw["pattern"]), category=raw["category"],
                role=raw["role"], severity=raw["severity"], summary=raw["summary"],
                kind=_as_tuple(raw.get("kind")), code=_as_tuple(raw.get("code")), unless=raw.get("unless"),
                weight=int(raw.get("weight", 3 if raw["role"] == "root" else 1)),
                examples=_as_tuple(raw.get("examples")), counter_examples=_as_tuple(raw.get("counter_examples")),
                origin=origin, literals=tuple(lits),
            )
            if lits and not any(e.startswith(f"{where}: pattern") for e in errors):
                errors += _check_literals(sig, where)
            sigs.append(sig)
    if errors:
        raise CatalogError(errors)
    return Catalog(sigs, context_only)


# Xid catalog columns -> signature fields
_XID_ORIGIN_CATEGORY = {
    "hardware": "gpu_other_hardware", "memory": "gpu_memory", "nvlink": "nvlink", "fabric": "nvlink",
    "driver": "gpu_driver_firmware", "user_app": "cuda_error", "thermal": "gpu_other_hardware",
    "system": "gpu_driver_firmware",
}
_XID_SEVERITY = {"info": "info", "low": "info", "medium": "warning", "high": "error", "critical": "critical"}


def xid_table() -> pl.DataFrame:
    path = resources.files("parsers").joinpath("data/xid.csv")
    return pl.read_csv(path.read_bytes(), infer_schema_length=0)


# the event kinds that carry an Xid number as their code, whichever parser read it: the kernel's
# `NVRM: Xid` line, the DCGM Xid gauge (`dcgm_xid`, non-zero values only) and the Xid an NVML
# agent reports (k8s device plugin, gpud: kind `xid` of parsers/nvsmi.py). One table decides
# what an Xid means, wherever it was seen; the signature matches on kind and code, not on text.
# A cascade Xid (43, 45: channels torn down after an earlier error) is read from the kernel's
# line only: the DCGM gauge keeps the last Xid per GPU, so a gauge showing a cascade Xid is the case
# where the root Xid is hidden behind it (signatures/dcgm.toml dcgm-xid-cascade, context).
XID_KINDS = ("xid", "dcgm_xid")


def xid_signatures(overrides: dict) -> dict:
    """One signature per Xid of the catalog: category from its most likely origin (or the
    override), role root unless the Xid is informational, severity from the table. Source `any`,
    kinds XID_KINDS, code the Xid."""
    table = xid_table()
    out = []
    over = {str(k): v for k, v in overrides.get("xid", {}).items()}
    for row in table.iter_rows(named=True):
        xid = str(row["xid"]).strip()
        origin = (row["likely_origin"] or "").split(";")[0].strip()
        sev = _XID_SEVERITY.get((row["severity"] or "").strip(), "warning")
        o = over.get(xid, {})
        role = o.get("role", "context" if sev == "info" else "root")
        category = o.get("category", _XID_ORIGIN_CATEGORY.get(origin, "gpu_other_hardware"))
        out.append({
            "id": f"xid-{xid}", "source": ANY, "kind": list(XID_KINDS if role != "cascade" else XID_KINDS[:1]),
            "code": [xid],
            "pattern": o.get("pattern", "."), "unless": o.get("unless"), "category": category, "role": role, "severity": sev,
            "weight": o.get("weight", 4 if sev in ("error", "critical") and role == "root" else 2 if role == "root" else 1),
            "summary": f"Xid {xid}: {row['short_meaning']} (recommended: {row['recommended_action']})",
            "examples": o.get("examples", [f"NVRM: Xid (PCI:0000:3b:00): {xid}, pid=1234, name=python3, ..."]),
        })
    return {"signature": out}


# TOML files beside the signatures that are not signatures (forensics/precedence.py reads this one)
NOT_SIGNATURES = ("precedence.toml",)


def load_catalog() -> Catalog:
    """The validated catalog, compiled once and then read from the user cache (forensics/cache.py)
    while the files it is built from, this module and the regex engines are unchanged."""
    return _catalog_from_json(cached_json("catalog", _catalog_inputs(), lambda: _catalog_to_json(build_catalog())))


def _catalog_inputs() -> list[bytes]:
    base = resources.files("forensics").joinpath("signatures")
    # (triage.py derives the literal sets the entry keeps)
    out = [sys.version.encode(), pl.__version__.encode(), "\n".join(SOURCES).encode(), Path(__file__).read_bytes(),
           resources.files("forensics").joinpath("triage.py").read_bytes(),
           resources.files("parsers").joinpath("data/xid.csv").read_bytes()]
    for entry in sorted(base.iterdir(), key=lambda e: e.name):
        if entry.is_file():
            out += [entry.name.encode(), entry.read_bytes()]
    return out


def _catalog_to_json(cat: Catalog) -> dict:
    sets = {s.id: cat.literal_set(s) for s in cat.signatures}
    return {"signatures": [asdict(s) for s in cat.signatures], "context_only": cat.context_only,
            "literal_sets": {k: None if v is None else [list(v.exact), list(v.caseless)] for k, v in sets.items()}}


def _catalog_from_json(doc: dict) -> Catalog:
    tuples = {f.name for f in fields(Signature) if str(f.type).startswith("tuple")}
    sigs = [Signature(**{k: tuple(v) if k in tuples else v for k, v in s.items()}) for s in doc["signatures"]]
    sets = {k: None if v is None else LiteralSet(tuple(v[0]), tuple(v[1])) for k, v in doc["literal_sets"].items()}
    return Catalog(sigs, {k: tuple(v) for k, v in doc["context_only"].items()}, sets)


def build_catalog() -> Catalog:
    """Read and validate every TOML of the catalog (what `load_catalog` caches)."""
    base = resources.files("forensics").joinpath("signatures")
    docs: dict[str, dict] = {}
    overrides: dict = {}
    for entry in sorted(base.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml") or entry.name in NOT_SIGNATURES:
            continue
        doc = tomllib.loads(entry.read_text(encoding="utf-8"))
        if entry.name == "xid.toml":
            overrides = doc
            docs["xid.toml (generated from xid.csv)"] = xid_signatures(overrides)
        else:
            docs[entry.name] = doc
    return parse_catalog(docs)


_REGEX_META = set(".^$*+?{}[]()|\\")


def top_level_alternatives(pattern: str) -> list[str]:
    """Top-level alternatives of a regex (groups and classes kept whole): the one splitter for
    `literal_prefixes` here and `forensics.triage.required_literals`."""
    out, cur, depth, cls, i = [], "", 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            cur += pattern[i:i + 2]
            i += 2
            continue
        if cls:
            cls = c != "]"
        elif c == "[":
            cls = True
            if pattern[i + 1:i + 2] == "]" or pattern[i + 1:i + 3] == "^]":
                cur += pattern[i:i + (2 if pattern[i + 1] == "]" else 3)]
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(cur)
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    return [*out, cur]


def literal_prefixes(pattern: str, min_len: int = 3) -> list[str]:
    """The literal text each top-level alternative of `pattern` starts with (inline flags dropped,
    escaped punctuation unescaped, a quantified last character left off), where it is at least
    `min_len` characters long: the words a `grep -E` alternation can search for."""
    body = re.sub(r"^\(\?[a-zA-Z]+\)", "", pattern)
    out = []
    for alt in top_level_alternatives(body):
        lit, i = "", 0
        while i < len(alt):
            c = alt[i]
            if c == "\\" and i + 1 < len(alt) and not alt[i + 1].isalnum():
                lit += alt[i + 1]
                i += 2
                continue
            if c in _REGEX_META:
                break
            lit += c
            i += 1
        if i < len(alt) and alt[i] in "*?{" and lit:
            lit = lit[:-1]
        if len(lit.strip()) >= min_len and lit not in out:
            out.append(lit)
    return out


def catalog_literals(catalog: Catalog) -> list[str]:
    """Sorted, de-duplicated literal prefixes of every signature pattern in the catalog."""
    return sorted({lit for s in catalog.signatures for lit in literal_prefixes(s.pattern)})


HIT_SCHEMA = {
    "event_id": pl.Int64, "signature": pl.Utf8, "category": pl.Utf8, "role": pl.Utf8,
    "severity": pl.Utf8, "summary": pl.Utf8, "weight": pl.Int64,
}


MATCH_CELLS = 2_000_000  # (event, signature) cells one polars call evaluates: a small job's whole catalog at once


def _condition(sig: Signature) -> pl.Expr:
    cond = pl.col("message").str.contains(ascii_classes(sig.pattern))
    if sig.kind:
        cond = cond & pl.col("kind").is_in(list(sig.kind))
    if sig.code:
        cond = cond & pl.col("code").is_in(list(sig.code))
    if sig.unless:
        cond = cond & ~pl.col("message").str.contains(ascii_classes(sig.unless))
    return cond.fill_null(False)


def _match_by_source(catalog: Catalog, events: pl.DataFrame) -> pl.DataFrame:
    """Every (event, signature) hit, vectorized over the events of each signature's source: the
    signatures of one source are evaluated together, as many per polars call as MATCH_CELLS allows
    (one call per source for a small job, one per signature for a large one)."""
    parts = []
    by_source = {k[0]: df for k, df in events.partition_by("source", as_dict=True).items()} \
        if not events.is_empty() else {}  # (one split, not a filter per registered source)
    by_source[ANY] = events
    groups: dict[str, list[Signature]] = {}
    for sig in catalog.signatures:
        groups.setdefault(sig.source, []).append(sig)
    for src, sigs in groups.items():
        ev = by_source.get(src)
        if ev is None or ev.is_empty():
            continue
        parts.extend(_hits_together(ev, sigs))
    if not parts:
        return pl.DataFrame(schema=HIT_SCHEMA)
    return pl.concat(parts).sort("event_id", "signature")


def _hits_together(ev: pl.DataFrame, sigs: list[Signature]) -> list[pl.DataFrame]:
    """The hits (HIT_SCHEMA) of signatures `sigs` on the events `ev`, their conditions evaluated
    together, as many per polars call as MATCH_CELLS allows."""
    parts = []
    step = max(1, MATCH_CELLS // ev.height)
    for lo in range(0, len(sigs), step):
        chunk = sigs[lo:lo + step]
        flags = ev.select("event_id", *(_condition(s).alias(str(j)) for j, s in enumerate(chunk)))
        cols = [str(j) for j in range(len(chunk))]
        hits = flags.filter(pl.any_horizontal(cols)).unpivot(cols, index="event_id", variable_name="_j")
        hits = hits.filter(pl.col("value"))
        if hits.is_empty():
            continue
        meta = pl.DataFrame({
            "_j": cols, "signature": [s.id for s in chunk], "category": [s.category for s in chunk],
            "role": [s.role for s in chunk], "severity": [s.severity for s in chunk],
            "summary": [s.summary for s in chunk], "weight": [s.weight for s in chunk]},
            schema={"_j": pl.Utf8, **{k: v for k, v in HIT_SCHEMA.items() if k != "event_id"}})
        parts.append(hits.join(meta, on="_j", how="inner").select(list(HIT_SCHEMA)))
    return parts


# from this many events on the literal screen is used (below it, `_candidates` drops in Python the
# signatures that cannot hit), unless a sample of the events shows that more than PREFILTER_MAX_KEPT
# of them would survive it; the result is the same either way
PREFILTER_MIN_EVENTS = 2_001
PREFILTER_SAMPLE = 5_000
PREFILTER_MAX_KEPT = 0.5


def match(catalog: Catalog, events: pl.DataFrame, prefilter: bool | None = None) -> pl.DataFrame:
    """Every (event, signature) hit, vectorized per signature over the events of its source.

    With `prefilter` (by default: from PREFILTER_MIN_EVENTS events on, unless a sample shows that
    most of them would survive), one `str.contains_any`
    pass over the messages keeps the events holding a literal of some signature's literal set
    (`Signature.literal_set`: every message its pattern matches holds one), and a signature with a
    literal set runs its regex on those survivors only; a signature with none (none in the shipped
    catalog but the kind-only ones: tests/test_triage.py) on every event of its source. A
    kind-only signature (`.` with kinds or codes) looks only at the events of its kinds. Without
    the screen the signatures of one source are evaluated together (`_match_by_source`). The
    hits are the same on either path (tests/test_signatures.py, tests/test_small_path.py).
    """
    parts = []
    auto = prefilter is None
    prefilter = events.height >= PREFILTER_MIN_EVENTS if auto else prefilter
    if not prefilter:
        if auto and events.height <= SMALL_SCREEN_EVENTS:
            return _match_by_source(Catalog(_candidates(catalog, events), catalog.context_only), events)
        return _match_by_source(catalog, events)
    screens = [(sig, catalog.literal_set(sig)) for sig in catalog.signatures]
    kept = LiteralSet.union(s for _, s in screens if s is not None).contains(pl.col("message")).fill_null(False)
    sample = events.gather_every(max(1, events.height // PREFILTER_SAMPLE)) if auto else None
    if sample is not None and sample.select(kept.mean()).item() > PREFILTER_MAX_KEPT:
        return _match_by_source(catalog, events)  # nearly every event would survive: no screen
    frames = {False: _Frames(events), True: _Frames(events.filter(kept))}
    # the signatures that read the same frame (screened or not, one source, the same kinds) are
    # evaluated together: a few dozen polars calls, not one per signature
    same: dict[tuple, list[Signature]] = {}
    for sig, screen in screens:
        same.setdefault((screen is not None, sig.source, sig.kind), []).append(sig)
    for (screened, source, kinds), sigs in same.items():
        ev = frames[screened].get(source, kinds)
        if not ev.is_empty():
            parts.extend(_hits_together(ev, sigs))  # their kinds again: the frame already holds only those
    if not parts:
        return pl.DataFrame(schema=HIT_SCHEMA)
    return pl.concat(parts).sort("event_id", "signature")


# up to this many events, the signatures that cannot hit are dropped in Python before any regex is
# compiled (a small bundle: a few of ~400 patterns are run); the hits are the same either way
SMALL_SCREEN_EVENTS = 2_000


def _candidates(catalog: Catalog, events: pl.DataFrame) -> list[Signature]:
    """The signatures of `catalog` that may hit one of `events`: their source has events, of one of
    their kinds and codes when they name some, and (unless kind-only) a message of that source holds
    a literal of their literal set. A signature without a literal set stays (it may match anything)."""
    per: dict[str, tuple[str, str, set, set]] = {}
    for src, msgs, kinds, codes in events.group_by("source").agg("message", "kind", "code").iter_rows():
        text = "\n".join(m for m in msgs if m)
        per[src] = (text, text.lower(), set(kinds), set(codes))
    if per:
        text = "\n".join(t for t, _, _, _ in per.values())
        per[ANY] = (text, text.lower(), set().union(*(k for _, _, k, _ in per.values())),
                    set().union(*(c for _, _, _, c in per.values())))
    out = []
    for sig in catalog.signatures:
        got = per.get(sig.source)
        if got is None:
            continue
        text, lower, kinds, codes = got
        if (sig.kind and kinds.isdisjoint(sig.kind)) or (sig.code and codes.isdisjoint(sig.code)):
            continue
        lits = catalog.literal_set(sig)
        # a caseless literal is ASCII-caseless: str.lower() lowers every ASCII letter (and more), so
        # a line holding it holds its lowered text in `lower`
        if lits is None or any(e in text for e in lits.exact) or any(c.lower() in lower for c in lits.caseless):
            out.append(sig)
    return out


class _Frames:
    """The events of a source (every source for `any`) and of a list of kinds, each split once."""

    def __init__(self, events: pl.DataFrame) -> None:
        self.events = events
        self._by: dict[tuple[str, ...], dict] = {}

    def _split(self, *cols: str) -> dict:
        if cols not in self._by:
            self._by[cols] = self.events.partition_by(*cols, as_dict=True) if not self.events.is_empty() else {}
        return self._by[cols]

    def get(self, source: str, kinds: tuple[str, ...]) -> pl.DataFrame:
        empty = self.events.head(0)
        if not kinds:
            return self.events if source == ANY else self._split("source").get((source,), empty)
        keys = [(k,) if source == ANY else (source, k) for k in dict.fromkeys(kinds)]
        by = self._split("kind") if source == ANY else self._split("source", "kind")
        got = [by[k] for k in keys if k in by]
        return pl.concat(got) if len(got) > 1 else got[0] if got else empty


# ---------------------------------------------------------------------------------------------
# coverage: what the prefilter knows about the catalog (`python -m forensics.signatures`)


def literal_coverage(catalog: Catalog, parsers: Sequence) -> dict:
    """How many signatures have a literal set (declared, derived), how many are kind-only, how many
    have neither (the test requires none), and the same for the parser triggers' patterns."""
    sigs = catalog.signatures
    trig = [p for v in trigger_patterns(parsers).values() for p in v]
    lits, missing = literal_set(trig)
    with_set = [s for s in sigs if s.literal_set() is not None]
    union = LiteralSet.union([lits, *(s.literal_set() for s in with_set)])
    return {
        "signatures": len(sigs),
        "with_literal_set": len(with_set),
        "declared": sum(bool(s.literals) for s in sigs),
        "kind_only": sum(s.kind_only for s in sigs),
        "without": sorted(s.id for s in sigs if not s.kind_only and s.literal_set() is None),
        "trigger_parsers": len(trigger_patterns(parsers)),
        "trigger_patterns": len(trig),
        "triggers_without": missing,
        "literals": {"exact": len(union.exact), "caseless": len(union.caseless)},
    }


if __name__ == "__main__":
    import json

    from parsers import registry

    print(json.dumps(literal_coverage(load_catalog(), registry()), indent=1))
