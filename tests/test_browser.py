"""report.html in a real headless browser (Debian's chromium; `.ci/run` installs it, `make test`
never does: without it this module is skipped, with one line saying why): no console errors, every image decoded and drawn, the
verdict card visible first, and log lines holding <script> shown as text, never run.

Console messages come from chromium's own log (`--enable-logging=stderr`: every console
message, uncaught exception and CSP violation is an `INFO:CONSOLE` line), so the page needs no
script and no DevTools protocol; a control page proves the detector sees errors."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageStat

from forensics.analysis import Analysis, analyze
from forensics.simulate import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium")  # `command -v chromium`, as the Makefile and .ci/run look for it
pytestmark = pytest.mark.browser
if CHROMIUM is None:
    pytest.skip("no chromium found (`command -v chromium`): browser test skipped; .ci/run installs it",
                allow_module_level=True)

PWN = "<script>document.title='PWNED'</script>"
WIDTH, HEIGHT = 1200, 2000
CONSOLE = re.compile(r"CONSOLE|Uncaught|Content Security Policy|Failed to load resource|ERR_", re.I)


def chromium(tmp: Path, page: Path, *args: str, size: tuple[int, int] = (WIDTH, HEIGHT)) -> subprocess.CompletedProcess:
    prof = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
           "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
           f"--user-data-dir={prof}", f"--window-size={size[0]},{size[1]}", "--enable-logging=stderr", "--v=0",
           *args, page.resolve().as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def console_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if CONSOLE.search(ln) and "dbus" not in ln.lower()]


class Imgs(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.scripts = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "img":
            self.srcs.append(dict(attrs).get("src") or "")
        if tag == "script":
            self.scripts += 1


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    """The demo scenario with script tags planted in a log line that becomes evidence, an
    unparsed error line, and the job name."""
    tmp = tmp_path_factory.mktemp("browser")
    case = simulate(load_scenario(ROOT / "fixtures" / "scenarios" / "gpu_fell_off_bus.toml"), tmp / "case", 7)
    job = case / "job"
    hit = 0
    for dmesg in sorted(job.rglob("dmesg*")):
        lines = dmesg.read_text().splitlines(keepends=True)
        for i, ln in enumerate(lines):
            if "fallen off the bus" in ln and "Xid" in ln:
                lines[i] = ln.rstrip("\n") + " " + PWN + "\n"
                hit += 1
        dmesg.write_text("".join(lines))
    assert hit, "no Xid 79 line to plant the script in"
    rank0 = sorted(job.rglob("rank-0.log"))[0]
    with rank0.open("a") as f:
        f.write(f"ERROR: data loader failed {PWN} <img src=x onerror=\"document.title='PWNED'\">\n")
    toml = job / "job.toml"
    toml.write_text(re.sub(r'(?m)^name = .*$', 'name = "evil</title><script>document.title=\\"PWNED\\"</script>"',
                           toml.read_text()))
    a = analyze(job, tmp / "out")
    texts = [e["text"] for x in a.report["interruptions"] for e in x["evidence"]]
    texts += [u["text"] for u in a.report.get("unparsed_errors") or []]
    assert sum(PWN in t for t in texts) >= 2, "the planted lines must reach the report"
    return a


def test_console_detector_sees_errors(tmp_path: Path) -> None:
    """Control: the same flags on a page that logs an error and throws report both."""
    page = tmp_path / "control.html"
    page.write_text("<!DOCTYPE html><title>c</title><script>console.error('control-marker'); nope();</script>")
    lines = console_lines(chromium(tmp_path, page, "--dump-dom").stderr)
    assert any("control-marker" in ln for ln in lines) and any("Uncaught" in ln for ln in lines)


def test_report_renders_without_console_errors_and_scripts_stay_text(hostile: Analysis, tmp_path: Path) -> None:
    html = hostile.out_dir / "report.html"
    res = chromium(tmp_path, html, "--dump-dom")
    assert console_lines(res.stderr) == []
    dom = res.stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert "PWNED" != title.strip() and title.startswith("forensics: evil")
    assert "<script" not in dom.lower()  # nothing became an element
    assert "onerror=" not in re.sub(r"&lt;img[^<]*", "", dom)  # ... nor an attribute
    # the lines are there, as text: the serializer escapes < and > in text nodes
    assert dom.count("&lt;script&gt;document.title='PWNED'&lt;/script&gt;") >= 2  # the Xid line (once) + unparsed line
    assert re.search(r"<pre class=\"line\">[^<]*GPU has fallen off the bus\. &lt;script&gt;document\.title='PWNED'", dom)
    assert "ERROR: data loader failed &lt;script&gt;" in dom


def test_every_image_is_a_png_the_browser_draws(hostile: Analysis, tmp_path: Path) -> None:
    """Every <img> is an inline PNG; drawn by chromium at natural size, each matches its pixels."""
    srcs = Imgs(hostile.out_dir.joinpath("report.html").read_text(encoding="utf-8")).srcs
    assert len(srcs) == 4
    pngs = []
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        im = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1], validate=True)))
        im.load()
        pngs.append(im.convert("RGB"))
    w = max(p.width for p in pngs)
    h = sum(p.height for p in pngs)
    page = tmp_path / "imgs.html"
    page.write_text("<!DOCTYPE html><html><head><style>*{margin:0;padding:0;border:0}img{display:block}</style>"
                    "</head><body>" + "".join(f'<img src="{s}">' for s in srcs) + "</body></html>")
    shot = tmp_path / "imgs.png"
    res = chromium(tmp_path, page, f"--screenshot={shot}", size=(w, h))
    assert console_lines(res.stderr) == []
    got = Image.open(shot).convert("RGB")
    y = 0
    for k, p in enumerate(pngs):
        region = got.crop((0, y, p.width, y + p.height))
        diff = ImageStat.Stat(ImageChops.difference(region, p)).mean
        assert max(diff) < 3.0, (k, diff)  # a broken image would be an icon on white
        assert ImageStat.Stat(region).stddev[0] > 5  # and it is not blank
        y += p.height


def test_verdict_card_is_the_first_thing_visible(hostile: Analysis, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    res = chromium(tmp_path, hostile.out_dir / "report.html", f"--screenshot={shot}")
    assert console_lines(res.stderr) == []
    im = Image.open(shot).convert("RGB")
    assert im.size == (WIDTH, HEIGHT)
    top = im.crop((0, 0, WIDTH, 500))
    assert ImageStat.Stat(top).stddev[0] > 10  # not blank
    # the card's coloured left border (completed: green, crash/hang: red) is on screen near the top
    border = {"completed": (0x2E, 0x7D, 0x32), "crash": (0xC6, 0x28, 0x28), "hang": (0xC6, 0x28, 0x28)}[
        hostile.report["verdict"]["kind"]]
    px = top.load()
    rows = [y for y in range(top.height) if any(max(abs(a - b) for a, b in zip(px[x, y], border, strict=True)) < 8
                                               for x in range(0, 200))]
    assert rows and rows[0] < 120 and len(rows) > 100, rows[:5]
    # and the page is long: the other sections come after it
    dom = chromium(tmp_path, hostile.out_dir / "report.html", "--dump-dom").stdout
    ids = re.findall(r"<section id=\"([a-z]+)\"", dom)
    assert ids[0] == "verdict" and ids.index("interruptions") == 1 and ids[-1] == "warnings"


def test_layout_evidence_once_labels_and_times(hostile: Analysis, tmp_path: Path) -> None:
    """What chromium builds from the page: each evidence line of the card once in the whole DOM
    (the rest behind a closed "show all"), the interruption below pointing to the card, advice
    with people's labels and durations, stamps to the second."""
    res = chromium(tmp_path, hostile.out_dir / "report.html", "--dump-dom")
    assert console_lines(res.stderr) == []
    dom = res.stdout
    rep = hostile.report
    shown = [x for x in rep["interruptions"] if x["evidence"]] if rep["verdict"]["kind"] == "completed" \
        else [rep["verdict"]]
    for x in shown:
        for ev in x["evidence"][:25]:
            assert dom.count(f'<span class="loc">{ev["path"]}:{ev["line"]}</span>') == 1, ev
        if len(x["evidence"]) > 5:
            m = re.search(rf'<details class="more" id="all-evidence-{x["id"]}"( open)?><summary>show all '
                          rf'{min(len(x["evidence"]), 25)} evidence lines</summary>', dom)
            assert m and m.group(1) is None  # closed until asked
    card = dom.split('id="verdict"', 1)[1].split("</section>", 1)[0]
    assert "report.json" not in card
    advice = dom.split('id="advice"', 1)[1].split("</section>", 1)[0]
    for want in ("Advice", "Collective timeout", "Watchdog timeout", "Time spent waiting for the watchdog", "10 min"):
        assert want in advice, want
    assert not re.search(r"<dt>[a-z]+_[a-z_]+</dt>", advice) and "_s<" not in advice
    assert "all times on this page are UTC" in dom
    # the heatmap names the rows it flags: the dead GPU (a culprit, not a straggler) among them
    culprits = {f"{x['culprit']['host']} GPU {x['culprit']['gpu']}" for x in rep["interruptions"]
                if x["culprit"].get("host") and x["culprit"].get("gpu") is not None}
    alt = re.search(r'<img alt="(SM clock per GPU over time[^"]*)"', dom).group(1)
    assert culprits and all(c in alt for c in culprits), (alt, culprits)
    assert f"{rep['job']['gpus']} GPUs</span>" in dom  # the header's GPU count, as in the plot's title
    outside_logs = re.sub(r'<pre class="line">.*?</pre>', "", dom, flags=re.S)
    assert not re.search(r"\d\d:\d\d:\d\d\.\d{3}", outside_logs)
