"""`with_intervals` (issue 41 item 3): the intervals added to a run's evaluation without them give
`evaluate` with them, field for field and bit for bit, on generated tables with NaN and absent
scores, a judge without any score, failed system calls, families, few retrieved questions (the
warning only the bootstrap raises) and every call failed; and `evaluate_run` with the bootstrap
starts from the kept evaluation without it instead of evaluating again."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from cube.config.sections import AnalysisParams
from cube.method import evaluation as E
from cube.method.evaluation import evaluate, evaluate_systems, with_intervals
from tests.factories import make_tables

_JUDGES = ["judge-a", "judge-b", "judge-c"]


def _awkward(seed: int, n: int = 60, recall: float = 0.8) -> tuple[pd.DataFrame, pd.DataFrame]:
    """NaN scores, absent rows, tied scores, two failed system calls, a judge without scores."""
    answers, scores = make_tables(
        n_questions=n, judges=("judge-a", "judge-b", "judge-c"), seed=seed, recall=recall
    )
    rng = np.random.default_rng(seed)
    scores.loc[rng.random(len(scores)) < 0.05, "score"] = np.nan
    scores = scores.drop(scores.index[rng.random(len(scores)) < 0.03]).reset_index(drop=True)
    scores = scores[scores["judge"] != "judge-c"].reset_index(drop=True)
    answers["retrieval_ok"] = True
    answers["error"] = ""
    failed = answers["question_id"].isin(["q001", "q007"]) & (answers["set"] == "rag")
    answers.loc[failed, "retrieval_ok"] = False
    answers.loc[failed, "error"] = "system call failed"
    return answers, scores


def _families(answers: pd.DataFrame) -> dict[str, str]:
    """Families of three questions each (the last question its own unit)."""
    qids = sorted(answers["question_id"].unique())
    return {q: f"f{i // 3}" for i, q in enumerate(qids[:-1])}


def _same(a, b, where: str = "") -> None:
    """Equal to the last bit: frames exactly (and as the published CSVs write them), NaN as NaN."""
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where)
        assert a.to_csv() == b.to_csv(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def _results_same(a: E.CubeResult, b: E.CubeResult) -> None:
    for f in dataclasses.fields(E.CubeResult):
        _same(getattr(a, f.name), getattr(b, f.name), f.name)


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


@pytest.mark.parametrize(
    ("seed", "update", "families", "recall"),
    [
        (0, {"bootstrap": 60}, False, 0.8),
        (1, {"bootstrap": 60, "cluster": "family"}, True, 0.8),
        (2, {"bootstrap": 50, "interval": "percentile"}, True, 0.8),  # families, question unit
        (3, {"bootstrap": 40, "weights": "equal", "cluster": "family"}, True, 0.8),
        (4, {"bootstrap": 40}, False, 0.15),  # 3-9 retrieved: W's warning, evaluated in full
        (5, {"bootstrap": 0}, False, 0.8),
    ],
)
def test_intervals_added_equal_the_whole_evaluation(seed, update, families, recall):
    answers, scores = _awkward(seed, recall=recall)
    ap = AnalysisParams(**update)
    dims = ["relevance", "quality", "extra"] if seed == 3 else None  # a dimension never scored
    kw = {"judges": _JUDGES, "dimensions": dims}
    kw["clusters"] = _families(answers) if families else None
    full = _quiet(evaluate, answers, scores, ap, 8, **kw)
    plain = _quiet(evaluate, answers, scores, ap.model_copy(update={"bootstrap": 0}), 8, **kw)
    added = _quiet(with_intervals, plain, answers, scores, ap, 8, **kw)
    _results_same(added, full)
    assert E.intervals_alone(plain, ap) == (recall > 0.5 and ap.bootstrap > 0)
    assert (full.bootstrap is None) == (ap.bootstrap == 0)
    assert full.unknown_retrieval == ["q001", "q007"]
    if recall < 0.5:  # the warning only the bootstrap raises, in the result where `evaluate` put it
        assert (
            [m for m in full.warnings if m not in plain.warnings]
            == [m for m in full.warnings if "approximate" in m]
            != []
        )
    assert plain.settings["bootstrap"] == 0  # the result it started from is left as it was


def test_every_call_failed_is_evaluated_as_in_full():
    answers, scores = _awkward(7)
    answers["retrieval_ok"] = False
    answers["error"] = "HTTP 500"
    ap = AnalysisParams(bootstrap=30)
    full = _quiet(evaluate, answers, scores, ap, 8, judges=_JUDGES)
    plain = _quiet(evaluate, answers, scores, AnalysisParams(bootstrap=0), 8, judges=_JUDGES)
    assert not E.intervals_alone(plain, ap)
    _results_same(_quiet(with_intervals, plain, answers, scores, ap, 8, judges=_JUDGES), full)


def test_several_systems_get_their_own_intervals(monkeypatch):
    a1, s1 = _awkward(8)
    a2, s2 = make_tables(n_questions=50, seed=9, system="other")
    answers, scores = pd.concat([a1, a2], ignore_index=True), pd.concat([s1, s2], ignore_index=True)
    answers["retrieval_ok"] = answers["retrieval_ok"].fillna(True).astype(bool)
    answers["error"] = answers["error"].fillna("")
    ap = AnalysisParams(bootstrap=40, cluster="family")
    kw = {"judges": _JUDGES, "clusters": _families(answers)}
    top_n = {"sys": 8, "other": 8}
    full = _quiet(evaluate_systems, answers, scores, ap, top_n, **kw)
    plain = _quiet(evaluate_systems, answers, scores, AnalysisParams(cluster="family"), top_n, **kw)
    gated = []
    real = E._gated
    monkeypatch.setattr(E, "_gated", lambda *a, **k: gated.append(1) or real(*a, **k))
    added = _quiet(evaluate_systems, answers, scores, ap, top_n, **kw, without_intervals=plain)
    assert not gated  # nothing before the intervals computed again
    assert list(added) == list(full) == ["other", "sys"]
    for name in full:
        _results_same(added[name], full[name])


def test_evaluate_run_adds_the_intervals_to_the_kept_evaluation(tmp_path, monkeypatch):
    from cube.run import evaluate as run_evaluate
    from cube.run import pipeline
    from cube.run.notebook import open_run

    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        f"""run: e
outputs_dir: {tmp_path / "out"}
corpus: {{source: demo, n_items: 12, seed: 3}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
judges:
  - {{name: s, model: {{provider: offline, model: rubric-strict}}}}
  - {{name: l, model: {{provider: offline, model: rubric-lenient}}}}
analysis: {{bootstrap: 50, cluster: family}}
""",
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
    cache = run_evaluate.evaluation_cache_dir(run)
    full = run_evaluate.evaluate_run(run)  # nothing kept: evaluated in full
    for p in cache.glob("*.pkl"):
        p.unlink()
    plain = run_evaluate.evaluate_run(run, bootstrap=False)
    gated = []
    real = E._gated
    monkeypatch.setattr(E, "_gated", lambda *a, **k: gated.append(1) or real(*a, **k))
    for name in ("audit_probe_scores", "ablation_summary"):  # the gate's inputs: not read again
        monkeypatch.setattr(run_evaluate, name, lambda *a, n=name, **k: gated.append(n))
    added = run_evaluate.evaluate_run(run)
    assert not gated and len(list(cache.glob("*.pkl"))) == 2
    assert added["bm25"].bootstrap is not None and plain["bm25"].bootstrap is None
    _results_same(added["bm25"], full["bm25"])
    again = run_evaluate.evaluate_run(run)  # kept now: read back as it was
    _results_same(again["bm25"], full["bm25"])
