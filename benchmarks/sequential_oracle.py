"""Is 2x fewer calls at the centre of a 20-point band reachable at all? Oracle bounds for issue 40's
goal, in benchmarks/sequential_design.py's own world.

The world (`sequential_cube.WORLDS["fam5"]`, `params/default.yaml`'s simulation otherwise): 300
questions in 60 families of 5 that share their retrieval half of the time and the answer's
correctness always (`family_correctness_share` 1.0, `answer_sd` 0.25), two simulated judges x 4
dimensions, the truth placed by the system's R@k (`simulate_sequential.recall_for`): 50, the centre
of the 20-point band `fair` (edges 40 and 60). Looks every 20 questions from 40 to 300, alpha 0.05.
The truth is the world's (the jury CuBE on 50,000 questions), so the 300 questions are themselves
a sample: the fixed-n run of all 300 has a standard deviation of about 3.5 points around it, and
its own 95 % interval (+-1.96 x 3.3) lies inside [40, 60] only when its estimate is within ~3.5 of
50. The world's parameters: R@k 0.79 (placed for the truth 50), question SD 0.8, judges a (bias 0,
scale 1, noise 1) and b (1.5, 0.8, 1.3), zero and full levels 3 and 8, trim 0.1, rank-correlation
weights, the jackknife over at most 40 groups of families; the scan below changes the family size
and the shared correctness only.

Every replicate is one run of the issue-40 design (`order: spread`, `recall: all`, `boundary:
spending`; `simulate_sequential.replicate_looks`): its estimate and jackknife SE at every look.
From the same replicates, the stopping rules below (each stops at the first look where its interval
lies inside one band, else runs to 300; its verdict is the band of the estimate there):

- `new`: the design as built (its own interval, the spending boundary).
- `peek_jk`: estimate +- 1.96 x the jackknife SE at every look (the fixed-n interval re-used: it
  does not cover at every look; shown for reference).
- `peek_true`: estimate +- 1.96 x the estimator's true SD at that look (its Monte Carlo SD around
  the truth over the replicates). A bound for ANY stopping rule built on this estimator whose
  interval covers the truth at each look with 95 % (each look's interval is at least the one-look
  interval): no design of that kind stops earlier on average.
- `two_look`: the best design with one interim look chosen knowing the world (the look n1 that
  minimises the mean questions) and the final look, Pocock's two-look constant (2.18) x the true SD:
  valid, and the fixed-size design "that knows the look at which to stop".
- `spend_true`: the spending boundary x the true SD (the built design with a perfect SE: what the
  jackknife's noise and upward bias cost).
- `info_true`: Pocock's constant for the looks' true information fractions (Var at 300 / Var at
  the look, not n / 300: with families, a look after every family is in adds little information,
  so the looks are more correlated and the constant smaller) x the true SD: the best boundary
  shape for this estimator, knowing the world.
- `floor`: every look as precise as the whole set (the look's estimate replaced by the 300
  questions' estimate, +- 1.96 x its true SD): what no sampling design of these 300 questions can
  beat for the world's truth (stratification, active testing, a control variate: none knows more
  than the whole set). It stops at the first look or never.
- `set_true` / `set_fpc`: the other estimand: the CuBE of these 300 questions (what the fixed-n
  run would say), not the world's. `set_true`: the spending boundary x the true SD of the estimate
  around the set's own estimate (a finite-population design with a perfect SE); `set_fpc`: the
  spending boundary x the jackknife SE x sqrt(1 - n/300), the finite population correction a
  driver could compute. Coverage is then of the set's CuBE; wrong verdicts are against the world's
  truth as for the others.

Columns: mean questions at the stop (MC SE), calls saved (questions: 300 / mean; with no unread
call against the fixed-n run as counted today, as sequential_design.py's `x skip vs today`),
coverage at every look of its own target (MC SE), wrong verdicts (MC SE) beside the fixed-n run's.
Then a scan over family size (families of 1, 2, 3, 5, 10 among the 300 questions) and the share
of correctness a family shares (the intra-family correlation), at the centre: where does 2x become
reachable, for `new` and for the `peek_true` bound.

    PYTHONPATH=. python benchmarks/sequential_oracle.py [--replicates 200] [--scan-replicates 100]
        [--workers 2] [--no-scan]

Last line: `sequential_oracle_centre_fam5: ...` (the bounds at the centre with families of 5).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import numpy as np  # noqa: E402
from sequential_cube import WORLDS  # noqa: E402

from cube.config.params import load_params  # noqa: E402
from cube.method.group_sequential import (  # noqa: E402
    pocock_by_paths,
    pocock_constant,
    spending_bounds,
)  # noqa: E402
from cube.run.simulate import _map, sequential_designs  # noqa: E402

NEW = {"order": "spread", "recall": "all", "boundary": "spending"}
Z = 1.959964


def looks_of(design, start: int, stop: int, seed: int) -> list[dict]:
    """Replicates start..stop-1: per look n, estimate, jackknife SE, the design's stop, calls."""
    from threadpoolctl import threadpool_limits

    from cube.method import simulate_sequential as SS

    out = []
    with threadpool_limits(1):
        for r in range(start, stop):
            looks = SS.replicate_looks(design, r, seed)
            out.append(
                {
                    "n": looks["n"].to_numpy(),
                    "est": looks["estimate"].to_numpy(),
                    "se": ((looks["fixed_hi"] - looks["fixed_lo"]) / (2 * Z)).to_numpy(),
                    "stop": looks["stop"].to_numpy(bool) & looks["may_stop"].to_numpy(bool),
                    "calls_skip": looks["calls_skipping"].to_numpy(),
                    "full_calls": float(looks["full_calls"].iloc[-1]),
                }
            )
    return out


