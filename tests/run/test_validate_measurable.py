"""`cube validate` says, before any call, that an imported file's retrieval could not be measured:
its passages match no document, or its ids are the knowledge base's in another case (with the
did-you-mean and the fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from cube.config.params import parse_params
from cube.kb.demo import generate_demo_corpus
from cube.run.validate import validate_data

N = 6
JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}]


def _params(tmp: Path, qa: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    corpus = generate_demo_corpus(N, "zh", seed=3)
    questions = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(N)],
            "doc_id": corpus["doc_id"],
            "question": [f"{n}需要什么材料？" for n in corpus["item_name"]],
        }
    )
    questions.to_csv(tmp / "questions.csv", index=False)
    return (
        {
            "run": "v",
            "judges": JUDGES,
            "answerer": {"provider": "offline", "model": "extractive"},
            "corpus": {"source": "demo", "n_items": N, "seed": 3},
            "questions": {"generator": "file", "path": str(tmp / "questions.csv")},
            "systems": [{"kind": "imported", "name": "mine", "path": str(qa)}],
        },
        questions,
        corpus,
    )


def test_passages_of_no_document_are_an_error_before_any_call(tmp_path: Path):
    qa = tmp_path / "ragas.jsonl"
    data, questions, _ = _params(tmp_path, qa)
    rows = [
        {
            "user_input": q,
            "response": "an answer",
            "retrieved_contexts": ["Opening hours: Monday to Friday, nine to five.", "Fees: none."],
        }
        for q in questions["question"]
    ]
    qa.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    report = validate_data(parse_params(data), tmp_path)
    (error,) = [e for e in report.errors if "retrieval not measured" in e]
    assert "12 of 12 retrieved passages matched no document" in error
    assert "'retrieved_contexts'" in error and "`columns:`" in error and "mine" in error


def test_ids_in_another_case_are_an_error_with_the_did_you_mean(tmp_path: Path):
    qa = tmp_path / "qa.csv"
    data, questions, corpus = _params(tmp_path, qa)
    pd.DataFrame(
        {
            "question_id": questions["question_id"],
            "answer": "an answer",
            "retrieved_doc_ids": [json.dumps([d.lower()]) for d in corpus["doc_id"]],
        }
    ).to_csv(qa, index=False)
    report = validate_data(parse_params(data), tmp_path)
    (error,) = [e for e in report.errors if "retrieval not measured" in e]
    assert f"{N} of {N} retrieved ids are not knowledge-base doc ids" in error
    first = corpus["doc_id"].iloc[0]
    assert f"{first.lower()!r} -> {first!r}" in error
    # the run's own import refuses the file too, naming the id it meant
    assert any(f"did you mean {first!r}" in e for e in report.errors), report.errors


def test_ids_of_the_knowledge_base_pass(tmp_path: Path):
    qa = tmp_path / "qa.csv"
    data, questions, corpus = _params(tmp_path, qa)
    pd.DataFrame(
        {
            "question_id": questions["question_id"],
            "answer": "an answer",
            "retrieved_doc_ids": [json.dumps([d]) for d in corpus["doc_id"]],
        }
    ).to_csv(qa, index=False)
    report = validate_data(parse_params(data), tmp_path)
    assert report.ok, report.errors
