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


def _params(tmp_path, **sequential):
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
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
