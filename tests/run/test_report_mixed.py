"""`cube report` after a notebook ran alone with other params (issue 37): a papermill re-run of
notebook 06 with other params, then `cube report`, showed 71.9 on the index (results.json's
decision, the last writer's) and 71.3 on page 06 (the executed notebook `cube run` left), with no
mark. Now the pages of the stages it changed, and of those reading their data, are marked out of
date, and the index says so above the decision; the same report without such a run marks
nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cube.config.project import project_root
from cube.run import decide, evaluate, pipeline
from cube.run.execute import publish
from cube.run.notebook import open_run
from cube.run.ran_alone import stages_mixed
from cube.run.stages import stage_fingerprints
from tests import ROOT

STAGES = ("01_dataset_prep", "02_qa_sets", "03_scoring_sets", "06_cube_score")
PARAMS = """run: mixed
outputs_dir: {out}
corpus: {{source: demo, n_items: 12, seed: 1}}
questions: {{generator: template, seed: 1}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
dimensions: [relevance, completeness]
judges:
  - {{name: strict, model: {{provider: offline, model: rubric-strict}}}}
  - {{name: lenient, model: {{provider: offline, model: rubric-lenient}}}}
analysis: {{bootstrap: 20}}
"""


def _decide(run) -> float:
    return decide.decision(run, evaluate.evaluate_run(run)).cube_score


def _nav(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return text[text.index('<nav class="cube-nav"') : text.index("</nav>")]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A run folder as `cube run` leaves it: data, the decision, the executed notebooks of four
    stages and their fingerprints (the source notebooks stand in for the executed ones)."""
    tmp = tmp_path_factory.mktemp("mixed")
    params_file = tmp / "p.yaml"
    params_file.write_text(PARAMS.format(out=tmp / "out"), encoding="utf-8")
    run = open_run(params_file)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    score = _decide(run)
    sources = tmp / "notebooks"
    sources.mkdir()
    for stem in STAGES:
        shutil.copy(ROOT / "notebooks" / f"{stem}.ipynb", sources / f"{stem}.ipynb")
        shutil.copy(sources / f"{stem}.ipynb", run.paths.notebooks / f"{stem}.ipynb")
    known = sorted(sources.glob("*.ipynb"))
    prints = stage_fingerprints(run.params, known, project_root())
    (run.paths.notebooks / ".fingerprints.json").write_text(json.dumps(prints), encoding="utf-8")
    return params_file, run, sources, score


@pytest.mark.filterwarnings("ignore")
def test_a_notebook_run_alone_with_other_params_marks_the_report(published):
    params_file, run, sources, score = published
    index = publish(run.params, run.paths, notebooks_dir=sources).read_text(encoding="utf-8")
    assert 'id="decision-stale"' not in index and "out of date" not in index
    assert "out of date" not in _nav(run.paths.report / "06_cube_score.html")
    assert stages_mixed(run.paths.root, run.params, list(STAGES)) == {}

    # notebook 06 re-run out of band with another trim: a new decision in results.json
    alone = open_run(params_file, overrides=["analysis.trim_proportion=0.25"])
    assert _decide(alone) != score
    index = publish(run.params, run.paths, notebooks_dir=sources).read_text(encoding="utf-8")
    assert 'id="decision-stale"' in index
    assert "analysis.trim_proportion" in index
    nav = _nav(run.paths.report / "06_cube_score.html")
    assert "out of date" in nav and "ran alone into this run folder with other params" in nav
    for stem in STAGES[:3]:  # corpus, questions, answers, scores read no `analysis`
        assert "out of date" not in _nav(run.paths.report / f"{stem}.html")


def test_the_stages_reading_a_changed_stage_are_marked_too(published):
    _, run, _, _ = published
    provenance = run.paths.data / ".provenance.json"
    saved = provenance.read_text(encoding="utf-8")
    entries = json.loads(saved)
    name = next(n for n, e in entries.items() if e.get("stage") == "02_qa_sets")
    entries[name]["params"]["systems"][0]["top_n"] = 2  # answers written with another TOP-N
    provenance.write_text(json.dumps(entries), encoding="utf-8")
    try:
        mixed = stages_mixed(run.paths.root, run.params, list(STAGES))
    finally:
        provenance.write_text(saved, encoding="utf-8")
    assert mixed["02_qa_sets"] == f"data/{name}.parquet was written with other params"
    assert mixed["03_scoring_sets"] == "it reads the data of 02_qa_sets"
    assert "01_dataset_prep" not in mixed
