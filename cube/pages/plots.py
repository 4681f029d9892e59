"""One function per figure of the report (seaborn/matplotlib); each returns a `Figure`.

Figures are built with the object API (`matplotlib.figure.Figure`), so no pyplot state is
touched: nothing is shown, saved or left open by this module. The caller saves a figure
through `run.figure(name, fig)`. Conventions shared by every figure:

- **Colours**: a judge keeps its colour across figures (`judge_palette`: judges, LLMs or offline
  rubric algorithms, in sorted name order on `tab10`, the human consensus black, human raters
  grey); the QA sets are `zero` grey, `rag` blue, `full` green (`SET_COLORS`). A figure says
  "LLM judges" only when it is told they are LLMs, else "judges".
- **Systems**: a figure that compares systems (`bounds`, `cube_forest`, `normalised_dimensions`)
  takes one `CubeResult` or a mapping system -> result and shows every system given; titles
  name the system(s).
- **Fonts and labels**: importing this module registers the CJK font shipped as a Python
  dependency (`cube.pages.fonts`: Noto Sans CJK), so Chinese item, judge, dimension and system
  names are drawn as they are, on a fresh machine too (`CJK_FONT` names the family in use).
  Only a name with a character no registered font can draw (`renderable`) is shown as a
  short stable key (`judge 482`, from a hash of the name; `display_labels` gives
  the mapping) instead of tofu boxes.
- **Scores**: repeated samples of a judgment are averaged first and unscored (NaN) items are
  excluded and counted, as in `cube.method.analysis`. Human ratings are one more judge: pass the
  scores table concatenated with the human ratings; `"human"` is the consensus of the raters
  (`cube.method.agreement.with_human_consensus`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from cube.config.schema import require_columns
from cube.method.agreement import is_human, judge_means, with_human_consensus
from cube.method.analysis import retrieval_outcomes, validate_answers
from cube.pages import style as S
from cube.pages.fonts import CJK_FONT, renderable  # noqa: F401  (CJK_FONT re-exported)
from cube.pages.style import SCORE_RANGE, SET_COLORS, SET_LABELS, display_labels, judge_palette


# ------------------------------------------------------------------------------- score figures
@S.quiet
def score_distributions(scores: pd.DataFrame, set_: str = "rag") -> Figure:
    """Paper Figure 1: per dimension, the share of each integer score 0-10 given by each judge.

    Shares are of that judge's scored answers on the dimension (a mean over samples is rounded
    to the nearest integer); unscored answers are excluded and counted in the legend."""
    require_columns(
        scores, ("judge", "question_id", "system", "set", "dimension", "score"), "scores"
    )
    means = judge_means(scores[scores["set"].astype(str) == set_])
    if means.empty:
        raise ValueError(
            f"scores: no rows of set {set_!r}; sets present: {sorted(scores['set'].unique())}"
        )
    dims, judges = (
        S.dims(scores[scores["set"].astype(str) == set_]),
        sorted(means["judge"].unique()),
    )
    labels, palette, dlabels = (
        display_labels(judges),
        judge_palette(judges),
        display_labels(dims, "dimension"),
    )
    nrows, ncols = S.grid(len(dims))
    fig, axes = S.figure(nrows, ncols, (6.0, 3.4), sharey=True)
    width = 0.84 / len(judges)
    by = {key: g["score"].to_numpy(float) for key, g in means.groupby(["dimension", "judge"])}
    for ax, dim in zip(S.drop_unused(axes, len(dims)), dims, strict=True):
        for k, judge in enumerate(judges):
            v = by.get((dim, judge), np.array([]))
            ok = v[~np.isnan(v)]
            counts = np.bincount(np.clip(np.rint(ok), 0, 10).astype(int), minlength=11)
            share = counts / len(ok) if len(ok) else np.zeros(11)
            ax.bar(
                SCORE_RANGE - 0.42 + width * (k + 0.5),
                share,
                width,
                color=palette[judge],
                label=f"{labels[judge]} (n = {len(ok)}, {len(v) - len(ok)} unscored)",
            )
        ax.set(
            title=dlabels[dim], xticks=SCORE_RANGE, xlabel="score (0-10)", ylabel="share of answers"
        )
        ax.yaxis.set_major_formatter("{x:.0%}")
        ax.legend(fontsize="x-small", frameon=False)
    systems = S.systems_text(
        sorted(scores.loc[scores["set"].astype(str) == set_, "system"].astype(str).unique())
    )
    return S.titled(
        fig,
        f"Figure 1. How often each judge gives each score to {systems} "
        f"({SET_LABELS.get(set_, set_)} answers)",
    )


def _correlation_matrix(
    scores: pd.DataFrame, answers: pd.DataFrame, judge: str, subset: str, top_n: int
) -> pd.DataFrame:
    """Pearson matrix of `rank_score` and the judge's dimension scores on the rag set."""
    return _judge_matrix(_rag_of_system(scores, answers, subset, top_n), scores, judge)


