"""The report's "Sequential evaluation" section on a realistic record (`sequential_fixture`): the
figure's bands, path and stop line, the summary's numbers, escaped names, the fixed-n line, costs
unknown, a malformed record, the decision's headline and index page, and notebook 06's cells."""

from __future__ import annotations

import io
import json
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from cube.pages import display  # noqa: E402
from cube.pages.decision import decision_markdown  # noqa: E402
from cube.pages.escape import escape_text  # noqa: E402
from cube.pages.plots_sequential import sequence_path  # noqa: E402
from cube.pages.sequential import (  # noqa: E402
    FIXED_N_LINE,
    SequentialPage,
    final_table,
    questions_phrase,
    read_record,
    section_markdown,
    summary_table,
)
from tests import ROOT  # noqa: E402
from tests.pages.sequential_fixture import CALLS_PER_QUESTION, HOSTILE, build_record  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def raw() -> dict:
    return build_record()


@pytest.fixture(scope="module")
def record(raw) -> SequentialPage:
    return read_record({"sequential": raw})


def _by_gid(ax, gid: str) -> list:
    return [a for a in ax.get_children() if a.get_gid() == gid]


def test_the_fixture_stops_early_as_a_driver_would(raw):
    # bm25 at 71 and the other at 25 sit 11 and 15 points inside their bands: settled early
    assert raw["stopped_early"] and raw["questions_used"] < raw["questions_available"]
    assert all(last["settled"] for last in raw["final"].values())


def test_figure_draws_the_bands_the_path_the_fixed_n_interval_and_the_stop(record):
    fig = sequence_path(record)
    axes = fig.axes
    assert len(axes) == 2  # one panel per system
    for ax, system in zip(axes, record.final, strict=True):
        bands = {a.get_gid().split(":")[1] for a in ax.patches if a.get_gid()}
        assert bands == {"poor", "fair", "good", "excellent"}
        labels = {t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("verdict-")}
        assert labels == bands
        look = record.path_of(system)  # the jury's CuBE only
        assert list(look["questions"]) == list(range(20, record.questions_used + 1, 20))
        (estimate,) = _by_gid(ax, "estimate")
        np.testing.assert_allclose(estimate.get_ydata(), look["estimate"])
        (band,) = _by_gid(ax, "sequence")
        assert isinstance(band, PolyCollection)
        vertices = band.get_paths()[0].vertices
        assert vertices[:, 1].min() == pytest.approx(look["lower"].min())
        assert vertices[:, 1].max() == pytest.approx(look["upper"].max())
        fixed = _by_gid(ax, "fixed-n")
        assert [line.get_linestyle() for line in fixed] == ["--", "--"]
        np.testing.assert_allclose(fixed[0].get_ydata(), look["fixed_lower"])
        np.testing.assert_allclose(fixed[1].get_ydata(), look["fixed_upper"])
        (stop,) = _by_gid(ax, "stop")
        assert list(stop.get_xdata()) == [record.questions_used] * 2
        (said,) = _by_gid(ax, "stop-label")
        assert said.get_text() == f"stopped at {record.questions_used}"
        assert ax.get_title().endswith(": settled")
        low, high = ax.get_ylim()  # every drawn bound is in view, the fixed-n one included
        assert low <= min(0, look["fixed_lower"].min()) and high >= max(
            100, look["fixed_upper"].max()
        )
    title = " ".join(fig._suptitle.get_text().split())
    assert "every system's interval lies inside one verdict band" in title
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "fixed-n interval (valid only at one n fixed in advance)" in legend


def test_a_run_that_never_settled_says_the_set_ended():
    record = read_record({"sequential": build_record({"bm25": 60.5})})
    assert not record.stopped_early and record.questions_used == 300
    ax = sequence_path(record).axes[0]
    assert _by_gid(ax, "stop-label")[0].get_text() == "set ended at 300"
    assert ax.get_title() == "bm25: not settled"
    phrase = questions_phrase(record)
    assert phrase.startswith("on 300 of 300 questions (the set ended before the verdict settled: ")
    last = record.final["bm25"]
    interval = f"{last['lower']:.1f}-{last['upper']:.1f} spans 60"
    assert phrase.endswith(f"bm25's interval {interval})")
    text = section_markdown(record)
    assert f"It ran until its question set ended: bm25&#x27;s interval {interval}." in text
    assert "0 saved (" in text and "1.0x fewer" not in text  # nothing saved


