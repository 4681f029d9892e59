"""The `imported` system: reading a user's QA file, its validation errors and counted drops."""

from __future__ import annotations

import json
from typing import get_args

import pandas as pd
import pytest
from pydantic import ValidationError

from cube.config.schema import parse_doc_list
from cube.config.sections import ImportedColumn, ImportedSystem
from cube.kb.demo import generate_demo_corpus
from cube.llm import usage_summary
from cube.systems.imported import COLUMN_ALIASES, ImportedAnswers, ImportedFileError
from tests import ROOT


def _corpus() -> pd.DataFrame:
    ids = ["D1", "D2", "D3", "D4"]
    return pd.DataFrame({"doc_id": ids, "text": [f"事项名称：事项{i}" for i in ids]})


def _questions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "doc_id": ["D1", "D2", "D3"],
            "question": ["问题一", "问题二", "问题三"],
        }
    )


def _system(path, **kw) -> ImportedAnswers:
    return ImportedAnswers(ImportedSystem(name="mine", path=str(path), **kw))


def test_parse_doc_list_formats():
    assert parse_doc_list('["D1", "D2"]') == ["D1", "D2"]
    assert parse_doc_list("D1|D2 | D3") == ["D1", "D2", "D3"]
    assert parse_doc_list("D1;D2") == ["D1", "D2"]
    assert parse_doc_list("") == [] and parse_doc_list(None) == []
    assert parse_doc_list(["D1", "D2"]) == ["D1", "D2"]
    with pytest.raises(ValueError, match="JSON"):
        parse_doc_list("[D1, D2")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_reads_each_format_and_computes_ranks(tmp_path, fmt):
    rows = pd.DataFrame(
        {
            "question_id": ["q2", "q1", "q3"],  # file order differs from the question set
            "answer": ["答二", "答一", "答三"],
            "retrieved_doc_ids": ['["D4", "D2"]', "D1|D3", ""],
        }
    )
    path = tmp_path / f"qa.{fmt}"
    if fmt == "csv":
        rows.to_csv(path, index=False)
    elif fmt == "jsonl":
        rows.assign(retrieved_doc_ids=[["D4", "D2"], ["D1", "D3"], []]).to_json(
            path, orient="records", lines=True, force_ascii=False
        )
    else:
        rows.to_parquet(path)
    df = _system(path).answer(_questions(), _corpus(), progress=False)
    assert df["question_id"].tolist() == ["q1", "q2", "q3"]  # question-set order
    assert df["retrieved_doc_ids"].tolist() == [["D1", "D3"], ["D4", "D2"], []]
    assert df["rank"].tolist() == [1, 2, 0]
    assert df["n_retrieved"].tolist() == [2, 2, 0]
    assert df["answer"].tolist() == ["答一", "答二", "答三"]
    assert set(df["set"]) == {"rag"} and set(df["system"]) == {"mine"} and df.attrs["dropped"] == 0


def test_matches_by_question_text(tmp_path):
    path = tmp_path / "qa.csv"
    pd.DataFrame(
        {
            "question": [" 问题一", "问题二", "问题三"],
            "answer": ["a", "b", "c"],
            "document_list": ["D1", "D3;D2", "D3"],
        }
    ).to_csv(path, index=False)
    df = _system(path).answer(_questions(), _corpus(), progress=False)
    assert df["rank"].tolist() == [1, 2, 1]


def _bad_file(tmp_path) -> str:
    path = tmp_path / "bad.csv"
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q9"],  # row 3: unknown question; q3 is never answered
            "answer": ["a", "b", "c"],
            "retrieved": [
                json.dumps(["D1"]),
                json.dumps(["D2", "NOPE"]),
                "D1",
            ],  # row 2: unknown doc id
        }
    ).to_csv(path, index=False)
    return str(path)


def test_errors_name_the_file_and_rows(tmp_path):
    path = _bad_file(tmp_path)
    with pytest.raises(
        ImportedFileError, match=r"bad\.csv: question_id not in the question set \(data rows 3\)"
    ):
        _system(path).answer(_questions(), _corpus(), progress=False)
    good_ids = pd.read_csv(path).iloc[:2]
    good_ids.to_csv(path, index=False)
    with pytest.raises(
        ImportedFileError, match=r"not in the corpus, e\.g\. \['NOPE'\] \(data rows 2\)"
    ):
        _system(path).answer(_questions(), _corpus(), progress=False)
    good_ids.iloc[:1].to_csv(path, index=False)
    with pytest.raises(
        ImportedFileError, match=r"2 question\(s\) of the question set have no answer.*'q2', 'q3'"
    ):
        _system(path).answer(_questions(), _corpus(), progress=False)


