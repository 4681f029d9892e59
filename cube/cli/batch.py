"""`cube batch export|import|submit|status|fetch`: judging through a batch API. The parser and
the actions are `cube.run.batch_cli`'s; this module plugs them in."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cube.run.batch_cli import add_batch_parser  # issue 15: export/import/submit/status/fetch

    add_batch_parser(sub)
    sub.choices["batch"].set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.run.batch_cli import batch_main

    return batch_main(args)
