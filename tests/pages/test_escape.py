"""The one escaping function and the pages' sanitiser (cube.pages.escape, issue 29 item 1).

`escape_text` is checked the way its output is read: rendered by nbconvert's Markdown renderer
(mistune, what the exported pages use) and read by an HTML parser, which must find no element or
attribute the payload asked for and the payload itself as the text. `sanitise_html` is checked on
the payloads a notebook could print, and on what the pages' own outputs need to keep."""

from __future__ import annotations

from html.parser import HTMLParser

import jinja2
import pytest
from markupsafe import Markup

from cube.pages.decision import decision_markdown
from cube.pages.escape import escape_text, jinja_finalize, sanitise_html

XT = "document.title='X'"
PAYLOADS = [
    f"<script>{XT}</script>",
    f'A<img src=x onerror="{XT}">',
    f"bm25 [click](javascript:{XT})",
    f"[a] [b]: javascript:{XT}",  # a reference link and its definition
    "![i](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<javascript:alert(1)>",  # an autolink
    "\\[x\\](javascript:alert(1))",  # backslash escapes
    "&#91;x&#93;(javascript:alert(1))",  # references written by the attacker
    "<svg/onload=alert(1)>",
    '" onmouseover="alert(1)',  # breaking out of an attribute
    "<a href='javascript:alert(1)'>x</a>",
]


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def _parse(html: str) -> _Elements:
    p = _Elements()
    p.feed(html)
    p.close()
    return p


def _markdown(text: str) -> str:
    """`text` rendered as nbconvert renders a Markdown output when it exports a page."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(text)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_an_escaped_payload_is_text_in_markdown_and_in_html(payload):
    for rendered in (_markdown(f"Judge {escape_text(payload)} is used."), escape_text(payload)):
        dom = _parse(rendered)
        assert [t for t, _ in dom.tags if t not in ("p",)] == [], rendered
        assert payload in dom.text.replace("\n", " ")
    attr = _parse(f'<span title="{escape_text(payload)}">x</span>')
    assert attr.tags == [("span", {"title": payload})]


def test_the_same_payloads_unescaped_would_have_been_live():
    """The check above can fail: mistune keeps raw HTML and javascript: links."""
    live = [_parse(_markdown(p)).tags for p in PAYLOADS[:3]]
    assert any(t == "script" for t, _ in live[0])
    assert any(t == "img" and "onerror" in a for t, a in live[1])
    assert any(t == "a" and (a.get("href") or "").startswith("javascript:") for t, a in live[2])


def test_escape_keeps_plain_names_and_markdown_emphasis_and_code():
    assert escape_text("bm25-top8 · 政务助手 (v2)") == "bm25-top8 · 政务助手 (v2)"
    assert escape_text(None) == "" and escape_text(3) == "3"
    html = _markdown(escape_text("run `cube run PARAMS --only 03..` **now**"))
    assert "<code>cube run PARAMS --only 03..</code>" in html and "<strong>now</strong>" in html


def test_the_decision_markdown_disarms_every_name():
    decision = {
        "verdict": "good",
        "sentence": f"The system {PAYLOADS[2]} is good.",
        "suggestions": [f"look at {PAYLOADS[1]}"],
        "judges_used": [PAYLOADS[1], PAYLOADS[3]],
        "n_judges": 2,
        "judges_excluded": {PAYLOADS[0]: f"reason {PAYLOADS[4]}"},
        "weakest": [{"dimension": PAYLOADS[5], "score": 40.0}],
        "system": PAYLOADS[2],
        "patterns_sentence": "patterns",
        "failure_patterns": {"top": [{"pattern": "x", "count": 1, "share": 0.5, "examples": "q1"}]},
    }
    dom = _parse(_markdown(decision_markdown(decision)))
    assert not [t for t, _ in dom.tags if t in ("script", "img", "svg")]
    assert all(not k.startswith("on") for _, a in dom.tags for k in a)
    hrefs = [a.get("href") or "" for t, a in dom.tags if t == "a"]
    assert hrefs and all(h.startswith("../report/judgments.html#") for h in hrefs)
    for p in (PAYLOADS[0], PAYLOADS[1], PAYLOADS[2], PAYLOADS[5]):
        assert p in dom.text


def test_templates_print_every_string_through_the_escaping_function():
    env = jinja2.Environment(autoescape=True, finalize=jinja_finalize)
    out = env.from_string("<p>{{ a }}</p><a href='{{ b }}'>{{ c }}</a>{{ d }}{{ n }}").render(
        a=PAYLOADS[2], b="x' onclick='alert(1)", c=PAYLOADS[1], d=Markup("<b>ours</b>"), n=3
    )
    dom = _parse(out)
    assert [t for t, _ in dom.tags] == ["p", "a", "b"]
    assert dom.tags[1][1] == {"href": "x' onclick='alert(1)"}
    assert "&#91;click&#93;" in out and PAYLOADS[1] in dom.text and out.endswith("3")


SANITISED = [
    (f"<script>{XT}</script><p>kept</p>", "<p>kept</p>"),
    (f'<img src="x" onerror="{XT}">', '<img src="x">'),
    ('<a href="javascript:alert(1)">x</a>', "<a>x</a>"),
    ('<a href="JaVaScRiPt:alert(1)">x</a>', "<a>x</a>"),
    ('<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>', "<a>x</a>"),
    ('<img src="data:image/svg+xml;base64,PHN2Zz4=">', "<img>"),
    ("<style>body{display:none}</style><b>x</b>", "<b>x</b>"),
    ('<iframe src="https://example.org"></iframe>', ""),
    ('<form action="https://example.org"><input name="q"></form>', ""),
    ('<span style="color:#fff;background:url(javascript:alert(1))">x</span>', None),
]


@pytest.mark.parametrize(("html", "expected"), SANITISED)
def test_the_sanitiser_removes_what_runs_script_or_loads_a_document(html, expected):
    out = sanitise_html(html)
    if expected is not None:
        assert out == expected
    dom = _parse(out)
    assert not [t for t, _ in dom.tags if t in ("script", "style", "iframe", "form", "svg")]
    for _, a in dom.tags:
        assert all(not k.startswith("on") for k in a)
        for k in ("href", "src"):
            v = (a.get(k) or "").lower()
            assert not v.startswith(("javascript:", "vbscript:")), out
            assert not v.startswith("data:") or v.startswith("data:image/png"), out
    assert "javascript" not in out.lower()


def test_the_sanitiser_keeps_what_the_pages_show():
    png = '<img src="data:image/png;base64,iVBORw0KGgo=" alt="fig" width="400">'
    table = (
        '<table class="cube-table"><caption>c</caption><thead><tr><th>System</th></tr></thead>'
        '<tbody><tr><td class="text name"><a href="../report/judgments.html#system=a&amp;q=q1">'
        "q1</a></td></tr></tbody></table>"
    )
    badge = (
        '<span style="background:#2e7d32;color:#fff;padding:2px 10px;border-radius:10px;'
        'font-weight:bold">GOOD</span>'
    )
    heading = '<h2 id="Decision">Decision<a class="anchor-link" href="#Decision">¶</a></h2>'
    for html in (png, table, badge, heading):
        assert sanitise_html(html) == html
