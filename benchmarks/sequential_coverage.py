"""Time-uniform coverage and stopping of the confidence sequence (cube.method.sequential).

Seeded i.i.d. per-question scores on 0-100 from a scaled beta with the given true mean and SD
(`--sd`, 20 by default; the run simulation of cube/method/simulate.py is not used because the CuBE
it estimates is a ratio of trimmed means, not a mean of per-question scores: wiring the sequence to
the jury CuBE is the next step of issue 31). Verdict bands: the default thresholds 40 / 60 / 80.
The true means sit 5, 15 and 30 points inside the `poor` band (35, 25, 10; the only band 40 points
wide), 5 and 2 points inside `good` (65, 62), and on the edge 60 (where the band a run
gives is a coin toss whatever it does: what matters there is `settled`, the share that stopped).

For each true mean, over `--runs` runs of at most `--questions` questions taken in batches of
`--batch` with the stop rule `verdict` (never before `--min-questions`):

- `cover_cs`: the share of runs whose sequence holds the truth at every look (every batch end from
  min_questions on), with its Monte Carlo SE; `cover_fixed`: the same for the fixed-n normal
  interval re-used at every look (the failure the sequence fixes);
- `stop_n`: the mean number of questions used (SE), `saved`: questions / stop_n, `settled`: the
  share of runs that stopped before the set ended;
- `wrong_cs`: the share of runs whose verdict is wrong (a stopped run's band, or an unsettled run's
  point estimate's band, differs from the truth's); `wrong_fixed`: the same for a fixed-n run of
  all the questions judged by its point estimate; `wrong_peek`: a run that stops as soon as the
  fixed-n interval re-used after each batch lies in one band (what the sequence replaces).

The last line is `sequential_coverage_worst: <share>`, the lowest `cover_cs` of the true means.

    PYTHONPATH=. python benchmarks/sequential_coverage.py [--runs 2000] [--questions 300]
        [--batch 20] [--min-questions 40] [--sd 20] [--target 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402

from cube.method import sequential as seq  # noqa: E402

THRESHOLDS = {"excellent": 80.0, "good": 60.0, "fair": 40.0}
MEANS = (35.0, 25.0, 10.0, 65.0, 62.0, 60.0)


def bounded_scores(rng: np.random.Generator, mean: float, sd: float, shape) -> np.ndarray:
    """Per-question scores on 0-100 from a scaled beta with the given mean and SD."""
    m, v = mean / 100, (sd / 100) ** 2
    k = m * (1 - m) / v - 1
    if k <= 0:
        raise SystemExit(f"--sd {sd} is too large for a mean of {mean} on 0-100")
    return 100 * rng.beta(m * k, (1 - m) * k, size=shape)


def band(scores: np.ndarray) -> np.ndarray:
    """The verdict band index (0 poor .. 3 excellent) of each score."""
    return np.searchsorted(sorted(THRESHOLDS.values()), scores, side="right")


def first_settled(bounds: dict, looks: np.ndarray) -> np.ndarray:
    """Per run, the index into `looks` of the first look inside one band (-1: never)."""
    lo, hi = bounds["lower"][:, looks], bounds["upper"][:, looks]
    one_band = band(lo) == band(hi)
    return np.where(one_band.any(axis=1), one_band.argmax(axis=1), -1)


def verdict_at_stop(bounds: dict, looks: np.ndarray, first: np.ndarray) -> tuple:
    """Questions used and the band given, per run: at the first settled look, else at the end."""
    at = np.where(first >= 0, looks[np.maximum(first, 0)], bounds["estimate"].shape[1] - 1)
    rows = np.arange(at.size)
    return at + 1, band(bounds["estimate"][rows, at])


def share(flags: np.ndarray) -> str:
    """A share with its Monte Carlo SE."""
    p = float(np.mean(flags))
    return f"{p:.3f} ({np.sqrt(p * (1 - p) / flags.size):.3f})"


def one_mean(mean: float, args: argparse.Namespace, rng: np.random.Generator) -> dict:
    """Every figure for one true mean."""
    rule = seq.StopRule(batch=args.batch, min_questions=args.min_questions,
                        target_questions=args.target)  # fmt: skip
    scores = bounded_scores(rng, mean, args.sd, (args.runs, args.questions))
    looks = np.arange(rule.min_questions - 1, args.questions, rule.batch)
    cs, fixed = seq.sequence(scores, rule), seq.fixed_n_interval(scores, rule.alpha)
    held = {name: ((b["lower"][:, looks] <= mean) & (mean <= b["upper"][:, looks])).all(axis=1)
            for name, b in (("cs", cs), ("fixed", fixed))}  # fmt: skip
    first = first_settled(cs, looks)
    used, given = verdict_at_stop(cs, looks, first)
    _, peek_given = verdict_at_stop(fixed, looks, first_settled(fixed, looks))
    truth = band(np.array(mean))
    return {
        "mean": f"{mean:g}",
        "inside": f"{min(abs(mean - t) for t in THRESHOLDS.values()):g}",
        "cover_cs": share(held["cs"]),
        "cover_fixed": share(held["fixed"]),
        "stop_n": f"{used.mean():.1f} ({used.std(ddof=1) / np.sqrt(used.size):.1f})",
        "saved": f"{args.questions / used.mean():.2f}x",
        "settled": share(first >= 0),
        "wrong_cs": share(given != truth),
        "wrong_fixed": share(band(cs["estimate"][:, -1]) != truth),
        "wrong_peek": share(peek_given != truth),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--min-questions", type=int, default=40)
    parser.add_argument("--sd", type=float, default=20.0)
    parser.add_argument("--target", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = [one_mean(mean, args, rng) for mean in MEANS]
    print(f"# {args.runs} runs, <= {args.questions} questions, batch {args.batch}, "
          f"min {args.min_questions}, SD {args.sd:g}, rho tuned for {args.target}; "
          "figures with Monte Carlo SEs")  # fmt: skip
    print("\t".join(rows[0]))
    for row in rows:
        print("\t".join(row.values()))
    worst = min(rows, key=lambda row: float(row["cover_cs"].split()[0]))
    print(f"sequential_coverage_worst: {worst['cover_cs'].split()[0]} (true mean {worst['mean']})")


if __name__ == "__main__":
    main()
