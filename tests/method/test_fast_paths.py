"""The fast paths of issue 15 give the same numbers as the reference implementations they
replace."""

from __future__ import annotations

import collections
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer, tokenizers

from cube.kb.demo import generate_demo_corpus
from cube.kb.text import segment
from cube.method import agreement, agreement_fast, bootstrap, lexical
from cube.systems.extractive import extractive_answer


class _WhitespaceTokenizer(tokenizers.Tokenizer):
    """rouge-score tokenizer for text already reduced to space-separated words."""

    def tokenize(self, text: str) -> list[str]:
        return text.split()


_REF = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=_WhitespaceTokenizer())


def _reference_scores(hyp: str, ref: str, tokenizer: str) -> dict[str, float]:
    """The metrics as before issue 15: rouge-score for all three ROUGEs, every text segmented
    anew."""
    hyp_r, ref_r = (lexical.words(t, tokenizer, "rouge", segment=segment) for t in (hyp, ref))
    hyp_b, ref_b = (lexical.words(t, tokenizer, "bleu", segment=segment) for t in (hyp, ref))
    if not hyp_r or not ref_r or not hyp_b or not ref_b:
        return dict.fromkeys(lexical.METRICS, float("nan"))
    r = _REF.score(" ".join(ref_r), " ".join(hyp_r))
    return {
        "bleu": lexical._bleu(hyp_b, ref_b),
        **{k: float(r[k].fmeasure) for k in ("rouge1", "rouge2", "rougeL")},
    }


def _table() -> list[tuple[str, str]]:
    corpus = generate_demo_corpus(40, "zh", family_share=0.33, seed=3)
    texts = corpus["text"].tolist()
    pairs = []
    for i, doc in enumerate(texts):
        answer, _ = extractive_answer(
            f"{corpus['item_name'].iloc[i]}需要什么材料？", [doc, texts[(i + 5) % len(texts)]], "zh"
        )
        pairs += [(answer, doc), (texts[(i + 1) % len(texts)], doc), (doc, doc), (doc[:30], doc)]
    pairs += [
        ("完全 无关 的 文字", "另 一段 话"),
        ("a b a b a", "b a b"),
        ("，。", "文本"),
        ("", "文本"),
    ]
    return pairs


@pytest.mark.parametrize("tokenizer", ["jieba", "char", "zh"])
def test_lexical_scores_equal_rouge_score_on_a_table(tokenizer):
    cache: dict = {}
    for hyp, ref in _table():
        new, _ = lexical._text_scores(hyp, ref, lexical._words_of(tokenizer, segment), cache)
        old = _reference_scores(hyp, ref, tokenizer)
        for k in lexical.METRICS:
            assert (np.isnan(new[k]) and np.isnan(old[k])) or new[k] == old[k], (
                k,
                hyp[:20],
                ref[:20],
            )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefg"), max_size=40),
    st.lists(st.sampled_from("abcdefgh"), max_size=40),
)
def test_rouge_l_equals_rouge_score_on_random_token_lists(target, prediction):
    expected = rouge_scorer._score_lcs(target, prediction).fmeasure
    assert lexical._rouge_l(target, prediction) == expected
    assert lexical._rouge_l(target, prediction, lexical._token_ids(target)) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=40),
    st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=40),
)
def test_bleu_from_shared_ngram_counts_equals_sentence_bleu(hyp, ref):
    """BLEU from the n-gram counts ROUGE shares equals `sacrebleu.sentence_bleu`: the same float."""
    cut = lexical._words_of("char", None)
    h, r = lexical._text(" ".join(hyp), cut), lexical._text(" ".join(ref), cut)
    for a, b in ((h, r), (r, r), (r, h)):
        matched = [lexical._overlap(x, y) for x, y in zip(a.bleu_grams, b.bleu_grams, strict=True)]
        assert lexical._bleu_counted(a, b, matched) == lexical._bleu(a.bleu, b.bleu)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefg"), max_size=60),
    st.lists(st.sampled_from("abcdefgh"), max_size=20),
)
def test_rouge_n_equals_score_ngrams_whichever_text_is_longer(target, prediction):
    for n in (1, 2):
        t, p = rouge_scorer._create_ngrams(target, n), rouge_scorer._create_ngrams(prediction, n)
        expected = rouge_scorer._score_ngrams(t, p).fmeasure
        matched = lexical._overlap(t, p)
        assert matched == lexical._overlap(p, t)
        n_t, n_p = sum(t.values()), sum(p.values())
        assert (n_t, n_p) == (max(len(target) - n + 1, 0), max(len(prediction) - n + 1, 0))
        # the same float, not only close, whichever text is taken as the target
        assert lexical._rouge_n(matched, n_t, n_p) == expected
        assert lexical._rouge_n(matched, n_p, n_t) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["一", "二", "ab", "c"]), max_size=30))
