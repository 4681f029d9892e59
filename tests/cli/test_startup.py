"""The command line answers without loading the data stack: `cube --help` and every
subcommand's help import no pandas, pydantic or openai (issue 28; the timings are
benchmarks/cli_startup.py's), and `cube --version` reads the package metadata."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests import ROOT

HEAVY = ("pandas", "numpy", "pydantic", "openai", "papermill", "matplotlib", "yaml")

EVERY_HELP = """
import argparse, contextlib, io, json, sys
from cube.cli import build_parser, main
parser = build_parser()
sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
helps = [[]] + [[name] for name in sub.choices]
for name, p in sub.choices.items():  # nested commands (cube batch export ...)
    inner = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    helps += [[name, n] for a in inner for n in a.choices]
for words in helps:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main([*words, "--help"])
print(json.dumps({"helps": len(helps), "loaded": sorted(m for m in %r if m in sys.modules)}))
"""


def _modules_imported(args: list[str]) -> set[str]:
    """Top-level modules a `python -X importtime ARGS` process imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    names = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    return {n.split(".")[0] for n in names}


def test_cube_help_imports_no_pandas():
    loaded = _modules_imported(["-m", "cube.cli", "--help"])
    assert "cube" in loaded  # the measurement saw the package itself
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_every_subcommand_help_imports_none_of_the_data_stack():
    done = subprocess.run(
        [sys.executable, "-c", EVERY_HELP % (HEAVY,)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["helps"] > 15 and found["loaded"] == [], found


def test_version_comes_from_the_package_metadata(capsys):
    from cube.cli import main

    try:
        main(["--version"])
    except SystemExit as stop:
        assert stop.code == 0
    assert capsys.readouterr().out.strip() == f"cube {version('cube')}"


def test_the_help_lists_the_exit_codes_and_the_new_commands():
    from cube.cli import build_parser

    text = build_parser().format_help()
    for line in ("0    done", "1    a stage", "2    bad params", "3    `cube run`", "130  interr"):
        assert line in text, line
    assert "init" in text and "questions" in text


def test_cube_run_collects_garbage_as_the_kernels_do_and_gives_the_caller_its_settings_back():
    """`cube run`'s process (and the children it forks) use the kernels' collector thresholds, its
    imports frozen out of every later collection; a caller running it in-process gets its own
    thresholds back and its heap unfrozen, also after an error."""
    import gc

    from cube.cli import run as run_cli
    from cube.run.kernel import GC_THRESHOLDS

    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0 and before != GC_THRESHOLDS
    with pytest.raises(RuntimeError, match="inside"):
        with run_cli._fewer_collections():
            assert gc.get_threshold() == GC_THRESHOLDS
            assert gc.get_freeze_count() > 0
            raise RuntimeError("inside")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
