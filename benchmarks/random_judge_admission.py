"""How often the judge validity gate admits a judge that ignores the answer (review item 5).

Seeded simulation: a real judge (tests/factories.make_tables) plus a random judge whose every
score is an independent integer 0-10. Each run is evaluated with the default analysis params
(rank-correlation weights, bootstrap off); we count how often the random judge passes the rank
test (a') and how often it enters the jury. The last line is `random_judge_admission: <rate>`
(share of runs where the random judge has a defined W and is admitted to the jury).

    PYTHONPATH=. python benchmarks/random_judge_admission.py [--runs 40] [--questions 60]

(the figures in cube/method/gate.py: --runs 150)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from factories import make_tables  # noqa: E402

from cube.config.sections import AnalysisParams  # noqa: E402
from cube.method.evaluation import evaluate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--questions", type=int, default=60)
    args = parser.parse_args()
    ap = AnalysisParams(bootstrap=0)
    defined = rank_pass = both = admitted = 0
    for seed in range(args.runs):
        answers, scores = make_tables(
            n_questions=args.questions, seed=1000 + seed, judges=("judge-a",)
        )
        rng = np.random.default_rng(seed)
        rnd = scores.assign(judge="judge-r", score=rng.integers(0, 11, len(scores)).astype(float))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = evaluate(answers, pd.concat([scores, rnd], ignore_index=True), ap).cube_table.loc[
                "judge-r"
            ]
        if not np.isfinite(g["weighted_score"]):
            continue
        defined += 1
        a, b = g["gate_p_value"] < ap.gate_alpha, g["gate_rank_p_value"] < ap.gate_alpha
        rank_pass += bool(b)
        both += bool(a and b)
        admitted += bool(g["in_jury"])
    print(f"runs: {args.runs}; random judge with a defined W: {defined}")
    print(
        f"rank test (a') passes: {rank_pass / max(defined, 1):.3f} (nominal {ap.gate_alpha:g}); "
        f"(a) and (a') both: {both / max(defined, 1):.3f}"
    )
    print(f"random_judge_admission: {admitted / args.runs:.4f}")


if __name__ == "__main__":
    main()
