"""Retrieved passages mapped to corpus documents: containment, the fuzzy match, ties, counts."""

from __future__ import annotations

import pandas as pd
import pytest

from cube.config.schema import SchemaError
from cube.kb.demo import generate_demo_corpus
from cube.systems.passages import (
    FUZZY_THRESHOLD,
    PassageIndex,
    fuzzy_score,
    map_passages,
    normalise,
)


@pytest.fixture(scope="module")
def corpus() -> pd.DataFrame:
    return generate_demo_corpus(40, "zh", family_share=0.5, seed=3)


def _line(corpus: pd.DataFrame, doc: int, label: str) -> str:
    return next(ln for ln in corpus["text"][doc].splitlines() if ln.startswith(label))


def _family(corpus: pd.DataFrame) -> pd.DataFrame:
    """The documents of the first near-duplicate family (same region, variants of one item)."""
    fam = corpus["family_id"][corpus["family_id"] != ""].iloc[0]
    return corpus[corpus["family_id"] == fam]


def test_normalise_ignores_whitespace_width_and_case():
    assert (
        normalise("受理条件： 材料\n齐全 ") == normalise("受理条件:材料齐全") == "受理条件:材料齐全"
    )
    assert normalise("Item  Name:\nPermit") == "itemname:permit"
    assert normalise(None) == "" and normalise(float("nan")) == ""


def test_exact_passages_map_in_rank_order_and_repeats_collapse(corpus):
    text = corpus["text"]
    # The publication line carries the doc id, so each of these chunks is in one document only.
    chunk = {i: _line(corpus, i, "发布地址") + "\n" + _line(corpus, i, "事项名称") for i in (4, 9)}
    rewrapped = chunk[9].replace("\n", "  ").replace("：", ":")  # re-wrapped, half-width colon
    ids, unmatched = map_passages(
        [[chunk[9], chunk[4], rewrapped, text[4][:200]], [], [chunk[4]]], corpus
    )
    d4, d9 = corpus["doc_id"][4], corpus["doc_id"][9]
    assert ids == [[d9, d4], [], [d4]] and unmatched == 0


def test_a_shared_passage_is_unmatched_unless_the_question_names_its_document(corpus):
    fam = _family(corpus)
    first, second = fam.index[0], fam.index[1]
    shared = _line(corpus, first, "办理地点")  # the same window in every variant of the family
    assert all(shared in t for t in fam["text"])
    own = _line(corpus, second, "发布地址")
    ids, unmatched = map_passages([[shared], [shared, own], [own, shared]], corpus)
    d2 = corpus["doc_id"][second]
    # alone: ambiguous, a miss at its rank; beside an unambiguous chunk of one of its documents:
    # that one, at the shared chunk's own rank (which is the first listing either way)
    assert ids == [["unmapped:passage1"], [d2], [d2]] and unmatched == 1


def test_perturbed_passages_map_to_their_document_not_to_a_sibling(corpus):
    fam = _family(corpus)
    target = fam.index[1]
    text = corpus["text"][target]
    start = text.index("事项名称")
    chunk = text[start : start + 160]
    typo = chunk[:30] + "某" + chunk[31:60] + "X" + chunk[61:-3]  # two characters changed, cut
    assert not any(normalise(typo) in normalise(t) for t in corpus["text"])
    assert fuzzy_score(normalise(typo), normalise(text)) >= FUZZY_THRESHOLD
    ids, unmatched = map_passages([[typo]], corpus)
    assert ids == [[corpus["doc_id"][target]]] and unmatched == 0


def test_text_not_in_the_corpus_and_empty_passages_stay_unmatched(corpus):
    foreign = (
        "The quick brown fox jumps over the lazy dog while the committee reviews the permit "
        "for a bakery in a city that is not part of this knowledge base."
    )
    ids, unmatched = map_passages([[foreign, "", "   "], ["天气晴朗，适合出游。"]], corpus)
    assert ids == [
        ["unmapped:passage1", "unmapped:passage2", "unmapped:passage3"],
        ["unmapped:passage1"],
    ]
    assert unmatched == 4


def test_an_unmatched_passage_keeps_its_rank_so_the_gold_document_does_not_move_up(corpus):
    foreign = "A paragraph about the weather in a town this knowledge base never mentions at all."
    own = _line(corpus, 4, "发布地址") + "\n" + _line(corpus, 4, "事项名称")
    ids, unmatched = map_passages([[foreign, own]], corpus)
    assert ids == [["unmapped:passage1", corpus["doc_id"][4]]] and unmatched == 1


def test_fuzzy_score_of_a_long_passage_finds_its_place():
    doc = normalise("".join(f"第{i}条：申请人提交材料{i}份，窗口{i}号受理。" for i in range(60)))
    passage = doc[300:900]
    assert fuzzy_score(passage, doc) == 100.0
    edited = passage[:100] + "某某" + passage[102:500] + passage[503:]
    assert 95.0 <= fuzzy_score(edited, doc) < 100.0
    assert fuzzy_score(normalise("完全无关的一段文字" * 20), doc) < 60.0


def test_index_candidates_and_missing_columns(corpus):
    index = PassageIndex(corpus["doc_id"], corpus["text"])
    assert index.match(corpus["text"][7]) == [7]  # a whole document
    assert index.match("") == [] and len(index.match("办理")) == len(corpus)  # too short to index
    with pytest.raises(SchemaError, match=r"corpus: missing column\(s\) \['text'\]"):
        map_passages([["x"]], corpus[["doc_id"]])


def test_markdown_and_ellipses_are_no_obstacle(corpus):
    text = corpus["text"][5]
    lines = text.splitlines()[2:6]  # label lines: 事项名称, 实施主体, ...
    shown = "\n".join(f"- **{ln.replace('：', '**：', 1)}" for ln in lines)[:-2] + "…"
    assert shown.startswith("- **事项名称**：") and normalise(shown) in normalise(text)
    ids, unmatched = map_passages([[shown]], corpus)
    assert ids == [[corpus["doc_id"][5]]] and unmatched == 0


def test_a_fuzzy_tie_among_more_documents_than_the_candidates_resolves_to_a_listed_one():
    # twelve documents hold the same long section; each has its own first line
    section = "".join(
        f"第{i}步：申请人提交材料并等待窗口审核，审核通过后领取结果。" for i in range(8)
    )
    corpus = pd.DataFrame(
        {
            "doc_id": [f"D{i:02d}" for i in range(12)],
            "text": [f"事项名称：事项{i}号专用标题{i * 7919}\n{section}" for i in range(12)],
        }
    )
    edited = section[:50] + "某" + section[51:200]  # in no document: a fuzzy tie among all twelve
    index = PassageIndex(corpus["doc_id"], corpus["text"])
    docs, score = index.match_scored(edited)
    assert len(docs) > 1 and 11 not in docs and FUZZY_THRESHOLD <= score < 100
    own = corpus["text"][11].splitlines()[0]  # the eleventh document's own line
    assert index.resolve([edited, own]) == [11, 11]  # D11 need not be among the candidates
    assert index.resolve([edited]) == [None]
    ids, unmatched = map_passages([[edited, own], [edited]], corpus)
    assert ids == [["D11"], ["unmapped:passage1"]] and unmatched == 1
