"""`cube sweep`: one run per combination of params values, plus an index (`cube.run.sweep`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cube.config.project import display_path


def add_parser(sub: argparse._SubParsersAction) -> None:
    sw = sub.add_parser(
        "sweep",
        help="run one evaluation per combination of params values, plus an index",
        description="Apply each combination of the --grid values to the params file (validated "
        "like the file), give it its own run name <run>__<key>-<value>..., execute it as `cube "
        "run` does (outputs/<run>__<key>-<value>/), and write outputs/<run>__sweep/index.html "
        "linking every run's report with its values, CuBE score and verdict.",
    )
    sw.add_argument("params", type=Path, help="params YAML file the sweep starts from")
    sw.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2",
        help="a params key path and its values, e.g. corpus.seed=1,2,3 (repeat for a grid)",
    )
    sw.add_argument(
        "--only", metavar="SEL", help="notebooks to run in each combination (as for `cube run`)"
    )
    sw.add_argument(
        "--force", action="store_true", help="re-execute the selected stages even if up to date"
    )
    sw.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.run.sweep import run_sweep

    folder = run_sweep(args.params, args.grid, only=args.only, force=args.force)
    print(f"sweep: {display_path(folder)}")
    return 0
