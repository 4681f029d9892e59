"""End to end (issue 29 item 1): names that carry script, event-attribute and link payloads run
through the whole sequence, and no page of the report runs them.

Run A, every stage: the report's title, the two judges (the offline rubric presets) and their
roles, and the two systems carry the payloads; a judge name that sorts first becomes page 07's
agreement reference (the sentence "taking ... as the reference" that ran a script before). Run B,
stages 01-03 and 06: an inline dimension and an LLM judge (a stdlib server on 127.0.0.1) carry
them. Every page (the notebook pages with and without code, the index, the judgment browser, the
compare page, the last-run page) is parsed with `html.parser` for script elements that are not the
report's own, event attributes and `javascript:` / `vbscript:` / `data:` URLs (but a raster
image's); the payloads are found on the pages as text; and the pages are loaded in headless
Chromium (one browser, a harness page opening each in turn), whose document title must stay the
page's own and whose live DOM must hold no such URL.
"""

from __future__ import annotations

import json
import random
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from cube.run.execute import execute_run
from tests import ROOT
from tests.chromium import dump_dom, require
from tests.openai_server import OpenAIServer, body_digest

pytestmark = pytest.mark.e2e
XT = "document.title='XSS'"
PAYLOADS = {
    "script": f"<script>{XT}</script>",
    "event": f'<img src=x onerror="{XT}">',
    "svg": f'<svg onload="{XT}">',
    "link": f"[click](javascript:{XT})",
    "html-link": f'<a href="javascript:{XT}">x</a>',
    "autolink": "<javascript:alert(1)>",
    "image": "![i](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "reference": f"[r]\n\n[r]: javascript:{XT}",
}
TITLE = "Report " + " ".join(PAYLOADS.values()).replace("\n", " ")
JUDGE_A = "A" + PAYLOADS["event"]  # sorts first: page 07's agreement reference
JUDGE_B = "B " + PAYLOADS["link"] + PAYLOADS["autolink"]
SYSTEM_A = "bm25 " + PAYLOADS["link"] + " " + PAYLOADS["svg"]
SYSTEM_B = "top4 " + PAYLOADS["script"] + PAYLOADS["image"]
DIMENSION = "quality" + PAYLOADS["html-link"] + PAYLOADS["event"]
ROLE = "role " + PAYLOADS["link"] + PAYLOADS["script"]
IMAGE_DATA = ("data:image/png", "data:image/jpeg")


def _params(tmp: Path, run: str, **extra) -> Path:
    params = {
        "run": run,
        "outputs_dir": str(tmp / "outputs"),
        "title": TITLE,
        "corpus": {"source": "demo", "n_items": 24, "seed": 3},
        "questions": {"generator": "template", "seed": 3},
        "analysis": {"bootstrap": 50},
        "human": {"sample_size": 6, "seed": 1},
        "simulation": {"replicates": 2, "bootstrap": 20, "permutations": 20},
        "stages": {"paper_tables": "on", "validation": "on"},  # every page (auto: not at 24)
        **extra,
    }
    path = tmp / f"{run}.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    return path


def _run_a(tmp: Path) -> Path:
    path = _params(
        tmp,
        "xss",
        systems=[
            {"kind": "builtin", "name": SYSTEM_A, "top_n": 8},
            {"kind": "builtin", "name": SYSTEM_B, "top_n": 4},
        ],
        judges=[
            {"name": JUDGE_A, "model": {"provider": "offline", "model": "rubric-lenient"}},
            {
                "name": JUDGE_B,
                "model": {"provider": "offline", "model": "rubric-strict"},
                "role": ROLE,
            },
        ],
    )
    execute_run(path, log=lambda _: None)
    return tmp / "outputs" / "xss"


def _run_b(tmp: Path) -> Path:
    relevance = yaml.safe_load((ROOT / "cube/judges/dimensions/relevance.yaml").read_text())
    with OpenAIServer(reply=lambda b: f"Score: {random.Random(body_digest(b)).randint(2, 9)}") as s:
        model = {"model": "fake", "base_url": s.url, "api_key_env": "CUBE_XSS_KEY"}
        path = _params(
            tmp,
            "xss-dimension",
            dimensions=[
                "relevance",
                {
                    "name": DIMENSION,
                    "description": "the answer's quality",
                    "prompt": relevance["prompt"]["zh"],
                    "criteria": relevance["criteria"],
                },
            ],
            systems=[{"kind": "builtin", "name": SYSTEM_A, "top_n": 8}],
            judges=[
                {"name": JUDGE_A, "model": {**model, "seed": 1}, "role": ROLE},
                {"name": JUDGE_B, "model": {**model, "seed": 2}},
            ],
        )
        execute_run(path, only="01,02,03,06", log=lambda _: None)
    return tmp / "outputs" / "xss-dimension"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xss")
    mp = pytest.MonkeyPatch()
    mp.setenv("CUBE_XSS_KEY", "sk-local-test")
    mp.chdir(ROOT)
    try:
        yield [_run_a(tmp), _run_b(tmp)]
    finally:
        mp.undo()


def _pages(root: Path) -> list[Path]:
    report = root / "report"
    return sorted(
        [*report.glob("*.html"), *report.glob("code/*.html"), *root.glob("compare/*/index.html")]
    )