def test_reference_ngrams_equal_rouge_scores_own(tokens):
    cut = lexical._words_of("char", None)
    text = lexical._text(" ".join(tokens), cut)
    words = text.rouge
    assert text.rouge_grams[0] == rouge_scorer._create_ngrams(words, 1)
    assert text.rouge_grams[1] == rouge_scorer._create_ngrams(words, 2)
    # and sacrebleu's: its one Counter of 1- to 4-grams over the same tokens
    from sacrebleu.metrics.helpers import extract_all_word_ngrams

    merged = sum(text.bleu_grams, start=collections.Counter())
    assert merged == extract_all_word_ngrams(" ".join(text.bleu), 1, 4)[0]


def test_a_repeated_answer_scores_as_when_scored_alone():
    """`lexical_scores` scores an answer repeated for one reference once: each row still equals
    `text_scores` of its own pair, missing and empty answers included."""
    import pandas as pd

    docs = {"d1": "申请人需要提交身份证和申请表。", "d2": "办理时限为五个工作日。"}
    texts = ["身份证和申请表", "身份证和申请表", None, "，。", "五个工作日", "身份证和申请表"]
    keys = ["d1", "d1", "d1", "d2", "d2", "d2"]
    answers = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(6)],
            "doc_id": keys,
            "system": "s",
            "set": ["zero", "rag", "full"] * 2,
            "answer": texts,
        }
    )
    corpus = pd.DataFrame({"doc_id": list(docs), "text": list(docs.values())})
    out = lexical.lexical_scores(answers, corpus, tokenizer="jieba", segment=segment)
    for i, (text, key) in enumerate(zip(texts, keys, strict=True)):
        alone = lexical.text_scores(text, docs[key], "jieba", segment=segment)
        for m in lexical.METRICS:
            got = out.at[i, m]
            assert (np.isnan(got) and np.isnan(alone[m])) or got == alone[m], (i, m)
    assert out["excluded"].tolist() == ["", "", "missing answer", "empty answer", "", ""]


def test_clearing_the_segment_caches_empties_them():
    from cube.kb import text

    segment("身份证和申请表")
    assert text.segment.cache_info().currsize > 0
    text.clear_segment_caches()
    assert text.segment.cache_info().currsize == 0
    assert text._cut_block.cache_info().currsize == 0


# ------------------------------------------------------------------ agreement bootstrap
def _old_question_draws(question_ids, n, seed):
    qs = sorted(set(question_ids))
    rng = np.random.default_rng(seed)
    counts = np.zeros((n, len(qs)), dtype=int)
    for b in range(n if qs else 0):
        counts[b] = np.bincount(rng.integers(0, len(qs), len(qs)), minlength=len(qs))
    return {q: i for i, q in enumerate(qs)}, counts


@pytest.mark.parametrize(
    ("q", "n", "seed"), [(1, 5, 0), (37, 200, 3), (500, 20, 11), (0, 4, 1), (5, 0, 1)]
)
def test_question_draws_are_the_loops_draws(q, n, seed):
    ids = [f"q{i}" for i in range(q)]
    code, counts = agreement.question_draws(ids, n, seed)
    old_code, old_counts = _old_question_draws(ids, n, seed)
    assert code == old_code and counts.shape == old_counts.shape and (counts == old_counts).all()


def _vectors(rng, n, kind):
    if kind == "integer":
        x = rng.integers(0, 11, n).astype(float)
        y = np.clip(x + rng.integers(-3, 4, n), 0, 10).astype(float)
    elif kind == "halves":  # two samples averaged: kappa undefined whenever a .5 is drawn
        x = rng.integers(0, 21, n) / 2
        y = np.clip(x + rng.integers(-2, 3, n), 0, 10).astype(float)
        x[: n - 3] = np.round(x[: n - 3])  # few halves, so some resamples hold none
    elif kind == "narrow":  # often constant in a resample
        x = (rng.random(n) < 0.1).astype(float) + 5
        y = np.full(n, 7.0)
        y[0] = 8.0
    else:
        x = rng.integers(0, 11, n).astype(float)
        y = x.copy()
    return x, y


