"""Issue 12: notebooks run anywhere (Jupyter, nbconvert, papermill), typed parameters with
overrides, params/data agreement, per-stage fingerprints, missing stages named at once, pages to
share."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from cube.config.overrides import load_params_with_overrides, parse_overrides
from cube.config.params import ParamsError, parse_params
from cube.config.project import list_notebooks
from cube.pages.display import header, table, to_html
from cube.run.execute import execute_run
from cube.run.notebook import PARAMETERS_CELL, MissingStageError, apply_parameters_cell, open_run
from cube.run.stages import ParamsMismatchError, stage_fingerprints, stages_affected
from tests import ROOT
from tests.factories import make_project

NOTEBOOKS = list_notebooks(ROOT / "notebooks")
JUDGES = [
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
]


def _project(tmp_path: Path, notebooks: tuple[str, ...] = ("00",)) -> Path:
    return make_project(tmp_path, notebooks)


def _kernel_env(monkeypatch) -> None:
    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


# ------------------------------------------------------------------- 1. notebooks run anywhere
@pytest.mark.parametrize("where", ["notebooks", "."])
def test_nbconvert_executes_a_notebook_with_its_defaults_from_notebooks_and_from_the_root(
    tmp_path, monkeypatch, where
):
    from nbclient import NotebookClient

    _kernel_env(monkeypatch)
    root = _project(tmp_path)
    path = root / "notebooks" / "00_paper_tables.ipynb"
    nb = nbformat.read(path, as_version=4)
    cwd = (root / where).resolve()
    monkeypatch.chdir(cwd)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    run = (
        root / "outputs" / "default"
    )  # the params' outputs/<run>, under the root found by its markers
    assert json.loads((run / "results.json").read_text())["paper_table4_reproduced"] is True
    assert (run / "tables" / "paper_table4_reproduced.csv").exists()
    assert (
        not (root / "notebooks" / "outputs").exists()
        and not (root / "notebooks" / "params").exists()
    )


def test_relative_paths_inside_params_resolve_against_the_params_file_not_the_working_directory(
    tmp_path, monkeypatch
):
    from cube.kb.demo import generate_demo_corpus
    from cube.run import pipeline

    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    root = _project(tmp_path, notebooks=())
    (root / "data").mkdir()
    generate_demo_corpus(6, "en", seed=1).drop(columns=["text"]).to_csv(
        root / "data" / "kb.csv", index=False
    )
    (root / "params" / "kb.yaml").write_text(
        yaml.safe_dump(
            {"run": "kb", "judges": JUDGES, "corpus": {"source": "file", "path": "../data/kb.csv"}}
        ),
        encoding="utf-8",
    )
    monkeypatch.chdir(root / "notebooks")  # as JupyterLab does
    run = open_run("params/kb.yaml")
    assert run.root == root / "outputs" / "kb" and run.base_dir == root
    assert len(pipeline.corpus_stage(run)) == 6


# ------------------------------------------------------------------------ 2. papermill parameters
def test_every_notebook_carries_the_one_parameters_cell_and_it_can_be_reapplied(tmp_path):
    for nb in NOTEBOOKS:
        cells = [
            c
            for c in nbformat.read(nb, as_version=4).cells
            if "parameters" in c.metadata.get("tags", [])
        ]
        assert len(cells) == 1 and cells[0].source.startswith(PARAMETERS_CELL.rstrip("\n")), nb.name
    old = tmp_path / "09_new.ipynb"
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("from cube.run.notebook import open_run"),
            nbformat.v4.new_code_cell(
                'params_path = "params/default.yaml"\nrun_dir = None',
                metadata={"tags": ["parameters"]},
            ),
            nbformat.v4.new_code_cell("run = open_run(params_path, run_dir)"),
        ]
    )
    nbformat.write(nb, old)
    assert apply_parameters_cell([old]) == [old]
    again = nbformat.read(old, as_version=4)
    assert again.cells[1].source == PARAMETERS_CELL.rstrip("\n")
    assert again.cells[2].source == "run = open_run(params_path, run_dir, overrides)"
    assert apply_parameters_cell([old]) == []  # idempotent
    own = (
        tmp_path / "09_own.ipynb"
    )  # a notebook's own parameters (09's two sides) are kept after the common ones
    nbformat.write(
        nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell(
                    'params_path = "p.yaml"\nside_a: "Optional[str]" = None  # side A',
                    metadata={"tags": ["parameters"]},
                )
            ]
        ),
        own,
    )
    apply_parameters_cell([own])
    assert nbformat.read(own, as_version=4).cells[0].source == (
        PARAMETERS_CELL + 'side_a: "Optional[str]" = None  # side A'
    )


def test_help_notebook_lists_typed_parameters():
    out = subprocess.run(
        [sys.executable, "-m", "papermill", "--help-notebook", str(NOTEBOOKS[0])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert 'params_path: str (default "params/default.yaml")' in out
    assert "run_dir: Optional[str] (default None)" in out
    assert "overrides: Union[list, dict, None] (default None)" in out
    assert "Unknown type" not in out


def test_overrides_forms_and_errors():
    expected = [("corpus.seed", 3), ("analysis.trim_proportion", 0.2)]
    assert parse_overrides('["corpus.seed=3", "analysis.trim_proportion=0.2"]') == expected
    assert parse_overrides({"corpus": {"seed": 3}, "analysis.trim_proportion": 0.2}) == expected
    assert parse_overrides("corpus.seed=3") == [("corpus.seed", 3)]
    params = load_params_with_overrides(
        ROOT / "params" / "default.yaml", ["analysis.trim_proportion=0.2", "judges[0].name=renamed"]
    )
    assert params.analysis.trim_proportion == 0.2 and params.judges[0].name == "renamed"
    with pytest.raises(ParamsError) as err:
        load_params_with_overrides(ROOT / "params" / "default.yaml", ["analysis.trim=0.2"])
    assert "analysis.trim: unknown key" in str(err.value) and "default.yaml with overrides" in str(
        err.value
    )
    with pytest.raises(ParamsError, match=r"judges\[9\]\.name: no such element"):
        load_params_with_overrides(ROOT / "params" / "default.yaml", ["judges[9].name=x"])


def test_papermill_overrides_reach_the_run_and_a_params_file_as_parameters_is_refused(
    tmp_path, monkeypatch
):
    import papermill as pm

    _kernel_env(monkeypatch)
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    nb = root / "notebooks" / "00_paper_tables.ipynb"
    pm.execute_notebook(
        str(nb),
        str(tmp_path / "out.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"overrides": '["run=seeded", "analysis.trim_proportion=0.2"]'},
    )
    resolved = yaml.safe_load(
        (root / "outputs" / "seeded" / "params.yaml").read_text(encoding="utf-8")
    )
    assert resolved["analysis"]["trim_proportion"] == 0.2
    with pytest.raises(pm.PapermillExecutionError) as err:  # `papermill ... -f params.yaml`
        pm.execute_notebook(
            str(nb),
            str(tmp_path / "bad.ipynb"),
            progress_bar=False,
            kernel_name="python3",
            parameters=yaml.safe_load((root / "params" / "default.yaml").read_text()),
        )
    assert "received params keys as papermill parameters" in str(err.value) and "judges" in str(
        err.value
    )


# --------------------------------------------------------------- 3-5. data agreement, stages
def _write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_data_of_other_params_are_never_mixed(tmp_path):
    three = _write(
        tmp_path,
        "three.yaml",
        {
            "run": "same",
            "outputs_dir": str(tmp_path / "out"),
            "judges": [
                *JUDGES,
                {
                    "name": "third",
                    "model": {"provider": "offline", "model": "rubric-strict"},
                    "samples": 2,
                },
            ],
        },
    )
    two = _write(
        tmp_path,
        "two.yaml",
        {"run": "same", "outputs_dir": str(tmp_path / "out"), "judges": JUDGES},
    )
    run3 = open_run(three)
    run3.save("answers", pd.DataFrame({"x": [1]}))
    run3.save("scores", pd.DataFrame({"x": [1]}))
    run2 = open_run(two)
    assert run2.root == run3.root
    run2.load("answers")  # answers do not depend on the judges
    with pytest.raises(ParamsMismatchError) as err:
        run2.load("scores")
    msg = str(err.value)
    assert "judges (3 entries in the data, 2 in the params)" in msg and "03_scoring_sets" in msg
    assert "--force" in msg and "own `run:` name" in msg
    with pytest.raises(ParamsMismatchError, match=r"judges\[0\]\.samples"):
        open_run(three, overrides=["judges[0].samples=3"]).load("scores")


def test_missing_stages_are_named_all_at_once_in_order(tmp_path):
    run = open_run(
        _write(
            tmp_path,
            "p.yaml",
            {"run": "fresh", "outputs_dir": str(tmp_path / "o"), "judges": JUDGES},
        )
    )
    with pytest.raises(MissingStageError) as err:
        run.load("scores")
    assert "Run 01_dataset_prep, 02_qa_sets and 03_scoring_sets first, in this order" in str(
        err.value
    )
    run.save("corpus", pd.DataFrame({"x": [1]}))
    with pytest.raises(MissingStageError, match="Run 02_qa_sets and 03_scoring_sets first"):
        run.require("answers", "scores")


def test_stage_sets_after_edits():
    base = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))

    def rerun(**changes) -> list[str]:
        edited = yaml.safe_load(yaml.safe_dump(base))
        for key, value in changes.items():
            node = edited
            *path, last = key.split("__")
            for step in path:
                node = node.setdefault(step, {})
            node[last] = value(node.get(last)) if callable(value) else value
        before = stage_fingerprints(parse_params(base), NOTEBOOKS, ROOT)
        after = stage_fingerprints(parse_params(edited), NOTEBOOKS, ROOT)
        return [n[:2] for n in stages_affected(before, after)]

    def add_judge(js):
        return [
            *js,
            {
                "name": "extra",
                "model": {"provider": "offline", "model": "rubric-strict"},
                "samples": 2,
            },
        ]  # a twin of an existing judge is refused: it samples twice

    assert rerun(judges=add_judge) == ["03", "04", "05", "06", "07", "08", "09", "10", "11"]
    # 08 reads 07's human ratings (scores_with_human), so it follows 07
    assert rerun(analysis__trim_proportion=0.2) == "04 05 06 07 08 09 10 11 12".split()
    assert rerun(simulation__replicates=20) == [
        "12"
    ]  # the simulation study reads no data of the run
    assert rerun(lexical__tokenizer="char") == ["08"]
    assert rerun(human__sample_size=10) == ["07", "08"]
    assert rerun(diagnostics__low_score_below=4.0) == [
        "06",
        "10",
    ]  # 02 reads only diagnostics.refusal_*
    assert rerun(corpus__seed=11) == [
        "01",
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
    assert rerun(title="Another title") == []
    assert rerun(run="renamed") == []


def test_cube_run_reruns_only_the_stages_an_edit_touches(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    params = _write(
        tmp_path,
        "p.yaml",
        {
            "run": "stages",
            "outputs_dir": str(tmp_path / "out"),
            "judges": JUDGES,
            "corpus": {"n_items": 12},
            "questions": {"limit": 8},
        },
    )
    execute_run(params, only="01..02", log=lambda _: None)
    data = yaml.safe_load(params.read_text())
    data["judges"] = JUDGES[:1]  # a judge less: the corpus and the answers stay valid
    params.write_text(yaml.safe_dump(data), encoding="utf-8")
    again = execute_run(params, only="01..02", log=lambda _: None)
    assert [s.status for s in again.stages] == ["up to date", "up to date"]


# ------------------------------------------------------------------------------ 6. pages to share
def test_table_formatter_for_people():
    df = pd.DataFrame(
        {
            "judge": ["a", "b"],
            "trim_proportion": [0.123456, float("nan")],
            "flags": [None, "zero range"],
            "n_questions": [300, 12000],
            "ok": [True, False],
            "answer": ["line one\nline two", "<b>x</b>"],
        }
    )
    html = to_html(df)
    assert "<th>Trim proportion</th>" in html and "<th>n questions</th>" in html
    assert ">0.12<" in html and ">n/a<" in html and "NaN" not in html and "None" not in html
    assert (
        ">yes<" in html
        and ">12 000<" in html
        and "line one\nline two" in html
        and "&lt;b&gt;x&lt;/b&gt;" in html
    )
    assert "<th></th>" not in html  # no index column
    shown = table(df)
    assert shown._repr_html_() == html and type(shown[["judge"]]) is pd.DataFrame
    assert header("recall_at_k") == "Recall at k" and header("judge-a") == "judge-a"


def test_published_run_has_no_absolute_path_no_remote_script_and_a_header_on_every_page(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CUBE_PROJECT_ROOT", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(tmp_path)
    params = _write(tmp_path, "p.yaml", {"run": "share", "judges": JUDGES})
    summary = execute_run(
        params, notebooks_dir=ROOT / "notebooks", only="00..01", log=lambda _: None
    )
    assert summary.ok and summary.committed
    run = tmp_path / "outputs" / "share"
    texts = {
        f: f.read_text(encoding="utf-8", errors="replace")
        for f in run.rglob("*")
        if f.is_file() and f.suffix in {".html", ".json", ".yaml", ".csv", ".ipynb", ".txt"}
    }
    assert texts
    for f, text in texts.items():
        assert str(tmp_path) not in text and str(ROOT) not in text and ".staging" not in text, f
    pages = sorted((run / "report").glob("0*.html")) + sorted(
        (run / "report" / "code").glob("0*.html")
    )
    assert len(pages) == 4
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]*src=[\"']?(https?:)?//", text), page
        nav = re.search(r'<nav class="cube-nav".*?</nav>', text, re.S).group(0)
        assert "index.html" in nav
    first = (run / "report" / "00_paper_tables.html").read_text(encoding="utf-8")
    assert 'href="01_dataset_prep.html" rel="next"' in first and 'rel="prev"' not in first
    second = (run / "report" / "code" / "01_dataset_prep.html").read_text(encoding="utf-8")
    assert 'href="../index.html"' in second and 'href="00_paper_tables.html" rel="prev"' in second
    index = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert (
        "Table 4, reproduced" in index and "paper_table4_reproduced.csv" in index
    )  # grouped, with its caption
    assert (
        index.index("00 ·")
        < index.index("paper_table4_reproduced.csv")
        < index.index("corpus_overview.csv")
    )
    data = yaml.safe_load(params.read_text())
    data["corpus"] = {"seed": 5}
    params.write_text(yaml.safe_dump(data), encoding="utf-8")
    from cube.config.params import load_params
    from cube.config.runpaths import RunPaths
    from cube.run.execute import publish

    publish(
        load_params(params),
        RunPaths.for_params(load_params(params)),
        notebooks_dir=ROOT / "notebooks",
    )
    index = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert index.count("out of date") >= 1 and 'class="stale"' in index


def test_sweep_runs_one_folder_per_combination_and_links_them(tmp_path, monkeypatch):
    from cube.run.sweep import parse_grid, run_sweep

    monkeypatch.chdir(ROOT)
    params = _write(
        tmp_path, "p.yaml", {"run": "sw", "outputs_dir": str(tmp_path / "out"), "judges": JUDGES}
    )
    index = run_sweep(params, ["corpus.n_items=6,8"], only="01", log=lambda _: None)
    assert index == tmp_path / "out" / "sw__sweep" / "index.html"
    for n in (6, 8):
        run = tmp_path / "out" / f"sw__n_items-{n}"
        assert len(pd.read_parquet(run / "data" / "corpus.parquet")) == n
        assert f'href="../sw__n_items-{n}/report/index.html"' in index.read_text(encoding="utf-8")
    with pytest.raises(ParamsError, match="cannot read"):
        parse_grid(["corpus.seed", "=1"])
    with pytest.raises(ParamsError, match="corpus.n_item: unknown key"):
        run_sweep(params, ["corpus.n_item=6"], log=lambda _: None)


def test_sweep_records_a_combination_with_bad_inputs_as_failed_and_goes_on(tmp_path, monkeypatch):
    """execute_run checks the inputs before any stage (InputError): one bad combination must not
    stop the sweep; its row says failed with the message, the others run, the index is written."""
    from types import SimpleNamespace

    from cube.run import execute
    from cube.run.sweep import run_sweep

    ran = []

    def fake_execute_run(path, **_):
        name = yaml.safe_load(Path(path).read_text(encoding="utf-8"))["run"]
        ran.append(name)
        if name.endswith("n_items-6"):
            raise execute.InputError(
                "  - corpus: kb.csv: no such file\n1 error, 0 warnings; nothing was run"
            )
        results = tmp_path / f"{name}.json"
        results.write_text(
            json.dumps({"decision": {"cube_score": 71.5, "verdict": "good"}}), encoding="utf-8"
        )
        return SimpleNamespace(ok=True, paths=SimpleNamespace(results=results))

    monkeypatch.setattr(execute, "execute_run", fake_execute_run)
    params = _write(
        tmp_path, "p.yaml", {"run": "sw", "outputs_dir": str(tmp_path / "out"), "judges": JUDGES}
    )
    index = run_sweep(params, ["corpus.n_items=6,8,10"], log=lambda _: None)
    assert ran == ["sw__n_items-6", "sw__n_items-8", "sw__n_items-10"]
    page = index.read_text(encoding="utf-8")
    bad = page.split("sw__n_items-6</a>")[1].split("</tr>")[0]
    assert "failed" in bad and "kb.csv: no such file" in bad
    assert page.count("71.5") == 2 and page.count("published") == 2