class _Page(HTMLParser):
    """What a page would run: its script elements, event attributes and dangerous URLs; and its
    text and title."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[dict[str, str | None]] = []
        self.events: list[tuple[str, str]] = []
        self.urls: list[tuple[str, str, str]] = []
        self.frames: list[str] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts.append(a)
        if tag in ("iframe", "object", "embed", "base", "frame"):
            self.frames.append(tag)
        self._in_title = tag == "title"
        for k, v in attrs:
            if k.startswith("on"):
                self.events.append((tag, k))
            url = (v or "").strip().lower()
            if k in ("href", "src", "action", "formaction", "xlink:href", "data", "poster"):
                image = tag == "img" and k == "src" and url.startswith(IMAGE_DATA)
                if url.startswith(("javascript:", "vbscript:")) or (
                    url.startswith("data:") and not image
                ):
                    self.urls.append((tag, k, url[:60]))

    def handle_endtag(self, tag):
        self._in_title = False if tag == "title" else self._in_title

    def handle_data(self, data):
        self.text.append(data)
        if self._in_title:
            self.title += data


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


def _own_scripts(page: Path, scripts: list[dict[str, str | None]]) -> bool:
    """The report's own scripts: the judgment browser's one inline script and its data files; no
    other page has any."""
    if page.name != "judgments.html":
        return not scripts
    inline = [s for s in scripts if not s.get("src")]
    return len(inline) == 1 and all(
        (s.get("src") or "").startswith("judgments/") for s in scripts if s.get("src")
    )


def test_no_page_holds_a_script_an_event_attribute_or_a_dangerous_link(runs):
    scanned = []
    for root in runs:
        for page in _pages(root):
            dom = _parse(page.read_text(encoding="utf-8"))
            where = page.relative_to(root)
            assert _own_scripts(page, dom.scripts), (where, dom.scripts)
            assert dom.events == [], (where, dom.events)
            assert dom.urls == [], (where, dom.urls)
            assert dom.frames == [], (where, dom.frames)
            scanned.append(where)
    # run A: 13 pages twice, the index, the browser, the last run, one compare page; run B: 4
    # pages twice, the index, the browser, the last run
    assert len(scanned) == 13 * 2 + 4 + 4 * 2 + 3, scanned


def _text(root: Path, page: str) -> str:
    return " ".join(_parse((root / page).read_text(encoding="utf-8")).text)


def test_the_names_reach_the_pages_as_text(runs):
    """The scan above is not vacuous: every payload-carrying name is shown, as its own text."""
    a, b = runs
    assert f"taking {JUDGE_A} as the reference" in " ".join(
        _text(a, "report/07_human_agreement.html").split()
    )
    decision = _text(a, "report/06_cube_score.html")
    assert SYSTEM_A in decision and JUDGE_B in decision
    assert TITLE in _text(a, "report/index.html")
    compare = next(a.glob("compare/*/index.html"))
    assert SYSTEM_B in _text(a, str(compare.relative_to(a)))
    assert DIMENSION in _text(b, "report/03_scoring_sets.html")
    assert JUDGE_A in _text(b, "report/06_cube_score.html")


# One Chromium for every page: a harness page opens each in an iframe (file pages may read each
# other's documents with --allow-file-access-from-files), waits for its load and a second and a
# half more (virtual time), and writes each page's live title and dangerous URLs as JSON.
HARNESS = """<!DOCTYPE html><html><head><title>harness</title></head><body><pre id="out"></pre>
<script>
var pages = PAGES, out = [];
function bad(d) {
  return Array.prototype.slice.call(d.querySelectorAll("[href],[src],[action]")).map(function (e) {
    return (e.getAttribute("href") || e.getAttribute("src") || e.getAttribute("action") || "");
  }).filter(function (u) {
    u = u.trim().toLowerCase();
    return u.indexOf("javascript:") === 0 || u.indexOf("vbscript:") === 0 ||
      (u.indexOf("data:") === 0 && u.indexOf("data:image/png") !== 0);
  });
}
function next(i) {
  if (i >= pages.length) {
    document.getElementById("out").textContent = JSON.stringify(out);
    return;
  }
  var f = document.createElement("iframe");
  f.onload = function () {
    setTimeout(function () {
      var d = f.contentDocument;
      out.push({page: pages[i], title: d ? d.title : null, bad: d ? bad(d) : null});
      f.remove(); next(i + 1);
    }, 1500);
  };
  f.src = pages[i];
  document.body.appendChild(f);
}
next(0);
</script></body></html>"""


def _live(pages: list[Path], folder: Path) -> dict[str, dict]:
    """Each page as Chromium ran it: {uri: {title, bad}} (see HARNESS)."""
    harness = folder / "harness.html"
    uris = [p.as_uri() for p in pages]
    harness.write_text(HARNESS.replace("PAGES", json.dumps(uris)), encoding="utf-8")
    dom = dump_dom(harness.as_uri(), 5000 * len(pages), 300, "--allow-file-access-from-files")
    text = "".join(_parse(dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0]).text)
    return {r["page"]: r for r in json.loads(text)}


@pytest.fixture(scope="module")
def chromium():
    return require()


def test_in_chromium_every_page_keeps_its_title(chromium, runs, tmp_path):
    control = tmp_path / "unescaped.html"  # what an unescaped name does: the check can fail
    control.write_text(f"<title>mine</title><p>{JUDGE_A}</p><p>{SYSTEM_A}</p>", encoding="utf-8")
    pages = [p for root in runs for p in _pages(root)]
    live = _live([*pages, control], tmp_path)
    assert live[control.as_uri()]["title"] == "XSS"
    for page in pages:
        got = live[page.as_uri()]
        own = " ".join(_parse(page.read_text(encoding="utf-8")).title.split())  # as the DOM says
        assert (got["title"], got["bad"]) == (own, []), page
    assert len(pages) == 13 * 2 + 4 + 4 * 2 + 3
