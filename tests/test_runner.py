"""The runner's promises around failures and changed inputs (papermill on notebooks 00-01 only)."""

import json
from pathlib import Path

import yaml

from cube.demo_corpus import generate_demo_corpus
from cube.report import execute_run

ROOT = Path(__file__).resolve().parents[1]
JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}]


def _params(tmp_path: Path, corpus_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"run": "runner", "outputs_dir": str(tmp_path / "out"), "judges": JUDGES,
                                    "corpus": {"source": "file", "path": str(corpus_path)}}), encoding="utf-8")
    return path


def test_a_failed_stage_keeps_earlier_work_and_shows_on_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    params = _params(tmp_path, tmp_path / "missing.csv")
    root = tmp_path / "out" / "runner"
    root.mkdir(parents=True)
    (root / "results.json").write_text(json.dumps({"decision": {"cube_score": 99}, "cube_score": 99}))
    summary = execute_run(params, only="00..01", log=lambda _: None)
    assert [s.status for s in summary.stages] == ["executed", "failed"] and not summary.ok
    assert "missing.csv" in summary.stages[1].error
    assert (root / "tables" / "paper_table4_reproduced.csv").exists()  # stage 00's work is kept
    results = json.loads((root / "results.json").read_text())
    assert "decision" not in results and "cube_score" not in results  # no stale score on the report
    index = (root / "report" / "index.html").read_text(encoding="utf-8")
    assert 'id="failure"' in index and "01_dataset_prep failed" in index and 'id="no-decision"' in index


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
        "executed", "up to date", "executed"]


def test_a_notebook_run_alone_names_the_stage_to_run_first(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    params = tmp_path / "alone.yaml"
    params.write_text(yaml.safe_dump({"run": "alone", "outputs_dir": str(tmp_path / "out"), "judges": JUDGES}),
                      encoding="utf-8")
    summary = execute_run(params, only="03", log=lambda _: None)
    assert [s.status for s in summary.stages] == ["failed"]
    assert "Run 01_dataset_prep and 02_qa_sets first" in summary.stages[0].error
