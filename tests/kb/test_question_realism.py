"""Template questions a citizen would ask (issue 23): no nested brackets, no 的的, colloquial
without aliases."""

from __future__ import annotations

import re

import pytest

from cube.config.params import parse_params
from cube.config.phrasing import clean
from cube.kb.corpus import load_corpus_file
from cube.kb.example import write_example_kb
from cube.kb.naming import flatten_brackets, keyword_form, qualifier_of, tidy_question
from cube.kb.questions import build_questions
from tests.kb.test_export_shape import GROUP, OWN_KB

NESTED = re.compile(r"[（(][^（()）]*[（(]")


def test_flatten_brackets_says_nested_qualifiers_at_one_level():
    assert (
        flatten_brackets("残疾人证换领（残损换新（户籍地））") == "残疾人证换领（残损换新、户籍地）"
    )
    assert (
        flatten_brackets("残疾人证换领（残疾类别（等级）未发生变化、档案齐全（居住地申请））")
        == "残疾人证换领（残疾类别、等级未发生变化、档案齐全、居住地申请）"
    )
    assert (
        flatten_brackets("食品经营许可（新办）") == "食品经营许可（新办）"
    )  # one level: unchanged
    assert qualifier_of("残疾人证换领（残损换新（户籍地））") == "残损换新、户籍地"
    assert qualifier_of("最低生活保障审核确认", "本人申请") == "本人申请"


def test_keyword_forms_and_tidy_questions():
    assert keyword_form("机动车驾驶证补领") == "补办机动车驾驶证"
    assert keyword_form("最低生活保障审核确认") == "申请最低生活保障"
    assert keyword_form("城乡居民基本医疗保险参保登记") == "参加城乡居民基本医疗保险"
    assert keyword_form("个体工商户注销登记") == "注销个体工商户"
    assert (
        keyword_form("政务服务中心") == "" and keyword_form("登记") == ""
    )  # no verb, or nothing besides it
    assert tidy_question("九台区的的残疾人证，，要带什么？？") == "九台区的残疾人证，要带什么？"


@pytest.fixture(scope="module")
def example_questions(tmp_path_factory):
    path = write_example_kb(tmp_path_factory.mktemp("kb") / "guides.csv")
    corpus = load_corpus_file(path, columns=OWN_KB, group_by=GROUP)
    params = parse_params(
        {
            "run": "q",
            "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
            "questions": {"generator": "template", "seed": 7, "per_doc": 3},
        }
    )
    return corpus, build_questions(params, corpus)


def test_example_questions_have_no_nested_brackets_nor_de_de(example_questions):
    corpus, q = example_questions
    assert corpus["item_name"].str.contains(NESTED).any()  # the names do have them
    assert not q["question"].str.contains(NESTED).any()
    assert not q["question"].str.contains("的的").any()


def test_example_questions_are_colloquial_without_an_aliases_column(example_questions):
    corpus, q = example_questions
    assert corpus["aliases"].eq("").all()
    colloquial = q[q["style"] == "colloquial"]
    assert (
        len(colloquial) > len(q) / 4
    )  # the default styles ask 45 % colloquial; names without a verb fall back
    names = dict(zip(corpus["doc_id"], corpus["item_name"].map(clean), strict=True))
    quoted = [
        names[d]
        for d, t in zip(colloquial["doc_id"], colloquial["question"], strict=True)
        if names[d] in t
    ]
    assert all(
        n.endswith("许可") for n in quoted
    )  # "办食品经营许可证": a permit is asked for by its name
    assert colloquial["question"].str.contains("补办机动车驾驶证|申请最低生活保障|换残疾人证").any()
