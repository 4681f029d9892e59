"""The driver's design (cube.run.sequential_design): R@k from every question's free retrieval is
the one the answers report, and the round robin's looks are the planned ones."""

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
    hits = free_hits(params, corpus, questions, None)
    assert set(hits) == {s.name for s in params.systems}
    answers = build_answers(params, corpus, questions, None, progress=False)
    rag = answers[answers["set"] == "rag"]
    for system, by_q in hits.items():
        rows = rag[rag["system"] == system]
        reported = dict(zip(rows["question_id"].astype(str), rows["rank"] > 0, strict=True))
        assert by_q == reported
    judged = _params(tmp_path, recall="judged")
    assert free_hits(judged, corpus, questions, None) == {}
    assert design_of(params) == {"order": "round_robin", "recall": "all", "boundary": "spending"}


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
    hits = free_hits(imported, corpus, questions, None)["mine"]
    failed = questions["question_id"].iloc[0]
    assert failed not in hits and len(hits) == len(questions) - 1
    answers = build_answers(imported, corpus, questions, None, progress=False)
    rag = answers[(answers["set"] == "rag") & answers["retrieval_ok"]]
    assert hits == dict(zip(rag["question_id"].astype(str), rag["rank"] > 0, strict=True))
    assert sum(hits.values()) == len(questions) // 2  # the odd rows: R@k 6 of 11, not of 12
