"""Diagnostics of a run (issue 14), one call each for notebook 10 and the decision page:
retrieval metrics from ranks, failure patterns of low-scoring answers and the per-category
report, read from the run directory's tables."""

from __future__ import annotations

from typing import Any

import pandas as pd

from cube.notebook import Run


def _top_n(run: Run) -> dict[str, int]:
    return {s.name: s.top_n for s in run.params.systems}


def retrieval(run: Run) -> dict[str, dict[str, Any]]:
    """`cube.retrieval_metrics.run_metrics` of every system of the run."""
    from cube.retrieval_metrics import run_metrics

    return run_metrics(run.load("answers"), _top_n(run))


def failure_patterns(run: Run, system: str) -> pd.DataFrame:
    """`cube.failures.classify` of one system's rag answers with the run's judges and thresholds."""
    from cube.failures import classify

    run.require("corpus", "questions", "answers", "scores")
    return classify(run.load("answers"), run.load("scores"), run.load("corpus"), run.load("questions"), system,
                    run.params.diagnostics, judges=[j.name for j in run.params.judges])


def category_reports(run: Run, system: str, classified: pd.DataFrame,
                     by: tuple[str, ...] = ("department", "style")) -> dict[str, pd.DataFrame]:
    """`cube.categories.category_report` of one system by each of `by`."""
    from cube.categories import category_report
    from cube.retrieval_metrics import question_groups

    groups = question_groups(run.load("questions"), run.load("corpus"))
    answers, scores = run.load("answers"), run.load("scores")
    return {b: category_report(answers, scores, groups, classified, system, _top_n(run)[system], b,
                               run.params.analysis, judges=[j.name for j in run.params.judges],
                               dimensions=run.params.dimension_names()) for b in by}


def for_decision(run: Run, system: str) -> dict[str, Any]:
    """What the decision page says about diagnostics: the R@k curve of `system` and its top
    failure patterns (`{"retrieval": ..., "failure_patterns": ...}`; an entry is absent when its
    tables are)."""
    from cube.failures import summary

    out: dict[str, Any] = {}
    if run.has("answers"):
        out["retrieval"] = retrieval(run).get(system)
    if all(run.has(n) for n in ("corpus", "questions", "answers", "scores")):
        out["failure_patterns"] = summary(failure_patterns(run, system), run.params.diagnostics)
    return out