def _rag_of_system(
    scores: pd.DataFrame, answers: pd.DataFrame, subset: str, top_n: int
) -> tuple[pd.Series, pd.DataFrame]:
    """What every judge's correlation matrix reads, made once for all of them: `rank_score` by
    question (of `subset`) and the rag-set scores of the answers' system, every judge's."""
    if subset not in ("all", "retrieved"):
        raise ValueError(f"subset must be 'all' or 'retrieved', got {subset!r}")
    ranks = retrieval_outcomes(
        answers, top_n
    ).ranks  # as cube.method.analysis: failed system calls left out
    if subset == "retrieved":
        ranks = ranks[ranks["retrieved"]]
    rag = scores[scores["set"].astype(str) == "rag"]
    if "system" in answers and "system" in scores:  # the system whose ranks these are
        rag = rag[rag["system"].astype(str).isin(answers["system"].astype(str).unique())]
    ranked = ranks.assign(question_id=ranks["question_id"].astype(str)).set_index("question_id")[
        "rank_score"
    ]
    return ranked, rag


def _judge_matrix(
    system_rag: tuple[pd.Series, pd.DataFrame], scores: pd.DataFrame, judge: str
) -> pd.DataFrame:
    """One judge's Pearson matrix from `_rag_of_system`'s ranks and rag-set scores."""
    ranked, rag = system_rag
    rag = rag[rag["judge"].astype(str) == judge]
    if rag.empty:
        raise ValueError(
            f"scores: no 'rag' scores of judge {judge!r}; judges: "
            f"{sorted(scores['judge'].unique())}"
        )
    wide = judge_means(rag).pivot_table(
        index="question_id", columns="dimension", values="score", dropna=False
    )
    wide = wide[[d for d in S.dims(rag) if d in wide]]
    table = pd.concat([ranked.astype(float), wide], axis=1, join="inner")
    return table.corr(method="pearson")


def _heatmap(
    ax: Axes, matrix: pd.DataFrame, cbar: bool = True, cbar_ax: Axes | None = None
) -> None:
    names = display_labels(matrix.index, "dimension")
    labels = [names[str(c)] for c in matrix.index]
    sns.heatmap(
        matrix.to_numpy(float),
        ax=ax,
        annot=True,
        fmt=".2f",
        vmin=-1,
        vmax=1,
        cmap="vlag",
        square=True,
        cbar=cbar,
        cbar_ax=cbar_ax,
        xticklabels=labels,
        yticklabels=labels,
        annot_kws={"fontsize": "small"},
        cbar_kws={"label": "Pearson r"},
    )
    ax.tick_params(axis="x", labelrotation=45)


_SUBSET_TEXT = {"all": "all questions", "retrieved": "retrieved questions only"}


@S.quiet
def correlation_heatmap(
    scores: pd.DataFrame, answers: pd.DataFrame, judge: str, subset: str = "all", top_n: int = 8
) -> Figure:
    """Paper Figures 2/3: Pearson correlations of `rank_score` and one judge's dimension scores on
    the rag set, over all questions or the retrieved ones (`top_n`: N of `rank_score`)."""
    matrix = _correlation_matrix(scores, answers, str(judge), subset, top_n)
    fig, ax = S.figure1(6.0, 5.6)
    _heatmap(ax, matrix)
    name = display_labels(scores["judge"].astype(str).unique())[str(judge)]
    return S.titled(
        fig, f"Correlation of retrieval rank and {name}'s scores (rag set, {_SUBSET_TEXT[subset]})"
    )


