"""`cube docs-reference`: write docs/reference/params.md, cli.md and results.md, generated from the
params schema, from this command's parser and from the run record's field descriptions."""

from __future__ import annotations

import argparse
from pathlib import Path

from cube.config.project import display_path


def add_parser(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "docs-reference",
        help="write the generated reference pages: params.md (the params schema), cli.md "
        "(this command) and results.md (the run record)",
        description="Write FOLDER/params.md, the params reference generated from the schema (as "
        "`cube params-reference` prints it), and FOLDER/cli.md, every subcommand of `cube` with "
        "its usage, description and options, generated from this parser, and FOLDER/results.md, "
        "results.json's fields generated from the run record's descriptions. The pages under "
        "docs/reference/ are these files: regenerate them (`make reference`) after changing the "
        "schema or a command; a test fails while they differ.",
    )
    d.add_argument(
        "folder",
        type=Path,
        nargs="?",
        metavar="FOLDER",
        default=None,
        help="output folder (default: docs/reference of the project root)",
    )
    d.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.config.reference import write_references
    from cube.run.record import write_results_reference

    folder = args.folder or Path("docs/reference")
    for path in [*write_references(folder, args.parser), write_results_reference(folder)]:
        print(display_path(path))
    return 0
