"""report.html: one self-contained file, verdict card first, every section, all job text escaped."""

from __future__ import annotations

import base64
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from forensics import html_report
from forensics.analysis import Analysis, analyze
from forensics.cli import app
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["verdict", "interruptions", "timeline", "steps", "stragglers", "advice", "coverage", "warnings"]
EVIL = "<script>document.title='PWNED'</script><img src=x onerror=alert(1)>&amp;\"'"


class Page(HTMLParser):
    """Tags, section ids, img srcs and text of a page, as a browser's tokenizer sees them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.sections: list[str | None] = []
        self.imgs: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section":
            self.sections.append(a.get("id"))
        if tag == "img":
            self.imgs.append(a.get("src") or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    tmp = tmp_path_factory.mktemp("html")
    case = simulate(load_scenario(ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"), tmp / "case", 31)
    return analyze(case / "job", tmp / "out")


def _evil_report(base: dict) -> dict:
    """The analysis' report with job-controlled text everywhere a log can put it."""
    rep = {**base, "job": {**base["job"], "name": EVIL, "dir": "/jobs/" + EVIL, "hosts": [EVIL]}}
    v = dict(base["interruptions"][0])
    v["summary"] = "summary " + EVIL
    v["culprit"] = {**v["culprit"], "host": EVIL}
    v["evidence"] = [{"path": "logs/" + EVIL, "line": 7, "time": None, "signature": EVIL, "role": "root",
                      "text": "Xid 79 " + EVIL}]
    v["missing_evidence"] = [EVIL]
    rep["verdict"] = v
    rep["interruptions"] = [v]
    rep["stragglers"] = [{"host": EVIL, "rank": 1, "gpu": 2, "start": None, "end": None, "slowdown": 0.2,
                          "cause": EVIL, "evidence": EVIL}]
    rep["sources"] = [{**base["sources"][0], "path": EVIL, "parser": EVIL, "warnings": [EVIL]}]
    rep["unparsed_errors"] = [{"path": EVIL, "line": 3, "text": "ERROR " + EVIL}]
    rep["warnings"] = ["missing ranks " + EVIL]
    rep["advice"] = {"interval": EVIL, "rows": [{EVIL: EVIL}], "notes": [EVIL]}
    return rep


def test_analyze_writes_a_self_contained_report_with_the_verdict_first(crashed: Analysis) -> None:
    out = crashed.out_dir
    text = (out / "report.html").read_text(encoding="utf-8")
    page = Page(text)
    assert page.sections[0] == "verdict"
    assert page.sections == [s for s in ORDER if s != "advice" or crashed.report.get("advice") is not None]
    # self-contained: no scripts, no external anything
    assert not any(t == "script" for t, _ in page.tags)
    assert not any(t in ("link", "iframe", "object", "embed", "base") for t, _ in page.tags)
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:|//|file:)", text)
    assert "@import" not in text and "url(" not in text and "@font-face" not in text
    assert not any(k.startswith("on") for _, a in page.tags for k in a)
    # every image inline and a valid PNG
    assert len(page.imgs) == 4
    for src in page.imgs:
        assert src.startswith("data:image/png;base64,")
        Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1], validate=True))).verify()
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["downtime.png", "step_time.png",
                                                                 "straggler_heatmap.png", "timeline.png"]


def test_verdict_card_says_what_happened(crashed: Analysis) -> None:
    text = (crashed.out_dir / "report.html").read_text(encoding="utf-8")
    card = text[text.index('<section id="verdict"'):text.index("</section>")]
    x = crashed.report["interruptions"][0]
    body = " ".join(Page(card).text)
    for want in (x["category"], x["action"], x["culprit"]["host"], "Auto-recoverable", "Confidence",
                 str(x["confidence"])):
        assert want in body, want
    ev = x["evidence"][0]
    assert f"{ev['path']}:{ev['line']}" in body
    assert ev["text"].strip()[:60] in body


def test_every_interruption_and_source_is_listed(crashed: Analysis) -> None:
    body = " ".join(Page((crashed.out_dir / "report.html").read_text(encoding="utf-8")).text)
    for x in crashed.report["interruptions"]:
        assert x["summary"] in body
    for s in crashed.report["sources"]:
        assert s["path"] in body
    for b in ("Productive", "Startup", "Checkpoint", "Lost work", "Termination", "Restart", "Slowdown"):
        assert b in body  # the buckets, by their people's names
    assert "Per host" in body


