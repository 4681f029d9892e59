"""Figures of the diagnostics (issue 14): the R@k curve, breakdowns and failure patterns.

Same conventions as `cube.plots` (object API, no pyplot state, real names when the fonts can
draw them); kept apart so `cube.plots` stays a manageable size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cube.plots import _display_text, _figure, _figure1, _titled


def recall_curve(metrics: Mapping[str, Mapping[str, Any]]) -> Figure:
    """R@k for every k up to each system's TOP-N (one line per system), from
    `cube.retrieval_metrics.run_metrics`; the last point of a line is the system's hit rate."""
    fig, ax = _figure1(7.0, 4.6)
    for system, m in metrics.items():
        curve = np.asarray(m["curve"], dtype=float)
        ks = np.arange(1, len(curve) + 1)
        ax.plot(ks, curve, marker="o", label=f"{_display_text(system, 'system')} (n = {m['n']})")
        if len(curve) and np.isfinite(curve[-1]):
            ax.annotate(f"{curve[-1]:.0%}", (ks[-1], curve[-1]), textcoords="offset points", xytext=(4, 4),
                        fontsize="small")
    ax.set(xlabel="k (documents considered)", ylabel="R@k (share of questions)", ylim=(0, 1.05))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return _titled(fig, "R@k curve: share of questions whose gold document is in the top k")


def recall_by_group(table: pd.DataFrame, by: str, system: str, top: int = 15) -> Figure:
    """R@TOP-N with its Wilson interval per value of `by` (`cube.retrieval_metrics.by_group`),
    one system, the `top` largest groups."""
    t = table[table["system"] == system].head(top).iloc[::-1]
    fig, ax = _figure1(7.0, 0.32 * max(len(t), 3) + 1.6)
    y = np.arange(len(t))
    err = np.vstack([t["R@N"] - t["R@N_lo"], t["R@N_hi"] - t["R@N"]]) if len(t) else None
    ax.errorbar(t["R@N"], y, xerr=err, fmt="o", capsize=3)
    ax.set_yticks(y, [f"{_display_text(str(v), by)} ({n})" for v, n in zip(t[by], t["questions"], strict=True)])
    n = int(t["top_n"].iloc[0]) if len(t) else 0
    ax.set(xlabel=f"R@{n} (95% Wilson interval)", xlim=(0, 1.02))
    ax.grid(axis="x", alpha=0.3)
    return _titled(fig, f"Retrieval of {_display_text(system, 'system')} by {by.replace('_', ' ')} (questions)")


def pattern_counts(table: pd.DataFrame) -> Figure:
    """Low-scoring answers per failure pattern (`cube.failures.pattern_table`), most frequent first."""
    t = table[table["count"] > 0].iloc[::-1]
    fig, ax = _figure1(7.0, 0.35 * max(len(t), 3) + 1.6)
    bars = ax.barh(np.arange(len(t)), t["count"], color="#c62828")
    ax.bar_label(bars, fontsize="small")
    ax.set_yticks(np.arange(len(t)), list(t["pattern"]))
    ax.set(xlabel="low-scoring answers (primary pattern)")
    return _titled(fig, "Why answers score low: failure patterns")


def patterns_by_category(table: pd.DataFrame, by: str) -> Figure:
    """Share of each category's answers per primary failure pattern (`cube.failures.by_category`)."""
    pivot = table.pivot_table(index=by, columns="pattern", values="count", aggfunc="sum", fill_value=0)
    fig, axes = _figure(1, 1, (8.0, 0.32 * max(len(pivot), 3) + 1.0))
    ax = axes[0, 0]
    left = np.zeros(len(pivot))
    for col in pivot.columns:
        ax.barh(np.arange(len(pivot)), pivot[col], left=left, label=col)
        left += pivot[col].to_numpy()
    ax.set_yticks(np.arange(len(pivot)), [_display_text(str(v), by) for v in pivot.index])
    ax.set(xlabel="low-scoring answers")
    ax.legend(fontsize="small", loc="lower right")
    return _titled(fig, f"Failure patterns by {by.replace('_', ' ')}")
