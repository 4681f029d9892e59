"""Chinese in every browser: the report's pages embed a CJK web font subset
(`cube.pages.webfont`)."""

from __future__ import annotations

import base64
import io
import re

import pytest

from cube.pages import webfont
from cube.pages.fonts import web_font_source

FONT = web_font_source()
pytestmark = pytest.mark.skipif(
    FONT is None, reason="the packaged CJK font (noto-cjk-sans-otc) is not installed"
)


def _embedded_cmap(page: str) -> set[str]:
    from fontTools.ttLib import TTFont

    data = re.search(r"data:font/woff;base64,([A-Za-z0-9+/=]+)", page).group(1)
    return {chr(c) for c in TTFont(io.BytesIO(base64.b64decode(data))).getBestCmap()}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    (folder / "a.html").write_text(
        "<html><head></head><body><p>办理地点：人民路</p></body></html>", encoding="utf-8"
    )
    (folder / "b.html").write_text("<html><body><p>Latin only</p></body></html>", encoding="utf-8")
    (folder / "browser.html").write_text(
        "<html><body><div id=x></div></body></html>", encoding="utf-8"
    )
    pages = sorted(folder.glob("*.html"))
    sizes = webfont.embed_cjk_font(
        pages, FONT, {folder / "browser.html": 'CUBE_CHUNK({"t":"收费标准"})'}
    )
    return folder, sizes


def test_each_page_embeds_exactly_the_cjk_characters_it_uses(report):
    folder, sizes = report
    page = (folder / "a.html").read_text(encoding="utf-8")
    assert (
        "@font-face" in page
        and f'"{webfont.FAMILY}"' in page
        and page.index(webfont.START) < page.index("</body>")
    )
    cmap = _embedded_cmap(page)
    assert set("办理地点：人民路") <= cmap and not {"收", "费"} & cmap
    # the browser's characters come from the data its script loads
    assert set("收费标准") <= _embedded_cmap((folder / "browser.html").read_text(encoding="utf-8"))
    assert 0 < sizes[folder / "a.html"] < 20_000  # 8 characters: a few kB, not the 19 MB collection


def test_a_latin_page_gets_no_font_and_embedding_again_replaces_the_block(report):
    folder, sizes = report
    assert sizes[folder / "b.html"] == 0 and webfont.START not in (folder / "b.html").read_text(
        encoding="utf-8"
    )
    before = (folder / "a.html").read_text(encoding="utf-8")
    webfont.embed_cjk_font([folder / "a.html"], FONT)
    after = (folder / "a.html").read_text(encoding="utf-8")
    assert after.count(webfont.START) == 1 and _embedded_cmap(after) == _embedded_cmap(before)
    assert after.replace(
        after[after.index(webfont.START) : after.index(webfont.END)], ""
    ) == before.replace(before[before.index(webfont.START) : before.index(webfont.END)], "")


def test_cjk_characters_skip_the_embedded_block_and_latin_text():
    page = "<p>abc 办理</p>" + webfont.START + "费" + webfont.END
    assert webfont.cjk_characters(page) == "办理"


def test_the_same_characters_give_the_same_font_bytes_at_any_time(monkeypatch):
    """A page is rewritten only when it changed, and two runs' pages compare equal: the subset
    keeps the bundled font's date instead of the time it was made."""
    made = []
    for epoch in ("1000000000", "2000000000"):  # fontTools' "now" (reproducible builds' variable)
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        made.append(webfont.subset(FONT[0], "得分问题", FONT[1]))
    assert made[0] == made[1] and webfont.subset(made[0], "得分") == webfont.subset(made[1], "得分")


def test_published_browser_font_covers_every_data_file(tmp_path):
    # `publish.embed_fonts` reads the judgment browser's data files one at a time: the browser's
    # face holds the characters of each file (none of them in the page), and the page is the one
    # the files' text joined would give
    from cube.pages.publish import embed_fonts

    report = tmp_path / "report"
    (report / "judgments").mkdir(parents=True)
    page = "<html><body><div id=x></div></body></html>"
    (report / "judgments.html").write_text(page, encoding="utf-8")
    chunks = ['CUBE_CHUNK({"t":"收费标准"});\n', 'CUBE_CHUNK({"t":"办理地点"});\n']
    for i, text in enumerate(chunks):
        (report / "judgments" / f"chunk-{i:04d}.js").write_text(text, encoding="utf-8")
    joined = tmp_path / "joined.html"
    joined.write_text(page, encoding="utf-8")

    sizes = embed_fonts(report)
    webfont.embed_cjk_font([joined], FONT, {joined: "".join(chunks)})

    shown = (report / "judgments.html").read_text(encoding="utf-8")
    assert set("收费标准办理地点") <= _embedded_cmap(shown)
    assert shown == joined.read_text(encoding="utf-8")
    assert sizes[report / "judgments.html"] > 0


def test_a_subset_of_a_subset_is_the_same_whether_or_not_hints_are_looked_for_again():
    # `embed_cjk_font` subsets each page from the report's union subset, which holds no hints
    base = webfont.subset(FONT[0], "得分问题回答评分", FONT[1])
    for chars in ("得分", "问题回答", "评"):
        assert webfont.subset(base, chars, hinted=False) == webfont.subset(base, chars)


def test_cjk_characters_are_each_distinct_cjk_character_in_code_point_order():
    # counted by code point: the same as sorting the text's distinct characters
    page = (
        "理办abc\udcff办\U0001f600理，"
        + "".join(chr(c) for c in range(0x2E70, 0x2E90))
        + "\uffef\ufff0"
    )
    expected = "".join(sorted(c for c in set(page) if webfont._CJK.match(c)))
    assert webfont.cjk_characters(page) == expected and expected.startswith("\u2e80")
    assert webfont.cjk_characters("") == webfont.cjk_characters("latin only") == ""
