"""No unread call (issue 40, item 1): with `analysis.bounds_of_missed: sample` (the default) the
zero and full answers of a missed question are made only in the judge gate's seeded sample (the
floor `analysis.gate_bounds_questions`, made up when fewer were retrieved), and given the same jury
every figure is the one `bounds_of_missed: all` gives.

A small offline run (the demo corpus, template questions, BM25 at TOP-2 so that a third of
the questions are missed, two rubric judges) is run through stages 01-03 twice, with and without
the saving, then evaluated (27 of 40 questions retrieved: 3 missed ones make up the floor of 30):
W, CuBE, their intervals, the jury, the decision and the per-category tables are compared; the
answering and judging calls are counted. The jury is the same here because every judge passes
the gate easily; the gate itself can decide differently on fewer items (review H2), so its
bounds test is checked on the review's case of few retrieved questions, where the floor gives
the decision of `bounds_of_missed: all` and the old minimum of 5 did not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from cube.method.gate import min_questions
from cube.run import decide, diagnosis, evaluate, pipeline
from cube.run.notebook import open_run
from cube.systems.bounds import bound_questions, bounds_sample_size, missed_sample
from tests.openai_server import OpenAIServer

JUDGES = [
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
]
SYSTEM = "bm25-top2"


def _run(tmp, bounds_of_missed: str, judges=None, **extra):
    params = tmp / f"{bounds_of_missed}.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": bounds_of_missed,
                "cache_path": str(
                    tmp / f"{bounds_of_missed}-cache.sqlite"
                ),  # each run sends its own
                "judges": judges or JUDGES,
                "systems": [{"kind": "builtin", "name": SYSTEM, "top_n": 2}],
                "analysis": {
                    "bootstrap": 60,
                    "max_interval_width": 60,
                    "bounds_of_missed": bounds_of_missed,
                },
                "corpus": {"n_items": 40, "seed": 3},
                "audit": {"questions": 12, "max_share": 1.0},
                "human": {"sample_size": 6},
                **extra,
            }
        ),
        encoding="utf-8",
    )
    r = open_run(params, tmp / bounds_of_missed)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(r)
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unread")
    return _run(tmp, "all"), _run(tmp, "sample")


def _missed(answers: pd.DataFrame) -> set[str]:
    rag = answers[answers["set"] == "rag"]
    return set(rag.loc[rag["retrieval_ok"].astype(bool) & (rag["rank"] == 0), "question_id"])


def test_the_sample_makes_up_the_gates_floor_and_is_the_same_on_any_superset():
    from cube.config.sections import AnalysisParams

    for alpha in (0.5, 0.1, 0.05, 0.01, 0.001):
        assert bounds_sample_size(alpha) == min_questions(alpha)
    ids = [f"q{i:03d}" for i in range(200)]
    whole = set(missed_sample(ids, 30, seed=0))
    for start in range(0, 200, 20):  # a subset's sample holds every sampled id it contains
        batch = ids[start : start + 20]
        assert whole & set(batch) <= set(missed_sample(batch, 30, seed=0))
    assert whole != set(missed_sample(ids, 30, seed=1))
    rag = pd.DataFrame({"question_id": ids, "rank": 0, "retrieval_ok": True})
    rag.loc[[3, 150], "rank"] = 1
    ap = AnalysisParams()
    assert ap.gate_bounds_questions == 30
    chosen = set(bound_questions(rag, ap))
    # 2 retrieved of 200: 28 missed ones make up the floor of 30
    assert len(chosen) == 30 and {"q003", "q150"} <= chosen
    others = [q for q in ids if q not in {"q003", "q150"}]
    assert chosen - {"q003", "q150"} == set(missed_sample(others, 28, seed=0))
    # the sequential driver's batches make the retrieved ones' bounds alone (missed=False): the
    # floor is drawn once, on the questions reached, not up to 30 per batch
    batches = set().union(
        *(bound_questions(rag.iloc[i : i + 20], ap, missed=False) for i in range(0, 200, 20))
    )
    assert batches == {"q003", "q150"}
    rag.loc[::4, "rank"] = 2  # 50 retrieved: above the floor, no missed bound
    assert set(bound_questions(rag, ap)) == set(rag.loc[rag["rank"] > 0, "question_id"])
    # never below what the test needs to decide, and all missed ones when the set is smaller
    assert len(bound_questions(rag.iloc[:8].assign(rank=0), AnalysisParams())) == 8
    small = AnalysisParams(gate_bounds_questions=1)
    assert len(bound_questions(rag.assign(rank=0), small)) == min_questions(0.05)


def test_bound_questions_keep_retrieved_and_the_sample_only():
    from cube.config.sections import AnalysisParams

    rag = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(40)],
            "rank": [1, 0, 0, 2] + [0] * 6 + [3] + [0] * 29,
            "retrieval_ok": [True] * 39 + [False],  # q39: a failed call, retrieval unknown
        }
    )
    chosen = bound_questions(rag, AnalysisParams())
    assert {"q0", "q3", "q10"} <= set(chosen) and "q39" not in chosen
    # 3 retrieved: 27 missed ones make up the floor of 30
    assert len(set(chosen) - {"q0", "q3", "q10"}) == 30 - 3
    assert len(bound_questions(rag, AnalysisParams(gate_bounds_questions=3))) == 5  # test's 5
    assert len(bound_questions(rag, AnalysisParams(gate_bounds_questions=1, gate_alpha=0.2))) == 3
    assert (
        bound_questions(rag, AnalysisParams(bounds_of_missed="all")) == rag["question_id"].tolist()
    )


def _grid_and_answers(diffs: list[float], hits: list[bool], made: set[str]):
    """A one-judge, one-dimension score grid (zero, rag, full per question: full - zero = the
    question's difference) and the answers made (every rag answer, the bounds of `made`)."""
    rows, answers = [], []
    for i, d in enumerate(diffs):
        q = f"q{i:03d}"
        zero = 7.0 if d < 0 else 2.0
        for set_, v in (("zero", zero), ("rag", 5.0), ("full", zero + d)):
            rows.append({"judge": "j", "set": set_, "dimension": "d", "question_id": q, "score": v})
            if set_ == "rag" or q in made:
                answers.append({"set": set_, "question_id": q})
    rag = pd.DataFrame(
        {"question_id": [f"q{i:03d}" for i in range(len(diffs))], "rank": [int(h) for h in hits]}
    ).assign(retrieval_ok=True)
    return pd.DataFrame(rows), pd.DataFrame(answers), rag


def test_with_few_retrieved_the_gates_bounds_test_decides_as_with_every_bound():
    """The review's case (issue 40, H2): 6 of 320 questions retrieved, one of them with a contrary
    difference. The bounds test on those 6 alone (the old minimum of 5) cannot pass the judge
    (p 0.22), while on every question it passes (p ~1e-48); with the floor of 30 it reads 6
    retrieved and 24 missed ones and decides as with `bounds_of_missed: all`."""
    from cube.config.sections import AnalysisParams
    from cube.method.gate import bounds_test, made_items

    mix = [3.0, 2.0, 4.0, 1.0, 5.0, -6.0]
    diffs = [mix[i % 6] for i in range(320)]
    hits = [i < 6 for i in range(320)]
    weights = pd.Series({"d": 1.0})
    decisions = {}
    for name, ap in (
        ("all", AnalysisParams(bounds_of_missed="all")),
        ("floor", AnalysisParams()),
        ("old minimum", AnalysisParams(gate_bounds_questions=1)),
    ):
        grid, _, rag = _grid_and_answers(diffs, hits, set())
        made = set(bound_questions(rag, ap))
        grid, answers, _ = _grid_and_answers(diffs, hits, made)
        p, n = bounds_test(made_items(grid, answers), "j", weights)
        decisions[name] = (p < ap.gate_alpha, n)
    assert decisions["all"] == (True, 320)
    assert decisions["old minimum"] == (False, 6)  # one contrary difference of six excludes
    assert decisions["floor"] == (True, 30)  # the same decision as with every bound


def test_no_unread_bound_is_made_or_judged(runs):
    full, saving = runs
    a_all, a_s = full.load("answers"), saving.load("answers")
    missed = _missed(a_all)
    assert 0.2 < len(missed) / (len(a_all) / 3) < 0.8  # a run with misses to save on
    bounds = a_s[a_s["set"] != "rag"]
    made_missed = set(bounds["question_id"]) & missed
    retrieved = len(a_all) // 3 - len(missed)
    floor = saving.params.analysis.gate_bounds_questions
    assert 0 < retrieved < floor  # so the gate's floor takes a seeded sample of missed ones
    assert made_missed == set(missed_sample(sorted(missed), floor - retrieved, seed=0))
    assert (
        set(bounds["question_id"]) - missed
        == set(a_s.loc[a_s["set"] == "rag", "question_id"]) - missed
    )
    # the calls: two answers and their judgments per missed question outside the sample
    saved = len(missed) - len(made_missed)
    assert len(a_all) - len(a_s) == 2 * saved
    s_all, s_s = full.load("scores"), saving.load("scores")
    per_answer = s_all.groupby(["question_id", "set"]).size().iloc[0]
    assert len(s_all) - len(s_s) == 2 * saved * per_answer
    assert not s_s["error_kind"].fillna("").ne("").any()  # nothing failed, nothing skipped


def test_every_figure_is_identical(runs):
    full, saving = runs
    r_all, r_s = evaluate.evaluate_run(full), evaluate.evaluate_run(saving)
    a, b = r_all[SYSTEM], r_s[SYSTEM]
    cols = ["weighted_score", "cube_score", "in_jury", "failure_rate"]
    pd.testing.assert_frame_equal(a.cube_table[cols], b.cube_table[cols])
    pd.testing.assert_frame_equal(a.jury, b.jury)
    pd.testing.assert_frame_equal(a.trimmed_means, b.trimmed_means)
    pd.testing.assert_frame_equal(a.bootstrap, b.bootstrap)
    assert (b.cube_table["failure_rate"] == 0).all()  # a bound not made is no failure
    # the gate decides from its sample: fewer questions (the floor), the same decision here
    assert (b.cube_table["gate_questions"] < a.cube_table["gate_questions"]).all()
    assert (b.cube_table["gate_questions"] <= saving.params.analysis.gate_bounds_questions).all()
    assert (b.cube_table["gate_questions"] >= min_questions(0.05)).all()
    assert (b.cube_table["gate_p_value"] < 0.05).all() and b.cube_table["in_jury"].all()
    da, db = decide.decision(full, r_all).model_dump(), decide.decision(saving, r_s).model_dump()
    # the calls differ (that is the point) and the gate's evidence names its sample's size
    volatile = ("calls", "cost", "tokens", "evidence", "usage", "plan")

    def kept(d: dict) -> dict:
        out = {k: v for k, v in d.items() if not any(x in k for x in volatile)}
        out["systems"] = [kept(s) for s in d.get("systems", [])]
        return out

    assert kept(da) == kept(db) and da["verdict"] == db["verdict"] != "withheld"
    for by in ("department", "style"):
        ta = diagnosis.category_reports(full, SYSTEM, diagnosis.failure_patterns(full, SYSTEM))[by]
        tb = diagnosis.category_reports(saving, SYSTEM, diagnosis.failure_patterns(saving, SYSTEM))[
            by
        ]
        pd.testing.assert_frame_equal(ta, tb)
    assert np.isfinite(a.cube_table["cube_score"]).all()


def test_plan_counts_the_bounds_not_made(runs):
    from cube.run.plan import build_plan

    full, saving = runs
    plans = {
        r.params.analysis.bounds_of_missed: build_plan(r.params, base_dir=r.base_dir)
        for r in (full, saving)
    }
    answering = {k: p[p["role"] == "answering"].iloc[0] for k, p in plans.items()}
    judging = {k: int(p.loc[p["role"] == "judging", "calls"].sum()) for k, p in plans.items()}
    a = saving.load("answers")
    saved = len(_missed(a) - set(a.loc[a["set"] == "zero", "question_id"]))
    assert answering["all"]["calls"] - answering["sample"]["calls"] == 2 * saved
    assert f"bound sets: {2 * saved} calls not made" in answering["sample"]["note"]
    # the judges read what was made: their planned calls are the score rows of each run
    assert judging["sample"] == len(saving.load("scores"))
    assert judging["all"] == len(full.load("scores"))


def test_pages_say_a_bound_was_not_made(runs):
    from cube.method.tables import NOT_MADE, answers_per_set, qa_example
    from cube.pages.browser_records import build_records

    _, saving = runs
    answers, scores = saving.load("answers"), saving.load("scores")
    unmade = sorted(_missed(answers) - set(answers.loc[answers["set"] == "full", "question_id"]))
    per_set = answers_per_set(answers).set_index("set")
    assert per_set.at["full", "not_made"] == per_set.at["zero", "not_made"] == len(unmade) > 0
    assert per_set.at["rag", "not_made"] == 0 and (per_set["failed"] == 0).all()
    ex = qa_example(answers, saving.load("questions"), question_id=unmade[0], system=SYSTEM)
    assert list(ex["answer"])[0] == list(ex["answer"])[2] == NOT_MADE
    assert list(ex["answer"])[1] != NOT_MADE
    meta, records, _ = build_records(answers, scores, saving.load("questions"))
    by_q = {r["q"]: r for r in records}
    assert by_q[unmade[0]]["nm"] == [0, 2] and by_q[unmade[0]]["nr"] == "missed"
    assert "missed the gold document" in meta["not_made"]["missed"]
    assert all("nm" not in r for q, r in by_q.items() if q not in unmade)
    judged = {j[0] for j in by_q[unmade[0]]["j"]}
    assert judged == {1}  # only its rag answer was judged


def test_a_bound_not_made_says_whether_the_question_was_missed_or_of_unknown_retrieval():
    """Issue 40 review L5: a question whose system call failed (retrieval unknown) gets no bound
    either, and the browser and the QA example say so rather than 'the system missed'."""
    from cube.method.tables import NOT_MADE, NOT_MADE_UNKNOWN, qa_example
    from cube.pages.browser_records import build_records

    answers = pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3", "q3", "q3"],
            "doc_id": ["d1", "d2", "d3", "d3", "d3"],
            "system": "s",
            "set": ["rag", "rag", "zero", "rag", "full"],
            "answer": ["", "an answer", "z", "r", "f"],
            "error": ["HTTP 500", "", "", "", ""],
            "rank": [0, 0, 1, 1, 1],
            "retrieval_ok": [False, True, True, True, True],
            "retrieved_doc_ids": [[], ["d9"], [], ["d3"], ["d3"]],
        }
    )
    questions = pd.DataFrame(
        {"question_id": ["q1", "q2", "q3"], "doc_id": ["d1", "d2", "d3"], "question": "?"}
    )
    scores = pd.DataFrame(
        columns=["question_id", "system", "set", "judge", "dimension", "score", "raw", "error"]
    )
    meta, records, _ = build_records(answers, scores, questions)
    by_q = {r["q"]: r for r in records}
    assert by_q["q1"]["nr"] == "retrieval unknown" and by_q["q2"]["nr"] == "missed"
    assert "nm" not in by_q["q3"] and "nr" not in by_q["q3"]
    assert "unknown" in meta["not_made"]["retrieval unknown"]
    unknown = qa_example(answers, questions, question_id="q1", system="s")["answer"].tolist()
    assert unknown[0] == unknown[2] == NOT_MADE_UNKNOWN
    missed = qa_example(answers, questions, question_id="q2", system="s")["answer"].tolist()
    assert missed[0] == missed[2] == NOT_MADE


