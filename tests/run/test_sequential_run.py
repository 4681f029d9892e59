"""The sequential driver (`cube.run.sequential`) through the stage functions the notebooks call: a
run that stops early sends no call for the questions it never reached and none after it (stages
02-03 read the cache), a run whose CuBE sits on a band edge goes to the end and says why, and bad
`analysis.sequential` values are named with their key."""

import json
from collections import Counter

import pandas as pd
import pytest
import yaml

from cube.config.params import parse_params
from cube.kb.questions import build_questions
from cube.run import pipeline
from cube.run.execute import execute_run
from cube.run.notebook import open_run
from cube.run.sequential import SequentialError, batches, sequential_problems, unit_of
from cube.run.stages import stage_fingerprints
from tests import ROOT
from tests.openai_server import OpenAIServer, body_digest, last_user_message

RECORD_KEYS = {
    "stop", "batch", "min_questions", "min_questions_why", "alpha", "max_width", "seed",
    "questions_available", "questions_used", "question_ids", "stopped_early", "reason",
    "thresholds", "calls", "cost_usd", "path", "final", "excluded_judges", "failures",
    "systems", "watched", "judge_pilot", "failed_calls", "drive_id", "design",
}  # fmt: skip
PATH_KEYS = {"system", "quantity", "questions", "estimate", "lower", "upper", "fixed_lower",
             "fixed_upper"}  # fmt: skip


def fact_judge(body: dict) -> str:
    """An LLM judge on the local server: 1 point for the answer that says it has no guide (the
    extractive answerer's zero-context reply), 8 for one quoting the guide, else 5."""
    text = last_user_message(body)
    return (
        "Score: 1"
        if "没有可供参考的办事指南" in text
        else "Score: 8"
        if "根据办事指南" in text
        else "Score: 5"
    )


