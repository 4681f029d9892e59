"""`cube report`: publish the report folder from what a run folder holds, executing nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cube.cli.common import load_params
from cube.config.project import display_path, resolve
from cube.config.runpaths import RunPaths


def add_parser(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser(
        "report",
        help="re-export the executed notebooks to HTML and rewrite index.html",
        description="Publish outputs/<run>/report/ from what the run folder holds, without "
        "executing anything: every executed notebook in outputs/<run>/notebooks/ (written by "
        "`cube run`, or saved there by papermill) becomes a page with and without code, each with "
        "a header linking the index and the previous/next page, and index.html lists the "
        "decision, the pages and every table and figure grouped by page, out-of-date ones marked. "
        "The pages load nothing from the network: the report folder can be sent and read "
        "offline.",
    )
    rep.add_argument(
        "params",
        type=Path,
        help="params YAML file of the run (e.g. params/default.yaml), or a run "
        "folder (e.g. outputs/seed1, made by a papermill sweep with `-p overrides "
        "'[\"run=seed1\"]'`)",
    )
    rep.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.run.execute import publish

    if args.params.is_dir():  # a run folder: the params its notebooks ran with are in params.yaml
        params = load_params(args.params / "params.yaml")
        paths = RunPaths(root=args.params, cache=args.params.parent / "cache.sqlite")
    else:
        params = load_params(args.params)
        paths = RunPaths.for_params(params, resolve(params.outputs_dir))
    if not paths.notebooks.is_dir() and not paths.data.is_dir():
        print(
            f"error: {display_path(paths.root)}: no run here yet (no notebooks/ nor data/); run "
            f"`cube run {display_path(args.params)}` or a notebook first",
            file=sys.stderr,
        )
        return 2
    print(f"report: {display_path(publish(params, paths))}")
    return 0
