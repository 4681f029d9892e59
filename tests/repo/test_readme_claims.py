"""What the README claims, checked against the code (issue 37: it said the report opens on the
decision page; it opens on the index, whose first section is the decision summary).

Every `cube` command of its code blocks is a subcommand taking the options shown, every params
file and documentation page it names exists, the place the report lands and what it opens on are
the index template's, and the layer order it states is the import-linter contract's."""

from __future__ import annotations

import re
import shlex
import tomllib

from cube.cli import build_parser
from tests import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_lines() -> list[str]:
    # every fenced block in order (a block's closing fence is never read as an opening one)
    blocks = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)
    return [
        line.split("#")[0].strip()
        for lang, block in blocks
        if lang == "bash"
        for line in block.splitlines()
    ]


def _subcommands() -> dict:
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def test_every_cube_command_shown_exists_with_its_options():
    commands = _subcommands()
    shown = [
        shlex.split(line.split("&&")[0])
        for line in _code_lines()
        if re.match(r"(\.venv/bin/)?cube ", line)
    ]
    assert len(shown) >= 8
    for words in shown:
        name = words[1]
        assert name in commands, f"README runs `cube {name}`, which is no subcommand"
        options = {o for a in commands[name]._actions for o in a.option_strings}
        for word in words[2:]:
            if word.startswith("--"):
                assert word in options, f"`cube {name}` has no option {word}"


def test_every_params_file_and_page_it_names_exists():
    for path in set(re.findall(r"\bparams/[a-z_]+\.yaml", README)):
        assert (ROOT / path).is_file(), path
    for target in re.findall(r"\]\(((?:docs/)[^)#\s]+)", README):
        assert (ROOT / target).exists(), target


def test_the_report_it_describes_is_the_index_opening_on_the_decision_summary():
    assert "outputs/default/report/index.html" in README
    assert "opens on the decision page" not in README
    assert "opens on the decision summary" in README
    template = (ROOT / "cube" / "pages" / "templates" / "index.html.j2").read_text("utf-8")
    first = re.search(r'<section id="([^"]+)">\s*<h2>([^<]+)</h2>', template)
    assert first.groups() == ("decision", "Decision summary")


def test_the_layer_order_it_states_is_the_contracts():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = pyproject["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c.get("type") == "layers")["layers"]
    stated = re.search(r"\((config < .*?)\)", README, flags=re.S).group(1)
    said = [part.strip() for part in " ".join(stated.split()).split("<")]
    # import-linter lists the top first, `a : b` for independent layers of one level
    expected = [
        ", ".join(name.replace("cube.", "").strip() for name in layer.split(":"))
        for layer in reversed(layers)
    ]
    assert said == expected
