"""Paths in a params file are read from the file's folder (issue 28): wherever the command runs
from, whatever the project root; absolute and `~/` paths are kept; `outputs_dir` defaults to the
project's outputs/ for a file inside the project, else to outputs/ beside the file; the run
folder's recorded params.yaml and a sweep's combination files name the same files again."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cube.config.overrides import load_params_with_overrides
from cube.config.params import load_params
from cube.config.project import local_paths, paths_from_file, paths_relative_to
from tests import ROOT

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}]


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """The command runs from an unrelated folder, with the repository as project root."""
    monkeypatch.setenv("CUBE_PROJECT_ROOT", str(ROOT))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path


def test_relative_paths_are_read_from_the_params_files_folder(elsewhere):
    p = _write(
        elsewhere / "mine" / "params.yaml",
        {
            "run": "mine",
            "judges": JUDGES,
            "corpus": {"source": "file", "path": "./kb.csv"},
            "questions": {"generator": "file", "path": "../shared/questions.csv"},
            "answerer": {"provider": "offline", "model": "extractive"},
            "systems": [{"kind": "imported", "name": "sys", "path": "answers/a.jsonl"}],
            "human": {"ratings": "/abs/ratings.csv", "key": "~/key.csv"},
            "dimensions": [{"name": "relevance", "prompt_file": "prompts/rel.txt"}],
        },
    )
    params = load_params(p)
    folder = elsewhere / "mine"
    assert params.corpus.path == str(folder / "kb.csv")
    assert params.questions.path == str(elsewhere / "shared" / "questions.csv")
    assert params.systems[0].path == str(folder / "answers" / "a.jsonl")
    assert params.dimension_list()[0].prompt_file == str(folder / "prompts" / "rel.txt")
    assert (params.human.ratings, params.human.key) == ("/abs/ratings.csv", "~/key.csv")
    # outside the project: outputs beside the params file, not in the repository's outputs/
    assert params.outputs_dir == str(folder / "outputs")


def test_outputs_dir_default_and_explicit(elsewhere):
    inside = load_params(ROOT / "params" / "default.yaml")
    assert inside.outputs_dir == str(ROOT / "outputs")  # the shipped params: as before
    p = _write(elsewhere / "x" / "p.yaml", {"run": "x", "judges": JUDGES, "outputs_dir": "out"})
    assert load_params(p).outputs_dir == str(elsewhere / "x" / "out")
    p = _write(elsewhere / "x" / "q.yaml", {"run": "x", "judges": JUDGES, "cache_path": "c.db"})
    assert load_params(p).cache_path == str(elsewhere / "x" / "c.db")


def test_overrides_are_read_like_the_file(elsewhere):
    p = _write(elsewhere / "o" / "p.yaml", {"run": "o", "judges": JUDGES})
    params = load_params_with_overrides(p, ["corpus.source=file", "corpus.path=data/kb.csv"])
    assert params.corpus.path == str(elsewhere / "o" / "data" / "kb.csv")
    assert load_params(p, {"corpus": {"source": "file", "path": "k.csv"}}).corpus.path == str(
        elsewhere / "o" / "k.csv"
    )


def test_the_shipped_params_name_their_files_from_params():
    params = load_params(ROOT / "params" / "own_kb.yaml")
    assert Path(params.corpus.path) == ROOT / "data" / "example_guides.xlsx"
    assert Path(params.corpus.path).is_file()


def test_a_python_systems_file_is_a_path_and_a_module_is_not():
    data = {
        "systems": [
            {"kind": "python", "name": "a", "callable": "rag/app.py:answer", "bounds": "x.y:z"},
            {"kind": "python", "name": "b", "callable": "my_pkg.rag:answer"},
        ]
    }
    out = paths_from_file(data, "/p/params.yaml", Path("/elsewhere"))
    assert out["systems"][0]["callable"] == "/p/rag/app.py:answer"
    assert out["systems"][0]["bounds"] == "x.y:z" and out["systems"][1] == data["systems"][1]
    assert local_paths(out) == {
        "systems[a].callable": "/p/rag/app.py",
        "outputs_dir": "/p/outputs",
    }


def test_the_recorded_params_run_again_as_recorded(elsewhere, monkeypatch):
    """outputs/<run>/params.yaml (what `cube run` and a notebook write) names the same files
    when loaded from the run folder, for a project inside the repository and one outside."""
    from cube.run.notebook import shared_params_yaml

    for folder in (elsewhere / "mine", ROOT / "outputs" / ".test-paths-inside"):
        try:
            p = _write(
                folder / "params.yaml",
                {"run": "r", "judges": JUDGES, "corpus": {"source": "file", "path": "kb.csv"}},
            )
            params = load_params(p)
            run = Path(params.outputs_dir) / "r"
            recorded = shared_params_yaml(params, run)
            assert str(folder) not in recorded  # no local folder layout is written
            again = load_params(_write(run / "params.yaml", yaml.safe_load(recorded)))
            assert again.corpus.path == params.corpus.path
            assert Path(again.outputs_dir).resolve() == Path(params.outputs_dir).resolve()
        finally:
            if folder.is_relative_to(ROOT):
                import shutil

                shutil.rmtree(folder, ignore_errors=True)


def test_paths_relative_to_keeps_what_lies_outside_its_anchors(tmp_path):
    data = {"corpus": {"path": "/far/away/kb.csv"}, "human": {"key": "~/k.csv"}}
    shown = paths_relative_to(data, tmp_path / "proj" / "outputs" / "r", tmp_path / "proj")
    assert shown == data  # neither in the project nor beside the outputs: for shared_values to hide
    inside = {"corpus": {"path": str(tmp_path / "proj" / "kb.csv")}}
    assert paths_relative_to(inside, tmp_path / "proj" / "outputs" / "r", tmp_path / "proj") == {
        "corpus": {"path": "../../kb.csv"}
    }
    # a run folder outside the project: relative when the file lies beside its outputs folder
    assert paths_relative_to(inside, tmp_path / "out" / "r", tmp_path / "proj") == {
        "corpus": {"path": "../../proj/kb.csv"}
    }


def test_a_key_named_path_in_a_users_own_mapping_is_no_file():
    """Only the schema's path keys are read as files: an HTTP body's or a header's `path`, or a
    column named `path`, is a value."""
    data = {
        "systems": [
            {"kind": "http", "name": "h", "body": {"path": "docs/x"}, "headers": {"path": "y"}},
            {"kind": "imported", "name": "i", "path": "a.csv"},
        ],
        "corpus": {"columns": {"item_name": "path"}},
    }
    out = paths_from_file(data, "/p/params.yaml", Path("/elsewhere"))
    assert out["systems"][0] == data["systems"][0] and out["corpus"] == data["corpus"]
    assert out["systems"][1]["path"] == "/p/a.csv"
