"""Issue 20: the judge audit inside a run: self-preference of a judge whose model answered, and the
audit's cost capped by `audit.max_share` of the run's judge calls (what stage 03 records, what
notebook 11, the decision page and results.json say).

A local OpenAI-compatible server (127.0.0.1, tests/openai_server.py) is both the answering model
and two LLM judges: `self` on the answerer's own `models:` entry, `other` on another model name;
`self` scores every answer 9, `other` by a hash of its prompt, so `self` prefers its model's
answers."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from cube.config.params import parse_params
from cube.pages.decision import decision_markdown
from cube.run import audit, decide, pipeline
from cube.run.evaluate import evaluate_run
from cube.run.notebook import open_run
from tests.openai_server import OpenAIServer, last_user_message

PARAMS = """run: a
lang: zh
outputs_dir: {out}
corpus: {{source: demo, n_items: 12, seed: 1}}
questions: {{generator: template, seed: 1}}
models:
  ans: {{provider: openai, model: ans, base_url: "{url}", max_tokens: 64}}
  other: {{provider: openai, model: other, base_url: "{url}", max_tokens: 16}}
answerer: ans
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
dimensions: [relevance, completeness]
judges:
  - {{name: self, model: ans}}
  - {{name: other, model: other}}
  - {{name: rubric, model: {{provider: offline, model: rubric-strict}}}}