def write_params(tmp, name: str, **changes) -> str:
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data.update(
        {
            "run": name,
            "outputs_dir": str(tmp),
            "corpus": {"source": "demo", "n_items": 100, "family_share": 0.33, "seed": 7},
            "systems": [{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
            "audit": {"questions": 8, "min_pairs": 3},
        }
    )
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return str(path)


def record(run) -> dict:
    return json.loads(run.paths.results.read_text(encoding="utf-8"))["sequential"]


def taken(run) -> dict | None:
    """What stage 03 wrote in its own record of the driver's outcome it took."""
    return json.loads(run.paths.results.read_text(encoding="utf-8")).get("driver_taken")


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A sequential run with an LLM judge on a local server, stopping by width at its minimum;
    then stages 02 (answers) and 03 (judging, audit) as the notebooks run them."""
    tmp = tmp_path_factory.mktemp("seq")
    mp = pytest.MonkeyPatch()
    mp.setenv("CUBE_SEQ_KEY", "sk-seq-local")
    with OpenAIServer(reply=fact_judge) as server:
        try:
            params = write_params(
                tmp,
                "seq",
                models={
                    "llm": {
                        "provider": "openai",
                        "model": "len",
                        "base_url": server.url,
                        "api_key_env": "CUBE_SEQ_KEY",
                        "max_concurrency": 8,
                    }
                },
                judges=[
                    {"name": "rubric", "model": {"provider": "offline", "model": "rubric-lenient"}},
                    {"name": "llm", "model": "llm"},
                ],
                analysis={
                    "weights": "equal",
                    "max_interval_width": 90,
                    # above the reached set's retrieved questions: the driver draws the sample
                    "gate_bounds_questions": 80,
                    "sequential": {"stop": "width", "batch": 10, "min_questions": 20},
                },
            )
            run = open_run(params, tmp / "seq")
            pipeline.corpus_stage(run)
            questions = pipeline.questions_stage(run)
            during = [last_user_message(b) for b in server.bodies]
            server.reset_stats()
            pipeline.answers_stage(run)
            pipeline.scores_stage(run)
            after = server.requests_total
            # the notebooks themselves (01-03 under papermill, the driver running again inside 02)
            mp.chdir(ROOT)
            summary = execute_run(params, only="01..03", log=lambda line: None)
            notebooks = server.requests_total - after
        finally:
            mp.undo()
    everything = build_questions(run.params, run.load("corpus"), None)
    return {"run": run, "questions": questions, "all": everything, "during": during,
            "after": after, "summary": summary, "notebooks": notebooks}  # fmt: skip


def test_a_settled_run_stops_early_and_publishes_its_record(stopped):
    rec = record(stopped["run"])
    assert set(rec) == RECORD_KEYS
    # stage 03 took the driver's outcomes (once), and says so in its own record
    assert taken(stopped["run"])["drive_id"] == rec["drive_id"]
    assert rec["stopped_early"] is True
    assert rec["questions_used"] < rec["questions_available"] == len(stopped["all"])
    assert rec["reason"].startswith(f"stopped at {rec['questions_used']}: ")
    assert rec["questions_used"] >= rec["min_questions"] >= 20
    assert sorted(stopped["questions"]["question_id"]) == sorted(rec["question_ids"])
    assert rec["calls"]["used"] < rec["calls"]["full_set"]
    assert rec["calls"]["saved"] == rec["calls"]["full_set"] - rec["calls"]["used"]
    assert rec["cost_usd"]["used"] is None  # the local model has no price: unknown, not 0
    assert all(set(p) == PATH_KEYS for p in rec["path"])
    quantities = {p["quantity"] for p in rec["path"]}
    assert quantities == {"CuBE", "CuBE · rubric", "CuBE · llm", "R@k"}
    final = rec["final"]["bm25-top8"]
    assert final["settled"] is True
    assert final["upper"] - final["lower"] <= 90
    # the sequential interval is wider than the fixed-n one at the same look
    assert final["upper"] - final["lower"] > final["fixed_upper"] - final["fixed_lower"]


def test_the_design_is_spread_with_r_at_k_of_the_whole_set_and_a_finite_boundary(stopped):
    """Issue 40, item 2, on the family-structured demo world (a third of the items in families):
    the questions judged are a spread sample (every family its share of the questions judged,
    +-1, for one common share), R@k at every look is the builtin retriever's on the whole set
    (known before the first batch), and the boundary's values are the finite-horizon ones, below
    the anytime sequence's +-3."""
    run, rec = stopped["run"], record(stopped["run"])
    design = rec["design"]
    assert design["order"] == "spread" and design["boundary"] == "spending"
    assert design["recall"] == {"bm25-top8": "all"}
    assert design["critical"] and all(2.0 < c["critical"] < 3.0 for c in design["critical"])
    units = unit_of(run.params, stopped["all"].astype({"question_id": str}), run.load("corpus"))
    size = Counter(units.values())
    judged = Counter(units[q] for q in rec["question_ids"])
    # family f's count c is ceil(t s - U) for the share t judged: (c - 1) / s < t < (c + 1) / s
    low = max((judged[f] - 1) / s for f, s in size.items())
    high = min((judged[f] + 1) / s for f, s in size.items())
    assert low < high
    rk = {p["estimate"] for p in rec["path"] if p["quantity"] == "R@k"}
    assert len(rk) == 1 and len(rec["path"]) > 4  # the same R@k at every look: the whole set's


def test_unreached_questions_are_never_sent_and_the_stages_after_send_nothing(stopped):
    used = set(record(stopped["run"])["question_ids"])
    texts = stopped["all"].set_index("question_id")["question"]
    reached = [t for q, t in texts.items() if q in used]
    unreached = [t for q, t in texts.items() if q not in used]
    assert unreached and reached
    sent = stopped["during"]
    assert all(any(t in p for p in sent) for t in reached)  # the judge read every reached one
    assert not [t for t in unreached if any(t in p for p in sent)]
    assert stopped["after"] == 0  # stages 02-03 (answers, judging and audit) read the cache


def test_the_gate_sample_is_drawn_once_on_the_reached_set_and_stage_02_keeps_it(stopped):
    """Issue 40 review L6: the batches make no missed question's bounds; the driver's last step
    draws the gate's floor (`analysis.gate_bounds_questions`) once on the questions reached and
    judges it, so stage 02 (drawing the same sample on the same set) sends nothing (asserted
    above) and keeps exactly those bounds, counted in the record."""
    run, design = stopped["run"], record(stopped["run"])["design"]
    answers = run.load("answers")
    rag = answers[answers["set"] == "rag"]
    missed = set(rag.loc[rag["retrieval_ok"].astype(bool) & (rag["rank"] == 0), "question_id"])
    retrieved = int((rag["retrieval_ok"].astype(bool) & (rag["rank"] > 0)).sum())
    bounded = set(answers.loc[answers["set"] == "zero", "question_id"])
    floor = run.params.analysis.gate_bounds_questions
    assert retrieved < floor and missed  # this run's reached set is below the floor
    assert len(bounded & missed) == min(len(missed), floor - retrieved) > 0
    assert design["gate_sample"] == {"bm25-top8": len(bounded & missed)}
    scores = run.load("scores")
    judged = set(scores.loc[scores["set"] == "zero", "question_id"])
    assert bounded & missed <= judged


def test_the_notebooks_then_send_no_call_and_publish_the_same_record(stopped):
    summary = stopped["summary"]
    assert summary.ok and summary.committed, summary.stages
    assert stopped["notebooks"] == 0
    published = json.loads((summary.paths.results).read_text(encoding="utf-8"))["sequential"]
    assert published["question_ids"] == record(stopped["run"])["question_ids"]
    n = len(published["question_ids"])
    answers = pd.read_parquet(summary.paths.data_file("answers"))
    assert answers["question_id"].nunique() == n


def test_a_cube_on_a_band_edge_runs_to_the_end_and_says_why(tmp_path):
    never = write_params(
        tmp_path, "edge", analysis={"sequential": {"stop": "width"}, "max_interval_width": 0.01}
    )
    run = open_run(never, tmp_path / "edge")
    pipeline.corpus_stage(run)
    n = len(pipeline.questions_stage(run))
    full = record(run)
    assert full["questions_used"] == full["questions_available"] == n
    edge = round(full["final"]["bm25-top8"]["estimate"], 1)
    params = write_params(
        tmp_path,
        "edge",
        analysis={"sequential": {"min_questions": 20}, "verdict_thresholds": {"good": edge}},
    )
    run = open_run(params, tmp_path / "edge")
    pipeline.questions_stage(run)
    rec = record(run)
    assert rec["stopped_early"] is False and rec["questions_used"] == n
    assert rec["reason"].startswith(f"question set ended at {n}: bm25-top8's interval ")
    assert rec["reason"].endswith(f"spans {edge:g}")
    assert rec["final"]["bm25-top8"]["settled"] is False


def _widths(rec: dict, system: str) -> dict[int, float]:
    """A system's jury interval width at each look of a record."""
    return {
        p["questions"]: p["upper"] - p["lower"]
        for p in rec["path"]
        if p["system"] == system and p["quantity"] == "CuBE"
    }


def test_systems_primary_stops_on_the_primary_system_and_reports_the_others(tmp_path):
    """`systems: all` waits for a sweep member whose interval is still wide; `primary` stops at
    the first look where the primary system's is narrow enough, and marks the other not settled."""
    two = [{"kind": "builtin", "name": n, "top_n": k} for n, k in (("top8", 8), ("top2", 2))]
    never = {"sequential": {"stop": "width", "batch": 10, "min_questions": 20},
             "max_interval_width": 0.01}  # fmt: skip
    run = open_run(write_params(tmp_path, "w", systems=two, analysis=never), tmp_path / "w")
    pipeline.corpus_stage(run)
    pipeline.questions_stage(run)
    full = record(run)
    first = min(n for n in _widths(full, "top8") if n >= full["min_questions"])
    w = {s: _widths(full, s)[first] for s in ("top8", "top2")}
    primary, other = sorted(w, key=w.get)  # the narrower one at that look goes first
    assert w[other] > w[primary], w  # the test needs two different widths at the first look
    limit = (w[primary] + w[other]) / 2
    order = sorted(two, key=lambda s: s["name"] != primary)

    def ran(systems: str) -> dict:
        rule = {"stop": "width", "batch": 10, "min_questions": 20, "systems": systems}
        analysis = {"sequential": rule, "max_interval_width": limit}
        path = write_params(tmp_path, f"s-{systems}", systems=order, analysis=analysis)
        r = open_run(path, tmp_path / systems)
        pipeline.corpus_stage(r)
        pipeline.questions_stage(r)
        return record(r)

    both, one = ran("all"), ran("primary")
    assert one["systems"] == "primary" and one["watched"] == [primary]
    assert both["systems"] == "all" and both["watched"] == [primary, other]
    assert one["stopped_early"] and one["questions_used"] == first
    assert both["questions_used"] > first  # the other system held the run
    assert one["final"][primary]["settled"] is True
    assert one["final"][other]["settled"] is False  # reported, and marked
    assert one["final"][other]["upper"] - one["final"][other]["lower"] > limit
    assert one["reason"] == (
        f"stopped at {first}: the primary system {primary}'s interval is no wider than "
        f"{limit:g} (analysis.sequential.systems: primary; not settled: {other})"
    )
    assert "every system" in both["reason"] or both["reason"].startswith("question set ended")


BASE = {
    "run": "p",
    "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric-lenient"}}],
}


