"""`cube plan` against a run whose calls are counted, the question screen, the judge pilot and
cached prompt tokens: fake endpoints (tests/openai_server.py) returning what a small real model
returned in issue 22 (instruction echoes and URLs for questions, prose without a score for
judges)."""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from cube.config.model_spec import ModelSpec
from cube.config.params import parse_params
from cube.judges import load_dimensions, make_judges, score_answers
from cube.kb.corpus import build_corpus
from cube.kb.questions import QuestionError, build_questions, question_prompt_template
from cube.kb.screen import screen_questions
from cube.llm import usage_summary
from cube.llm.endpoints import call_cost
from cube.llm.tokens import ESTIMATE, count_prompt_tokens, estimate_tokens
from cube.run.ablation import TWIN_MAX_SHARE, twin_cap
from cube.run.audit import judge_audit, judge_calls, stage_requests
from cube.run.plan import build_plan, plan_text, plan_vs_actual
from cube.systems import build_answers
from tests.openai_server import OpenAIServer, last_user_message

ECHO = (
    "The question must be answerable from this guide. Name "
    "the service item in the question, so the staff "
    "know exactly which item you mean."
)
PROSE = (
    "The item is not a command or instruction to apply for "
    "the service. It's an answerable question."
)


class _Replies:
    """Replies in turn, safe for the server's request threads."""

    def __init__(self, replies: list[str]):
        self.replies, self.n, self.lock = replies, 0, threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        with self.lock:
            self.n += 1
            return self.replies[(self.n - 1) % len(self.replies)]


def _kind(body: dict[str, Any]) -> str:
    text = last_user_message(body)
    if "member of the public" in text:
        return "question"
    if "<answer-" in text:
        return "judge"
    return "answer"


def _good_reply(body: dict[str, Any]) -> str:
    kind, text = _kind(body), last_user_message(body)
    if kind == "question":
        name = re.search(r"^Item Name: (.+)$", text, re.MULTILINE).group(1)
        return f"What documents do I need for {name}?"
    if kind == "judge":
        return "Score: 7"
    # distinct answers per set (0, 1 or 2 documents seen): identical judge prompts would be one
    # cached call
    seen = str(body["messages"][0].get("content", "")).count(" index=")
    return f"You need your ID card and {seen} application forms."


def _params(url: str, tmp_path: Path, **over: Any) -> Any:
    spec = {
        "model": "m",
        "base_url": url,
        "price_input_per_m": 2.0,
        "price_output_per_m": 8.0,
        "batch_price_input_per_m": 1.0,
        "batch_price_output_per_m": 4.0,
        "max_tokens": 64,
    }
    data = {
        "run": "plan",
        "lang": "en",
        "corpus": {"source": "demo", "n_items": 6, "seed": 3},
        "models": {"m": spec},
        "questions": {"generator": "llm", "model": "m"},
        "answerer": "m",
        "systems": [
            {"kind": "builtin", "name": "bm25", "top_n": 2},
            {"kind": "builtin", "name": "bm25-3", "top_n": 3},
        ],
        "dimensions": ["relevance", "quality"],
        "judges": [
            {"name": "llm", "model": "m", "samples": 2},
            {"name": "rubric", "model": {"provider": "offline", "model": "rubric-lenient"}},
        ],
        "diagnostics": {"refusal_questions": 3},
        "cache_path": str(tmp_path / "cache.sqlite"),
    }
    data.update(over)
    return parse_params(data)


def _run_counted(params: Any, cache: Path) -> dict[tuple[str, str], int]:
    """The stages' calls (questions, answers with refusal answers, scores) as usage_summary counts
    them."""
    from cube.kb.refusal_questions import build_refusal_set
    from cube.systems import refusal_answers

    corpus = build_corpus(params)
    questions = build_questions(params, corpus, cache)
    answers = build_answers(params, corpus, questions, cache, progress=False)
    refusals = refusal_answers(params, corpus, build_refusal_set(params, corpus)[0], cache)
    judges, dims = make_judges(params, cache), load_dimensions(params)
    scores = score_answers(answers, judges, dims, corpus, questions=questions, progress=False)
    n_judge = judge_calls(judges, stage_requests(judges, answers, corpus, questions, dims))
    audit, _, _ = judge_audit(
        params, judges, dims, corpus, questions, answers, n_judge, progress=False
    )  # stage 03's too
    usage = usage_summary([questions, answers, refusals, scores, audit])
    return {(r["role"], r["model"]): r for r in usage.to_dict("records")}


