"""Coverage of the human-calibrated CuBE interval (cube.method.ppi) with lenient and biased judges.

Seeded simulation of one system: per question and answer set a true human-scale quality
(zero ~3, rag ~6, full ~8 on 0-10, item SD 1.2), R@k 0.8, two dimensions. The judge is
lenient (0.7 t + 2.5) and, in the `biased` world, also over-rates the rag answers by 1 point, a
bias the zero/full bounds cannot cancel; raters score the truth with noise (SD 0.8), rounded
to integers and clipped to 0-10. The truth is the CuBE of the population means (computed on
200,000 draws of the same generator). For each number of rated questions we report the share of
runs whose 95 % interval covers the truth (with its Monte Carlo SE), the mean width, the mean
bias of the human-calibrated and of the judge-only CuBE, and `ratings_needed` for a 10-point
interval, per bootstrap interval (`--intervals`, on the same worlds and resamples: BCa, the default,
and the percentile interval), with how often the interval lies wholly below / above the truth. The
last line is `ppi_coverage_<world>_<n>_<interval>: <share>` of the first configuration.

    PYTHONPATH=. python benchmarks/ppi_coverage.py [--runs 200] [--questions 300] [--rated 30 100]
        [--worlds lenient biased] [--seed 0] [--lam auto] [--intervals bca,percentile]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cube.method.ppi import ppi_cube, ratings_needed  # noqa: E402

SETS = {"zero": 3.0, "rag": 6.0, "full": 8.0}
DIMS = ("relevance", "quality")


def human_score(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.clip(np.round(t + rng.normal(0, 0.8, t.shape)), 0, 10)


def judge_score(t: np.ndarray, s: str, biased: bool, rng: np.random.Generator) -> np.ndarray:
    return np.clip(
        0.7 * t + 2.5 + (1.0 if biased and s == "rag" else 0.0) + rng.normal(0, 0.6, t.shape), 0, 10
    )


def truth(recall: float, rng: np.random.Generator) -> float:
    """CuBE of the population means of the human scores (equal weights, as ppi_cube's default)."""
    m = {
        s: float(np.mean(human_score(mu + rng.normal(0, 1.2, 200_000), rng)))
        for s, mu in SETS.items()
    }
    return 100 * (m["rag"] - m["zero"]) / (m["full"] - m["zero"]) * recall


def world(n: int, n_rated: int, biased: bool, rng: np.random.Generator):
    qids = np.array([f"q{i:04d}" for i in range(n)])
    rank = np.where(rng.random(n) < 0.8, 1, 0)
    answers = pd.DataFrame(
        {
            "question_id": np.repeat(qids, 3),
            "system": "s",
            "set": list(SETS) * n,
            "rank": np.repeat(rank, 3),
            "n_retrieved": 8,
        }
    )
    judge, human = [], []
    rated = np.zeros(n, bool)  # rated: a random sample of the retrieved questions
    hit = np.flatnonzero(rank > 0)
    rated[rng.choice(hit, min(n_rated, len(hit)), replace=False)] = True
    for s, mu in SETS.items():
        for d in DIMS:
            t = mu + rng.normal(0, 1.2, n)
            judge.append(
                pd.DataFrame(
                    {
                        "question_id": qids,
                        "system": "s",
                        "set": s,
                        "judge": "j",
                        "dimension": d,
                        "score": judge_score(t, s, biased, rng),
                    }
                )
            )
            human.append(
                pd.DataFrame(
                    {
                        "question_id": qids[rated],
                        "system": "s",
                        "set": s,
                        "judge": "human",
                        "dimension": d,
                        "score": human_score(t[rated], rng),
                    }
                )
            )
    return answers, pd.concat(judge, ignore_index=True), pd.concat(human, ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--rated", type=int, nargs="+", default=[30, 100])
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument(
        "--worlds", nargs="+", default=["lenient", "biased"], choices=["lenient", "biased"]
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="offset of the runs' seeds (a second, independent batch)",
    )
    ap.add_argument(
        "--intervals",
        default="bca,percentile",
        help="bootstrap intervals measured on the same worlds and resamples (bca: the default)",
    )
    ap.add_argument(
        "--lam",
        default="auto",
        help="PPI's lambda: auto (PPI++ power tuning, the default) or a number in "
        "[0, 1] (1: plain PPI); the same seeds draw the same worlds, so two values compare paired",
    )
    args = ap.parse_args()
    true = truth(0.8, np.random.default_rng(0))
    print(f"truth: CuBE {true:.2f} (human-scale population means, R@k 0.8)")
    last = ""
    for name in args.worlds:
        biased = name == "biased"
        for n_rated in args.rated:
            rng = np.random.default_rng(1000 * n_rated + biased + 7919 * args.seed)
            rows = []
            for r in range(args.runs):
                w = world(args.questions, n_rated, biased, rng)
                for method in args.intervals.split(","):
                    res = ppi_cube(
                        *w,
                        n_resamples=args.resamples,
                        seed=r,
                        method=method,
                        lam=args.lam if args.lam == "auto" else float(args.lam),
                    )
                    lo, hi = res.interval["cube_score"]
                    rows.append(
                        {
                            "interval": method,
                            "below": hi < true,
                            "above": lo > true,
                            "undefined": not (np.isfinite(lo) and np.isfinite(hi)),
                            "width": hi - lo,
                            "bias": res.cube_score - true,
                            "jbias": res.judge_only["cube_score"] - true,
                            "need": ratings_needed(res, 10.0),
                        }
                    )
            for method, g in pd.DataFrame(rows).groupby("interval", sort=False):
                c = float(
                    1 - (g["below"] | g["above"] | g["undefined"]).mean()
                )  # no interval covers nothing
                se = float(np.sqrt(c * (1 - c) / len(g)))
                print(
                    f"{name:8s} n_rated {n_rated:4d} {method:10s}: coverage "
                    f"{c:.3f} ± {se:.3f} (MC SE, {len(g)} runs; "
                    f"wholly below the truth {g['below'].mean():.1%}, "
                    f"above {g['above'].mean():.1%}, no interval "
                    f"{int(g['undefined'].sum())}), width "
                    f"{g['width'].mean():.1f}, bias PPI "
                    f"{g['bias'].mean():+.2f}, bias judge-only {g['jbias'].mean():+.2f}, "
                    f"ratings for a 10-point interval (median) {g['need'].median():.0f}",
                    flush=True,
                )
                last = last or f"ppi_coverage_{name}_{n_rated}_{method}: {c:.3f}"
    print(last)


if __name__ == "__main__":
    main()