def test_missing_columns_and_duplicates(tmp_path):
    path = tmp_path / "x.csv"
    pd.DataFrame({"question_id": ["q1"], "answer": ["a"]}).to_csv(path, index=False)
    with pytest.raises(ImportedFileError, match="missing column"):
        _system(path).answer(_questions(), _corpus(), progress=False)
    pd.DataFrame(
        {
            "question_id": ["q1", "q1", "q2", "q3"],
            "answer": ["a", "b", "c", ""],
            "retrieved_doc_ids": ["D1"] * 4,
        }
    ).to_csv(path, index=False)
    with pytest.raises(ImportedFileError, match=r"more than once \(data rows 1, 2\)"):
        _system(path).answer(_questions(), _corpus(), progress=False)


def test_drop_mode_counts_and_warns(tmp_path):
    path = _bad_file(tmp_path)
    with pytest.warns(UserWarning, match="dropped 2 of 3 question"):
        df = _system(path, on_invalid="drop").answer(_questions(), _corpus(), progress=False)
    # q2 (unknown doc id) and q3 (unanswered) are dropped; q9's row is not a question of the set.
    assert df["question_id"].tolist() == ["q1"]
    assert df.attrs["dropped"] == 2


def test_error_rows_and_top_n_cut(tmp_path):
    path = tmp_path / "qa.jsonl"
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "answer": ["a", None, "c"],
            "error": ["", "timeout", ""],
            "answerer": ["my-llm"] * 3,
            "retrieved_doc_ids": [["D4", "D3", "D2", "D1"], [], ["D3"]],
        }
    ).to_json(path, orient="records", lines=True)
    with pytest.warns(UserWarning, match="cut at top_n"):
        df = _system(path, top_n=2).answer(_questions(), _corpus(), progress=False)
    assert df["retrieved_doc_ids"].tolist()[0] == ["D4", "D3"] and df["rank"].tolist() == [0, 0, 1]
    assert df["error"].tolist() == ["", "timeout", ""] and pd.isna(df["answer"][1])
    assert set(df["answerer"]) == {"my-llm"} and df.attrs["truncated"] == 1


def test_retrieval_ok_repeated_documents_and_no_call_accounting(tmp_path):
    path = tmp_path / "qa.jsonl"
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "answer": ["a", None, None],
            "error": ["", "timeout", "HTTP 500"],
            # q1: chunk-level list (D4 twice); q2: failed, no list; q3: failed after retrieving
            "retrieved_doc_ids": [["D4", "D4", "D4", "D1"], [], ["D3"]],
        }
    ).to_json(path, orient="records", lines=True)
    df = _system(path, top_n=2).answer(_questions(), _corpus(), progress=False)
    # A document keeps its first rank, and top_n counts documents, not chunks: D1 is still rank 2.
    assert df["retrieved_doc_ids"].tolist() == [["D4", "D1"], [], ["D3"]] and df[
        "rank"
    ].tolist() == [2, 0, 1]
    assert df.attrs["truncated"] == 0
    assert df["retrieval_ok"].tolist() == [True, False, True] and df["retrieval_ok"].dtype == bool
    # No call of this run produced these answers: no call id, no tokens, cost 0.0 (not unknown).
    assert (
        (df["call_id"] == "").all()
        and (df["cost"] == 0.0).all()
        and (df["input_tokens"] == 0).all()
    )
    assert set(df["finish_reason"]) == {""}
    usage = usage_summary([df]).iloc[0]
    assert (usage["model"], usage["calls"], usage["failed_calls"], usage["skipped"]) == (
        "imported",
        0,
        0,
        3,
    )
    assert usage["cost_total"] == 0.0
    # An empty list without an error is a known miss.
    path2 = tmp_path / "qa.csv"
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "answer": ["a", "b", "c"],
            "retrieved_doc_ids": ["", "D2", ""],
        }
    ).to_csv(path2, index=False)
    assert _system(path2).answer(_questions(), _corpus(), progress=False)["retrieval_ok"].all()


