"""report.html: one self-contained file a model builder opens in any browser, offline.

Images are inline base64 PNGs; there are no scripts, external fonts or style sheets (a Content
Security Policy forbids them too). Every string that comes from the job (log lines, paths, host
names, job name, summaries) goes through `html.escape`. Sections, in order: the verdict card
(`<section id="verdict">`, always first), interruptions, attempts timeline and downtime, step
time, stragglers, checkpoint advice (when the report has one), coverage and warnings.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import polars as pl

from forensics.humanize import duration, label, stamp
from forensics.palette import BUCKET_COLORS, flagged_gpus
from forensics.report import culprit_text

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
BUCKETS = ("productive", "startup", "checkpoint", "lost_work", "termination", "restart", "slowdown")
MAX_SOURCES_OPEN = 40
MAX_EVIDENCE = 25
CARD_EVIDENCE = 5  # the verdict card shows the top lines; "show all" opens the rest in place

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#f4f5f7;
color:#1d2329;line-height:1.45;font-size:15px}
main{max-width:1100px;margin:0 auto;padding:16px 20px 48px}
header.job{display:flex;flex-wrap:wrap;gap:4px 18px;align-items:baseline;margin:0 0 10px}
header.job h1{font-size:18px;margin:0}
header.job span{color:#5b6670;font-size:13px}
section{background:#fff;border:1px solid #d8dde2;border-radius:8px;padding:14px 18px;margin:0 0 16px}
section>h2{font-size:17px;margin:0 0 10px}
h3{font-size:15px;margin:14px 0 6px}
#verdict{border-left:8px solid #78909c}
#verdict.crash,#verdict.hang{border-left-color:#c62828;background:#fff6f6}
#verdict.completed{border-left-color:#2e7d32;background:#f5fbf5}
#verdict.preemption,#verdict.slowdown{border-left-color:#ef6c00;background:#fffaf3}
#verdict .what{font-size:22px;font-weight:650;margin:0 0 4px}
#verdict .summary{font-size:16px;margin:0 0 10px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0 0 10px}
dl.facts dt{color:#5b6670}
dl.facts dd{margin:0;font-weight:600}
dd dl.facts{margin:0 0 6px}dd dl.facts dt{font-weight:400}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:13px;font-weight:600;background:#eceff1}
.yes{background:#c8e6c9;color:#1b5e20}.no{background:#ffcdd2;color:#b71c1c}
ol.evidence,ul.evidence{padding-left:0;list-style:none;margin:6px 0}
.evidence li{margin:0 0 6px}
.loc{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px;color:#37474f}
.role{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:#fff;background:#607d8b;border-radius:3px;
padding:0 4px;margin-left:6px}
.role.root{background:#c62828}.role.cascade{background:#ef6c00}
pre.line{margin:2px 0 0;padding:4px 8px;background:#263238;color:#eceff1;border-radius:4px;white-space:pre-wrap;
word-break:break-all;font-size:12px;font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0 10px}
th,td{border-bottom:1px solid #e3e7eb;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto;display:block;margin:6px 0}
.note{color:#5b6670;font-size:13px}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
details>summary{cursor:pointer;color:#37474f;margin:4px 0}
article.int{border-top:1px solid #e3e7eb;padding-top:8px;margin-top:8px}
article.int:first-of-type{border-top:0;margin-top:0;padding-top:0}
ul.warn li{margin:0 0 3px}
.ts{white-space:nowrap;font-variant-numeric:tabular-nums}
details.more>summary{color:#1565c0}
"""


def e(v: object) -> str:
    """Escape anything for HTML text and attribute values."""
    return html.escape("" if v is None else str(v), quote=True)


def _fmt(v: object) -> str:
    if v is None:
        return '<span class="note">unknown</span>'
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return e(f"{v:.4g}")
    return e(v)


def _dur(seconds: float | None) -> str:
    return duration(seconds)