@pytest.mark.parametrize("kind", ["integer", "halves", "narrow", "identical"])
@pytest.mark.parametrize("n", [3, 12, 80])
def test_vectorised_agreement_bootstrap_equals_the_loop(kind, n):
    rng = np.random.default_rng(n)
    x, y = _vectors(rng, n, kind)
    counts = rng.multinomial(n, np.full(n, 1 / n), size=300)
    counts[0] = 0
    counts[0, 0] = n  # a resample of one unit repeated: everything constant
    old = agreement._bootstrap(x, y, agreement._statistics, counts, 0.95)
    tables = agreement_fast.pair_tables(x, y, counts)
    draws = agreement_fast.statistics(*tables)
    for b in range(len(counts)):
        idx = np.repeat(np.arange(n), counts[b])
        expected = agreement._statistics(x[idx], y[idx])
        for key, value in expected.items():
            got = draws[key][b]
            assert (np.isnan(value) and np.isnan(got)) or got == pytest.approx(value, abs=1e-9), (
                key,
                b,
            )
    new, _ = agreement._bootstrap_statistics(x, y, counts, 0.95)
    for key in old:
        assert np.allclose(old[key], new[key], atol=1e-9, equal_nan=True), key


def test_bincount_kappa_equals_sklearn():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(0)
    for _ in range(50):
        a = rng.integers(0, 11, 40)
        b = np.clip(a + rng.integers(-4, 5, 40), 0, 10)
        labels = list(range(min(a.min(), b.min()), max(a.max(), b.max()) + 1))
        tables, xv, yv = agreement_fast.pair_tables(
            a.astype(float), b.astype(float), np.ones((1, 40))
        )
        got = agreement_fast.statistics(tables, xv, yv)["weighted_kappa"][0]
        assert got == pytest.approx(
            cohen_kappa_score(a, b, labels=labels, weights="quadratic"), abs=1e-12
        )


# ------------------------------------------------------------------ bootstrap trimmed means
def _old_trim_mean(C, v, keep, proportion):
    ok = keep & ~np.isnan(v)
    idx = np.flatnonzero(ok)
    order = idx[np.argsort(v[idx], kind="stable")]
    return bootstrap._trim_sorted(C[:, order], v[order], proportion)


@pytest.mark.parametrize("kind", ["integers", "halves", "continuous", "empty"])
@pytest.mark.parametrize("proportion", [0.0, 0.1, 0.25])
def test_value_count_trimmed_means_equal_the_per_element_ones(kind, proportion):
    from scipy import stats

    rng = np.random.default_rng(7)
    n = 300
    v = {
        "integers": rng.integers(0, 11, n).astype(float),
        "halves": rng.integers(0, 21, n) / 2,
        "continuous": rng.random(n) * 10,
        "empty": np.full(n, np.nan),
    }[kind]
    v[rng.random(n) < 0.1] = np.nan
    keep = rng.random(n) < 0.8
    C = rng.multinomial(n, np.full(n, 1 / n), size=200).astype(float)
    C = np.vstack([np.ones((1, n)), C])
    new = bootstrap._weighted_trim_mean(C, v, keep, proportion)
    old = _old_trim_mean(C, v, keep, proportion)
    assert np.allclose(new, old, rtol=1e-12, atol=1e-12, equal_nan=True)
    sel = v[keep & ~np.isnan(v)]
    if len(sel):  # the all-ones row is scipy's trimmed mean
        assert new[0] == pytest.approx(stats.trim_mean(sel, proportion), rel=1e-12)


# ------------------------------------------------------------------ offline call ids
def test_offline_call_ids_identify_the_inputs_with_long_texts_digested():
    import cube.judges  # noqa: F401  (importing the judges registers the offline rubric judges)
    from cube.config.model_spec import ModelSpec
    from cube.llm import Request, make_model

    model = make_model(ModelSpec(provider="offline", model="rubric-strict"))
    doc = "事项名称：测试\n" + "材料" * 200
    ctx = {
        "question": "要带什么？",
        "document": doc,
        "answer": "身份证",
        "item_name": "测试",
        "lang": "zh",
        "dimension": "completeness",
    }
    a = model._call_id(Request((), ctx, "v1", 0))
    assert a == model._call_id(
        Request((), {**ctx, "document": "".join(list(doc))}, "v1", 0)
    )  # equal text, new object
    for changed in ({"document": doc + "。"}, {"answer": "户口本"}, {"dimension": "quality"}):
        assert model._call_id(Request((), {**ctx, **changed}, "v1", 0)) != a
    assert (
        model._call_id(Request((), ctx, "v1", 1)) != a
        and model._call_id(Request((), ctx, "v2", 0)) != a
    )
    responses = model.complete([Request((), ctx, "v1", 0)] * 2, role="judging", progress=False)
    assert responses[0].ok and responses[0].call_id == responses[1].call_id == a
    assert (
        responses[0].detail == responses[1].detail
        and responses[0].detail is not responses[1].detail
    )