def test_top_n_below_one_is_rejected(tmp_path):
    spec = ImportedSystem(name="mine", path=str(tmp_path / "qa.csv"))
    with pytest.raises(ImportedFileError, match=r"top_n: must be >= 1, got 0"):
        ImportedAnswers(spec.model_copy(update={"top_n": 0}))


# ------------------------------------------------------------------ ragas, DeepEval, columns
@pytest.fixture(scope="module")
def demo():
    """A small demo knowledge base (near-duplicate families present) and one question per item."""
    corpus = generate_demo_corpus(12, "zh", seed=5)
    questions = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(len(corpus))],
            "doc_id": corpus["doc_id"],
            "question": [f"{name}要带什么？" for name in corpus["item_name"]],
        }
    )
    return corpus, questions


def _own(corpus: pd.DataFrame, i: int) -> str:
    """A chunk only document i holds: its publication line (it names the doc id) and the next."""
    lines = corpus["text"][i].splitlines()
    return "\n".join(lines[1:3])


def test_ragas_jsonl_passages_are_mapped_to_documents_and_unmatched_ones_counted(tmp_path, demo):
    corpus, questions = demo
    n = len(corpus)
    path = tmp_path / "ragas.jsonl"
    pd.DataFrame(
        {
            "user_input": questions["question"],
            "response": [f"答{i}" for i in range(n)],
            # rank 1: another document's chunk; rank 2: the gold document's, re-wrapped; rank 3
            # (first question only): text from no document
            "retrieved_contexts": [
                [_own(corpus, (i + 1) % n), _own(corpus, i).replace("\n", " ")]
                + (["完全不在知识库里的一段话，讲的是天气。"] if i == 0 else [])
                for i in range(n)
            ],
            "reference": ["参考"] * n,
        }
    ).to_json(path, orient="records", lines=True, force_ascii=False)
    with pytest.warns(UserWarning, match=r"1 of 25 retrieved passage\(s\) matched no"):
        df = _system(path).answer(questions, corpus, progress=False)
    assert df["rank"].tolist() == [2] * n
    assert df["retrieved_doc_ids"][0] == [
        corpus["doc_id"][1],
        corpus["doc_id"][0],
        "unmapped:passage3",  # a miss at its own rank
    ]
    assert df.attrs["unmapped"] == 1 and df["answer"][3] == "答3"


def test_deepeval_json_list_and_python_literal_lists_in_csv(tmp_path, demo):
    corpus, questions = demo
    cases = [
        {
            "input": q,
            "actual_output": "答",
            "expected_output": "参考",
            "retrieval_context": [_own(corpus, i)],
        }
        for i, q in enumerate(questions["question"])
    ]
    path = tmp_path / "deepeval.json"
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    df = _system(path).answer(questions, corpus, progress=False)
    assert df["rank"].tolist() == [1] * len(corpus) and df.attrs["unmapped"] == 0
    # pandas writes a list column of a CSV as a Python literal (ragas' to_csv does): read as a list
    csv = tmp_path / "ragas.csv"
    pd.DataFrame(
        {
            "user_input": questions["question"],
            "response": ["答"] * len(corpus),
            "retrieved_context_ids": [[d, "D00001"] for d in corpus["doc_id"]],
        }
    ).to_csv(csv, index=False)
    assert "['D00001', 'D00001']" in csv.read_text(encoding="utf-8")
    ranks = _system(csv).answer(questions, corpus, progress=False)["rank"]
    assert ranks.tolist() == [1] * len(corpus)


def test_a_json_file_that_is_not_a_list_of_objects(tmp_path, demo):
    path = tmp_path / "qa.json"
    path.write_text('{"input": "a", "actual_output": "b"}', encoding="utf-8")
    with pytest.raises(ImportedFileError, match=r"qa\.json: expected a JSON list of objects"):
        _system(path).answer(*reversed(demo), progress=False)
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ImportedFileError, match="got a list of non-objects"):
        _system(path).answer(*reversed(demo), progress=False)


