"""The CuBE figures of the report: bounds, CuBE scores over the verdict bands, normalised
dimensions.

Each takes one system's `CubeResult` or a mapping system -> result and shows every system given
(the report compares systems). Reached as `cube.pages.plots.bounds` etc.; the conventions (colours,
fonts, labels) are those of `cube.pages.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from cube.method.evaluation import CubeResult
from cube.pages import style as S
from cube.pages.style import SET_COLORS, display_labels, judge_palette

# ------------------------------------------------------------------------------- CuBE figures
Results = CubeResult | Mapping[str, CubeResult]


def _by_system(results: Results) -> dict[str, CubeResult]:
    """`{system: result}` from one result or a mapping (kept in the mapping's order)."""
    if isinstance(results, CubeResult):
        return {str(results.system): results}
    out = {str(k): v for k, v in results.items()}
    if not out:
        raise ValueError(
            "no CuBE result to plot: pass a CubeResult or a non-empty {system: result} mapping"
        )
    return out


def _dimensions(by: Mapping[str, CubeResult]) -> list[str]:
    """The dimensions the systems' trimmed means hold, in the report's order."""
    return S.dims(pd.concat([r.trimmed_means for r in by.values()], ignore_index=True))


class _Rows:
    """Y positions of rows grouped by system, top to bottom. With several systems each group
    starts with a heading row (the system's name, without tick mark) and a rule separates the
    groups."""

    def __init__(
        self,
        groups: Mapping[str, list[str]],
        labels: Mapping[str, str],
        headings: Mapping[str, str] | None = None,
    ):
        several = len(groups) > 1
        self.n = sum(len(rows) + several for rows in groups.values())
        self.y: dict[tuple[str, str], float] = {}
        self.ticks: list[float] = []
        self.labels: list[str] = []
        self.bold: list[int] = []
        self.rules: list[float] = []
        y = float(self.n - 1)
        for group, rows in groups.items():
            if several:
                if self.ticks:
                    self.rules.append(y + 0.5)
                self.bold.append(len(self.ticks))
                self.ticks.append(y)
                self.labels.append((headings or {}).get(group, S.display_text(group, "system")))
                y -= 1
            for row in rows:
                self.y[(group, row)] = y
                self.ticks.append(y)
                self.labels.append(labels[row])
                y -= 1

    def apply(self, ax: Axes) -> None:
        ax.set_yticks(self.ticks, self.labels)
        ax.set_ylim(-0.7, self.n - 0.3)
        ticks = ax.yaxis.get_major_ticks()
        for (
            i
        ) in self.bold:  # no bold: the CJK font has a single weight; the heading has no tick mark
            ticks[i].tick1line.set_visible(False)
        for y in self.rules:
            ax.axhline(y, color="#bbbbbb", lw=0.8)


# the rag mean (a point on the bar) larger and round, the bounds (the bar's ends) square
_SET_MARKS = {"zero": (45, "s"), "full": (45, "s"), "rag": (60, "o")}


def _set_means(tm: pd.DataFrame, dim: str, judge: str) -> tuple[float, float, float]:
    """The judge's zero, rag and full trimmed means of `dim` (NaN where it has none)."""
    t = tm.loc[(dim, judge)] if (dim, judge) in tm.index else pd.Series(dtype=float)
    z, r, f = (float(t.get(s, np.nan)) for s in ("zero", "rag", "full"))
    return z, r, f


def _n_label(n_d: float) -> str:
    return "N = n/a" if not np.isfinite(n_d) else f"N = {n_d:.0f}"


def _judge_bounds(ax: Axes, y: float, means: tuple[float, float, float], n_d: float) -> None:
    """One row: a bar from the zero to the full mean, the three means as marks, N_d over rag."""
    z, r, f = means
    ax.plot([z, f], [y, y], color="#d9d9d9", lw=7, solid_capstyle="round", zorder=1)
    for s, v in (("zero", z), ("full", f), ("rag", r)):
        size, marker = _SET_MARKS[s]
        ax.scatter([v], [y], s=size, color=SET_COLORS[s], zorder=3, marker=marker)
    if np.isfinite(r):
        ax.annotate(
            _n_label(n_d),
            (r, y),
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            fontsize="x-small",
        )


def _system_bounds(
    ax: Axes, dim: str, result: CubeResult, judges: list[str], y: Mapping[str, float]
) -> None:
    """The rows of one system's judges on the panel of `dim`."""
    tm = result.trimmed_means.pivot_table(
        index=["dimension", "judge"], columns="set", values="trimmed_mean"
    )
    for judge in judges:
        n_d = result.cube_table.at[judge, dim] if dim in result.cube_table else np.nan
        _judge_bounds(ax, y[judge], _set_means(tm, dim, judge), n_d)


@S.quiet
def bounds(results: Results) -> Figure:
    """Per dimension (panels) and, for each system, judge (rows): the zero and full trimmed means
    as the ends of a bar and the rag trimmed mean as a point on it, on the raw 0-10 scale,
    annotated with the normalised score N_d (0 = zero bound, 100 = full bound).

    Args:
        results: one system's `CubeResult`, or `{system: result}` to show every system.
    """
    by = _by_system(results)
    dims = _dimensions(by)
    judges_of = {s: sorted(r.trimmed_means["judge"].astype(str).unique()) for s, r in by.items()}
    labels = display_labels([j for js in judges_of.values() for j in js])
    dlabels = display_labels(dims, "dimension")
    rows = _Rows(judges_of, labels)
    nrows, ncols = S.grid(len(dims))
    fig, axes = S.figure(nrows, ncols, (5.0, 0.55 * rows.n + 1.4), sharex=True)
    for ax, dim in zip(S.drop_unused(axes, len(dims)), dims, strict=True):
        for system, result in by.items():
            y = {j: rows.y[(system, j)] for j in judges_of[system]}
            _system_bounds(ax, dim, result, judges_of[system], y)
        ax.set(title=dlabels[dim], xlim=(0, 10.3))
        rows.apply(ax)
        if ax.get_subplotspec().is_last_row():
            ax.set_xlabel("trimmed mean score (0-10)")
    S.set_legend(fig, bound_marker="s")
    own = "its" if len(by) == 1 else "their"
    return S.titled(
        fig,
        f"Each judge's own scale: {S.systems_text(by)} (rag) between {own} zero and full bounds\n"
        "(trimmed means; N = normalised dimension score, 0 = zero bound, 100 = full bound)",
    )


def _verdict_bands(
    thresholds: Mapping[str, float], lo_x: float, hi_x: float
) -> list[tuple[str, float, float]]:
    """(verdict, low, high) bands on the CuBE axis, with `poor` (below every threshold, as
    `cube.diagnose.verdict.verdict` names it) from the axis' left end."""
    ordered = sorted(thresholds.items(), key=lambda kv: kv[1])
    bands = [("poor", lo_x, ordered[0][1])] if ordered[0][1] > lo_x else []
    bands += [
        (str(v), low, ordered[k + 1][1] if k + 1 < len(ordered) else hi_x)
        for k, (v, low) in enumerate(ordered)
    ]
    return bands


def _shade_verdicts(ax: Axes, thresholds: Mapping[str, float], lo_x: float, hi_x: float) -> None:
    """The verdict bands shaded (darker for better), each named above the plot."""
    bands = _verdict_bands(thresholds, lo_x, hi_x)
    shades = sns.light_palette("seagreen", len(bands) + 1)
    for k, (verdict, low, high) in enumerate(bands):
        ax.axvspan(low, high, color=shades[k], alpha=0.5, zorder=0, lw=0)
        ax.text(
            (low + high) / 2,
            1.0,
            S.display_text(verdict, f"verdict {k + 1}"),
            ha="center",
            va="bottom",
            transform=ax.get_xaxis_transform(),
            fontsize="small",
        )


def _forest_score(result: CubeResult, name: str) -> float:
    """A judge's CuBE score, or the jury mean's (`name` "jury")."""
    if name == "jury":
        return result.jury_cube()
    return float(result.cube_table.at[name, "cube_score"])


def _forest_marker(name: str, v: float, shown: float, hi_x: float) -> str:
    """A diamond for the jury, a dot for a judge; an arrow for a score off the scale."""
    if shown != v:
        return ">" if v > hi_x else "<"
    return "D" if name == "jury" else "o"


def _forest_row(
    ax: Axes, y: float, name: str, result: CubeResult, colour: str, x_range: tuple[float, float]
) -> None:
    """One row: the score's interval, the score (clipped to the axis, said when it is) and its
    value."""
    lo_x, hi_x = x_range
    v = _forest_score(result, name)
    # a percentile interval need not contain the estimate, so it is drawn as a capped range
    ax.plot(result.interval(name), [y, y], color=colour, lw=1.6, marker="|", ms=12)
    shown = float(np.clip(v, lo_x, hi_x))
    ax.plot([shown], [y], _forest_marker(name, v, shown, hi_x), color=colour, ms=8)
    if not np.isfinite(v):
        return
    inside = shown == v
    ax.annotate(
        f"{v:.1f}" + ("" if inside else " (off scale)"),
        (shown, y),
        xytext=(0, 8),
        textcoords="offset points",
        ha="center" if inside else "right",
        fontsize="small",
    )


def _verdict_badge(ax: Axes, verdict: str, y: float) -> None:
    """The system's verdict right of its jury row, outside the plot."""
    ax.annotate(
        f"verdict: {S.display_text(verdict, 'verdict')}",
        (1.0, y),
        xycoords=("axes fraction", "data"),
        xytext=(8, 0),
        textcoords="offset points",
        ha="left",
        va="center",
        fontsize="small",
        color="white",
        bbox={"boxstyle": "round,pad=0.3", "fc": "#333333", "ec": "none"},
    )


def _interval_note(first: CubeResult) -> str:
    """What the error bars are (the title's second line)."""
    if first.bootstrap is None:
        return "no bootstrap interval (analysis.bootstrap = 0)"
    conf = first.settings.get("confidence", 0.95)
    return (
        f"{conf:.0%} bootstrap interval over questions ({first.settings.get('bootstrap')} "
        "resamples)"
    )


def _every_judge(judges_of: Mapping[str, list[str]]) -> list[str]:
    """The judges of every system, sorted, each once."""
    return sorted({j for js in judges_of.values() for j in js})


def _headings(by: Mapping[str, CubeResult]) -> dict[str, str]:
    """Each system's group heading: its name and R@k."""
    return {s: f"{S.display_text(s, 'system')} (R@k {r.recall_at_k:.1%})" for s, r in by.items()}


def _one_recall(by: Mapping[str, CubeResult]) -> str:
    """The R@k of the only system, said on the axis (several systems' are in their headings)."""
    if len(by) != 1:
        return ""
    return f" (R@k = {next(iter(by.values())).recall_at_k:.1%})"


@S.quiet
def cube_forest(
    results: Results,
    thresholds: Mapping[str, float] | None = None,
    verdicts: Mapping[str, str] | None = None,
) -> Figure:
    """Each judge's CuBE score and the jury mean with their bootstrap intervals (error bars), for
    every system given, over shaded bands of the verdicts (`thresholds`: lower bound of each
    verdict, 0-100; below them all is `poor`).

    Args:
        results: one system's `CubeResult`, or `{system: result}` to show every system (one
            group of rows per system, headed by its name and R@k).
        thresholds: verdict lower bounds, e.g. `analysis.verdict_thresholds`.
        verdicts: `{system: verdict}` (e.g. the decision's), drawn as a badge right of that
            system's jury row (outside the plot, clear of the points); a system without one gets
            none.
    """
    by = _by_system(results)
    judges_of = {s: sorted(map(str, r.cube_table.index)) for s, r in by.items()}
    every = _every_judge(judges_of)
    labels, palette = {**display_labels(every), "jury": "jury mean"}, judge_palette(every)
    colours = {**palette, "jury": "black"}
    rows = _Rows({s: [*js, "jury"] for s, js in judges_of.items()}, labels, _headings(by))
    fig, ax = S.figure1(7.5, 0.45 * rows.n + 2.2)
    lo_x, hi_x = S.OFF_SCALE  # a runaway score (bounds nearly equal) must not squash the others
    if thresholds:
        _shade_verdicts(ax, thresholds, lo_x, hi_x)
    verdicts = verdicts or {}
    for system, result in by.items():
        for name in [*judges_of[system], "jury"]:
            _forest_row(ax, rows.y[(system, name)], name, result, colours[name], (lo_x, hi_x))
        if verdicts.get(system):
            _verdict_badge(ax, str(verdicts[system]), rows.y[(system, "jury")])
        if len(by) == 1:  # a rule between the judges and the jury mean
            ax.axhline(rows.y[(system, "jury")] + 0.5, color="#bbbbbb", lw=0.8)
    rows.apply(ax)
    first = next(iter(by.values()))
    ax.set(xlim=(lo_x, hi_x), xlabel=f"CuBE score = weighted score x R@k{_one_recall(by)}")
    note = _interval_note(first)
    return S.titled(fig, f"CuBE score of {S.systems_text(by)} per judge and for the jury\n({note})")


def _scored_dimensions(dims: list[str], by: Mapping[str, CubeResult]) -> list[str]:
    """The dimensions some system has a normalised score of."""
    return [d for d in dims if any(d in r.cube_table for r in by.values())]


def _judge_values(table: pd.DataFrame, judge: str, n: int) -> np.ndarray:
    """A judge's row of the table as numbers (NaN for a judge the system's table lacks)."""
    if judge in table.index:
        return table.loc[judge].to_numpy(float)
    return np.full(n, np.nan)


def _off_scale(u: float, lo_y: float, hi_y: float) -> bool:
    return not lo_y <= u <= hi_y and np.isfinite(u)


@dataclass(frozen=True)
class _BarLayout:
    """Where the grouped bars go: x of each column's group, a bar's width, the axis' range."""

    x: np.ndarray
    width: float
    lo_y: float
    hi_y: float


def _judge_bars(
    ax: Axes, k: int, judge: str, v: np.ndarray, layout: _BarLayout, style: tuple[str, str]
) -> list[int]:
    """Judge `k`'s bars (one per column, cut at the axis and hatched when off it); the columns
    cut."""
    colour, label = style
    bars = ax.bar(
        layout.x - 0.4 + layout.width * (k + 0.5),
        np.clip(v, layout.lo_y, layout.hi_y),
        layout.width,
        color=colour,
        label=label,
    )
    cut = []
    for i, (bar, u) in enumerate(zip(bars, v, strict=True)):
        if _off_scale(u, layout.lo_y, layout.hi_y):
            bar.set_hatch("//")
            cut.append(i)
    return cut


def _jury_means(ax: Axes, jury: np.ndarray, layout: _BarLayout, label_y: float) -> None:
    """The jury mean as a black line on each group and its value in the row of labels above."""
    x = layout.x
    ax.hlines(
        np.clip(jury, layout.lo_y, layout.hi_y),
        x - 0.45,
        x + 0.45,
        color="black",
        lw=2.2,
        label="jury mean",
        zorder=3,
    )
    for xi, v in zip(x, jury, strict=True):
        ax.text(
            xi,
            label_y,
            "n/a" if not np.isfinite(v) else f"{v:.1f}",
            ha="center",
            va="bottom",
            fontsize="small",
        )
    ax.text(
        -0.01,
        label_y,
        "jury mean",
        transform=ax.get_yaxis_transform(),
        ha="right",
        va="bottom",
        fontsize="small",
    )


def _bound_lines(ax: Axes) -> None:
    """Dashed lines at the zero (0) and full (100) bounds, named right of the plot."""
    for level, text in ((0, "zero bound"), (100, "full bound")):
        ax.axhline(level, color="#888888", ls="--", lw=0.8)
        ax.text(
            1.0,
            level,
            f" {text}",
            transform=ax.get_yaxis_transform(),
            va="center",
            fontsize="small",
        )


def _bar_axes(ax: Axes, layout: _BarLayout, tick_labels: list[str]) -> None:
    """A panel's ticks (the columns' names; 0-100 by 20) and its range: room below the zero
    bound and above the highest bar for the row of jury-mean labels."""
    ax.set_xticks(layout.x, tick_labels)
    ax.set_yticks(np.arange(0, 101, 20))
    ax.set(ylabel="normalised score (0-100)", ylim=(layout.lo_y - 12, layout.hi_y + 16))


@S.quiet
def normalised_dimensions(results: Results) -> Figure:
    """Grouped bars of each judge's normalised dimension scores and weighted score (0 = zero
    bound, 100 = full bound), with the jury mean marked on each group (a black line) and its
    value in a row of labels above the bars; one panel per system.

    Args:
        results: one system's `CubeResult`, or `{system: result}` to show every system.
    """
    by = _by_system(results)
    dims = _dimensions(by)
    cols = [*_scored_dimensions(dims, by), "weighted_score"]
    judges = _every_judge({s: list(map(str, r.cube_table.index)) for s, r in by.items()})
    labels, palette = display_labels(judges), judge_palette(judges)
    names = {**display_labels(dims, "dimension"), "weighted_score": "weighted (W)"}
    fig, axes = S.figure(len(by), 1, (max(7.0, 1.6 * len(cols) + 1.5), 4.8), sharey=True)
    lo_y, hi_y = S.OFF_SCALE
    layout = _BarLayout(np.arange(len(cols)), 0.8 / len(judges), lo_y, hi_y)
    label_y = hi_y + 4  # the row of jury-mean labels, above the highest bar an axis can show
    off: list[str] = []  # bars cut at the axis (a judge whose bounds nearly coincide), listed below
    for ax, (system, result) in zip(axes[:, 0], by.items(), strict=True):
        table = result.cube_table.reindex(columns=cols)
        for k, judge in enumerate(judges):
            v = _judge_values(table, judge, len(cols))
            cut = _judge_bars(ax, k, judge, v, layout, (palette[judge], labels[judge]))
            who = f"{S.display_text(system, 'system')} {labels[judge]}"
            off += [f"{who} {names[cols[i]]} {v[i]:.0f}" for i in cut]
        jury = result.jury.reindex(columns=cols).loc["mean"].to_numpy(float)  # Table 4's Mean row
        _jury_means(ax, jury, layout, label_y)
        _bound_lines(ax)
        _bar_axes(ax, layout, [names[c] for c in cols])
        if len(by) > 1:
            ax.set_title(S.display_text(system, "system"))
    if off:
        fig.supxlabel(
            "Hatched bars are cut at the axis; their values: " + "; ".join(off),
            fontsize="small",
            wrap=True,
        )
    handles, texts = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, texts, loc="outside right center", frameon=False, fontsize="small")
    lies = "lies" if len(by) == 1 else "lie"
    return S.titled(
        fig,
        f"Normalised score per dimension: where {S.systems_text(by)} {lies} between the bounds, "
        "per judge",
    )