# ------------------------------------------------------------------ manifest usage
def test_manifest_usage_reads_only_accounting_columns_and_equals_the_full_tables(tmp_path):
    import pandas as pd

    from cube.config.schema import ACCOUNTING_COLUMNS
    from cube.llm.usage import usage_summary
    from cube.run.execute import _usage

    rows = []
    for i in range(30):
        rows.append(
            {
                "question_id": f"q{i}",
                "text": "长文本" * 50,
                "model": "m" if i % 3 else "n",
                "role": "judging",
                "input_tokens": i,
                "output_tokens": 2 * i,
                "cost": 0.01 * i,
                "latency_s": 0.5,
                "queue_s": 0.1,
                "cached": bool(i % 2),
                "attempts": 1,
                "endpoint": "http://127.0.0.1:1/v1",
                "call_id": f"c{i // 2}",
            }
        )
    full = pd.DataFrame(rows).reindex(columns=["question_id", "text", *ACCOUNTING_COLUMNS])
    path = tmp_path / "scores.parquet"
    full.to_parquet(path)

    class Paths:
        def data_file(self, name):
            return path if name == "scores" else tmp_path / f"{name}.parquet"

    import json

    expected = json.loads(usage_summary([full]).to_json(orient="records"))
    got = _usage(Paths())
    assert got == expected and len(got) == 2 and sum(r["calls"] for r in got) == 15


def test_kernels_get_one_blas_thread_unless_the_user_chose(monkeypatch):
    from cube.run.execute import THREAD_VARS, kernel_thread_limits

    for v in THREAD_VARS:
        monkeypatch.delenv(v, raising=False)
    assert kernel_thread_limits() == dict.fromkeys(THREAD_VARS, "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert (
        "OMP_NUM_THREADS" not in kernel_thread_limits()
        and kernel_thread_limits()["MKL_NUM_THREADS"] == "1"
    )


# ------------------------------------------------------------------ duplicate judges
def _params(judges, models=None):
    from cube.config.params import Params

    return Params.model_validate({"run": "t", "judges": judges, "models": models or {}})


def test_two_judges_making_the_same_calls_are_refused_naming_both():
    from pydantic import ValidationError

    gpt = {
        "provider": "openai",
        "model": "gpt-4o",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "K",
    }
    with pytest.raises(ValidationError) as err:
        _params(
            [
                {"name": "A", "model": "g"},
                {
                    "name": "B",
                    "model": {
                        **gpt,
                        "base_url": "https://api.openai.com/v1/",
                        "max_concurrency": 4,
                    },
                },
                {"name": "C", "model": {"provider": "offline", "model": "rubric-strict"}},
                {"name": "D", "model": {"provider": "offline", "model": "rubric-strict"}},
            ],
            {"g": gpt},
        )
    text = str(err.value)
    assert "'A' and 'B'" in text and "'C' and 'D'" in text and "identical" in text


@pytest.mark.parametrize(
    "change",
    [
        {"samples": 2},
        {"all_dimensions": True},
        {"model": {"temperature": 0.7}},
        {"model": {"seed": 1}},
        {"model": {"model": "gpt-4o-mini"}},
    ],
)
def test_judges_whose_calls_differ_are_accepted(change):
    gpt = {
        "provider": "openai",
        "model": "gpt-4o",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "K",
    }
    second = {
        "name": "B",
        "model": {**gpt, **change.get("model", {})},
        **{k: v for k, v in change.items() if k != "model"},
    }
    assert [j.name for j in _params([{"name": "A", "model": gpt}, second]).judges] == ["A", "B"]
    offline = [
        {
            "name": "L",
            "model": {"provider": "offline", "model": "rubric", "options": {"preset": "lenient"}},
        },
        {
            "name": "S",
            "model": {"provider": "offline", "model": "rubric", "options": {"preset": "strict"}},
        },
    ]
    assert len(_params(offline).judges) == 2


