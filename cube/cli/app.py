"""The `cube` parser assembled from the subcommands' modules, and `main`, which runs one.

Each module of `cube.cli` named in `COMMANDS` is one subcommand: its `add_parser(subparsers)` adds
the subcommand's arguments and sets `func` to its `handle(args) -> int` (the exit code). A new
subcommand is a new module and one entry in `COMMANDS`; the order of `COMMANDS` is the order of
`cube --help` and of docs/reference/cli.md. `main` resolves the paths typed and the project root,
then calls `args.func(args)`; the errors every command shares are one line and exit code 2.

Only light modules at import time (`cube --help` in well under a second): pandas, pydantic and
the notebooks' machinery are imported by the handlers that need them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path

from cube.cli import (
    annotate,
    batch,
    compare,
    docs_reference,
    example_kb,
    init,
    params_reference,
    plan,
    questions,
    report,
    run,
    serve,
    simulate,
    sweep,
    validate,
)
from cube.config.project import ROOT_ENV, find_marked_root, project_root, working_dir

# the subcommands, in the order `cube --help` lists them
COMMANDS = (
    init,
    run,
    plan,
    report,
    validate,
    questions,
    example_kb,
    annotate,
    sweep,
    params_reference,
    batch,
    compare,
    serve,
    simulate,
    docs_reference,
)

EPILOG = """examples:
  cube init                                    write params.yaml for a first run (asks, or flags)
  cube run params/default.yaml                 the whole sequence, offline, on the demo corpus
  cube run params/llm_jury.yaml --only 03..06  re-score and re-analyse only
  cube run params/default.yaml --force         re-execute every stage even if up to date
Relative paths inside a params file are read from that file's folder.
API keys are read from the environment variables that params name (api_key_env); they never
appear in params, outputs or reports.
exit codes:
  0    done (`cube run`: published, with a verdict)
  1    a stage of `cube run` failed (nothing published; see report/last_run.html)
  2    bad params or data, a preflight problem, a locked run folder, or a file in the way
  3    `cube run`: published, but the verdict is withheld (judging failed; every call to the
       system failed: each reason with its status, a body excerpt and its count is printed; its
       retrieved passages or ids did not map, so retrieval was not measured; or another reason
       the report and the summary lines name)
  130  interrupted (Ctrl-C; re-run to resume)"""


def build_parser() -> argparse.ArgumentParser:
    """The `cube` parser: each subcommand's arguments and, as `func`, the function that runs it."""
    p = argparse.ArgumentParser(
        prog="cube",
        description="CuBE workbench: evaluate RAG question answering between zero- and "
        "full-information bounds.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"cube {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def _version() -> str:
    """The installed package's version (its metadata), or why there is none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cube")
    except PackageNotFoundError:
        return "(not installed: run from a checkout without `pip install -e .`)"


# paths typed on the command line, read from the current folder (everything else, such as outputs
# and the paths inside params, from the project root)
TYPED_PATHS = (
    "params",
    "notebooks",
    "outputs",
    "out",
    "path",
    "model",
    "log",
    "folder",
    "kb",
    "questions_file",
    "answers",
)


def main(argv: list[str] | None = None) -> int:
    """Run `cube ARGV` (default: the process's arguments); the subcommand's exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.parser = parser  # the whole command, for the handlers that show it (`cube docs-reference`)
    args.cwd = Path.cwd()  # the folder paths were typed in (the command runs in the project root)
    params_file = getattr(args, "params", None)
    # the params file as typed (folder included), for the commands a message tells the user to run
    args.params_typed = shlex.quote(str(params_file)) if isinstance(params_file, Path) else ""
    for name in TYPED_PATHS:
        if isinstance(getattr(args, name, None), Path):
            # absolute without following links: a writer must see a link as the link it is
            setattr(args, f"{name}_unresolved", Path(os.path.abspath(getattr(args, name))))
            setattr(args, name, getattr(args, name).resolve())
    # The project root: the nearest folder with pyproject.toml and cube/ above the current folder,
    # else above the params file, else here.
    root = (
        project_root()
        if (os.environ.get(ROOT_ENV) or find_marked_root())
        else (find_marked_root(args.params.parent) if isinstance(params_file, Path) else None)
        or Path.cwd()
    )
    with working_dir(root), _root_env(root):
        return _dispatch(args)


@contextlib.contextmanager
def _root_env(root: Path):
    old = os.environ.get(ROOT_ENV)
    os.environ[ROOT_ENV] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ROOT_ENV, None)
        else:
            os.environ[ROOT_ENV] = old


def _dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand (`args.func`, set by its parser); the errors every command shares are
    one line on stderr and exit code 2."""
    try:
        return args.func(args)
    except Exception as err:
        if not _shared_error(err):
            raise
        prefix = "cube" if _is_error(err, "cube.run.state", "RunLocked") else "error"
        print(f"{prefix}: {err}", file=sys.stderr)
        return 2


# The errors every command reports as one line and exit code 2: (module, class). A class is looked
# up only when its module was imported (an error cannot come from a module never loaded), so the
# command line imports none of them up front.
SHARED_ERRORS = (
    ("cube.run.state", "RunLocked"),
    ("cube.config.params", "ParamsError"),
    ("cube.run.notebook", "MissingStageError"),
    ("cube.run.stages", "ParamsMismatchError"),
)


def _is_error(err: BaseException, module: str, name: str) -> bool:
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(err, getattr(loaded, name))


def _shared_error(err: BaseException) -> bool:
    return isinstance(err, FileNotFoundError | ValueError) or any(
        _is_error(err, m, n) for m, n in SHARED_ERRORS
    )
