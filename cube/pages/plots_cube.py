"""The CuBE figures of the report: bounds, CuBE scores over the verdict bands, normalised
dimensions.

Each takes one system's `CubeResult` or a mapping system -> result and shows every system given
(the report compares systems). Reached as `cube.pages.plots.bounds` etc.; the conventions (colours,
fonts, labels) are those of `cube.pages.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping

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


@S.quiet
def bounds(results: Results) -> Figure:
    """Per dimension (panels) and, for each system, judge (rows): the zero and full trimmed means
    as the ends of a bar and the rag trimmed mean as a point on it, on the raw 0-10 scale,
    annotated with the normalised score N_d (0 = zero bound, 100 = full bound).

    Args:
        results: one system's `CubeResult`, or `{system: result}` to show every system.
    """
    by = _by_system(results)
    dims = S.dims(pd.concat([r.trimmed_means for r in by.values()], ignore_index=True))
    judges_of = {s: sorted(r.trimmed_means["judge"].astype(str).unique()) for s, r in by.items()}
    labels = display_labels([j for js in judges_of.values() for j in js])
    dlabels = display_labels(dims, "dimension")
    rows = _Rows(judges_of, labels)
    nrows, ncols = S.grid(len(dims))
    fig, axes = S.figure(nrows, ncols, (5.0, 0.55 * rows.n + 1.4), sharex=True)
    for ax, dim in zip(S.drop_unused(axes, len(dims)), dims, strict=True):
        for system, result in by.items():
            tm = result.trimmed_means.pivot_table(
                index=["dimension", "judge"], columns="set", values="trimmed_mean"
            )
            for judge in judges_of[system]:
                yi = rows.y[(system, judge)]
                t = tm.loc[(dim, judge)] if (dim, judge) in tm.index else pd.Series(dtype=float)
                z, r, f = (float(t.get(s, np.nan)) for s in ("zero", "rag", "full"))
                ax.plot([z, f], [yi, yi], color="#d9d9d9", lw=7, solid_capstyle="round", zorder=1)
                for s, v in (("zero", z), ("full", f), ("rag", r)):
                    ax.scatter(
                        [v],
                        [yi],
                        s=60 if s == "rag" else 45,
                        color=SET_COLORS[s],
                        zorder=3,
                        marker="o" if s == "rag" else "s",
                    )
                n_d = result.cube_table.at[judge, dim] if dim in result.cube_table else np.nan
                if np.isfinite(r):
                    ax.annotate(
                        "N = n/a" if not np.isfinite(n_d) else f"N = {n_d:.0f}",
                        (r, yi),
                        xytext=(0, 7),
                        textcoords="offset points",
                        ha="center",
                        fontsize="x-small",
                    )
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
    every = sorted({j for js in judges_of.values() for j in js})
    labels, palette = {**display_labels(every), "jury": "jury mean"}, judge_palette(every)
    headings = {
        s: f"{S.display_text(s, 'system')} (R@k {r.recall_at_k:.1%})" for s, r in by.items()
    }
    rows = _Rows({s: [*js, "jury"] for s, js in judges_of.items()}, labels, headings)
    fig, ax = S.figure1(7.5, 0.45 * rows.n + 2.2)
    lo_x, hi_x = S.OFF_SCALE  # a runaway score (bounds nearly equal) must not squash the others
    if thresholds:
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
    for system, result in by.items():
        for name in [*judges_of[system], "jury"]:
            yi = rows.y[(system, name)]
            v = (
                result.jury_cube()
                if name == "jury"
                else float(result.cube_table.at[name, "cube_score"])
            )
            colour = "black" if name == "jury" else palette[name]
            # a percentile interval need not contain the estimate, so it is drawn as a capped range
            ax.plot(result.interval(name), [yi, yi], color=colour, lw=1.6, marker="|", ms=12)
            shown = float(np.clip(v, lo_x, hi_x))
            marker = ("D" if name == "jury" else "o") if shown == v else (">" if v > hi_x else "<")
            ax.plot([shown], [yi], marker, color=colour, ms=8)
            if np.isfinite(v):
                ax.annotate(
                    f"{v:.1f}" + ("" if shown == v else " (off scale)"),
                    (shown, yi),
                    xytext=(0, 8),
                    textcoords="offset points",
                    ha="center" if shown == v else "right",
                    fontsize="small",
                )
        if verdicts and verdicts.get(system):
            ax.annotate(
                f"verdict: {S.display_text(str(verdicts[system]), 'verdict')}",
                (1.0, rows.y[(system, "jury")]),
                xycoords=("axes fraction", "data"),
                xytext=(8, 0),
                textcoords="offset points",
                ha="left",
                va="center",
                fontsize="small",
                color="white",
                bbox={"boxstyle": "round,pad=0.3", "fc": "#333333", "ec": "none"},
            )
        if len(by) == 1:  # a rule between the judges and the jury mean
            ax.axhline(rows.y[(system, "jury")] + 0.5, color="#bbbbbb", lw=0.8)
    rows.apply(ax)
    first = next(iter(by.values()))
    recall = f" (R@k = {first.recall_at_k:.1%})" if len(by) == 1 else ""
    ax.set(xlim=(lo_x, hi_x), xlabel=f"CuBE score = weighted score x R@k{recall}")
    conf = first.settings.get("confidence", 0.95)
    note = (
        f"{conf:.0%} bootstrap interval over questions ({first.settings.get('bootstrap')} "
        "resamples)"
        if first.bootstrap is not None
        else "no bootstrap interval (analysis.bootstrap = 0)"
    )
    return S.titled(fig, f"CuBE score of {S.systems_text(by)} per judge and for the jury\n({note})")


@S.quiet
def normalised_dimensions(results: Results) -> Figure:
    """Grouped bars of each judge's normalised dimension scores and weighted score (0 = zero
    bound, 100 = full bound), with the jury mean marked on each group (a black line) and its
    value in a row of labels above the bars; one panel per system.

    Args:
        results: one system's `CubeResult`, or `{system: result}` to show every system.
    """
    by = _by_system(results)
    dims = S.dims(pd.concat([r.trimmed_means for r in by.values()], ignore_index=True))
    cols = [*[d for d in dims if any(d in r.cube_table for r in by.values())], "weighted_score"]
    judges = sorted({str(j) for r in by.values() for j in r.cube_table.index})
    labels, palette = display_labels(judges), judge_palette(judges)
    names = {**display_labels(dims, "dimension"), "weighted_score": "weighted (W)"}
    fig, axes = S.figure(len(by), 1, (max(7.0, 1.6 * len(cols) + 1.5), 4.8), sharey=True)
    x, width = np.arange(len(cols)), 0.8 / len(judges)
    lo_y, hi_y = S.OFF_SCALE
    label_y = hi_y + 4  # the row of jury-mean labels, above the highest bar an axis can show
    off: list[str] = []  # bars cut at the axis (a judge whose bounds nearly coincide), listed below
    for ax, (system, result) in zip(axes[:, 0], by.items(), strict=True):
        table = result.cube_table.reindex(columns=cols)
        for k, judge in enumerate(judges):
            v = (
                table.loc[judge].to_numpy(float)
                if judge in table.index
                else np.full(len(cols), np.nan)
            )
            bars = ax.bar(
                x - 0.4 + width * (k + 0.5),
                np.clip(v, lo_y, hi_y),
                width,
                color=palette[judge],
                label=labels[judge],
            )
            for bar, col, u in zip(bars, cols, v, strict=True):
                if not lo_y <= u <= hi_y and np.isfinite(u):
                    bar.set_hatch("//")
                    off.append(
                        f"{S.display_text(system, 'system')} {labels[judge]} {names[col]} {u:.0f}"
                    )
        jury = result.jury.reindex(columns=cols).loc["mean"].to_numpy(float)  # Table 4's Mean row
        ax.hlines(
            np.clip(jury, lo_y, hi_y),
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
        ax.set_xticks(x, [names[c] for c in cols])
        ax.set_yticks(np.arange(0, 101, 20))
        ax.set(ylabel="normalised score (0-100)", ylim=(lo_y - 12, hi_y + 16))
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
