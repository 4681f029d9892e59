"""Review 3 findings on run folders: a failed cell never deletes a folder `open_run` did not create
nor the user's params file kept in it; published records hold no local absolute path; old
provenance records compare like new ones; a diagnostics edit re-runs only the stages reading it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
JUDGES = [{"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
          {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}}]


def _project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    (root / "params").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    (root / "cube").symlink_to(ROOT / "cube", target_is_directory=True)
    monkeypatch.setenv("CUBE_PROJECT_ROOT", str(root))
    return root


# ---------------------------------------------- 2. a failed cell deletes only what open_run created
def test_a_failed_cell_keeps_an_existing_run_folder_and_the_params_file_kept_in_it(tmp_path, monkeypatch):
    from cube.notebook import open_run, remove_if_empty

    root = _project(tmp_path, monkeypatch)
    run_folder = root / "outputs" / "exp1"
    run_folder.mkdir(parents=True)
    mine = run_folder / "params.yaml"  # the user's own params file, kept in its run folder
    text = "# my experiment, with a comment\n" + yaml.safe_dump(
        {"run": "exp1", "cache_path": "caches/exp1.sqlite", "judges": JUDGES})
    mine.write_text(text, encoding="utf-8")
    run = open_run(str(mine))
    assert mine.read_text(encoding="utf-8") == text  # never overwritten by the resolved params
    assert run.params.run == "exp1"
    # only the cache folder was new: the run folder is never removed, nor the user's file in it
    assert not remove_if_empty(run.paths, [root / "caches"])
    assert mine.read_text(encoding="utf-8") == text
    assert not (root / "caches").exists()  # the folder open_run created, empty, goes
    run.record(x=1)  # a later write keeps the user's file as it is
    assert mine.read_text(encoding="utf-8") == text


def test_a_failed_cell_removes_a_run_folder_open_run_created(tmp_path, monkeypatch):
    from cube.notebook import open_run, remove_if_empty

    root = _project(tmp_path, monkeypatch)
    (root / "params" / "p.yaml").write_text(yaml.safe_dump({"run": "fresh", "judges": JUDGES}), encoding="utf-8")
    run = open_run("params/p.yaml")
    assert (root / "outputs" / "fresh" / "params.yaml").exists()
    assert remove_if_empty(run.paths, [run.paths.root, root / "outputs"])
    assert not (root / "outputs").exists()


# ------------------------------------------------- 4. no local absolute path in published records
def test_provenance_holds_no_local_path_and_still_tells_two_files_of_one_name_apart(tmp_path, monkeypatch):
    import json

    import pytest

    from cube.config import parse_params
    from cube.stages import ParamsMismatchError, check_provenance, record_provenance

    root = _project(tmp_path, monkeypatch)
    elsewhere = tmp_path / "private" / "kb.csv"
    inside = root / "data" / "kb.csv"
    data = root / "outputs" / "r" / "data"
    data.mkdir(parents=True)

    def params(path: Path):
        return parse_params({"run": "r", "judges": JUDGES, "corpus": {"source": "file", "path": str(path)},
                             "human": {"key": str(tmp_path / "private" / "key.csv")}})

    record_provenance(data, "corpus", params(elsewhere), "params/p.yaml")
    text = (data / ".provenance.json").read_text(encoding="utf-8")
    assert str(tmp_path) not in text and "kb.csv" in text
    check_provenance(data, "corpus", params(elsewhere), "params/p.yaml", "outputs/r")  # unchanged: no error
    with pytest.raises(ParamsMismatchError, match="corpus.path"):  # same name, other folder
        check_provenance(data, "corpus", params(tmp_path / "other" / "kb.csv"), "params/p.yaml", "outputs/r")
    record_provenance(data, "corpus", params(inside), "params/p.yaml")
    recorded = json.loads((data / ".provenance.json").read_text(encoding="utf-8"))["corpus"]["params"]
    assert recorded["corpus"]["path"] == "data/kb.csv"
    # a record written before this change, with the absolute path, still agrees with unchanged params
    recorded["corpus"]["path"] = str(inside)
    (data / ".provenance.json").write_text(json.dumps({"corpus": {"stage": "01_dataset_prep",
                                                                  "params_file": "params/p.yaml",
                                                                  "params": recorded}}), encoding="utf-8")
    check_provenance(data, "corpus", params(inside), "params/p.yaml", "outputs/r")


def test_the_human_key_path_is_shown_by_name_in_params_yaml_and_the_manifest():
    import json

    from cube.config import parse_params
    from cube.notebook import shared_params_yaml
    from cube.project import shared_values

    p = parse_params({"run": "r", "judges": JUDGES, "human": {"ratings": "/home/alice/private/ratings.csv",
                                                             "key": "/home/alice/private/annotation_key.csv"}})
    shown = yaml.safe_load(shared_params_yaml(p).split("\n", 1)[1])["human"]
    assert shown["ratings"] == "ratings.csv" and shown["key"] == "annotation_key.csv"
    assert shared_values(json.loads(p.model_dump_json()))[0]["human"]["key"] == "annotation_key.csv"
    # a value under another `key` is a value, never rewritten as a path
    assert shared_values({"x": {"key": "/not/a/path"}})[0] == {"x": {"key": "/not/a/path"}}


# ---------------------------------------- S1. provenance recorded by an earlier version still agrees
def test_a_provenance_record_of_an_earlier_version_agrees_with_unchanged_params(tmp_path):
    import json

    import pytest

    from cube.config import load_params
    from cube.stages import ParamsMismatchError, check_provenance, check_run_folder, upstream_sections

    params = load_params(ROOT / "params" / "llm_jury.yaml")
    assert params.models  # whole `models:` entries, prices and concurrency included, as recorded before
    dumped = json.loads(params.model_dump_json())
    sections = {s.split(".")[0]: None for s in upstream_sections("03_scoring_sets")}  # whole sections then
    old = {s: dumped.get(s) for s in sections}  # the earlier section_values
    (tmp_path / ".provenance.json").write_text(json.dumps({"scores": {
        "stage": "03_scoring_sets", "params_file": "params/llm_jury.yaml", "params": old}}), encoding="utf-8")
    check_provenance(tmp_path, "scores", params, "params/llm_jury.yaml", "outputs/llm_jury")
    check_run_folder(tmp_path, params, "params/other.yaml", "outputs/llm_jury")
    judge_model = next(iter(old["models"]))
    old["models"][judge_model]["model"] = "another-model"  # a real difference is still seen
    (tmp_path / ".provenance.json").write_text(json.dumps({"scores": {
        "stage": "03_scoring_sets", "params_file": "params/llm_jury.yaml", "params": old}}), encoding="utf-8")
    with pytest.raises(ParamsMismatchError, match=f"models.{judge_model}.model"):
        check_provenance(tmp_path, "scores", params, "params/llm_jury.yaml", "outputs/llm_jury")


# ------------------------------------- S2. a diagnostics threshold re-runs only the stages reading it
def _stage_set(edit) -> list[str]:
    import copy

    from cube.config import parse_params
    from cube.report import list_notebooks
    from cube.stages import stage_fingerprints, stages_affected

    notebooks = list_notebooks(ROOT / "notebooks")
    base = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    edited = copy.deepcopy(base)
    edit(edited.setdefault("diagnostics", {}))
    before = stage_fingerprints(parse_params(base), notebooks, ROOT)
    return [n[:2] for n in stages_affected(before, stage_fingerprints(parse_params(edited), notebooks, ROOT))]


def test_a_diagnostics_threshold_re_runs_the_decision_and_diagnostics_stages_only():
    assert _stage_set(lambda d: d.update(judge_disagreement_above=5.0)) == ["06", "10"]
    assert _stage_set(lambda d: d.update(low_rank_from=6)) == ["06", "10"]
    # what stage 02 reads of `diagnostics` (the refusal questions) re-runs it and every stage after it
    assert _stage_set(lambda d: d.update(refusal_questions=3)) == ["02", "03", "04", "05", "06", "07", "08", "09",
                                                                   "10"]


def test_answers_recorded_before_a_threshold_edit_still_agree_with_the_params(tmp_path, monkeypatch):
    import pytest

    from cube.config import parse_params
    from cube.stages import ParamsMismatchError, check_provenance, record_provenance

    _project(tmp_path, monkeypatch)
    record_provenance(tmp_path, "answers", parse_params({"run": "r", "judges": JUDGES}), "params/p.yaml")
    edited = parse_params({"run": "r", "judges": JUDGES, "diagnostics": {"judge_disagreement_above": 5.0}})
    check_provenance(tmp_path, "answers", edited, "params/p.yaml", "outputs/r")  # 02 does not read it
    refusals = parse_params({"run": "r", "judges": JUDGES, "diagnostics": {"refusal_questions": 3}})
    with pytest.raises(ParamsMismatchError, match="refusal_questions"):
        check_provenance(tmp_path, "answers", refusals, "params/p.yaml", "outputs/r")


def test_the_stage_reruns_benchmark_counts_a_diagnostics_threshold_edit(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("stage_reruns", ROOT / "benchmarks" / "stage_reruns.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if x.startswith("diagnostics.judge_disagreement_above"))
    assert line.endswith("now 2: ['06', '10']"), line
    assert lines[-1].startswith("stages_rerun_after_adding_a_judge_with_its_own_models_entry: ")
