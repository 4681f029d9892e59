"""compare's regressions and improvements beyond the judges' noise (issue 29 item 6): how often the
rule is wrong on simulated pairs whose truth is known.

Pairs of one system's rag answers on 100 questions, two judges scoring four dimensions each as
round(level + bias + 1.2 · e) clipped to 0-10 (the generator of
`tests/diagnose/test_regressions_noise.py`):

- **judged twice**: the same answers and retrieval, the judges' scores drawn again;
- **drawn twice**: the same system run again, its retrieval drawn again (R@8 0.8; an answer whose
  gold document is found is 4 points better);
- **worse**: B is 3 points worse on 30 of the 100 questions, the same elsewhere.

For each: the mean regressions and improvements under the old rule (any fall or rise) and the new
one (beyond z · the judges' noise, or the gold document lost / found), the share of unchanged
questions counted as a regression, the share of the truly worse ones counted, and how often the
regression count falls outside the range expected with no difference.

    PYTHONPATH=. python benchmarks/regression_noise.py [--pairs 200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from cube.diagnose.regressions import _counted, expected_counts  # noqa: E402
from tests.diagnose.test_regressions_noise import _compare, _old_counts, _side  # noqa: E402

N = 100


def _pair(case: str, rng: np.random.Generator):
    """(changes, truly worse mask) of one simulated pair."""
    if case == "drawn twice":
        base = rng.uniform(1, 5, N)

        def draw():
            hit = rng.random(N) < 0.8
            return _side(base + 4 * hit, np.where(hit, rng.integers(1, 9, N), 0), rng)

        return _compare(draw(), draw()), np.zeros(N, bool)
    level, ranks = rng.uniform(3, 8, N), rng.integers(0, 9, N)
    worse = np.arange(N) < 30 if case == "worse" else np.zeros(N, bool)
    a, b = _side(level, ranks, rng), _side(level - 3 * worse, ranks, rng)
    return _compare(a, b), worse


def run(pairs: int) -> dict[str, dict[str, float]]:
    out = {}
    for case in ("judged twice", "drawn twice", "worse"):
        rng = np.random.default_rng(29)
        rows = []
        for _ in range(pairs):
            ch, worse = _pair(case, rng)
            reg, _imp = _counted(ch)
            got = expected_counts(ch)
            same = ~worse & (ch["retrieval_change"] == "same").to_numpy()
            rows.append(
                [
                    *_old_counts(ch),
                    got["regressions"],
                    got["improvements"],
                    got["expected"],
                    float(reg.to_numpy()[same].mean()),
                    float(reg.to_numpy()[worse].mean()) if worse.any() else np.nan,
                    not got["range"][0] <= got["regressions"] <= got["range"][1],
                ]
            )
        r = np.array(rows, float)
        out[case] = dict(
            zip(
                (
                    "old_regressions",
                    "old_improvements",
                    "regressions",
                    "improvements",
                    "expected",
                    "unchanged_counted",
                    "worse_counted",
                    "outside_range",
                ),
                np.nanmean(r, axis=0) if case == "worse" else np.mean(r, axis=0),
                strict=True,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200)
    args = ap.parse_args()
    got = run(args.pairs)
    for case, m in got.items():
        print(
            f"{case}: old rule {m['old_regressions']:.1f} regressions / "
            f"{m['old_improvements']:.1f} improvements; beyond noise {m['regressions']:.1f} / "
            f"{m['improvements']:.1f} (expected with no difference {m['expected']:.1f}); "
            f"unchanged questions counted {m['unchanged_counted']:.1%}; truly worse counted "
            f"{m['worse_counted']:.1%}; regression count outside the no-difference range "
            f"{m['outside_range']:.1%} of {args.pairs} pairs"
        )

    # headline: the share of unchanged questions counted as a regression (nominal 2.5 %)
    print(f"unchanged_counted_as_regression: {got['judged twice']['unchanged_counted']:.3f}")


if __name__ == "__main__":
    main()
