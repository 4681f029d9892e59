"""docs/reference/params.md and cli.md are generated (from the params schema and from the parser
of `cube`), never written by hand: regenerated here, they must equal the committed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from cube.cli import build_parser, main
from cube.config.reference import write_references

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "reference"
REGENERATE = "python -m cube.cli docs-reference docs/reference   (or: make reference)"


@pytest.mark.parametrize("name", ["params.md", "cli.md"])
def test_committed_reference_is_what_the_code_generates(tmp_path, name):
    write_references(tmp_path, build_parser())
    committed = COMMITTED / name
    assert committed.is_file(), f"docs/reference/{name} is missing: run `{REGENERATE}`"
    generated = (tmp_path / name).read_text(encoding="utf-8")
    assert committed.read_text(encoding="utf-8") == generated, (
        f"docs/reference/{name} differs from what the code generates: run `{REGENERATE}`"
    )


def test_docs_reference_command_writes_every_page(tmp_path, capsys):
    assert main(["docs-reference", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["cli.md", "params.md", "results.md"]
    assert capsys.readouterr().out.count(".md") == 3


def test_committed_results_reference_is_what_the_record_generates():
    from cube.run.record import results_reference

    committed = COMMITTED / "results.md"
    assert committed.is_file(), f"docs/reference/results.md is missing: run `{REGENERATE}`"
    assert committed.read_text(encoding="utf-8") == results_reference(), (
        f"docs/reference/results.md differs from what the code generates: run `{REGENERATE}`"
    )


def test_cli_reference_names_every_subcommand_and_option():
    text = (COMMITTED / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        assert f"## `cube {name}`" in text, name
        for action in command._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, (name, option)
    assert "### `cube batch export`" in text