def _twin_bound(rows: dict, per_answer: dict[str, int]) -> dict[tuple[str, str], int]:
    """The twins' calls `cube plan` counts per judge model (an upper bound): the cap (at most
    `TWIN_MAX_SHARE` of the planned judge calls, in answers) x the judge's calls per answer."""
    judging = sum(r["calls"] for (role, _), r in rows.items() if role == "judging")
    cap = twin_cap(judging, sum(per_answer.values()))
    assert cap > 0
    return {("audit", m): cap * n for m, n in per_answer.items()}


def test_plan_counts_no_twin_with_the_audit_off(tmp_path: Path):
    with OpenAIServer(reply=_good_reply, tokenize=True) as server:
        params = _params(server.url, tmp_path, audit={"questions": 0})
        plan = build_plan(params, base_dir=tmp_path, cache_path=None)
    assert "audit" not in set(plan["role"])


def test_plan_equals_the_calls_a_run_sends(tmp_path: Path):
    with OpenAIServer(reply=_good_reply, tokenize=True) as server:
        params = _params(server.url, tmp_path)
        cache = Path(params.cache_path)
        plan = build_plan(params, base_dir=tmp_path, cache_path=cache)
        assert server.requests_total == 0  # planning sends no call
        assert server.tokenize_requests > 0
        used = _run_counted(params, cache)
        rows = {(r["role"], r["model"]): r for r in plan.to_dict("records")}
        # the screen's ablation twins: an upper bound (no answer here speaks to a grader: none)
        bound = _twin_bound(rows, {"m": 4, "rubric-lenient": 2})
        assert set(rows) == set(used) | {("audit", "m"), ("audit", "rubric-lenient")}
        for key, r in rows.items():
            assert r["calls"] == used.get(key, {"calls": 0})["calls"] + bound.get(key, 0), key
        assert "ablation twins: at most" in rows[("audit", "m")]["note"]
        # every LLM call reached the server once: planned to send == sent (and the twins' bound)
        sent = server.requests_total + bound[("audit", "m")]
        assert int(plan.loc[plan["model"] == "m", "to_send"].sum()) == sent
        q = rows[("question_generation", "m")]
        # the question prompts are known before the run: the server's tokenizer counts what it
        # reports
        assert q["tokens_by"].startswith("server tokenize route") and q["exact"]
        assert (
            "template's tokens not counted" in q["tokens_by"]
        )  # no answered call to measure them yet
        assert q["prompt_tokens"] == used[("question_generation", "m")]["input_tokens"]
        assert not rows[("judging", "m")]["exact"]  # judges read answers not written yet: stand-ins
        # 6 questions x (rag of 2 systems + zero + full, the bounds shared by both systems'
        # answerer), + 3 refusal questions answered by each system; a request both systems send (the
        # same documents retrieved) is one call, and its answer is judged once
        dup = 6 * 4 + 3 * 2 - rows[("answering", "m")]["calls"]
        assert 0 < dup < 6  # top-2 and top-3 retrieve the same from this 6-item corpus now and then
        assert (
            rows[("judging", "m")]["calls"] == 2 * rows[("judging", "rubric-lenient")]["calls"]
        )  # 2 samples

        again = build_plan(
            params, base_dir=tmp_path, cache_path=cache
        )  # after the run: the cache holds them
    q2 = again.set_index(["role", "model"]).loc[("question_generation", "m")]
    assert q2["cached_calls"] == q2["calls"] == 6 and q2["to_send"] == 0 and q2["cost"] == 0.0
    assert (
        "0 for user" in q2["tokens_by"] and q2["prompt_tokens"] == q["prompt_tokens"]
    )  # this server adds none
    assert str(q2["latency_from"]).startswith("median of")
    j = again.set_index(["role", "model"]).loc[("judging", "m")]
    assert j["to_send"] == j["calls"]  # judge prompts hold stand-in answers: never taken as cached