def replicates(design, count: int, workers: int, seed: int = 0) -> dict[str, np.ndarray]:
    step = max(1, -(-count // max(1, workers)))
    jobs = [(design, s, min(s + step, count), seed) for s in range(0, count, step)]
    reps = [r for part in _map(looks_of, jobs, workers) for r in part]
    k = min(len(r["n"]) for r in reps)
    return {
        key: np.vstack([r[key][:k] for r in reps])
        for key in ("n", "est", "se", "stop", "calls_skip")
    } | {"full_calls": np.array([r["full_calls"] for r in reps])}


def bands(x: np.ndarray, edges=(40.0, 60.0, 80.0)) -> np.ndarray:
    return np.searchsorted(np.asarray(edges), x, side="right")


def rule(
    est: np.ndarray, half: np.ndarray, n: np.ndarray, calls: np.ndarray, full_calls: np.ndarray,
    target: np.ndarray | float, truth: float, allowed: np.ndarray | None = None,
) -> dict[str, float]:  # fmt: skip
    """Stop at the first look whose interval est +- half lies in one band (a look of `allowed`
    only); the mean questions, calls saved, coverage of `target` at every look, wrong verdicts."""
    lo, hi = est - half, est + half
    fits = (bands(lo) == bands(hi)) & np.isfinite(half)
    if allowed is not None:
        fits &= allowed
    last = n.shape[1] - 1
    at = np.where(fits.any(axis=1), np.argmax(fits, axis=1), last)
    rows = np.arange(n.shape[0])
    used = n[rows, at].astype(float)
    tgt = np.broadcast_to(np.asarray(target, dtype=float).reshape(-1, 1), est.shape)
    covered = ((lo <= tgt) & (tgt <= hi) | ~np.isfinite(half)).all(axis=1)
    wrong = bands(est[rows, at]) != bands(np.array([truth]))[0]
    r = len(used)
    return {
        "questions": used.mean(),
        "questions_se": used.std(ddof=1) / math.sqrt(r),
        "saved": n[0, -1] / used.mean(),
        "saved_skip": full_calls.mean() / calls[rows, at].mean(),
        "coverage": covered.mean(),
        "coverage_se": math.sqrt(covered.mean() * (1 - covered.mean()) / r),
        "wrong": wrong.mean(),
        "wrong_se": math.sqrt(max(wrong.mean() * (1 - wrong.mean()), 1 / r) / r),
    }


def rules_of(x: dict[str, np.ndarray], truth: float, alpha: float = 0.05) -> dict[str, dict]:
    """Every rule of the module docstring on one world's replicates."""
    n, est, se, calls, fc = x["n"], x["est"], x["se"], x["calls_skip"], x["full_calls"]
    horizon = float(n[0, -1])
    sd_true = np.sqrt(((est - truth) ** 2).mean(axis=0))[None, :]
    full = est[:, -1:]
    sd_set = np.sqrt(((est - full) ** 2).mean(axis=0))[None, :]
    crit = np.array(spending_bounds(tuple(float(s) for s in n[0]), horizon, alpha))[None, :]
    fpc = np.sqrt(np.clip(1 - n / horizon, 0, None))
    common = {"n": n, "calls": calls, "full_calls": fc, "truth": truth}
    out = {}
    used = np.where(x["stop"].any(axis=1), np.argmax(x["stop"], axis=1), n.shape[1] - 1)
    built = np.zeros_like(x["stop"])
    built[np.arange(len(used)), used] = True
    out["new"] = rule(est, np.where(built, 0.0, np.inf), allowed=built, target=truth, **common)
    out["new"]["coverage"] = math.nan  # the design's own coverage: sequential_design.py's
    out["peek_jk"] = rule(est, Z * se, target=truth, **common)
    out["peek_true"] = rule(est, Z * sd_true + 0 * est, target=truth, **common)
    best = None
    for k in range(n.shape[1] - 1):
        c = pocock_constant((float(n[0, k]), horizon), alpha)
        allowed = np.zeros(n.shape, dtype=bool)
        allowed[:, [k, -1]] = True
        half = np.where(allowed, c * sd_true, np.inf)
        r = rule(est, half, target=truth, allowed=allowed, **common)
        if best is None or r["questions"] < best["questions"]:
            best = {**r, "n1": int(n[0, k])}
    out["two_look"] = best
    out["spend_true"] = rule(est, crit * sd_true + 0 * est, target=truth, **common)
    info = information_sizes(sd_true[0], horizon)
    crit_info = pocock_by_paths(np.asarray(info) / horizon, alpha)
    out["info_true"] = rule(est, crit_info * sd_true + 0 * est, target=truth, **common)
    sd_full = float(sd_true[0, -1])
    out["floor"] = rule(np.repeat(full, n.shape[1], axis=1), Z * sd_full + 0 * est, target=truth,
                        **common)  # fmt: skip
    out["set_true"] = rule(est, np.where(n < horizon, crit * sd_set, 0.0), target=full, **common)
    out["set_fpc"] = rule(est, crit * se * fpc, target=full, **common)
    return out


def information_sizes(sd: np.ndarray, horizon: float) -> tuple[float, ...]:
    """The looks' information fractions (Var at the set's end / Var at the look) x the horizon, made
    strictly increasing (a Monte Carlo SD is noisy): the information-based spending boundary."""
    t = np.maximum.accumulate((sd[-1] / sd) ** 2)
    t = np.minimum(t + np.arange(t.size) * 1e-4, 1.0)
    t[-1] = 1.0
    t = np.minimum.accumulate(t[::-1])[::-1]  # keep it within (0, 1]
    for k in range(1, t.size):
        t[k] = max(t[k], t[k - 1] + 1e-4)
    return tuple(float(v) for v in t / t[-1] * horizon)


def world_params(base, shape: dict):
    sim = base.simulation.model_copy(update={**shape, "seed": 0})
    return base.model_copy(update={"simulation": sim})


def print_rules(label: str, truth: float, out: dict[str, dict]) -> None:
    for name, r in out.items():
        extra = f" n1={r['n1']}" if "n1" in r else ""
        cov = (
            "   -    "
            if math.isnan(r["coverage"])
            else f"{r['coverage']:.3f} ({r['coverage_se']:.3f})"
        )
        print(
            f"{label:<26} {truth:5.1f} {name:<10} {r['questions']:6.1f} ({r['questions_se']:4.1f}) "
            f"{r['saved']:5.2f}x {r['saved_skip']:5.2f}x  {cov}  "
            f"{r['wrong']:.3f} ({r['wrong_se']:.3f}){extra}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--scan-replicates", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-scan", action="store_true")
    args = parser.parse_args()
    base = load_params(ROOT / "params" / "default.yaml")
    t0 = time.time()
    print(
        "# world             truth  rule       questions (SE)  x qs  x skip  coverage (SE)  "
        "wrong (SE)   [fixed-n wrong: the `peek` rows' last look]"
    )
    main_worlds = [("fam5", WORLDS["fam5"], 50.0), ("fam5", WORLDS["fam5"], 30.0),
                   ("independent", WORLDS["independent"], 50.0)]  # fmt: skip
    headline = ""
    for label, shape, truth in main_worlds:
        [d] = sequential_designs(world_params(base, shape), 300, [], truths=[truth], design=NEW)
        x = replicates(d, args.replicates, args.workers)
        out = rules_of(x, d.truth)
        fixed_wrong = (bands(x["est"][:, -1]) != bands(np.array([d.truth]))[0]).mean()
        print(f"# {label} truth {d.truth:.2f}: fixed-n wrong {fixed_wrong:.3f}; true SD at n "
              + ", ".join(f"{int(n)}: {s:.2f}" for n, s in zip(
                  x["n"][0], np.sqrt(((x["est"] - d.truth) ** 2).mean(axis=0)), strict=True))
              + f"; mean jackknife SE at 300 {x['se'][:, -1].mean():.2f}")  # fmt: skip
        print_rules(label, d.truth, out)
        if label == "fam5" and truth == 50.0:
            pt, it = out["peek_true"], out["info_true"]
            headline = (
                f"sequential_oracle_centre_fam5: built {out['new']['saved']:.2f}x; bound for any "
                f"design on this estimator (peek_true) {pt['saved']:.2f}x ({pt['saved_skip']:.2f}x "
                f"with no unread call, coverage {pt['coverage']:.3f}); best valid (info_true) "
                f"{it['saved']:.2f}x ({it['saved_skip']:.2f}x); best two-look "
                f"{out['two_look']['saved']:.2f}x; floor {out['floor']['saved']:.2f}x; the set's "
                f"own CuBE (set_fpc) {out['set_fpc']['saved']:.2f}x"
            )
        print(f"# {time.time() - t0:.0f} s", flush=True)
    if not args.no_scan:
        for size in (1, 2, 3, 5, 10):
            for share in (1.0, 0.5, 0.0) if size == 5 else (1.0,):
                shape = {**WORLDS["fam5"], "family_size": size, "family_correctness_share": share}
                if size == 1:
                    shape = {
                        **shape,
                        "family_retrieval_share": 0.0,
                        "family_correctness_share": 0.0,
                    }
                [d] = sequential_designs(world_params(base, shape), 300, [], truths=[50.0],
                                         design=NEW)  # fmt: skip
                x = replicates(d, args.scan_replicates, args.workers)
                out = rules_of(x, d.truth)
                keep = {k: out[k] for k in ("new", "peek_true", "two_look", "info_true", "set_fpc")}
                print_rules(f"scan size {size} share {share}", d.truth, keep)
                print(f"# {time.time() - t0:.0f} s", flush=True)
    print(headline)


if __name__ == "__main__":
    main()
