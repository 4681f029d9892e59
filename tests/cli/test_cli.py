"""The `cube` command: help for every command, clear errors and exit codes."""

import yaml

from cube.cli import build_parser, main


def test_help_explains_every_command(capsys):
    parser = build_parser()
    text = parser.format_help()
    for command in ("run", "report", "validate", "annotate", "params-reference"):
        assert command in text
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        assert p.format_help().strip(), name
    assert (
        "--only" in sub.choices["run"].format_help()
        and "--force" in sub.choices["run"].format_help()
    )


def test_validate_prints_resolved_params_or_names_the_bad_key(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(
        yaml.safe_dump(
            {
                "run": "x",
                "judges": [
                    {"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}
                ],
            }
        ),
        encoding="utf-8",
    )
    assert main(["validate", str(good)]) == 0
    out = capsys.readouterr().out
    assert "trim_proportion" not in out and out.strip().splitlines()[-1].startswith("validate: OK")
    assert main(["validate", str(good), "--print"]) == 0
    assert "trim_proportion: 0.1" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: x\njudges: []\nanalysis: {trim: 0.2}\n", encoding="utf-8")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "analysis.trim: unknown key" in err and "judges" in err


def test_annotate_before_any_run_says_which_stage_is_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "fresh",
                "judges": [
                    {"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}
                ],
            }
        ),
        encoding="utf-8",
    )
    assert main(["annotate", str(params)]) == 2
    err = capsys.readouterr().err
    assert "02_qa_sets" in err and "answers.parquet" in err


def test_params_reference_is_markdown(capsys):
    assert main(["params-reference"]) == 0
    out = capsys.readouterr().out
    assert "| `trim_proportion` |" in out and "#### `judges[]`" in out


def test_report_and_validate_help_describe_themselves(capsys):
    import pytest

    for command, words in (
        ("report", "without executing anything"),
        ("validate", "Ends with one line"),
    ):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert words in out, command


def test_annotate_on_an_existing_sheet_says_it_kept_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "kept",
                "judges": [
                    {"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}
                ],
            }
        ),
        encoding="utf-8",
    )
    sheet = tmp_path / "outputs" / "kept" / "annotation" / "annotation_sheet.csv"
    sheet.parent.mkdir(parents=True)
    sheet.write_text("question_id,relevance.c1\nq1,2\n", encoding="utf-8")
    import os
    import time

    old = time.time() - 60
    os.utime(sheet, (old, old))
    assert main(["annotate", str(params)]) == 0
    out = capsys.readouterr().out
    assert (
        "outputs/kept/annotation/annotation_sheet.csv" in out and "kept the existing sheet" in out
    )
    assert "--overwrite" in out and sheet.read_text(encoding="utf-8").endswith("q1,2\n")
