"""`cube.llm.usage`: calls, tokens and costs summed over a run's tables, worked out by hand.

The convention under test: a row produced by a model call carries that call's accounting and
`call_id` (rows sharing a call_id are one call); a row that came from no call has call_id "",
no tokens and cost 0.0 and is counted as `skipped`, never as a call; a real call of unknown
price (RAGFlow) has its own call_id and cost NaN, which makes only its own model's cost unknown.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.schema import ACCOUNTING_COLUMNS
from cube.config.sections import JudgeParams
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.llm.usage import SUMMARY_COLUMNS, Accounting, no_call_accounting, usage_summary


def call(
    model: str,
    role: str,
    call_id: str,
    n_in: int,
    n_out: int,
    cost: float,
    cached: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """One table row carrying the accounting of the call `call_id`."""
    return {
        "model": model,
        "role": role,
        "input_tokens": n_in,
        "output_tokens": n_out,
        "cost": cost,
        "latency_s": 0.5,
        "cached": cached,
        "call_id": call_id,
        **extra,
    }


def judged(
    call_id: str,
    n_in: int,
    n_out: int,
    cost: float,
    *,
    kind: str = "",
    finish: str = "stop",
    dims: tuple[str, ...] = ("relevance", "specificity", "completeness", "quality"),
) -> list[dict[str, Any]]:
    """The rows of ONE all-dimensions judge call: one row per dimension, each with the whole call's
    accounting."""
    return [
        call(
            "judge-llm",
            "judging",
            call_id,
            n_in,
            n_out,
            cost,
            question_id="q1",
            dimension=d,
            error_kind=kind,
            error="boom" if kind else "",
            finish_reason=finish,
        )
        for d in dims
    ]


def skipped_judgment(model: str = "judge-llm") -> list[dict[str, Any]]:
    """A judgment of a missing answer: four rows, no call."""
    return [
        {
            **no_call_accounting(model, "judging"),
            "question_id": "q9",
            "dimension": d,
            "error_kind": "skipped",
            "error": "answer is missing (no answer to judge)",
            "finish_reason": "",
        }
        for d in ("relevance", "specificity", "completeness", "quality")
    ]


def by_key(summary: pd.DataFrame) -> pd.DataFrame:
    return summary.set_index(["role", "model"])


def test_no_call_accounting_is_the_convention() -> None:
    acc = no_call_accounting("template", "question_generation")
    assert tuple(acc) == ACCOUNTING_COLUMNS
    # the row type declares the same columns in the same order
    assert tuple(Accounting.__annotations__) == ACCOUNTING_COLUMNS
    assert (acc["call_id"], acc["cost"], acc["input_tokens"], acc["output_tokens"]) == (
        "",
        0.0,
        0,
        0,
    )
    assert math.isnan(no_call_accounting("human", "judging", latency_s=float("nan"))["latency_s"])
    with pytest.raises(ValueError, match="'grading'"):
        no_call_accounting("x", "grading")


def test_template_questions_are_no_calls() -> None:
    corpus = generate_demo_corpus(6, "en")
    params = Params(
        run="t",
        lang="en",
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))],
    )
    questions = build_questions(params, corpus)
    s = usage_summary([questions])
    rec = s.to_dict("records")
    assert (
        len(rec) == 1
        and math.isnan(rec[0].pop("latency_s_median"))
        and math.isnan(rec[0].pop("queue_s_median"))
        and math.isnan(rec[0].pop("cached_input_share"))  # no input token: no share
    )
    assert rec == [
        {
            "role": "question_generation",
            "model": "template",
            "calls": 0,
            "cached_calls": 0,
            "failed_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cached_input_tokens": 0,
            "cost_this_run": 0.0,
            "cost_total": 0.0,
            "skipped": len(questions),
            "truncated": 0,
        }
    ]


def test_a_whole_run_worked_by_hand() -> None:
    questions = pd.DataFrame(
        [{**no_call_accounting("template", "question_generation"), "error": ""}] * 3
    )
    answers = pd.DataFrame(
        [
            # system A and B each answer once with "gpt" (B's answer came from the cache: paid by an
            # earlier run)
            call("gpt", "answering", "a1", 100, 10, 0.003, system="A", set="rag", error=""),
            call(
                "gpt",
                "answering",
                "b1",
                120,
                12,
                0.004,
                cached=True,
                system="B",
                set="rag",
                error="",
            ),
            # ONE zero-set call, its row replicated to both systems: one call, paid once
            call("gpt", "answering", "z1", 50, 8, 0.001, system="A", set="zero", error=""),
            call("gpt", "answering", "z1", 50, 8, 0.001, system="B", set="zero", error=""),
            # RAGFlow: two real calls (one failed), unique ids, no tokens, unknown price
            call(
                "ragflow:助手",
                "answering",
                "9f" * 16,
                0,
                0,
                float("nan"),
                system="R",
                set="rag",
                error="",
            ),
            call(
                "ragflow:助手",
                "answering",
                "3c" * 16,
                0,
                0,
                float("nan"),
                system="R",
                set="rag",
                error="RAGFlow code 100: LLM service unavailable",
            ),
            # an imported answer: no call of this run
            {
                **no_call_accounting("my-llm", "answering"),
                "system": "I",
                "set": "rag",
                "error": "timeout",
            },
        ]
    )
    scores = pd.DataFrame(
        [
            *judged("j1", 400, 40, 0.02),  # one call filling 4 rows
            *judged("j2", 0, 0, 0.0, kind="call", finish=""),  # a failed call over 4 rows
            *judged(
                "j3", 400, 40, 0.02, kind="parse", finish="length"
            ),  # cut at max_tokens, unparseable
            *skipped_judgment(),  # the answer was missing
            # a human rating: no call, latency unknown
            {
                **no_call_accounting("human", "judging", latency_s=float("nan")),
                "error_kind": "",
                "error": "",
            },
        ]
    )
    corpus = pd.DataFrame({"doc_id": ["d1"], "text": ["..."]})  # no accounting columns: ignored
    s = usage_summary([corpus, questions, answers, scores])
    assert list(s.columns) == list(SUMMARY_COLUMNS)
    assert list(zip(s["role"], s["model"], strict=True)) == [
        ("question_generation", "template"),
        ("answering", "gpt"),
        ("answering", "my-llm"),
        ("answering", "ragflow:助手"),
        ("judging", "human"),
        ("judging", "judge-llm"),
    ]
    k = by_key(s)
    counts = [
        "calls",
        "cached_calls",
        "failed_calls",
        "skipped",
        "truncated",
        "input_tokens",
        "output_tokens",
    ]
    assert k.loc[("question_generation", "template"), counts].tolist() == [0, 0, 0, 3, 0, 0, 0]
    # gpt: a1 + b1 + z1 (counted once): 100 + 120 + 50 input tokens; this run paid a1 + z1
    assert k.loc[("answering", "gpt"), counts].tolist() == [3, 1, 0, 0, 0, 270, 30]
    assert k.loc[("answering", "gpt"), "cost_this_run"] == pytest.approx(0.004)
    assert k.loc[("answering", "gpt"), "cost_total"] == pytest.approx(0.008)
    # the imported row failed, but no call failed: it is skipped, and its cost is 0, not unknown
    assert k.loc[("answering", "my-llm"), counts].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert k.loc[("answering", "my-llm"), "cost_total"] == 0.0
    # RAGFlow: real calls of unknown price; only its own cost is NaN
    assert k.loc[("answering", "ragflow:助手"), counts].tolist() == [2, 0, 1, 0, 0, 0, 0]
    assert math.isnan(k.loc[("answering", "ragflow:助手"), "cost_total"])
    assert math.isnan(k.loc[("answering", "ragflow:助手"), "cost_this_run"])
    # the judge: j1, j2, j3 are three calls (12 rows); j2 failed; j3 was cut; 4 rows were skipped
    assert k.loc[("judging", "judge-llm"), counts].tolist() == [3, 0, 1, 4, 1, 800, 80]
    assert k.loc[("judging", "judge-llm"), "cost_total"] == pytest.approx(0.04)
    assert k.loc[("judging", "human"), counts].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert k.loc[("judging", "human"), "cost_total"] == 0.0


def test_rows_of_one_call_agree_on_failure_cache_and_truncation() -> None:
    # An older table's skipped judgment (cost NaN, error_kind 'call', no call_id) poisons nothing.
    legacy = {
        **no_call_accounting("judge-llm", "judging"),
        "cost": float("nan"),
        "error_kind": "call",
        "error": "answer is missing",
    }
    rows = pd.DataFrame(
        [
            # the same call seen twice: once paid in this run, once served from the cache -> paid
            # this run
            call("judge-llm", "judging", "k1", 10, 2, 0.5, cached=False, error_kind="", error=""),
            call("judge-llm", "judging", "k1", 10, 2, 0.5, cached=True, error_kind="", error=""),
            legacy,
        ]
    )
    k = by_key(usage_summary([rows])).loc[("judging", "judge-llm")]
    assert (k["calls"], k["cached_calls"], k["failed_calls"], k["skipped"]) == (1, 0, 0, 1)
    assert (k["cost_this_run"], k["cost_total"]) == (0.5, 0.5)
    # without error_kind (answers tables) a non-empty error marks the call failed; without
    # finish_reason nothing is counted as truncated
    answers = pd.DataFrame(
        [
            call("m", "answering", "x1", 1, 1, 0.0, error="HTTP 500 after 5 attempts"),
            call("m", "answering", "x2", 1, 1, 0.0, error=None),
        ]
    )
    assert usage_summary([answers]).loc[0, ["calls", "failed_calls", "truncated"]].tolist() == [
        2,
        1,
        0,
    ]


def test_empty_and_malformed_inputs() -> None:
    empty = usage_summary([pd.DataFrame({"doc_id": ["d1"]})])
    assert list(empty.columns) == list(SUMMARY_COLUMNS) and empty.empty
    with pytest.raises(ValueError, match=r"table #0.*missing column\(s\) \['cost'"):
        usage_summary([pd.DataFrame([call("m", "answering", "x", 1, 1, 0.0)]).drop(columns="cost")])


def test_tables_sum_alike_whatever_their_dtypes(tmp_path) -> None:
    """Each table's rows are converted on their own before the tables are put together: read back
    as `cube.run.decide.call_usage` reads them (Arrow text, a judge's details, models and roles as
    categories, a table of nulls with no row) they give the summary of the same rows given as
    Python objects, and the counts worked out by hand."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cube.config.runpaths import RunPaths
    from cube.run.decide import call_usage

    asked_again = call(  # one judge row folding 3 calls, 1 of them failed, the last one cut
        "judge-llm",
        "judging",
        "k2",
        30,
        6,
        1.5,
        error_kind="",
        error="",
        detail=json.dumps({"calls": 3, "failed_calls": 1}),
        finish_reason="length",
    )
    scores = pd.DataFrame([*judged("k1", 10, 2, 0.5), asked_again, *skipped_judgment()])
    answers = pd.DataFrame(
        [
            call("m", "answering", "x1", 1, 1, 0.25, error=None, queue_s=0.1),
            call("m", "answering", "x2", 2, 1, float("nan"), error="HTTP 500", queue_s=0.3),
        ]
    )
    paths = RunPaths(root=tmp_path, cache=tmp_path / "cache.sqlite").ensure()
    scores.to_parquet(paths.data_file("scores"))
    answers.to_parquet(paths.data_file("answers"))
    nothing = pa.table({c: pa.array([], pa.null()) for c in ACCOUNTING_COLUMNS})
    pq.write_table(nothing, paths.data_file("refusal_generation"))

    read = call_usage(paths)
    as_objects = usage_summary([answers.astype(object), scores.astype(object)])
    pd.testing.assert_frame_equal(read, as_objects)
    j = by_key(read).loc[("judging", "judge-llm")]
    assert (j["calls"], j["failed_calls"], j["skipped"], j["truncated"]) == (4, 1, 4, 1)
    assert (j["input_tokens"], j["output_tokens"], j["cost_total"]) == (40, 8, 2.0)
    a = by_key(read).loc[("answering", "m")]
    assert (a["calls"], a["failed_calls"], a["input_tokens"], a["queue_s_median"]) == (2, 1, 3, 0.2)
    assert math.isnan(a["cost_total"])
