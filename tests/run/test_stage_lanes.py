"""Stages that do not read each other execute side by side in a second warm kernel
(`cube.run.lanes`): a failure stops only the stages reading the failed one, and `cube run`'s lines
and summary keep the sequence's order whichever kernel ends first. Stand-in notebooks under the
real stages' names (so the stage graph is `cube.run.stages.STAGES`), papermill in real kernels."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import yaml

from cube.kb.demo import generate_demo_corpus
from cube.run.execute import execute_run
from tests import ROOT

# 01 writes a two-item knowledge base (a small one: the run starts its second kernel); 04 holds its
# kernel a while, so that 05 and 06 execute in the other; 06 fails and 10 reads it; 09 and 11 do
# not read 06 and still execute.
CELLS = {
    "01_dataset_prep": (
        "import os, pandas as pd\n"
        "d = os.path.join(os.environ['CUBE_STAGING_DIR'], 'data')\n"
        "os.makedirs(d, exist_ok=True)\n"
        "pd.DataFrame({'doc_id': ['a', 'b']}).to_parquet(os.path.join(d, 'corpus.parquet'))"
    ),
    "02_qa_sets": "print('02')",
    "03_scoring_sets": "print('03')",
    "04_rank_correlation": "import time\ntime.sleep(3)",
    "05_bounds_and_weights": "print('05')",
    "06_cube_score": "raise RuntimeError('06 broke')",
    "09_compare": "print('09')",
    "10_diagnostics": "print('10')",
    "11_judge_audit": "print('11')",
}


def _notebooks(folder: Path) -> Path:
    folder.mkdir()
    for stem, code in CELLS.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(f"import os\nprint('pid', os.getpid())\n{code}")]
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(nb, folder / f"{stem}.ipynb")
    return folder


def _pid(executed: Path) -> str:
    nb = json.loads(executed.read_text(encoding="utf-8"))
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    return next(line for line in text.splitlines() if line.startswith("pid"))


@pytest.mark.timeout(300)
def test_a_failed_stage_stops_the_stages_reading_it_and_lines_keep_the_sequence_order(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("cube.run.execute.check_inputs", lambda *a, **k: None)
    corpus = tmp_path / "kb.csv"
    generate_demo_corpus(4, "en", seed=1).drop(columns=["text"]).to_csv(corpus, index=False)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "lanes",
                "outputs_dir": str(tmp_path / "out"),
                "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
                "corpus": {"source": "file", "path": str(corpus)},
            }
        ),
        encoding="utf-8",
    )
    lines: list[str] = []
    summary = execute_run(
        params, notebooks_dir=_notebooks(tmp_path / "nb"), log=lines.append, force=True
    )
    stage_lines = [line for line in lines if line.startswith("[cube] ") and ": " in line]
    stage_lines = [line for line in stage_lines if line.split()[1][:2].isdigit()]
    # every stage's line, in the sequence's order, though 05 and 06 ended before 04
    assert [line.split()[1].rstrip(":") for line in stage_lines] == list(CELLS)
    assert [(s.notebook, s.status) for s in summary.stages] == [
        ("01_dataset_prep", "executed"),
        ("02_qa_sets", "executed"),
        ("03_scoring_sets", "executed"),
        ("04_rank_correlation", "executed"),
        ("05_bounds_and_weights", "executed"),
        ("06_cube_score", "failed"),
        ("09_compare", "executed"),
        ("10_diagnostics", "not run"),
        ("11_judge_audit", "executed"),
    ]
    assert "06 broke" in summary.stages[5].error and not summary.ok and not summary.committed
    assert "10_diagnostics: not run: it reads 06_cube_score" in "\n".join(stage_lines)
    # the stage not run is in the attempt's manifest and last_run.html, with why
    root = tmp_path / "out" / "lanes"
    manifest = json.loads((root / ".staging" / "manifest.json").read_text(encoding="utf-8"))
    entry = next(s for s in manifest["stages"] if s["notebook"] == "10_diagnostics")
    assert entry["status"] == "not run" and "06_cube_score" in entry["error"]
    last = (root / "report" / "last_run.html").read_text(encoding="utf-8")
    assert "<td>10_diagnostics</td><td>not run</td>" in last
    staged = tmp_path / "out" / "lanes" / ".staging" / "notebooks"
    assert not (staged / "10_diagnostics.ipynb").exists()
    # 04 held the first kernel while 05 executed in the second
    assert _pid(staged / "04_rank_correlation.ipynb") != _pid(
        staged / "05_bounds_and_weights.ipynb"
    )
    # what succeeded is kept: a re-run executes only the failed stage and the one reading it
    prints = json.loads((staged / ".fingerprints.json").read_text(encoding="utf-8"))
    assert {"04_rank_correlation.ipynb", "09_compare.ipynb"} <= set(prints)
    assert "06_cube_score.ipynb" not in prints


def test_00_and_12_wait_for_the_question_set_only_when_it_decides_them():
    # they read nothing of the run: only `auto` (skipped below a number of questions) waits for 02
    from cube.config.params import Params
    from cube.run.execute import waits_for
    from cube.run.stages import STAGES

    stems = sorted(STAGES)
    base = {
        "run": "r",
        "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
    }
    on = Params.model_validate({**base, "stages": {"paper_tables": "on", "validation": "on"}})
    auto = Params.model_validate({**base, "stages": {"paper_tables": "auto", "validation": "auto"}})
    for stem in ("00_paper_tables", "12_validation"):
        assert waits_for(stem, stems, on) == []
        assert waits_for(stem, stems, auto) == ["02_qa_sets"]