@S.quiet
def correlation_grid(
    scores: pd.DataFrame,
    answers: pd.DataFrame,
    subset: str = "all",
    top_n: int = 8,
    max_matrices: int = 4,
) -> Figure:
    """Paper Figure 4: one correlation heatmap per (non-human) judge side by side; with more than
    `max_matrices` judges, the clearer compact view: the `rank_score` row of each judge's
    matrix as one judges x dimensions heatmap."""
    judges = sorted(j for j in scores["judge"].astype(str).unique() if not is_human(j))
    if not judges:
        raise ValueError("scores: no judge other than human raters to correlate with rank_score")
    labels = display_labels(judges)
    system_rag = _rag_of_system(scores, answers, subset, top_n)  # once for every judge
    matrices = {j: _judge_matrix(system_rag, scores, j) for j in judges}
    title = (
        f"Correlation of retrieval rank and each judge's scores (rag set, {_SUBSET_TEXT[subset]})"
    )
    if len(judges) > max_matrices:
        rows = pd.DataFrame(
            {labels[j]: m.loc["rank_score"].drop("rank_score") for j, m in matrices.items()}
        ).T
        rows = rows.rename(columns=display_labels(rows.columns, "dimension"))
        fig, ax = S.figure1(1.4 * rows.shape[1] + 2.5, 0.45 * len(judges) + 2.1)
        sns.heatmap(
            rows,
            ax=ax,
            annot=True,
            fmt=".2f",
            vmin=-1,
            vmax=1,
            cmap="vlag",
            cbar_kws={"label": "Pearson r with rank_score"},
        )
        ax.set(xlabel="dimension", ylabel="judge")
        return S.titled(fig, title)
    fig = Figure(figsize=(4.6 * len(judges) + 0.8, 4.8), layout="constrained")
    axes = fig.subplots(1, len(judges) + 1, squeeze=False, width_ratios=[1] * len(judges) + [0.06])
    for k, judge in enumerate(judges):
        last = k == len(judges) - 1  # one shared colour bar, in the narrow last column
        _heatmap(axes[0, k], matrices[judge], cbar=last, cbar_ax=axes[0, -1] if last else None)
        axes[0, k].set_title(labels[judge], color=judge_palette(judges)[judge])
    return S.titled(fig, title)


@S.quiet
def rank_distribution(answers: pd.DataFrame, top_n: int | None = None) -> Figure:
    """Histogram of the rank of the gold document in the rag set's retrieved lists
    (0 = not retrieved, its own bar), with R@k in the title (k = `top_n`, default the largest rank).
    Data from `cube.method.analysis.retrieval_outcomes`: failed system calls are left out and
    counted."""
    validate_answers(answers)
    n_top = int(top_n or max(int(answers["rank"].max()), 1))
    outcomes = retrieval_outcomes(
        answers, n_top
    )  # the one R@k source: failed system calls left out, counted
    rank = outcomes.ranks["rank"].to_numpy(int)
    counts = np.bincount(rank, minlength=n_top + 1)
    fig, ax = S.figure1(max(6.0, 0.55 * n_top + 2), 4.6)
    bars = ax.bar(
        np.arange(n_top + 1), counts, color=[SET_COLORS["zero"]] + [SET_COLORS["rag"]] * n_top
    )
    ax.bar_label(bars, fontsize="small")
    ax.set_xticks(np.arange(n_top + 1), ["not\nretrieved", *map(str, range(1, n_top + 1))])
    ax.set(xlabel="rank of the gold document in the retrieved list", ylabel="questions")
    system = S.display_text(str(answers["system"].iloc[0]), "system")
    unknown = f"; {outcomes.n_unknown} left out (system call failed)" if outcomes.n_unknown else ""
    return S.titled(
        fig,
        f"Where {system} retrieved the gold document: R@{n_top} = {outcomes.recall(n_top):.1%} "
        f"of {len(rank)} questions{unknown}",
    )


# ------------------------------------------------------------------------ agreement figures
def _matched(means: pd.DataFrame, judge: str, reference: str) -> pd.DataFrame:
    unit = ["question_id", "system", "set", "dimension"]
    a = means.loc[means["judge"] == judge, [*unit, "score"]]
    b = means.loc[means["judge"] == reference, [*unit, "score"]]
    return a.merge(b, on=unit, suffixes=("", "_ref")).dropna(subset=["score", "score_ref"])


