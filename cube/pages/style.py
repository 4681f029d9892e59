"""The figures' shared conventions: set colours and labels, judge palettes, display names, panel
grids and titles, the off-scale range. Every figure module (`plots`, `plots_cube`, `diag_plots`)
builds on these public helpers; none reaches into another figure module.

Figures use the object API (`matplotlib.figure.Figure`): no pyplot state is touched.
"""

from __future__ import annotations

import functools
import math
import warnings
import zlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy import stats

from cube.config.sections import PAPER_DIMENSIONS
from cube.method.agreement import is_human
from cube.pages.fonts import renderable

SET_COLORS: dict[str, str] = {"zero": "#8c8c8c", "rag": "#1f77b4", "full": "#2ca02c"}
SET_LABELS: dict[str, str] = {
    "zero": "zero (no documents)",
    "rag": "rag (system under test)",
    "full": "full (gold document only)",
}
HUMAN_COLOR = "#000000"
SCORE_RANGE = np.arange(11)  # the integer scale 0-10
_F = TypeVar("_F", bound=Callable[..., Figure])


def quiet(func: _F) -> _F:
    """Silence harmless library warnings (constant columns in a correlation, layout hints)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", FutureWarning)
            warnings.filterwarnings("ignore", module=r"(seaborn|matplotlib)(\..*)?")
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------------------- labels, colours
def display_labels(names: Iterable[Any], kind: str = "judge") -> dict[str, str]:
    """Display label of each name: itself when the fonts can draw it (`renderable`: ASCII, and
    Chinese with the packaged CJK font), else a key `"<kind> <nnn>"` from a hash of the name
    (`"human:rater <nnn>"` for a rater), the same in every figure. Show this mapping beside the
    figures to decode keys."""

    def key(name: str, digits: int) -> str:
        if renderable(name):
            return name
        code = f"{zlib.crc32(name.encode()) % 10**digits:0{digits}d}"
        return f"human:rater {code}" if name.startswith("human:") else f"{kind} {code}"

    unique = sorted({str(n) for n in names})
    short = [key(n, 3) for n in unique]
    clash = len(set(short)) < len(short)  # two names on one 3-digit key: use longer keys
    return {n: key(n, 10) if clash else k for n, k in zip(unique, short, strict=True)}


ascii_labels = display_labels  # the former name


def display_text(text: str, fallback: str) -> str:
    """`text` when the fonts can draw it, else its ASCII characters (or `fallback`)."""
    return (
        text if renderable(text) else (text.encode("ascii", "ignore").decode().strip() or fallback)
    )


def systems_text(names: Iterable[str]) -> str:
    """`a`, `a and b`, `a, b and c`, each drawable (see `display_text`)."""
    shown = [display_text(str(n), f"system {k + 1}") for k, n in enumerate(names)]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def judge_palette(judges: Iterable[Any]) -> dict[str, Any]:
    """A fixed colour per judge: non-human judges in sorted order on `tab10` (`husl` beyond ten),
    the human consensus black, individual human raters in greys."""
    names = sorted({str(j) for j in judges})
    llm = [j for j in names if not is_human(j)]
    raters = [j for j in names if is_human(j) and j != "human"]
    colours = sns.color_palette("tab10" if len(llm) <= 10 else "husl", max(len(llm), 1))
    out: dict[str, Any] = dict(zip(llm, colours, strict=False))
    out.update(zip(raters, sns.color_palette("Greys", len(raters) + 2)[2:], strict=False))
    if "human" in names:
        out["human"] = HUMAN_COLOR
    return out


def dims(frame: pd.DataFrame) -> list[str]:
    """Dimensions in the paper's order first, then any custom ones in order of appearance."""
    seen = list(dict.fromkeys(frame["dimension"].astype(str)))
    return [d for d in PAPER_DIMENSIONS if d in seen] + [
        d for d in seen if d not in PAPER_DIMENSIONS
    ]


def grid(n: int, max_cols: int = 4) -> tuple[int, int]:
    ncols = 2 if n == 4 else min(n, max_cols)
    return math.ceil(n / ncols), ncols


def figure(
    nrows: int, ncols: int, panel: tuple[float, float], **kw: Any
) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows + 0.6), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def titled(fig: Figure, title: str) -> Figure:
    fig.suptitle(title)
    return fig


def figure1(width: float, height: float) -> tuple[Figure, Axes]:
    fig, axes = figure(1, 1, (width, height - 0.6))
    return fig, axes[0, 0]


def drop_unused(axes: np.ndarray, used: int) -> list[Axes]:
    flat = list(axes.ravel())
    for ax in flat[used:]:
        ax.remove()
    return flat[:used]


def require_judge(means: pd.DataFrame, judge: str) -> None:
    if judge not in set(means["judge"]):
        raise ValueError(
            f"scores: no judge {judge!r}; judges present: {sorted(means['judge'].unique())}"
        )


def r_text(x: np.ndarray, y: np.ndarray) -> str:
    """Pearson r for a panel title; "n/a" when undefined (fewer than 3 pairs or a constant side)."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return "n/a"
    return f"{stats.pearsonr(x, y).statistic:.2f}"


def set_legend(fig: Figure, rag_marker: str = "o", bound_marker: str = "o") -> None:
    handles = [
        Line2D(
            [],
            [],
            ls="",
            marker=rag_marker if s == "rag" else bound_marker,
            color=c,
            label=SET_LABELS[s],
        )
        for s, c in SET_COLORS.items()
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)


OFF_SCALE = (-10.0, 110.0)  # axis range of 0-100 scores; values beyond are marked, not plotted
