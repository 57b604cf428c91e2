"""The seam between the parsers and the catalog: every event kind a parser can emit (its spec.kinds;
typed tables are not kinds) is judged by at least one signature of its source (or of source `any`), or
is declared context-only in signatures/context.toml; nothing is both, and nothing declared is a kind
its parser does not emit. A failure names the kind."""

from __future__ import annotations

from forensics.error_lines import KIND as ERROR_LINE
from forensics.error_lines import SOURCE as GENERIC
from forensics.line_classifier import KINDS as LINE_KINDS
from forensics.line_classifier import SIGNATURE_ID as LINE_CLASSIFIER
from forensics.signatures import ANY, load_catalog
from parsers import registry

CATALOG = load_catalog()


def _emitted() -> dict[str, set[str]]:
    out = {p.name: set(p.spec.kinds) for p in registry()}
    out[GENERIC] = {ERROR_LINE}
    return out


def _judged(source: str, kind: str) -> list[str]:
    ids = [s.id for s in CATALOG.signatures if s.source in (source, ANY) and (not s.kind or kind in s.kind)]
    if source == GENERIC and kind in LINE_KINDS:
        ids.append(LINE_CLASSIFIER)  # what no signature of the family knows, the line classifier reads
    return ids


def test_every_kind_is_judged_or_declared_context() -> None:
    missing = [f"{src}:{kind}" for src, kinds in _emitted().items() for kind in sorted(kinds)
               if not _judged(src, kind) and kind not in CATALOG.context_only.get(src, ())]
    assert not missing, f"kinds no signature judges and context.toml does not list: {missing}"


def test_context_only_kinds_are_emitted_and_not_judged() -> None:
    emitted = _emitted()
    stale = [f"{src}:{k}" for src, kinds in CATALOG.context_only.items() for k in kinds if k not in emitted.get(src, set())]
    assert not stale, f"context.toml lists kinds no parser emits: {stale}"
    both = [f"{src}:{k}" for src, kinds in CATALOG.context_only.items() for k in kinds
            if any(s.source == src and k in s.kind for s in CATALOG.signatures)]
    assert not both, f"context.toml lists kinds that signatures judge: {both}"


def test_signature_kinds_exist() -> None:
    emitted = _emitted()
    every = set().union(*emitted.values())
    unknown = [f"{s.id}:{k}" for s in CATALOG.signatures for k in s.kind
               if k not in (every if s.source == ANY else emitted.get(s.source, set()))]
    assert not unknown, f"signatures name kinds their source never emits: {unknown}"
