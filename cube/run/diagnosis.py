"""Diagnostics of a run (issue 14), one call each for notebook 10 and the decision page:
retrieval metrics from ranks, failure patterns of low-scoring answers and the per-category
report, read from the run directory's tables."""

from __future__ import annotations

from typing import Any

import pandas as pd

from cube.run.notebook import Run


def _scores(run: Run) -> pd.DataFrame:
    """The scores table's columns that the failure patterns and the per-category evaluations read
    (`ANALYSIS_SCORE_COLUMNS`): the raw replies, criterion details and call accounting are not
    read here, and every per-category subset of the whole table copied them (most of notebook 10's
    CPU at the paper's scale)."""
    from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS

    return run.load("scores", ANALYSIS_SCORE_COLUMNS)


def _top_n(run: Run) -> dict[str, int]:
    return {s.name: s.top_n for s in run.params.systems}


def retrieval(run: Run) -> dict[str, dict[str, Any]]:
    """`cube.diagnose.retrieval.run_metrics` of every system of the run."""
    from cube.diagnose.retrieval import run_metrics

    return run_metrics(run.load("answers"), _top_n(run))


def failure_patterns(run: Run, system: str) -> pd.DataFrame:
    """`cube.diagnose.failures.classify` of one system's rag answers with the run's judges and
    thresholds."""
    from cube.diagnose.failures import classify

    run.require("corpus", "questions", "answers", "scores")
    return classify(
        run.load("answers"),
        _scores(run),
        run.load("corpus"),
        run.load("questions"),
        system,
        run.params.diagnostics,
        judges=[j.name for j in run.params.judges],
    )


def category_reports(
    run: Run,
    system: str,
    classified: pd.DataFrame,
    by: tuple[str, ...] = ("department", "style"),
    refusal: dict[str, pd.DataFrame] | None = None,
) -> dict[str, pd.DataFrame]:
    """`cube.diagnose.categories.category_report` of one system by each of `by`, with refusal
    accuracy and the false-refusal rate per category when the run has refusal answers, also recorded
    in `results.json` → `categories` (one list of records per breakdown); plus, with refusal
    answers, `kind` (refusal questions by kind, `results.json` → `refusal_by_kind`). `refusal`:
    `refusal_categories` of the system by `by` and `kind` when the caller has it (notebook 10 draws
    it too), else made here."""
    import json

    from cube.diagnose.categories import category_report
    from cube.diagnose.retrieval import question_groups

    groups = question_groups(run.load("questions"), run.load("corpus"))
    answers, scores = run.load("answers"), _scores(run)
    if refusal is None:
        refusal = refusal_categories(run, system, (*by, "kind"))
    reports = {
        b: category_report(
            answers,
            scores,
            groups,
            classified,
            system,
            _top_n(run)[system],
            b,
            run.params.analysis,
            judges=[j.name for j in run.params.judges],
            dimensions=run.params.dimension_names(),
            refusal=refusal.get(b),
        )
        for b in by
    }

    def records(t: pd.DataFrame) -> list[dict[str, Any]]:
        return json.loads(t.to_json(orient="records", force_ascii=False))

    from cube.run.record import DiagnosticsRecord

    run.write_record(DiagnosticsRecord(categories={b: records(t) for b, t in reports.items()}))
    if "kind" in refusal:
        reports["kind"] = refusal["kind"]
        rows = records(refusal["kind"])
        run.write_record(DiagnosticsRecord(refusal_by_kind={"system": system, "rows": rows}))
    return reports


def refusal_categories(
    run: Run, system: str, by: tuple[str, ...] = ("department", "style", "kind")
) -> dict[str, pd.DataFrame]:
    """`cube.diagnose.refusal_categories.refusal_by_category` of one system by each of `by` ({} when
    the run has no refusal answers of that system)."""
    from cube.diagnose.refusal_categories import refusal_by_category
    from cube.diagnose.retrieval import question_groups

    if not run.has("refusal_answers"):
        return {}
    refusals = run.load("refusal_answers")
    if not (refusals["system"] == system).any():
        return {}
    corpus, answers = run.load("corpus"), run.load("answers")
    groups = question_groups(run.load("questions"), corpus)
    return {
        b: refusal_by_category(
            refusals, answers, groups, corpus, system, b, run.params.analysis.confidence
        )
        for b in by
    }


