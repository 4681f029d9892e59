"""`cube annotate`: export the human annotation sheet of a run (`cube.run.human`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cube.cli.common import load_params
from cube.config.project import display_path, resolve
from cube.config.runpaths import RunPaths


def add_parser(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser(
        "annotate",
        help="export an annotation sheet (CSV + Excel) for human raters",
        description="Sample answers of a run (stratified by set and by retrieved / not "
        "retrieved; size and seed from params.human) and write a sheet with the question, the "
        "gold document, the answer and each dimension's five 0-2 criteria to fill in.",
    )
    a.add_argument("params", type=Path)
    a.add_argument(
        "--out",
        type=Path,
        default=None,
        help="sheet path without extension (default: outputs/<run>/annotation/annotation_sheet)",
    )
    a.add_argument(
        "--raters", nargs="*", default=None, help="rater ids: one row per rater and item"
    )
    a.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing sheet (by default it is kept: raters may be filling it in)",
    )
    a.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import time

    from cube.run.human import export_annotation

    params = load_params(args.params)
    started = time.time() - 1
    paths = RunPaths.for_params(params, resolve(params.outputs_dir))
    written = export_annotation(
        params, out=args.out, raters=args.raters, overwrite=args.overwrite, paths=paths
    )
    kept = [p for p in written if p.stat().st_mtime < started]
    for path in written:
        print(display_path(path))
    if kept:
        print(
            f"annotate: kept the existing sheet ({len(kept)} file(s)): raters may be filling it "
            "in; pass --overwrite to replace it"
        )
    return 0