def test_summary_numbers_come_from_the_record(raw, record):
    table = summary_table(record).set_index("what")
    used, full = raw["questions_used"], raw["questions_available"]
    assert table.loc["questions", "this_run"] == used
    assert table.loc["questions", "saved"] == full - used
    assert table.loc["questions", "times_fewer"] == pytest.approx(full / used)
    calls = raw["calls"]
    assert (
        table.loc["calls (as cube plan counts them)", "full_set"]
        == calls["full_set"]
        == full * CALLS_PER_QUESTION
    )
    assert table.loc["calls (as cube plan counts them)", "saved"] == calls["saved"]
    assert table.loc["calls (as cube plan counts them)", "times_fewer"] == pytest.approx(
        calls["full_set"] / calls["used"]
    )
    assert table.loc["cost (USD)", "saved"] == pytest.approx(raw["cost_usd"]["saved"])
    text = section_markdown(record)
    x = calls["full_set"] / calls["used"]
    assert f"{calls['saved']:,} saved, {x:.1f}x fewer" in text
    assert f"**{used} of {full} questions**" in text


def test_final_table_puts_the_sequence_beside_the_fixed_n_interval(raw, record):
    table = final_table(record).set_index("system")
    for system, last in raw["final"].items():
        row = table.loc[system]
        assert (row["sequence_lower"], row["sequence_upper"]) == (last["lower"], last["upper"])
        assert (row["fixed_n_lower"], row["fixed_n_upper"]) == (
            last["fixed_lower"],
            last["fixed_upper"],
        )
        # the sequence pays for looking after every batch: it is wider than the fixed-n interval
        assert (
            row["sequence_upper"] - row["sequence_lower"]
            > row["fixed_n_upper"] - row["fixed_n_lower"]
        )


def test_hostile_names_are_escaped_in_the_section_and_the_tables(record):
    text = section_markdown(record)
    assert "<img" not in text and "onerror=alert(1)>" not in text
    hostile_reason = read_record(
        {"sequential": {**build_record(), "reason": f"question set ended at 300: {HOSTILE}"}}
    )
    text = section_markdown(hostile_reason)
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    html = display.table(final_table(record))._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_an_undefined_interval_at_a_look_leaves_a_gap(raw):
    # JSON's null for NaN: the jury's first look had no interval (too few families for the SE)
    path = [dict(p) for p in raw["path"]]
    first = next(p for p in path if p["quantity"] == "CuBE")
    first.update(lower=None, upper=None)
    record = read_record({"sequential": {**raw, "path": path}})
    assert math.isnan(record.path_of(first["system"])["lower"].iloc[0])
    fig = sequence_path(record)
    fig.savefig(io.BytesIO(), format="png")
    (band,) = _by_gid(fig.axes[0], "sequence")
    xs = band.get_paths()[0].vertices[:, 0]
    assert xs.min() == 40  # the band starts at the first look with an interval


def test_a_name_with_dollars_is_drawn_as_text_not_a_formula():
    record = read_record({"sequential": build_record({"cost $x^{": 71.0, "$$": 25.0})})
    fig = sequence_path(record)
    fig.savefig(io.BytesIO(), format="png")  # mathtext would fail on the unclosed formula
    assert [ax.get_title() for ax in fig.axes] == ["cost $x^{: settled", "$$: settled"]


def test_no_record_is_a_fixed_n_run(tmp_path):
    assert read_record({"decision": {}}) is None
    assert read_record(tmp_path / "results.json") is None  # no results.json yet
    assert questions_phrase(None) == ""
    assert section_markdown(None) == FIXED_N_LINE.format(n="")
    assert section_markdown(None, 300).startswith(
        "Fixed-n run: every question of the set was judged (300 questions)"
    )


def test_unknown_costs_are_n_a(raw):
    record = read_record({"sequential": {**raw, "cost_usd": None}})
    cost = summary_table(record).set_index("what").loc["cost (USD)"]
    assert all(math.isnan(cost[k]) for k in ("this_run", "full_set", "saved", "times_fewer"))
    assert "Cost saved: n/a" in section_markdown(record)
    nulls = read_record({"sequential": build_record(costs=False)})
    assert "Cost saved: n/a" in section_markdown(nulls)
    shown = display.table(summary_table(nulls))._repr_html_()
    assert "n/a" in shown
    no_calls = read_record({"sequential": {**raw, "calls": None}})
    assert "Calls saved: n/a" in section_markdown(no_calls)


def test_a_malformed_record_names_every_problem(raw):
    bad = {k: v for k, v in raw.items() if k not in ("reason", "final")}
    bad["questions_used"] = -3
    bad["path"] = [*raw["path"][:2], {"system": "bm25"}]
    with pytest.raises(ValueError) as err:
        read_record({"sequential": bad})
    message = str(err.value)
    for said in (
        "results.json sequential",
        "missing key 'reason'",
        "missing key 'final'",
        "questions_used is -3",
        "path[2] lacks quantity, questions, estimate, lower, upper",
    ):
        assert said in message


