"""The release gate of `cube run` with a baseline (issue 42): after the run publishes, its primary
system is compared with the baseline run's primary system, a release decision is made, and the
report a CI job reads is written.

The comparison is `cube.run.compare.compare_sides` (baseline = side A, this run = side B; the
families resampled and swapped together, the regressions beyond the judges' noise with the count
expected by chance), written to `<run>/compare/baseline/` (its page, tables and figures, linked to
both judgment browsers). The decision is `cube.method.release_rule.decide` over its jury rows:
`release`, `hold: regression` or `undecided` (docs/explanation/release-gate.md states the rule).
A baseline the comparison cannot be made with (another definition of CuBE, no common question or
judge, a missing table) is `undecided`, saying why.

The report (`cube.pages.release`): `report/summary.md` (the evaluation-dataset article's report:
run and date, questions, overall and per dimension with the change against the baseline, per
category and per question style, R@k, refusal accuracy where the runs measured it, the regressed
questions by id and text with both scores, then the decision and its reasons),
`report/junit.xml` (one test case per condition of the rule and one per regressed question) and
`report/decision.json` (decision, reasons, margin, delta_cube, delta_ci, regressed: the interface
a CI job reads; `exit_code` too). The terminal gets the summary's lines (`terminal_lines`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.runpaths import RunPaths
from cube.method.release_rule import HOLD, RELEASE, UNDECIDED, Ruling, decide

EXIT_CODES = {RELEASE: 0, HOLD: 4, UNDECIDED: 3}  # `cube run`'s codes (cube/cli/run.py)
FOLDER = "baseline"  # <run>/compare/baseline/: the comparison with the baseline


@dataclass(frozen=True)
class Baseline:
    """The baseline a run is gated against: its run folder, the margin and the fewest questions."""

    folder: Path
    margin: float = 5.0
    min_questions: int = 20


def baseline_of(params: Params, override: Path | None = None) -> Baseline | None:
    """The params' `baseline` with `cube run --baseline FOLDER` (`override`) in place of its run;
    None without either."""
    block = params.baseline
    if block is None and override is None:
        return None
    folder = Path(override) if override is not None else Path(block.run)  # type: ignore[union-attr]
    if block is None:
        return Baseline(folder.expanduser().resolve())
    return Baseline(folder.expanduser().resolve(), block.margin, block.min_questions)


def baseline_problems(baseline: Baseline, run_folder: Path | None = None) -> list[str]:
    """What keeps `baseline.folder` from being a completed run to compare with, each naming the
    folder ([] when none): it must hold a published run's `data/answers.parquet` and
    `data/scores.parquet`, and not be the folder this run publishes into."""
    f = baseline.folder
    where = f"baseline.run ({f})"
    if not f.is_dir():
        return [f"{where}: no such folder; expected a completed run folder (outputs/<run>)"]
    problems = [
        f"{where}: missing data/{name}.parquet; expected a completed run folder (outputs/<run>, "
        "after `cube run` published it)"
        for name in ("answers", "scores")
        if not (f / "data" / f"{name}.parquet").is_file()
    ]
    if f.name == ".staging":
        problems.append(f"{where}: a run's staging folder, not a published run")
    if run_folder is not None and run_folder.resolve() == f:
        problems.append(
            f"{where}: this run's own folder, which the run replaces when it publishes; keep the "
            "baseline's folder elsewhere (copy it, or give the version's run another name)"
        )
    return problems


def exit_code(decision: str) -> int:
    """`cube run`'s exit code for a release decision: 0 release, 4 hold, 3 undecided."""
    return EXIT_CODES.get(decision, 3)


def release_gate(
    paths: RunPaths, baseline: Baseline, *, n_permutations: int = 1000
) -> dict[str, Any]:
    """Compare the published run at `paths` with `baseline`, decide, write the report
    (`report/summary.md`, `junit.xml`, `decision.json`) and return its content."""
    from cube.pages.release import write_reports

    report = _report(paths, baseline, n_permutations)
    write_reports(report, paths.report, decision_record(report))
    return report


def _report(paths: RunPaths, baseline: Baseline, n_permutations: int) -> dict[str, Any]:
    from cube.config.schema import SchemaError
    from cube.run.compare import resolve_side, run_folder_name

    head = {
        "run": run_folder_name(paths.root),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "baseline": {"run": baseline.folder.name},
        "margin": baseline.margin,
    }
    problems = baseline_problems(baseline)
    if problems:
        return head | _undecided(problems, baseline.margin)
    try:
        a, b = resolve_side(baseline.folder), resolve_side(paths.root)
        tables: dict[str, pd.DataFrame] = {}
        out = paths.root / "compare" / FOLDER
        payload = _quiet_compare(a, b, out, n_permutations, tables)
    except (ValueError, FileNotFoundError, KeyError, SchemaError) as err:
        why = f"the baseline's run cannot be compared with this one: {err}"
        return head | _undecided([why], baseline.margin)
    head |= {"system": b.system, "baseline": {"run": a.run, "system": a.system}}
    deltas = tables["deltas"]
    ruling = decide(
        deltas,
        int(payload["n_questions"]),
        margin=baseline.margin,
        alpha=float(payload["settings"]["alpha"]),
        min_questions=baseline.min_questions,
    )
    return head | _figures(payload, deltas, b, a, tables) | _ruled(ruling, payload)


def _quiet_compare(
    a: Any, b: Any, out: Path, n_permutations: int, tables: dict[str, pd.DataFrame]
) -> dict[str, Any]:
    """compare_sides with every regression listed and its progress quiet."""
    from cube.run.compare import compare_sides

    return compare_sides(a, b, out, n_permutations=n_permutations, k=None, tables_out=tables)


