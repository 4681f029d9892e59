"""Issue 29 item 6: no table of the report is cut off at a 1280 px page. Page 07's annotation table
was: its Chinese questions, having no blank, were taken for names and kept on one line, so the
table ran 70 px past its output area, hidden behind a scroll bar at the bottom of a long table.

One run of every stage (two offline judges, two systems, the demo corpus in Chinese); every page of
the report (with and without code, the index, the judgment browser, the last-run page and the
compare page) is opened in headless Chromium in a 1280 px frame (one browser, a harness page opening
each in turn, as `tests/e2e/test_xss.py` does), and every table's right edge must lie inside the
page and inside each box that clips or scrolls it. A control page with a table too wide for 1280 px
shows the check can fail.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
import yaml

from cube.run.execute import execute_run
from tests import ROOT
from tests.chromium import dump_dom, require

pytestmark = pytest.mark.e2e
WIDTH = 1280

# For each page: the tables whose right edge passes the page's width or the inner right edge of a
# box around them that clips or scrolls (overflow-x other than visible), with the first cell's text.
HARNESS = """<!DOCTYPE html><html><head><title>harness</title></head><body><pre id="out"></pre>
<script>
var pages = PAGES, out = [];
function limit(t, d) {
  var edge = d.documentElement.clientWidth;
  for (var a = t.parentElement; a && a !== d.body && a !== d.documentElement; a = a.parentElement) {
    if (d.defaultView.getComputedStyle(a).overflowX !== "visible") {
      edge = Math.min(edge, a.getBoundingClientRect().left + a.clientLeft + a.clientWidth);
    }
  }
  return edge;
}
function cut(d) {
  return Array.prototype.slice.call(d.querySelectorAll("table")).map(function (t) {
    var r = t.getBoundingClientRect(), edge = limit(t, d);
    var first = t.querySelector("th,td");
    return {right: Math.round(r.right), edge: Math.round(edge), width: Math.round(r.width),
            first: first ? first.textContent.slice(0, 40) : ""};
  }).filter(function (x) { return x.width > 0 && x.right > x.edge + 1; });
}
function next(i) {
  if (i >= pages.length) {
    document.getElementById("out").textContent = JSON.stringify(out);
    return;
  }
  var f = document.createElement("iframe");
  f.style.width = "WIDTHpx"; f.style.height = "800px"; f.style.border = "0";
  f.onload = function () {
    setTimeout(function () {
      var d = f.contentDocument;
      out.push({page: pages[i], tables: d ? d.querySelectorAll("table").length : -1,
                cut: d ? cut(d) : null});
      f.remove(); next(i + 1);
    }, 500);
  };
  f.src = pages[i];
  document.body.appendChild(f);
}
next(0);
</script></body></html>"""


def measure(pages: list[Path], folder: Path) -> dict[str, dict]:
    """Each page as Chromium lays it out in a 1280 px frame: {uri: {tables, cut}}."""
    harness = folder / "width-harness.html"
    uris = [p.resolve().as_uri() for p in pages]
    text = HARNESS.replace("PAGES", json.dumps(uris)).replace("WIDTH", str(WIDTH))
    harness.write_text(text, encoding="utf-8")
    dom = dump_dom(
        harness.as_uri(),
        3000 * len(pages),
        600,
        "--allow-file-access-from-files",
        "--window-size=1400,900",
    )
    found = html.unescape(dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0])
    return {r["page"]: r for r in json.loads(found)}


@pytest.fixture(scope="module")
def chromium():
    return require()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("width")
    offline = {"provider": "offline"}
    params = {
        "run": "width",
        "outputs_dir": str(tmp / "outputs"),
        "corpus": {"source": "demo", "n_items": 24, "seed": 3},
        "questions": {"generator": "template", "seed": 3},
        "analysis": {"bootstrap": 50},
        "human": {"sample_size": 6, "seed": 1},
        "simulation": {"replicates": 2, "bootstrap": 20, "permutations": 20},
        "stages": {"paper_tables": "on", "validation": "on"},  # every page (auto: not at 24)
        "systems": [
            {"kind": "builtin", "name": "bm25", "top_n": 8},
            {"kind": "builtin", "name": "top4", "top_n": 4},
        ],
        "judges": [
            {"name": "lenient", "model": {**offline, "model": "rubric-lenient"}},
            {"name": "strict", "model": {**offline, "model": "rubric-strict"}},
        ],
    }
    path = tmp / "width.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    try:
        execute_run(path, log=lambda _: None)
    finally:
        mp.undo()
    return tmp / "outputs" / "width"


def test_no_table_of_any_page_is_cut_off_at_1280_px(chromium, run, tmp_path):
    report = run / "report"
    pages = sorted(
        [*report.glob("*.html"), *report.glob("code/*.html"), *run.glob("compare/*/index.html")]
    )
    control = tmp_path / "wide.html"  # a table no 1280 px page holds: the check can fail
    control.write_text(
        "<title>wide</title><div style='overflow-x:hidden'><table><tr>"
        + "<td style='white-space:nowrap'>"
        + "wide " * 400
        + "</td></tr></table></div>",
        encoding="utf-8",
    )
    got = measure([*pages, control], tmp_path)
    assert got[control.resolve().as_uri()]["cut"], got[control.resolve().as_uri()]
    assert len(pages) == 13 * 2 + 4  # the 13 pages twice, the index, browser, last run, compare
    seen = sum(got[p.resolve().as_uri()]["tables"] for p in pages)
    assert seen > 100  # the tables were laid out
    cut = {p.name: got[p.resolve().as_uri()]["cut"] for p in pages}
    assert {k: v for k, v in cut.items() if v} == {}