def test_all_job_text_is_escaped(crashed: Analysis, tmp_path: Path) -> None:
    rep = _evil_report(crashed.report)
    out = html_report.write_html(rep, tmp_path / "r.html", pngs={})
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    assert not any(t == "script" for t, _ in page.tags)
    assert [a.get("src") for t, a in page.tags if t == "img"] == []  # the evil <img> is text, no image
    assert not any(k.startswith("on") for _, a in page.tags for k in a)
    assert "<script" not in text.lower() and "<img" not in text.lower()
    body = "".join(page.text)
    # the text survives, shown as text, in every place it was put
    assert body.count("<script>document.title='PWNED'</script>") >= 14
    assert page.sections[:1] == ["verdict"] and "advice" in page.sections


def test_advice_renders_whatever_dict_is_there(crashed: Analysis, tmp_path: Path) -> None:
    rep = {**crashed.report, "advice": {
        "young_daly_interval_s": 1843.2, "current_interval_s": 1000.0, "gpu_hours_saved": 1.25,
        "by_size": [{"gpus": 8, "interval_s": 3600}, {"gpus": 1024, "interval_s": 600}],
        "collective_timeout": {"termination_s": 600.0, "with_timeout_s": {"120": 480.0}}, "notes": ["one", "two"]}}
    page = Page(html_report.render(rep, {}))
    assert page.sections.index("advice") == page.sections.index("stragglers") + 1
    body = " ".join(page.text)
    # people's labels, not keys; seconds as rounded durations
    for want in ("Young daly interval", "30 min 43 s", "Current checkpoint interval", "16 min 40 s",
                 "GPU-hours it would save", "1024", "1 h 00 min", "Termination", "With timeout", "Collective timeout",
                 "one", "two"):
        assert want in body, want
    for key in ("young_daly_interval_s", "gpu_hours_saved", "interval_s", "young daly interval s", "1843.2"):
        assert key not in body, key


def test_no_advice_no_section(crashed: Analysis) -> None:
    rep = {k: v for k, v in crashed.report.items() if k != "advice"}
    assert Page(html_report.render(rep, {})).sections == [s for s in ORDER if s != "advice"]


def test_missing_plots_and_empty_report_still_render(crashed: Analysis) -> None:
    rep = {"schema_version": 1, "job": {"name": "j", "dir": "/x", "hosts": [], "ranks": None, "gpus": None,
                                        "start": None, "end": None},
           "sources": [], "attempts": [], "interruptions": [], "stragglers": [],
           "verdict": {"id": None, "attempt": None, "time": None, "kind": "unknown", "category": "unknown",
                       "domain": "unknown", "action": "investigate", "auto_recoverable": False, "recurring": False,
                       "culprit": {"host": None, "rank": None, "gpu": None, "pci_bus_id": None}, "confidence": 0.0,
                       "method": "rules", "summary": "No recognizable log content found", "evidence": []},
           "downtime": {"wall_s": 0.0}, "warnings": ["the job directory holds no files"]}
    page = Page(html_report.render(rep, {}, {"timeline": "ValueError: boom"}))
    assert page.sections[0] == "verdict"
    body = " ".join(page.text)
    assert "No recognizable log content found" in body and "plot timeline could not be drawn" in body


def test_same_job_same_html(crashed: Analysis, tmp_path: Path) -> None:
    again = analyze(crashed.job_dir, tmp_path / "again")
    assert (again.out_dir / "report.html").read_bytes() == (crashed.out_dir / "report.html").read_bytes()