def _undecided(reasons: list[str], margin: float) -> dict[str, Any]:
    return {
        "decision": UNDECIDED,
        "reasons": reasons,
        "conditions": [{"name": "baseline_comparable", "status": "unknown", "text": reasons[0]}],
        "margin": margin,
        "delta_cube": None,
        "delta_ci": [None, None],
        "regressed": [],
        "exit_code": exit_code(UNDECIDED),
    }


def _ruled(ruling: Ruling, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "decision": ruling.decision,
        "reasons": ruling.reasons,
        "conditions": [
            {"name": c.name, "status": c.status, "text": c.text} for c in ruling.conditions
        ],
        "margin": ruling.margin,
        "alpha": ruling.alpha,
        "delta_cube": payload["delta_cube"],
        "delta_ci": payload["delta_cube_ci"],
        "exit_code": exit_code(ruling.decision),
    }


def _value(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _jury_rows(deltas: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    jury = deltas[deltas["judge"] == "jury"]
    return {
        str(r["metric"]): {k: _value(r[k]) for k in ("a", "b", "delta", "lo", "hi", "p_value")}
        for _, r in jury.iterrows()
    }


def _figures(
    payload: dict[str, Any], deltas: pd.DataFrame, b: Any, a: Any, tables: dict[str, pd.DataFrame]
) -> dict[str, Any]:
    """The report's figures: overall, per dimension, R@k, refusal, categories, regressions."""
    rows = _jury_rows(deltas)
    counts = payload["changes_by_chance"]
    return {
        "n_questions": payload["n_questions"],
        "n_only_baseline": payload["n_only_a"],
        "n_only_run": payload["n_only_b"],
        "overall": rows.get("cube_score", {}),
        "dimensions": {m.removeprefix("N_"): r for m, r in rows.items() if m.startswith("N_")},
        "recall": rows.get("recall_at_k", {}) | {"k": b.evaluated_top_n},
        "refusal": _refusal(a, b),
        "categories": _categories(b, tables["question_changes"]),
        "regressed": [_regressed(r) for r in payload["regressions"]],
        "n_expected_by_chance": counts["expected"],
        "expected_range": counts["range"],
        "noise_threshold": counts["threshold"],
        "comparison": f"../compare/{FOLDER}/index.html",
        "flags": payload.get("flags") or [],
    }


def _regressed(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "question_id": str(r["question_id"]),
        "text": r.get("question"),
        "baseline_score": _value(r.get("jury_a")),
        "score": _value(r.get("jury_b")),
        "retrieval_change": r.get("retrieval_change"),
    }


def _refusal(a: Any, b: Any) -> dict[str, float | None] | None:
    """Refusal accuracy of each side's system where its run measured it (None: neither did)."""
    from cube.run.record import read_record

    out = {}
    for key, side in (("baseline", a), ("run", b)):
        rec = (read_record(side.paths.results).refusal.refusal or {}).get(side.system) or {}
        out[key] = _value(rec.get("refusal_accuracy"))
    return out if any(v is not None for v in out.values()) else None


def _categories(b: Any, changes: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per department and per question style of this run's questions: questions, the mean jury
    score per question (0-10, mean over dimensions) of each side and the regressions ({} when the
    run's questions carry neither)."""
    from cube.diagnose.regressions import ranked
    from cube.diagnose.retrieval import question_groups

    questions, corpus = b.load_if_present("questions"), b.load_if_present("corpus")
    if questions is None or corpus is None or not len(changes):
        return {}
    groups = question_groups(questions, corpus).drop_duplicates("question_id")
    regressed = set(ranked(changes, "regressions", None)["question_id"].astype(str))
    c = changes.assign(question_id=changes["question_id"].astype(str))
    c = c.assign(_reg=c["question_id"].isin(regressed))
    c = c.merge(groups.assign(question_id=groups["question_id"].astype(str)), on="question_id")
    out = {}
    for by in ("department", "style"):
        if by not in c or c[by].nunique() < 1 or set(c[by]) <= {"(none)"}:
            continue
        agg = c.groupby(by, sort=True).agg(
            questions=("question_id", "size"),
            baseline=("jury_a", "mean"),
            run=("jury_b", "mean"),
            regressed=("_reg", "sum"),
        )
        out[by] = [
            {"category": str(k), **{c2: _plain(v) for c2, v in r.items()}}
            for k, r in agg.sort_values("questions", ascending=False).iterrows()
        ]
    return out


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def decision_record(report: dict[str, Any]) -> dict[str, Any]:
    """decision.json: the interface a CI job reads (COMMON keys first)."""
    keys = ("decision", "reasons", "margin", "delta_cube", "delta_ci", "regressed")
    extra = ("exit_code", "run", "system", "baseline", "n_questions", "conditions", "date")
    return {k: report.get(k) for k in (*keys, *extra) if k in report}


REPORT_FILES = ("summary.md", "junit.xml", "decision.json")


def clear_gate(paths: RunPaths) -> None:
    """Remove an earlier gate's report and comparison from a run published without a baseline:
    a CI job must never read a decision the run did not make."""
    import shutil

    for name in REPORT_FILES:
        (paths.report / name).unlink(missing_ok=True)
    shutil.rmtree(paths.root / "compare" / FOLDER, ignore_errors=True)


def read_gate(report_dir: Path) -> dict[str, Any] | None:
    """A run's decision.json (None when there is none)."""
    path = report_dir / "decision.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