def _compared_judges(means: pd.DataFrame, reference_judge: str) -> list[str]:
    """The judges compared with the reference (not a human rater, not the reference itself)."""
    judges = sorted(j for j in means["judge"].unique() if not is_human(j) and j != reference_judge)
    if not judges:
        raise ValueError(f"scores: no judge to compare with {reference_judge!r}")
    return judges


def _agreement_panel(
    ax: Axes, g: pd.DataFrame, rng: np.random.Generator, colour: Any, title: str
) -> None:
    """One judge's scores against the reference's on one dimension, jittered, with the identity
    line; n and Pearson r in the title."""
    x, y = g["score_ref"].to_numpy(float), g["score"].to_numpy(float)
    ax.scatter(
        x + rng.uniform(-0.2, 0.2, len(x)),
        y + rng.uniform(-0.2, 0.2, len(y)),
        s=14,
        alpha=0.6,
        color=colour,
        edgecolors="none",
    )
    ax.plot([0, 10], [0, 10], color="#888888", ls="--", lw=0.8)
    ax.set_title(f"{title}\nn = {len(g)}, r = {S.r_text(x, y)}", fontsize="small")
    ax.set(
        xlim=(-0.6, 10.6),
        ylim=(-0.6, 10.6),
        xticks=[0, 5, 10],
        yticks=[0, 5, 10],
        aspect="equal",
    )


def _judges_kind(judges: list[str], llm_judges: Iterable[str] | None) -> str:
    """ "LLM judges" when `llm_judges` names every plotted judge, else "Judges"."""
    if llm_judges is not None and set(judges) <= set(map(str, llm_judges)):
        return "LLM judges"
    return "Judges"


@S.quiet
def judge_vs_human(
    scores: pd.DataFrame,
    reference_judge: str = "human",
    dimension: str | None = None,
    llm_judges: Iterable[str] | None = None,
) -> Figure:
    """Paper Figure 5: each judge's score against the reference (default: the human
    consensus) per dimension, small multiples (rows judges, columns dimensions), jittered,
    with the identity line and n and Pearson r in each panel title.

    The title says "LLM judges" only when `llm_judges` names every plotted judge as an LLM;
    otherwise (offline rubric algorithms among them, or unknown) it says "judges"."""
    means = with_human_consensus(judge_means(scores))  # "human" = the raters' consensus
    S.require_judge(means, reference_judge)
    judges = _compared_judges(means, reference_judge)
    dims = [dimension] if dimension else S.dims(means[means["judge"] == reference_judge])
    labels, palette = display_labels(means["judge"].unique()), judge_palette(judges)
    dlabels, ref = (
        display_labels(dims, "dimension"),
        display_labels(means["judge"].unique())[reference_judge],
    )
    # panels a little taller than wide: the square (equal-aspect) axes keep room for their
    # two-line titles under the figure title; at least 6.4 in wide so the figure title fits
    fig = Figure(figsize=(max(3.1 * len(dims), 6.4), 3.5 * len(judges) + 0.9), layout="constrained")
    axes = fig.subplots(len(judges), len(dims), squeeze=False, sharex=True, sharey=True)
    rng = np.random.default_rng(0)  # deterministic jitter: integer scores would overlap
    for i, judge in enumerate(judges):
        m = _matched(means, judge, reference_judge)
        for k, dim in enumerate(dims):
            g = m[m["dimension"] == dim]
            title = f"{labels[judge]} - {dlabels[dim]}"
            _agreement_panel(axes[i, k], g, rng, palette[judge], title)
        axes[i, 0].set_ylabel("judge score")
    for ax in axes[-1, :]:
        ax.set_xlabel(f"{ref} score")
    kind = _judges_kind(judges, llm_judges)
    return S.titled(
        fig, f"Figure 5. {kind} against {ref} scores (jittered; dashed = perfect agreement)"
    )