def _when(v: object) -> str:
    """A time to the second, in the UTC the page header announces; never wrapped."""
    if v is None:
        return '<span class="note">unknown</span>'
    return f'<span class="ts">{e(stamp(str(v)))}</span>'


def _img(png: bytes | None, alt: str, missing: str) -> str:
    if not png:
        return f'<p class="note">{e(missing)}</p>'
    return f'<img alt="{e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _evidence_items(items: list[dict], start: int = 1) -> str:
    out = [f'<ol class="evidence" start="{start}">']
    for ev in items:
        role = ev.get("role") or ""
        meta = f'<span class="role {e(role)}">{e(role)}</span>' if role else ""
        sig = f' <span class="note">{e(ev.get("signature"))}</span>' if ev.get("signature") else ""
        when = f' <span class="note">{_when(ev.get("time"))}</span>' if ev.get("time") else ""
        out.append(f'<li><span class="loc">{e(ev.get("path"))}:{e(ev.get("line"))}</span>{meta}{sig}{when}'
                   f'<pre class="line">{e((ev.get("text") or "").rstrip())}</pre></li>')
    out.append("</ol>")
    return "".join(out)


def _evidence(items: list[dict], limit: int = MAX_EVIDENCE) -> str:
    """The first `limit` lines; the rest are in report.json (not on the page)."""
    if not items:
        return ""
    out = [_evidence_items(items[:limit])]
    if len(items) > limit:
        out.append(f'<p class="note">{len(items) - limit} more evidence line(s) in report.json</p>')
    return "".join(out)


def _card_ids(rep: dict) -> set:
    """The interruptions whose evidence the verdict card shows (then not repeated below)."""
    v = rep.get("verdict") or {}
    if v.get("kind") == "completed":
        return {x.get("id") for x in rep.get("interruptions") or []}
    return {v.get("id")} if v.get("id") is not None else set()


def _card_evidence(items: list[dict], key: object = None) -> str:
    """Evidence in the verdict card, each line once on the page: the top lines, then "show all"
    opening the rest (up to MAX_EVIDENCE) in place; beyond that, report.json."""
    shown = items[:MAX_EVIDENCE]
    out = [_evidence_items(shown[:CARD_EVIDENCE])]
    if len(shown) > CARD_EVIDENCE:
        anchor = "all-evidence" + (f"-{key}" if key is not None else "")
        out.append(f'<details class="more" id="{e(anchor)}"><summary>show all {len(shown)} evidence lines'
                   f'</summary>{_evidence_items(shown[CARD_EVIDENCE:], CARD_EVIDENCE + 1)}</details>')
    if len(items) > MAX_EVIDENCE:
        out.append(f'<p class="note">{len(items) - MAX_EVIDENCE} more evidence line(s) in report.json</p>')
    return "".join(out)


def _facts(x: dict) -> str:
    ar = x.get("auto_recoverable")
    rows = [
        ("Culprit", e(culprit_text(x.get("culprit")))),
        ("Action", f"<code>{e(x.get('action'))}</code>"),
        ("Auto-recoverable", f'<span class="badge {"yes" if ar else "no"}">{"yes" if ar else "no"}</span>'),
        ("Confidence", f"{_fmt(x.get('confidence'))} <span class=\"note\">({e(x.get('method'))})</span>"),
    ]
    if x.get("time"):
        rows.insert(0, ("When", _when(x["time"]) + (f" (attempt {e(x.get('attempt'))})" if x.get("attempt") is not None
                                                 else "")))
    if x.get("recurring"):
        rows.append(("Recurring", "yes"))
    if x.get("missing_evidence"):
        rows.append(("Missing evidence", e("; ".join(x["missing_evidence"]))))
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _headline(x: dict) -> str:
    cat = f" · {x['category']}" if x.get("category") and x.get("category") != x.get("kind") else ""
    dom = f" ({x['domain']})" if x.get("domain") and x.get("category") else ""
    return e(f"{x.get('kind')}{cat}{dom}")


