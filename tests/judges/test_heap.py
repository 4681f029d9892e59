"""The offline judges run with automatic garbage collection paused, collected per slice
(`cube.judges.heap`): the same table, the collector on again afterwards, cycles still freed."""

from __future__ import annotations

import gc
import weakref

import pandas as pd
import pytest

from cube.judges import load_dimensions, score_answers
from cube.judges.heap import young_collections
from tests.judges.test_judges_scoring import params, rubric_judges, tiny_tables


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_collection_is_paused_within_and_resumed_after_even_on_error() -> None:
    assert gc.isenabled()
    with young_collections():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), young_collections():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_the_checkpoint_frees_cycles_made_since_the_last_one() -> None:
    with young_collections() as checkpoint:
        ref = weakref.ref(_Node())
        assert ref() is not None  # no automatic collection within the block
        checkpoint()
        assert ref() is None


def test_a_caller_s_collection_left_off_stays_off() -> None:
    gc.disable()
    try:
        with young_collections() as checkpoint:
            ref = weakref.ref(_Node())
            checkpoint()  # the caller's choice: nothing collected
            assert ref() is not None and not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_scores_are_the_same_with_the_collector_paused_or_not(monkeypatch) -> None:
    """The table of the offline judges (sliced: a checkpoint between slices) is the one scored
    with collection off throughout (the caller's choice, left as it is)."""
    import cube.judges.scoring as scoring

    answers, corpus = tiny_tables()
    answers.loc[2, "answer"] = "收费标准：不收费\u200b“引号”"
    answers.loc[3, "answer"] = ""
    dims = load_dimensions(params())
    monkeypatch.setattr(scoring, "OFFLINE_SLICE", 4)
    paused = score_answers(answers, rubric_judges(), dims, corpus, progress=False)
    gc.disable()
    try:
        off = score_answers(answers, rubric_judges(), dims, corpus, progress=False)
    finally:
        gc.enable()
    timing = ["latency_s", "queue_s"]
    pd.testing.assert_frame_equal(paused.drop(columns=timing), off.drop(columns=timing))
    assert gc.isenabled()
