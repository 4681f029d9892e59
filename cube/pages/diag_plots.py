"""Figures of the diagnostics (issue 14): the R@k curve, breakdowns and failure patterns.

Same conventions as `cube.pages.plots` (object API, no pyplot state, real names when the fonts can
draw them); kept apart so `cube.pages.plots` stays a manageable size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cube.diagnose.refusal_categories import NOT_IN_CORPUS
from cube.pages import style as S


def recall_curve(metrics: Mapping[str, Mapping[str, Any]]) -> Figure:
    """R@k for every k up to each system's TOP-N (one line per system), from
    `cube.diagnose.retrieval.run_metrics`; the last point of a line is the system's hit rate."""
    fig, ax = S.figure1(7.0, 4.6)
    for system, m in metrics.items():
        curve = np.asarray(m["curve"], dtype=float)
        ks = np.arange(1, len(curve) + 1)
        ax.plot(ks, curve, marker="o", label=f"{S.display_text(system, 'system')} (n = {m['n']})")
        if len(curve) and np.isfinite(curve[-1]):
            ax.annotate(
                f"{curve[-1]:.0%}",
                (ks[-1], curve[-1]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize="small",
            )
    ax.set(xlabel="k (documents considered)", ylabel="R@k (share of questions)", ylim=(0, 1.05))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return S.titled(fig, "R@k curve: share of questions whose gold document is in the top k")


def recall_by_group(table: pd.DataFrame, by: str, system: str, top: int = 15) -> Figure:
    """R@TOP-N with its Wilson interval per value of `by` (`cube.diagnose.retrieval.by_group`),
    one system, the `top` largest groups."""
    t = table[table["system"] == system].head(top).iloc[::-1]
    fig, ax = S.figure1(7.0, 0.32 * max(len(t), 3) + 1.6)
    y = np.arange(len(t))
    err = np.vstack([t["R@N"] - t["R@N_lo"], t["R@N_hi"] - t["R@N"]]) if len(t) else None
    ax.errorbar(t["R@N"], y, xerr=err, fmt="o", capsize=3)
    ax.set_yticks(
        y,
        [f"{S.display_text(str(v), by)} ({n})" for v, n in zip(t[by], t["questions"], strict=True)],
    )
    n = int(t["top_n"].iloc[0]) if len(t) else 0
    ax.set(xlabel=f"R@{n} (95% Wilson interval)", xlim=(0, 1.02))
    ax.grid(axis="x", alpha=0.3)
    return S.titled(
        fig,
        f"Retrieval of {S.display_text(system, 'system')} by {by.replace('_', ' ')} (questions)",
    )


def pattern_counts(table: pd.DataFrame) -> Figure:
    """Low-scoring answers per failure pattern (`cube.diagnose.failures.pattern_table`), most
    frequent first."""
    t = table[table["count"] > 0].iloc[::-1]
    fig, ax = S.figure1(7.0, 0.35 * max(len(t), 3) + 1.6)
    bars = ax.barh(np.arange(len(t)), t["count"], color="#c62828")
    ax.bar_label(bars, fontsize="small")
    ax.set_yticks(np.arange(len(t)), list(t["pattern"]))
    ax.set(xlabel="low-scoring answers (primary pattern)")
    return S.titled(fig, "Why answers score low: failure patterns")


def patterns_by_category(table: pd.DataFrame, by: str) -> Figure:
    """Share of each category's answers per primary failure pattern
    (`cube.diagnose.failures.by_category`)."""
    pivot = table.pivot_table(
        index=by, columns="pattern", values="count", aggfunc="sum", fill_value=0
    )
    fig, axes = S.figure(1, 1, (8.0, 0.32 * max(len(pivot), 3) + 1.0))
    ax = axes[0, 0]
    left = np.zeros(len(pivot))
    for col in pivot.columns:
        ax.barh(np.arange(len(pivot)), pivot[col], left=left, label=col)
        left += pivot[col].to_numpy()
    ax.set_yticks(np.arange(len(pivot)), [S.display_text(str(v), by) for v in pivot.index])
    ax.set(xlabel="low-scoring answers")
    ax.legend(fontsize="small", loc="lower right")
    return S.titled(fig, f"Failure patterns by {by.replace('_', ' ')}")


def refusal_figure(tables: dict[str, pd.DataFrame], system: str, top: int = 12) -> Figure:
    """Refusal accuracy (refusal questions) and false-refusal rate (answerable questions) with
    their Wilson intervals, one panel per breakdown of `tables` (`refusal_by_category`), the `top`
    largest categories each (and `NOT_IN_CORPUS`); a category without questions of a kind has no
    point for it."""
    names = list(tables)
    height = 0.3 * max([min(len(t), top) for t in tables.values()] + [3]) + 1.2
    fig, axes = S.figure(1, len(names), (5.2, height))
    for ax, by in zip(axes[0], names, strict=True):
        full = tables[by]
        t = pd.concat([full.head(top), full.iloc[top:][full.iloc[top:][by] == NOT_IN_CORPUS]]).iloc[
            ::-1
        ]
        y = np.arange(len(t))
        for col, lo, hi, label, colour, dy in (
            ("refusal_accuracy", "refusal_lo", "refusal_hi", "refusal accuracy", "#1565c0", 0.12),
            (
                "false_refusal_rate",
                "false_refusal_lo",
                "false_refusal_hi",
                "false-refusal rate",
                "#c62828",
                -0.12,
            ),
        ):
            ok = t[col].notna().to_numpy()
            if ok.any():
                v = t[col].to_numpy(float)[ok]
                err = np.vstack([v - t[lo].to_numpy(float)[ok], t[hi].to_numpy(float)[ok] - v])
                ax.errorbar(v, y[ok] + dy, xerr=err, fmt="o", capsize=3, color=colour, label=label)
        ax.set_yticks(
            y,
            [
                f"{S.display_text(str(v), by)} ({u}/{a})"
                for v, u, a in zip(t[by], t["unanswerable"], t["answerable"], strict=True)
            ],
        )
        ax.set(xlabel="share declined (Wilson interval)", xlim=(-0.02, 1.02), title=f"by {by}")
        ax.grid(axis="x", alpha=0.3)
    if len(names):
        axes[0, 0].legend(loc="lower right", fontsize="small")
    return S.titled(
        fig,
        f"Refusal of {S.display_text(system, 'system')} by category "
        "(refusal / answerable questions)",
    )


def sweep_figure(table: pd.DataFrame, sweep: str) -> Figure:
    """R@N, W and CuBE against TOP-N (log2 axis) with their intervals, one panel each."""
    fig, axes = S.figure(1, 3, (4.2, 3.6))
    t = table.sort_values("top_n")
    for ax, (col, label, scale) in zip(
        axes[0],
        (("R@N", "R@N (%)", 100), ("W", "W (0-100)", 1), ("CuBE", "CuBE (0-100)", 1)),
        strict=True,
    ):
        y = t[col].to_numpy(float) * scale
        err = np.vstack(
            [y - t[f"{col}_lo"].to_numpy(float) * scale, t[f"{col}_hi"].to_numpy(float) * scale - y]
        )
        ax.errorbar(t["top_n"], y, yerr=np.nan_to_num(np.abs(err)), fmt="o-", capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_xticks(t["top_n"], [str(int(n)) for n in t["top_n"]])
        ax.set(xlabel="TOP-N", ylabel=label)
        ax.grid(alpha=0.3)
    return S.titled(
        fig,
        f"TOP-N sweep of {S.display_text(sweep, 'system')}: recall, answer quality and CuBE "
        "(95% intervals)",
    )
