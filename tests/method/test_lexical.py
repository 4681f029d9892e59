"""BLEU/ROUGE with segmentation, their correlation with judges, and the paper's Tables 6-7."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cube.config.params import ParamsError, parse_params
from cube.judges import dimension_criteria
from cube.judges.human import table7_criteria
from cube.kb.text import segment
from cube.method import lexical
from cube.method.lexical import (
    METRICS,
    excluded_note,
    lexical_correlations,
    summary,
    table6_example,
)

# the pure module cuts no Chinese itself: the run hands it jieba's segmenter (cube.kb.text)
text_scores = partial(lexical.text_scores, segment=segment)
lexical_scores = partial(lexical.lexical_scores, segment=segment)
words = partial(lexical.words, segment=segment)

ZH_REF = "办理营业执照需要携带身份证和申请表，到市政务服务中心窗口提交。"
ZH_PART = "办理营业执照需要身份证，请到政务服务中心办理。"
ZH_OTHER = "今天天气晴朗适合出门散步"  # no character, word or punctuation in common
EN_REF = "Bring your identity card and the application form to the city service center."
EN_PART = "Bring the application form to the service center before noon."
EN_OTHER = "Weather today is sunny with light wind"


def _f1(hyp: list[str], ref: list[str]) -> float:
    overlap = sum((Counter(hyp) & Counter(ref)).values())
    p, r = overlap / len(hyp), overlap / len(ref)
    return 2 * p * r / (p + r) if overlap else 0.0


@pytest.mark.parametrize(
    ("tokenizer", "ref", "part", "other"),
    [
        ("jieba", ZH_REF, ZH_PART, ZH_OTHER),
        ("zh", ZH_REF, ZH_PART, ZH_OTHER),
        ("char", ZH_REF, ZH_PART, ZH_OTHER),
        ("13a", EN_REF, EN_PART, EN_OTHER),
    ],
    ids=["jieba", "zh", "char", "13a"],
)
def test_identical_disjoint_partial(tokenizer, ref, part, other):
    same = text_scores(ref, ref, tokenizer)
    assert same == pytest.approx(dict.fromkeys(("bleu", "rouge1", "rouge2", "rougeL"), 1.0))
    assert text_scores(other, ref, tokenizer) == pytest.approx(dict.fromkeys(same, 0.0))
    partial = text_scores(part, ref, tokenizer)
    assert all(0 < v < 1 for v in partial.values())


def test_partial_rouge1_matches_token_overlap():
    # char tokens: ROUGE-1 F is the F1 of the character multiset overlap, punctuation left out
    chars = lambda s: [c for c in s if not c.isspace() and c not in "，。"]  # noqa: E731
    assert text_scores(ZH_PART, ZH_REF, "char")["rouge1"] == pytest.approx(
        _f1(chars(ZH_PART), chars(ZH_REF))
    )
    # 13a: lower-case words without the full stop
    words = lambda s: s.lower().replace(".", "").split()  # noqa: E731
    assert text_scores(EN_PART, EN_REF, "13a")["rouge1"] == pytest.approx(
        _f1(words(EN_PART), words(EN_REF))
    )
    with pytest.raises(ValueError, match="tokenizer"):
        text_scores("a", "a", "whitespace")


@pytest.fixture
def data() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    corpus = pd.DataFrame(
        {"doc_id": ["d0", "d1", "d2"], "text": [ZH_REF, ZH_REF + "收费标准：不收费。", ZH_OTHER]}
    )
    questions = pd.DataFrame(
        {
            "question_id": ["q0", "q1", "q2"],
            "doc_id": ["d0", "d1", "d2"],
            "reference_answer": [ZH_PART, ZH_PART, ""],
        }
    )
    answers = pd.DataFrame(
        {
            "question_id": ["q0", "q1", "q2", "q0"],
            "doc_id": ["d0", "d1", "d2", "d0"],
            "system": "bm25",
            "set": ["rag", "rag", "rag", "zero"],
            "answer": [ZH_REF, ZH_PART, ZH_PART, None],
        }
    )
    return answers, questions, corpus


def test_lexical_scores_table(data):
    answers, questions, corpus = data
    out = lexical_scores(answers, corpus)
    assert list(out.columns) == [
        "question_id",
        "system",
        "set",
        "bleu",
        "rouge1",
        "rouge2",
        "rougeL",
        "tokenizer",
        "excluded",
    ]
    assert (out["tokenizer"] == "jieba").all()
    assert out.loc[0, "bleu"] == pytest.approx(1.0)  # identical Chinese text scores 1, not 0
    assert out.loc[1, "rouge1"] == pytest.approx(
        text_scores(ZH_PART, ZH_REF + "收费标准：不收费。")["rouge1"]
    )
    assert out.iloc[3][["bleu", "rouge1"]].isna().all()  # no answer: unscored, not zero
    assert list(out["excluded"]) == ["", "", "", "missing answer"]
    by_ref = lexical_scores(
        answers, corpus, reference="reference_answer", questions=questions, tokenizer="char"
    )
    assert by_ref.loc[1, "rougeL"] == pytest.approx(1.0) and (by_ref["tokenizer"] == "char").all()
    assert (
        by_ref.loc[2, "excluded"] == "empty reference"
        and by_ref.iloc[2][list(METRICS)].isna().all()
    )
    with pytest.raises(ValueError, match="pass `questions`"):
        lexical_scores(answers, corpus, reference="reference_answer")
    with pytest.raises(ValueError, match="d2"):
        lexical_scores(answers, corpus[corpus["doc_id"] != "d2"])


def _scores(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["question_id", "system", "set", "judge", "dimension", "score", "detail"]
    )


def test_correlations_and_tables_6_7():
    lexical = pd.DataFrame(
        {
            "question_id": ["q0", "q1", "q2", "q3"],
            "system": "bm25",
            "set": "rag",
            "bleu": [0.1, 0.2, 0.3, 0.0711],
            "rouge1": [0.5, 0.4, 0.3, 0.2],
            "rouge2": [0.1, 0.1, 0.1, 0.1],
            "rougeL": [0.3, 0.2, 0.25, 0.2025],
            "tokenizer": "jieba",
        }
    )
    detail = json.dumps({"criteria": {"c1": 1, "c2": 2, "c3": 1, "c4": 1, "c5": 2}})
    rows = [
        (f"q{i}", "bm25", "rag", "gpt-4o", "completeness", s, "")
        for i, s in enumerate([2, 4, 6, 8])
    ]
    rows += [
        (f"q{i}", "bm25", "rag", "human:a", "completeness", s, detail)
        for i, s in enumerate([1, 2, 3, 7])
    ]
    rows += [
        ("q3", "bm25", "rag", "qwen", "completeness", 8.0, ""),
        ("q3", "bm25", "rag", "qwen", "quality", 3.0, ""),
    ]
    scores = _scores(rows)
    corr = lexical_correlations(lexical, scores, dimensions=["completeness"])
    assert set(corr["set"]) == {"rag"}
    corr = corr.set_index(["metric", "judge"])
    assert corr.loc[("rouge1", "gpt-4o"), "spearman"] == pytest.approx(-1.0)
    x, y = np.array([0.1, 0.2, 0.3, 0.0711]), np.array([2, 4, 6, 8.0])
    assert corr.loc[("bleu", "gpt-4o"), "pearson"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert corr.loc[("bleu", "human"), "n"] == 4  # the consensus of the raters is added
    assert np.isnan(corr.loc[("rouge2", "gpt-4o"), "pearson"])  # constant metric
    assert np.isnan(corr.loc[("bleu", "qwen"), "pearson"]) and corr.loc[("bleu", "qwen"), "n"] == 1

    t6 = table6_example(lexical, scores, "q3", "bm25", "rag")
    assert list(t6["name"]) == ["human", "gpt-4o", "qwen", "BLEU", "ROUGE-1", "ROUGE-2", "ROUGE-L"]
    assert list(t6["value"]) == pytest.approx([7, 8, 8, 0.0711, 0.2, 0.1, 0.2025])

    t7 = table7_criteria(scores, "q3", "bm25", "rag", lang="en")
    assert list(t7["wording"][:5]) == dimension_criteria("completeness", "en")
    assert list(t7["points"]) == [1, 2, 1, 1, 2, 7]  # the paper's Table 7 row
    with pytest.raises(KeyError, match="q9"):
        table7_criteria(scores, "q9", "bm25", "rag")


def test_reading_states_the_numbers_and_the_offline_caveat():
    from cube.method.lexical import reading

    corr = pd.DataFrame(
        {
            "metric": ["bleu", "rougeL", "bleu", "rougeL"],
            "judge": ["a", "a", "r", "r"],
            "dimension": ["completeness"] * 4,
            "n": [10] * 4,
            "pearson": [0.1, 0.3, 0.2, 0.5],
            "spearman": [0.1, 0.3, 0.3, 0.5],
        }
    )
    text = reading(corr, offline_judges=["r"])
    assert "BLEU 0.20" in text and "ROUGE-L 0.40" in text and "highest ROUGE-L" in text
    assert "r are offline rubric judges" in text
    assert "Caution" not in reading(corr, offline_judges=[])


# two sentences with the same layout ("X：…，Y：…。") and no word in common
ZH_FORM_A = "地址：北京市朝阳区，电话：一二三。"
ZH_FORM_B = "时间：每周一上午，费用：免费。"


def test_sentences_sharing_only_punctuation_do_not_overlap():
    # before: jieba ROUGE-1 0.44 and ROUGE-L 0.44 from "：", "，", "：", "。" alone
    assert text_scores(ZH_FORM_A, ZH_FORM_B, "jieba") == pytest.approx(dict.fromkeys(METRICS, 0.0))
    assert words(ZH_FORM_A) == ["地址", "北京市", "朝阳区", "电话", "一二三"]


def test_width_case_and_punctuation_do_not_change_the_words():
    assert words("ＨＥＬＬＯ，World！State-of-the-art 100%", "13a") == [
        "hello",
        "world",
        "state",
        "of",
        "the",
        "art",
        "100",
    ]
    assert text_scores("ＨＥＬＬＯ，World！", "hello world", "13a") == pytest.approx(
        dict.fromkeys(METRICS, 1.0)
    )
    assert text_scores("营业执照（新版）。", "营业执照 新版", "char") == pytest.approx(
        dict.fromkeys(METRICS, 1.0)
    )
    assert words("Ｑ１：办理？", "zh", "bleu") == ["q1", "办", "理"]


@pytest.mark.parametrize("tokenizer", ["jieba", "zh", "char", "13a"])
def test_empty_or_punctuation_only_text_is_nan_and_counted(tokenizer):
    for hyp, ref in (("", EN_REF), ("。，！", ZH_REF), (EN_REF, "  "), (ZH_REF, "……")):
        assert all(np.isnan(v) for v in text_scores(hyp, ref, tokenizer).values())
    answers = pd.DataFrame(
        {
            "question_id": ["q0", "q1", "q2"],
            "doc_id": ["d0", "d0", "d1"],
            "system": "s",
            "set": "rag",
            "answer": ["", "。", ZH_PART],
        }
    )
    corpus = pd.DataFrame({"doc_id": ["d0", "d1"], "text": [ZH_REF, "——"]})
    out = lexical_scores(answers, corpus, tokenizer=tokenizer)
    assert list(out["excluded"]) == ["empty answer", "empty answer", "empty reference"]
    assert summary(out)["excluded"].tolist() == [3] and summary(out)["answers"].tolist() == [3]
    assert excluded_note(out).startswith(
        "3 of 3 answers have no BLEU/ROUGE"
    ) and "2 empty answer" in excluded_note(out)


_WORD = st.text(alphabet="abcdefghij", min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_WORD, min_size=1, max_size=12),
    st.lists(_WORD, min_size=1, max_size=12),
    st.lists(
        st.sampled_from(["，", "。", "：", ",", ".", "!", "%", "“", "”", "、"]),
        min_size=12,
        max_size=12,
    ),
)
def test_punctuation_and_case_never_change_the_scores(hyp, ref, marks):
    decorated = " ".join(
        f"{w.upper() if i % 2 else w}{m}" for i, (w, m) in enumerate(zip(hyp, marks, strict=False))
    )
    for tokenizer in ("13a", "jieba"):
        assert text_scores(decorated, " ".join(ref), tokenizer) == pytest.approx(
            text_scores(" ".join(hyp), " ".join(ref), tokenizer)
        )


def test_a_tokenizer_that_cannot_segment_the_language_is_refused():
    judges = [{"name": "r", "model": {"provider": "offline", "model": "rubric-lenient"}}]
    with pytest.raises(
        ParamsError, match=r"lexical.tokenizer: '13a' cannot be used with lang: 'zh'"
    ):
        parse_params({"run": "x", "judges": judges, "lexical": {"tokenizer": "13a"}})
    assert parse_params(
        {"run": "x", "lang": "en", "judges": judges, "lexical": {"tokenizer": "13a"}}
    )
    answers = pd.DataFrame(
        {"question_id": ["q0"], "doc_id": ["d0"], "system": "s", "set": "rag", "answer": [ZH_REF]}
    )
    with pytest.raises(ValueError, match="lexical.tokenizer.*lang: 'zh'"):
        lexical_scores(
            answers, pd.DataFrame({"doc_id": ["d0"], "text": [ZH_REF]}), tokenizer="13a", lang="zh"
        )


def test_correlations_are_per_set_unless_pooling_is_asked():
    # within each set the judge's score is unrelated to the overlap; the sets differ on both
    rng = np.random.default_rng(3)
    lex_rows, score_rows = [], []
    for s, (overlap, score) in {"zero": (0.1, 2.0), "rag": (0.4, 5.0), "full": (0.8, 9.0)}.items():
        for q in range(25):
            value = overlap + rng.uniform(-0.05, 0.05)
            lex_rows.append(
                {
                    "question_id": f"q{q}",
                    "system": "s",
                    "set": s,
                    "bleu": value,
                    "rouge1": value,
                    "rouge2": value,
                    "rougeL": value,
                    "tokenizer": "jieba",
                }
            )
            score_rows.append(
                (f"q{q}", "s", s, "judge", "completeness", score + rng.integers(-1, 2), "")
            )
    lexical, scores = pd.DataFrame(lex_rows), _scores(score_rows)
    out = lexical_correlations(lexical, scores, sets=["rag", "pooled"]).set_index(["metric", "set"])
    assert (
        out.loc[("rougeL", "pooled"), "spearman"] > 0.8 and out.loc[("rougeL", "pooled"), "n"] == 75
    )
    assert (
        abs(out.loc[("rougeL", "rag"), "spearman"]) < 0.5 and out.loc[("rougeL", "rag"), "n"] == 25
    )
    from cube.method.lexical import reading

    assert "on the rag set" in reading(lexical_correlations(lexical, scores))
    with pytest.raises(ValueError, match="sets"):
        lexical_correlations(lexical, scores, sets=["nowhere"])


def test_the_jieba_tokenizer_without_a_segmenter_is_refused_by_name():
    with pytest.raises(
        ValueError, match="tokenizer 'jieba' needs the segmenter: pass segment=cube.kb.text.segment"
    ):
        lexical.text_scores(ZH_PART, ZH_REF, "jieba")
    assert (
        lexical.text_scores(ZH_PART, ZH_REF, "char")["rouge1"] > 0
    )  # the other tokenizers need none
