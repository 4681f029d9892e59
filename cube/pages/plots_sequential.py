"""The figure of a sequential run: each system's confidence sequence against questions judged.

`sequence_path` draws, per system (one panel each), the jury CuBE's path as the driver recorded it
(`cube.pages.sequential.SequentialPage`): the estimate at each look, the confidence sequence's
bounds as a band (built to hold at every look), the fixed-n interval at each look as dashed lines
(valid only at one number of questions fixed in advance: drawn for comparison), the verdict bands as
shaded horizontal regions named at the right, and a vertical line where the run stopped, with the
reason in the title. Only the jury CuBE is drawn, the quantity the run stops on: each judge's CuBE
and R@k, which the record also holds, are left out (R@k is on another scale and stops nothing).

Every artist a reader (or a test) looks for carries a `gid`: `verdict-band:<name>`, `sequence`,
`estimate`, `fixed-n`, `stop`. Names reach the figure through `cube.pages.style.display_text`.
"""

from __future__ import annotations

import textwrap

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from cube.pages import style as S
from cube.pages.sequential import SequentialPage, questions_phrase
from cube.pages.style import SET_COLORS

JURY = "CuBE"  # the path's quantity the run stops on
SEQUENCE_COLOUR = SET_COLORS["rag"]
FIXED_N_COLOUR = "#d62728"
FIXED_N_LABEL = "fixed-n interval (valid only at one n fixed in advance)"
SEQUENCE_LABEL = "confidence sequence (anytime-valid, asymptotic)"


def _bands(thresholds: dict[str, float], low: float, high: float) -> list[tuple[str, float, float]]:
    """(verdict, low, high) bands on the CuBE axis, `poor` below every threshold (the verdict's
    names and band rule, `cube.diagnose.verdict.verdict`)."""
    ordered = sorted(((str(k), float(v)) for k, v in thresholds.items()), key=lambda kv: kv[1])
    edges = [low, *(t for _, t in ordered), high]
    names = ["poor", *(n for n, _ in ordered)]
    return [(n, a, b) for n, a, b in zip(names, edges[:-1], edges[1:], strict=True) if b > a]


def _y_range(values: np.ndarray) -> tuple[float, float]:
    """0-100, widened to the drawn bounds (an unclipped bound, or the fixed-n interval, may pass an
    end), never beyond the off-scale range."""
    finite = values[np.isfinite(values)]
    low = min(0.0, float(finite.min())) if finite.size else 0.0
    high = max(100.0, float(finite.max())) if finite.size else 100.0
    return max(low, S.OFF_SCALE[0]), min(high, S.OFF_SCALE[1])


def _draw_bands(ax: Axes, thresholds: dict[str, float], low: float, high: float) -> None:
    bands = _bands(thresholds, low, high)
    shades = sns.light_palette("seagreen", len(bands) + 1)
    for k, (name, a, b) in enumerate(bands):
        ax.axhspan(a, b, color=shades[k], alpha=0.5, zorder=0, lw=0, gid=f"verdict-band:{name}")
        ax.text(  # right of the panel, clear of the path
            1.01,
            (a + b) / 2,
            S.display_text(name, f"verdict {k + 1}"),
            ha="left",
            va="center",
            transform=ax.get_yaxis_transform(),
            fontsize="small",
            color="#33503a",
            gid=f"verdict-label:{name}",
            parse_math=False,
        )


def _draw_path(ax: Axes, record: SequentialPage, system: str) -> None:
    """One system's sequence band, estimate, fixed-n interval and the stop line."""
    look = record.path_of(system, JURY)
    q = look["questions"].to_numpy(float)
    ax.fill_between(
        q,
        look["lower"],
        look["upper"],
        color=SEQUENCE_COLOUR,
        alpha=0.25,
        lw=0,
        zorder=2,
        gid="sequence",
    )
    ax.plot(
        q, look["estimate"], "o-", color=SEQUENCE_COLOUR, ms=3.5, lw=1.4, zorder=4, gid="estimate"
    )
    for side in ("fixed_lower", "fixed_upper"):
        ax.plot(q, look[side], ls="--", color=FIXED_N_COLOUR, lw=1.1, zorder=3, gid="fixed-n")
    used = record.questions_used
    ax.axvline(used, color="black", lw=1.2, zorder=5, gid="stop")
    ax.annotate(
        f"stopped at {used:,}" if record.stopped_early else f"set ended at {used:,}",
        (used, 0.0),
        xycoords=("data", "axes fraction"),
        xytext=(-4, 4),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize="small",
        gid="stop-label",
    )


def _legend(fig: Figure) -> None:
    handles = [
        Line2D([], [], marker="o", ms=3.5, color=SEQUENCE_COLOUR, label="estimate (jury CuBE)"),
        Patch(color=SEQUENCE_COLOUR, alpha=0.25, label=SEQUENCE_LABEL),
        Line2D([], [], ls="--", color=FIXED_N_COLOUR, label=FIXED_N_LABEL),
        Line2D([], [], color="black", label="where the run stopped"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)


def _systems(record: SequentialPage) -> list[str]:
    """The systems to draw: those of the final looks, else those of the path."""
    systems = [str(s) for s in record.final] or sorted({str(p["system"]) for p in record.path})
    if not systems:
        raise ValueError("results.json sequential: no system in final or path to plot")
    return systems


_DRAWN = ("lower", "upper", "estimate", "fixed_lower", "fixed_upper")


def _jury_values(record: SequentialPage) -> np.ndarray:
    """Every value drawn of the jury's path (NaN where one is missing): what the y range holds."""
    drawn = [p for p in record.path if p["quantity"] == JURY]
    return np.array([_float_or_nan(p.get(k)) for p in drawn for k in _DRAWN])


def _panel(
    ax: Axes, k: int, system: str, record: SequentialPage, y_range: tuple[float, float]
) -> None:
    """System `k`'s panel: the verdict bands, its path, whether it settled."""
    low, high = y_range
    _draw_bands(ax, record.thresholds, low, high)
    _draw_path(ax, record, system)
    settled = (record.final.get(system) or {}).get("settled")
    state = "settled" if settled else "not settled"
    # a name is text, never mathtext (a `$` in it would be read as a formula)
    ax.set_title(f"{S.display_text(system, f'system {k + 1}')}: {state}", parse_math=False)
    ax.set(ylim=(low, high), xlim=(0, max(record.questions_available, 1) * 1.02))
    ax.set_xlabel("questions judged")
    if ax.get_subplotspec().is_first_col():
        ax.set_ylabel("jury CuBE score")


@S.quiet
def sequence_path(record: SequentialPage) -> Figure:
    """Per system (panels), the jury CuBE's confidence sequence against questions judged, the
    fixed-n interval at each look, the verdict bands and the stop (see the module docstring).

    Args:
        record: the run's `results.json` `sequential` (`cube.pages.sequential.read_record`).
    """
    systems = _systems(record)
    nrows, ncols = S.grid(len(systems), max_cols=2)
    fig, axes = S.figure(nrows, ncols, (5.2, 3.4), sharey=True)
    y_range = _y_range(_jury_values(record))
    for k, (ax, system) in enumerate(zip(S.drop_unused(axes, len(systems)), systems, strict=True)):
        _panel(ax, k, system, record, y_range)
    _legend(fig)
    reason = S.display_text(questions_phrase(record), "the run's stop")
    title = "Sequential evaluation: the jury CuBE's confidence sequence, "
    title += f"{100 * (1 - float(record.alpha)):g} %\n" + "\n".join(textwrap.wrap(reason, 90))
    fig.suptitle(title, parse_math=False)
    return fig


def _float_or_nan(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
