"""ragas and DeepEval datasets plus a knowledge base are a complete run: the questions and their
gold documents come from the file (`questions.generator: imported`), no question file needed.

The files under tests/fixtures/datasets/ were written by ragas 0.4.3 (`Testset` /
`EvaluationDataset.to_jsonl`, `to_csv`) and DeepEval 4.3.1 (`EvaluationDataset.save_as` json, csv,
jsonl) over `wrenford_guides.csv`, ten English service guides written for these tests; the script
that wrote them (`make_datasets.py`, run in a throwaway venv) also wrote `truth.json`: each
question's gold guide from the chunks' provenance, and the gold guide's rank in the user's
retrieved list (1, 2, 1, 0, 1, 2, 3, 1, 1, 1, 1, 1 for the 12 questions with one gold guide:
R@1 = 8/12, R@2 = 10/12, R@3 = 11/12). Row 13's only reference context ("Free of charge.") is in
three guides, row 14 is a multi-hop question over two guides: no gold document, left out."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.cli import main
from cube.config.params import ParamsError, parse_params
from cube.diagnose.retrieval import metrics_from_ranks
from cube.kb.questions import QuestionError
from cube.run.pipeline import question_set
from cube.run.questions import unusable_questions
from cube.systems.imported import ImportedAnswers, parse_passages
from cube.systems.imported_questions import questions_from_imported

D = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
TRUTH = json.loads((D / "truth.json").read_text(encoding="utf-8"))
FILES = [
    "ragas_eval.jsonl",
    "ragas_eval.csv",
    "deepeval_dataset.json",
    "deepeval_dataset.csv",
    "deepeval_dataset.jsonl",
]
COLUMNS = {
    "doc_id": "guide_id",
    "item_name": "title",
    "department": "department",
    "requirements": "who_can_apply",
    "application_materials": "documents",
    "procedure": "steps",
    "fee_standard": "fee",
    "processing_location": "office",
    "committed_time_limit": "time_limit",
}


def _params(*systems: dict, **questions) -> dict:
    return {
        "run": "datasets",
        "lang": "en",
        "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric-lenient"}}],
        "answerer": {"provider": "offline", "model": "extractive"},
        "corpus": {"source": "file", "path": str(D / "wrenford_guides.csv"), "columns": COLUMNS},
        "questions": {"generator": "imported", **questions},
        "systems": list(systems),
    }


def _system(name: str, path: Path | str, **extra) -> dict:
    return {"kind": "imported", "name": name, "path": str(path), "top_n": 3, **extra}


def _run(params: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str]]:
    """(corpus, question set, the first system's answers, warnings) as stages 01-02 make them."""
    p = parse_params(params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus, questions = question_set(p, Path("."))
        answers = ImportedAnswers(p.systems[0]).answer(questions, corpus, progress=False)
    return corpus, questions, answers, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", FILES)
def test_library_export_runs_to_the_true_ranks_without_a_question_file(name):
    _, questions, answers, caught = _run(_params(_system("mine", D / name)))
    with_gold = [t for t in TRUTH if t["gold"]]
    assert questions["question"].tolist() == [t["question"] for t in with_gold]
    assert questions["doc_id"].tolist() == [t["gold"] for t in with_gold]
    assert answers["question_id"].tolist() == [f"Q{t['row']:05d}" for t in with_gold]
    assert answers["rank"].tolist() == [t["rank"] for t in with_gold]
    r_at = metrics_from_ranks(answers["rank"], 3)["r_at_k"]
    assert r_at[1] == pytest.approx(8 / 12) and r_at[3] == pytest.approx(11 / 12)
    # the two rows without one gold document are named with their reasons, once
    (left_out,) = [w for w in caught if "have no gold document and are left out" in w]
    assert "2 of 14 question(s)" in left_out and "not scored as retrieval misses" in left_out
    assert "row 13: 1 of 1 reference context(s) match no knowledge-base document" in left_out
    assert "row 14: its reference contexts come from several documents (W03, W10)" in left_out
    # and the file's own rows for them, by the import (`cube validate` and `cube run` print it)
    (rows,) = [w for w in caught if "row(s) left out of the evaluation" in w]
    assert "2 row(s)" in rows and "row 14: its reference contexts come from several" in rows


def test_rows_without_a_gold_document_are_kept_with_their_reason_for_questions_failed():
    p = parse_params(_params(_system("mine", D / "ragas_eval.jsonl")))
    corpus, _ = question_set(p, Path("."))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        every = questions_from_imported(p, corpus)
    failed = every[unusable_questions(every)]
    assert failed["question_id"].tolist() == ["Q00013", "Q00014"]
    assert failed["doc_id"].tolist() == ["", ""]
    assert failed["error"].str.startswith("no gold document: ").all()
    assert set(every["generator"]) == {"imported:mine"}


def test_the_ragas_testset_alone_gives_the_questions_another_file_the_answers(tmp_path):
    """Questions and gold from one imported file, answers from another (our own names): the second
    file's rows for the questions left out are left out too, with a warning naming them."""
    testset_eval = _system("ragas", D / "ragas_eval.jsonl")
    ours = pd.read_json(D / "ragas_eval.jsonl", lines=True)
    pd.DataFrame(
        {
            "question": ours["user_input"],
            "answer": ours["response"],
            "retrieved_doc_ids": [t["retrieved_guides"] for t in TRUTH],
        }
    ).to_json(tmp_path / "ids.jsonl", orient="records", lines=True)
    params = _params(_system("ids", tmp_path / "ids.jsonl"), testset_eval, system="ragas")
    _, questions, answers, caught = _run(params)
    assert len(questions) == 12
    assert answers["rank"].tolist() == [t["rank"] for t in TRUTH if t["gold"]]
    assert answers.attrs["outside"] == 2 and answers.attrs["dropped"] == 0
    (outside,) = [w for w in caught if "outside the question set" in w]
    assert "2 row(s)" in outside and "system 'ragas'" in outside and "13, 14" in outside


def test_gold_from_ids_reference_context_ids_then_passages(tmp_path):
    rows = [
        {"user_input": "a dog licence?", "response": "x", "retrieved_context_ids": ["W01"],
         "reference_context_ids": ["W01"]},
        {"user_input": "a permit?", "response": "x", "retrieved_context_ids": ["W02"],
         "reference_context_ids": ["W02", "W04"]},
        {"user_input": "a tree?", "response": "x", "retrieved_context_ids": ["W08"],
         "reference_context_ids": ["w08"]},
        {"user_input": "no ids", "response": "x", "retrieved_context_ids": [],
         "reference_context_ids": []},
    ]  # fmt: skip
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    p = parse_params(_params(_system("mine", path)))
    corpus, _ = question_set(p, Path("."))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        every = questions_from_imported(p, corpus)
    assert every["doc_id"].tolist() == ["W01", "", "", ""]
    assert every["error"].tolist()[1:] == [
        "no gold document: its ids name several documents (W02, W04)",
        "no gold document: doc id(s) ['w08'] not in the knowledge base",
        "no gold document: no reference context",
    ]
    assert "3 of 4 question(s)" in str(caught[0].message)


def test_deepeval_joined_cells_split_only_under_deepeval_names():
    joined = "First passage.|Second passage."
    assert parse_passages(joined, joined=True) == ["First passage.", "Second passage."]
    assert parse_passages(joined) == [joined]  # our own column: one passage, whatever it holds
    marker = "deepeval_source=W01,deepeval_context=Twelve pounds a year."
    assert parse_passages([marker, "plain"]) == ["Twelve pounds a year.", "plain"]


def test_a_file_without_gold_or_without_any_gold_is_refused_naming_the_columns(tmp_path):
    no_gold = tmp_path / "plain.jsonl"
    pd.read_json(D / "ragas_eval.jsonl", lines=True).drop(columns=["reference_contexts"]).to_json(
        no_gold, orient="records", lines=True
    )
    p = parse_params(_params(_system("mine", no_gold)))
    with pytest.raises(QuestionError, match="no column giving each question's gold document"):
        question_set(p, Path("."))
    shared = tmp_path / "shared.jsonl"
    pd.read_json(D / "ragas_eval.jsonl", lines=True).iloc[12:].to_json(
        shared, orient="records", lines=True
    )
    p = parse_params(_params(_system("mine", shared)))
    with pytest.raises(QuestionError, match="none of the 2 questions has a gold document"):
        question_set(p, Path("."))


def test_a_question_asked_twice_is_refused_naming_the_rows(tmp_path):
    twice = tmp_path / "twice.jsonl"
    df = pd.read_json(D / "ragas_eval.jsonl", lines=True)
    pd.concat([df, df.iloc[[0]]]).to_json(twice, orient="records", lines=True)
    p = parse_params(_params(_system("mine", twice)))
    with pytest.raises(QuestionError, match=r"same question on several rows \(data rows 1, 15"):
        question_set(p, Path("."))


def test_params_name_the_imported_system_holding_the_questions():
    with pytest.raises(ParamsError, match="add one under `systems:`"):
        parse_params(_params({"kind": "builtin", "name": "bm25"}))
    two = (_system("a", D / FILES[0]), _system("b", D / FILES[2]))
    with pytest.raises(ParamsError, match=r"questions.system \(\['a', 'b'\]\)"):
        parse_params(_params(*two))
    with pytest.raises(ParamsError, match="'c' is not a `kind: imported` system"):
        parse_params(_params(*two, system="c"))
    assert parse_params(_params(*two, system="b")).question_source().name == "b"


def test_cube_validate_says_ok_or_names_the_problem(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(_params(_system("mine", D / "deepeval_dataset.csv"))))
    assert main(["validate", str(good)]) == 0
    out = capsys.readouterr().out
    assert "validate: OK" in out and "answers 12 of the 12 questions" in out
    plain = tmp_path / "plain.csv"
    pd.read_csv(D / "deepeval_dataset.csv").drop(columns=["context"]).to_csv(plain, index=False)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_params(_system("mine", plain))))
    assert main(["validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "no column giving each question's gold document" in out


def test_question_file_encoding_error_names_questions_encoding(tmp_path):
    path = tmp_path / "q.csv"
    path.write_bytes("question,doc_id\n狗证要多少钱？,W01\n".encode("gbk"))
    params = _params(_system("mine", D / FILES[0]))
    params["questions"] = {"generator": "file", "path": str(path)}
    params["systems"] = [{"kind": "builtin", "name": "bm25"}]
    with pytest.raises(QuestionError, match="set questions.encoding to the file's encoding"):
        question_set(parse_params(params), Path("."))
    params["questions"]["encoding"] = "gbk"
    _, questions = question_set(parse_params(params), Path("."))
    assert questions["question"].tolist() == ["狗证要多少钱？"]


def test_a_passage_that_starts_with_a_bracket_is_one_passage_not_a_broken_list():
    from cube.systems.cells import parse_passages

    # a citation marker is text; a cell that parses as a list is a list, "[]" an empty one
    assert parse_passages("[1] The passport office opens at nine.") == [
        "[1] The passport office opens at nine."
    ]
    assert parse_passages('["a b", "c d"]') == ["a b", "c d"]
    assert parse_passages("[]") == []