def test_bad_values_are_named_with_their_key_every_one_at_once():
    bad = {"stop": "soon", "batch": 0, "alpha": 1.5, "min_questions": 400, "systems": "main"}
    params = parse_params({**BASE, "analysis": {"sequential": bad}})
    problems = sequential_problems(params, 300)
    assert any(p.startswith("analysis.sequential.stop is 'soon'") for p in problems)
    assert any(p.startswith("analysis.sequential.batch is 0") for p in problems)
    assert any(p.startswith("analysis.sequential.alpha is 1.5") for p in problems)
    assert "analysis.sequential.systems is 'main', expected one of all, primary" in problems
    assert any("analysis.sequential.min_questions is 400" in p and "300 questions" in p
               for p in problems)  # fmt: skip
    assert sequential_problems(parse_params(BASE)) == []


def test_min_questions_above_the_set_stops_before_any_call(tmp_path):
    params = write_params(tmp_path, "big", analysis={"sequential": {"min_questions": 5000}})
    run = open_run(params, tmp_path / "big")
    pipeline.corpus_stage(run)
    with pytest.raises(SequentialError, match="analysis.sequential.min_questions is 5000"):
        pipeline.questions_stage(run)
    assert not run.has("questions")


def test_spread_batches_exactly_batch_questions_each_family_spread_in_a_seeded_order():
    units = {f"q{i:02d}": f"family:{i // 3}" for i in range(30)}  # ten families of three
    units |= {"q90": "family:solo", "q91": "family:pair", "q92": "family:pair"}  # 1 and 2
    out = batches(units, 4, seed=1)
    flat = [q for b in out for q in b]
    assert [len(b) for b in out] == [4] * 8 + [1]  # exactly `batch` questions, never whole families
    assert sorted(flat) == sorted(units)
    size = Counter(units.values())
    for n in range(1, len(flat) + 1):  # every prefix: each family its share of it +-1
        count = Counter(units[q] for q in flat[:n])
        share = n / len(flat)
        assert all(abs(count[f] - share * s) < 2 for f, s in size.items())
    first = [units[q] for q in flat[:10]]  # the first third: one of each family of three at most
    assert all(first.count(f) == 1 for f in first if f.startswith("family:") and size[f] == 3)
    assert out == batches(units, 4, seed=1) and out != batches(units, 4, seed=2)
    assert batches(units, 4, seed=1, order="spread") == out  # the default


