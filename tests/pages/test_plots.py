"""Every report figure on small generated tables: shape, content, single judge, NaN, non-ASCII."""

from __future__ import annotations

import io
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from cube.config.sections import AnalysisParams  # noqa: E402
from cube.method.agreement import pairwise_agreement  # noqa: E402
from cube.method.evaluation import evaluate  # noqa: E402
from cube.method.lexical import lexical_scores  # noqa: E402
from cube.pages import plots, plots_cube, style  # noqa: E402
from tests.factories import DIMS, make_tables  # noqa: E402

CJK_JUDGE = "评委甲"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _human(scores: pd.DataFrame, n: int = 20, seed: int = 1) -> pd.DataFrame:
    """Two human raters on the first n rag questions: judge-a's score +- 1, clipped to 0-10."""
    rng = np.random.default_rng(seed)
    base = scores[(scores["judge"] == scores["judge"].iloc[0]) & (scores["set"] == "rag")]
    base = base[base["question_id"].isin(sorted(base["question_id"].unique())[:n])]
    raters = [
        base.assign(
            judge=f"human:{r}",
            score=np.clip(base["score"] + rng.integers(-1, 2, len(base)), 0, 10).astype(float),
        )
        for r in ("r1", "r2")
    ]
    return pd.concat(raters, ignore_index=True)


