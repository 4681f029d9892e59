"""`cube init` writes a params file that validates, for each system and judge choice (issue 28),
asks on a terminal, takes flags otherwise, and never overwrites a file without --force."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube import cli
from cube.run.scaffold import InitChoices, prompt_choices, suggest_columns


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user's folder outside the repository with an 8-item knowledge base; commands run from
    it."""
    from cube.kb.demo import generate_demo_corpus

    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    folder = tmp_path / "proj"
    folder.mkdir()
    generate_demo_corpus(8, "en", seed=1).drop(columns=["text"]).to_csv(
        folder / "kb.csv", index=False
    )
    monkeypatch.chdir(folder)
    return folder


def _init_then_validate(capsys, path: str, *flags: str) -> tuple[str, str]:
    assert cli.main(["init", path, "--no-input", *flags]) == 0
    written = capsys.readouterr().out
    code = cli.main(["validate", path])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    return written, Path(path).read_text(encoding="utf-8")


def _kind_known(kind: str) -> bool:
    from typing import get_args

    from cube.config.params import Params

    union = get_args(get_args(Params.model_fields["systems"].annotation)[0])[0]
    return any(t.model_fields["kind"].default == kind for t in get_args(union))


def test_the_demo_with_offline_judges_is_the_default(home, capsys):
    written, text = _init_then_validate(capsys, "params.yaml")
    assert "cube validate params.yaml" in written and "cube run params.yaml" in written
    data = yaml.safe_load(text)
    assert data["corpus"]["source"] == "demo" and data["run"] == "proj"
    assert [j["name"] for j in data["judges"]] == ["rubric-lenient", "rubric-strict"]
    assert all(len(line) <= 100 for line in text.splitlines())


def test_your_knowledge_base_with_the_baseline_paths_from_the_file(home, capsys):
    _, text = _init_then_validate(
        capsys, "params/mine.yaml", "--system", "baseline", "--kb", "kb.csv", "--lang", "en"
    )
    data = yaml.safe_load(text)
    assert data["corpus"] == {"source": "file", "path": "../kb.csv"}  # from params/
    assert data["systems"][0]["kind"] == "builtin"