def _drain(v: dict) -> str:
    """The hosts/GPUs to take out of service, first in the card: those of the job's interruptions
    other than the verdict's own culprit (a completed job names them all; its culprit is the first)."""
    own = v.get("culprit") or {}
    items = [d for d in v.get("drain") or [] if v.get("kind") == "completed"
             or (d["culprit"].get("host"), d["culprit"].get("gpu")) != (own.get("host"), own.get("gpu"))]
    if not items:
        return ""
    rows = "".join(f'<li>{e(culprit_text(d.get("culprit")))}: <code>{e(d.get("action"))}</code> '
                   f'<span class="note">(interruption <a href="#int-{e(d.get("interruption"))}">'
                   f'{e(d.get("interruption"))}</a>, {e(d.get("category"))})</span></li>' for d in items)
    return f'<div class="drain"><h3>Drain</h3><ul>{rows}</ul></div>'


def _verdict(rep: dict) -> str:
    v = rep.get("verdict") or {}
    kind = v.get("kind") or "unknown"
    what = e("none: no interruption found") if kind == "none" else _headline(v)
    out = [f'<section id="verdict" class="{e(kind)}"><h2>Verdict</h2>',
           f'<p class="what">{what}</p>', f'<p class="summary">{e(v.get("summary"))}</p>']
    out.append(_drain(v))
    if kind == "none":
        out.append('<dl class="facts"><dt>Action</dt><dd><code>none</code></dd></dl>')
    elif kind == "completed":
        out.append(_facts(v) if v.get("drain") else '<dl class="facts"><dt>Action</dt><dd><code>none</code></dd>'
                   f'<dt>Confidence</dt><dd>{_fmt(v.get("confidence"))}</dd></dl>')
        crash = [x for x in rep.get("interruptions", []) if x.get("kind") != "slowdown"]
        slow = [x for x in rep.get("interruptions", []) if x.get("kind") == "slowdown"]
        for x in crash + slow:
            out.append(f'<h3>Interrupted: <a href="#int-{e(x.get("id"))}">{e(x.get("id"))}</a> {_headline(x)}</h3>'
                       f'<p>{e(x.get("summary"))}</p>{_facts(x)}'
                       + _card_evidence(x.get("evidence") or [], x.get("id")))
    else:
        out.append(_facts(v))
        if v.get("evidence"):
            out.append("<h3>Evidence</h3>" + _card_evidence(v["evidence"], v.get("id")))
        elif kind != "unknown":
            out.append('<p class="note">No evidence lines.</p>')
    d = rep.get("downtime") or {}
    if d.get("wall_s"):
        bits = [f"wall time {_dur(d['wall_s'])}"]
        if d.get("goodput") is not None:
            bits.append(f"goodput {d['goodput']:.1%}")
        if d.get("gpu_hours_lost") is not None:
            bits.append(f"GPU-hours lost {d['gpu_hours_lost']:.1f}")
        out.append(f'<p class="note">{e("; ".join(bits))} (see <a href="#timeline">timeline</a>)</p>')
    out.append("</section>")
    return "".join(out)


def _interruptions(rep: dict) -> str:
    xs = rep.get("interruptions") or []
    out = ['<section id="interruptions"><h2>Interruptions</h2>']
    if not xs:
        out.append('<p class="note">No interruption was found.</p></section>')
        return "".join(out)
    out.append("<table><tr><th>id</th><th>attempt</th><th>time</th><th>kind</th><th>category</th><th>culprit</th>"
               "<th>action</th><th>auto</th><th class=num>confidence</th></tr>")
    for x in xs:
        out.append(f'<tr><td><a href="#int-{e(x.get("id"))}">{e(x.get("id"))}</a></td><td>{_fmt(x.get("attempt"))}</td>'
                   f"<td>{_when(x.get('time'))}</td><td>{e(x.get('kind'))}</td><td>{_fmt(x.get('category'))}</td>"
                   f"<td>{e(culprit_text(x.get('culprit')))}</td><td><code>{e(x.get('action'))}</code></td>"
                   f"<td>{'yes' if x.get('auto_recoverable') else 'no'}</td>"
                   f"<td class=num>{_fmt(x.get('confidence'))}</td></tr>")
    out.append("</table>")
    in_card = _card_ids(rep)
    for x in xs:
        ev = x.get("evidence") or []
        if x.get("id") in in_card and ev:  # shown once: in the card
            body = (f'<p class="note">Evidence ({len(ev)} lines): in the <a href="#verdict">verdict card</a> '
                    "above.</p>")
        else:
            body = _evidence(ev)
        out.append(f'<article class="int" id="int-{e(x.get("id"))}"><h3>{e(x.get("id"))}: {_headline(x)}</h3>'
                   f"<p>{e(x.get('summary'))}</p>{_facts(x)}{body}</article>")
    out.append("</section>")
    return "".join(out)