def _lexical(answers: pd.DataFrame) -> pd.DataFrame:
    corpus = pd.DataFrame({"doc_id": answers["doc_id"].unique()})
    corpus["text"] = (
        "rag answer to " + corpus["doc_id"].str.removeprefix("gold-") + " with the gold facts"
    )
    return lexical_scores(answers, corpus, tokenizer="13a")


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _render(fig: Figure) -> bytes:
    """Draw the figure for real (a bare `Figure` has no canvas of its own: `savefig` uses Agg)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    return buf.getvalue()


def _has_data(ax) -> bool:
    return bool(ax.patches or ax.collections or ax.lines or ax.images)


def _all_figures(answers: pd.DataFrame, scores: pd.DataFrame) -> dict[str, tuple[Figure, int]]:
    """Every figure of the module with its expected number of axes."""
    judges = sorted(scores["judge"].unique())
    result = evaluate(answers, scores, AnalysisParams(bootstrap=30))
    both = pd.concat([scores, _human(scores)], ignore_index=True)
    nd = len(DIMS)
    return {
        "score_distributions": (plots.score_distributions(scores), nd),
        "correlation_heatmap": (plots.correlation_heatmap(scores, answers, judges[0]), 2),
        "correlation_retrieved": (
            plots.correlation_heatmap(scores, answers, judges[0], "retrieved"),
            2,
        ),
        "correlation_grid": (plots.correlation_grid(scores, answers), len(judges) + 1),
        "rank_distribution": (plots.rank_distribution(answers), 1),
        "bounds": (plots_cube.bounds(result), nd),
        "cube_forest": (
            plots_cube.cube_forest(result, {"excellent": 80, "good": 60, "fair": 40}),
            1,
        ),
        "normalised_dimensions": (plots_cube.normalised_dimensions(result), 1),
        "judge_vs_human": (plots.judge_vs_human(both), len(judges) * nd),
        "bland_altman": (plots.bland_altman(both, judges[0]), nd),
        "agreement_heatmap": (plots.agreement_heatmap(pairwise_agreement(both), "Spearman rho"), 2),
        "lexical_vs_judges": (
            plots.lexical_vs_judges(_lexical(answers), both),
            2 * (len(judges) + 1),
        ),
    }


@pytest.mark.parametrize(
    "judges", [("judge-a", "judge-b"), ("solo",)], ids=["two_judges", "single_judge"]
)
def test_every_figure_has_its_axes_and_data(judges):
    answers, scores = make_tables(n_questions=40, judges=judges)
    for name, (fig, n_axes) in _all_figures(answers, scores).items():
        assert isinstance(fig, Figure), name
        assert len(fig.axes) == n_axes, name
        assert any(_has_data(ax) for ax in fig.axes), name
        assert fig.get_suptitle(), name
        assert _render(fig).startswith(b"\x89PNG"), name  # the layout and every artist render


def test_score_distribution_shares_and_unscored_count():
    answers, scores = make_tables(n_questions=30)
    scores.loc[
        (scores["judge"] == "judge-a")
        & (scores["dimension"] == "relevance")
        & (scores["set"] == "rag")
        & scores["question_id"].isin(["q000", "q001", "q002"]),
        "score",
    ] = np.nan
    fig = plots.score_distributions(scores)
    relevance = next(ax for ax in fig.axes if ax.get_title() == "relevance")
    labels = [t.get_text() for t in relevance.get_legend().get_texts()]
    assert labels == ["judge-a (n = 27, 3 unscored)", "judge-b (n = 30, 0 unscored)"]
    heights = np.array([p.get_height() for p in relevance.patches])
    assert heights[:11].sum() == pytest.approx(1.0) and heights[11:].sum() == pytest.approx(1.0)
    # share of each integer score of judge-a equals the scored answers' frequencies
    v = scores[
        (scores["judge"] == "judge-a")
        & (scores["dimension"] == "relevance")
        & (scores["set"] == "rag")
    ]
    expected = np.bincount(v["score"].dropna().astype(int), minlength=11) / 27
    assert heights[:11] == pytest.approx(expected)


def test_correlation_heatmap_values_match_pearson_and_handle_nan():
    answers, scores = make_tables(n_questions=50)
    scores.loc[scores.index[::7], "score"] = np.nan
    fig = plots.correlation_heatmap(scores, answers, "judge-b")
    mesh = fig.axes[0].collections[0]
    values = np.asarray(mesh.get_array()).reshape(len(DIMS) + 1, len(DIMS) + 1)
    assert np.diag(values) == pytest.approx(1.0)
    rag = scores[
        (scores["judge"] == "judge-b")
        & (scores["set"] == "rag")
        & (scores["dimension"] == "relevance")
    ]
    rank = answers[answers["set"] == "rag"].set_index("question_id")["rank"]
    rs = np.where(rank > 0, 10 - rank, 0)
    both = pd.DataFrame(
        {"rs": pd.Series(rs, index=rank.index), "s": rag.set_index("question_id")["score"]}
    )
    assert values[0, 1] == pytest.approx(both.corr().iloc[0, 1])
    assert "all questions" in fig.get_suptitle()


def test_correlation_grid_many_judges_compact_view():
    judges = tuple(f"j{i}" for i in range(6))
    answers, scores = make_tables(n_questions=30, judges=judges)
    fig = plots.correlation_grid(scores, answers, subset="retrieved")
    assert len(fig.axes) == 2  # one judges x dimensions heatmap and its colorbar
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(judges)


def test_rank_distribution_counts_and_recall_in_title():
    answers, _ = make_tables(n_questions=40)
    fig = plots.rank_distribution(answers, top_n=8)
    rank = answers.loc[answers["set"] == "rag", "rank"]
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == list(np.bincount(rank, minlength=9))
    assert f"R@8 = {(rank > 0).mean():.1%}" in fig.get_suptitle()
    assert fig.axes[0].get_xticklabels()[0].get_text() == "not\nretrieved"


def test_bounds_and_forest_show_the_result_values():
    answers, scores = make_tables(n_questions=40)
    result = evaluate(answers, scores, AnalysisParams(bootstrap=30))
    texts = _texts(plots_cube.bounds(result))
    n_rel = result.cube_table.at["judge-a", "relevance"]
    assert f"N = {n_rel:.0f}" in texts
    forest = plots_cube.cube_forest(result, {"good": 60, "fair": 40})
    assert {"good", "fair", "jury mean", f"{result.jury_cube():.1f}"} <= set(_texts(forest))
    no_boot = evaluate(answers, scores, AnalysisParams(bootstrap=0))
    assert "no bootstrap interval" in plots_cube.cube_forest(no_boot).get_suptitle()


def test_human_figures_report_n_and_r():
    answers, scores = make_tables(n_questions=40)
    both = pd.concat([scores, _human(scores, n=15)], ignore_index=True)
    fig = plots.judge_vs_human(both, dimension="completeness")
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title().startswith("judge-a - completeness\nn = 15, r = ")
    with pytest.raises(ValueError, match="no judge 'nobody'"):
        plots.bland_altman(both, "nobody")


def test_nan_scores_do_not_break_any_figure():
    answers, scores = make_tables(n_questions=40)
    scores.loc[scores.sample(frac=0.15, random_state=0).index, "score"] = np.nan
    for name, (fig, n_axes) in _all_figures(answers, scores).items():
        assert len(fig.axes) == n_axes, name
        assert all(_has_data(ax) for ax in fig.axes if ax.get_label() != "<colorbar>"), name


CJK_SYSTEM = "绿园区政务问答"


def _glyph_warnings(fig: Figure) -> list[str]:
    """The "Glyph ... missing from font(s)" warnings of drawing `fig` to PNG."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _render(fig)
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def test_the_packaged_cjk_font_is_registered():
    from cube.pages import fonts

    assert (
        plots.CJK_FONT == "Noto Sans CJK SC"
    )  # from the noto-cjk-sans-otc dependency, not the system
    assert matplotlib.rcParams["font.family"][-1] == plots.CJK_FONT
    assert plots.renderable("残疾人证换领（残损换新（户籍地））") and plots.renderable("judge-b")
    assert not plots.renderable("\U00013000")  # an Egyptian hieroglyph: no registered font has it
    assert fonts.CJK_FONT == plots.CJK_FONT


