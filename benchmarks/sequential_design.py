"""The sequential design of issue 40 (item 2) against today's driver and the fixed-n run, in the
20-point bands users meet, with families: calls per verdict, wrong verdicts and coverage.

The designs run on the driver's own look functions (`cube.method.simulate_sequential`, the
replicates of `cube simulate --sequential`; `cube.run.simulate.sequential_designs` with `design=`):

- `driver` (9a40e80's): whole families per batch (>= 20 questions), R@k from the questions
  judged, the anytime-valid confidence sequence (`boundary: anytime`);
- `rrobin` (the first issue-40 merge): one question per family per round in batches of 20, R@k
  from every question's retrieval, the finite-horizon boundary below: biased when family sizes
  vary (review H1), kept to show it;
- `new` (the default): systematic sampling within each family (`order: spread`,
  `group_sequential.spread_order`) in batches of 20, R@k from every question's retrieval (free
  for the builtin retriever), the finite-horizon Lan-DeMets Pocock-type boundary for the looks
  40, 60, ..., 300 (`boundary: spending`).

Worlds: `independent`, `fam5` (families of 5 sharing their retrieval half of the time and the
answer's correctness always: `benchmarks/sequential_cube.py`'s hardest family world) and `unequal`
(fam5's families of 5 for 250 questions, and 50 one-question families of a better system, R@k
+0.4 and answer quality 0.95: a score that correlates with family size; its truth is the mix's,
so it is not the truth asked for). Truths (true jury CuBE, placed by the system's R@k): 35, 30 and
20 (5, 10 and 20 points inside the `fair` edge 40, in `poor`), 45 (5 inside the same edge, in the
20-point band `fair`) and 50 (the centre of `fair`: 10 points from both its edges). Default
thresholds 40/60/80, <= 300 questions, alpha 0.05, min_questions 40.

Columns: `coverage` (the truth inside the interval at every look at which the run may stop, MC SE),
`questions` (mean at the stop, MC SE), then calls saved against the fixed-n run of all 300, counted
three ways: `x today` (both runs as calls are counted today: 27 per question, 3 answers and 2 judges
x 4 dimensions x 3 sets), `x both skip` (both runs with helper unread40's saving: a question whose
gold document was missed costs a third, its zero and full answers and their judgments not made),
`x skip vs today` (the sequential run with the saving against the fixed-n run as today: the two
changes together); `wrong seq` (the band at the stop, or at the set's end the point estimate's,
differs from the truth's) and `wrong fixed` (the fixed-n run of all 300), with MC SEs.

The last line is the headline: calls saved with families of 5 at the centre of a 20-point band
and 10 points inside one edge (goals of the issue: >= 2x and >= 3x), as today / with the saving,
and the lowest coverage of the new design and of the round robin over every world and truth.

    PYTHONPATH=. python benchmarks/sequential_design.py [--replicates 300] [--workers 2]
        [--worlds independent,fam5,unequal] [--designs driver,rrobin,new]
        [--truths 35,30,20,45,50] [--csv out.csv] [--from-csv out.csv]
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
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import pandas as pd  # noqa: E402
from sequential_cube import WORLDS  # noqa: E402

from cube.config.params import load_params  # noqa: E402
from cube.run.simulate import (  # noqa: E402
    _chunk_jobs,
    _map,
    _replicates_of,
    _sequential_chunk,
    sequential_designs,  # noqa: E402
)

DESIGNS = {
    "driver": {"order": "families", "recall": "judged", "boundary": "anytime"},
    "rrobin": {"order": "round_robin", "recall": "all", "boundary": "spending"},
    "new": {"order": "spread", "recall": "all", "boundary": "spending"},
}
SINGLETONS = 50  # of the unequal world's 300 questions: 50 singletons + 50 families of 5


def unequal(design):
    """The unequal world's design from a `fam5` one: 50 of the 300 questions are one-question
    families of a better system (R@k +0.4, answer quality 0.95) than the families of 5, so the
    score correlates with family size; the truth is the mix's (`mixed_truth`)."""
    import dataclasses

    from cube.method import simulate_sequential as SS

    m = design.model
    single = dataclasses.replace(
        m,
        family_size=1,
        family_retrieval_share=0.0,
        family_correctness_share=0.0,
        system=dataclasses.replace(
            m.system, recall=min(0.98, m.system.recall + 0.4), answer_quality=0.95
        ),
    )
    d = dataclasses.replace(design, singletons=single, singleton_questions=SINGLETONS)
    return dataclasses.replace(d, truth=SS.mixed_truth(d))


def rate(r: object, key: str) -> str:
    return f"{getattr(r, key):.3f} ({getattr(r, key + '_mc_se'):.3f})"