def test_batches_take_whole_families_in_a_seeded_order():
    units = {f"q{i:02d}": f"family:{i // 3}" for i in range(30)}  # ten families of three
    out = batches(units, 5, seed=1, order="families")
    assert [len(b) for b in out] == [6] * 5  # two families make 6 >= 5
    assert sorted(q for b in out for q in b) == sorted(units)
    for b in out:
        assert all(sum(units[q] == units[p] for p in b) == 3 for q in b)  # never split
    assert out == batches(units, 5, seed=1, order="families")
    assert out != batches(units, 5, seed=2, order="families")


def test_stage_02_is_out_of_date_when_the_sequential_section_or_its_judges_change():
    notebooks = sorted((ROOT / "notebooks").glob("0[1-3]_*.ipynb"))
    base = parse_params(BASE)
    on = parse_params({**BASE, "analysis": {"sequential": {}}})
    strict = {"name": "j", "model": {"provider": "offline", "model": "rubric-strict"}}
    judged = parse_params({**BASE, "analysis": {"sequential": {}}, "judges": [strict]})
    banded = parse_params(
        {**BASE, "analysis": {"sequential": {}, "verdict_thresholds": {"ok": 50}}}
    )
    resampled = parse_params({**BASE, "analysis": {"sequential": {}, "bootstrap": 10}})
    prints = [
        stage_fingerprints(p, notebooks, ROOT)["02_qa_sets.ipynb"]
        for p in (base, on, judged, banded, resampled)
    ]
    assert len(set(prints[:4])) == 4
    assert prints[4] == prints[1]  # a look has no bootstrap: its count re-runs 04-07 only


