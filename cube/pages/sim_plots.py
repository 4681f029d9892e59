"""Figures of the simulation study (notebook 12, `cube simulate`): coverage and p-values.

Each draws a table of `cube.method.simulate_study` with its Monte Carlo error; same conventions as
`cube.pages.plots` (object API, no pyplot state).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cube.pages import style as S

_METRIC = {"cube_score": "CuBE", "weighted_score": "W", "recall_at_k": "R@k"}


def coverage(table: pd.DataFrame, confidence: float = 0.95) -> Figure:
    """Coverage of every interval (`coverage_table`) with +-2 Monte Carlo standard errors, one row
    per (judge, metric, interval), one colour per number of questions; the nominal level as a
    line."""
    t = table.copy()
    units = t["unit"] if "unit" in t else pd.Series("", index=t.index)
    several = units.nunique() > 1  # question- and family-level resampling side by side
    t["label"] = [
        f"{j} · {_METRIC.get(m, m)}"
        + (f" ({i})" if m == "recall_at_k" else "")
        + (f" · by {u}" if several else "")
        for j, m, i, u in zip(t["judge"], t["metric"], t["interval"], units, strict=True)
    ]
    labels = list(dict.fromkeys(t["label"]))[::-1]
    sizes = sorted(t["n_questions"].unique())
    fig, ax = S.figure1(7.5, 0.42 * len(labels) + 1.8)
    step = 0.6 / max(len(sizes), 1)
    for k, n in enumerate(sizes):
        g = t[t["n_questions"] == n].set_index("label").reindex(labels)
        y = np.arange(len(labels)) + (k - (len(sizes) - 1) / 2) * step
        ax.errorbar(
            g["coverage"],
            y,
            xerr=2 * g["coverage_mc_se"],
            fmt="o",
            capsize=2,
            label=f"{n} questions (R = {int(g['replicates'].max())})",
        )
    ax.axvline(confidence, color="black", lw=1, ls="--")
    ax.set_yticks(np.arange(len(labels)), labels)
    ax.set(
        xlabel=f"coverage of the {confidence:.0%} interval (+-2 Monte Carlo SE)", xlim=(0.7, 1.01)
    )
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    return S.titled(fig, "Does each printed interval cover the simulated truth?")


def pvalues(pairs: pd.DataFrame) -> Figure:
    """Compare's p-values under no difference against the uniform distribution (a QQ plot with the
    pointwise 95 % band of uniform order statistics), one line per number of questions."""
    from scipy import stats

    fig, ax = S.figure1(5.5, 5.0)
    for n, g in pairs.groupby("n_questions"):
        p = np.sort(g["p_value"].dropna().to_numpy(float))
        k = len(p)
        if not k:
            continue
        q = (np.arange(1, k + 1)) / (k + 1)
        ax.plot(q, p, marker=".", lw=1, label=f"{n} questions (R = {k})")
        lo, hi = stats.beta.ppf(
            [[0.025], [0.975]], np.arange(1, k + 1), k - np.arange(1, k + 1) + 1
        )
        ax.fill_between(q, lo, hi, color="grey", alpha=0.2)
    ax.plot([0, 1], [0, 1], color="black", lw=1, ls="--")
    ax.set(xlabel="uniform quantile", ylabel="p-value (sorted)", xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left", fontsize="small")
    return S.titled(fig, "Compare's p-value when the systems do not differ")
