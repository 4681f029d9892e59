"""The fast paths of issue 15 give the same numbers as the reference implementations they replace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from cube import lexical
from cube.demo_corpus import generate_demo_corpus
from cube.systems.extractive import extractive_answer

_REF = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=lexical._WhitespaceTokenizer())


def _reference_scores(hyp: str, ref: str, tokenizer: str) -> dict[str, float]:
    """The metrics as before issue 15: rouge-score for all three ROUGEs, every text segmented anew."""
    hyp_r, ref_r = lexical.words(hyp, tokenizer, "rouge"), lexical.words(ref, tokenizer, "rouge")
    hyp_b, ref_b = lexical.words(hyp, tokenizer, "bleu"), lexical.words(ref, tokenizer, "bleu")
    if not hyp_r or not ref_r or not hyp_b or not ref_b:
        return dict.fromkeys(lexical.METRICS, float("nan"))
    r = _REF.score(" ".join(ref_r), " ".join(hyp_r))
    return {"bleu": lexical._bleu(hyp_b, ref_b), **{k: float(r[k].fmeasure) for k in ("rouge1", "rouge2", "rougeL")}}


def _table() -> list[tuple[str, str]]:
    corpus = generate_demo_corpus(40, "zh", family_share=0.33, seed=3)
    texts = corpus["text"].tolist()
    pairs = []
    for i, doc in enumerate(texts):
        answer, _ = extractive_answer(f"{corpus['item_name'].iloc[i]}需要什么材料？", [doc, texts[(i + 5) % len(texts)]], "zh")
        pairs += [(answer, doc), (texts[(i + 1) % len(texts)], doc), (doc, doc), (doc[:30], doc)]
    pairs += [("完全 无关 的 文字", "另 一段 话"), ("a b a b a", "b a b"), ("，。", "文本"), ("", "文本")]
    return pairs


@pytest.mark.parametrize("tokenizer", ["jieba", "char", "zh"])
def test_lexical_scores_equal_rouge_score_on_a_table(tokenizer):
    scorer = lexical._scorer(tokenizer)
    cache: dict = {}
    for hyp, ref in _table():
        new, _ = lexical._text_scores(hyp, ref, tokenizer, scorer, cache)
        old = _reference_scores(hyp, ref, tokenizer)
        for k in lexical.METRICS:
            assert (np.isnan(new[k]) and np.isnan(old[k])) or new[k] == old[k], (k, hyp[:20], ref[:20])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abcdefg"), max_size=40), st.lists(st.sampled_from("abcdefgh"), max_size=40))
def test_rouge_l_equals_rouge_score_on_random_token_lists(target, prediction):
    expected = rouge_scorer._score_lcs(target, prediction).fmeasure
    assert lexical._rouge_l(target, prediction) == expected