def test_plan_counts_the_audit_calls_the_run_sends_capped_by_its_share(tmp_path: Path):
    """Real answers (template questions, an offline answerer): the audit's calls (role 'audit') are
    planned as stage 03 sends them, for the LLM judge and the offline one, capped by
    audit.max_share."""
    with OpenAIServer(reply=_good_reply, tokenize=True) as server:
        params = _params(
            server.url,
            tmp_path,
            questions={"generator": "template", "seed": 3},
            answerer={"provider": "offline", "model": "extractive"},
            systems=[{"kind": "builtin", "name": "top2", "top_n": 2}],
            audit={"questions": 40, "max_share": 0.5},
        )
        cache = Path(params.cache_path)
        plan = build_plan(params, base_dir=tmp_path, cache_path=cache)
        used = _run_counted(params, cache)
    rows = {(r["role"], r["model"]): r for r in plan.to_dict("records")}
    bound = _twin_bound(rows, {"m": 4, "rubric-lenient": 2})
    for model in ("m", "rubric-lenient"):
        probes = rows[("audit", model)]["calls"] - bound[("audit", model)]
        assert probes == used[("audit", model)]["calls"] > 0, model
    llm = rows[("audit", "m")]  # its prompts stand in: not exact, never taken as cached
    assert not llm["exact"] and llm["to_send"] == llm["calls"] and llm["prompt_tokens"] > 0
    planned_judging = rows[("judging", "m")]["calls"] + rows[("judging", "rubric-lenient")]["calls"]
    planned_audit = rows[("audit", "m")]["calls"] + rows[("audit", "rubric-lenient")]["calls"]
    assert planned_audit <= (0.5 + TWIN_MAX_SHARE) * planned_judging  # the caps
    assert "capped at 50% of the judge calls" in rows[("audit", "m")]["note"]
    assert rows[("audit", "m")]["batch_cost"] > 0  # `cube batch` exports the audit's calls too


def test_plan_arithmetic(tmp_path: Path):
    with OpenAIServer(reply=_good_reply, tokenize=True) as server:
        params = _params(server.url, tmp_path)
        plan = build_plan(params, base_dir=tmp_path, cache_path=None).set_index(["role", "model"])
    j = plan.loc[("judging", "m")]
    assert j["cost"] == pytest.approx(
        (2.0 * j["prompt_tokens"] + 8.0 * j["completion_tokens"]) / 1e6
    )
    assert j["batch_cost"] == pytest.approx(
        (1.0 * j["prompt_tokens"] + 4.0 * j["completion_tokens"]) / 1e6
    )
    assert j["completion_tokens_max"] == 64 * j["calls"]
    assert math.isnan(plan.loc[("answering", "m"), "batch_cost"])  # only judges are sent as batches
    assert (
        math.isnan(j["time_s"]) and "no cached call" in j["latency_from"]
    )  # no latency measured: no time
    assert plan.loc[("judging", "rubric-lenient"), "cost"] == 0.0
    assert "total: calls" in plan_text(plan.reset_index())


def test_plan_time_from_pilot_calls(tmp_path: Path):
    with OpenAIServer(reply=_good_reply, latency_s=0.05) as server:
        params = _params(server.url, tmp_path, questions={"generator": "llm", "model": "m"})
        plan = build_plan(params, base_dir=tmp_path, cache_path=tmp_path / "c.sqlite", pilot=2)
        sent = server.requests_total
    r = plan.set_index(["role", "model"]).loc[("question_generation", "m")]
    assert sent == 2 and r["latency_from"] == "median of 2 pilot calls" and r["latency_s"] >= 0.05
    conc = r["concurrency"]
    assert r["time_s"] == pytest.approx(r["to_send"] * r["latency_s"] / min(conc, r["to_send"]))
    assert (
        r["cached_calls"] == 0
    )  # the pilot ran after the cache was read: it takes no call off the plan