@S.quiet
def bland_altman(scores: pd.DataFrame, judge: str, reference_judge: str = "human") -> Figure:
    """Bland-Altman plot per dimension: the mean of the judge and reference scores against
    their difference (judge - reference), with the bias and the 95% limits of agreement
    (bias +- 1.96 SD, ddof = 1)."""
    means = with_human_consensus(judge_means(scores))  # "human" = the raters' consensus
    for name in (judge, reference_judge):
        S.require_judge(means, name)
    m = _matched(means, judge, reference_judge)
    dims = S.dims(means[means["judge"] == judge])
    every = means["judge"].unique()
    name, ref = display_labels(every)[judge], display_labels(every)[reference_judge]
    nrows, ncols = S.grid(len(dims))
    fig, axes = S.figure(nrows, ncols, (4.2, 3.4), sharey=True)
    dlabels, colour = display_labels(dims, "dimension"), judge_palette(every)[judge]
    for ax, dim in zip(S.drop_unused(axes, len(dims)), dims, strict=True):
        g = m[m["dimension"] == dim]
        mean = (g["score"] + g["score_ref"]).to_numpy(float) / 2
        diff = (g["score"] - g["score_ref"]).to_numpy(float)
        ax.scatter(mean, diff, s=14, alpha=0.6, color=colour, edgecolors="none")
        bias = float(diff.mean()) if len(diff) else np.nan
        sd = float(diff.std(ddof=1)) if len(diff) > 1 else np.nan
        ax.axhline(0, color="#888888", lw=0.8)
        for level, style in ((bias, "-"), (bias - 1.96 * sd, "--"), (bias + 1.96 * sd, "--")):
            if np.isfinite(level):  # bias and limits of agreement, when defined
                ax.axhline(level, color="black", ls=style, lw=1.0)
        loa = (
            f"LoA [{bias - 1.96 * sd:+.2f}, {bias + 1.96 * sd:+.2f}]"
            if np.isfinite(sd)
            else "LoA n/a"
        )
        ax.set_title(f"{dlabels[dim]} (n = {len(g)})\nbias {bias:+.2f}, {loa}", fontsize="small")
        ax.set(xlim=(-0.3, 10.3), xlabel="mean of the two scores", ylabel=f"{name} - {ref}")
    return S.titled(
        fig, f"Bland-Altman: {name} minus {ref} (solid = bias, dashed = 95% limits of agreement)"
    )


@S.quiet
def agreement_heatmap(matrix: pd.DataFrame, title: str, diverging: bool | None = None) -> Figure:
    """The square judge x judge matrix of `cube.method.agreement.pairwise_agreement`, annotated.

    `diverging` (default: guessed) uses a -1..1 diverging scale for correlations and kappa;
    otherwise a sequential scale from 0 (for the mean absolute difference)."""
    values = matrix.to_numpy(float)
    if diverging is None:  # a zero diagonal is the `mae` matrix; correlations have 1 there
        diag = np.diag(values) if values.shape[0] == values.shape[1] else np.array([])
        diverging = not (len(diag) and np.nanmax(np.abs(diag), initial=0) == 0)
    labels = display_labels([*matrix.index, *matrix.columns])
    n = max(matrix.shape)
    fig, ax = S.figure1(0.9 * n + 2.5, 0.8 * n + 2.4)
    kw: dict[str, Any] = (
        {"vmin": -1, "vmax": 1, "cmap": "vlag"} if diverging else {"vmin": 0, "cmap": "rocket_r"}
    )
    sns.heatmap(
        values,
        ax=ax,
        annot=True,
        fmt=".2f",
        square=True,
        **kw,
        xticklabels=[labels[str(c)] for c in matrix.columns],
        yticklabels=[labels[str(i)] for i in matrix.index],
    )
    ax.tick_params(axis="x", labelrotation=45)
    return S.titled(fig, S.display_text(title, "Agreement between judges"))