def top_n_sweep(
    run: Run, results: dict[str, Any]
) -> tuple[str, pd.DataFrame, dict[str, Any]] | None:
    """The run's TOP-N sweep (the primary system's, else the first): its name, its table
    (`cube.diagnose.topn_sweep.sweep_table`) and the hypothesis reading; None when the run has no
    sweep."""
    from cube.diagnose.topn_sweep import hypothesis, sweep_table, sweeps

    found = sweeps(run.params)
    if not found:
        return None
    primary = run.params.systems[0]
    name = (
        getattr(primary, "sweep_of", None)
        if getattr(primary, "sweep_of", None) in found
        else next(iter(found))
    )
    table = sweep_table(results, found[name], run.params.analysis.confidence)
    return name, table, hypothesis(table)


def recorded_sweep(run: Run) -> tuple[str, pd.DataFrame, dict[str, Any]] | None:
    """The TOP-N sweep as the decision page (notebook 06) recorded it in `results.json`, so this
    notebook states the same reading without evaluating every system again; computed with
    `pipeline.evaluate_run` when the decision was not recorded yet."""
    saved = run.read_record().decision.decision
    sweep = saved.top_n_sweep if saved is not None else None
    if sweep is not None and sweep.table:
        got = sweep.model_dump(mode="json")  # its results.json form: the table's keys `R@N`, ...
        table = pd.DataFrame(got.pop("table")).astype({"R@N": float, "W": float, "CuBE": float})
        return got.pop("sweep"), table, got
    if saved is not None or not any(getattr(s, "sweep_of", None) for s in run.params.systems):
        return None
    from cube.run.evaluate import evaluate_run

    return top_n_sweep(run, evaluate_run(run))


def refusal_stage(run: Run) -> pd.DataFrame:
    """Write and answer the refusal questions (`diagnostics.refusal_questions`, by
    `diagnostics.refusal_generator`), save them as `data/refusal_answers.parquet` and record the
    refusal figures of every system and how the questions were made (`refusal_generation`: for
    the LLM generator its calls, failed ones with their reason, and the questions dropped)."""
    from cube.diagnose.refusal import is_refusal, mark_declined, refusal_report
    from cube.kb.refusal_questions import build_refusal_set
    from cube.systems import refusal_answers

    run.require("corpus", "answers")
    corpus = run.load("corpus")
    questions, made = build_refusal_set(run.params, corpus, run.paths.cache, reject=is_refusal)
    out = (
        mark_declined(refusal_answers(run.params, corpus, questions, run.paths.cache))
        if len(questions)
        else pd.DataFrame(
            columns=["question_id", "system", "answer", "kind", "outcome", "declined"]
        )
    )
    run.save("refusal_answers", out)
    # the refusal writer's calls as a table of their own, so the decision's cost card and the
    # manifest's usage count them (`cube.run.decide.CALL_TABLES`); they were only in results.json
    from cube.config.schema import ACCOUNTING_COLUMNS

    columns = ["sample", "ok", "error", "questions", *ACCOUNTING_COLUMNS]
    run.save("refusal_generation", pd.DataFrame((made or {}).get("calls") or [], columns=columns))
    from cube.run.record import RefusalRecord

    run.write_record(
        RefusalRecord(
            refusal=_json_safe(
                refusal_report(out, run.load("answers"), run.params.analysis.confidence)
            ),
            refusal_generation=made,
        )
    )
    return out


def _json_safe(v: Any) -> Any:
    import math

    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return None if isinstance(v, float) and math.isnan(v) else v


def for_decision(run: Run, system: str, results: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the decision page says about diagnostics: the R@k curve of `system`, its top failure
    patterns and the TOP-N sweep's reading (`{"retrieval", "failure_patterns", "top_n_sweep"}`;
    an entry is absent when its tables or a sweep are)."""
    from cube.diagnose.failures import summary
    from cube.diagnose.topn_sweep import for_results

    out: dict[str, Any] = {}
    if run.has("answers"):
        out["retrieval"] = retrieval(run).get(system)
    if all(run.has(n) for n in ("corpus", "questions", "answers", "scores")):
        out["failure_patterns"] = summary(failure_patterns(run, system), run.params.diagnostics)
    if run.has("refusal_answers") and run.has("answers"):
        from cube.diagnose.refusal import refusal_report

        report = refusal_report(
            run.load("refusal_answers"), run.load("answers"), run.params.analysis.confidence
        )
        if system in report:
            out["refusal"] = _json_safe(report[system])
    swept = top_n_sweep(run, results) if results else None
    if swept is not None:
        out["top_n_sweep"] = {"sweep": swept[0], **for_results(swept[1], swept[2])}
    return out