def test_plan_vs_actual_pairs_roles_and_models():
    plan = [
        {
            "role": "judging",
            "model": "m",
            "calls": 4,
            "prompt_tokens": 100,
            "completion_tokens": 8,
            "cost": 0.1,
            "time_s": 2.0,
        }
    ]
    usage = [
        {
            "role": "judging",
            "model": "m",
            "calls": 4,
            "input_tokens": 98,
            "output_tokens": 9,
            "cost_this_run": 0.09,
        },
        {"role": "answering", "model": "x", "calls": 3},
    ]
    out = plan_vs_actual(plan, usage)
    assert out[0]["planned_calls"] == out[0]["calls"] == 4 and out[0]["input_tokens"] == 98
    assert out[1]["model"] == "x" and out[1]["planned_calls"] is None and out[1]["calls"] == 3


def test_token_estimate_is_stated_without_a_tokenizer():
    spec = ModelSpec(model="some-remote-model", base_url="https://llm.example.com/v1")
    got = count_prompt_tokens(spec, ["abcdefgh", "办理材料"])
    assert got.method == ESTIMATE and got.counts == [2, 4] == [
        estimate_tokens("abcdefgh"),
        estimate_tokens("办理材料"),
    ]


# ----------------------------------------------------------------------------------- cached tokens
def test_cached_prompt_tokens_recorded_and_priced(tmp_path: Path):
    with OpenAIServer(reply=lambda body: "Score: 7", cached_tokens=3) as server:
        spec = ModelSpec(
            model="m",
            base_url=server.url,
            price_input_per_m=1.0,
            price_cached_input_per_m=0.1,
            price_output_per_m=0.0,
        )
        from cube.llm import Request, make_model

        model = make_model(spec, tmp_path / "c.sqlite")
        resp = model.complete(
            [Request(({"role": "user", "content": "one two three four five"},))],
            role="judging",
            progress=False,
        )[0]
        replay = model.complete(
            [Request(({"role": "user", "content": "one two three four five"},))],
            role="judging",
            progress=False,
        )[0]
    assert resp.input_tokens == 5 and resp.cached_input_tokens == 3
    assert resp.cost == pytest.approx((2 * 1.0 + 3 * 0.1) / 1e6)
    assert (
        replay.cached
        and replay.cached_input_tokens == 3
        and replay.cost == pytest.approx(resp.cost)
    )
    assert call_cost(
        spec.model_copy(update={"price_cached_input_per_m": None}), 5, 0, 3
    ) == pytest.approx(5e-6)
    from cube.llm import response_accounting

    table = pd.DataFrame([{**response_accounting(resp, "judging")}])
    assert usage_summary([table]).loc[0, "cached_input_tokens"] == 3


def test_judge_prompts_keep_their_fixed_part_first():
    """Provider prefix caches hit only on a shared prefix: the template's own text comes before any
    filled value, and the three sets of one question (same question and document) differ only at the
    end."""
    params = parse_params(
        {
            "run": "t",
            "lang": "en",
            "dimensions": ["relevance", "specificity", "completeness", "quality"],
            "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
        }
    )
    from cube.judges.dimensions import fill_template

    for d in load_dimensions(params):
        first = min(d.template.index(p) for p in ("{question}", "{document}", "{answer}"))
        before_answer = fill_template(
            d.template.split("{answer}")[0], question="Q?", document="DOC"
        )
        assert first > 200, d.name  # the instructions come first
        assert d.fill("Q?", "DOC", "answer one").startswith(before_answer)
        assert d.fill("Q?", "DOC", "another").startswith(before_answer)
        assert len(before_answer) > 0.8 * len(d.fill("Q?", "DOC", "")), (
            d.name
        )  # the answer comes (nearly) last


# ----------------------------------------------------------------------------------- the screen
ISSUE_QUESTIONS = [ECHO] * 10 + [
    "Requirements: the question must be answerable from this "
    "guide, and one question, one sentence, at most 30 words.",
    "Output only the question itself: no numbering, quotation marks, explanation or answer.",
    "Use natural, everyday English: one question, one sentence.",
    "Name the service item in the question so the staff know exactly which item you mean.",
    "As that citizen, write the one question you would most "
    "likely ask when applying for this service.",
    "https://www.gov.example.com/services/guide",
    "www.example.org",
]