def _text(body: dict) -> str:
    """Every message of a request, as one text."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def test_an_llm_judge_is_sent_no_unread_bound(tmp_path, monkeypatch):
    """Requests counted at a local OpenAI-compatible server: the saving run sends none for a
    missed question's zero or full answer, and fewer in all by exactly their judgments."""
    monkeypatch.setenv("CUBE_UNREAD_KEY", "sk-unread-local")
    with OpenAIServer(reply=lambda b: "Score: 6") as server:
        judge = {
            "provider": "openai",
            "api_key_env": "CUBE_UNREAD_KEY",
            "model": "j",
            "base_url": server.url,
        }
        sent, prompts = {}, {}
        for mode in ("all", "sample"):
            server.bodies.clear()
            r = _run(
                tmp_path,
                mode,
                judges=[{"name": "llm", "model": "judge"}, JUDGES[0]],
                models={"judge": judge},
                audit={"questions": 0},
            )
            sent[mode] = len(server.bodies)
            prompts[mode] = [_text(b) for b in server.bodies]
    answers = r.load("answers")
    missed = _missed(answers) - set(answers.loc[answers["set"] != "rag", "question_id"])
    assert missed  # the missed questions outside the gate's sample
    # nothing the full run did not send, and what it sent beyond is judgments of bound answers:
    # the zero answer says it has no guide, the full one quotes the guide
    assert set(prompts["sample"]) < set(prompts["all"])
    extra = set(prompts["all"]) - set(prompts["sample"])
    assert all("没有可供参考的办事指南" in p or "根据办事指南" in p for p in extra)
    assert sent["all"] - sent["sample"] >= len(missed) * 4  # the 4 dimensions of each zero answer
    assert sent["all"] / sent["sample"] > 1.2
