"""The sequential design on simulated runs of the jury CuBE (issue 31, item 3): coverage of the
confidence sequence, wrong verdicts and the questions and calls it saves against fixed-n runs.

`cube simulate --sequential` per world (`cube.run.simulate.sequential_study`, the method in
`cube.method.simulate_sequential`): replicates of `cube.method.simulate`'s run model (two judges
with leniency, scale and noise; four dimensions; one system) whose true jury CuBE sits 0, 5, 10,
15, 20 and 30 points below the lowest verdict edge (40, in `poor`: the only band 30 points wide;
placed by the system's R@k). Each replicate takes up to `--questions` questions as the driver does
(families in a seeded random order, batches of whole families of >= 20 questions, looks from 40
questions on), computes the jury CuBE and its leave-family-group-out values with the method's own
arithmetic at every look, and the sequence `sequential.functional_look`, stopping by
`sequential.decide` (`verdict`). Worlds: `independent` (the default model) and `fam5` (families of
5 questions sharing their retrieval outcome half of the time and the answer's correctness, SD 0.25
of the zero-to-full gap, always: issue 30's hardest family world); `fam3` on request.

Columns: `coverage` (the truth inside the sequence at every look from 40 to the set's end, MC SE),
`first look` (the share of runs whose sequence missed it at the first look, 40 questions),
`fixed re-used` (the same for the fixed-n normal interval estimate +- 1.96 SE with the same
jackknife SE), `questions` (mean questions judged at the stop) and `saved` (the full set's calls
over the sequential run's; calls are questions x 27: 3 answers and 2 judges x 4 dimensions x 3
sets), then wrong verdicts: `seq` (at the stop; at the set's end the point estimate's band),
`full` (a fixed-n run of the whole set), `at mean n` (a fixed-n run of the sequential run's mean n,
rounded up to a look size), `peek` (a run stopping as soon as the fixed-n interval re-used after
each batch lies in one band), and `same error from` (the fixed n from which on every fixed-n run
errs no more often than the sequential run).

The last line is the headline: the calls saved 10 and 20 points inside the band (the issue's goal:
>= 2x and >= 4x) in the independent world and the lowest coverage of any row.

    PYTHONPATH=. python benchmarks/sequential_cube.py [--replicates 1000] [--questions 300]
        [--worlds independent,fam5] [--workers 2] [--seed 0] [--scale sqrt|log|linear]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # small matrix products: BLAS threads only contend

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import pandas as pd  # noqa: E402

from cube.config.params import load_params  # noqa: E402
from cube.run.simulate import sequential_study  # noqa: E402

WORLDS = {
    "independent": {},
    "fam3": {"family_size": 3, "family_retrieval_share": 0.5},
    "fam5": {
        "family_size": 5,
        "family_retrieval_share": 0.5,
        "family_correctness_share": 1.0,
        "answer_sd": 0.25,
    },
}


def rate(r: object, key: str) -> str:
    return f"{getattr(r, key):.3f} ({getattr(r, key + '_mc_se'):.3f})"


def print_table(world: str, table: pd.DataFrame) -> None:
    print(
        "world        inside truth  R@k  coverage       first look     fixed re-used  questions"
        "     saved  "
        "wrong: seq     full           at mean n          peek           same error from"
    )
    for r in table.itertuples():
        print(
            f"{world:<12} {r.inside:6.0f} {r.truth:5.1f} {r.recall:4.2f} {rate(r, 'coverage')}  "
            f"{rate(r, 'missed_first_look')}  "
            f"{rate(r, 'fixed_coverage_every_look')}  {r.mean_questions:5.1f} "
            f"({r.mean_questions_mc_se:3.1f})  {r.calls_saved:4.2f}x  "
            f"{rate(r, 'wrong_sequential')}  {rate(r, 'wrong_full')}  "
            f"{rate(r, 'wrong_at_mean_n')} n={r.fixed_n_at_mean:<3}  {rate(r, 'wrong_peek')}  "
            f"{r.n_same_error:g}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--worlds", default="independent,fam5")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scale", default="sqrt", choices=("sqrt", "log", "linear"),
        help="the sequence's scale (functional_look): linear is the sequence as first built",
    )  # fmt: skip
    parser.add_argument("--csv", type=Path, default=None, help="write every row here")
    args = parser.parse_args()
    base = load_params(ROOT / "params" / "default.yaml")
    print(
        f"# {args.replicates} runs per row, <= {args.questions} questions, batch 20, looks from "
        f"40, alpha 0.05, rho tuned for 100, thresholds {base.analysis.verdict_thresholds}, "
        f"{args.workers} workers, seed {args.seed}, scale {args.scale}; Monte Carlo SEs in "
        "brackets",
        flush=True,
    )
    t0, tables = time.time(), {}
    for world in args.worlds.split(","):
        sim = base.simulation.model_copy(update={**WORLDS[world], "seed": args.seed})
        params = base.model_copy(update={"simulation": sim})
        result = sequential_study(
            params,
            replicates=args.replicates,
            max_questions=args.questions,
            workers=args.workers,
            scale=args.scale,
        )
        tables[world] = result.table.assign(world=world)
        print_table(world, result.table)
        print(f"# {world}: {time.time() - t0:.0f} s", flush=True)
    if args.csv:
        pd.concat(tables.values(), ignore_index=True).to_csv(args.csv, index=False)
    print(headline(tables))


def headline(tables: dict[str, pd.DataFrame]) -> str:
    """The calls saved 10 and 20 points inside in the first world, and the lowest coverage."""
    every = pd.concat(tables.values(), ignore_index=True)
    worst = every.loc[every["coverage"].idxmin()]
    world = next(iter(tables))
    first = tables[world].set_index(tables[world]["inside"].round())
    saved = ", ".join(
        f"{d:g} inside {first.at[d, 'calls_saved']:.2f}x" for d in (10, 20) if d in first.index
    )
    return (
        f"sequential_cube_calls_saved: {saved} ({world}); lowest coverage "
        f"{worst['coverage']:.3f} ({worst['coverage_mc_se']:.3f}) in {worst['world']} "
        f"{worst['inside']:.0f} inside"
    )


if __name__ == "__main__":
    main()