def test_screen_catches_what_a_small_model_wrote():
    corpus = build_corpus(
        parse_params(
            {
                "run": "t",
                "lang": "en",
                "corpus": {"n_items": 20, "seed": 1},
                "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
            }
        )
    )
    names = corpus["item_name"].tolist()
    texts = ISSUE_QUESTIONS + [
        f"What documents do I need for {names[17]}?",
        f"How long does {names[18]} take?",
        f"What documents do I need for {names[17]}?",
    ]
    q = pd.DataFrame({"question": texts, "doc_id": corpus["doc_id"].tolist()[:20]})
    q.loc[19, "doc_id"] = corpus["doc_id"].iloc[17]
    reasons = screen_questions(q, corpus, question_prompt_template("en"))
    assert reasons.iloc[:15].eq("instruction_echo").all(), reasons.iloc[:15].tolist()
    assert reasons.iloc[15:17].eq("url").all()
    assert reasons.iloc[17:19].eq("").all()
    assert reasons.iloc[19] == "near_duplicate"
    more = pd.DataFrame(
        {"question": ["I like this office", "What time is it?"], "doc_id": corpus["doc_id"][:2]}
    )
    assert screen_questions(more, corpus, question_prompt_template("en")).tolist() == [
        "not_a_question",
        "names_no_service",
    ]


def _write_params(tmp_path: Path, url: str, **over: Any) -> Path:
    data = {
        "run": "screen",
        "lang": "en",
        "corpus": {"source": "demo", "n_items": 20, "seed": 1},
        "models": {"m": {"model": "m", "base_url": url}},
        "questions": {"generator": "llm", "model": "m"},
        "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
        "outputs_dir": str(tmp_path / "out"),
        "cache_path": str(tmp_path / "cache.sqlite"),
    }
    data.update(over)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_run_stops_with_one_line_when_questions_are_garbage(tmp_path: Path):
    """Issue 22: 15 of 20 'questions' echoed the prompt, 2 were URLs; the run went on for 40
    minutes."""
    from cube.run import pipeline
    from cube.run.notebook import open_run

    with OpenAIServer(
        reply=_Replies(ISSUE_QUESTIONS + ["What documents do I need for the licence?"] * 3)
    ) as server:
        run = open_run(str(_write_params(tmp_path, server.url)), None)
        pipeline.corpus_stage(run)
        with pytest.raises(QuestionError) as err:
            pipeline.questions_stage(run)
        assert server.requests_total == 20
    msg = str(err.value)
    assert (
        "\n" not in msg
        and "of 20 generated questions are usable" in msg
        and "instruction_echo 15" in msg
    )
    assert "url 2" in msg
    assert not run.data_path("questions").exists()  # nothing is answered
    failed = pd.read_parquet(run.data_path("questions_failed"))
    assert failed["error"].str.startswith("screen: ").sum() >= 17


def test_screen_counts_on_page_02_and_good_questions_pass(tmp_path: Path):
    from cube.run import pipeline
    from cube.run.notebook import open_run

    with OpenAIServer(reply=_good_reply) as server:
        run = open_run(str(_write_params(tmp_path, server.url)), None)
        pipeline.corpus_stage(run)
        questions = pipeline.questions_stage(run)
    table = pipeline.question_screen_table(run).set_index("reason")
    assert table.loc["usable", "questions"] == len(questions) == 20
    assert table["questions"].sum() == 20