def _good_and_deaf(tmp_path, name: str, good: OpenAIServer, deaf: OpenAIServer):
    """A sequential run (stop: width, batches of 10) judged by the offline rubric, an LLM judge on
    `good` and one on `deaf` whose pilot of 10 calls stops it (it answers "no idea")."""
    spec = {"provider": "openai", "api_key_env": "CUBE_SEQ_KEY"}
    return write_params(
        tmp_path,
        name,
        models={
            "good": {**spec, "model": "g", "base_url": good.url},
            "deaf": {**spec, "model": "d", "base_url": deaf.url},
        },
        judges=[
            {"name": "rubric", "model": {"provider": "offline", "model": "rubric-lenient"}},
            {"name": "good", "model": "good"},
            {"name": "deaf", "model": "deaf", "pilot": 10},
        ],
        analysis={
            "weights": "equal",
            "max_interval_width": 90,
            "sequential": {"stop": "width", "batch": 10, "min_questions": 20},
        },
    )


def test_a_judge_stopped_by_its_pilot_is_asked_once_and_leaves_the_jury(tmp_path, monkeypatch):
    """The pilot runs once, on the first batch (not on every batch: each would send its calls
    again); a judge it stops is asked nothing more, and the record names it as out of the jury."""
    monkeypatch.setenv("CUBE_SEQ_KEY", "sk-seq-local")
    with OpenAIServer(reply=fact_judge) as good, OpenAIServer(reply=lambda b: "no idea") as deaf:
        params = _good_and_deaf(tmp_path, "pilot", good, deaf)
        run = open_run(params, tmp_path / "pilot")
        pipeline.corpus_stage(run)
        pipeline.questions_stage(run)
        asked_deaf = deaf.requests_total
    rec = record(run)
    # its pilot of 10 calls, on the first batch only (identical prompts are sent once: a question's
    # rag and full answers may be the same text); a pilot per batch would have sent ~10 a batch
    assert 0 < asked_deaf <= 10
    assert rec["questions_used"] > 10  # later batches were judged, by the others
    assert "deaf" in rec["excluded_judges"] and "pilot" in rec["excluded_judges"]["deaf"]
    assert rec["final"]["bm25-top8"]["settled"] is True  # the jury without it could settle
    assert rec["failures"]["judgments"]["deaf"] > 0


def _one_in_four(body: dict) -> bool:
    """A fixed quarter of the calls (by their body): the server fails them, every time."""
    return int(body_digest(body)[:8], 16) % 4 == 0


