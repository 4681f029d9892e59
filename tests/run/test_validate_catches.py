"""`cube validate` makes every check `cube run` makes before its first model call (issue 28): each
mistake a new user made (a comma-separated id list, unanswered questions, a relative path in a
params file outside the repository, a misspelled key) is reported with its fix and exit code 2,
all at once, instead of `validate: OK` and a failure at stage 02."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube import cli
from tests import ROOT

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}]


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user's folder outside the repository, with an 8-item knowledge base, its question file
    (q1..q8) and a params file importing `answers.csv`; commands run from the repository root."""
    from cube.kb.demo import generate_demo_corpus

    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    folder = tmp_path / "user"
    folder.mkdir()
    kb = generate_demo_corpus(8, "en", seed=1).drop(columns=["text"])
    kb.to_csv(folder / "kb.csv", index=False)
    questions = pd.DataFrame(
        {
            "question_id": [f"q{i + 1}" for i in range(8)],
            "question": [f"How do I apply for {name}?" for name in kb["item_name"]],
            "doc_id": kb["doc_id"],
        }
    )
    questions.to_csv(folder / "questions.csv", index=False)
    _params(folder)
    return folder


def _params(folder: Path, **changes) -> Path:
    system = {"kind": "imported", "name": "mine", "path": "answers.csv"}
    system.update(changes.pop("system", {}))
    data = {
        "run": "mine",
        "lang": "en",
        "corpus": {"source": "file", "path": "./kb.csv"},
        "questions": {"generator": "file", "path": "questions.csv"},
        "answerer": {"provider": "offline", "model": "extractive"},
        "systems": [system],
        "judges": JUDGES,
        **changes,
    }
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def _answers(folder: Path, n: int = 8, sep: str = "|") -> None:
    """Answers to the first `n` questions, each retrieving its gold document first."""
    q = pd.read_csv(folder / "questions.csv", dtype=str)
    kb = pd.read_csv(folder / "kb.csv", dtype=str)
    other = kb["doc_id"].iloc[-1]
    pd.DataFrame(
        {
            "question_id": q["question_id"][:n],
            "answer": ["Apply at the office with your ID card."] * n,
            "retrieved_doc_ids": [f"{d}{sep}{other}" for d in q["doc_id"][:n]],
        }
    ).to_csv(folder / "answers.csv", index=False)


def _validate(path: Path, capsys) -> tuple[int, list[str], str]:
    code = cli.main(["validate", str(path)])
    out, err = capsys.readouterr()
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    return code, errors, out + err


def test_a_complete_import_validates(user, capsys):
    _answers(user)
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 0 and errors == [], out
    assert "answers 8 of the 8 questions of the run's question set" in out


def test_unanswered_questions_fail_validate_naming_on_invalid_drop(user, capsys):
    _answers(user, n=6)
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 2 and len(errors) == 1, out
    assert "2 question(s) of the question set have no answer" in errors[0]
    assert "['q7', 'q8']" in errors[0] and "on_invalid: drop" in errors[0]
    assert "the run would evaluate 6 of 8 questions" in errors[0]
    # the fix it names works: the run then evaluates the 6, with a warning
    _params(user, system={"on_invalid": "drop"})
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 0 and errors == [], out
    assert "warning: " in out and "dropped 2 of 8 question(s)" in out


def test_a_comma_separated_id_list_fails_validate(user, capsys):
    _answers(user, sep=",")
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 2 and errors, out
    assert "answers.csv" in errors[0] and "systems[mine]" in errors[0]


def test_a_comma_separated_id_list_error_names_the_separators(user, capsys):
    _answers(user, sep=",")
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 2 and errors
    assert "comma" in errors[0].lower() and "|" in errors[0] and ";" in errors[0], errors[0]


def test_a_relative_path_is_read_from_the_params_file_and_a_missing_one_named(
    user, tmp_path, monkeypatch, capsys
):
    _answers(user)
    monkeypatch.chdir(tmp_path)  # neither the repository nor the user's folder
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 0 and errors == [], out
    (user / "kb.csv").rename(user / "kb-renamed.csv")
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 2, out
    line = next(e for e in errors if "corpus.path" in e)
    assert "'./kb.csv' not found" in line and str(user / "params.yaml") in line
    assert str(user / "kb.csv") in line  # the path it was resolved to


def test_a_misspelled_key_fails_validate_with_did_you_mean(user, capsys):
    _answers(user)
    _params(user, system={"on_invalid": "drop", "top_N": 8})
    code, _, out = _validate(user / "params.yaml", capsys)
    assert code == 2 and "systems[mine].top_N: unknown key; did you mean 'top_n'?" in out


def test_every_problem_at_once_and_the_stage_03_inputs(user, capsys):
    """A missing answers file, a missing prompt file and a missing ratings file: three errors in
    one report, each naming its key (the run would have stopped at stages 02, 03 and 07)."""
    _params(
        user,
        dimensions=[{"name": "relevance", "prompt_file": "prompts/relevance.txt"}],
        human={"ratings": "ratings/"},
    )
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 2, out
    keys = [e.split(":")[1].strip() for e in errors]
    assert keys == ["systems[mine].path", "dimensions[relevance].prompt_file", "human.ratings"]


def test_template_questions_are_built_as_the_run_builds_them(user, capsys):
    """`cube questions` writes the run's question set; answers to it validate; with an LLM
    question writer validate says coverage is checked at run time."""
    _params(user, questions={"generator": "template", "per_doc": 1, "seed": 3})
    out_file = user / "to_answer.csv"
    assert cli.main(["questions", str(user / "params.yaml"), "--out", str(out_file)]) == 0
    capsys.readouterr()
    asked = pd.read_csv(out_file, dtype=str, keep_default_na=False)
    assert list(asked.columns) == ["question_id", "question", "lang", "answer", "retrieved_doc_ids"]
    assert len(asked) == 8 and (asked["answer"] == "").all() and (asked["lang"] == "en").all()
    asked["answer"] = "Apply at the office."
    asked["retrieved_doc_ids"] = pd.read_csv(user / "kb.csv", dtype=str)["doc_id"].iloc[0]
    asked.to_csv(user / "answers.csv", index=False)
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 0 and errors == [], out
    _params(
        user,
        questions={"generator": "llm", "model": {"provider": "offline", "model": "extractive"}},
    )
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert "coverage of imported answers is checked at run time" in out


def test_a_run_folder_of_another_params_file_fails_validate_naming_force(user, capsys):
    from cube.config.params import load_params
    from cube.config.runpaths import RunPaths
    from cube.run.stages import record_provenance

    _answers(user)
    other = _params(user)
    params = load_params(other)
    data = RunPaths.for_params(params, params.outputs_dir).data
    data.mkdir(parents=True)
    changed = params.model_copy(update={"lang": "zh"})
    record_provenance(data, "corpus", changed, "someone/else.yaml")
    code, errors, out = _validate(user / "params.yaml", capsys)
    assert code == 2 and any("--force" in e and "`run:`" in e for e in errors), out
