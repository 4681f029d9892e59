"""The judge audit's figure (issue 20): what each judge does to answers of known quality.

Reads `cube.method.audit.audit_summary` output (computed elsewhere: pages compute nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cube.pages import style as S


def audit_figure(summary: pd.DataFrame) -> Figure:
    """Left: discrimination per judge (share of pairs where the correct answer beats its corrupted,
    length-matched twin; 0.5 = chance) with its interval. Right: verbosity, authority and order
    biases (points on 0-10, interval): how much padding, an authority line or reordering moves
    the score of an answer whose quality they do not change."""
    s = summary.reset_index() if "judge" not in summary else summary
    judges = [str(j) for j in s["judge"]]
    y = np.arange(len(judges))[::-1]
    fig, axes = S.figure(1, 2, (4.6, 0.5 * len(judges) + 1.2), sharey=True)
    ax = axes[0, 0]
    d = s["discrimination"].to_numpy(float)
    lo, hi = s["discrimination_lo"].to_numpy(float), s["discrimination_hi"].to_numpy(float)
    ax.errorbar(
        d,
        y,
        xerr=[np.nan_to_num(d - lo), np.nan_to_num(hi - d)],
        fmt="o",
        color="#333333",
        capsize=3,
    )
    ax.axvline(0.5, color="#b2182b", ls="--", lw=1)
    ax.set_xlim(0, 1)
    ax.set_yticks(y, judges)
    ax.set_xlabel("discrimination (0.5 = chance)")
    ax = axes[0, 1]
    for k, (name, color) in enumerate(
        (("verbosity_bias", "#1b9e77"), ("authority_bias", "#d95f02"), ("order_bias", "#7570b3"))
    ):
        m = s[name].to_numpy(float)
        err = [
            np.nan_to_num(m - s[f"{name}_lo"].to_numpy(float)),
            np.nan_to_num(s[f"{name}_hi"].to_numpy(float) - m),
        ]
        ax.errorbar(
            m,
            y + (k - 1) * 0.2,
            xerr=err,
            fmt="o",
            color=color,
            capsize=2,
            label=name.replace("_", " "),
        )
    ax.axvline(0, color="#999999", lw=1)
    ax.set_xlabel("score change, points (0 = no bias)")
    ax.legend(loc="best", fontsize="small")
    return S.titled(fig, "Judge audit: answers of known quality")