@pytest.mark.filterwarnings("ignore::cube.method.analysis.CubeWarning")
def test_chinese_judge_and_system_names_are_drawn_as_they_are():
    answers, scores = make_tables(n_questions=30, judges=(CJK_JUDGE, "judge-b"))
    answers["system"] = CJK_SYSTEM
    scores["system"] = CJK_SYSTEM
    figures = _all_figures(answers, scores)
    for name, (fig, _) in figures.items():
        assert _glyph_warnings(fig) == [], name
    assert plots.display_labels([CJK_JUDGE]) == {CJK_JUDGE: CJK_JUDGE}  # never a hash key
    assert f"{CJK_JUDGE} (n = 30, 0 unscored)" in _texts(figures["score_distributions"][0])
    assert any(t.startswith(f"{CJK_JUDGE} - ") for t in _texts(figures["judge_vs_human"][0]))
    assert any(CJK_SYSTEM in t for t in _texts(figures["rank_distribution"][0]))
    assert not any(
        t.startswith("judge ") and t[6:9].isdigit() for f, _ in figures.values() for t in _texts(f)
    )


def test_a_figure_with_chinese_labels_saves_without_missing_glyphs(tmp_path):
    fig = Figure()
    ax = fig.subplots()
    ax.barh(["残疾人证换领（残损换新（户籍地））", "明川省青石市的食品经营许可"], [3, 5])
    ax.set(title="近重复混淆：绿园区", xlabel="问题数")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(tmp_path / "zh.png")
    assert not [w for w in caught if "missing from font" in str(w.message)]
    assert (tmp_path / "zh.png").stat().st_size > 0


def test_render_check_detects_a_missing_glyph():
    """Guards the tests above: drawing a character no registered font has does warn."""
    fig = Figure()
    fig.subplots().set_title("\U00013000")
    assert _glyph_warnings(fig)


