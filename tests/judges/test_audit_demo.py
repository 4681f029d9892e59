"""Issue 20: the judge audit's probes on the demo knowledge base, judged for real.

The offline rubric judges read the content, so they pass the audit; a judge on a local
OpenAI-compatible endpoint (127.0.0.1) that scores a reply by the answer's length is excluded
by it and named content-blind. No notebook: corpus, questions and full answers are made by the
package's functions, the probes by `cube.systems.probes`, the scoring by `cube.judges`."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml

from cube.config.params import parse_params
from cube.judges import load_dimensions, make_judges, score_answers
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.method.audit import audit_summary, audit_verdict, probe_table
from cube.systems.extractive import extractive_answer
from cube.systems.probes import (
    build_probes,
    corrupt_facts,
    ends_sentence,
    kinds_for,
    length_tolerance,
    pad,
    reorder,
    units,
)
from tests import ROOT
from tests.openai_server import OpenAIServer, last_user_message


def length_judge(body: dict) -> str:
    """Reads nothing but the length of the answer part of the prompt."""
    text = last_user_message(body)
    return f"Score: {min(10, 2 + len(text) // 120)}"


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    with OpenAIServer(reply=length_judge) as server:
        data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
        data.update(
            {
                "run": "audit",
                "outputs_dir": str(tmp),
                "corpus": {"source": "demo", "n_items": 60, "seed": 3},
                "questions": {"generator": "template", "seed": 3},
                "models": {
                    "len": {
                        "provider": "openai",
                        "model": "len",
                        "base_url": server.url,
                        "api_key_env": "CUBE_AUDIT_KEY",
                        "max_concurrency": 8,
                    }
                },
                "judges": data["judges"] + [{"name": "length-llm", "model": "len"}],
            }
        )
        params = parse_params(data)
        mp = pytest.MonkeyPatch()
        mp.setenv("CUBE_AUDIT_KEY", "sk-audit-local")
        try:
            corpus = generate_demo_corpus(n_items=60, lang="zh", seed=3)
            questions = build_questions(params, corpus)
            text = corpus.set_index("doc_id")["text"]
            full = pd.DataFrame(
                [
                    {
                        "question_id": q,
                        "doc_id": d,
                        "system": "sys",
                        "set": "full",
                        "rank": 0,
                        "answer": extractive_answer(question, [text[d]], "zh")[0],
                    }
                    for q, d, question in zip(
                        questions["question_id"],
                        questions["doc_id"],
                        questions["question"],
                        strict=True,
                    )
                ]
            )
            probes = build_probes(full, corpus, questions, n=40, seed=0, lang="zh")
            judges = make_judges(params, tmp / "cache.sqlite")
            dims = load_dimensions(params, base_dir=ROOT)
            scores = score_answers(
                pd.concat([full, probes.drop(columns=["probe", "expect"])], ignore_index=True),
                judges,
                dims,
                corpus,
                questions=questions,
                progress=False,
            )
        finally:
            mp.undo()
    table = probe_table(scores, probes, "sys")
    return {"probes": probes, "summary": audit_summary(table).set_index("judge"), "full": full}


def test_each_question_gets_two_length_matched_worse_one_empty_or_truncated_and_one_not_worse(
    audited,
):
    p = audited["probes"]
    matched = p["probe"].isin(["corrupted_facts", "sibling_answer", "other_question"])
    cut = p["probe"].isin(["empty", "truncated"])
    per_q = (
        p.assign(m=matched, c=cut, n=p["expect"] == "not_worse")
        .groupby("question_id")[["m", "c", "n"]]
        .sum()
    )
    assert (
        len(per_q) == 40
        and (per_q["m"] == 2).all()
        and (per_q["c"] == 1).all()
        and (per_q["n"] == 1).all()
    )
    assert (
        set(p.loc[cut, "probe"]) == {"empty", "truncated"}
        and (p.loc[cut, "expect"] == "worse").all()
    )
    assert (
        p["answer"].str.strip().str.len() > 0
    ).all()  # a blank answer would not be judged at all


def test_the_length_matched_probes_are_near_the_original_length_and_end_as_it_ends(audited):
    p, full = audited["probes"], audited["full"].set_index("question_id")["answer"].str.strip()
    matched = p[p["probe"].isin(["corrupted_facts", "sibling_answer", "other_question"])]
    target = matched["question_id"].map(full.str.len())
    assert len(matched) == 80
    assert ((matched["answer"].str.len() - target).abs() <= target.map(length_tolerance)).all()
    assert (
        matched["answer"].map(ends_sentence) == matched["question_id"].map(full.map(ends_sentence))
    ).all()


def _text_judge(audited, score, seed: int = 0) -> pd.Series:
    """The audit row of a judge whose score (one dimension) is `score(text)` plus N(0, 1),
    rounded and clipped to 0-10, on the fixture's originals and probes."""
    rng = np.random.default_rng(seed)
    full = audited["full"].set_index("question_id")["answer"]
    p = audited["probes"]
    texts = [(q, "original", "same", full[q]) for q in p["question_id"].unique()]
    texts += list(zip(p["question_id"], p["probe"], p["expect"], p["answer"], strict=True))
    table = pd.DataFrame(
        [
            {
                "question_id": q,
                "judge": "text-judge",
                "probe": kind,
                "expect": expect,
                "dimension": "relevance",
                "score": float(np.clip(round(score(text) + rng.normal(0, 1)), 0, 10)),
            }
            for q, kind, expect, text in texts
        ]
    )
    return audit_summary(table).iloc[0]