def _src(x: dict | None) -> str:
    """' path:line' of a cited line, small, escaped ('' when none is known)."""
    if not x or not x.get("path"):
        return ""
    where = str(x["path"]) + (f":{x['line']}" if x.get("line") is not None else "")
    return f'<br><span class="note src">{e(where)}</span>'


def _attempts_table(atts: list[dict]) -> str:
    """One row per attempt: span, how it ended, first and last step (with the lines they come
    from), witnesses, and its share of each downtime bucket (seconds in the title)."""
    head = "".join(f'<th class=num><span class="swatch" style="background:{BUCKET_COLORS[b]}"></span>{e(label(b))}</th>'
                   for b in BUCKETS)
    out = ['<table id="attempts"><tr><th>attempt</th><th>start</th><th>end</th><th class=num>duration</th>'
           '<th>ended</th><th class=num>first step</th><th class=num>last step</th><th class=num>resumed from</th>'
           f"<th>witnesses</th>{head}</tr>"]
    for a in atts:
        dur = None
        if a.get("start") and a.get("end"):
            dur = (datetime.fromisoformat(a["end"].replace("Z", "+00:00"))
                   - datetime.fromisoformat(a["start"].replace("Z", "+00:00"))).total_seconds()
        ev = a.get("evidence") or {}
        fault = ev.get("fault")
        ended = _fmt(a.get("end_reason")) + (f" ({e(fault.get('interruption'))})" if fault else "") + _src(ev.get("end"))
        share = a.get("downtime") or {}
        cells = "".join(
            f'<td class=num data-bucket="{e(b)}" title="{e(share.get(f"{b}_s"))} s">{e(_dur(share.get(f"{b}_s")))}</td>'
            if share.get(f"{b}_s") is not None else f'<td class=num data-bucket="{e(b)}"></td>' for b in BUCKETS)
        wit = ", ".join(a.get("witnesses") or [])
        out.append(f'<tr data-attempt="{e(a.get("index"))}"><td>{e(a.get("index"))}</td>'
                   f"<td>{_when(a.get('start'))}{_src(ev.get('start'))}</td><td>{_when(a.get('end'))}</td>"
                   f"<td class=num>{e(_dur(dur))}</td><td>{ended}</td>"
                   f"<td class=num>{_fmt(a.get('first_step'))}{_src(ev.get('first_step'))}</td>"
                   f"<td class=num>{_fmt(a.get('last_step'))}{_src(ev.get('last_step'))}</td>"
                   f"<td class=num>{_fmt(a.get('resumed_from'))}{_src(ev.get('resumed_from'))}</td>"
                   f"<td>{e(wit) if wit else _fmt(None)}</td>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def _timeline(rep: dict, pngs: Mapping[str, bytes]) -> str:
    out = ['<section id="timeline"><h2>Attempts and downtime</h2>',
           _img(pngs.get("timeline"), "Attempts over time, coloured by downtime bucket",
                "The timeline plot could not be drawn.")]
    atts = rep.get("attempts") or []
    if atts:
        out.append(_attempts_table(atts))
    else:
        out.append('<p class="note">No attempt could be reconstructed.</p>')
    d = rep.get("downtime") or {}
    if d.get("wall_s"):
        wall = float(d["wall_s"])
        out.append("<h3>Where the wall time went</h3><table><tr><th>bucket</th><th class=num>seconds</th>"
                   "<th class=num>duration</th><th class=num>share</th></tr>")
        for b in BUCKETS:
            v = d.get(f"{b}_s")
            share = f"{v / wall:.1%}" if v is not None and wall else ""
            out.append(f'<tr><td><span class="swatch" style="background:{BUCKET_COLORS[b]}"></span>{e(label(b))}</td>'
                       f"<td class=num>{_fmt(v)}</td><td class=num>{e(_dur(v))}</td><td class=num>{e(share)}</td></tr>")
        out.append(f"<tr><th>wall</th><th class=num>{_fmt(d.get('wall_s'))}</th><th class=num>{e(_dur(wall))}</th>"
                   "<th class=num>100%</th></tr></table>")
        out.append(f"<p>Goodput: <b>{_fmt(d.get('goodput'))}</b>; GPU-hours lost: <b>{_fmt(d.get('gpu_hours_lost'))}</b>"
                   f" ({_fmt((rep.get('job') or {}).get('gpus'))} GPUs)</p>")
        out.append(_img(pngs.get("downtime"), "Downtime by bucket", "The downtime plot could not be drawn."))
    else:
        out.append('<p class="note">No wall time could be measured.</p>')
    out.append("</section>")
    return "".join(out)


def _steps(rep: dict, pngs: Mapping[str, bytes]) -> str:
    out = ['<section id="steps"><h2>Step time</h2>',
           _img(pngs.get("step_time"), "Step time per logged step", "The step-time plot could not be drawn.")]
    eps = [x for x in rep.get("interruptions") or [] if x.get("kind") == "slowdown"]
    if eps:
        out.append("<h3>Slow episodes</h3><ul>")
        for x in eps:
            out.append(f"<li>{_when(x.get('time'))}: {e(x.get('summary'))}</li>")
        out.append("</ul>")
    else:
        out.append('<p class="note">No slow episode.</p>')
    out.append("</section>")
    return "".join(out)


def _stragglers(rep: dict, pngs: Mapping[str, bytes]) -> str:
    ss = rep.get("stragglers") or []
    out = ['<section id="stragglers"><h2>Stragglers</h2>']
    if ss:
        out.append("<table><tr><th>host</th><th class=num>rank</th><th class=num>GPU</th><th>start</th><th>end</th>"
                   "<th class=num>slowdown</th><th>cause</th><th>evidence</th></tr>")
        for s in ss:
            slow = f"{s['slowdown']:.1%}" if isinstance(s.get("slowdown"), (int, float)) else None
            out.append(f"<tr><td>{_fmt(s.get('host'))}</td><td class=num>{_fmt(s.get('rank'))}</td>"
                       f"<td class=num>{_fmt(s.get('gpu'))}</td><td>{_when(s.get('start'))}</td><td>{_when(s.get('end'))}</td>"
                       f"<td class=num>{_fmt(slow)}</td><td>{_fmt(s.get('cause'))}</td><td>{_fmt(s.get('evidence'))}</td></tr>")
        out.append("</table>")
    else:
        out.append('<p class="note">No straggler GPU was found.</p>')
    named = ", ".join(f"{h} GPU {g}" for h, g in flagged_gpus(rep))
    out.append(_img(pngs.get("straggler_heatmap"), "SM clock per GPU over time"
                    + (f"; rows named in red: {named}" if named else ""),
                    "The straggler heatmap could not be drawn."))
    out.append("</section>")
    return "".join(out)


def _value(k: str, v: object, depth: int) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and str(k).endswith("_s"):
        return e(duration(v))
    return _any(v, depth)


def _any(v: object, depth: int = 0) -> str:
    """Render whatever JSON value the advice holds: dicts as definition lists, lists of dicts
    as tables, lists as bullets, scalars as escaped text."""
    if depth > 6:
        return e(v)
    if isinstance(v, Mapping):
        if not v:
            return '<span class="note">none</span>'
        return '<dl class="facts">' + "".join(
            f"<dt>{e(label(str(k)))}</dt><dd>{_value(str(k), x, depth + 1)}</dd>" for k, x in v.items()) + "</dl>"
    if isinstance(v, list):
        if not v:
            return '<span class="note">none</span>'
        if all(isinstance(x, Mapping) for x in v):
            cols: list[str] = []
            for x in v:
                cols += [k for k in x if k not in cols]
            head = "".join(f"<th>{e(label(c))}</th>" for c in cols)
            rows = "".join("<tr>" + "".join(f"<td>{_value(c, x.get(c), depth + 1)}</td>" for c in cols) + "</tr>"
                           for x in v)
            return f"<table><tr>{head}</tr>{rows}</table>"
        return "<ul>" + "".join(f"<li>{_any(x, depth + 1)}</li>" for x in v) + "</ul>"
    return _fmt(v)


def _advice(rep: dict) -> str:
    if "advice" not in rep or rep["advice"] is None:
        return ""
    return f'<section id="advice"><h2>Advice</h2>{_any(rep["advice"])}</section>'


def _host_of(path: str, order: dict[str, int]) -> str | None:
    """The host a path names: a path part that is the host, or starts with it and '.', '-' or '_'.
    `order` ranks the hosts (the longest first); the best-ranked one named wins."""
    found: list[str] = []
    for p in path.replace("\\", "/").split("/"):
        found += [c for c in (p, *(p[:k] for k, ch in enumerate(p) if ch in ".-_")) if c in order]
    return min(found, key=order.__getitem__) if found else None


COVERAGE_WORDS = ("missing", "skew", "truncat", "no timezone", "unrecognized", "no file", "binary", "limit",
                  "uptime", "boot")


def _coverage(rep: dict) -> str:
    src = rep.get("sources") or []
    hosts = sorted((rep.get("job") or {}).get("hosts") or [], key=len, reverse=True)
    order = {h: i for i, h in enumerate(hosts)}
    out = ['<section id="coverage"><h2>Coverage</h2>']
    j = rep.get("job") or {}
    tot = {k: sum(int(s.get(k) or 0) for s in src) for k in ("lines", "parsed", "ignored", "unparsed", "events")}
    recognized = sum(1 for s in src if s.get("parser"))
    out.append(f"<p>{len(src)} files ({recognized} recognized), {tot['lines']} lines: {tot['parsed']} parsed, "
               f"{tot['ignored']} ignored, {tot['unparsed']} unparsed; {tot['events']} events. "
               f"Hosts seen: {len(j.get('hosts') or [])}; ranks: {_fmt(j.get('ranks'))}; GPUs: {_fmt(j.get('gpus'))}.</p>")
    if hosts:
        per: dict[str, dict] = {}
        for s in src:
            h = _host_of(s.get("path") or "", order) or "(no host in path)"
            a = per.setdefault(h, {"files": 0, "lines": 0, "parsed": 0, "ignored": 0, "unparsed": 0, "events": 0,
                                   "warnings": 0})
            a["files"] += 1
            for k in ("lines", "parsed", "ignored", "unparsed", "events"):
                a[k] += int(s.get(k) or 0)
            a["warnings"] += len(s.get("warnings") or [])
        out.append("<h3>Per host</h3><table><tr><th>host</th>" + "".join(
            f"<th class=num>{k}</th>" for k in ("files", "lines", "parsed", "ignored", "unparsed", "events", "warnings"))
            + "</tr>")
        for h in sorted(per):
            a = per[h]
            out.append(f"<tr><td>{e(h)}</td>" + "".join(f"<td class=num>{a[k]}</td>" for k in (
                "files", "lines", "parsed", "ignored", "unparsed", "events", "warnings")) + "</tr>")
        out.append("</table>")
    notes = [w for w in rep.get("warnings") or [] if any(k in w.lower() for k in COVERAGE_WORDS)]
    if notes:
        out.append("<h3>Data quality</h3><ul class=\"warn\">" + "".join(f"<li>{e(w)}</li>" for w in notes) + "</ul>")
    rows = []
    for s in src:
        ws = s.get("warnings") or []
        rows.append(f"<tr><td class=loc>{e(s.get('path'))}</td><td>{e(s.get('parser') or 'unrecognized')}</td>"
                    + "".join(f"<td class=num>{_fmt(s.get(k))}</td>" for k in ("lines", "parsed", "ignored", "unparsed",
                                                                               "events"))
                    + f"<td>{'<br>'.join(e(w) for w in ws)}</td></tr>")
    table = ("<table><tr><th>file</th><th>parser</th><th class=num>lines</th><th class=num>parsed</th>"
             "<th class=num>ignored</th><th class=num>unparsed</th><th class=num>events</th><th>warnings</th></tr>"
             + "".join(rows) + "</table>")
    opened = " open" if len(src) <= MAX_SOURCES_OPEN else ""
    out.append(f"<details{opened}><summary>Per file ({len(src)})</summary>{table}</details>")
    un = rep.get("unparsed_errors") or []
    if un:
        out.append(f"<h3>Unparsed lines that look like errors ({len(un)})</h3>" + _evidence(
            [{"path": u.get("path"), "line": u.get("line"), "text": u.get("text")} for u in un], 200))
    out.append("</section>")
    return "".join(out)


def _warnings(rep: dict, plot_errors: Mapping[str, str]) -> str:
    ws = list(rep.get("warnings") or []) + [f"plot {k} could not be drawn: {v}" for k, v in plot_errors.items()]
    body = ('<ul class="warn">' + "".join(f"<li>{e(w)}</li>" for w in ws) + "</ul>") if ws else \
        '<p class="note">No warnings.</p>'
    return f'<section id="warnings"><h2>Warnings</h2>{body}</section>'


def render(report: dict, pngs: Mapping[str, bytes] | None = None, plot_errors: Mapping[str, str] | None = None) -> str:
    """The whole page as a string."""
    pngs = pngs or {}
    j = report.get("job") or {}
    title = f"forensics: {j.get('name') or 'job'}"
    span = f"{stamp(j.get('start')) or '?'} to {stamp(j.get('end')) or '?'} UTC (all times on this page are UTC)"
    head = (f'<header class="job"><h1>{e(title)}</h1><span>{e(span)}</span>'
            f"<span>{len(j.get('hosts') or [])} hosts, {e(j.get('ranks') if j.get('ranks') is not None else '?')} ranks, "
            f"{e(j.get('gpus') if j.get('gpus') is not None else '?')} GPUs</span>"
            f"<span>{e(j.get('dir'))}</span></header>")
    parts = [_verdict(report), _interruptions(report), _timeline(report, pngs), _steps(report, pngs),
             _stragglers(report, pngs), _advice(report), _coverage(report), _warnings(report, plot_errors or {})]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)}</title><style>{STYLE}</style></head>\n<body><main>{head}"
            + "\n".join(p for p in parts if p) + "</main></body></html>\n")


def write_html(report: dict, path: Path | str, frames: Mapping[str, pl.DataFrame | None] | None = None,
               pngs: Mapping[str, bytes] | None = None, plot_errors: Mapping[str, str] | None = None) -> Path:
    """Write report.html. `pngs` (plot name -> PNG bytes, see plots.render_all) are used as given;
    else the plots are drawn from `frames` (attempts, steps, checkpoints, dcgm_samples) and the
    report."""
    errors: dict[str, str] = dict(plot_errors or {})
    if pngs is None:
        from forensics import plots  # matplotlib loads only when the plots are drawn here

        pngs = plots.render_all(report, dict(frames or {}), errors)
    p = Path(path)
    p.write_text(render(report, pngs, errors), encoding="utf-8")
    return p