def rows_of(
    params, designs: dict, truths: list[float], replicates: int, workers: int, world: str = ""
):
    """Every (design name, truth) row of one world (`simulate_sequential.summary_row`)."""
    from cube.method import simulate_sequential as SS

    named = [
        (name, d if world != "unequal" else unequal(d))
        for name, how in designs.items()
        for d in sequential_designs(params, 300, [], truths=truths, design=how)
    ]
    jobs = _chunk_jobs([d for _, d in named], replicates, workers, params.simulation.seed)
    parts = _map(_sequential_chunk, [j for _, j in jobs], workers)
    out = []
    for i, (name, d) in enumerate(named):
        out.append({"design": name, **SS.summary_row(d, _replicates_of(i, jobs, parts))})
    return pd.DataFrame(out)


def print_table(world: str, table: pd.DataFrame) -> None:
    print(
        "world        design  truth edge  R@k  coverage       questions    x today  x both skip  "
        "x skip vs today  wrong seq      wrong fixed"
    )
    for r in table.itertuples():
        print(
            f"{world:<12} {r.design:<7} {r.truth:5.1f} {r.inside:4.0f} {r.recall:4.2f}  "
            f"{rate(r, 'coverage')}  {r.mean_questions:5.1f} ({r.mean_questions_mc_se:3.1f})  "
            f"{r.calls_saved:5.2f}x  {r.calls_saved_skipping_both:9.2f}x  "
            f"{r.calls_saved_with_skipping:13.2f}x  {rate(r, 'wrong_sequential')}  "
            f"{rate(r, 'wrong_full')}",
            flush=True,
        )


def headline(tables: dict[str, pd.DataFrame]) -> str:
    """The new design's calls saved with families of 5 at the centre and 10 inside one edge."""
    world = "fam5" if "fam5" in tables else next(iter(tables))
    t = tables[world]
    new = t[t["design"] == "new"]
    parts = []
    for label, truth in (("centre of a 20-point band", 50), ("10 inside one edge", 30)):
        near = new[(new["truth"] - truth).abs() < 0.5]
        if len(near):
            r = near.iloc[0]
            parts.append(
                f"{label} {r['calls_saved']:.2f}x ({r['calls_saved_with_skipping']:.2f}x with the "
                "saving)"
            )
    every = pd.concat([t.assign(world=w) for w, t in tables.items()], ignore_index=True)
    lowest = []
    for name in ("new", "rrobin"):  # the design's own, and the round robin's it replaced
        rows = every[every["design"] == name]
        if len(rows):
            worst = rows.loc[rows["coverage"].idxmin()]
            lowest.append(
                f"{name} {worst['coverage']:.3f} ({worst['coverage_mc_se']:.3f}, {worst['world']})"
            )
    return (
        f"sequential_design_calls_saved: {'; '.join(parts)} ({world}); lowest coverage "
        f"{', '.join(lowest)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worlds", default="independent,fam5,unequal")
    parser.add_argument("--designs", default="driver,rrobin,new")
    parser.add_argument("--truths", default="35,30,20,45,50")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None, help="write every row here")
    parser.add_argument(
        "--from-csv", type=Path, default=None, help="print the tables of an earlier --csv"
    )
    args = parser.parse_args()
    if args.from_csv:
        rows = pd.read_csv(args.from_csv)
        tables = {
            w: t.drop(columns="world").reset_index(drop=True)
            for w, t in rows.groupby("world", sort=False)
        }
        for world, table in tables.items():
            print_table(world, table)
        print(headline(tables))
        return
    base = load_params(ROOT / "params" / "default.yaml")
    truths = [float(x) for x in args.truths.split(",")]
    print(
        f"# {args.replicates} runs per row, <= 300 questions, batch 20, looks from 40, alpha "
        f"0.05, thresholds {base.analysis.verdict_thresholds}, seed {args.seed}; designs "
        f"{DESIGNS}; Monte Carlo SEs in brackets",
        flush=True,
    )
    t0, tables = time.time(), {}
    for world in args.worlds.split(","):
        shape = WORLDS["fam5" if world == "unequal" else world]
        sim = base.simulation.model_copy(update={**shape, "seed": args.seed})
        params = base.model_copy(update={"simulation": sim})
        chosen = {k: v for k, v in DESIGNS.items() if k in args.designs.split(",")}
        tables[world] = rows_of(params, chosen, truths, args.replicates, args.workers, world)
        print_table(world, tables[world])
        print(f"# {world}: {time.time() - t0:.0f} s", flush=True)
    if args.csv:
        pd.concat([t.assign(world=w) for w, t in tables.items()], ignore_index=True).to_csv(
            args.csv, index=False
        )
    print(headline(tables))


if __name__ == "__main__":
    main()
