"""The runner's promises around failures and changed inputs (papermill on notebooks 00-01 only)."""

import json
from pathlib import Path

import pytest
import yaml

from cube.kb.demo import generate_demo_corpus
from cube.run.execute import InputError, execute_run
from cube.run.stages import ParamsMismatchError
from tests import ROOT

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}]


def _params(tmp_path: Path, corpus_path: Path, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        yaml.safe_dump(
            {
                "run": "runner",
                "outputs_dir": str(tmp_path / "out"),
                "judges": JUDGES,
                "corpus": {"source": "file", "path": str(corpus_path)},
            }
        ),
        encoding="utf-8",
    )
    return path


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every published file (not the staging copy, the lock or the last-attempt page) by content."""
    skip = {".staging", ".lock"}
    return {
        str(f.relative_to(root)): f.read_bytes()
        for f in sorted(root.rglob("*"))
        if f.is_file() and not skip & set(f.relative_to(root).parts) and f.name != "last_run.html"
    }


def test_a_failing_rerun_leaves_the_last_good_run_byte_identical(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    corpus = tmp_path / "kb.csv"
    generate_demo_corpus(6, "en", seed=1).drop(columns=["text"]).to_csv(corpus, index=False)
    params = _params(tmp_path, corpus)
    root = tmp_path / "out" / "runner"
    root.mkdir(parents=True)
    (root / "results.json").write_text(json.dumps({"earlier": {"cube_score": 61.5}}))
    good = execute_run(params, only="00..01", log=lambda _: None)
    assert good.ok and good.committed
    before = _snapshot(root)
    assert {
        "params.yaml",
        "results.json",
        "manifest.json",
        "report/index.html",
        "data/corpus.parquet",
        "tables/paper_table4_reproduced.csv",
    } <= set(before)

    broken = _params(tmp_path, tmp_path / "missing.csv", "broken.yaml")
    with pytest.raises(
        InputError, match=r"corpus\.path: knowledge-base file or folder \S*missing\.csv not found"
    ):
        execute_run(
            broken, only="00..01", force=True, log=lambda _: None
        )  # validated before any stage
    assert _snapshot(root) == before and not (root / ".staging").exists()
    # A stage failing on what validation cannot see (here: validation skipped) keeps the last good
    # run.
    monkeypatch.setattr("cube.run.execute.check_inputs", lambda *a, **k: None)
    with pytest.raises(
        ParamsMismatchError, match=r"corpus.path"
    ):  # another params file, same `run:` name
        execute_run(broken, only="00..01", log=lambda _: None)
    failed = execute_run(broken, only="00..01", force=True, log=lambda _: None)
    assert (
        [s.status for s in failed.stages] == ["executed", "failed"]
        and not failed.ok
        and not failed.committed
    )
    assert "missing.csv" in failed.stages[1].error
    assert (
        _snapshot(root) == before
    )  # params, results, manifest, data, tables, notebooks, pages, index
    last = (root / "report" / "last_run.html").read_text(encoding="utf-8")
    assert (
        'data-status="failed"' in last
        and "01_dataset_prep failed" in last
        and "missing.csv" in last
    )
    assert 'href="last_run.html"' in (root / "report" / "index.html").read_text(encoding="utf-8")
    staged = json.loads((root / ".staging" / "manifest.json").read_text())
    assert (
        staged["status"] == "failed" and staged["params_file"] == broken.name
    )  # outside the project: its name only

    again = execute_run(
        params, only="00..01", log=lambda _: None
    )  # the good params: nothing to recompute
    assert [s.status for s in again.stages] == ["up to date", "up to date"] and again.committed
    assert not (root / ".staging").exists()
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["status"] == "committed" and manifest["params_file"] == params.name
    assert [s["status"] for s in manifest["stages"]] == [
        "executed",
        "executed",
    ]  # timings of the run that ran them
    assert f"<code>{params.name}</code>" in (root / "report" / "index.html").read_text(
        encoding="utf-8"
    )


def test_a_first_run_that_fails_publishes_its_failure_and_no_decision(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(
        "cube.run.execute.check_inputs", lambda *a, **k: None
    )  # a failure validation misses
    params = _params(tmp_path, tmp_path / "missing.csv")
    summary = execute_run(params, only="01", log=lambda _: None)
    root = tmp_path / "out" / "runner"
    assert [s.status for s in summary.stages] == ["failed"]
    index = (root / "report" / "index.html").read_text(encoding="utf-8")
    assert (
        'id="failure"' in index
        and "01_dataset_prep failed" in index
        and 'id="no-decision"' in index
    )
    assert not (root / "results.json").exists() and not (root / "params.yaml").exists()


def test_manifest_keeps_the_timings_of_stages_not_run_this_time(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    corpus = tmp_path / "kb.csv"
    generate_demo_corpus(6, "en", seed=1).drop(columns=["text"]).to_csv(corpus, index=False)
    params = _params(tmp_path, corpus)
    execute_run(params, only="00", log=lambda _: None)
    execute_run(params, only="01", log=lambda _: None)
    stages = json.loads((tmp_path / "out" / "runner" / "manifest.json").read_text())["stages"]
    assert [(s["notebook"], s["status"]) for s in stages] == [
        ("00_paper_tables", "executed"),
        ("01_dataset_prep", "executed"),
    ]
    assert all(s["seconds"] > 0 for s in stages)


def test_replacing_a_named_input_file_makes_its_stages_out_of_date(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    corpus = tmp_path / "kb.csv"
    generate_demo_corpus(6, "en", seed=1).drop(columns=["text"]).to_csv(corpus, index=False)
    params = _params(tmp_path, corpus)
    first = execute_run(params, only="01", log=lambda _: None)
    again = execute_run(params, only="01", log=lambda _: None)
    generate_demo_corpus(7, "en", seed=2).drop(columns=["text"]).to_csv(corpus, index=False)
    changed = execute_run(params, only="01", log=lambda _: None)
    assert [s.status for s in (first.stages + again.stages + changed.stages)] == [
        "executed",
        "up to date",
        "executed",
    ]


def test_a_notebook_run_alone_names_the_stage_to_run_first(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    params = tmp_path / "alone.yaml"
    params.write_text(
        yaml.safe_dump({"run": "alone", "outputs_dir": str(tmp_path / "out"), "judges": JUDGES}),
        encoding="utf-8",
    )
    summary = execute_run(params, only="03", log=lambda _: None)
    assert [s.status for s in summary.stages] == ["failed"]
    assert "Run 01_dataset_prep and 02_qa_sets first" in summary.stages[0].error