def test_cli_summary_ends_with_the_html_report_path(crashed: Analysis, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["analyze", str(crashed.job_dir), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    last = res.output.strip().splitlines()[-1]
    assert last == f"Report: {tmp_path / 'o' / 'report.html'}"


def test_make_demo_prints_the_html_path_last() -> None:
    """`make demo` analyzes the demo job into forensics-out/demo and its last output is the
    path of that report.html."""
    mk = (ROOT / "Makefile").read_text()
    recipe = mk.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    cmds = [ln.strip() for ln in recipe.splitlines()[1:] if ln.startswith("\t")]
    assert any("forensics analyze" in c and "--out forensics-out/demo" in c for c in cmds)
    assert cmds[-1].startswith("@echo") and cmds[-1].rstrip('"').endswith("forensics-out/demo/report.html)")


HOST_OF_CASES = [  # (path, host the per-host coverage table files it under)
    ("logs/node-1/rank-0.log", "node-1"),
    ("logs/node-10/rank-0.log", "node-10"),  # not node-1: the longest host named wins
    ("nodes/node-1.cluster.local/dmesg.txt", "node-1"),
    ("dmesg-node-2_2024.txt", None),  # a host inside a part, not at its start, is not a match
    ("node-2_dmesg.txt", "node-2"),
    ("node-2-node-10.log", "node-2"),  # a prefix only
    ("a\\node-3\\b.log", "node-3"),
    ("slurm/slurm-77.out", None),
]


@pytest.mark.parametrize("path,host", HOST_OF_CASES)
def test_host_of_a_path(path: str, host: str | None) -> None:
    hosts = sorted(["node-1", "node-2", "node-3", "node-10"], key=len, reverse=True)
    assert html_report._host_of(path, {h: i for i, h in enumerate(hosts)}) == host


def _card_text(page: str) -> str:
    """The verdict card's text, in reading order, as a browser shows it (tags dropped, entities decoded)."""
    card = page.split('<section id="verdict"', 1)[1].split("</section>", 1)[0]
    return " ".join(" ".join(Page("<section" + card).text).split())


def test_completed_after_gpu_loss_names_the_node_to_drain(crashed: Analysis, tmp_path: Path) -> None:
    """gpu_fell_off_bus: the job completed on a spare after its GPU fell off the bus. The verdict is
    `completed`, and the card (HTML, report.md, terminal) names first the host/GPU to drain and
    `exclude_node_and_restart` (it showed a green 'completed, action none' card)."""
    res = CliRunner().invoke(app, ["analyze", str(crashed.job_dir), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    (lost,) = [x for x in rep["interruptions"] if x["kind"] != "slowdown"]
    assert lost["category"] == "gpu_lost" and lost["attempt"] == 0
    host, gpu = lost["culprit"]["host"], lost["culprit"]["gpu"]
    assert host is not None and gpu is not None
    v = rep["verdict"]
    assert (v["kind"], v["action"], v["auto_recoverable"]) == ("completed", "exclude_node_and_restart", True)
    assert v["culprit"] == lost["culprit"]
    assert [(d["interruption"], d["culprit"], d["action"]) for d in v["drain"]] == [
        (lost["id"], lost["culprit"], "exclude_node_and_restart")]
    assert {(e["path"], e["line"]) for e in v["evidence"]} == {(e["path"], e["line"]) for e in lost["evidence"]}
    text = _card_text((tmp_path / "o" / "report.html").read_text())
    drain = text.index(f"host {host}")
    assert text.index("completed") < drain < text.index("exclude_node_and_restart") < text.index("Interrupted")
    assert f"GPU {gpu}" in text[drain:text.index("Interrupted")]
    assert "Action none" not in text
    md = (tmp_path / "o" / "report.md").read_text().split("## Job", 1)[0]
    assert f"- Culprit: host {host}" in md and "- Action: `exclude_node_and_restart`" in md
    out = " ".join(res.output.split())
    assert out.index("Verdict: completed") < out.index(f"culprit: host {host}") < out.index(
        "action: exclude_node_and_restart") < out.index("Interruption a0")


def test_verdict_evidence_is_shown_once_with_show_all(crashed: Analysis) -> None:
    """The card holds the top evidence lines and "show all" opens the rest in place; the
    interruption below points to the card instead of printing the lines again; nothing on the page
    sends the reader to report.json for lines the page holds. (This job completed after a GPU
    fell off the bus: the card shows that interruption.)"""
    rep = crashed.report
    featured = [x for x in rep["interruptions"] if x["evidence"]] if rep["verdict"]["kind"] == "completed" \
        else [rep["verdict"]]
    x = featured[0]
    ev = x["evidence"]
    assert len(ev) > html_report.CARD_EVIDENCE  # the case has more lines than the card shows
    text = (crashed.out_dir / "report.html").read_text(encoding="utf-8")
    locs = [t for t in Page(text).text if re.fullmatch(r"\S+:\d+", t)]
    for e in ev[:html_report.MAX_EVIDENCE]:
        assert locs.count(f"{e['path']}:{e['line']}") == 1, e
    card = text.split('<section id="verdict"', 1)[1].split("</section>", 1)[0]
    top, _, rest = card.partition(f'<details class="more" id="all-evidence-{x["id"]}">')
    assert top.count('<span class="loc">') == html_report.CARD_EVIDENCE
    n = min(len(ev), html_report.MAX_EVIDENCE)
    assert f"show all {n} evidence lines" in rest and rest.count('<span class="loc">') == n - html_report.CARD_EVIDENCE
    if len(ev) <= html_report.MAX_EVIDENCE:
        assert "report.json" not in card
    article = text.split(f'id="int-{x["id"]}"', 1)[1].split("</article>", 1)[0]
    assert "verdict card</a> above" in article and '<span class="loc">' not in article


def test_stamps_to_the_second_and_rounded_durations(crashed: Analysis) -> None:
    text = (crashed.out_dir / "report.html").read_text(encoding="utf-8")
    body = " ".join(Page(re.sub(r'<pre class="line">.*?</pre>', "", text, flags=re.S)).text)  # not log text
    assert "all times on this page are UTC" in body
    stamps = re.findall(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S*", body)
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", s) for s in stamps), stamps[:5]
    assert 'class="ts"' in text and ".ts{white-space:nowrap" in text
    md = (crashed.out_dir / "report.md").read_text(encoding="utf-8")
    assert not re.search(r"\d\.\d{4,} s\b", md), re.findall(r"[\d.]+\d{4,} s", md)
    ck = crashed.report["advice"]["checkpoint"]
    if ck.get("optimal_interval_s"):
        from forensics.humanize import duration

        assert f"now {duration(ck['current_interval_s'])}, Young/Daly optimum " in md
    # the report's own stamps are to the second; quoted log lines (evidence, `path:line`) keep theirs
    own = "\n".join(ln for ln in md.splitlines() if not re.search(r"`[^`]+:\d+`", ln))
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", own)


def _attempt_rows(text: str) -> dict[str, dict]:
    """attempt index -> {bucket: title seconds, "text": the row's text} of the per-attempt table."""
    table = text.split('<table id="attempts">', 1)[1].split("</table>", 1)[0]
    rows = {}
    for m in re.finditer(r'<tr data-attempt="(\d+)">(.*?)</tr>', table, flags=re.S):
        cells = dict(re.findall(r'data-bucket="(\w+)" title="([^"]*) s"', m.group(2)))
        rows[m.group(1)] = {**{b: float(v) for b, v in cells.items()}, "text": "".join(Page(m.group(2)).text)}
    return rows


def test_per_attempt_table(crashed: Analysis) -> None:
    from forensics.downtime import BUCKETS

    rep = crashed.report
    rows = _attempt_rows((crashed.out_dir / "report.html").read_text(encoding="utf-8"))
    assert list(rows) == [str(a["index"]) for a in rep["attempts"]] and len(rows) == 2
    for a in rep["attempts"]:
        r = rows[str(a["index"])]
        assert {b: r[b] for b in BUCKETS} == {b: a["downtime"][f"{b}_s"] for b in BUCKETS}
        ev = a["evidence"]
        for k in ("first_step", "last_step"):
            assert f"{a[k]}{ev[k]['path']}:{ev[k]['line']}" in r["text"]
        assert a["end_reason"] in r["text"] and ", ".join(a["witnesses"]) in r["text"]
    # the GPU loss ends attempt 0 (termination and lost work there), the restart is attempt 1's
    assert rows["0"]["termination"] > 0 and rows["0"]["restart"] == 0 and rows["1"]["restart"] > 0
    assert "crash (a0)" in rows["0"]["text"] and "completed" in rows["1"]["text"]
    for b in BUCKETS:  # the shares add up to the job's bucket
        assert sum(rows[i][b] for i in rows) == pytest.approx(rep["downtime"][f"{b}_s"], abs=0.002)


def test_per_attempt_table_escapes_log_text(crashed: Analysis, tmp_path: Path) -> None:
    rep = json.loads(json.dumps(crashed.report))
    a = rep["attempts"][0]
    a["witnesses"] = [EVIL]
    a["end_reason"] = EVIL
    for k in ("start", "end", "first_step", "last_step"):
        a["evidence"][k] = {**(a["evidence"][k] or {}), "path": "logs/" + EVIL}
    text = html_report.write_html(rep, tmp_path / "r.html", pngs={}).read_text(encoding="utf-8")
    page = Page(text)
    assert not any(t == "script" for t, _ in page.tags) and "<img" not in text.lower()
    row = _attempt_rows(text)["0"]["text"]
    assert row.count("<script>document.title='PWNED'</script>") == 6
