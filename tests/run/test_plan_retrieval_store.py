"""The plan's BM25 segmentations and results are what stage 02 needs
(`cube.systems.retrieval_store`): after `build_plan`, a stage 02 that reads them back segments
nothing, builds no index and answers exactly as one that computes everything itself."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cube.config.params import parse_params
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions
from cube.kb.refusal_questions import build_refusal_set
from cube.run.plan import build_plan
from cube.systems import build_answers, refusal_answers, retrieval
from cube.systems.retrieval_store import store_folder, stored_in


def _params(tmp_path: Path):
    return parse_params(
        {
            "run": "store",
            "lang": "zh",
            "corpus": {"source": "demo", "n_items": 40, "seed": 5},
            "questions": {"generator": "template", "seed": 5},
            "answerer": {"provider": "offline", "model": "extractive"},
            "systems": [{"kind": "builtin", "name": "bm25", "top_n": 3}],
            "dimensions": ["relevance"],
            "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric-lenient"}}],
            "diagnostics": {"refusal_questions": 4},
            "cache_path": str(tmp_path / "cache.sqlite"),
        }
    )


segmented: list[int] = []  # the sizes of the sets segmented by `_count`
_real = retrieval._zh_tokens


def _count(texts):
    segmented.append(len(texts))
    return _real(texts)


def _stage02(params, cache: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    retrieval._built_index.cache_clear()  # another process: nothing built yet
    corpus = build_corpus(params)
    questions = build_questions(params, corpus, cache)
    answers = build_answers(params, corpus, questions, cache, progress=False)
    refusal = build_refusal_set(params, corpus)[0]
    return answers, refusal_answers(params, corpus, refusal, cache)


def test_stage02_reads_every_retrieval_the_plan_stored(tmp_path: Path, monkeypatch) -> None:
    params = _params(tmp_path)
    cache = tmp_path / "cache.sqlite"
    plain = _stage02(params, cache)
    without = build_plan(params, base_dir=tmp_path, cache_path=None)
    retrieval._built_index.cache_clear()
    planned = build_plan(params, base_dir=tmp_path, cache_path=cache)
    pd.testing.assert_frame_equal(planned, without)
    folder = store_folder(cache)
    assert len(list(folder.glob("tokens-*.npz"))) == 3  # corpus, questions, refusal questions

    def no_segmenting(texts):
        raise AssertionError(f"stage 02 segmented {len(texts)} texts again")

    def no_index(*args):
        raise AssertionError("stage 02 built a BM25 index again")

    no_index.cache_clear = lambda: None  # type: ignore[attr-defined]

    monkeypatch.setattr(retrieval, "_zh_tokens", no_segmenting)
    monkeypatch.setattr(retrieval, "_built_index", no_index)
    with stored_in(folder):
        read = _stage02(params, cache)
    for a, b in zip(read, plain, strict=True):
        pd.testing.assert_frame_equal(
            a.drop(columns=["latency_s"], errors="ignore"),
            b.drop(columns=["latency_s"], errors="ignore"),
        )


def test_a_changed_corpus_is_segmented_again(tmp_path: Path, monkeypatch) -> None:
    params = _params(tmp_path)
    cache = tmp_path / "cache.sqlite"
    build_plan(params, base_dir=tmp_path, cache_path=cache)
    monkeypatch.setattr(retrieval, "_zh_tokens", _count)
    segmented.clear()
    other = params.model_copy(update={"corpus": params.corpus.model_copy(update={"seed": 6})})
    with stored_in(store_folder(cache)):
        _stage02(other, cache)
    assert segmented  # the other corpus' texts were segmented, not read from the first's entry
