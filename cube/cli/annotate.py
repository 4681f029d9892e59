"""`cube annotate`: export the human annotation sheet of a run (`cube.run.human`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from cube.cli.common import load_params
from cube.config.project import display_path, resolve
from cube.config.runpaths import RunPaths

if TYPE_CHECKING:  # `cube --help` imports no pydantic (tests/cli/test_startup.py)
    from cube.config.params import Params


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
        "--for-review",
        action="store_true",
        help="the weekly review sheet instead (annotation/review_sheet): the regressed questions "
        "of report/decision.json, the questions the judges disagree on most and the run's random "
        "sample, with a key whose `reason` column says why each is there; ratings imported later "
        "recalibrate the run from its random sample (cube.run.review)",
    )
    a.add_argument(
        "--disagreements",
        type=int,
        default=20,
        metavar="K",
        help="with --for-review: the K (question, system) pairs of largest judge spread "
        "(default 20)",
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
    if args.for_review:
        return _review(params, paths, args)
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


def _review(params: Params, paths: RunPaths, args: argparse.Namespace) -> int:
    """`--for-review`: write the review sheet (always anew: it follows the latest decision) and
    say what it holds."""
    from cube.run.review import export_review

    if args.disagreements < 0:
        raise SystemExit("annotate: --disagreements must be 0 or more")
    files, report = export_review(
        params, paths, disagreements=args.disagreements, out=args.out, raters=args.raters
    )
    for path in files:
        print(display_path(path))
    spread = report["spread_range"]
    print(
        f"review: {report['pairs']} (question, system) pairs, every answer set of each: "
        f"{report['regressed']} regressed ({report['regressed_from']}), "
        f"{report['disagreement']} of largest judge spread"
        + (f" ({spread[1]:.1f}-{spread[0]:.1f} points)" if spread else "")
        + f", {report['sample']} of the random sample (the ratings recalibrate from these)"
    )
    if report["regressed_not_in_answers"]:
        print(
            f"review: regressed ids not in this run's answers: {report['regressed_not_in_answers']}"
        )
    if report.get("disagreement_note"):
        print(f"review: {report['disagreement_note']}")
    return 0
