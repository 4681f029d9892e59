"""Issue 12's remaining gaps: a failed attempt leaves no new empty run folder; no absolute path in
outputs when the params file or outputs folder lies outside the project; a stage's fingerprint reads
only the models it calls (not their prices); a notebook run alone is seen by `cube run`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from cube.config.project import list_notebooks
from cube.run.execute import execute_run
from tests import ROOT
from tests.factories import make_project

NOTEBOOKS = list_notebooks(ROOT / "notebooks")
JUDGES = [
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
]


def _project(tmp_path: Path, notebooks: tuple[str, ...]) -> Path:
    return make_project(tmp_path, notebooks)


def _kernel_env(monkeypatch, root: Path) -> None:
    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(root)


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# ------------------------------------------------------------ 1. a failed attempt leaves nothing
def test_a_failed_papermill_attempt_on_a_new_run_name_leaves_no_run_folder(tmp_path, monkeypatch):
    import papermill as pm

    root = _project(tmp_path, ("06",))
    _kernel_env(monkeypatch, root)
    nb = str(root / "notebooks" / "06_cube_score.ipynb")
    with pytest.raises(pm.PapermillExecutionError, match="MissingStageError"):
        pm.execute_notebook(
            nb,
            str(tmp_path / "out.ipynb"),
            progress_bar=False,
            kernel_name="python3",
            parameters={"overrides": '["run=fresh"]'},
        )
    assert not (
        root / "outputs"
    ).exists()  # neither outputs/fresh/ nor the outputs/ folder it would have made
    # A run folder that existed before is never touched, even when it holds only what open_run
    # writes.
    good = root / "outputs" / "good"
    (good / "tables").mkdir(parents=True)
    (good / "tables" / "kept.csv").write_text("a\n1\n", encoding="utf-8")
    bare = root / "outputs" / "bare"
    bare.mkdir()
    for run in ("good", "bare"):
        with pytest.raises(pm.PapermillExecutionError, match="MissingStageError"):
            pm.execute_notebook(
                nb,
                str(tmp_path / "out.ipynb"),
                progress_bar=False,
                kernel_name="python3",
                parameters={"overrides": f'["run={run}"]'},
            )
    assert (good / "tables" / "kept.csv").read_text(encoding="utf-8") == "a\n1\n"
    assert (bare / "params.yaml").exists()


def test_a_notebook_whose_failed_cell_removed_the_empty_folder_writes_it_again(
    tmp_path, monkeypatch
):
    import pandas as pd

    from cube.config.params import parse_params
    from cube.config.runpaths import RunPaths
    from cube.run.notebook import Run, remove_if_empty

    params = parse_params({"run": "again", "judges": JUDGES})
    paths = RunPaths(
        root=tmp_path / "outputs" / "again", cache=tmp_path / "outputs" / "cache.sqlite"
    ).ensure()
    paths.params.write_text("run: again\n", encoding="utf-8")
    assert remove_if_empty(paths, [paths.root, paths.root.parent])
    assert not (tmp_path / "outputs").exists()
    run = Run(params=params, paths=paths, params_path=tmp_path / "p.yaml")
    run.table(
        "t", pd.DataFrame({"x": [1]})
    )  # the next cell of the kernel writes: the folder is made again
    assert (paths.tables / "t.csv").exists() and yaml.safe_load(paths.params.read_text())[
        "run"
    ] == "again"
    assert not remove_if_empty(paths, [paths.root])  # it holds a table now: never removed


def test_cube_run_on_a_new_run_name_failing_at_validation_or_preflight_leaves_no_run_folder(
    tmp_path, monkeypatch, capsys
):
    from cube.cli import main

    root = _project(tmp_path, ("00", "01"))
    _kernel_env(monkeypatch, root)
    _write(
        root / "params" / "typo.yaml",
        {"run": "typo", "judges": JUDGES, "analysis": {"trim_proportoin": 0.2}},
    )
    _write(
        root / "params" / "key.yaml",
        {
            "run": "key",
            "judges": [
                {
                    "name": "j",
                    "model": {
                        "provider": "openai",
                        "model": "m",
                        "base_url": "http://127.0.0.1:9/v1",
                        "api_key_env": "CUBE_TEST_UNSET_KEY",
                    },
                }
            ],
        },
    )
    _write(root / "params" / "ok.yaml", {"run": "ok", "judges": JUDGES})
    monkeypatch.delenv("CUBE_TEST_UNSET_KEY", raising=False)
    assert main(["run", "params/typo.yaml"]) == 2 and main(["run", "params/key.yaml"]) == 2
    assert main(["run", "params/ok.yaml", "--only", "42"]) == 2  # a selection matching no notebook
    err = capsys.readouterr().err
    assert "trim_proportoin" in err and "CUBE_TEST_UNSET_KEY" in err and "--only 42" in err
    assert not (root / "outputs").exists()


# ------------------------------------------ 2. no absolute path when params or outputs lie outside
def test_params_and_outputs_outside_the_project_leave_no_local_path_in_outputs(
    tmp_path, monkeypatch
):
    from cube.config.project import shared_values

    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(ROOT)  # the project is this repository; params and outputs are elsewhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    from cube.kb.demo import generate_demo_corpus

    generate_demo_corpus(12, "zh", seed=7).to_csv(
        elsewhere / "kb.csv", index=False
    )  # a file corpus outside
    params = _write(
        elsewhere / "mine.yaml",
        {
            "run": "outside",
            "outputs_dir": str(elsewhere / "out"),
            "judges": JUDGES,
            "corpus": {"source": "file", "path": str(elsewhere / "kb.csv")},
        },
    )
    summary = execute_run(params, only="00..01", log=lambda _: None)
    assert summary.ok and summary.committed
    run = elsewhere / "out" / "outside"
    published = [
        f
        for f in run.rglob("*")
        if f.is_file() and f.suffix in {".html", ".json", ".yaml", ".csv", ".ipynb"}
    ]
    assert run / "data" / ".provenance.json" in published
    assert {f.suffix for f in published} >= {".html", ".json", ".yaml", ".csv", ".ipynb"}
    for f in published:
        text = f.read_text(encoding="utf-8", errors="replace")
        assert (
            str(tmp_path) not in text
            and str(Path.home()) + os.sep not in text
            and str(ROOT) not in text
        ), f
    shown = yaml.safe_load((run / "params.yaml").read_text(encoding="utf-8"))
    # the recorded params name the files from the run folder (read back from there, as any params
    # file's paths): no folder above elsewhere/ is written; values stay values
    assert shown["outputs_dir"] == ".." and shown["corpus"]["path"] == "../../kb.csv"
    assert "/" in shown["corpus"]["empty_values"]
    executed = (run / "notebooks" / "01_dataset_prep.ipynb").read_text(encoding="utf-8")
    assert 'params_path = \\"mine.yaml\\"' in executed and 'run_dir = \\"outside\\"' in executed
    again = execute_run(
        params, only="00..01", log=lambda _: None
    )  # the published params.yaml still resumes
    assert [s.status for s in again.stages] == ["up to date", "up to date"]
    inside, cut = shared_values(
        {"outputs_dir": str(ROOT / "outputs"), "corpus": {"path": "/elsewhere/kb.csv"}}, ROOT
    )
    assert inside == {"outputs_dir": "outputs", "corpus": {"path": "kb.csv"}} and cut == [
        "corpus.path"
    ]


def test_the_last_run_page_shows_no_local_path(tmp_path, monkeypatch):
    from cube.run.state import write_last_run

    monkeypatch.setenv("CUBE_PROJECT_ROOT", str(tmp_path))
    page = write_last_run(
        tmp_path / "report",
        status="failed",
        params_path=Path("p.yaml"),
        stages=[
            {
                "notebook": "01",
                "status": "failed",
                "seconds": 1,
                "error": f"CorpusError: {tmp_path}/data/kb.csv: not found",
            }
        ],
        message=f"see {Path.home()}/notes",
    )
    text = page.read_text(encoding="utf-8")
    assert (
        "CorpusError: data/kb.csv: not found" in text
        and str(tmp_path) not in text
        and "see ~/notes" in text
    )


# ------------------------------------- 3. a stage reads only the models it calls, not their prices
def _stage_set(file: str, edit) -> list[str]:
    import copy

    from cube.config.params import parse_params
    from cube.run.stages import stage_fingerprints, stages_affected

    base = yaml.safe_load((ROOT / "params" / file).read_text(encoding="utf-8"))
    edited = copy.deepcopy(base)
    edit(edited)
    before = stage_fingerprints(parse_params(base), NOTEBOOKS, ROOT)
    return [
        n[:2]
        for n in stages_affected(before, stage_fingerprints(parse_params(edited), NOTEBOOKS, ROOT))
    ]


def test_stage_sets_after_model_edits():
    from_03 = ["03", "04", "05", "06", "07", "08", "09", "10", "11"]
    new_model = {
        "provider": "openai",
        "model": "claude-x",
        "base_url": "http://127.0.0.1:9/v1",
        "price_input_per_m": 3.0,
    }

    def add_llm_judge(d):
        d["models"]["claude-x"] = new_model
        d["judges"].append({"name": "Claude-X", "model": "claude-x"})

    assert _stage_set("llm_jury.yaml", add_llm_judge) == from_03
    assert (
        _stage_set("llm_jury.yaml", lambda d: d["models"].update({"claude-x": new_model})) == []
    )  # referred to by none
    for field, value in [
        ("price_input_per_m", 5.0),
        ("price_output_per_m", 0.0),
        ("currency", "CNY"),
        ("max_concurrency", 2),
        ("timeout_s", 5.0),
        ("max_attempts", 2),
        ("api_key_env", "OTHER_KEY"),
    ]:
        assert (
            _stage_set(
                "llm_jury.yaml", lambda d, f=field, v=value: d["models"]["gpt-4o"].update({f: v})
            )
            == []
        ), field
    # what identifies a judge's calls re-runs from 03; the answerer's (qwen also judges) from 02
    assert (
        _stage_set("llm_jury.yaml", lambda d: d["models"]["gpt-4o"].update(temperature=0.5))
        == from_03
    )
    assert (
        _stage_set(
            "llm_jury.yaml", lambda d: d["models"]["deepseek-v3"].update(base_url="http://h/v1")
        )
        == from_03
    )
    assert _stage_set("llm_jury.yaml", lambda d: d["models"]["qwen2.5-32b"].update(seed=1)) == [
        "02",
        *from_03,
    ]
    # an inline spec: its price is not what it reads either, its model name is
    assert _stage_set("default.yaml", lambda d: d["answerer"].update(price_input_per_m=1.0)) == []
    assert (
        _stage_set("default.yaml", lambda d: d["judges"][0]["model"].update(price_output_per_m=1.0))
        == []
    )
    assert (
        _stage_set("default.yaml", lambda d: d["judges"][0]["model"].update(model="rubric"))
        == from_03
    )
    # a reference under any key naming a model (e.g. a refusal question writer's `refusal_model`)
    # counts
    from cube.run.stages import _model_refs

    section = {
        "refusal_model": "qwen",
        "refusal_generator": "qwen",
        "nested": [{"answerer": "gpt"}],
        "model": "nope",
    }
    assert _model_refs(section, {"qwen", "gpt"}, "diagnostics") == {"qwen", "gpt"}


def test_a_price_edit_does_not_make_the_data_disagree_with_the_params(tmp_path):
    import pandas as pd

    from cube.run.notebook import open_run
    from cube.run.stages import ParamsMismatchError

    data = yaml.safe_load((ROOT / "params" / "llm_jury.yaml").read_text(encoding="utf-8"))
    data["outputs_dir"] = str(tmp_path / "out")
    params = _write(tmp_path / "jury.yaml", data)
    open_run(params).save("scores", pd.DataFrame({"x": [1]}))
    open_run(params, overrides=["models.gpt-4o.price_input_per_m=9.0"]).load(
        "scores"
    )  # no mismatch
    with pytest.raises(ParamsMismatchError, match=r"models\.gpt-4o\.temperature"):
        open_run(params, overrides=["models.gpt-4o.temperature=0.7"]).load("scores")


# ----------------------------------------------------- 4. a notebook run alone is seen by `cube
# run`
def test_cube_run_re_executes_a_stage_a_notebook_run_alone_changed_and_the_stages_reading_it(
    tmp_path, monkeypatch
):
    import pandas as pd
    import papermill as pm

    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(ROOT)
    params = _write(
        tmp_path / "p.yaml",
        {
            "run": "alone",
            "outputs_dir": str(tmp_path / "out"),
            "judges": JUDGES,
            "corpus": {"n_items": 12, "seed": 1},
            "questions": {"limit": 6},
            "stages": {"paper_tables": "on"},  # 6 questions: `auto` would skip 00
        },
    )
    run = tmp_path / "out" / "alone"
    first = execute_run(params, only="00..02", log=lambda _: None)
    assert first.ok and [s.status for s in first.stages] == ["executed"] * 3
    nb = str(ROOT / "notebooks" / "01_dataset_prep.ipynb")
    # the same params, output saved elsewhere: nothing changed, everything stays up to date
    pm.execute_notebook(
        nb,
        str(tmp_path / "same.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"params_path": str(params)},
    )
    same = execute_run(params, only="00..02", log=lambda _: None)
    assert [s.status for s in same.stages] == ["up to date"] * 3
    # 01 alone with another corpus seed writes its data into the run: 01 and 02 (reading it)
    # re-execute
    pm.execute_notebook(
        nb,
        str(tmp_path / "seed3.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"params_path": str(params), "overrides": ["corpus.seed=3"]},
    )
    logged: list[str] = []
    again = execute_run(params, only="00..02", log=logged.append)
    assert [s.status for s in again.stages] == ["up to date", "executed", "executed"]
    assert any(
        "01_dataset_prep: out of date (data/corpus.parquet was written with other params)" in m
        for m in logged
    )
    from cube.run.stages import read_provenance

    assert read_provenance(run / "data")["corpus"]["params"]["corpus"]["seed"] == 1
    assert len(pd.read_parquet(run / "data" / "corpus.parquet")) == 12
    # an executed notebook saved into the run by papermill (not by `cube run`) is not taken as up to
    # date
    pm.execute_notebook(
        str(ROOT / "notebooks" / "00_paper_tables.ipynb"),
        str(run / "notebooks" / "00_paper_tables.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"params_path": str(params)},
    )
    last = execute_run(params, only="00..02", log=lambda _: None)
    assert [s.status for s in last.stages] == ["executed", "up to date", "up to date"]


# ---------------------------------------------------- 5. `cube report` where only some notebooks
# ran
def test_cube_report_lists_the_pages_that_exist_and_names_the_stages_not_run(
    tmp_path, monkeypatch, capsys
):
    import papermill as pm

    from cube.cli import main

    root = _project(tmp_path, ("00", "01", "02"))
    _kernel_env(monkeypatch, root)
    run = root / "outputs" / "default"
    (run / "notebooks").mkdir(parents=True)
    pm.execute_notebook(
        str(root / "notebooks" / "00_paper_tables.ipynb"),
        str(run / "notebooks" / "00_paper_tables.ipynb"),
        progress_bar=False,
        kernel_name="python3",
    )
    assert main(["report", "params/default.yaml"]) == 0
    assert "report: outputs/default/report/index.html" in capsys.readouterr().out
    index = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert 'href="00_paper_tables.html"' in index and "freshness unknown" in index
    assert (run / "report" / "00_paper_tables.html").exists()
    start = index.index('id="missing-pages"')
    missing = index[start : index.index("</div>", start)]
    assert "(2 of 3 stages)" in missing and "01_dataset_prep" in missing and "02_qa_sets" in missing
    assert "cube run PARAMS.yaml --only 01" in missing and "00_paper_tables" not in missing
    assert 'href="01_dataset_prep.html"' not in index


def test_cube_report_takes_a_run_folder_of_a_papermill_sweep_and_refuses_a_run_never_made(
    tmp_path, monkeypatch, capsys
):
    import papermill as pm

    from cube.cli import main

    root = _project(tmp_path, ("00",))
    _kernel_env(monkeypatch, root)
    assert (
        main(["report", "params/default.yaml"]) == 2
    )  # nothing ran: no index of an empty run is made
    assert (
        "outputs/default: no run here yet" in capsys.readouterr().err
        and not (root / "outputs").exists()
    )
    pm.execute_notebook(
        str(root / "notebooks" / "00_paper_tables.ipynb"),
        str(tmp_path / "o.ipynb"),
        progress_bar=False,
        kernel_name="python3",
        parameters={"overrides": '["run=seed1", "corpus.seed=1"]'},
    )
    assert (
        main(["report", "outputs/seed1"]) == 0
    )  # docs/how-to/papermill.md: the papermill batch names runs by overrides only
    assert "report: outputs/seed1/report/index.html" in capsys.readouterr().out
    index = (root / "outputs" / "seed1" / "report" / "index.html").read_text(encoding="utf-8")
    assert (
        "paper_table4_reproduced.csv" in index
        and "00_paper_tables" in index[index.index('id="missing-pages"') :]
    )
