"""The driver's design (cube.run.sequential_design): R@k from every question's free retrieval is
the one the answers report, the spread order's looks are the planned ones, and a look's
groups and judged questions are its own (review H3, M1)."""

from __future__ import annotations

import yaml

from cube.config.params import load_params
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions
from cube.run.sequential_design import batches, design_of, free_hits, planned_looks
from cube.systems import build_answers
from tests import ROOT


def _params(tmp_path, systems=None, **sequential):
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data.update({"systems": systems} if systems is not None else {})
    data.update(
        {
            "run": "design",
            "outputs_dir": str(tmp_path),
            "corpus": {"source": "demo", "n_items": 60, "family_share": 0.33, "seed": 7},
        }
    )
    data["analysis"] = {**data.get("analysis", {}), "sequential": sequential}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return load_params(path)


def test_free_retrieval_gives_the_hits_the_answers_report(tmp_path):
    """Every builtin system of the default sweep is retrieved on the whole set without a call, and
    its hit (gold document retrieved) is the answers' rank > 0 for every question."""
    params = _params(tmp_path)
    corpus = build_corpus(params, base_dir=ROOT)
    questions = build_questions(params, corpus, None)
    questions = questions.assign(question_id=questions["question_id"].astype(str))
    hits = free_hits(params, corpus, questions)
    assert set(hits) == {s.name for s in params.systems}
    answers = build_answers(params, corpus, questions, None, progress=False)
    rag = answers[answers["set"] == "rag"]
    for system, by_q in hits.items():
        rows = rag[rag["system"] == system]
        reported = dict(zip(rows["question_id"].astype(str), rows["rank"] > 0, strict=True))
        assert by_q == reported
    judged = _params(tmp_path, recall="judged")
    assert free_hits(judged, corpus, questions) == {}
    assert design_of(params) == {"order": "spread", "recall": "all", "boundary": "spending"}


def test_the_planned_looks_are_every_batch_end_from_the_minimum():
    units = {f"q{i:03d}": f"f{i // 5}" for i in range(103)}
    order = batches(units, 20, seed=0)
    assert [len(b) for b in order] == [20] * 5 + [3]
    assert planned_looks(order, 40) == [40, 60, 80, 100, 103]
    assert planned_looks(order, 200) == [103]  # a minimum above the set: the set's end only


def test_an_imported_error_row_is_left_out_of_the_free_hits(tmp_path):
    """Regression (review of issue 40, H3): an imported file's failed row without a list has an
    unknown retrieval; the driver's free hits leave it out (neither hit nor miss, so not in R@k's
    denominator), as the analysis does, and the other rows are the answers' ranks."""
    import pandas as pd

    params = _params(tmp_path)
    corpus = build_corpus(params, base_dir=ROOT)
    questions = build_questions(params, corpus, None)
    questions = questions.assign(question_id=questions["question_id"].astype(str)).head(12)
    others = corpus["doc_id"].astype(str).tolist()
    rows = pd.DataFrame(
        {
            "question_id": questions["question_id"],
            "answer": "an answer",
            "retrieved_doc_ids": [
                gold if i % 2 else next(d for d in others if d != gold)
                for i, gold in enumerate(questions["doc_id"].astype(str))
            ],
            "error": ["timeout"] + [""] * (len(questions) - 1),
        }
    )
    rows.loc[0, "retrieved_doc_ids"] = ""  # the failed call left no list: retrieval unknown
    path = tmp_path / "qa.csv"
    rows.to_csv(path, index=False)
    imported = _params(tmp_path, [{"kind": "imported", "name": "mine", "path": str(path)}])
    hits = free_hits(imported, corpus, questions)["mine"]
    failed = questions["question_id"].iloc[0]
    assert failed not in hits and len(hits) == len(questions) - 1
    answers = build_answers(imported, corpus, questions, None, progress=False)
    rag = answers[(answers["set"] == "rag") & answers["retrieval_ok"]]
    assert hits == dict(zip(rag["question_id"].astype(str), rag["rank"] > 0, strict=True))
    assert sum(hits.values()) == len(questions) // 2  # the odd rows: R@k 6 of 11, not of 12


def _judged_run(params, qids, failed=()):
    """Answers and scores of one system on `qids` (every other question retrieved, scores drawn
    around the set's level), `failed` questions' system call failed (retrieval unknown)."""
    import numpy as np
    import pandas as pd

    from cube.systems.base import ANSWERS_COLUMNS

    system = params.systems[0].name
    rng = np.random.default_rng(0)
    rows, scores = [], []
    for i, q in enumerate(qids):
        rank = 1 + i % 3 if i % 2 == 0 else 0
        for s in ("zero", "rag", "full"):
            rows.append({"system": system, "question_id": q, "set": s, "answer": "a",
                         "rank": rank, "n_retrieved": 8, "retrieval_ok": q not in failed,
                         "error": "HTTP 500" if q in failed else ""})  # fmt: skip
            level = {"zero": 2.0, "rag": 4.0 + 3.0 * (rank > 0), "full": 8.0}[s]
            for j in params.judges:
                for d in params.dimension_names():
                    score = float(np.clip(level + rng.normal(0, 1.5), 0, 10))
                    scores.append({"system": system, "question_id": q, "set": s,
                                   "judge": j.name, "dimension": d, "score": score})  # fmt: skip
    answers = pd.DataFrame(rows)
    for c in ANSWERS_COLUMNS:
        if c not in answers:
            answers[c] = ""
    return system, answers, pd.DataFrame(scores)


def test_a_look_under_recall_all_counts_its_judged_families_and_skips_unknown_retrieval(tmp_path):
    """Review M1: 60 questions judged from 12 families of a 200-question set (40 families, one
    jackknife group each): the look's groups (the 20-family guard, the t allowance) are the 12
    judged, not the set's 40, and the guard holds the look. Review H3: a judged question whose
    system call failed (retrieval unknown) is no question of W: the look does not fail, and counts
    the 59."""
    from cube.method.sequential import not_yet, t_allowance
    from cube.run.sequential import stop_rule
    from cube.run.sequential_look import system_look

    params = _params(tmp_path)
    every = [f"q{i:03d}" for i in range(200)]
    units = {q: f"f{i // 5}" for i, q in enumerate(every)}
    hits = {q: i % 2 == 0 for i, q in enumerate(every)}
    rule = stop_rule(params)
    system, answers, scores = _judged_run(params, every[:60], failed={"q007"})
    look = system_look(params, answers, scores, system, units, rule, hits=hits, critical=2.5)
    cube = look[0].current
    assert cube.n == 59 and cube.groups == 12
    assert cube.lower < cube.estimate < cube.upper  # defined
    assert "12 of the 20 families" in not_yet(cube, rule)
    rk = look[-1]
    assert rk.name == "R@k" and rk.current.estimate == 50.0 and rk.current.groups == 40
    # the t allowance of 11 degrees of freedom, not 39: the same look drawn wider than with 40
    allowance = t_allowance(12, rule) / t_allowance(40, rule)
    assert allowance > 1.05
