"""Region-aware retrieval (`region_filter: question`): which region a question names, that
region's knowledge base, and its effect on R@1 and near-duplicate confusion on the demo."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.sections import BuiltinSystem, JudgeParams, QuestionParams
from cube.diagnose.near_duplicates import near_duplicate_confusion
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.systems import make_system
from cube.systems.region_filter import RegionFilter
from tests import ROOT


def _params(lang: str = "zh") -> Params:
    return Params(
        run="t",
        lang=lang,
        questions=QuestionParams(seed=7),
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))],
    )


def _corpus(rows: list[tuple[str, str, str]], parent: bool = True) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["doc_id", "region", "parent_region"])
    df["item_name"] = "残疾人证换领"
    df["text"] = "事项名称：残疾人证换领\n行政区划：" + df["region"]
    return df if parent else df.drop(columns="parent_region")


def test_longest_region_named_wins_and_enclosing_levels_are_included():
    rf = RegionFilter(
        _corpus(
            [
                ("a", "明川省", ""),
                ("b", "明川省青石市", ""),
                ("c", "明川省青石市东区", ""),
                ("d", "明川省白沙市", ""),
            ],
            parent=False,
        )
    )
    assert rf.named_region("明川省青石市东区的残疾人证换领要什么材料？") == "明川省青石市东区"
    assert rf.named_region("明川省的残疾人证换领") == "明川省"
    assert rf.named_region("残疾人证换领要什么材料？") is None
    assert rf.mask("明川省青石市东区").tolist() == [
        True,
        True,
        True,
        False,
    ]  # own + enclosing levels
    assert rf.mask("明川省").tolist() == [True, False, False, False]
    plan = rf.plan(["明川省白沙市的残疾人证换领", "残疾人证换领", "明川省青石市东区的换领"])
    assert plan.named == ["明川省白沙市", None, "明川省青石市东区"]
    assert (plan.filtered, plan.unfiltered) == (2, 1)
    assert set(plan.masks) == {"明川省白沙市", "明川省青石市东区"}


def test_parent_region_column_gives_containment_both_ways():
    # A real export: district names without their city (区划名称 绿园区, 上级区划名称 长春市).
    rf = RegionFilter(
        _corpus(
            [
                ("a", "长春市", "吉林省"),
                ("b", "绿园区", "长春市"),
                ("c", "朝阳区", "长春市"),
                ("d", "南关区", "长春市"),
                ("e", "龙潭区", "吉林市"),
            ]
        )
    )
    # A district's knowledge base: its own items and its city's (the parent chain), not its
    # siblings'.
    assert rf.mask("绿园区").tolist() == [True, True, False, False, False]
    # Naming the city reaches the city's items and those of every district whose parent it is.
    assert rf.named_region("长春市的残疾人证换领") == "长春市"
    assert rf.mask("长春市").tolist() == [True, True, True, True, False]
    # A parent region that is no item's own region is still a region a question can name.
    assert rf.named_region("我在吉林市，想换残疾人证") == "吉林市"
    assert rf.mask("吉林市").tolist() == [False, False, False, False, True]
    assert rf.named_region("吉林省的残疾人证换领") == "吉林省"


def test_one_character_and_missing_regions_are_ignored():
    rf = RegionFilter(
        _corpus([("a", "东", ""), ("b", "", "暂无"), ("c", "西区", "N/A"), ("d", None, "无情形")])
    )
    assert rf.vocabulary == ("西区",)
    assert rf.named_region("暂无西区的证") == "西区"
    assert rf.named_region("东西区的证") == "西区"


def test_filter_searches_only_the_named_regions_knowledge_base():
    corpus = generate_demo_corpus(300, "zh")
    questions = build_questions(_params(), corpus)
    system = make_system(BuiltinSystem(name="rf", region_filter="question"), _params(), None)
    retrieved = system.retrieve(questions, corpus)
    rf = RegionFilter(corpus)
    region_of = corpus.set_index("doc_id")["region"]
    named = [rf.named_region(q) for q in questions["question"]]
    assert system.region_counts == {
        "filtered": sum(r is not None for r in named),
        "unfiltered": sum(r is None for r in named),
    }
    assert 0 < system.region_counts["filtered"] < len(questions)
    for region, docs in zip(named, retrieved, strict=True):
        if region is not None:
            allowed = set(corpus.loc[rf.mask(region), "region"])
            assert {region_of[d] for d in docs} <= allowed
    # `region` (one knowledge base per system) and `region_filter` combine: both restrictions hold.
    both = make_system(
        BuiltinSystem(name="qs", region="明川省青石市", region_filter="question"), _params(), None
    )
    for docs in both.retrieve(questions, corpus):
        assert {region_of[d] for d in docs} <= {"明川省", "明川省青石市"}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_filter_keeps_r_at_1_and_lowers_cross_region_confusion(lang):
    corpus = generate_demo_corpus(300, lang)
    questions = build_questions(_params(lang), corpus)
    rf = RegionFilter(corpus)
    names_region = np.array([rf.named_region(q) is not None for q in questions["question"]])
    out = {}
    for mode in ("none", "question"):
        ans = make_system(BuiltinSystem(name=mode, region_filter=mode), _params(lang), None).answer(
            questions, corpus, progress=False
        )
        out[mode] = (
            ans,
            near_duplicate_confusion(ans, corpus),
            near_duplicate_confusion(ans[names_region], corpus),
        )
    r1 = {m: (a["rank"] == 1).mean() for m, (a, _, _) in out.items()}
    # Measured (300 items, seed 7, zh): R@1 0.530 -> 0.550; confusion 0.203 -> 0.193 (region 22 ->
    # 15 of 300).
    assert r1["question"] >= r1["none"]
    assert out["question"][1]["region"] < out["none"][1]["region"]
    assert out["question"][1]["rate"] <= out["none"][1]["rate"]
    # Questions that name their region never land in another region's copy of the service.
    assert out["none"][2]["region"] > 0 and out["question"][2]["region"] == 0


def test_docs_examples_of_region_filter_and_llm_questions_are_valid_params():
    import re

    import yaml

    from cube.config.params import parse_params

    root = ROOT
    page = root / "docs" / "tutorials" / "own-knowledge-base.md"
    text = page.read_text(encoding="utf-8")
    start = text.index("## Per-region retrieval")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else len(text)]
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    base = yaml.safe_load((root / "params" / "default.yaml").read_text(encoding="utf-8"))
    systems, questions = (parse_params({**base, **b}, str(page.name)) for b in blocks)
    assert [s.region_filter for s in systems.systems] == ["question", "none"]
    assert (
        questions.questions.generator == "llm" and questions.model(questions.questions.model).model
    )