def test_a_name_no_font_can_draw_gets_a_stable_key():
    name = "评委\U00013000"
    key = plots.display_labels([name])[name]
    assert (
        key.startswith("judge ")
        and key.isascii()
        and key == plots.display_labels([name, "x"])[name]
    )
    rater = plots.display_labels(["human:\U00013001"])["human:\U00013001"]
    assert rater.startswith("human:rater ")


def test_bland_altman_bias_and_limits_in_titles():
    answers, scores = make_tables(n_questions=30)
    both = pd.concat([scores, _human(scores, n=12)], ignore_index=True)
    fig = plots.bland_altman(both, "judge-b")
    judge = scores[
        (scores["judge"] == "judge-b")
        & (scores["set"] == "rag")
        & (scores["dimension"] == "quality")
    ]
    human = _human(scores, n=12)
    human = (
        human[human["dimension"] == "quality"].groupby("question_id")["score"].mean()
    )  # the consensus
    diff = judge.set_index("question_id")["score"].reindex(human.index) - human
    title = next(ax.get_title() for ax in fig.axes if ax.get_title().startswith("quality"))
    # hand-checkable: bias = mean(judge - consensus), LoA = bias -+ 1.96 SD (ddof = 1)
    lo, hi = diff.mean() - 1.96 * diff.std(ddof=1), diff.mean() + 1.96 * diff.std(ddof=1)
    assert title == f"quality (n = 12)\nbias {diff.mean():+.2f}, LoA [{lo:+.2f}, {hi:+.2f}]"


@pytest.mark.filterwarnings("ignore::cube.method.analysis.CubeWarning")
def test_runaway_score_is_marked_off_scale_not_squashing_the_axis():
    # the factory's sixth judge has zero = full = 8, so its normalised scores explode
    answers, scores = make_tables(n_questions=40, judges=tuple(f"j{i}" for i in range(6)))
    result = evaluate(answers, scores, AnalysisParams(bootstrap=20))
    assert not np.all(np.abs(result.cube_table["cube_score"]) <= 110)
    forest = plots_cube.cube_forest(result)
    assert forest.axes[0].get_xlim() == (-10.0, 110.0)
    assert any(t.endswith("(off scale)") for t in _texts(forest))
    bars = plots_cube.normalised_dimensions(result)
    assert bars.axes[0].get_ylim()[1] <= 126  # bounded (a row of jury-mean labels above 110)
    assert "Hatched bars are cut at the axis" in bars.get_supxlabel()


def test_agreement_heatmap_picks_the_scale_of_the_statistic():
    _, scores = make_tables(n_questions=20)
    rho = plots.agreement_heatmap(pairwise_agreement(scores, stat="spearman"), "rho")
    mae = plots.agreement_heatmap(
        pairwise_agreement(scores, stat="mae"), "mean absolute difference"
    )
    assert rho.axes[0].collections[0].get_clim() == (-1, 1)
    assert mae.axes[0].collections[0].get_clim()[0] == 0
    assert (
        plots.agreement_heatmap(pairwise_agreement(scores), "一致性 Spearman").get_suptitle()
        == "一致性 Spearman"
    )


def test_palette_is_fixed_by_sorted_names_and_humans_are_black():
    p = plots.judge_palette(["b", "human", "a", "human:r1"])
    assert p["a"] != p["b"] and p["human"] == style.HUMAN_COLOR
    assert plots.judge_palette(["a", "b"]) == {k: p[k] for k in ("a", "b")}
    labels = plots.display_labels(["gpt-4o", "评委", "human:张三"])
    assert labels == {"gpt-4o": "gpt-4o", "评委": "评委", "human:张三": "human:张三"}


