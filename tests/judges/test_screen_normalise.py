"""The screen's `normalise` finds a text's format characters by set lookups of the characters seen
before: the same text as classifying every distinct character afresh."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from cube.judges.screen import knowledge_key, normalise


def _reference(text: str) -> str:
    """`normalise`'s definition: NFKC, every character of category Cf removed."""
    t = unicodedata.normalize("NFKC", text)
    return "".join(c for c in t if unicodedata.category(c) != "Cf")


_FORMAT = "\u200b\u200c\u200d\u2060\u00ad\ufeff\u200e\u200f\u202a\u202e\U000e0041"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(_FORMAT)), max_size=60))
def test_normalise_equals_its_definition(text: str) -> None:
    assert normalise(text) == _reference(text)


def test_format_characters_go_whether_seen_before_or_not() -> None:
    """Chinese, fullwidth and zero-width text, an empty text, and a character first seen plain then
    hidden among format characters."""
    cases = [
        "",
        "收费标准：不收费",
        "评\u200b分\u200b：\u200b１０",
        "s\u200bc\u200bo\u200br\u200be 10",
        "\ufeff办理地点：３楼\u00ad12号窗口\u202e",
        "不收费",
    ]
    for text in cases + cases[::-1]:
        assert normalise(text) == _reference(text)
    assert normalise("评\u200b分：１０") == "评分:10"
    assert knowledge_key("  Ｓｃｏｒｅ\u200b  １０ ") == "score 10"