# ------------------------------------------------------------------------------- lexical figure
@S.quiet
def lexical_vs_judges(
    lexical: pd.DataFrame,
    scores: pd.DataFrame,
    dimension: str = "completeness",
    metrics: tuple[str, ...] = ("bleu", "rougeL"),
) -> Figure:
    """Paper 5.7: each lexical metric (rows) against each judge's score (columns; the human
    consensus first) on one dimension, points coloured by QA set, Pearson r in each title."""
    # imported here: `cube.method.lexical` brings rouge-score, NLTK and scikit-learn (~75 MB,
    # ~1.5 s), which every stage importing these figures paid, for this one figure's labels
    from cube.method.lexical import METRIC_LABELS

    require_columns(lexical, ("question_id", "system", "set", *metrics), "lexical")
    # "human" = the raters' consensus; the one dimension's rows only (a unit's mean is its own)
    means = with_human_consensus(judge_means(scores[scores["dimension"] == dimension]))
    means = means[~means["judge"].str.startswith("human:")]
    lex = lexical.astype({"question_id": str, "system": str, "set": str})
    merged = means.merge(
        lex[["question_id", "system", "set", *metrics]], on=["question_id", "system", "set"]
    )
    if merged.empty:
        raise ValueError(
            f"lexical and scores share no (question_id, system, set) scored on {dimension!r}"
        )
    judges = sorted(merged["judge"].unique(), key=lambda j: (j != "human", j))
    labels, dim = display_labels(judges), display_labels([dimension], "dimension")[dimension]
    fig, axes = S.figure(len(metrics), len(judges), (3.2, 2.9), sharey=True)
    rng = np.random.default_rng(0)
    for i, metric in enumerate(metrics):
        for k, judge in enumerate(judges):
            ax = axes[i, k]
            g = merged[(merged["judge"] == judge)].dropna(subset=["score", metric])
            for set_, colour in SET_COLORS.items():
                s = g[g["set"] == set_]
                ax.scatter(
                    s[metric],
                    s["score"] + rng.uniform(-0.2, 0.2, len(s)),
                    s=12,
                    alpha=0.6,
                    color=colour,
                    edgecolors="none",
                    label=SET_LABELS[set_],
                )
            r = S.r_text(g[metric].to_numpy(float), g["score"].to_numpy(float))
            ax.set_title(f"{labels[judge]}: r = {r} (n = {len(g)})", fontsize="small")
            ax.set(
                xlim=(-0.03, 1.03),
                ylim=(-0.6, 10.6),
                xlabel=f"{METRIC_LABELS.get(metric, metric)} (0-1)",
            )
            if k == 0:
                ax.set_ylabel(f"{dim} score (0-10)")
    S.set_legend(fig)
    return S.titled(
        fig, f"Does lexical overlap with the gold document track the judges? ({dim} scores)"
    )


# ------------------------------------------------------------------------------- retrieval by item
CAUSE_COLORS: dict[str, str] = {"region": "#d62728", "variant": "#ff7f0e", "duplicate": "#9467bd"}


@S.quiet
def confused_items(by_item: pd.DataFrame, system: str) -> Figure:
    """The items whose questions most often retrieved a near-duplicate first (by real item name),
    stacked by cause: another region's copy, another variant, a duplicate document.

    Args:
        by_item: `cube.diagnose.near_duplicates.confusion_by_item` (item, questions, region,
        variant, duplicate). system: the system's name, for the title.
    """
    require_columns(
        by_item, ("item", "questions", "region", "variant", "duplicate"), "confusion by item"
    )
    name = S.display_text(str(system), "system")
    fig, ax = S.figure1(9.0, max(2.6, 0.42 * len(by_item) + 1.6))
    if by_item.empty:
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            "no question retrieved a near-duplicate of its gold document first",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        return S.titled(fig, f"Near-duplicate confusion of {name}: none")
    rows = by_item.iloc[::-1]  # the most confused item on top
    labels = [S.display_text(str(i), f"item {k + 1}") for k, i in enumerate(rows["item"])]
    left = np.zeros(len(rows))
    for cause, colour in CAUSE_COLORS.items():
        values = rows[cause].to_numpy(float)
        if values.any():
            ax.barh(labels, values, left=left, color=colour, label=f"wrong {cause}")
        left += values
    for y, (total, n) in enumerate(zip(left, rows["questions"], strict=True)):
        ax.annotate(
            f"{int(total)}/{int(n)}",
            (total, y),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    ax.set(
        xlabel="questions whose first retrieved document is a near-duplicate (of the item's "
        "questions)"
    )
    ax.set_xlim(0, max(float(left.max()), 1.0) * 1.15)
    ax.legend(loc="lower right", frameon=False, fontsize="small")
    return S.titled(fig, f"Items most often confused with a near-duplicate by {name}")