analysis: {{bootstrap: 0}}
audit: {{questions: {questions}, max_share: {share}}}
"""


def reply(body: dict) -> str:
    text = last_user_message(body)
    if "<answer-" in text or "Score" in text and "0-10" in text:  # a judge's prompt
        if body.get("model") == "ans":
            return "Score: 9"
        return f"Score: {hashlib.sha256(text.encode()).digest()[0] % 8}"
    if body.get("model") != "ans":  # another answering model writes other answers
        n = int(hashlib.sha256(("other" + text).encode()).hexdigest()[:4], 16)
        return (
            f"依据相关规定，该事项在{n % 30 + 1}个工作日内办结，"
            f"每件收费{n % 97}元，电话0571-{n:05d}。"
        )
    digest = hashlib.sha256(text.encode()).hexdigest()
    n = int(digest[:4], 16)
    return (
        f"根据办事指南，办理该事项需要{n % 30 + 1}个工作日。"
        f"收费标准为每件{n % 97}元。咨询电话0571-{n:05d}。"
    )


def partial(body: dict) -> str:
    """`reply`, but the `ans` judge scores like the others plus 3 on its own model's answers (the
    phrase only they have): self-preference of 3 points, no leniency elsewhere."""
    text = last_user_message(body)
    if body.get("model") == "ans" and ("<answer-" in text or "Score" in text and "0-10" in text):
        base = hashlib.sha256(text.encode()).digest()[0] % 6
        return f"Score: {base + 3 * ('根据办事指南' in text)}"
    return reply(body)


def _run(tmp_path: Path, questions: int = 40, share: float = 1.0):
    server = OpenAIServer(reply=reply)
    server.__enter__()
    params = tmp_path / "p.yaml"
    params.write_text(
        PARAMS.format(out=tmp_path / "out", url=server.url, questions=questions, share=share),
        encoding="utf-8",
    )
    run = open_run(params)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    return run, server


@pytest.fixture(scope="module")
def uncapped(tmp_path_factory):
    run, server = _run(tmp_path_factory.mktemp("self"))
    try:
        yield run
    finally:
        server.__exit__(None, None, None)


def test_a_judge_whose_model_answered_is_not_measured_without_answers_of_another_model(uncapped):
    # one system, answered by the judge's own model: no control, so leniency (self scores every
    # answer 9) cannot be told from self-preference: not measurable with the cause, never a number
    # (was +7.10)
    run = uncapped
    assert audit.self_judges(run.params, "bm25") == {"self": ("zero", "rag", "full")}
    report = audit.audit_report(run)
    sp = report.loc["self"]
    assert sp["self_preference_items"] > 20 and sp["self_preference_control_items"] == 0
    assert math.isnan(sp["self_preference"]) and "another model" in sp["self_preference_note"]
    assert sp["leniency"] > 2  # what the old figure measured
    # the other judges did not answer: no figure, not a 0
    assert math.isnan(report.at["other", "self_preference"]) and math.isnan(
        report.at["rubric", "self_preference"]
    )


def test_unmeasurable_self_preference_reaches_results_json_and_decision_page_only_for_that_judge(
    uncapped,
):
    run = uncapped
    out = decide.decision(run, evaluate_run(run, bootstrap=False))
    recorded = json.loads(run.paths.results.read_text(encoding="utf-8"))["audit"]["judges"]
    assert (
        recorded["self"]["self_preference"] is None
        and "another model" in recorded["self"]["self_preference_note"]
    )
    assert (
        "self_preference" not in recorded["other"] and "self_preference" not in recorded["rubric"]
    )
    assert set(out.self_preference) == {"self"}
    lines = [x for x in decision_markdown(out).splitlines() if "self-preference" in x]
    assert len(lines) == 1 and lines[0].startswith("- self-preference of self: not measurable")
    assert "+" not in lines[0].split(":", 1)[1]


TWO_MODELS = PARAMS.replace(
    "systems: [{{kind: builtin, name: bm25, top_n: 4}}]",
    "systems: [{{kind: builtin, name: bm25, top_n: 4}}, "
    "{{kind: builtin, name: bm25-other, top_n: 4, answerer: other}}]",
)


def _two_models_report(tmp_path: Path, judge_reply) -> pd.DataFrame:
    server = OpenAIServer(reply=judge_reply)
    server.__enter__()
    try:
        params = tmp_path / "p.yaml"
        params.write_text(
            TWO_MODELS.format(out=tmp_path / "out", url=server.url, questions=40, share=1.0),
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (
            pipeline.corpus_stage,
            pipeline.questions_stage,
            pipeline.answers_stage,
            pipeline.scores_stage,
        ):
            stage(run)
        return audit.audit_report(run)
    finally:
        server.__exit__(None, None, None)


def test_a_lenient_judge_is_not_reported_as_self_preferring_when_another_model_answered_too(
    tmp_path,
):
    # `self` scores every answer 9, its model's and the other model's alike: leniency, not
    # self-preference
    report = _two_models_report(tmp_path, reply)
    sp = report.loc["self"]
    assert (
        sp["leniency"] > 2
        and sp["self_preference_items"] > 20
        and sp["self_preference_control_items"] > 20
    )
    assert (
        abs(sp["self_preference"]) < 1.0
        and sp["self_preference_lo"] <= 0 <= sp["self_preference_hi"]
    )
    assert sp["self_preference_note"] == ""


def test_a_judge_adding_3_points_to_its_own_models_answers_is_measured_at_about_3(tmp_path):
    sp = _two_models_report(tmp_path, partial).loc["self"]
    assert sp["self_preference"] == pytest.approx(3.0, abs=1.0) and sp["self_preference_lo"] > 0


def test_two_models_entries_of_one_provider_endpoint_and_model_are_the_same_model():
    # temperature 0.7 to answer, 0 to judge: the same model judging its own answers (was missed)
    data = {
        "run": "x",
        "models": {
            "gpt_answer": {
                "provider": "openai",
                "model": "gpt-4o",
                "base_url": "https://api.openai.com/v1",
                "temperature": 0.7,
            },
            "gpt_judge": {
                "provider": "openai",
                "model": "gpt-4o",
                "base_url": "https://api.openai.com/v1",
                "temperature": 0.0,
            },
            "gpt_mini": {
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": "https://api.openai.com/v1",
            },
        },
        "answerer": "gpt_answer",
        "systems": [{"kind": "builtin", "name": "bm25", "top_n": 4}],
        "judges": [
            {"name": "named", "model": "gpt_judge"},
            {"name": "mini", "model": "gpt_mini"},
            {"name": "same_entry", "model": "gpt_answer"},
        ],
    }
    assert audit.self_judges(parse_params(data), "bm25") == {
        "named": ("zero", "rag", "full"),
        "same_entry": ("zero", "rag", "full"),
    }


def test_no_self_preference_when_no_judge_answered():
    data = {
        "run": "x",
        "answerer": {"provider": "offline", "model": "extractive"},
        "systems": [{"kind": "builtin", "name": "bm25", "top_n": 4}],
        "judges": [
            {"name": "rubric", "model": {"provider": "offline", "model": "rubric-strict"}},
            {
                "name": "llm",
                "model": {
                    "provider": "openai",
                    "model": "extractive",
                    "base_url": "http://127.0.0.1:9/v1",
                },
            },
        ],
    }
    assert (
        audit.self_judges(parse_params(data), "bm25") == {}
    )  # same model name, another provider: not the same
    same = dict(
        data, judges=[{"name": "twin", "model": {"provider": "offline", "model": "extractive"}}]
    )
    assert audit.self_judges(parse_params(same), "bm25") == {"twin": ("zero", "rag", "full")}


def test_at_max_share_1_the_audit_costs_at_most_the_judging_and_the_records_say_so(uncapped):
    rec = json.loads(uncapped.paths.results.read_text(encoding="utf-8"))
    sample = rec["audit_sample"]
    # one system: 3 answers a question judged, 4 probes a question audited, so even share 1 caps it
    assert sample["questions"] == min(40, sample["judge_calls"] // sample["calls_per_question"]) > 0
    assert (
        0.15 < rec["audit_share_of_judge_calls"] <= 1.0
        and rec["audit_calls"] == sample["audit_calls"]
    )


def test_the_audit_is_capped_at_its_share_of_the_judge_calls(tmp_path):
    run, server = _run(tmp_path, questions=40, share=0.5)
    try:
        rec = json.loads(run.paths.results.read_text(encoding="utf-8"))
        sample = rec["audit_sample"]
        assert sample["capped"] and 0 < sample["questions"] < 12
        # measured from the run's own records: the audit's calls against the judges'
        assert 0 < rec["audit_calls"] <= 0.5 * sample["judge_calls"]
        assert rec["audit_share_of_judge_calls"] <= 0.5
        note = audit.audit_sample_note(run)
        assert re.search(r"shrank from 40 to \d+ questions", note) and "audit.max_share" in note
        report = audit.audit_report(run)
        # too few pairs left: no verdict (the gate reads it as no evidence), and the verdict names
        # the cap
        few = report[report["pairs"] < run.params.audit.min_pairs]
        assert len(few) and few["content_blind"].isna().all()
        assert (
            few["audit"].str.contains("audit inconclusive").all()
            and few["audit"].str.contains("shrank").all()
        )
    finally:
        server.__exit__(None, None, None)


def _batch_judge_calls(run, params: Path, monkeypatch) -> int:
    """The judge calls `cube batch` caps the audit with (what it hands `audit_probes`)."""
    from cube.run.batch import stage_calls

    seen = {}
    real = audit.audit_probes

    def spy(params_, corpus, questions, answers, judge_calls):
        seen["judge_calls"] = judge_calls
        return real(params_, corpus, questions, answers, judge_calls)

    monkeypatch.setattr(audit, "audit_probes", spy)
    monkeypatch.chdir(params.parent)
    stage_calls(params)
    return seen["judge_calls"]


def test_the_recorded_pilot_is_the_judging_pilot_not_the_audits(tmp_path, monkeypatch):
    # `other`'s first 20 judging replies do not parse: its pilot stops it; the audit's scoring must
    # not overwrite that record (it did: 'calls_not_sent' 0, no warning)
    seen = {"n": 0}

    def shy(body: dict) -> str:
        r = reply(body)
        if body.get("model") == "other" and r.startswith("Score"):
            seen["n"] += 1
            if seen["n"] <= 20:
                return "I would rather not say."
        return r

    server = OpenAIServer(reply=shy)
    server.__enter__()
    try:
        params = tmp_path / "p.yaml"
        params.write_text(
            PARAMS.format(out=tmp_path / "out", url=server.url, questions=40, share=1.0),
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (pipeline.corpus_stage, pipeline.questions_stage, pipeline.answers_stage):
            stage(run)
        with pytest.warns(UserWarning, match="calls not sent"):
            pipeline.scores_stage(run)
        scores = run.load("scores")
        not_sent = int(((scores["judge"] == "other") & (scores["error_kind"] == "pilot")).sum())
        pilot = json.loads(run.paths.results.read_text(encoding="utf-8"))["judge_pilot"]["other"]
        assert (
            not_sent > 0 and pilot["decision"] == "stopped" and pilot["calls_not_sent"] == not_sent
        )
        # a stopped judge is not audited: its audit calls would never be read
        assert not (run.load("audit_scores")["judge"] == "other").any()
        # its unsent calls still count among the run's judge calls that cap the audit, as cube batch
        # counts them
        rec = json.loads(run.paths.results.read_text(encoding="utf-8"))["audit_sample"]
        assert rec["judge_calls"] == _batch_judge_calls(run, params, monkeypatch)
    finally:
        server.__exit__(None, None, None)


def test_stage_03_and_cube_batch_cap_the_audit_on_the_same_count_of_judge_calls(
    tmp_path, monkeypatch
):
    # two judges on one model, differing only in `samples`: their first sample is one cached call
    # for stage 03 but two requests for cube batch and cube plan; all three count per judge
    server = OpenAIServer(reply=reply)
    server.__enter__()
    try:
        params = tmp_path / "p.yaml"
        text = PARAMS.replace(
            "  - {{name: other, model: other}}\n", "  - {{name: self2, model: ans, samples: 2}}\n"
        )
        params.write_text(
            text.format(out=tmp_path / "out", url=server.url, questions=40, share=1.0),
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (
            pipeline.corpus_stage,
            pipeline.questions_stage,
            pipeline.answers_stage,
            pipeline.scores_stage,
        ):
            stage(run)
        recorded = json.loads(run.paths.results.read_text(encoding="utf-8"))["audit_sample"]
        assert recorded["judge_calls"] == _batch_judge_calls(run, params, monkeypatch)
    finally:
        server.__exit__(None, None, None)