def test_confused_items_shows_real_item_names_stacked_by_cause():
    table = pd.DataFrame(
        {
            "item": ["残疾人证换领", "食品经营许可"],
            "questions": [6, 4],
            "region": [3, 0],
            "variant": [1, 2],
            "duplicate": [0, 0],
            "confused": [4, 2],
        }
    )
    fig = plots.confused_items(table, "绿园区助手")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "食品经营许可",
        "残疾人证换领",
    ]  # most confused on top
    assert [round(p.get_width()) for p in ax.patches] == [
        0,
        3,
        2,
        1,
    ]  # region bars, then variant bars
    assert "4/6" in _texts(fig) and "绿园区助手" in fig.get_suptitle()
    assert _glyph_warnings(fig) == []
    empty = plots.confused_items(table.iloc[:0], "s")
    assert empty.get_suptitle().endswith("none")


def _drawn(fig: Figure):
    """Lay out and draw the figure; return its renderer (for text and patch extents)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


@pytest.fixture(scope="module")
def two_systems() -> dict:
    ap = AnalysisParams(bootstrap=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a1, s1 = make_tables(40, seed=1, recall=0.6, system="bm25-top8")
        a2, s2 = make_tables(
            40, seed=2, recall=0.9, top_n=16, system="向量检索"
        )  # a Chinese system name
        return {"bm25-top8": evaluate(a1, s1, ap, 8), "向量检索": evaluate(a2, s2, ap, 16)}


def test_cube_figures_show_every_system(two_systems):
    names = list(two_systems)
    judges = sorted(two_systems[names[0]].cube_table.index)
    bounds = plots_cube.bounds(two_systems)
    for ax in bounds.axes:
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert ticks == [
            names[0],
            *judges,
            names[1],
            *judges,
        ]  # a heading row per system, then its judges
        rag = [c for c in ax.collections if c.get_sizes()[0] == 60]  # the rag points
        assert len(rag) == len(names) * len(judges)
    for name in names:
        assert name in bounds.get_suptitle()
        n_d = two_systems[name].cube_table.at[judges[0], "relevance"]
        assert f"N = {n_d:.0f}" in _texts(bounds)

    forest = plots_cube.cube_forest(two_systems, {"excellent": 80, "good": 60, "fair": 40})
    (ax,) = forest.axes
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == [
        f"{n} (R@k {two_systems[n].recall_at_k:.1%})" if k % (len(judges) + 2) == 0 else t
        for k, (n, t) in enumerate(
            zip([names[0]] * (len(judges) + 2) + [names[1]] * (len(judges) + 2), ticks, strict=True)
        )
    ]
    assert ticks.count("jury mean") == 2
    diamonds = [ln for ln in ax.lines if ln.get_marker() == "D"]
    assert sorted(round(float(d.get_xdata()[0]), 6) for d in diamonds) == sorted(
        round(r.jury_cube(), 6) for r in two_systems.values()
    )
    for r in two_systems.values():
        assert f"{r.jury_cube():.1f}" in _texts(forest)
    assert all(n in forest.get_suptitle() for n in names)

    bars = plots_cube.normalised_dimensions(two_systems)
    assert [ax.get_title() for ax in bars.axes] == names  # one panel per system
    for ax, r in zip(bars.axes, two_systems.values(), strict=True):
        n_bars = len([p for p in ax.patches if p.get_height() != 0 or p.get_width() != 0])
        assert n_bars == len(judges) * (len(DIMS) + 1)
        assert f"{r.jury.at['mean', 'weighted_score']:.1f}" in [t.get_text() for t in ax.texts]
    # one result still works, and is the same figure as a one-entry mapping
    one = plots_cube.cube_forest(two_systems[names[0]])
    assert [t.get_text() for t in one.axes[0].get_yticklabels()] == [*judges, "jury mean"]
    with pytest.raises(ValueError, match="no CuBE result"):
        plots_cube.bounds({})


def test_verdict_bands_include_poor_below_every_threshold(two_systems):
    result = next(iter(two_systems.values()))
    forest = plots_cube.cube_forest(result, {"excellent": 80, "good": 60, "fair": 40})
    ax = forest.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert labels[:4] == ["poor", "fair", "good", "excellent"]  # then the score labels
    spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
    assert spans == [
        (-10.0, 40.0),
        (40.0, 60.0),
        (60.0, 80.0),
        (80.0, 110.0),
    ]  # the axis' left end is poor
    from cube.diagnose.verdict import verdict

    assert (
        verdict(39.9, {"excellent": 80, "good": 60, "fair": 40}) == "poor"
    )  # the name the page uses


def test_normalised_dimension_mean_labels_touch_no_bar(two_systems):
    fig = plots_cube.normalised_dimensions(two_systems)
    renderer = _drawn(fig)
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_text() not in ("", " zero bound", " full bound")]
        assert len(labels) == len(DIMS) + 2  # one value per group and the row's name "jury mean"
        bars = [p.get_window_extent(renderer) for p in ax.patches]
        from matplotlib.transforms import Bbox

        means = [
            Bbox(ax.transData.transform(seg)) for c in ax.collections for seg in c.get_segments()
        ]
        assert len(means) == len(DIMS) + 1  # the jury-mean lines, one per group
        for text in labels:
            box = text.get_window_extent(renderer)
            assert not any(box.overlaps(b) for b in bars + means), text.get_text()
    legend = fig.legends[0].get_window_extent(renderer)
    assert not legend.overlaps(fig._suptitle.get_window_extent(renderer))


@pytest.mark.parametrize(
    "n_judges,dimension", [(1, None), (1, "relevance"), (2, None), (3, "quality")]
)
def test_fig5_title_clears_the_panel_titles_and_says_judges(n_judges, dimension):
    judges = tuple(f"rubric-{k}" for k in range(n_judges))
    _, scores = make_tables(n_questions=30, judges=(*judges, "ref"))
    fig = plots.judge_vs_human(scores[scores["set"] == "rag"], "ref", dimension=dimension)
    renderer = _drawn(fig)
    title = fig._suptitle.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= fig.bbox.width and title.y1 <= fig.bbox.height  # not cut
    for ax in fig.axes:
        assert not ax.title.get_window_extent(renderer).overlaps(title), ax.get_title()
    assert fig.get_suptitle().startswith("Figure 5. Judges against ref scores")
    assert "LLM" not in fig.get_suptitle()  # rubric algorithms are not called LLMs
    llm = plots.judge_vs_human(
        scores[scores["set"] == "rag"], "ref", dimension=dimension, llm_judges=judges
    )
    assert llm.get_suptitle().startswith("Figure 5. LLM judges against ref scores")
    mixed = plots.judge_vs_human(scores[scores["set"] == "rag"], "ref", llm_judges=judges[:-1])
    assert mixed.get_suptitle().startswith("Figure 5. Judges")  # one of them is not an LLM


def test_fig1_title_names_the_system():
    _, scores = make_tables(n_questions=20, system="bm25-top8")
    assert "to bm25-top8 (rag" in plots.score_distributions(scores).get_suptitle()
    _, other = make_tables(n_questions=20, system="dense")
    both = plots.score_distributions(pd.concat([scores, other], ignore_index=True))
    assert "to bm25-top8 and dense (rag" in both.get_suptitle()


def test_cube_forest_verdict_badges(two_systems):
    names = list(two_systems)
    fig = plots_cube.cube_forest(two_systems, {"good": 60, "fair": 40}, verdicts={names[0]: "fair"})
    badges = [t for t in fig.axes[0].texts if t.get_text().startswith("verdict: ")]
    assert [b.get_text() for b in badges] == ["verdict: fair"]  # only the system that has one
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    jury_rows = [k for k, t in enumerate(ticks) if t == "jury mean"]
    assert (
        badges[0].xy[1] == fig.axes[0].get_yticks()[jury_rows[0]]
    )  # on the first system's jury row
    renderer = _drawn(fig)
    assert (
        badges[0].get_window_extent(renderer).x0 >= fig.axes[0].get_window_extent(renderer).x1
    )  # clear of points
