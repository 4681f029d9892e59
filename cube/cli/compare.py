"""`cube compare A B`: the paired comparison of two systems or runs (`cube.run.compare`), its
headline in one line."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmp = sub.add_parser(
        "compare",
        help="paired comparison of two systems or runs (delta, CI, p-value, MDE, regressions)",
        description="Compare side B with side A on their common questions: ΔCuBE, ΔW, ΔR@k and "
        "each Δ normalised dimension per judge and jury, a paired bootstrap interval, a paired "
        "permutation p-value, the minimum detectable ΔCuBE and the largest regressions and "
        "improvements. A and B are params files or run folders (of completed runs); the same run "
        "twice compares its first system with its second (or --system-a / --system-b). Writes "
        "outputs/compare/<a>__vs__<b>/ (comparison.json, tables, figures, index.html). Exit "
        "code 0; with --margin, the release decision's: 0 release, 4 hold: regression, 3 "
        "undecided.",
    )
    cmp.add_argument("a", type=Path, help="side A: params file or run folder")
    cmp.add_argument("b", type=Path, help="side B: params file or run folder")
    cmp.add_argument(
        "--system-a", default=None, help="system of side A (default: its primary system)"
    )
    cmp.add_argument(
        "--system-b",
        default=None,
        help="system of side B (default: its primary, or the second "
        "system when B is the same run as A)",
    )
    cmp.add_argument(
        "--outputs", type=Path, default=None, help="outputs folder (default: side A's outputs_dir)"
    )
    cmp.add_argument(
        "--permutations", type=int, default=1000, help="permutations of the p-value (default 1000)"
    )
    cmp.add_argument(
        "--top", type=int, default=20, help="regressions / improvements listed (default 20)"
    )
    cmp.add_argument(
        "--margin",
        type=_margin,
        default=None,
        help="decide the release of B against A by the non-inferiority rule with this margin "
        "(CuBE points; docs/explanation/release-gate.md) and exit 0 release, 4 hold: "
        "regression, 3 undecided (default: no decision, exit 0)",
    )
    cmp.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.method.analysis import p_is
    from cube.run.compare import run_compare

    out = run_compare(
        args.a,
        args.b,
        system_a=args.system_a,
        system_b=args.system_b,
        outputs=args.outputs,
        n_permutations=args.permutations,
        k=args.top,
    )
    head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    ci = head["delta_cube_ci"]
    print(
        f"{head['b']} vs {head['a']}: ΔCuBE {_fmt(head['delta_cube'])} "
        f"[{_fmt(ci[0])}, {_fmt(ci[1])}], p {p_is(head['p_value'])}, "
        f"MDE {_fmt(head['mde'])} (about 80 % power: see the page), "
        f"{head['n_questions']} questions, {head['n_regressions']} regressions, "
        f"{head['n_improvements']} improvements beyond the judges' noise (about "
        f"{_fmt(head['n_expected_by_chance'], 1)} of each with no difference)"
        + _flags_note(head.get("flags") or [])
    )
    for flag in (
        head.get("flags") or []
    ):  # as the page: the interval or p-value rests on a selection
        print(f"  flag: {flag}")
    print(f"comparison: {out / 'index.html'}")
    if args.margin is None:
        return 0
    return _decided(head, args.margin, *_question_checks(args))


def _question_checks(args: argparse.Namespace) -> tuple[list[str], int]:
    """The common question ids whose texts differ between the two sides' runs, and how many of
    A's scored questions B lacks."""
    from cube.run.compare import resolve_side
    from cube.run.release import baseline_only_questions, differing_questions

    a, b = resolve_side(args.a, args.system_a), resolve_side(args.b, args.system_b)
    differ = differing_questions(a.load_if_present("questions"), b.load_if_present("questions"))
    return differ, len(baseline_only_questions(a, b))


def _decided(head: dict, margin: float, differing: list[str], baseline_only: int = 0) -> int:
    """The release decision of B against A (`cube.method.release_rule`), its reasons and code:
    undecided when common ids hold different questions (`cube.run.release.differing_questions`)."""
    import pandas as pd

    from cube.method.release_rule import MIN_QUESTIONS, UNDECIDED, Ruling, decide
    from cube.pages.release import plain
    from cube.run.release import differing_reason, exit_code

    if differing:
        ruling = Ruling(UNDECIDED, [differing_reason(differing)], margin=margin)
    else:
        ruling = decide(
            pd.DataFrame(head["deltas"]),
            int(head["n_questions"]),
            margin=margin,
            alpha=float(head["settings"]["alpha"]),
            min_questions=MIN_QUESTIONS,
            n_units=head["settings"].get("n_units"),
            baseline_only=baseline_only,
        )
    print(f"release decision (margin {margin:g}): {ruling.decision}")
    for reason in ruling.reasons:
        print(f"  reason: {plain(reason)}")
    return exit_code(ruling.decision)


def _margin(text: str) -> float:
    """`--margin`: a finite number of CuBE points, at least 0 (as the params' `baseline.margin`)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a finite number of CuBE points, at least 0 (e.g. 5)"
        )
    return value


def _flags_note(flags: list[str]) -> str:
    return f" ({len(flags)} flag{'s' if len(flags) != 1 else ''} below)" if flags else ""


def _fmt(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"
