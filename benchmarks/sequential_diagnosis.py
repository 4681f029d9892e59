"""Why the jury CuBE's confidence sequence misses with families (issue 31, item 3): a seeded
diagnosis on `cube simulate --sequential`'s worlds.

Per look of each simulated run (the same replicates as `benchmarks/sequential_cube.py`, seed 0):
the questions and jackknife groups reached, the estimate, its grouped jackknife SE and the
jackknife bias estimate, and whether the sequence (`sequential.functional_look`) held the truth,
and on which side it missed. Summed over runs per look: the estimator's bias (mean estimate -
truth) against its Monte Carlo SD, the jackknife SE against that SD (too small?), and the
coverage of three variants of the same boundary: as built, centred on the jackknife
bias-corrected estimate, and with the SE replaced by the Monte Carlo SD of the estimate at that
look (an oracle: if it covers, the SE is the cause; if it does not, the centring or the
boundary's asymptotics are).

    PYTHONPATH=. python benchmarks/sequential_diagnosis.py [--replicates 400] [--worlds fam5]
        [--distances 10,20,30] [--workers 2] [--scale linear|sqrt|log]

It also prints the correlation of the estimate with its SE, where the missed looks stand (their
SE and retrieved questions against the look's median), and the quantiles of the studentised
estimate on the linear, square-root and log scales (`studentised`).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import sys  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cube.config.params import load_params  # noqa: E402
from cube.method import sequential as seq  # noqa: E402
from cube.method import simulate_sequential as SS  # noqa: E402
from cube.method.simulate import draw_questions, prepared_run  # noqa: E402
from cube.method.simulate_study import replicate_seed  # noqa: E402
from cube.run.simulate import sequential_designs  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from sequential_cube import WORLDS  # noqa: E402


def looks_of(design: SS.Design, replicate: int, seed: int = 0) -> pd.DataFrame:
    """One replicate's looks (as `simulate_sequential.replicate_looks`) with the diagnosis'
    columns: groups, retrieved, SE, jackknife bias, families reached."""
    rep_seed = replicate_seed(seed, design.n, replicate, 31)
    q = draw_questions(design.model, design.n, np.random.default_rng(rep_seed))
    p = prepared_run(design.model, design.n, rep_seed + 1, questions=q)
    order = SS.driver_order(q.families(), np.random.default_rng(rep_seed + 2))
    p = dataclasses.replace(SS.reordered(p, order), proportion=design.proportion,
                            mode=design.weights)  # fmt: skip
    units = p.unit_codes()
    sizes = SS.look_sizes(units, design.rule.batch, design.rule.min_questions)
    counts, slices = SS.look_counts(units, sizes, design.max_groups, rep_seed + 3)
    values = SS.jury_cube(p, counts)
    rows = []
    for k, (m, part) in enumerate(zip(sizes, slices, strict=True)):
        est, leave = values[part][0], values[part][1:]
        hits = int(np.asarray(p.retrieved[:m]).sum())
        lk = seq.functional_look(est, leave, int(m), design.rule, retrieved=hits,
                                 scale=design.scale)  # fmt: skip
        g = len(leave)
        bias = (g - 1) * (np.mean(leave) - est) if np.isfinite(leave).all() else np.nan
        rows.append({
            "replicate": replicate, "look": k, "n": int(m), "groups": g,
            "families": int(np.unique(units[:m]).size), "retrieved": hits, "estimate": est,
            "se": seq.jackknife_se(leave), "jk_bias": bias, "lower": lk.lower, "upper": lk.upper,
            "may_stop": seq.not_yet(lk, design.rule) is None,
            "stop": seq.decide(lk, design.rule, dict(design.thresholds)).stop,
        })  # fmt: skip
    return pd.DataFrame(rows)


def chunk(args: tuple) -> pd.DataFrame:
    design, reps = args
    return pd.concat([looks_of(design, r) for r in reps], ignore_index=True)


def per_look(design: SS.Design, df: pd.DataFrame) -> pd.DataFrame:
    """Per look index over replicates: bias, SD, SE, coverage of the three boundaries."""
    t, rule = design.truth, design.rule
    df = df.copy()
    rho2 = seq.rho_squared(rule.target_questions, rule.alpha)
    allow = np.array([seq.t_allowance(g, rule) for g in df["groups"]])
    mc_sd = df.groupby("look")["estimate"].transform("std")
    bc = df["estimate"] - df["jk_bias"]
    half_se = df["upper"] - df["estimate"]
    half_or = seq.margin(df["n"], mc_sd * np.sqrt(df["n"]), rule.alpha, rho2) * allow
    df["miss_low"] = df["upper"] < t  # the estimate too low
    df["miss_high"] = df["lower"] > t
    df["miss_bc"] = (bc - half_se > t) | (bc + half_se < t)
    df["miss_oracle"] = (df["estimate"] - half_or > t) | (df["estimate"] + half_or < t)
    ok = df[df["may_stop"]]
    out = ok.groupby("look").agg(
        n=("n", "median"), groups=("groups", "median"), families=("families", "median"),
        retrieved=("retrieved", "median"), runs=("n", "size"),
        bias=("estimate", lambda x: x.mean() - t), sd=("estimate", "std"),
        skew=("estimate", "skew"), se_rms=("se", lambda x: np.sqrt((x**2).mean())),
        jk_bias=("jk_bias", "mean"), miss_low=("miss_low", "mean"),
        miss_high=("miss_high", "mean"), miss_bc=("miss_bc", "mean"),
        miss_oracle=("miss_oracle", "mean"),
    )  # fmt: skip
    out["se/sd"] = out["se_rms"] / out["sd"]
    return out, df


def time_uniform(df: pd.DataFrame) -> dict[str, float]:
    """Share of runs missing at any look where a stop is allowed, per variant, and where the
    first miss falls."""
    stop_n = df.groupby("replicate").apply(
        lambda r: r["n"][r["stop"]].iloc[0] if r["stop"].any() else r["n"].iloc[-1]
    )
    ok = df[df["may_stop"]]
    any_ = ok.groupby("replicate")[["miss_low", "miss_high", "miss_bc", "miss_oracle"]].any()
    miss = ok["miss_low"] | ok["miss_high"]
    first = ok[miss].groupby("replicate")["groups"].first()
    return {
        "mean_n_at_stop": float(stop_n.mean()),
        "miss_any": float((any_["miss_low"] | any_["miss_high"]).mean()),
        "miss_low_any": float(any_["miss_low"].mean()),
        "miss_high_any": float(any_["miss_high"].mean()),
        "miss_bc_any": float(any_["miss_bc"].mean()),
        "miss_oracle_any": float(any_["miss_oracle"].mean()),
        "first_miss_groups_median": float(first.median()) if len(first) else np.nan,
        "first_miss_at_first_allowed_look": float(
            (ok[miss].groupby("replicate")["look"].first()
             == ok.groupby("replicate")["look"].first().reindex(first.index)).mean()
        ) if len(first) else np.nan,
    }  # fmt: skip


def studentised(design: SS.Design, df: pd.DataFrame) -> dict[str, object]:
    """Where the runs that miss stand, and the shape of the studentised estimate on three scales
    (delta-method SEs from the jackknife SE): the 0.5 %, 2.5 %, 97.5 % and 99.5 % quantiles of
    (g(estimate) - g(truth)) / SE_g over the looks where a stop is allowed (a normal one: -2.58,
    -1.96, 1.96, 2.58), and the correlation of the estimate with its SE."""
    t = design.truth
    ok = df[df["may_stop"] & (df["estimate"] > 0)]
    miss = ok["miss_low"] | ok["miss_high"]
    by_look = ok.groupby("look")
    qs = [0.005, 0.025, 0.975, 0.995]
    est, se = ok["estimate"], ok["se"]
    z = {
        "linear": (est - t) / se,
        "sqrt": (np.sqrt(est) - np.sqrt(t)) / (se / (2 * np.sqrt(est))),
        "log": (np.log(est) - np.log(t)) / (se / est),
    }
    return {
        "corr(estimate, SE) per look, median": round(
            float(by_look.apply(lambda x: x["estimate"].corr(x["se"])).median()), 2
        ),
        "missed looks: SE / the look's median SE (median)": round(
            float((se / by_look["se"].transform("median"))[miss].median()), 2
        ),
        "missed looks: retrieved / the look's median (median)": round(
            float((ok["retrieved"] / by_look["retrieved"].transform("median"))[miss].median()), 2
        ),
        **{f"z {k} quantiles {qs}": v.quantile(qs).round(2).tolist() for k, v in z.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=400)
    ap.add_argument("--worlds", default="fam5")
    ap.add_argument("--distances", default="10,20,30")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="write every look here (csv)")
    ap.add_argument("--scale", default="linear", choices=("linear", "sqrt", "log"),
                    help="the sequence diagnosed (linear: as first built; the bias-corrected and "
                    "oracle columns are meaningful on it only)")  # fmt: skip
    ap.add_argument(
        "--min-groups",
        type=int,
        default=seq.MIN_GROUPS,
        help="the fewest jackknife groups before a stop (to explore the guard)",
    )
    args = ap.parse_args()
    base = load_params(ROOT / "params" / "default.yaml")
    seq.MIN_GROUPS = args.min_groups  # the workers are forked after this: they see it too
    pd.set_option("display.width", 250, "display.max_columns", 30)
    for world in args.worlds.split(","):
        sim = base.simulation.model_copy(update={**WORLDS[world], "seed": 0})
        params = base.model_copy(update={"simulation": sim})
        dists = [float(d) for d in args.distances.split(",")]
        for design in sequential_designs(params, 300, dists, args.scale):
            reps = np.array_split(np.arange(args.replicates), args.workers)
            with ProcessPoolExecutor(args.workers) as ex:
                df = pd.concat(ex.map(chunk, [(design, r) for r in reps]), ignore_index=True)
            table, df = per_look(design, df)
            print(f"\n## {world}, truth {design.truth:.1f} ({40 - design.truth:.0f} inside), "
                  f"R@k {design.model.system.recall:.2f}, {args.replicates} runs")  # fmt: skip
            print(table.round(4).to_string())
            print(time_uniform(df))
            print(studentised(design, df))
            if args.out:
                df.assign(world=world, truth=design.truth).to_csv(
                    args.out, mode="a", header=not args.out.exists(), index=False)  # fmt: skip


if __name__ == "__main__":
    main()
