"""Precedence and causality as data (signatures/precedence.toml, DESIGN §6.2): which of several
root candidates of one attempt is the cause, how a root's category depends on the phase it
happened in, which signals are teardown only, and how ties break. attribution.py applies it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from importlib import resources

import polars as pl

from forensics.signatures import CATEGORIES
from forensics.taxonomy import ACTIONS, AUTO_RECOVERABLE

# tie_break key -> (column of the candidates frame, descending)
TIE_KEYS: dict[str, tuple[str, bool]] = {
    "weight": ("weight", True), "reliable": ("reliable", True), "time": ("t_best", False),
    "rank": ("rank", False), "host": ("host", False), "gpu": ("gpu", False), "signature": ("signature", False),
    "path": ("path", False), "line": ("line_no", False),
}
SCOPES = ("host", "gpu", "attempt")


class PrecedenceError(Exception):
    pass


@dataclass(frozen=True)
class Selector:
    """Hits whose signature id, category and event kind are each in the given lists (an empty
    list does not restrict)."""
    signatures: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    def expr(self) -> pl.Expr:
        cond = pl.lit(True)
        if self.signatures:
            cond = cond & pl.col("signature").is_in(list(self.signatures))
        if self.categories:
            cond = cond & pl.col("category").is_in(list(self.categories))
        if self.kinds:
            cond = cond & pl.col("kind").is_in(list(self.kinds))
        return cond.fill_null(False)


@dataclass(frozen=True)
class Outranks:
    name: str
    why: str
    winner: Selector
    loser: Selector
    scope: str
    window: timedelta


@dataclass(frozen=True)
class PhaseRule:
    name: str
    why: str
    signatures: tuple[str, ...]
    before_first_step: str
    after_first_step: str


@dataclass(frozen=True)
class Precedence:
    tie_window: timedelta
    node_incident_gap: timedelta
    tie_break: tuple[str, ...]
    outranks: tuple[Outranks, ...]
    phase: tuple[PhaseRule, ...]
    teardown: tuple[str, ...]
    hang_signals: tuple[str, ...]
    may_hang: tuple[str, ...]
    app_fault_signatures: tuple[str, ...]
    app_fault_processes: int
    app_fault_category: str
    follow_on_xids: tuple[str, ...]
    actions: dict[str, str]
    many_peers: int = 3
    many_reporters: int = 2
    needs_spare_node: tuple[str, ...] = ()
    # [restart] needs_saved_progress: categories a requeue recovers only when the job shows it keeps its
    # progress (a step or a checkpoint logged)
    needs_saved_progress: tuple[str, ...] = ()
    # [preprocessing_wait]: context event kinds/codes that turn a rootless pre-training hang into `category`
    preproc_kinds: tuple[str, ...] = ()
    preproc_codes: tuple[str, ...] = ()
    preproc_category: str = "collective_desync"
    # [exit_wait]: context event kinds after which a rootless hang is a hang in the program's exit
    exit_kinds: tuple[str, ...] = ()
    exit_category: str = "framework_bug"
    # [after_completion]: signals that are no failure in an attempt whose training is seen to end
    after_completion: tuple[str, ...] = ()
    # [jobwide]: categories whose root, reported alike by several ranks, is the job's configuration or
    # platform, not one rank's fault: no culprit
    jobwide_categories: tuple[str, ...] = ()
    jobwide_ranks: int = 2
    # [outside_job]: signatures whose root names a service outside the job (a remote data store): the
    # reporting rank or host is a victim, not the culprit
    outside_job: tuple[str, ...] = ()
    # [pair_report]: signatures whose line names two ranks that disagree (the reporter is either side): the
    # culprit is the one rank every such report of the attempt names, else none
    pair_report: tuple[str, ...] = ()
    # [first_dead]: context signatures of a launcher naming a process it saw die: with no root and no cascade
    # the unknown verdict's culprit is the first of them
    first_dead: tuple[str, ...] = ()
    # [no_failure]: context signatures of an Xid the driver itself reports as recovered (NVLink5 `Nonfatal`): such an
    # Xid does not show that the attempt failed (attribution._failure_seen), other context Xids (a cascade code in
    # the DCGM gauge, hiding its root) still do
    no_failure: tuple[str, ...] = ()

    def signature_ids(self) -> set[str]:
        """Every signature id the rules name (tests check each exists in the catalog)."""
        ids = {*self.teardown, *self.hang_signals, *self.app_fault_signatures, *self.actions, *self.after_completion,
               *self.outside_job, *self.pair_report, *self.first_dead, *self.no_failure}
        for r in self.outranks:
            ids |= {*r.winner.signatures, *r.loser.signatures}
        for p in self.phase:
            ids |= set(p.signatures)
        return ids

    def sort_keys(self) -> tuple[list[str], list[bool]]:
        cols = [TIE_KEYS[k] for k in self.tie_break]
        return [c for c, _ in cols], [d for _, d in cols]


def _t(v: object) -> tuple[str, ...]:
    if v is None:
        return ()
    return tuple(str(x) for x in (v if isinstance(v, list) else [v]))


def _check_categories(where: str, cats: tuple[str, ...], errors: list[str]) -> None:
    for c in cats:
        if c not in CATEGORIES:
            errors.append(f"{where}: unknown category {c!r}")


def parse_precedence(doc: dict) -> Precedence:
    errors: list[str] = []
    tie = _t(doc.get("tie_break"))
    for k in tie:
        if k not in TIE_KEYS:
            errors.append(f"tie_break: unknown key {k!r} (known: {', '.join(TIE_KEYS)})")
    if "path" not in tie or "line" not in tie:
        errors.append("tie_break must end in path and line so that every order is total")
    outranks = []
    for raw in doc.get("outranks", []):
        name = str(raw.get("name", "?"))
        win = Selector(_t(raw.get("winner_signatures")), _t(raw.get("winner_categories")), _t(raw.get("winner_kinds")))
        lose = Selector(_t(raw.get("loser_signatures")), _t(raw.get("loser_categories")), _t(raw.get("loser_kinds")))
        _check_categories(f"outranks {name}", win.categories + lose.categories, errors)
        if win == Selector() or lose == Selector():
            errors.append(f"outranks {name}: both a winner and a loser selector are needed")
        scope = str(raw.get("scope", "host"))
        if scope not in SCOPES:
            errors.append(f"outranks {name}: unknown scope {scope!r}")
        if not str(raw.get("why", "")).strip():
            errors.append(f"outranks {name}: say why")
        outranks.append(Outranks(name, str(raw.get("why", "")), win, lose, scope,
                                 timedelta(seconds=float(raw.get("window_s", 300)))))
    phase = []
    for raw in doc.get("phase", []):
        name = str(raw.get("name", "?"))
        p = PhaseRule(name, str(raw.get("why", "")), _t(raw.get("signatures")), str(raw.get("before_first_step")),
                      str(raw.get("after_first_step")))
        _check_categories(f"phase {name}", (p.before_first_step, p.after_first_step), errors)
        phase.append(p)
    app = doc.get("app_fault_repeats", {})
    hang = doc.get("hang", {})
    actions = {str(k): str(v) for k, v in doc.get("action", {}).items()}
    for sid, act in actions.items():
        if act not in ACTIONS:
            errors.append(f"action {sid}: unknown action {act!r}")
    _check_categories("hang.may_hang", _t(hang.get("may_hang")), errors)
    _check_categories("app_fault_repeats", _t(app.get("category", "gpu_other_hardware")), errors)
    spare = _t(doc.get("restart", {}).get("needs_spare_node"))
    _check_categories("restart.needs_spare_node", spare, errors)
    saved = _t(doc.get("restart", {}).get("needs_saved_progress"))
    _check_categories("restart.needs_saved_progress", saved, errors)
    pre = doc.get("preprocessing_wait", {})
    _check_categories("preprocessing_wait", _t(pre.get("category", "collective_desync")), errors)
    ew = doc.get("exit_wait", {})
    _check_categories("exit_wait", _t(ew.get("category", "framework_bug")), errors)
    jw = doc.get("jobwide", {})
    _check_categories("jobwide", _t(jw.get("categories")), errors)
    if errors:
        raise PrecedenceError("precedence.toml invalid:\n" + "\n".join(f"  - {e}" for e in errors))
    return Precedence(
        tie_window=timedelta(seconds=float(doc.get("tie_window_s", 10))),
        node_incident_gap=timedelta(seconds=float(doc.get("node_incident_gap_s", 7200))), tie_break=tie, outranks=tuple(outranks),
        phase=tuple(phase), teardown=_t(doc.get("teardown", {}).get("signatures")),
        hang_signals=_t(hang.get("signatures")), may_hang=_t(hang.get("may_hang")),
        app_fault_signatures=_t(app.get("signatures")), app_fault_processes=int(app.get("processes", 3)),
        app_fault_category=str(app.get("category", "gpu_other_hardware")),
        follow_on_xids=_t(doc.get("follow_on", {}).get("xids")), actions=actions,
        many_peers=int(doc.get("culprit_graph", {}).get("many_peers", 3)),
        many_reporters=int(doc.get("culprit_graph", {}).get("many_reporters", 2)),
        needs_spare_node=spare, needs_saved_progress=saved,
        preproc_kinds=_t(pre.get("context_kinds")), preproc_codes=_t(pre.get("context_codes")),
        preproc_category=str(pre.get("category", "collective_desync")),
        exit_kinds=_t(ew.get("context_kinds")), exit_category=str(ew.get("category", "framework_bug")),
        after_completion=_t(doc.get("after_completion", {}).get("signatures")),
        jobwide_categories=_t(jw.get("categories")), jobwide_ranks=int(jw.get("ranks", 2)),
        outside_job=_t(doc.get("outside_job", {}).get("signatures")),
        pair_report=_t(doc.get("pair_report", {}).get("signatures")),
        first_dead=_t(doc.get("first_dead", {}).get("signatures")),
        no_failure=_t(doc.get("no_failure", {}).get("signatures")),
    )


def restart_recovers(action: str, category: str, culprit_host: str | None, job_hosts: set[str],
                     prec: Precedence, progress_saved: bool = True) -> bool:
    """Whether an automatic restart fixes the interruption (the report's `auto_recoverable`): the
    action is a restart, and, when the fault stays in the culprit's node (`restart.needs_spare_node`),
    the job's logs show another node for the restart to run on; a limit that ends the run
    (`restart.needs_saved_progress`) is recovered only by a job that keeps its progress
    (`progress_saved`: its logs show a training step or a checkpoint)."""
    if action not in AUTO_RECOVERABLE:
        return False
    if action == "exclude_node_and_restart" and category in prec.needs_spare_node:
        return bool(job_hosts - {culprit_host})
    if category in prec.needs_saved_progress:
        return progress_saved
    return True


@cache
def load_precedence() -> Precedence:
    text = resources.files("forensics").joinpath("signatures/precedence.toml").read_text(encoding="utf-8")
    return parse_precedence(tomllib.loads(text))


def apply_phase(roots: pl.DataFrame, first_step_start: datetime | None, started: bool,
                prec: Precedence) -> pl.DataFrame:
    """Re-read the category of the roots a phase rule names: before the attempt's first step
    (or in an attempt that never stepped) one category, after it the other. A root without a
    time in an attempt that did step keeps its catalog category."""
    out = roots
    for p in prec.phase:
        sel = pl.col("signature").is_in(list(p.signatures))
        if not started:
            before = pl.lit(True)
        elif first_step_start is None:
            before = pl.lit(False)
        else:
            before = pl.col("t_best") < pl.lit(first_step_start)
        out = out.with_columns(
            pl.when(sel & before.fill_null(False)).then(pl.lit(p.before_first_step))
            .when(sel & (~before).fill_null(False)).then(pl.lit(p.after_first_step))
            .otherwise(pl.col("category")).alias("category"))
    return out


def apply_outranks(roots: pl.DataFrame, prec: Precedence) -> tuple[pl.DataFrame, list[str]]:
    """Drop the roots an `outranks` rule takes out of the running; return the rest and, for each
    rule that decided, a note naming it and the winner. Two roots are in one rule's reach when
    they share its scope (host; host and GPU; or the attempt) and lie within its window of each
    other (either order: a driver logs the hardware fault when it detects it, which can be after
    the application's fault); a root without a time is in reach of every time. A root that both
    selectors match is a loser (a contained Xid is also a memory Xid: it never beats itself)."""
    notes: list[str] = []
    cur = roots.with_row_index("_i")
    # which rules can decide at all, in one pass: a rule with no loser or no winner among all the
    # roots has none among the roots earlier rules leave either
    can = cur.select(*(rule.loser.expr().any().alias(f"l{k}") for k, rule in enumerate(prec.outranks)),
                     *((rule.winner.expr() & ~rule.loser.expr()).any().alias(f"w{k}")
                       for k, rule in enumerate(prec.outranks))).row(0) if cur.height and prec.outranks else ()
    n = len(prec.outranks)
    for k, rule in enumerate(prec.outranks):
        if can and not (can[k] and can[n + k]):
            continue
        losers = cur.filter(rule.loser.expr())
        winners = cur.filter(rule.winner.expr() & ~rule.loser.expr())
        if losers.is_empty() or winners.is_empty():
            continue
        keys = {"host": ["host"], "gpu": ["host", "pci_bus_id"], "attempt": []}[rule.scope]
        w = winners.select(*keys, pl.col("t_best").alias("_wt"), pl.col("signature").alias("_ws"), pl.col("_i").alias("_wi"))
        lo = losers.select(*keys, "t_best", "_i")
        pairs = lo.join(w, on=keys, how="inner", nulls_equal=True) if keys else lo.join(w, how="cross")
        near = pairs.filter(pl.col("t_best").is_null() | pl.col("_wt").is_null()
                            | ((pl.col("t_best") - pl.col("_wt")).abs() <= pl.lit(rule.window)))
        if near.is_empty():
            continue
        beaten = set(near["_i"].to_list())
        win = near.sort("_wt", "_wi", nulls_last=True).row(0, named=True)["_ws"]
        lost = sorted(set(cur.filter(pl.col("_i").is_in(sorted(beaten)))["signature"].to_list()))
        notes.append(f"{win} outranks {', '.join(lost)} (rule {rule.name})")
        cur = cur.filter(~pl.col("_i").is_in(sorted(beaten)))
    return cur.drop("_i"), notes
