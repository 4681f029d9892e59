"""`cube simulate`: the simulation study (coverage, p-values, power, or the sequential design) on
runs simulated with a known truth (`cube.run.simulate`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# `cube simulate`'s defaults: within about 3 minutes on 2 cores
# (benchmarks/simulation_coverage.py scales up)
SIMULATE_DEFAULTS = {
    "replicates": 40,
    "questions": "40,100,300",
    "bootstrap": 500,
    "permutations": 500,
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser(
        "simulate",
        help="simulation study: coverage of every printed interval, compare's p-values "
        "and power, on runs simulated with a known truth",
        description="Draw simulated runs (judges with bounds, noise and leniency; a system with "
        "R@k and rank effects) whose truth is known, evaluate each with the run's own estimator "
        "(evaluate, bootstrap, gate, compare) and print the coverage of every interval the report "
        "prints, with its Monte Carlo error, compare's p-value uniformity and its power at the "
        "printed MDE. The estimator's settings are the params' `analysis`; the study's are its "
        "`simulation` section, overridden by the options. Writes outputs/simulate/<run>/.",
    )
    sim.add_argument(
        "params",
        type=Path,
        nargs="?",
        default=Path("params/default.yaml"),
        help="params YAML file (default params/default.yaml)",
    )
    sim.add_argument(
        "--replicates",
        type=int,
        default=SIMULATE_DEFAULTS["replicates"],
        help=f"simulated runs per size (default {SIMULATE_DEFAULTS['replicates']})",
    )
    sim.add_argument(
        "--questions",
        default=SIMULATE_DEFAULTS["questions"],
        help=f"question-set sizes, comma-separated (default {SIMULATE_DEFAULTS['questions']})",
    )
    sim.add_argument(
        "--bootstrap",
        type=int,
        default=SIMULATE_DEFAULTS["bootstrap"],
        help=f"bootstrap resamples per run (default {SIMULATE_DEFAULTS['bootstrap']})",
    )
    sim.add_argument(
        "--permutations",
        type=int,
        default=SIMULATE_DEFAULTS["permutations"],
        help=f"permutations of compare's p-value (default {SIMULATE_DEFAULTS['permutations']})",
    )
    sim.add_argument("--no-power", action="store_true", help="skip the pairs simulated at the MDE")
    sim.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    sim.add_argument(
        "--sequential",
        action="store_true",
        help="simulate the sequential design instead (issue 31): the jury CuBE's confidence "
        "sequence's coverage at every look, wrong verdicts at the stop and the questions and calls "
        "used against fixed-n runs, per true CuBE --inside points below the lowest verdict edge; "
        "the largest of --questions is the question set",
    )
    sim.add_argument(
        "--inside",
        default="0,5,10,15,20,30",
        help="with --sequential: the true CuBEs' distances below the lowest verdict edge, "
        "comma-separated (default 0,5,10,15,20,30)",
    )
    sim.add_argument(
        "--out", type=Path, default=None, help="output folder (default outputs/simulate/<run>)"
    )
    sim.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.run.simulate import run_sequential, run_simulate, sequential_lines, summary_lines

    if args.sequential:
        folder, seq_result = run_sequential(
            args.params,
            out=args.out,
            log=lambda m: print(m, file=sys.stderr),
            replicates=args.replicates,
            max_questions=max(int(x) for x in str(args.questions).split(",") if x.strip()),
            distances=[float(x) for x in str(args.inside).split(",") if x.strip()],
            workers=args.workers,
        )
        print("\n".join(sequential_lines(seq_result)))
        print(f"table: {folder}")
        return 0
    folder, result = run_simulate(
        args.params,
        out=args.out,
        log=lambda m: print(m, file=sys.stderr),
        replicates=args.replicates,
        bootstrap=args.bootstrap,
        questions=[int(x) for x in str(args.questions).split(",") if x.strip()],
        permutations=args.permutations,
        power=not args.no_power,
        workers=args.workers,
    )
    print("\n".join(summary_lines(result)))
    print(f"tables and figures: {folder}")
    return 0