def test_comma_separated_ids_are_refused_naming_rows_and_separators(tmp_path):
    path = tmp_path / "qa.csv"
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "answer": ["a", "b", "c"],
            "retrieved_doc_ids": ["D1,D3", "D2|D4", "D3, D1"],
        }
    ).to_csv(path, index=False)
    for on_invalid in ("error", "drop"):  # a format mistake of the file: never dropped quietly
        with pytest.raises(ImportedFileError) as err:
            _system(path, on_invalid=on_invalid).answer(_questions(), _corpus(), progress=False)
        message = str(err.value)
        assert "qa.csv: column 'retrieved_doc_ids' separates doc ids with commas" in message
        assert "'D1,D3' (data rows 1, 3)" in message
        assert "'|' or ';'" in message and '["D1", "D2"]' in message


def test_columns_mapping_names_any_columns(tmp_path, demo):
    corpus, questions = demo
    path = tmp_path / "mine.csv"
    pd.DataFrame(
        {
            "id": questions["question_id"],
            "output": ["答"] * len(corpus),
            "chunks": [json.dumps([_own(corpus, i)], ensure_ascii=False) for i in range(12)],
            "question_id": ["not this column"] * len(corpus),
        }
    ).to_csv(path, index=False)
    mapping = {"question_id": "id", "answer": "output", "retrieved_passages": "chunks"}
    df = _system(path, columns=mapping).answer(questions, corpus, progress=False)
    assert df["rank"].tolist() == [1] * len(corpus)
    with pytest.raises(ImportedFileError) as err:
        _system(path, columns={"answer": "reply", "error": "why"}).answer(
            questions, corpus, progress=False
        )
    assert "columns.answer: 'reply' is not a column of the file" in str(err.value)
    assert "columns.error: 'why'" in str(err.value) and "imported-files.md" in str(err.value)
    with pytest.raises(ValidationError, match="retrieved_passage"):
        ImportedSystem(name="m", path=str(path), columns={"retrieved_passage": "chunks"})


def test_ids_win_over_passages_and_missing_columns_name_both_kinds(tmp_path, demo):
    corpus, questions = demo
    path = tmp_path / "both.jsonl"
    pd.DataFrame(
        {
            "question_id": questions["question_id"],
            "answer": ["答"] * len(corpus),
            "retrieved_doc_ids": [[d] for d in corpus["doc_id"]],
            "retrieved_contexts": [["天气很好"]] * len(corpus),  # would map to nothing
        }
    ).to_json(path, orient="records", lines=True, force_ascii=False)
    df = _system(path).answer(questions, corpus, progress=False)
    assert df["rank"].tolist() == [1] * len(corpus) and df.attrs["unmapped"] == 0
    pd.DataFrame({"input": ["a"], "actual_output": ["b"]}).to_json(
        path, orient="records", lines=True
    )
    with pytest.raises(
        ImportedFileError,
        match=r"missing column\(s\) \['retrieved_doc_ids or retrieved_passages'\]",
    ):
        _system(path).answer(questions, corpus, progress=False)


def test_the_docs_table_lists_every_accepted_column_and_alias():
    doc = (ROOT / "docs" / "reference" / "imported-files.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(" `"): line for line in doc.splitlines() if line.startswith("| `")
    }
    assert set(rows) == set(COLUMN_ALIASES) == set(get_args(ImportedColumn))
    for ours, aliases in COLUMN_ALIASES.items():
        cells = rows[ours].split(" | ")
        assert all(f"`{a}`" in cells[1] for a in aliases[1:]), ours  # the "Also accepted" cell


def test_a_row_with_empty_ids_is_read_from_its_passages(tmp_path, demo):
    # Review finding: an id column present but empty silently gave empty lists (R@k 0).
    corpus, questions = demo
    n = len(questions)
    path = tmp_path / "mixed.jsonl"
    pd.DataFrame(
        {
            "user_input": questions["question"],
            "response": [f"答{i}" for i in range(n)],
            "retrieved_context_ids": [None if i % 2 else [corpus["doc_id"][i]] for i in range(n)],
            "retrieved_contexts": [[_own(corpus, i).replace("\n", " ")] for i in range(n)],
        }
    ).to_json(path, orient="records", lines=True, force_ascii=False)
    df = _system(path).answer(questions, corpus, progress=False)
    assert df["retrieved_doc_ids"].map(list).tolist() == [[corpus["doc_id"][i]] for i in range(n)]