def test_stages_02_and_03_take_the_drivers_failures_and_pilots_a_fresh_run_asks_again(
    tmp_path, monkeypatch
):
    """Within a run, a call the driver sent that failed stays failed (with its reason) in stages
    02-03 instead of being sent again, and a judge its pilot stopped gets no second pilot; stage 03
    run again alone, or a fresh run of the driver, asks the failed calls again (failures are never
    cached)."""
    monkeypatch.setenv("CUBE_SEQ_KEY", "sk-seq-local")
    with OpenAIServer(reply=fact_judge) as good, OpenAIServer(reply=lambda b: "no idea") as deaf:
        good.fail("400", times=None, when=_one_in_four, message="refused by the test")
        params = _good_and_deaf(tmp_path, "fail", good, deaf)
        run = open_run(params, tmp_path / "fail")
        pipeline.corpus_stage(run)
        pipeline.questions_stage(run)
        refused = sum(map(_one_in_four, good.bodies))  # the calls the driver sent that failed
        rec = record(run)
        assert rec["stopped_early"] and rec["failed_calls"]
        assert set(rec["failed_calls"].values()) == {next(iter(rec["failed_calls"].values()))}
        assert "refused by the test" in next(iter(rec["failed_calls"].values()))
        assert rec["judge_pilot"]["deaf"]["decision"] == "stopped"
        assert 0 < len(rec["judge_pilot"]["deaf"]["calls"]) <= 10
        good.reset_stats()
        deaf.reset_stats()
        pipeline.answers_stage(run)
        scores = pipeline.scores_stage(run)
        assert good.requests_total == 0  # the failed calls were not sent again
        assert deaf.requests_total == 0  # no second pilot for the judge the first one stopped
        # the judgments stage 03 saved are those the driver's last look counted
        mine = scores[scores["judge"] == "good"]
        assert int(mine["score"].isna().sum()) == rec["failures"]["judgments"]["good"] > 0
        failed = mine[mine["error_kind"] == "call"]
        assert len(failed) > 0 and failed["error"].str.contains("refused by the test").all()
        assert set(failed["call_id"]) <= set(rec["failed_calls"])
        deaf_rows = scores[scores["judge"] == "deaf"]
        sent = deaf_rows[deaf_rows["error_kind"] != "pilot"]
        assert set(sent["call_id"]) == set(rec["judge_pilot"]["deaf"]["calls"])
        assert (deaf_rows["error_kind"] == "pilot").sum() > 0
        pilot = json.loads(run.paths.results.read_text(encoding="utf-8"))["judge_pilot"]
        assert pilot["deaf"]["decision"] == "stopped"
        assert pilot["deaf"]["calls_not_sent"] == len(deaf_rows) - len(sent)
        # stage 03 alone again (02 up to date: what `cube run` does when only the scores hold
        # failed calls) took the driver's outcomes once already: it asks its failed calls again
        assert taken(run) == {
            "drive_id": rec["drive_id"],
            "failed_calls": len(rec["failed_calls"]),
            "pilots": sorted(rec["judge_pilot"]),
        }
        pipeline.scores_stage(open_run(params, tmp_path / "fail"))
        assert good.requests_total > 0 and all(map(_one_in_four, good.bodies))
        good.reset_stats()
        deaf.reset_stats()
        # a fresh run of the driver asks exactly the failed calls again (the rest is cached)
        pipeline.questions_stage(run)
        assert good.requests_total == refused >= len(rec["failed_calls"])
        assert all(map(_one_in_four, good.bodies))
        assert deaf.requests_total == 0
        # its outcomes are for the stage 03 after it: a new drive, not the one stage 03 took
        assert record(run)["drive_id"] != taken(run)["drive_id"]


