"""Coverage of the bootstrap intervals of CuBE, W and R@k on simulated runs of known truth (issue
21).

Each replicate draws a run from `cube.method.simulate`'s model and computes the bootstrap intervals
with the estimator's own arithmetic (`cube.method.bootstrap.bootstrap_prepared` on the simulated
arrays: `cube_from_counts`, which reproduces `evaluate`; every simulated judge in the jury, as the
gate admits them, see `cube simulate`'s gate table), both as BCa (the default) and as percentile
intervals from the same resamples. Prints one line per (questions, judge, metric, method): coverage
with its Monte Carlo standard error, mean width; the headline last: the jury CuBE coverage of the
default interval at the middle size. `cube simulate` runs the whole study through `evaluate` and
`compare_pair` (slower).

`--compare R` also measures compare's paired bootstrap (`cube.method.compare.compare_pair`'s
arithmetic: one counts matrix for both systems, the jury ΔCuBE of `cube_from_counts`, its percentile
interval and its SE, the SE the printed MDE = 2.80 SE rests on) on R pairs of systems drawn on the
same questions exactly as `cube simulate` draws them (`simulate_study.compare_replicate`: the
questions from one seed, each system from its own), at each size: under no difference (SD of ΔCuBE
over the pairs against the mean bootstrap SE, coverage of 0, rejection rate at 5 %), then with
system B worse by the mean printed MDE (power, nominal 80 %, and the SE there). Not the permutation
p-value (exact under exchangeable systems by construction); `cube simulate` measures it through
`compare_pair`.

    PYTHONPATH=. python benchmarks/simulation_coverage.py [--replicates 200]
        [--questions 40,100,300]
        [--compare 400] [--start K: runs K.. instead of 0.., a later batch of new runs]
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

from cube.config.sections import AnalysisParams  # noqa: E402
from cube.method import simulate_study as S  # noqa: E402
from cube.method.bootstrap import bootstrap_prepared, cube_from_counts, resample_counts  # noqa: E402
from cube.method.compare import mde  # noqa: E402
from cube.method.simulate import (  # noqa: E402
    RunModel,
    draw_questions,
    prepared_run,
    truth,
)


def pair(model: RunModel, model_b: RunModel, n: int, r: int, B: int, seed: int) -> dict:
    """Jury ΔCuBE (B - A), its paired-bootstrap SE and percentile interval, for one pair drawn as
    `simulate_study.compare_replicate` draws it."""
    rs = S.replicate_seed(seed, n, r, 7)
    q = draw_questions(model, n, np.random.default_rng(rs))
    pa, pb = (
        prepared_run(model, n, rs + 1, by_family=False, questions=q),
        prepared_run(model_b, n, rs + 2, by_family=False, questions=q),
    )
    one = np.ones((1, n))
    delta = float(
        cube_from_counts(pb, one)["cube_score"].mean(0)[0]
        - cube_from_counts(pa, one)["cube_score"].mean(0)[0]
    )
    C = resample_counts(n, B, np.random.default_rng(S.replicate_seed(seed, n, r, 8)))
    d = cube_from_counts(pb, C)["cube_score"].mean(0) - cube_from_counts(pa, C)["cube_score"].mean(
        0
    )
    d = d[np.isfinite(d)]
    lo, hi = np.quantile(d, [0.025, 0.975])
    return {
        "n_questions": n,
        "delta": delta,
        "se": float(d.std(ddof=1)),
        "lo": float(lo),
        "hi": float(hi),
    }


def compare_study(model: RunModel, sizes: list[int], R: int, B: int, better: bool = False) -> None:
    """Size and power of compare's paired bootstrap interval (module docstring), printed per size;
    `better`: the power with B better by the MDE too (a better system's CuBE varies more)."""
    ap = AnalysisParams()
    for n in sizes:
        null = pd.DataFrame(
            [pair(model, model.with_system(name="sys-b"), n, r, B, 0) for r in range(R)]
        )
        printed = float(mde(null["se"].mean()))
        cases = [("no difference", null, 0.0)]
        for sign, word, seed in ((-1, "worse", 1), (1, "better", 2))[: 2 if better else 1]:
            shift = S.quality_shift_for(model, sign * printed, ap)
            model_b = model.with_system(
                name="sys-b", answer_quality=model.system.answer_quality + shift
            )
            true = S.jury_truth(model_b, ap) - S.jury_truth(model, ap)
            alt = pd.DataFrame([pair(model, model_b, n, r, B, seed) for r in range(R)])
            cases.append((f"B {word} by the MDE ({true:+.2f})", alt, true))
            print(
                f"compare_power_at_mde_{word}_{n}q: "
                f"{S.mc_rate((alt['hi'] < 0) | (alt['lo'] > 0))[0]:.3f}"
            )
        for case, g, t in cases:
            cover, cover_se, k = S.mc_rate((g["lo"] <= t) & (t <= g["hi"]))
            rej, rej_se, _ = S.mc_rate((g["hi"] < 0) | (g["lo"] > 0))
            sd, se = float(g["delta"].std(ddof=1)), float(g["se"].mean())
            print(
                f"compare {n:>4} q, {case}: R={k} SD of ΔCuBE {sd:.2f} "
                f"(MC SE {sd / np.sqrt(2 * (k - 1)):.2f}), mean "
                f"bootstrap SE {se:.2f}, interval covers the truth "
                f"{cover:.1%} (MC SE {cover_se:.1%}), excludes 0 in "
                f"{rej:.1%} (MC SE {rej_se:.1%}); printed MDE {mde(se):.2f}"
            )


def permutation_p(model: RunModel, n: int, r: int, P: int, seed: int = 0) -> float:
    """`compare_pair`'s permutation p-value of the jury ΔCuBE for pair r under no difference, from
    the arrays (`pair`'s drawing, `compare_pair`'s swap masks when it draws no resamples: the same
    value)."""
    from cube.method.compare import _concat

    rs = S.replicate_seed(seed, n, r, 7)
    q = draw_questions(model, n, np.random.default_rng(rs))
    model_b = model.with_system(name="sys-b")
    pa, pb = (
        prepared_run(model, n, rs + 1, by_family=False, questions=q),
        prepared_run(model_b, n, rs + 2, by_family=False, questions=q),
    )
    one = np.ones((1, n))
    delta = float(
        cube_from_counts(pb, one)["cube_score"].mean(0)[0]
        - cube_from_counts(pa, one)["cube_score"].mean(0)[0]
    )
    M = (np.random.default_rng(S.replicate_seed(seed, n, r, 8)).random((P, n)) < 0.5).astype(float)
    pab = _concat(pa, pb)
    d = cube_from_counts(pab, np.hstack([M, 1 - M]))["cube_score"].mean(0) - cube_from_counts(
        pab, np.hstack([1 - M, M])
    )["cube_score"].mean(0)
    d = d[np.isfinite(d)]
    return float((1 + np.sum(np.abs(d) >= abs(delta) - 1e-9 * max(1.0, abs(delta)))) / (1 + len(d)))


def fast_pvalue_study(model: RunModel, n: int, R: int, start: int, P: int) -> None:
    """`pvalue_study` from the arrays (`permutation_p`), about ten times faster; pairs' p-values
    equal."""

    p = pd.Series([permutation_p(model, n, r, P) for r in range(start, start + R)], dtype=float)
    _print_rejections(p, "permutation (arrays)", n, start, R)


def _print_rejections(p: pd.Series, label: str, n: int, start: int, R: int) -> None:
    """The rejection rate at 1, 5 and 10 % with its MC error, the KS test against uniform, the
    headline."""
    from scipy import stats

    for a in (0.01, 0.05, 0.10):
        rate, se, k = S.mc_rate(p <= a)
        print(
            f"{label} {n} q, no difference, pairs {start}..{start + R - 1}: R={k} p <= {a:.2f} in "
            f"{rate:.1%} (MC SE {se:.1%}, {int((p <= a).sum())} pairs)"
        )
    print(f"KS against uniform: p = {stats.kstest(p, 'uniform').pvalue:.3f}")
    print(f"permutation_rejection_5pct_{n}q: {float((p <= 0.05).mean()):.3f}")


def pvalue_study(model: RunModel, n: int, R: int, start: int, P: int) -> None:
    """Compare's permutation p-value under no difference, through `compare_pair` itself
    (`simulate_study.compare_replicate` with `P` permutations and no bootstrap, which the p-value
    does not use) on pairs `start`..`start + R - 1`, each pair's p-value printed as it comes: the
    rejection rate at 1, 5 and 10 % with its MC error, and the KS test against uniform."""

    ap = AnalysisParams().model_copy(update={"bootstrap": 0})
    values = []
    for r in range(start, start + R):
        values.append(S.compare_replicate(model, n, r, ap, n_permutations=P)["p_value"])
        print(f"pair {r} p {values[-1]:.4f}", flush=True)
    _print_rejections(pd.Series(values, dtype=float).dropna(), "permutation", n, start, R)


def replicate(model: RunModel, n: int, r: int, B: int, methods: list[str]) -> list[dict]:
    p = prepared_run(model, n, S.replicate_seed(0, n, r), by_family=False)
    rows = []
    for m in (
        methods
    ):  # "<method>-plain": without the small-sample expansion of the levels (the default before)
        b = bootstrap_prepared(
            p,
            n_resamples=B,
            seed=r,
            method=m.removesuffix("-plain"),
            expand=not m.endswith("-plain"),
        )
        rows += [
            {"n_questions": n, "replicate": r, "interval": m, **x} for x in b.to_dict("records")
        ]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--questions", default="40,100,300")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument(
        "--methods",
        default="bca,percentile",
        help="intervals (bca, percentile, basic; '<name>-plain' "
        "without the small-sample expansion); the first "
        "(the default, bca) is the headline",
    )
    ap.add_argument(
        "--compare",
        type=int,
        default=0,
        help="pairs per size for compare's size and power (0: none)",
    )
    ap.add_argument(
        "--better", action="store_true", help="--compare: also the power with B better by the MDE"
    )
    ap.add_argument(
        "--pvalues",
        type=int,
        default=0,
        help="pairs per size for the permutation p-value under no difference, through compare_pair",
    )
    ap.add_argument(
        "--arrays",
        action="store_true",
        help="--pvalues from the arrays (compare_pair's values, faster)",
    )
    ap.add_argument(
        "--permutations", type=int, default=200, help="--pvalues: permutations per pair"
    )
    ap.add_argument(
        "--start",
        type=int,
        default=0,
        help="first pair of --pvalues, first run of --replicates (a later batch: new runs)",
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    model = RunModel()
    sizes = [int(x) for x in args.questions.split(",")]
    methods = args.methods.split(",")
    t0 = time.time()
    if args.pvalues:
        for n in sizes:
            (fast_pvalue_study if args.arrays else pvalue_study)(
                model, n, args.pvalues, args.start, args.permutations
            )
        if not args.replicates and not args.compare:
            return
    if args.compare:
        compare_study(model, sizes, args.compare, args.bootstrap, args.better)
        if not args.replicates:
            return
    true = truth(model).set_index("judge")
    rows = [
        x
        for n in sizes
        for r in range(args.start, args.start + args.replicates)
        for x in replicate(model, n, r, args.bootstrap, methods)
    ]
    reps = pd.DataFrame(rows)
    reps["truth"] = [
        model.system.recall
        if m == "recall_at_k"
        else float(true[m].mean() if j == "jury" else true.at[j, m])
        for j, m in zip(reps["judge"], reps["metric"], strict=True)
    ]
    reps["in_jury"] = True
    reps = reps[~((reps["metric"] == "recall_at_k") & (reps["judge"] != "jury"))]
    table = S.coverage_table(reps)
    print(f"model: {model}")
    print(f"truth (200,000 simulated questions): {true.to_dict()}")
    for r in table.itertuples():
        print(
            f"{r.n_questions:>4} {r.judge:<8} {r.metric:<15} "
            f"{r.interval:<10} R={r.replicates:<4} coverage "
            f"{r.coverage:6.1%} (MC SE {r.coverage_mc_se:4.1%}) "
            f"width {r.mean_width:6.2f} bias {r.bias:+.2f} "
            f"rmse {r.rmse:.2f}{'  <- misses' if r.misses else ''}"
        )
    print(f"seconds: {time.time() - t0:.0f}")
    mid = sorted(sizes)[len(sizes) // 2]
    head = table[
        (table["n_questions"] == mid)
        & (table["judge"] == "jury")
        & (table["metric"] == "cube_score")
        & (table["interval"] == methods[0])
    ]
    print(f"jury_cube_coverage_{methods[0]}_{mid}q: {float(head['coverage'].iloc[0]):.3f}")


if __name__ == "__main__":
    main()
