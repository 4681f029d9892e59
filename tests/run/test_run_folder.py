"""Run folders and their provenance (review 3's findings): a failed cell never deletes a folder
`open_run` did not create nor the user's params file kept in it; published records hold no local
absolute path; old provenance records compare like new ones; a diagnostics edit re-runs only the
stages reading it."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests import ROOT

JUDGES = [
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
]


def _project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    (root / "params").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    (root / "cube").symlink_to(ROOT / "cube", target_is_directory=True)
    monkeypatch.setenv("CUBE_PROJECT_ROOT", str(root))
    return root


# ---------------------------------------------- 2. a failed cell deletes only what open_run created
def test_a_failed_cell_keeps_an_existing_run_folder_and_the_params_file_kept_in_it(
    tmp_path, monkeypatch
):
    from cube.run.notebook import open_run, remove_if_empty

    root = _project(tmp_path, monkeypatch)
    run_folder = root / "outputs" / "exp1"
    run_folder.mkdir(parents=True)
    mine = run_folder / "params.yaml"  # the user's own params file, kept in its run folder
    text = "# my experiment, with a comment\n" + yaml.safe_dump(
        {"run": "exp1", "cache_path": "caches/exp1.sqlite", "judges": JUDGES}
    )
    mine.write_text(text, encoding="utf-8")
    run = open_run(str(mine))
    assert mine.read_text(encoding="utf-8") == text  # never overwritten by the resolved params
    assert run.params.run == "exp1"
    # only the cache folder was new: the run folder is never removed, nor the user's file in it
    assert not remove_if_empty(run.paths, [root / "caches"])
    assert mine.read_text(encoding="utf-8") == text
    assert not (root / "caches").exists()  # the folder open_run created, empty, goes
    from cube.run.record import CorpusRecord

    run.write_record(CorpusRecord(corpus_items=1))  # a later write keeps the user's file as it is
    assert mine.read_text(encoding="utf-8") == text


def test_a_failed_cell_removes_a_run_folder_open_run_created(tmp_path, monkeypatch):
    from cube.run.notebook import open_run, remove_if_empty

    root = _project(tmp_path, monkeypatch)
    (root / "params" / "p.yaml").write_text(
        yaml.safe_dump({"run": "fresh", "judges": JUDGES}), encoding="utf-8"
    )
    run = open_run("params/p.yaml")
    assert (root / "outputs" / "fresh" / "params.yaml").exists()
    assert remove_if_empty(run.paths, [run.paths.root, root / "outputs"])
    assert not (root / "outputs").exists()


# ------------------------------------------------- 4. no local absolute path in published records
def test_provenance_holds_no_local_path_and_still_tells_two_files_of_one_name_apart(
    tmp_path, monkeypatch
):
    import json

    import pytest

    from cube.config.params import parse_params
    from cube.run.stages import ParamsMismatchError, check_provenance, record_provenance

    root = _project(tmp_path, monkeypatch)
    elsewhere = tmp_path / "private" / "kb.csv"
    inside = root / "data" / "kb.csv"
    data = root / "outputs" / "r" / "data"
    data.mkdir(parents=True)

    def params(path: Path):
        return parse_params(
            {
                "run": "r",
                "judges": JUDGES,
                "corpus": {"source": "file", "path": str(path)},
                "human": {"key": str(tmp_path / "private" / "key.csv")},
            }
        )

    record_provenance(data, "corpus", params(elsewhere), "params/p.yaml")
    text = (data / ".provenance.json").read_text(encoding="utf-8")
    assert str(tmp_path) not in text and "kb.csv" in text
    check_provenance(
        data, "corpus", params(elsewhere), "params/p.yaml", "outputs/r"
    )  # unchanged: no error
    with pytest.raises(ParamsMismatchError, match="corpus.path"):  # same name, other folder
        check_provenance(
            data, "corpus", params(tmp_path / "other" / "kb.csv"), "params/p.yaml", "outputs/r"
        )
    record_provenance(data, "corpus", params(inside), "params/p.yaml")
    recorded = json.loads((data / ".provenance.json").read_text(encoding="utf-8"))["corpus"][
        "params"
    ]
    assert recorded["corpus"]["path"] == "data/kb.csv"
    # a record written before this change, with the absolute path, still agrees with unchanged
    # params
    recorded["corpus"]["path"] = str(inside)
    (data / ".provenance.json").write_text(
        json.dumps(
            {
                "corpus": {
                    "stage": "01_dataset_prep",
                    "params_file": "params/p.yaml",
                    "params": recorded,
                }
            }
        ),
        encoding="utf-8",
    )
    check_provenance(data, "corpus", params(inside), "params/p.yaml", "outputs/r")


def test_the_human_key_path_is_shown_by_name_in_params_yaml_and_the_manifest():
    import json

    from cube.config.params import parse_params
    from cube.config.project import shared_values
    from cube.run.notebook import shared_params_yaml

    p = parse_params(
        {
            "run": "r",
            "judges": JUDGES,
            "human": {
                "ratings": "/home/alice/private/ratings.csv",
                "key": "/home/alice/private/annotation_key.csv",
            },
        }
    )
    shown = yaml.safe_load(shared_params_yaml(p).split("\n", 1)[1])["human"]
    assert shown["ratings"] == "ratings.csv" and shown["key"] == "annotation_key.csv"
    assert shared_values(json.loads(p.model_dump_json()))[0]["human"]["key"] == "annotation_key.csv"
    # a value under another `key` is a value, never rewritten as a path
    assert shared_values({"x": {"key": "/not/a/path"}})[0] == {"x": {"key": "/not/a/path"}}


# ---------------------------------------- S1. provenance recorded by an earlier version still
# agrees
def test_a_provenance_record_of_an_earlier_version_agrees_with_unchanged_params(tmp_path):
    import json

    import pytest

    from cube.config.params import load_params
    from cube.run.stages import (
        ParamsMismatchError,
        check_provenance,
        check_run_folder,
        upstream_sections,
    )

    params = load_params(ROOT / "params" / "llm_jury.yaml")
    assert (
        params.models
    )  # whole `models:` entries, prices and concurrency included, as recorded before
    dumped = json.loads(params.model_dump_json())
    sections = {
        s.split(".")[0]: None for s in upstream_sections("03_scoring_sets")
    }  # whole sections then
    old = {s: dumped.get(s) for s in sections}  # the earlier section_values
    (tmp_path / ".provenance.json").write_text(
        json.dumps(
            {
                "scores": {
                    "stage": "03_scoring_sets",
                    "params_file": "params/llm_jury.yaml",
                    "params": old,
                }
            }
        ),
        encoding="utf-8",
    )
    check_provenance(tmp_path, "scores", params, "params/llm_jury.yaml", "outputs/llm_jury")
    check_run_folder(tmp_path, params, "params/other.yaml", "outputs/llm_jury")
    judge_model = next(iter(old["models"]))
    old["models"][judge_model]["model"] = "another-model"  # a real difference is still seen
    (tmp_path / ".provenance.json").write_text(
        json.dumps(
            {
                "scores": {
                    "stage": "03_scoring_sets",
                    "params_file": "params/llm_jury.yaml",
                    "params": old,
                }
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ParamsMismatchError, match=f"models.{judge_model}.model"):
        check_provenance(tmp_path, "scores", params, "params/llm_jury.yaml", "outputs/llm_jury")


# ------------------------------------- S2. a diagnostics threshold re-runs only the stages reading
# it
def _stage_set(edit) -> list[str]:
    import copy

    from cube.config.params import parse_params
    from cube.config.project import list_notebooks
    from cube.run.stages import stage_fingerprints, stages_affected

    notebooks = list_notebooks(ROOT / "notebooks")
    base = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    edited = copy.deepcopy(base)
    edit(edited.setdefault("diagnostics", {}))
    before = stage_fingerprints(parse_params(base), notebooks, ROOT)
    return [
        n[:2]
        for n in stages_affected(before, stage_fingerprints(parse_params(edited), notebooks, ROOT))
    ]


def test_a_diagnostics_threshold_re_runs_the_decision_and_diagnostics_stages_only():
    assert _stage_set(lambda d: d.update(judge_disagreement_above=5.0)) == ["06", "10"]
    assert _stage_set(lambda d: d.update(low_rank_from=6)) == ["06", "10"]
    # what stage 02 reads of `diagnostics` (the refusal questions) re-runs it and every stage after
    # it
    assert _stage_set(lambda d: d.update(refusal_questions=3)) == [
        "02",
        "03",
        "04",
        "05",
        "06",
        "07",
        "08",
        "09",
        "10",
        "11",
    ]


def test_answers_recorded_before_a_threshold_edit_still_agree_with_the_params(
    tmp_path, monkeypatch
):
    import pytest

    from cube.config.params import parse_params
    from cube.run.stages import ParamsMismatchError, check_provenance, record_provenance

    _project(tmp_path, monkeypatch)
    record_provenance(
        tmp_path, "answers", parse_params({"run": "r", "judges": JUDGES}), "params/p.yaml"
    )
    edited = parse_params(
        {"run": "r", "judges": JUDGES, "diagnostics": {"judge_disagreement_above": 5.0}}
    )
    check_provenance(
        tmp_path, "answers", edited, "params/p.yaml", "outputs/r"
    )  # 02 does not read it
    refusals = parse_params({"run": "r", "judges": JUDGES, "diagnostics": {"refusal_questions": 3}})
    with pytest.raises(ParamsMismatchError, match="refusal_questions"):
        check_provenance(tmp_path, "answers", refusals, "params/p.yaml", "outputs/r")


def test_the_stage_reruns_benchmark_counts_a_diagnostics_threshold_edit(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "stage_reruns", ROOT / "benchmarks" / "stage_reruns.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if x.startswith("diagnostics.judge_disagreement_above"))
    assert line.endswith("now 2: ['06', '10']"), line
    assert lines[-1].startswith("stages_rerun_after_adding_a_judge_with_its_own_models_entry: ")


# ------------------------------ 1. a notebook run alone is recorded, also when it writes no data
def _code(nb: Path) -> list[str]:
    import json

    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_the_running_notebook_is_recognised_from_the_cells_its_kernel_executed():
    from cube.run.notebook import PARAMETERS_CELL
    from cube.run.ran_alone import identify_notebook

    folder = ROOT / "notebooks"
    notebooks = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 10
    for nb in notebooks:
        cells = _code(nb)
        injected = (
            '# Parameters\nparams_path = "params/x.yaml"\n'
            'overrides = ["analysis.trim_proportion=0.3"]\n'
        )
        assert identify_notebook([cells[0], cells[1], injected, cells[2]], folder) == nb.stem, nb
    assert (
        identify_notebook([PARAMETERS_CELL], folder) is None
    )  # common to every notebook: not telling
    assert identify_notebook(["print('my own cell')"], folder) is None


def test_cube_run_sees_a_stage_run_alone_with_other_params_that_wrote_no_data(
    tmp_path, monkeypatch
):
    import pandas as pd

    from cube.config.params import parse_params
    from cube.config.runpaths import RunPaths
    from cube.run.notebook import Run, shared_params_yaml, write_shared_params
    from cube.run.ran_alone import RAN_ALONE, forget_ran_alone, stages_ran_alone, stages_run_outside
    from cube.run.record import CorpusRecord

    _project(tmp_path, monkeypatch)
    stems = [nb.stem for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    mine = parse_params({"run": "r", "judges": JUDGES})
    other = parse_params({"run": "r", "judges": JUDGES, "analysis": {"trim_proportion": 0.3}})
    paths = RunPaths(root=tmp_path / "out" / "r", cache=tmp_path / "out" / "cache.sqlite").ensure()

    def outside(params=mine):
        return stages_run_outside(paths.root, params, shared_params_yaml(params), {}, stems)

    Run(
        params=other,
        paths=paths,
        params_path=tmp_path / "p.yaml",
        alone=True,
        stage="06_cube_score",
    ).write_record(CorpusRecord(corpus_items=1))
    # 07 then runs alone with the file's params: params.yaml no longer shows 06's overrides
    Run(
        params=mine,
        paths=paths,
        params_path=tmp_path / "p.yaml",
        alone=True,
        stage="07_human_agreement",
    ).table("t", pd.DataFrame({"x": [1]}))
    write_shared_params(mine, paths)  # as 07's open_run did
    assert str(tmp_path) not in (paths.notebooks / RAN_ALONE).read_text(encoding="utf-8")
    found = outside()
    assert (
        "analysis.trim_proportion" in found["06_cube_score"]
        and "notebook 06_cube_score" in found["06_cube_score"]
    )
    assert found["10_diagnostics"] == "it reads the data of 06_cube_score"
    assert "07_human_agreement" not in found and "04_rank_correlation" not in found
    assert set(stages_ran_alone(paths.notebooks, other, stems)) == {
        "07_human_agreement"
    }  # under 06's params
    forget_ran_alone(paths.notebooks, {"06_cube_score"})
    assert "06_cube_score" not in outside()
    # a notebook not recognised counts for every stage reading what differs
    Run(params=other, paths=paths, params_path=tmp_path / "p.yaml", alone=True).figure(
        "f", __import__("matplotlib.pyplot").pyplot.figure()
    )
    assert {"04_rank_correlation", "05_bounds_and_weights", "06_cube_score", "09_compare"} <= set(
        outside()
    )
    assert (
        "01_dataset_prep" not in outside() and "not recognised" in outside()["04_rank_correlation"]
    )
    forget_ran_alone(paths.notebooks)
    assert not (paths.notebooks / RAN_ALONE).exists()
    # a Run of `cube run` (not alone) records nothing
    Run(params=other, paths=paths, params_path=tmp_path / "p.yaml").write_record(
        CorpusRecord(corpus_items=2)
    )
    assert not (paths.notebooks / RAN_ALONE).exists()


def test_cube_run_re_executes_a_stage_papermill_ran_alone_with_overrides_though_it_wrote_no_data(
    tmp_path, monkeypatch
):
    import json
    import os

    import papermill as pm

    from cube.run.execute import execute_run

    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(ROOT)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "alone",
                "outputs_dir": str(tmp_path / "out"),
                "judges": JUDGES,
                "corpus": {"n_items": 12, "seed": 1},
                "questions": {"limit": 6},
                "analysis": {"bootstrap": 50},
                "stages": {"paper_tables": "on"},  # `auto` skips it under 50 questions
            }
        ),
        encoding="utf-8",
    )
    run = tmp_path / "out" / "alone"
    first = execute_run(params, only="00..04", log=lambda _: None)
    assert first.ok and [s.status for s in first.stages] == ["executed"] * 5
    table = (run / "tables").glob("*.csv")
    published = {f.name: f.read_text(encoding="utf-8") for f in table}
    # 04 alone with an override, its executed copy saved elsewhere: it writes tables, no data file
    pm.execute_notebook(
        str(ROOT / "notebooks" / "04_rank_correlation.ipynb"),
        str(tmp_path / "04.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"params_path": str(params), "overrides": ["analysis.trim_proportion=0.3"]},
    )
    # then 01 alone with the file's params: params.yaml shows the file's params again
    pm.execute_notebook(
        str(ROOT / "notebooks" / "01_dataset_prep.ipynb"),
        str(tmp_path / "01.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"params_path": str(params)},
    )
    records = json.loads((run / "notebooks" / ".ran_alone.json").read_text(encoding="utf-8"))
    assert set(records) == {"04_rank_correlation", "01_dataset_prep"}  # recognised under papermill
    logged: list[str] = []
    again = execute_run(params, only="00..04", log=logged.append)
    assert [s.status for s in again.stages] == ["up to date"] * 4 + ["executed"]
    assert any(
        "04_rank_correlation: out of date (notebook 04_rank_correlation ran alone" in m
        and "analysis.trim_proportion" in m
        for m in logged
    ), logged
    assert {
        f.name: f.read_text(encoding="utf-8") for f in (run / "tables").glob("*.csv")
    } == published
    assert not (run / "notebooks" / ".ran_alone.json").exists()
    last = execute_run(params, only="00..04", log=lambda _: None)
    assert [s.status for s in last.stages] == ["up to date"] * 5