def test_the_decision_headline_says_what_was_judged(record):
    decision = {"verdict": "good", "sentence": "s", "cube_score": 71.3, "cube_ci": [66.6, 75.7]}
    md = decision_markdown(decision, questions=questions_phrase(record))
    first = md.splitlines()[0]
    assert (
        f"on {record.questions_used} of {record.questions_available} questions (stopped early: "
        "every system&#x27;s interval lies inside one verdict band; after a stop chosen by the "
        "data, read the sequential interval: bm25 " in first
    )
    hostile = questions_phrase(record).replace("every system", HOSTILE)
    assert "<img" not in decision_markdown(decision, questions=hostile)
    assert "questions" not in decision_markdown(decision).splitlines()[0]


def test_the_index_page_says_what_was_judged(tmp_path, raw):
    from cube.config.params import parse_params
    from cube.config.runpaths import RunPaths
    from cube.pages.publish import write_index
    from tests.pages.test_index_page import DECISION

    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    paths.report.mkdir(parents=True)
    decision = {**DECISION, "verdict": "good", "withheld_reasons": []}
    hostile = {**raw, "reason": f"stopped at {raw['questions_used']}: {HOSTILE} settled"}
    paths.results.write_text(json.dumps({"decision": decision, "sequential": hostile}))
    judges = [{"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}}]
    params = parse_params({"run": "run", "judges": judges}, "p.yaml")
    html = write_index(params, paths, []).read_text(encoding="utf-8")
    assert 'id="sequential-questions"' in html
    assert f"Judged on {raw['questions_used']} of 300 questions (stopped early: " in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt; settled" in html
    paths.results.write_text(json.dumps({"decision": decision}))  # a fixed-n run: no line
    assert "sequential-questions" not in write_index(params, paths, []).read_text("utf-8")


def _cells(*ids: str) -> str:
    """The source of notebook 06's cells with these ids, in order."""
    nb = json.loads((ROOT / "notebooks" / "06_cube_score.ipynb").read_text(encoding="utf-8"))
    by_id = {c["id"]: "".join(c["source"]) for c in nb["cells"]}
    return "\n".join(by_id[i] for i in ids)


def test_notebook_06_cells_write_the_section_on_a_tiny_run_folder(tmp_path, raw):
    # the notebook's own imports and its two sequential cells, run on a run folder holding only a
    # results.json with the record (the cells that need answers and scores are not run here)
    from cube.run import open_run

    run = open_run(ROOT / "params" / "default.yaml", tmp_path / "run")
    from cube.run.record import DriverRecord

    run.write_record(DriverRecord(sequential=raw))
    shown: list = []
    ns = {"run": run, "display": shown.append, "results": {}}  # no evaluation: report_cube NaN
    exec(_cells("cell-01"), ns)  # noqa: S102 - the notebook's own code
    ns["display"] = shown.append
    ns["record"] = ns["sequential"].read_record(run.paths.results)
    exec("section = " + _cells("cell-seq-1").splitlines()[-1], ns)  # noqa: S102
    assert ns["section"].data.startswith("## Sequential evaluation")
    exec(_cells("cell-seq-2"), ns)  # noqa: S102
    assert len(shown) == 3
    for name in ("sequential_summary.csv", "sequential_final.csv"):
        assert (run.paths.tables / name).exists()
    assert (run.paths.figures / "fig_sequential_path.png").stat().st_size > 10_000
    ns["record"], shown[:] = None, []  # a fixed-n run: the one line and nothing drawn
    exec("section = " + _cells("cell-seq-1").splitlines()[-1], ns)  # noqa: S102
    assert ns["section"].data.startswith("Fixed-n run")
    exec(_cells("cell-seq-2"), ns)  # noqa: S102
    assert shown == []


def test_a_run_that_waited_only_for_its_primary_system_says_so(raw):
    """`analysis.sequential.systems: primary`: the rule names the primary system, the headline
    calls the run stopped early though another system's interval is open, and the final table marks
    that system not settled; the name is escaped."""
    final = {s: dict(f) for s, f in raw["final"].items()}
    final[HOSTILE]["settled"] = False  # a sweep member still open at the stop
    primary = {
        **raw,
        "final": final,
        "systems": "primary",
        "watched": ["bm25"],
        "reason": f"stopped at {raw['questions_used']}: the primary system bm25's interval lies "
        f"inside one verdict band (analysis.sequential.systems: primary; not settled: {HOSTILE})",
    }
    record = read_record({"sequential": primary})
    text = section_markdown(record)
    assert "stop once the primary system bm25's interval (analysis.sequential.systems: primary" in (
        text
    )
    assert HOSTILE not in text and "&lt;img" in text
    hostile = section_markdown(read_record({"sequential": {**primary, "watched": [HOSTILE]}}))
    assert HOSTILE not in hostile and escape_text(HOSTILE) in hostile  # the name in the rule
    assert questions_phrase(record).startswith(
        f"on {raw['questions_used']:,} of {raw['questions_available']:,} questions (stopped early"
    )
    table = final_table(record).set_index("system")
    assert bool(table.loc["bm25", "settled"]) is True
    assert bool(table.loc[HOSTILE, "settled"]) is False
    # an older record without the key reads as `systems: all`
    older = read_record({"sequential": raw})
    assert older.watched_systems() == list(raw["final"]) and not older.primary_only()
    assert "stop once every system's interval" in section_markdown(older)


def test_a_width_stop_across_an_edge_names_both_bands_on_the_terminal_and_first_screen():
    """Issue 40, item 3: a width stop whose interval spans 80 says "good or excellent" in the
    phrase the terminal and the decision's headline print; one inside a band adds nothing; a
    record that requires both says so in its rule."""
    raw = build_record()
    system = next(iter(raw["final"]))
    raw = {**raw, "stop": "width", "max_width": 25.0, "stopped_early": True,
           "reason": f"stopped at {raw['questions_used']}: every system's interval is no wider "
           "than 25"}  # fmt: skip
    crossing = {**raw["final"][system], "lower": 61.6, "upper": 82.2, "settled": True}
    page = SequentialPage.read({**raw, "final": {system: crossing}})
    phrase = questions_phrase(page)
    assert f"the verdict is not settled: {system} 61.6-82.2 is good or excellent" in phrase
    inside = {**crossing, "lower": 62.0, "upper": 78.0}
    assert "not settled" not in questions_phrase(
        SequentialPage.read({**raw, "final": {system: inside}})
    )
    both = SequentialPage.read(
        {**raw, "final": {system: inside}, "design": {"require_band": True, "order": "spread",
                                                       "boundary": "spending"}}
    )  # fmt: skip
    text = section_markdown(both)
    assert "and lies inside one verdict band" in text and "spread over the run" in text


def test_the_two_cubes_are_labelled_and_shown_side_by_side(raw):
    """Review M2: under `recall: all` the driver's CuBE (W of the N judged x R@k of all M) is not
    the report's (W x R@k of the N reached): the table labels both and shows them side by side,
    the section says which is which; with R@k from the questions judged the labels say so."""
    from types import SimpleNamespace

    systems = list(raw["final"])
    design = {"order": "spread", "boundary": "spending", "recall": dict.fromkeys(systems, "all")}
    page = SequentialPage.read({**raw, "design": design})
    n, m = raw["questions_used"], raw["questions_available"]
    results = {s: SimpleNamespace(jury_cube=lambda k=k: 50.0 + k) for k, s in enumerate(systems)}
    table = final_table(page, results).set_index("system")
    for k, s in enumerate(systems):
        row = table.loc[s]
        assert row["cube"] == raw["final"][s]["estimate"]
        assert row["cube_is"] == f"W of the {n:,} judged x R@k of all {m:,} (sequential)"
        assert row["report_cube"] == 50.0 + k
        assert row["report_cube_is"] == f"W x R@k of the {n:,} reached (Table 4, bootstrap)"
    text = section_markdown(page)
    assert f"W of the {n:,} questions judged x R@k of all {m:,} questions" in text
    assert f"W x R@k of the {n:,} questions reached" in text
    judged = SequentialPage.read({**raw, "design": {**design, "recall": {}}})
    plain = final_table(judged).set_index("system")
    assert (plain["cube_is"] == f"W x R@k of the {n:,} judged (sequential)").all()
    assert plain["report_cube"].isna().all()  # no results given: not known, not guessed
    assert "Two CuBEs" not in section_markdown(judged)


def test_the_reading_note_quotes_what_was_measured_for_the_boundary_used(raw):
    """Review M3: the coverage quoted is the one measured for the record's boundary (spending:
    benchmarks/sequential_design.py; anytime: benchmarks/sequential_coverage.py), and none for a
    boundary the simulations did not measure (pocock)."""

    def text(boundary):
        design = {"order": "spread", "boundary": boundary} if boundary else None
        return section_markdown(SequentialPage.read({**raw, "design": design}))

    assert "95-99 % of runs" in text("spending") and "93-98" not in text("spending")
    assert "93-98 % of runs" in text("anytime") and "93-98 % of runs" in text(None)  # older
    pocock = text("pocock")
    assert "Read the sequential interval" in pocock and "% of runs" not in pocock
