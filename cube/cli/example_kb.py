"""`cube example-kb`: write the synthetic long-format example spreadsheet."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser(
        "example-kb",
        help="write the synthetic long-format example spreadsheet (.xlsx or .csv)",
        description="Write a SYNTHETIC spreadsheet shaped like a real government-service export "
        "(one row per material, no id column, placeholders, nested-bracket variants, a "
        "parent-region column), the input of params/own_kb.yaml and "
        "docs/tutorials/own-knowledge-base.md.",
    )
    ex.add_argument("path", type=Path, help="output file, .xlsx or .csv")
    ex.add_argument("--seed", type=int, default=0)
    ex.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.kb.example import write_example_kb

    print(write_example_kb(args.path, seed=args.seed))
    return 0