def test_notebook_06_cells_show_the_record_the_driver_wrote(tmp_path):
    """Notebook 06's sequential cells on a record the driver wrote (an offline run that stops at
    its first possible look): the section's numbers, tables and drawn path are the record's."""
    import numpy as np

    from tests.pages.test_sequential_section import _by_gid, _cells

    rule = {"stop": "width", "batch": 10, "min_questions": 20}
    path = write_params(tmp_path, "nb06", analysis={"sequential": rule, "max_interval_width": 100})
    run = open_run(path, tmp_path / "nb06")
    pipeline.corpus_stage(run)
    pipeline.questions_stage(run)
    pipeline.answers_stage(run)  # stages 02-03 after the driver: from the cache, no call
    pipeline.scores_stage(run)
    rec = record(run)
    assert rec["stopped_early"] is True
    shown: list = []
    from cube.run.evaluate import evaluate_run

    results = evaluate_run(run, bootstrap=False)
    ns = {"run": run, "results": results}
    exec(_cells("cell-01"), ns)  # noqa: S102 - the notebook's own code
    ns["display"] = shown.append
    exec(_cells("cell-12").splitlines()[1], ns)  # noqa: S102 - `record = ...read_record(...)`
    exec("section = " + _cells("cell-seq-1").splitlines()[-1], ns)  # noqa: S102
    text = ns["section"].data
    assert f"**{rec['questions_used']:,} of {rec['questions_available']:,} questions**" in text
    assert f"never before {rec['min_questions']} questions" in text
    assert (
        f"{rec['calls']['used']:,} calls where the full set needs {rec['calls']['full_set']:,}"
        in (text)
    )
    exec(_cells("cell-seq-2"), ns)  # noqa: S102
    assert len(shown) == 3
    summary = pd.read_csv(run.paths.tables / "sequential_summary.csv").set_index("what")
    assert summary.loc["questions", "this_run"] == rec["questions_used"]
    assert summary.loc["questions", "full_set"] == rec["questions_available"]
    calls = summary.loc["calls (as cube plan counts them)"]
    assert (calls["this_run"], calls["full_set"], calls["saved"]) == (
        rec["calls"]["used"], rec["calls"]["full_set"], rec["calls"]["saved"]
    )  # fmt: skip
    final = pd.read_csv(run.paths.tables / "sequential_final.csv").set_index("system")
    for system, last in rec["final"].items():
        row = final.loc[system]
        assert row["questions"] == rec["questions_used"]
        assert bool(row["settled"]) is last["settled"]
        for col, key in (("cube", "estimate"), ("sequence_lower", "lower"),
                         ("sequence_upper", "upper"), ("fixed_n_lower", "fixed_lower"),
                         ("fixed_n_upper", "fixed_upper")):  # fmt: skip
            assert row[col] == pytest.approx(last[key], abs=1e-9)
        # review M2: the report's CuBE (R@k of the questions reached) beside the driver's, both
        # labelled; the driver took R@k from every question of the set
        assert row["report_cube"] == pytest.approx(results[system].jury_cube(), nan_ok=True)
        n, m = rec["questions_used"], rec["questions_available"]
        assert row["cube_is"] == f"W of the {n:,} judged x R@k of all {m:,} (sequential)"
        assert row["report_cube_is"] == f"W x R@k of the {n:,} reached (Table 4, bootstrap)"
    assert "Two CuBEs" in text
    fig = ns["plots_sequential"].sequence_path(ns["record"])
    (ax,) = fig.axes
    looks = [p for p in rec["path"] if p["quantity"] == "CuBE"]
    (estimate,) = _by_gid(ax, "estimate")
    np.testing.assert_allclose(estimate.get_xdata(), [p["questions"] for p in looks])
    np.testing.assert_allclose(estimate.get_ydata(), [p["estimate"] for p in looks])
    fixed = _by_gid(ax, "fixed-n")
    np.testing.assert_allclose(fixed[0].get_ydata(), [p["fixed_lower"] for p in looks])
    np.testing.assert_allclose(fixed[1].get_ydata(), [p["fixed_upper"] for p in looks])
    assert (run.paths.figures / "fig_sequential_path.png").stat().st_size > 10_000
