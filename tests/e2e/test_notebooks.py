"""Notebook hygiene, the runner's selection and skipping, and notebook 00 under papermill."""

import json
from pathlib import Path

import pytest
import yaml

from cube.config.project import list_notebooks
from cube.run.execute import execute_run, select_notebooks
from cube.run.notebook import PARAMETERS_CELL
from tests import ROOT

NOTEBOOKS = list_notebooks(ROOT / "notebooks")

EXTRA_PARAMETERS = {
    "09_compare.ipynb": {"side_a", "side_b", "system_a", "system_b", "permutations"}
}  # the two sides


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_clean(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), (
        "has outputs"
    )
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "papermill needs exactly one cell tagged 'parameters'"
    source = "".join(tagged[0]["source"])
    assert source.startswith(PARAMETERS_CELL.rstrip("\n")), (
        "parameters cell differs from "
        "cube.run.notebook.PARAMETERS_CELL: run `python -m cube.run.notebook`"
    )
    own = {
        line.split("=")[0].split(":")[0].strip()
        for line in source[len(PARAMETERS_CELL) :].splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    }
    assert own == EXTRA_PARAMETERS.get(
        path.name, set()
    )  # a notebook's own parameters follow the common ones
    assert any("open_run(params_path, run_dir, overrides)" in "".join(c["source"]) for c in code)
    assert not any("def " in "".join(c["source"]) or "class " in "".join(c["source"]) for c in code)
    # nbformat 4.5 requires a unique id per cell (a missing one is a warning today, an error later)
    ids = [c.get("id") for c in nb["cells"]]
    assert None not in ids and len(set(ids)) == len(ids), f"cell ids missing or repeated: {ids}"


def test_select_notebooks():
    nbs = [Path(f"{i:02d}_x.ipynb") for i in range(9)]
    assert [p.name[:2] for p in select_notebooks(nbs, "03..05")] == ["03", "04", "05"]
    assert [p.name[:2] for p in select_notebooks(nbs, "..01,07..")] == ["00", "01"] + [
        p.name[:2] for p in nbs if p.name[:2] >= "07"
    ]
    assert select_notebooks(nbs, None) == nbs
    with pytest.raises(ValueError, match="cannot read"):
        select_notebooks(nbs, "three")
    with pytest.raises(ValueError, match="matches none"):
        select_notebooks(nbs, "42")


def test_notebook_00_runs_under_papermill_and_is_skipped_when_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    params = tmp_path / "p.yaml"
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text())
    params.write_text(yaml.safe_dump({**data, "run": "nb00"}), encoding="utf-8")
    logs: list[str] = []
    summary = execute_run(params, only="00", outputs_dir=tmp_path / "out", log=logs.append)
    assert [s.status for s in summary.stages] == ["executed"], logs
    root = tmp_path / "out" / "nb00"
    results = json.loads((root / "results.json").read_text())
    assert results["paper_table4_reproduced"] is True
    assert (root / "tables" / "paper_table4_reproduced.csv").exists()
    page = (root / "report" / "00_paper_tables.html").read_text(encoding="utf-8")
    assert (
        "Table 4, reproduced" in page and "jp-Editor jp-InputArea-editor" not in page
    )  # published without code
    assert "jp-Editor jp-InputArea-editor" in (
        root / "report" / "code" / "00_paper_tables.html"
    ).read_text(encoding="utf-8")
    assert "00_paper_tables.html" in (root / "report" / "index.html").read_text(encoding="utf-8")
    again = execute_run(params, only="00", outputs_dir=tmp_path / "out", log=logs.append)
    assert [s.status for s in again.stages] == ["up to date"]
