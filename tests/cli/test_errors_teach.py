"""Errors that teach (issue 23): validate before any stage, exit 2, the command as typed, short
messages."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from cube import cli
from cube.config.runpaths import RunPaths
from cube.run.execute import RunSummary, StageOutcome, has_published_run
from tests.city_export import city_export
from tests.kb.test_export_shape import GROUP, OWN_KB

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}]


def _write(folder: Path, name: str, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return folder / name


def test_run_with_a_bad_corpus_fails_before_any_stage_with_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "city").mkdir()
    city_export().to_csv(tmp_path / "city" / "export.csv", index=False)
    _write(
        tmp_path / "city",
        "bad_column.yaml",
        {
            "run": "city",
            "outputs_dir": str(tmp_path / "out"),
            "judges": JUDGES,
            "corpus": {
                "source": "file",
                "path": "export.csv",  # read from the params file's folder, city/
                "columns": OWN_KB,
                "group_by": GROUP,
            },
        },
    )
    assert cli.main(["run", "city/bad_column.yaml"]) == 2
    err = capsys.readouterr().err
    assert "empty 'item_name'" in err and "Suggested mapping" in err and "nothing was run" in err
    assert "`cube validate city/bad_column.yaml`" in err  # the command as typed, folder included
    assert len(err) < 2000, len(err)  # the real export's message was 22,067 characters on one line
    run = tmp_path / "out" / "city"
    assert (
        not (run / ".staging").exists() and not (run / "notebooks").exists()
    )  # no stage ran, not even 00


def test_a_failed_stage_of_a_first_run_claims_no_earlier_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    paths = RunPaths(root=tmp_path / "out" / "city", cache=tmp_path / "out" / "cache.sqlite")
    failed = RunSummary(paths, stages=[StageOutcome("01_dataset_prep", "failed", 1.0, "boom")])
    monkeypatch.setattr("cube.run.execute.execute_run", lambda *a, **k: failed)
    assert (
        cli.main(["run", "city/p.yaml", "--no-preflight"]) == 1
    )  # execute_run is mocked: no params file needed
    err = capsys.readouterr().err
    assert "no run of these params has succeeded yet" in err and "last successful run" not in err
    assert "`cube run city/p.yaml` again" in err
    assert not has_published_run(paths)
    paths.root.mkdir(parents=True)
    paths.manifest.write_text(json.dumps({"status": "committed"}))
    assert has_published_run(paths)
    assert cli.main(["run", "city/p.yaml", "--no-preflight"]) == 1
    assert "the report still shows the last successful run" in capsys.readouterr().err


def test_an_unknown_key_says_did_you_mean_with_the_path_the_user_wrote(tmp_path, capsys):
    p = _write(
        tmp_path,
        "typo.yaml",
        {
            "run": "x",
            "judges": JUDGES,
            "systems": [{"kind": "builtin", "name": "bm25", "top_N": 8}],
        },
    )
    assert cli.main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "systems[bm25].top_N: unknown key; did you mean 'top_n'?" in err
    assert "builtin" not in err and "(1 problem(s))" in err


def test_recorded_params_keep_a_file_in_the_home_folder_re_runnable(tmp_path, monkeypatch):
    """A file outside the project but in the home folder (a download) is recorded as ~/...: the
    recorded params.yaml runs again as recorded, and no user name is published."""
    from cube.config.params import parse_params
    from cube.config.project import shared_values
    from cube.run.validate import validate_data

    home = tmp_path / "home" / "someone"
    (home / "Downloads").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    city_export(n_services=4).to_csv(home / "Downloads" / "export.csv", index=False)
    project = tmp_path / "project"
    project.mkdir()
    columns = dict(OWN_KB, item_name="主项名称", variant="业务办理项名称")
    typed = {
        "run": "city",
        "judges": JUDGES,
        "corpus": {
            "source": "file",
            "path": str(home / "Downloads" / "export.csv"),
            "columns": columns,
            "group_by": ["区划名称", "主项名称"],
        },
    }
    recorded, cut = shared_values(typed, project)
    assert recorded["corpus"]["path"] == "~/Downloads/export.csv" and cut == []
    assert "someone" not in yaml.safe_dump(recorded, allow_unicode=True)
    report = validate_data(parse_params(recorded), project)
    assert report.ok, report.errors
    elsewhere = shared_values(
        {"corpus": {"path": str(tmp_path / "x.csv")}}, project
    )  # neither project nor home
    assert elsewhere == ({"corpus": {"path": "x.csv"}}, ["corpus.path"])


def test_a_comparison_written_in_the_staging_copy_names_the_run_folder():
    from cube.run.compare import run_folder_name

    assert run_folder_name(Path("/x/outputs/own_kb/.staging")) == "own_kb"
    assert run_folder_name(Path("/x/outputs/own_kb")) == "own_kb"


def test_progress_bars_under_cube_run_are_drawn_only_on_a_terminal(monkeypatch):
    import sys

    import pytest

    from cube.llm.models import progress_bar

    if sys.__stderr__.isatty():
        pytest.skip("stderr is a terminal here: bars are drawn, as they should be")
    monkeypatch.setenv("CUBE_PROGRESS", "terminal")
    assert progress_bar(
        range(3), disable=False
    ).disable  # a log file gets no bars, whatever the caller asked
    assert progress_bar(range(3), disable=True).disable
