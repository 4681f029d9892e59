"""Issue 41 item 3: `segment` reads jieba's split by position and equals its old definition.

The old loop matched every block of `re_han_default.split` again and dropped whitespace character
by character; the new one takes runs at odd indices and strips the others with `str.split`. Both
must give the same words on Chinese, English and mixed text, empty text, repeated text and text
holding whitespace of every kind and zero-width or other format characters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cube.kb.text import _segment_blocks, jieba_module, segment

CASES = [
    "",
    "   \n\t ",
    "办理居民身份证需要携带户口簿，收费标准为每证20元。",
    "The fee is 30 euros; opening hours 9:00-17:00 (Mon.-Fri.).",
    "关于“高级中学教师资格认定”，根据办事指南：\n1. 申请表（原件及复印件各1份）\n2. 学历证书",
    "s\u200bc\u200bo\u200br\u200be 10/10 \u00ad\u2060\ufeff 评分：满分",
    "\u3000全角空格\u3000和\u00a0不换行空格\x1c分隔符\u2028行分隔",
    "a",
    "，",
    "repeat 重复 repeat 重复 repeat 重复",
]


def _old(text: str, hmm: bool) -> tuple[str, ...]:
    return _segment_blocks(jieba_module().re_han_default.split(text), hmm)


def test_segment_equals_the_block_loop_on_chosen_texts():
    assert jieba_module().re_han_default.groups == 1  # the path under test
    for hmm in (True, False):
        for text in CASES:
            assert segment(text, hmm) == _old(text, hmm), text
    assert segment("你好 世界") == ("你好", "世界")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="办理证件费用元 \t\n\u3000\u200b\u00a0,.，。：-%#&+abcXYZ019", max_size=40))
def test_segment_equals_the_block_loop_on_drawn_texts(text):
    segment.cache_clear()
    assert segment(text) == _old(text, True)
