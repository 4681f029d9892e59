"""The `python` system (a user's function as the system under test): end to end through `cube run`,
failures recorded per question, sync and async functions under bounded concurrency, the call cache,
the `bounds` function, passages mapped to documents, and the rule that names the answering model.

The functions under test are in tests/systems/python_systems.py (a small real RAG: bm25s over the
run's knowledge base, an extractive answer) and, for what only a test needs (counting calls in
flight), in this module. Calls are counted through the file named by CUBE_TEST_CALLS, as the
notebooks of `cube run` call them in a kernel subprocess."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.config.params import ParamsError, parse_params
from cube.kb.corpus import build_corpus
from cube.systems import Question, SystemAnswer, build_answers, make_system
from cube.systems.python_system import (
    PythonSystemError,
    ShapeError,
    load_problems,
    parse_answer,
    parse_bound,
    source_digest,
)
from tests import ROOT
from tests.systems import python_systems

JUDGES = [
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
]
MODULE = "tests.systems.python_systems"
FILE = "tests/systems/python_systems.py"
HERE = "tests.systems.test_systems_python"
EXTRACTIVE = {"provider": "offline", "model": "extractive"}


def _calls(path: Path) -> list[tuple[str, str]]:
    """The (function, question_id) lines the test functions appended."""
    if not path.exists():
        return []
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]


def _setup(tmp_path: Path, monkeypatch, systems: list[dict], **extra) -> tuple[Path, Path]:
    """A params file (12 demo items, 6 questions, rubric judges) and the calls file, both named in
    the environment the test functions read."""
    data = {
        "run": "pysys",
        "outputs_dir": str(tmp_path / "out"),
        "corpus": {"n_items": 12, "seed": 1},
        "questions": {"limit": 6},
        "systems": systems,
        "judges": JUDGES,
        **extra,
    }
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(python_systems.PARAMS_ENV, str(params_file))
    monkeypatch.setenv(python_systems.CALLS_ENV, str(calls))
    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.chdir(ROOT)
    return params_file, calls


def _inputs(params_file: Path):
    params = parse_params(yaml.safe_load(params_file.read_text(encoding="utf-8")))
    corpus = build_corpus(params)
    questions = pd.DataFrame(
        {
            "question_id": [f"Q{i + 1:05d}" for i in range(6)],
            "doc_id": corpus["doc_id"].tolist()[:6],
            "question": [f"{name}需要哪些材料？" for name in corpus["item_name"].tolist()[:6]],
        }
    )
    return params, corpus, questions


def _number(qid: str) -> int:
    return int(re.sub(r"\D", "", qid))


# ---------------------------------------------------------------------- end to end, `cube run`
@pytest.mark.e2e
def test_cube_run_with_python_systems_records_failures_and_a_rerun_calls_nothing(
    tmp_path, monkeypatch
):
    from cube.run.execute import execute_run

    params_file, calls = _setup(
        tmp_path,
        monkeypatch,
        [
            {
                "kind": "python",
                "name": "my-rag",
                "callable": f"{MODULE}:answer",
                "bounds": f"{MODULE}:bounds",
                "top_n": 4,
            },
            {
                "kind": "python",
                "name": "flaky-rag",
                "callable": f"{ROOT / FILE}:flaky",  # the params file is in tmp_path
                "answerer": EXTRACTIVE,
                "top_n": 4,
            },
        ],
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    first = execute_run(params_file, log=lambda _: None)
    assert first.ok, [(s.name, s.status) for s in first.stages]
    run = tmp_path / "out" / "pysys"
    answers = pd.read_parquet(run / "data" / "answers.parquet")
    qids = sorted(answers["question_id"].unique())
    assert len(qids) == 6
    made = _calls(calls)
    # one call per question of each system, two per question of the bounds function
    assert sorted(q for f, q in made if f == "answer") == qids
    assert sorted(q for f, q in made if f == "flaky") == qids
    assert sorted(q for f, q in made if f == "bounds") == sorted(qids * 2)

    mine = answers[answers["system"] == "my-rag"].set_index(["set", "question_id"])
    assert (mine["error"] == "").all() and mine["answer"].notna().all()
    assert set(mine.loc["zero", "answerer"]) == {f"bounds:{MODULE}:bounds"}
    assert (mine.loc["rag", "n_retrieved"] > 0).all()
    assert mine.loc["rag", "retrieval_ok"].all()

    flaky = answers[(answers["system"] == "flaky-rag") & (answers["set"] == "rag")]
    for row in flaky.itertuples():
        kind = _number(row.question_id) % 3
        if kind == 0:
            assert row.error == f"ConnectionError: vector store unreachable for {row.question_id}"
        elif kind == 1:
            assert row.error.startswith("wrong reply shape: expected a dict with 'answer'")
            assert row.error.endswith("got str")
        else:
            assert row.error == "" and row.answer
        assert pd.isna(row.answer) == (kind != 2)
        assert row.retrieval_ok == (kind == 2)  # a failure says nothing about the retrieval
    failed = int((flaky["error"] != "").sum())
    assert 0 < failed < len(flaky)

    import json

    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["answers_failed"] == failed
    assert results["retrieval"]["by_system"]["my-rag"]["n"] == 6

    # a forced re-run of the answers' stage is served from the call cache: no function is called
    # again but for the questions that failed (failures are never cached: a re-run retries them)
    again = execute_run(params_file, only="02", force=True, log=lambda _: None)
    assert again.ok
    retried = _calls(calls)[len(made) :]
    assert sorted(retried) == sorted(
        ("flaky", q) for q in flaky.loc[flaky["error"] != "", "question_id"]
    )
    rerun = pd.read_parquet(run / "data" / "answers.parquet")
    pd.testing.assert_series_equal(rerun["answer"], answers["answer"])
    # the rows the functions wrote (not the offline extractive answerer's bound sets of flaky-rag)
    by_function = rerun[rerun["model"].str.startswith(("python:", "bounds:"))]
    assert len(by_function) == 6 * 4  # my-rag: rag, zero, full; flaky-rag: rag
    ok = by_function[by_function["error"] == ""]
    assert ok["cached"].all() and len(ok) == len(by_function) - failed
    assert not by_function.loc[by_function["error"] != "", "cached"].any()


# ---------------------------------------------------------------------- in process
def test_failures_are_recorded_per_question_with_their_type_and_message(tmp_path, monkeypatch):
    params_file, _ = _setup(
        tmp_path,
        monkeypatch,
        [{"kind": "python", "name": "flaky", "callable": f"{FILE}:flaky", "answerer": EXTRACTIVE}],
    )
    params, corpus, questions = _inputs(params_file)
    out = build_answers(params, corpus, questions, tmp_path / "cache.sqlite", progress=False)
    rag = out[out["set"] == "rag"].set_index("question_id")
    for qid, row in rag.iterrows():
        kind = _number(qid) % 3
        expected = {
            0: f"ConnectionError: vector store unreachable for {qid}",
            1: "wrong reply shape: expected a dict with 'answer' (str) and 'retrieved_ids' and/or "
            "'retrieved_passages' (lists of str), or a cube.systems.SystemAnswer; got str",
            2: "",
        }[kind]
        assert row["error"] == expected
        assert row["retrieval_ok"] == (kind == 2) and pd.isna(row["answer"]) == (kind != 2)
    # the bound sets of a system with `answerer` come from that model, for every question
    assert (out[out["set"] != "rag"]["answerer"] == "extractive").all()


IN_FLIGHT = {"now": 0, "max": 0}
_LOCK = threading.Lock()


def _enter() -> None:
    with _LOCK:
        IN_FLIGHT["now"] += 1
        IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])


def _leave() -> None:
    with _LOCK:
        IN_FLIGHT["now"] -= 1


def slow_sync(question: Question) -> dict:
    _enter()
    try:
        time.sleep(0.05)
        return python_systems.answer(question)
    finally:
        _leave()


async def slow_async(question: Question) -> SystemAnswer:
    _enter()
    try:
        await asyncio.sleep(0.05)
        return await python_systems.answer_async(question)
    finally:
        _leave()


async def stray_passage(question: Question) -> dict:
    found = await python_systems.answer_async(question)
    return {
        "answer": found.answer,
        "retrieved_passages": ["a chunk no document holds", *found.retrieved_passages],
    }


@pytest.mark.parametrize("function", ["slow_sync", "slow_async"])
def test_sync_and_async_functions_run_at_most_max_concurrency_at_a_time(
    tmp_path, monkeypatch, function
):
    params_file, _ = _setup(
        tmp_path,
        monkeypatch,
        [
            {
                "kind": "python",
                "name": "mine",
                "callable": f"{HERE}:{function}",
                "answerer": EXTRACTIVE,
                "max_concurrency": 2,
            }
        ],
    )
    params, corpus, questions = _inputs(params_file)
    IN_FLIGHT.update(now=0, max=0)
    out = build_answers(params, corpus, questions, None, progress=False)
    assert IN_FLIGHT["max"] == 2  # six questions of 50 ms each: the limit is reached, never passed
    rag = out[out["set"] == "rag"]
    assert (rag["error"] == "").all() and rag["retrieval_ok"].all()
    # ids (sync) or passages mapped back to their documents by cube.systems.passages (async): the
    # gold document is found
    assert (rag["rank"] >= 1).all()
    assert out.attrs["unmapped"] == {"mine": 0}


def test_passages_no_document_holds_are_counted_as_unmapped(tmp_path, monkeypatch):
    params_file, _ = _setup(
        tmp_path,
        monkeypatch,
        [
            {
                "kind": "python",
                "name": "stray",
                "callable": f"{HERE}:stray_passage",
                "answerer": EXTRACTIVE,
            }
        ],
    )
    params, corpus, questions = _inputs(params_file)
    out = build_answers(params, corpus, questions, None, progress=False)
    assert out.attrs["unmapped"] == {"stray": 6}  # one stray chunk per question
    assert (out.loc[out["set"] == "rag", "rank"] >= 1).all()


def test_a_rerun_is_served_from_the_cache_and_a_new_version_or_an_edit_calls_again(
    tmp_path, monkeypatch
):
    code = (ROOT / FILE).read_text(encoding="utf-8")
    user_file = tmp_path / "my_rag.py"
    user_file.write_text(code, encoding="utf-8")
    system = {"kind": "python", "name": "mine", "callable": f"{user_file}:answer"}
    params_file, calls = _setup(tmp_path, monkeypatch, [{**system, "answerer": EXTRACTIVE}])
    params, corpus, questions = _inputs(params_file)
    cache = tmp_path / "cache.sqlite"

    def run(**changes) -> pd.DataFrame:
        p = params.model_copy(update={"systems": [params.systems[0].model_copy(update=changes)]})
        return build_answers(p, corpus, questions, cache, progress=False)

    first = run()
    assert len(_calls(calls)) == 6 and not first["cached"].any()
    again = run()
    assert len(_calls(calls)) == 6  # nothing called
    rag = again[again["set"] == "rag"]
    assert rag["cached"].all()
    pd.testing.assert_frame_equal(
        rag[["question_id", "answer", "retrieved_doc_ids", "rank"]],
        first[first["set"] == "rag"][["question_id", "answer", "retrieved_doc_ids", "rank"]],
    )
    run(version="index-2")  # the user says something the source cannot show changed
    assert len(_calls(calls)) == 12
    # an edit of the file defining the function (loaded anew, as by a new `cube run`)
    user_file.write_text(code + "\n# tuned the prompt\n", encoding="utf-8")
    from cube.systems.python_loader import _load

    _load.cache_clear()
    run(version="index-2")
    assert len(_calls(calls)) == 18


def test_the_bounds_function_answers_with_no_document_and_with_the_gold_document(
    tmp_path, monkeypatch
):
    params_file, calls = _setup(
        tmp_path,
        monkeypatch,
        [{"kind": "python", "name": "mine", "callable": f"{HERE}:seen", "bounds": f"{HERE}:seen"}],
    )
    params, corpus, questions = _inputs(params_file)
    SEEN.clear()
    out = build_answers(params, corpus, questions, tmp_path / "c.sqlite", progress=False)
    texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    gold = dict(zip(questions["question_id"], questions["doc_id"], strict=True))
    by_call = {(qid, n): docs for qid, n, docs in SEEN}
    rag = out[out["set"] == "rag"]
    # the bounds of the retrieved questions (a missed one's: no estimator reads them), and a sample
    # of missed ones up to the judge gate's floor (here every question: the set is below it)
    made = set(out.loc[out["set"] == "zero", "question_id"])
    retrieved = set(rag.loc[rag["rank"] > 0, "question_id"])
    floor = min(len(questions), max(len(retrieved), params.analysis.gate_bounds_questions))
    assert retrieved <= made and len(made) == floor
    assert {q for q, _, _ in SEEN} == made
    for qid, doc in gold.items():
        if qid not in made:
            continue
        assert by_call[(qid, 0)] == []  # zero: no document
        assert by_call[(qid, 1)] == [texts[doc]]  # full: the gold document as the corpus renders it
    zero = out[out["set"] == "zero"].set_index("question_id")
    full = out[out["set"] == "full"].set_index("question_id")
    assert (zero["answer"] == "0 document(s)").all() and (full["answer"] == "1 document(s)").all()
    assert set(zero["answerer"]) == {f"bounds:{HERE}:seen"}
    assert (full["retrieved_doc_ids"].map(list) == full.index.map(lambda q: [gold[q]])).all()
    # cached like the system's calls: a re-run calls nothing
    SEEN.clear()
    build_answers(params, corpus, questions, tmp_path / "c.sqlite", progress=False)
    assert SEEN == []


SEEN: list[tuple[str, int, list[str]]] = []


def seen(question: Question, documents: list[str] | None = None) -> dict | str:
    """The system (no `documents`) and its bounds function (with them), recording what it got."""
    if documents is None:
        return {"answer": "an answer", "retrieved_ids": []}
    with _LOCK:
        SEEN.append((question.question_id, len(documents), list(documents)))
    return f"{len(documents)} document(s)"


# ---------------------------------------------------------------------- replies and loading
def test_reply_shapes():
    ok = parse_answer({"answer": "a", "retrieved_ids": ["D1", 2]})
    assert ok == {"answer": "a", "retrieved_ids": ["D1", "2"], "retrieved_passages": None}
    assert parse_answer(SystemAnswer("a", retrieved_passages=("p",)))["retrieved_passages"] == ["p"]
    for bad, says in [
        ("just text", "got str"),
        ({"answer": "a"}, "no 'retrieved_ids' and no 'retrieved_passages'"),
        ({"answer": "a", "retrieved_ids": "D1,D2"}, "'retrieved_ids' must be a list of str"),
        ({"answer": None, "retrieved_ids": []}, "'answer' must be a str, got NoneType"),
        ({"answer": "a", "retrieved_ids": [], "sources": []}, "unknown key(s) ['sources']"),
        ({"answer": "a", "retrieved_ids": [{"id": 1}]}, "'retrieved_ids' must hold str, got dict"),
    ]:
        with pytest.raises(ShapeError, match=re.escape(says)):
            parse_answer(bad)
    assert parse_bound("x") == parse_bound({"answer": "x"}) == parse_bound(SystemAnswer("x"))
    with pytest.raises(ShapeError, match="expected the answer as a str"):
        parse_bound(3)


def test_a_function_that_cannot_be_loaded_is_named_by_validate_and_by_the_run(
    tmp_path, monkeypatch
):
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n\ndef answer(q):\n    return {}\n")
    systems = [
        {"kind": "python", "name": "a", "callable": f"{broken}:answer", "answerer": EXTRACTIVE},
        {"kind": "python", "name": "b", "callable": f"{MODULE}:nope", "answerer": EXTRACTIVE},
        {"kind": "python", "name": "c", "callable": "tests/missing.py:f", "answerer": EXTRACTIVE},
    ]
    params_file, _ = _setup(tmp_path, monkeypatch, systems)
    params = parse_params(yaml.safe_load(params_file.read_text(encoding="utf-8")))
    problems = [p for s in params.systems for p in load_problems(s, ROOT)]
    assert problems == [
        f"systems[a].callable: '{broken}:answer': importing '{broken}' failed: "
        "ModuleNotFoundError: No module named 'not_a_module_anywhere'",
        f"systems[b].callable: '{MODULE}:nope': '{MODULE}' has no attribute 'nope'",
        f"systems[c].callable: 'tests/missing.py:f': file {ROOT / 'tests/missing.py'} not found "
        f"(read relative to {ROOT})",
    ]
    from cube.run.validate import validate_data

    report = validate_data(params, ROOT)
    assert [e for e in report.errors if e in problems] == problems[:2]
    # a missing file is named once, by the path check every file key goes through
    assert [e for e in report.errors if e.startswith("systems[c]")] == [
        f"systems[c].callable: Python file {ROOT / 'tests/missing.py'} not found (a relative path "
        f"is read from {ROOT})"
    ]
    with pytest.raises(PythonSystemError, match="not_a_module_anywhere"):
        make_system(params.systems[0], params, None)


def test_a_missing_bounds_file_does_not_hide_a_callable_that_fails_to_load(tmp_path, monkeypatch):
    from cube.run.validate import validate_data

    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n\ndef answer(q):\n    return {}\n")
    system = {"kind": "python", "name": "a", "callable": f"{broken}:answer"}
    system |= {"bounds": "tests/missing.py:bounds"}
    params_file, _ = _setup(tmp_path, monkeypatch, [system])
    params = parse_params(yaml.safe_load(params_file.read_text(encoding="utf-8")))
    errors = validate_data(params, ROOT).errors
    assert any(e.startswith("systems[a].bounds: Python file") for e in errors), errors
    assert any(
        e.startswith("systems[a].callable:") and "not_a_module_anywhere" in e for e in errors
    ), errors
    assert sum(e.startswith("systems[a].bounds") for e in errors) == 1  # named once


def test_the_source_digest_follows_the_file_defining_the_function(tmp_path):
    assert source_digest(python_systems.answer) == source_digest(python_systems.flaky)
    assert source_digest(python_systems.answer) != source_digest(slow_sync)


def test_editing_the_functions_file_makes_the_answers_stage_out_of_date(tmp_path, monkeypatch):
    from cube.config.project import list_notebooks
    from cube.run.stages import stage_fingerprints

    user_file = tmp_path / "my_rag.py"
    user_file.write_text("def answer(q):\n    return {'answer': 'a', 'retrieved_ids': []}\n")
    system = {"kind": "python", "name": "m", "callable": f"{user_file}:answer"}
    params_file, _ = _setup(tmp_path, monkeypatch, [{**system, "answerer": EXTRACTIVE}])
    params = parse_params(yaml.safe_load(params_file.read_text(encoding="utf-8")))
    notebooks = list_notebooks(ROOT / "notebooks")
    before = stage_fingerprints(params, notebooks, ROOT)
    user_file.write_text("def answer(q):\n    return {'answer': 'b', 'retrieved_ids': []}\n")
    after = stage_fingerprints(params, notebooks, ROOT)
    changed = [n for n in before if before[n] != after[n]]
    assert changed and changed[0].startswith("02_") and not any(n < "02" for n in changed)


def test_the_plan_counts_one_call_per_question_and_two_for_the_bounds_function(
    tmp_path, monkeypatch
):
    from cube.run.plan import build_plan

    params_file, _ = _setup(
        tmp_path,
        monkeypatch,
        [
            {
                "kind": "python",
                "name": "m",
                "callable": f"{MODULE}:answer",
                "bounds": f"{MODULE}:bounds",
            }
        ],
    )
    params = parse_params(yaml.safe_load(params_file.read_text(encoding="utf-8")))
    plan = build_plan(params, base_dir=ROOT).set_index(["role", "model"])
    assert plan.loc[("answering", "python:m"), "calls"] == 6
    assert plan.loc[("answering", f"bounds:{MODULE}:bounds"), "calls"] == 12


# ---------------------------------------------------------------------- the answerer rule
def _params(system: dict, **top) -> dict:
    return {"run": "r", "judges": JUDGES, "systems": [system], **top}


@pytest.mark.parametrize(
    "system",
    [
        {"kind": "python", "name": "p", "callable": f"{MODULE}:answer"},
        {"kind": "imported", "name": "i", "path": "answers.csv"},
        {"kind": "ragflow", "name": "r", "base_url": "http://127.0.0.1:9380", "assistant": "a"},
    ],
)
def test_every_system_not_builtin_must_name_its_answering_model_and_is_told_why(system):
    with pytest.raises(ParamsError) as err:
        parse_params(_params(system))
    message = str(err.value)
    assert f"systems[{system['name']}] ({system['kind']}): set `answerer`" in message
    assert "zero set (the question answered with no document)" in message
    assert "would move 0 and 100 and the score with them" in message
    assert ("give `bounds`" in message) == (system["kind"] == "python")
    # named on the system, at the top level, or (python) replaced by a bounds function: accepted
    parse_params(_params({**system, "answerer": EXTRACTIVE}))
    parse_params(_params(system, answerer=EXTRACTIVE))
    if system["kind"] == "python":
        parse_params(_params({**system, "bounds": f"{MODULE}:bounds"}))


def test_a_python_system_gives_answerer_or_bounds_not_both_and_well_formed_targets():
    system = {"kind": "python", "name": "p", "callable": f"{MODULE}:answer"}
    with pytest.raises(ParamsError, match="give `answerer` or `bounds`, not both"):
        parse_params(_params({**system, "answerer": EXTRACTIVE, "bounds": f"{MODULE}:bounds"}))
    with pytest.raises(ParamsError) as err:
        parse_params(_params({**system, "callable": "my_rag.answer", "bounds": "a b:f"}))
    assert "callable 'my_rag.answer': expected `package.module:function`" in str(err.value)
    assert "bounds 'a b:f': 'a b' is neither a Python module name" in str(err.value)


def test_two_files_of_one_name_are_two_systems_and_a_file_imports_its_siblings(tmp_path):
    from cube.systems.python_system import load_callable

    for version in ("v1", "v2"):
        folder = tmp_path / version
        folder.mkdir()
        (folder / f"helpers_{version}.py").write_text(f"LABEL = {version!r}\n")
        (folder / "rag.py").write_text(
            "from __future__ import annotations\n"
            "from dataclasses import dataclass, field\n"
            f"from helpers_{version} import LABEL\n\n"
            "@dataclass\n"
            "class Reply:\n"
            "    answer: str\n"
            "    retrieved_ids: list[str] = field(default_factory=list)\n\n"
            "def answer(question):\n"
            "    return Reply(LABEL).__dict__\n"
        )
    one = load_callable(f"{tmp_path / 'v1' / 'rag.py'}:answer")
    two = load_callable(f"{tmp_path / 'v2' / 'rag.py'}:answer")
    question = Question(text="q", question_id="Q1", lang="zh", top_n=8)
    assert one(question) == {"answer": "v1", "retrieved_ids": []}
    assert two(question) == {"answer": "v2", "retrieved_ids": []}