def test_imported_answers_and_an_openai_judge(home, capsys, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-not-a-real-key")
    args = ["--system", "imported", "--kb", "kb.csv", "--answers", "answers.csv"]
    judge = ["--judge", "openai", "--model", "gpt-4o-mini", "--api-key-env", "MY_JUDGE_KEY"]
    assert cli.main(["init", "p.yaml", "--no-input", *args, *judge]) == 0
    steps = capsys.readouterr().out
    assert "cube questions p.yaml --out questions.csv" in steps and "export MY_JUDGE_KEY" in steps
    assert cli.main(["validate", "p.yaml"]) == 2  # no answers yet: named, with what to do
    assert "answers.csv' not found" in capsys.readouterr().out
    assert cli.main(["questions", "p.yaml", "--out", "answers.csv"]) == 0
    asked = pd.read_csv("answers.csv", dtype=str, keep_default_na=False)
    asked["answer"] = "Apply at the office."
    asked["retrieved_doc_ids"] = '["D00001", "D00002"]'
    asked.to_csv("answers.csv", index=False)
    capsys.readouterr()
    assert cli.main(["validate", "p.yaml"]) == 0, capsys.readouterr()
    text = Path("p.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert data["models"]["judge"]["api_key_env"] == "MY_JUDGE_KEY"
    assert "sk-not-a-real-key" not in text and "REPLACE" in text  # the answerer to set
    assert data["systems"] == [{"kind": "imported", "name": "my-system", "path": "answers.csv"}]


def test_a_ragas_dataset_gives_the_questions_without_a_question_file(home, capsys):
    """A dataset holding its questions and reference contexts (ragas' own export, committed under
    tests/fixtures/datasets) makes `questions: {generator: imported}`, and the params validate."""
    import shutil

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
    shutil.copy(fixtures / "wrenford_guides.csv", "guides.csv")
    shutil.copy(fixtures / "ragas_eval.jsonl", "ragas.jsonl")
    args = ["--system", "imported", "--kb", "guides.csv", "--answers", "ragas.jsonl"]
    written, text = _init_then_validate(capsys, "p.yaml", *args)
    assert yaml.safe_load(text)["questions"] == {"generator": "imported"}
    assert "cube questions" not in written  # nothing to ask: the dataset holds the questions
    assert "docs/how-to/ragas-deepeval.md" in text


def test_a_local_cube_serve_jury(home, capsys):
    _, text = _init_then_validate(capsys, "p.yaml", "--judge", "local", "--port", "9001")
    data = yaml.safe_load(text)
    assert data["models"]["local-judge"]["base_url"] == "http://127.0.0.1:9001/v1"
    assert len(data["judges"]) == 3


@pytest.mark.skipif(not _kind_known("http"), reason="kind: http comes with branch `http`")
def test_an_http_system(home, capsys):
    _, text = _init_then_validate(
        capsys, "p.yaml", "--system", "http", "--kb", "kb.csv", "--url", "http://127.0.0.1:9/ask"
    )
    assert yaml.safe_load(text)["systems"][0]["url"] == "http://127.0.0.1:9/ask"


@pytest.mark.skipif(not _kind_known("python"), reason="kind: python comes with branch `pysys`")
def test_a_python_system(home, capsys):
    (home / "rag").mkdir()
    (home / "rag" / "app.py").write_text(
        "def answer(question):\n    return {'answer': 'x', 'retrieved_ids': []}\n",
        encoding="utf-8",
    )
    _, text = _init_then_validate(
        capsys,
        "cfg/p.yaml",
        "--system",
        "python",
        "--kb",
        "kb.csv",
        "--callable",
        "rag/app.py:answer",
    )
    assert yaml.safe_load(text)["systems"][0]["callable"] == "../rag/app.py:answer"


def test_an_existing_file_is_kept_and_missing_values_are_named(home, capsys):
    Path("params.yaml").write_text("mine: true\n", encoding="utf-8")
    assert cli.main(["init", "--no-input"]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert Path("params.yaml").read_text(encoding="utf-8") == "mine: true\n"
    assert cli.main(["init", "--no-input", "--force"]) == 0
    capsys.readouterr()
    assert cli.main(["init", "x.yaml", "--no-input", "--system", "http", "--judge", "openai"]) == 2
    assert "need --kb, --url, --model" in capsys.readouterr().err
    assert not Path("x.yaml").exists()


def test_on_a_terminal_it_asks_only_what_the_choices_need(home):
    # system, kb, question file, answers, answerer model, judge, its model, base_url, key
    # variable, run name, language
    answers = iter(
        ["imported", "kb.csv", "", "out/answers.jsonl", "", "openai", "gpt-x"] + [""] * 4
    )
    asked: list[str] = []

    def ask(question, default, choices=None):
        asked.append(question)
        value = next(answers)
        return value or default

    c = prompt_choices(InitChoices(), ask)
    assert (c.system, c.judge, c.model, c.api_key_env) == (
        "imported",
        "openai",
        "gpt-x",
        "OPENAI_API_KEY",
    )
    assert c.kb == home / "kb.csv" and c.answers == home / "out" / "answers.jsonl"
    assert not any("URL" in q or "function" in q for q in asked)


def test_columns_named_like_field_keys_or_labels_are_mapped(tmp_path):
    kb = tmp_path / "kb.csv"
    pd.DataFrame(
        {"ID": ["a"], "Title": ["Passport"], "Fee Standard": ["free"], "notes": ["x"]}
    ).to_csv(kb, index=False)
    mapping, left = suggest_columns(kb)
    assert mapping == {"doc_id": "ID", "item_name": "Title", "fee_standard": "Fee Standard"}
    assert left == ["notes"]