@pytest.mark.parametrize("seed", range(3))
def test_a_judge_scoring_only_whether_the_text_ends_a_sentence_is_content_blind(audited, seed):
    """Issue 30: probes cut at exactly the original's length ended mid-sentence, and a judge
    reading that alone passed the audit."""
    row = _text_judge(audited, lambda text: 8 if ends_sentence(text) else 6, seed)
    blind, why = audit_verdict(row, 0.05, 10)
    assert row["pairs"] == 80 and blind is True, why


def test_a_judge_reading_only_the_first_sentences_length_is_content_blind(audited):
    blind, why = audit_verdict(
        _text_judge(audited, lambda text: min(10.0, 2 + len(units(text.strip())[0]) / 10)),
        0.05,
        10,
    )
    assert blind is True, why


def test_truncated_probes_lose_facts_and_empty_probes_say_nothing(audited):
    p, full = audited["probes"], audited["full"].set_index("question_id")["answer"].str.strip()
    t = p[p["probe"] == "truncated"]
    for q, a in zip(t["question_id"], t["answer"], strict=True):
        assert full[q].startswith(a) and len(a) <= len(full[q]) / 3 + 1
        assert not set(re.findall(r"\d+", full[q][len(a) :])) <= set(
            re.findall(r"\d+", a)
        ) or not re.search(r"\d", full[q])  # at least one fact number is gone (when there was one)
    assert (p.loc[p["probe"] == "empty", "answer"].str.len() < 20).all()


def test_the_rubric_judges_score_empty_and_truncated_answers_below_the_original(audited):
    s = audited["summary"]
    for judge in ("rubric-lenient", "rubric-strict"):
        assert s.at[judge, "empty_truncated_pairs"] == 40
        assert s.at[judge, "empty_truncated_wins"] >= 36, s.loc[judge]


def test_the_rubric_judges_read_the_content_and_pass_the_audit(audited):
    s = audited["summary"]
    for judge in ("rubric-lenient", "rubric-strict"):
        blind, why = audit_verdict(s.loc[judge], 0.05, 10)
        assert blind is False, why
        assert s.at[judge, "discrimination"] > 0.6


def test_a_judge_scoring_by_length_is_excluded_as_content_blind(audited):
    s = audited["summary"]
    blind, why = audit_verdict(s.loc["length-llm"], 0.05, 10)
    assert blind is True and why.startswith("content-blind")


def test_probe_builders_change_what_they_claim():
    assert (
        corrupt_facts("费用 30 元，5 个工作日", sibling="费用 50 元，7 个工作日")
        == "费用 50 元，7 个工作日"
    )
    assert corrupt_facts("无数字", sibling="") is None
    assert reorder("第一句。第二句。") == "第二句。第一句。" and reorder("只有一句。") is None
    assert pad("答案。", "问题？", "zh").startswith("您好") and "问题？" in pad(
        "答案。", "问题？", "zh"
    )
    assert [kinds_for(i)[:2] for i in range(3)] == [
        ("corrupted_facts", "sibling_answer"),
        ("sibling_answer", "other_question"),
        ("other_question", "corrupted_facts"),
    ]
