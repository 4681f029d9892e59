"""Coverage of the printed intervals when questions come in families (issue 30, items 1-2):
question-level against family-level resampling, on independent questions and on two family worlds.

Each replicate draws a run of `--questions` questions from `cube.method.simulate`'s model and
computes, with the estimator's own arithmetic on the simulated arrays (`bootstrap_prepared`, the
jury of every simulated judge, as `evaluate` bootstraps it), once with each question its own unit
and once with the model's families as units:

- the jury CuBE's and W's BCa interval (t levels at the number of units), R@k's (t levels only
  when families are fewer than questions);
- R@k's Wilson interval (`cube.diagnose.retrieval.wilson`): plain, and at the effective n of the
  run's own design effect of retrieval (`cube.method.design`, t for z) for the family unit;
- compare's jury ΔCuBE percentile interval (the paired bootstrap of `compare_pair`: one counts
  matrix for both systems, its levels `compare.interval_tail`) for a second system drawn on the
  same questions, no true difference.

Worlds (the issue's): `independent` (the default model), `fam3` (families of 3, a member takes its
family's retrieval outcome half of the time), `fam5` (families of 5 sharing the retrieval outcome
half of the time and the answer's correctness, SD 0.25 of the zero-to-full gap, always). Prints one
line per (world, unit, interval): coverage with its Monte Carlo SE, mean width, mean design effect.

    PYTHONPATH=. python benchmarks/family_coverage.py [--replicates 1000] [--questions 100]
        [--worlds independent,fam3,fam5] [--bootstrap 500] [--start K]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cube.method import simulate_study as S  # noqa: E402
from cube.method.bootstrap import (  # noqa: E402
    Prepared,
    bootstrap_prepared,
    cube_from_counts,
    resample_unit_counts,
)
from cube.method.compare import interval_tail  # noqa: E402
from cube.method.design import design_summary, wilson_effective  # noqa: E402
from cube.method.simulate import RunModel, draw_questions, prepared_run, truth  # noqa: E402

WORLDS = {
    "independent": RunModel(),
    "fam3": RunModel(family_size=3, family_retrieval_share=0.5),
    "fam5": RunModel(
        family_size=5, family_retrieval_share=0.5, family_correctness_share=1.0, answer_sd=0.25
    ),
}
UNITS = ("question", "family")


def design_of(p: Prepared) -> dict:
    rag = p.scores[:, 1].mean(axis=(0, 1))  # the jury's rag score per question
    return design_summary(p.retrieved, rag, p.unit_codes())


def replicate(model: RunModel, n: int, r: int, B: int) -> list[dict]:
    """One run and one pair of systems: every interval under both units."""
    p = prepared_run(model, n, S.replicate_seed(0, n, r))
    design = design_of(p)
    q = draw_questions(model, n, np.random.default_rng(S.replicate_seed(0, n, r, 7)))
    rs = S.replicate_seed(0, n, r, 7)
    pa = prepared_run(model, n, rs + 1, questions=q)
    pb = prepared_run(model.with_system(name="sys-b"), n, rs + 2, questions=q)
    rows = []
    for unit in UNITS:
        pu = p if unit == "family" else Prepared(**{**p.__dict__, "units": None})
        b = bootstrap_prepared(pu, n_resamples=B, seed=S.replicate_seed(0, n, r, 1), method="bca")
        b = b[b["judge"] == "jury"]
        for row in b.itertuples():
            deff = design["deff_retrieval" if row.metric == "recall_at_k" else "deff_rag_score"]
            rows.append(_row(r, unit, row.metric, "bootstrap", row.estimate, row.lo, row.hi, deff))
        hits = int(p.retrieved.sum())
        deff = design["deff_retrieval"]
        lo, hi = (
            wilson_effective(hits / n, n / deff, 0.95, design["units"])
            if unit == "family"
            else wilson_effective(hits / n, n, 0.95)
        )
        rows.append(_row(r, unit, "recall_at_k", "wilson", hits / n, lo, hi, deff))
        rows.append(_delta_row(pa, pb, unit, r, B, S.replicate_seed(0, n, r, 8)))
    return rows


def _row(r, unit, metric, interval, est, lo, hi, deff) -> dict:
    return {
        "replicate": r,
        "unit": unit,
        "metric": metric,
        "interval": interval,
        "estimate": float(est),
        "lo": float(lo),
        "hi": float(hi),
        "design_effect": float(deff),
    }


def _delta_row(pa: Prepared, pb: Prepared, unit: str, r: int, B: int, seed: int) -> dict:
    n = len(pa.rank_score)
    units = pa.unit_codes() if unit == "family" else np.arange(n)
    one = np.ones((1, n))
    est = cube_from_counts(pb, one)["cube_score"].mean(0)[0]
    est -= cube_from_counts(pa, one)["cube_score"].mean(0)[0]
    C = resample_unit_counts(units, B, np.random.default_rng(seed))
    d = cube_from_counts(pb, C)["cube_score"].mean(0) - cube_from_counts(pa, C)["cube_score"].mean(
        0
    )
    tail = interval_tail(0.95, n, int(units.max()) + 1)  # compare_pair's levels
    lo, hi = np.quantile(d[np.isfinite(d)], [tail, 1 - tail])
    return _row(r, unit, "delta_cube", "paired bootstrap", est, lo, hi, float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--bootstrap", type=int, default=500)
    ap.add_argument("--worlds", default="independent,fam3,fam5")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--csv", type=Path, default=None, help="also write the raw replicates here")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.time()
    frames = []
    for world in args.worlds.split(","):
        model = WORLDS[world]
        true = truth(model)
        target = {
            "cube_score": float(true["cube_score"].mean()),
            "weighted_score": float(true["weighted_score"].mean()),
            "recall_at_k": model.system.recall,
            "delta_cube": 0.0,
        }
        reps = pd.DataFrame(
            [
                x
                for r in range(args.start, args.start + args.replicates)
                for x in replicate(model, args.questions, r, args.bootstrap)
            ]
        )
        reps = reps.assign(
            world=world,
            n_questions=args.questions,
            judge="jury",
            in_jury=True,
            truth=reps["metric"].map(target),
        )
        frames.append(reps)
        table = S.coverage_table(reps)
        for t in table.itertuples():
            print(
                f"{world:<12} {t.unit:<9} {t.metric:<15} {t.interval:<17} R={t.replicates:<5} "
                f"coverage {t.coverage:6.1%} (MC SE {t.coverage_mc_se:4.1%}) width "
                f"{t.mean_width:7.3f} deff {t.design_effect:5.2f}",
                flush=True,
            )
        print(f"{world}: {time.time() - t0:.0f} s", flush=True)
    if args.csv:
        pd.concat(frames, ignore_index=True).to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
