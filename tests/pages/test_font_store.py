"""The report's font subsets kept between runs (`cube.pages.font_store`): a page embedding a stored
subset is the page made without the store; a damaged or foreign entry is made again."""

from __future__ import annotations

import os
import time

import pytest

from cube.pages import font_store, webfont
from cube.pages.fonts import web_font_source

FONT = web_font_source()
pytestmark = pytest.mark.skipif(
    FONT is None, reason="the packaged CJK font (noto-cjk-sans-otc) is not installed"
)
PAGES = {
    "a.html": "<html><body><p>办理地点：人民路</p></body></html>",
    "b.html": "<html><body><p>收费标准 办理</p></body></html>",
    "c.html": "<html><body><p>Latin only</p></body></html>",
}


def _report(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in PAGES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return sorted(folder.glob("*.html"))


def _texts(pages):
    return [p.read_text(encoding="utf-8") for p in pages]


def test_pages_from_the_store_are_the_pages_made_without_it(tmp_path, monkeypatch):
    plain = _report(tmp_path / "plain")
    webfont.embed_cjk_font(plain, FONT)
    store = tmp_path / "fonts"
    first = _report(tmp_path / "first")
    webfont.embed_cjk_font(first, FONT, store=store)
    assert _texts(first) == _texts(plain)
    assert len(list(store.glob("*.woff"))) == 3  # the union, then a.html's and b.html's own

    def no_subset(*args, **kwargs):
        raise AssertionError("a stored subset was made again")

    monkeypatch.setattr(webfont, "subset", no_subset)
    again = _report(tmp_path / "again")
    webfont.embed_cjk_font(again, FONT, store=store)
    assert _texts(again) == _texts(plain)


def test_other_characters_are_another_entry(tmp_path):
    store = tmp_path / "fonts"
    pages = _report(tmp_path / "one")
    webfont.embed_cjk_font(pages, FONT, store=store)
    before = set(store.glob("*.woff"))
    pages[0].write_text("<html><body><p>得分问题</p></body></html>", encoding="utf-8")
    webfont.embed_cjk_font(pages, FONT, store=store)
    assert set(store.glob("*.woff")) > before
    assert set("得分问题") <= set(webfont.cjk_characters(pages[0].read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],  # truncated
        lambda raw: raw[:40] + bytes([raw[40] ^ 0xFF]) + raw[41:],  # a byte changed
        lambda raw: b"",  # empty
        lambda raw: webfont.subset(FONT[0], "别的", FONT[1]),  # another font's bytes, no digest
    ],
)
def test_a_damaged_or_foreign_entry_is_made_again_and_replaced(tmp_path, damage):
    plain = _report(tmp_path / "plain")
    webfont.embed_cjk_font(plain, FONT)
    store = tmp_path / "fonts"
    webfont.embed_cjk_font(_report(tmp_path / "first"), FONT, store=store)
    for entry in store.glob("*.woff"):
        entry.write_bytes(damage(entry.read_bytes()))
    again = _report(tmp_path / "again")
    webfont.embed_cjk_font(again, FONT, store=store)
    assert _texts(again) == _texts(plain)
    # the entries were written again, sound: a third run reads them
    assert all(font_store._read(e) is not None for e in store.glob("*.woff"))


def test_the_key_covers_font_face_characters_and_hints(tmp_path):
    key = font_store.font_key(FONT[0], FONT[1], "得分", True)
    assert key == font_store.font_key(FONT[0], FONT[1], "得分", True)
    other_font = tmp_path / "font.otf"
    other_font.write_bytes(b"not the bundled font")
    assert (
        len(
            {
                key,
                font_store.font_key(FONT[0], FONT[1] + 1, "得分", True),
                font_store.font_key(FONT[0], FONT[1], "得分问", True),
                font_store.font_key(FONT[0], FONT[1], "得分", False),
                font_store.font_key(other_font, FONT[1], "得分", True),
                font_store.font_key(b"bytes", FONT[1], "得分", True),
            }
        )
        == 6
    )


def test_the_key_covers_the_zlib_the_woff_is_compressed_with(monkeypatch):
    # a WOFF's tables are zlib-compressed: another zlib may give other bytes for the same subset
    import zlib

    key = font_store.font_key(b"bytes", 0, "得分", True)
    monkeypatch.setattr(zlib, "ZLIB_RUNTIME_VERSION", zlib.ZLIB_RUNTIME_VERSION + ".other")
    assert font_store.font_key(b"bytes", 0, "得分", True) != key


def test_the_store_keeps_the_most_recent_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(font_store, "KEEP", 2)
    for i in range(4):
        font_store.cached_subset(tmp_path, f"k{i}", lambda i=i: bytes([i]) * 10)
    assert sorted(p.stem for p in tmp_path.glob("*.woff")) == ["k2", "k3"]
    assert font_store.cached_subset(tmp_path, "k3", lambda: b"made") == bytes([3]) * 10
    assert not list(tmp_path.glob("*.tmp"))


def test_a_killed_writer_s_old_temporary_files_are_removed(tmp_path):
    # a writer killed between its temporary file and the rename leaves the file: removed once it
    # is older than any write in progress could be; a recent one (a writer at work) is left
    stale, recent = tmp_path / ".font-dead.tmp", tmp_path / ".font-busy.tmp"
    for p in (stale, recent):
        p.write_bytes(b"partial")
    old = time.time() - 2 * font_store.STALE_TMP_S
    os.utime(stale, (old, old))
    font_store.cached_subset(tmp_path, "k", lambda: b"made")
    assert not stale.exists() and recent.exists()
