"""`cube params-reference`: print the params reference generated from the schema."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser(
        "params-reference", help="print the params reference generated from the schema (Markdown)"
    ).set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.config.reference import params_reference

    print(params_reference())
    return 0