# ----------------------------------------------------------------------------------- the judge
# pilot
def _answers(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    corpus = build_corpus(
        parse_params(
            {
                "run": "t",
                "lang": "en",
                "corpus": {"n_items": n, "seed": 2},
                "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
            }
        )
    )
    rows = [
        {
            "question_id": f"Q{i:03d}",
            "doc_id": d,
            "system": "s",
            "set": s,
            "answer": f"Bring your ID card ({s}).",
            "question": f"What do I need for {name}?",
        }
        for i, (d, name) in enumerate(zip(corpus["doc_id"], corpus["item_name"], strict=True))
        for s in ("zero", "rag", "full")
    ]
    return pd.DataFrame(rows), corpus


@pytest.mark.parametrize("insist", [False, True])
def test_pilot_stops_a_judge_whose_replies_do_not_parse(tmp_path: Path, insist: bool):
    """Issue 22: 235 of 240 judge replies were prose without a score, judged for 26 minutes."""
    answers, corpus = _answers(20)  # 60 answers x 4 dimensions = 240 calls
    with OpenAIServer(reply=lambda body: PROSE) as server:
        params = parse_params(
            {
                "run": "t",
                "lang": "en",
                "models": {"m": {"model": "m", "base_url": server.url}},
                "judges": [
                    {"name": "small", "model": "m", "insist": insist},
                    {"name": "rubric", "model": {"provider": "offline", "model": "rubric"}},
                ],
            }
        )
        judges = make_judges(params, tmp_path / "c.sqlite")
        scores = score_answers(answers, judges, load_dimensions(params), corpus, progress=False)
        sent = server.requests_total
    report = judges[0].pilot_report
    assert report["pilot_calls"] == 20 and report["parsed"] == 0 and report["examples"][0] == PROSE
    small = scores[scores["judge"] == "small"]
    assert len(small) == 240 and len(scores[scores["judge"] == "rubric"]) == 240
    if insist:
        assert (
            sent == 240
            and report["decision"] == "continued (insist)"
            and report["calls_not_sent"] == 0
        )
        assert small["error_kind"].eq("parse").all()
    else:
        assert sent == 20 and report["decision"] == "stopped" and report["calls_not_sent"] == 220
        assert (
            small["error_kind"].eq("pilot").sum() == 220
            and small["error_kind"].eq("parse").sum() == 20
        )
        assert (
            small.loc[small["error_kind"] == "pilot", "error"]
            .str.contains("stopped by its pilot")
            .all()
        )
        assert usage_summary([small]).loc[0, "calls"] == 20  # the calls not sent are not calls
        # the gate excludes a judge its pilot stopped, naming the pilot (its few pilot rows are no
        # jury member)
        from cube.config.sections import AnalysisParams
        from cube.method.evaluation import evaluate

        ranked = answers.assign(rank=1, n_retrieved=1, retrieval_ok=True)
        result = evaluate(ranked, scores, AnalysisParams(bootstrap=0), 8)
        assert (
            "small" not in result.jury_judges
            and "stopped by its pilot" in result.excluded_judges["small"]
        )


def test_pilot_lets_a_judge_whose_replies_parse_go_on(tmp_path: Path):
    answers, corpus = _answers(10)
    with OpenAIServer(
        reply=_Replies(["Score: 7", PROSE])
    ) as server:  # half of them parse: not under half
        params = parse_params(
            {
                "run": "t",
                "lang": "en",
                "models": {"m": {"model": "m", "base_url": server.url, "max_concurrency": 1}},
                "dimensions": ["relevance"],
                "judges": [{"name": "small", "model": "m", "pilot": 10}],
            }
        )
        judges = make_judges(params, tmp_path / "c.sqlite")
        score_answers(answers, judges, load_dimensions(params), corpus, progress=False)
        assert server.requests_total == 30
    assert (
        judges[0].pilot_report["decision"] == "continued" and judges[0].pilot_report["parsed"] == 5
    )


def test_plan_reads_the_answers_an_offline_answerer_gives(tmp_path: Path):
    """Template questions and an offline answerer: the plan computes the answers an LLM judge will
    read (no call), so equal answers of two systems are judged once there too, and the prompts are
    real."""
    with OpenAIServer(reply=_good_reply, tokenize=True) as server:
        params = _params(
            server.url,
            tmp_path,
            questions={"generator": "template", "seed": 3},
            answerer={"provider": "offline", "model": "extractive"},
            systems=[
                {"kind": "builtin", "name": "top2", "top_n": 2},
                {"kind": "builtin", "name": "top8", "top_n": 8},
            ],
        )
        cache = Path(params.cache_path)
        plan = build_plan(params, base_dir=tmp_path, cache_path=cache)
        used = _run_counted(params, cache)
        sent = server.requests_total
    rows = {(r["role"], r["model"]): r for r in plan.to_dict("records")}
    judge = rows[("judging", "m")]
    assert (
        judge["exact"]
        and judge["calls"] == used[("judging", "m")]["calls"] == judge["to_send"] == sent
    )
    assert (
        judge["prompt_tokens"] == used[("judging", "m")]["input_tokens"]
    )  # the server's own count
    assert judge["calls"] < 6 * 4 * 2 * 2  # some answers of top-2 and top-8 are equal: judged once


def test_pilot_decides_on_the_share_of_dimension_scores_that_parse():
    """An all-dimensions judge missing one of four dimension scores in 12 of 20 replies parses 85 %
    of its scores: the gate counts failures per score row, so the pilot must not stop it (it did: 8
    of 20 replies had every dimension)."""
    from types import SimpleNamespace

    from cube.judges.scoring import pilot_decision

    def reply(n_parse_failures: int) -> list[dict[str, Any]]:
        return [
            {"error_kind": "parse" if d < n_parse_failures else "", "raw": '{"relevance": 7}'}
            for d in range(4)
        ]

    judge = SimpleNamespace(name="all4", pilot_min_parsed=0.5, insist=False)
    report = pilot_decision(judge, [reply(1)] * 12 + [reply(0)] * 8, remaining=100)
    assert report["decision"] == "continued" and report["parsed_share"] == pytest.approx(68 / 80)
    assert report["parsed"] == 68 and report["scores"] == 80 and report["replies"] == 20
    low = pilot_decision(judge, [reply(3)] * 20, remaining=100)  # 20 of 80 scores parse: stopped
    assert low["decision"] == "stopped" and low["parsed_share"] == pytest.approx(0.25)
    assert "20 of 80 dimension scores" in low["reason"]


def test_screen_table_counts_failed_generations_apart_from_usable():
    """Failed generations (empty question, `error` "call failed: ...") are not usable: page 02 said
    usable 3, share 1.0, while results.json said 1."""
    from cube.kb.screen import screen_table

    q = pd.DataFrame(
        {
            "question": ["What do I need for the licence?", "", ""],
            "error": ["", "call failed: timeout", "call failed: timeout"],
        }
    )
    table = screen_table(q, pd.Series(["", "", ""], index=q.index)).set_index("reason")
    assert table.loc["usable", "questions"] == 1 and table.loc["usable", "share"] == pytest.approx(
        1 / 3
    )
    assert table.loc["generation_failed", "questions"] == 2
    assert "call failed: timeout" in table.loc["generation_failed", "examples"]
    assert table["questions"].sum() == 3


def test_screen_drops_a_near_copy_of_the_same_document_that_adds_rare_words():
    """A near-copy with one rare character more (Jaccard >= 0.8 with an earlier question of the same
    document) is dropped although its rarest tokens are new; across documents only the same words
    count."""
    from cube.kb import screen

    corpus = pd.DataFrame(
        {"doc_id": ["D1", "D2"], "item_name": ["居民身份证换领", "居民身份证换领"]}
    )
    first = "请问居民身份证换领需要带哪些材料？"
    copy = "请问居民身份证换领需要携带哪些材料？"  # 携: two new bigrams, the copy's rarest tokens
    q = pd.DataFrame(
        {
            "question": [first, "居民身份证换领要多久？", copy, first, copy],
            "doc_id": ["D1", "D1", "D1", "D2", "D2"],
        }
    )
    a, b = screen._tokens(first), screen._tokens(copy)
    assert len(a & b) / len(a | b) >= screen.DUPLICATE_JACCARD
    reasons = screen_questions(q, corpus, question_prompt_template("zh"))
    # row 3: the same words as row 0 on another document; row 4: a near copy of row 0 only (another
    # document)
    assert reasons.tolist() == ["", "", "near_duplicate", "near_duplicate", ""]


def test_the_documented_template_token_source_is_the_one_the_code_uses():
    """review: the module said a local server's chat-template tokens are "measured by one probe call
    per role sequence"; they come from calls already answered (the cache's, or `--pilot`'s), no new
    call."""
    from cube.llm.tokens import OBSERVED
    from cube.run import plan

    doc = " ".join(plan.__doc__.split())
    assert "probe call" not in doc
    assert f"median of up to {OBSERVED} calls already answered per role sequence" in doc
