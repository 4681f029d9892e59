"""Coverage of the bootstrap intervals of CuBE, W and R@k on simulated runs of known truth (issue 21).

Each replicate draws a run from `cube.method.simulate`'s model and computes the bootstrap intervals
with the estimator's own arithmetic (`cube.method.bootstrap.bootstrap_prepared` on the simulated arrays:
`cube_from_counts`, which reproduces `evaluate`; every simulated judge in the jury, as the gate admits
them, see `cube simulate`'s gate table), both as percentile and as BCa intervals from the same
resamples. Prints one line per (questions, judge, metric, method): coverage with its Monte Carlo
standard error, mean width; the headline last: the jury CuBE coverage of the default interval at the
middle size. `cube simulate` runs the whole study through `evaluate` and `compare_pair` (slower).

    PYTHONPATH=. python benchmarks/simulation_coverage.py [--replicates 200] [--questions 40,100,300]
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
from cube.method.bootstrap import Prepared, bootstrap_prepared  # noqa: E402
from cube.method.simulate import RunModel, draw_questions, draw_ranks, judge_scores, true_levels, truth  # noqa: E402


def replicate(model: RunModel, n: int, r: int, B: int, methods: list[str]) -> list[dict]:
    rng = np.random.default_rng(S.replicate_seed(0, n, r))
    q = draw_questions(model, n, rng)
    rank = draw_ranks(model.system, n, rng)
    scores = judge_scores(model, true_levels(model, model.system, q, rank), rng)
    rank_score = np.where(rank > 0, model.system.top_n + 2 - rank, 0).astype(float)
    p = Prepared([j.name for j in model.judges], list(model.dimensions), rank_score, rank > 0, scores, 0.1,
                 "retrieved", "rank_correlation", None, True)
    rows = []
    for m in methods:
        b = bootstrap_prepared(p, n_resamples=B, seed=r, method=m)
        rows += [{"n_questions": n, "replicate": r, "interval": m, **x} for x in b.to_dict("records")]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--questions", default="40,100,300")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--methods", default="percentile,bca")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    model = RunModel()
    sizes = [int(x) for x in args.questions.split(",")]
    methods = args.methods.split(",")
    t0 = time.time()
    true = truth(model).set_index("judge")
    rows = [x for n in sizes for r in range(args.replicates) for x in replicate(model, n, r, args.bootstrap, methods)]
    reps = pd.DataFrame(rows)
    reps["truth"] = [model.system.recall if m == "recall_at_k" else
                     float(true[m].mean() if j == "jury" else true.at[j, m])
                     for j, m in zip(reps["judge"], reps["metric"], strict=True)]
    reps["in_jury"] = True
    reps = reps[~((reps["metric"] == "recall_at_k") & (reps["judge"] != "jury"))]
    table = S.coverage_table(reps)
    print(f"model: {model}")
    print(f"truth (200,000 simulated questions): {true.to_dict()}")
    for r in table.itertuples():
        print(f"{r.n_questions:>4} {r.judge:<8} {r.metric:<15} {r.interval:<10} R={r.replicates:<4} coverage "
              f"{r.coverage:6.1%} (MC SE {r.coverage_mc_se:4.1%}) width {r.mean_width:6.2f} bias {r.bias:+.2f} "
              f"rmse {r.rmse:.2f}{'  <- misses' if r.misses else ''}")
    print(f"seconds: {time.time() - t0:.0f}")
    mid = sorted(sizes)[len(sizes) // 2]
    head = table[(table["n_questions"] == mid) & (table["judge"] == "jury") & (table["metric"] == "cube_score")
                 & (table["interval"] == methods[0])]
    print(f"jury_cube_coverage_{methods[0]}_{mid}q: {float(head['coverage'].iloc[0]):.3f}")


if __name__ == "__main__":
    main()
