"""The optional stages (params `stages`, `cube.run.skip`): when 00 and 12 are skipped, and that a
skipped stage leaves no page, table, figure or result of an earlier run behind and the report's
index says why."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cube.config.params import load_params
from cube.config.runpaths import RunPaths
from cube.run import skip
from tests import ROOT


def _params(**stages: str):
    base = load_params(ROOT / "params" / "default.yaml")
    return base.model_copy(update={"stages": base.stages.model_copy(update=stages)})


def _paths(tmp_path: Path, n_questions: int | None) -> RunPaths:
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite").ensure()
    if n_questions is not None:
        ids = [f"Q{i:03d}" for i in range(n_questions)]
        pd.DataFrame({"question_id": ids + ids[:1]}).to_parquet(paths.data_file("questions"))
    return paths


@pytest.mark.parametrize(
    ("choice", "n", "skipped"),
    [
        ("auto", 8, True),
        ("auto", 49, True),
        ("auto", 50, False),  # the threshold itself runs
        ("auto", None, False),  # question set not known yet: run
        ("on", 8, False),
        ("off", 300, True),
    ],
)
def test_the_switch_decides_from_the_question_count(tmp_path, choice, n, skipped):
    paths = _paths(tmp_path, n)
    for stage in ("00_paper_tables", "12_validation"):
        key = skip.SWITCHES[stage]
        reason = skip.skip_reason(_params(**{key: choice}), stage, paths)
        assert bool(reason) is skipped
        if skipped:
            assert f"stages.{key}" in reason
            assert (f"{n} questions" in reason) is (choice == "auto")
    # a stage without a switch always runs
    assert skip.skip_reason(_params(validation="off"), "06_cube_score", paths) == ""


def test_auto_runs_the_paper_tables_after_the_question_set_and_on_keeps_the_order():
    stems = ("00_paper_tables", "01_dataset_prep", "02_qa_sets", "03_scoring_sets")
    nbs = [Path(f"{s}.ipynb") for s in stems]
    assert [p.stem for p in skip.run_order(_params(), nbs)] == [
        "01_dataset_prep",
        "02_qa_sets",
        "00_paper_tables",
        "03_scoring_sets",
    ]
    assert skip.run_order(_params(paper_tables="on"), nbs) == nbs
    assert skip.run_order(_params(paper_tables="off"), nbs) == nbs
    # 02 not part of this run (`--only 00..01`): 00 keeps its place, first
    assert skip.run_order(_params(), nbs, set(nbs[:2])) == nbs


def test_a_skipped_stage_forgets_what_it_published_and_says_why(tmp_path):
    paths = _paths(tmp_path, 8)
    source = ROOT / "notebooks" / "12_validation.ipynb"
    (paths.notebooks / source.name).write_text(source.read_text("utf-8"), "utf-8")
    for name in ("sim_coverage", "sim_power", "decision_table_of_another_stage"):
        (paths.tables / f"{name}.csv").write_text("a\n1\n", "utf-8")
    (paths.figures / "fig_sim_coverage.png").write_bytes(b"png")
    (paths.report / "code").mkdir(parents=True, exist_ok=True)
    for page in (paths.report / "12_validation.html", paths.report / "code/12_validation.html"):
        page.write_text("<html>old</html>", "utf-8")
    paths.results.write_text(json.dumps({"simulation": {"x": 1}, "decision": {"verdict": "good"}}))

    reason = skip.skip_reason(_params(), "12_validation", paths)
    skip.forget_skipped(paths, source, reason)

    assert not (paths.notebooks / source.name).exists()
    assert not (paths.tables / "sim_coverage.csv").exists()
    assert not (paths.tables / "sim_power.csv").exists()
    assert not (paths.figures / "fig_sim_coverage.png").exists()
    assert (paths.tables / "decision_table_of_another_stage.csv").exists()  # not 12's
    assert not (paths.report / "12_validation.html").exists()
    assert not (paths.report / "code" / "12_validation.html").exists()
    kept = json.loads(paths.results.read_text())
    assert set(kept) == {"version", "decision"} and kept["decision"]["verdict"] == "good"
    assert skip.skipped_stages(paths.notebooks) == {"12_validation": reason}
    # executed again (`on`): the note is cleared
    skip.note_skipped(paths.notebooks, "12_validation", "")
    assert skip.skipped_stages(paths.notebooks) == {}


def test_the_report_index_lists_a_skipped_stage_with_its_reason(tmp_path):
    from cube.pages.publish import publish

    paths = _paths(tmp_path, 8)
    params = _params()
    reason = skip.skip_reason(params, "12_validation", paths)
    skip.note_skipped(paths.notebooks, "12_validation", reason)
    index = publish(params, paths).read_text("utf-8")
    assert "12_validation" in index
    assert "the run has 8 questions, fewer than 50" in index
    # a stage not run for another reason still shows the command that runs it
    assert "--only 06" in index
    # the reason's `stages.validation: auto` is code, not backticks shown as text
    assert reason.count("`") == 4
    item = next(li for li in index.split("<li") if "12_validation" in li)
    assert "`" not in item
    assert "<code>stages.validation: auto</code>" in item


def test_a_skip_reason_shows_its_code_as_code_and_escapes_the_rest():
    from cube.pages.escape import code_spans

    assert str(code_spans("a `x: <b>` b")) == "a <code>x: &lt;b&gt;</code> b"
    # an unpaired backtick stays text, still escaped
    assert str(code_spans("a `x & `y` z")) == "a <code>x &amp; </code>y` z"