# ------------------------------------------------------------------ evaluate_run once per run
class _Poison:
    """Creates a marker folder when unpickled (stands for arbitrary code)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_evaluate_run_is_computed_once_and_recomputed_when_an_input_changes(tmp_path, monkeypatch):
    from cube.run import evaluate, pipeline
    from cube.run.notebook import open_run

    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        f"""run: e
outputs_dir: {tmp_path / "out"}
corpus: {{source: demo, n_items: 12, seed: 2}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
judges:
  - {{name: s, model: {{provider: offline, model: rubric-strict}}}}
  - {{name: l, model: {{provider: offline, model: rubric-lenient}}}}
analysis: {{bootstrap: 50}}
""",
        encoding="utf-8",
    )
    run = open_run(params)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    calls = []
    real = evaluate.evaluate_systems
    monkeypatch.setattr(
        evaluate, "evaluate_systems", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    # A run folder received from someone else may hold a pickle where the old code looked for its
    # cache: it must never be loaded (loading a pickle runs code).
    ap = run.params.analysis.model_copy(update={"bootstrap": 0})
    key = evaluate._evaluation_key(run, ap, ["s", "l"], run.params.dimension_names(), {"bm25": 4})
    marker = tmp_path / "pwned"
    planted = run.paths.root / "cache" / f"evaluate-{key[:24]}.pkl"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_bytes(pickle.dumps(_Poison(str(marker))))
    first = evaluate.evaluate_run(run, bootstrap=False)
    again = evaluate.evaluate_run(run, bootstrap=False)
    assert len(calls) == 1 and list(again) == list(first) == ["bm25"]
    assert not marker.exists()
    assert sorted(p.name for p in run.paths.root.rglob("*.pkl")) == [
        planted.name
    ]  # nothing written in the run
    assert [p.name for p in evaluate.evaluation_cache_dir(run).glob("*.pkl")] == [f"{key}.pkl"]
    assert evaluate.evaluation_cache_dir(run).parent == run.paths.cache.parent
    from pandas.testing import assert_frame_equal

    assert_frame_equal(again["bm25"].jury, first["bm25"].jury)
    assert_frame_equal(again["bm25"].trimmed_means, first["bm25"].trimmed_means)
    evaluate.evaluate_run(run)  # with the bootstrap: another evaluation
    assert len(calls) == 2
    scores = run.load("scores")
    scores.loc[0, "score"] = 10.0 - scores.loc[0, "score"] if scores.loc[0, "score"] != 5 else 0.0
    run.save("scores", scores)
    evaluate.evaluate_run(
        run, bootstrap=False
    )  # changed scores: recomputed, never the stale result
    assert len(calls) == 3


@pytest.mark.parametrize(("n", "resamples"), [(7, 5), (300, 130), (1, 3)])
def test_resample_counts_are_the_counts_of_one_draws_matrix(n, resamples):
    from cube.method.bootstrap import resample_counts

    draws = np.random.default_rng(11).integers(0, n, size=(resamples, n))
    expected = np.zeros((resamples, n))
    np.add.at(expected, (np.repeat(np.arange(resamples), n), draws.ravel()), 1.0)
    got = resample_counts(n, resamples, np.random.default_rng(11), chunk=4)
    assert np.array_equal(got, expected) and got.sum(axis=1).tolist() == [n] * resamples


_SEG_CHARS = st.sampled_from(
    list("的办理材料工作日元收费不个年月申请人营业执照")
    + list("ab9Z.+#&%-_")
    + list("，。、；：！？()（）¥ \n\r\t")
    + list("\u3000\xa0\x1c\u2028\u200b")  # other whitespace, and a format character that is none
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SEG_CHARS, max_size=60).map("".join), st.booleans())
def test_segment_is_jiebas_lcut_with_blocks_cut_once(text, hmm):
    import jieba

    from cube.kb.text import jieba_module, segment

    jieba_module()
    assert segment(text, hmm) == tuple(w for w in jieba.lcut(text, HMM=hmm) if w.strip())


def test_segment_equals_jieba_on_demo_documents():
    import jieba

    from cube.kb.text import jieba_module, segment

    jieba_module()
    texts = generate_demo_corpus(40, "zh", seed=3)["text"].tolist()
    answers = [extractive_answer("办理时限是多少？", [t], "zh")[0] for t in texts[:10]]
    for text in texts + answers:
        for hmm in (True, False):
            assert segment(text, hmm) == tuple(w for w in jieba.lcut(text, HMM=hmm) if w.strip())
