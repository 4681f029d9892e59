"""The release gate of `cube run` with a baseline (issue 42): after the run publishes, its primary
system is compared with the baseline run's primary system, a release decision is made, and the
report a CI job reads is written.

The comparison is `cube.run.compare.compare_sides` (baseline = side A, this run = side B; the
families resampled and swapped together, the regressions beyond the judges' noise with the count
expected by chance), written to `<run>/compare/baseline/` (its page, tables and figures, linked to
both judgment browsers). The decision is `cube.method.release_rule.decide` over its jury rows:
`release`, `hold: regression` or `undecided` (docs/explanation/release-gate.md states the rule).
A baseline the comparison cannot be made with (another definition of CuBE, no common question or
judge, a missing table) is `undecided`, saying why; so is one whose questions have other texts
under ids this run also holds (`differing_questions`: the comparison pairs questions by id and
would compare different questions; checked before comparing). `cube validate` checks the params'
`baseline` block as `cube run` does before its first stage (`params_baseline_problems`).

The report (`cube.pages.release`): `report/summary.md` (the evaluation-dataset article's report:
run and date, questions, overall and per dimension with the change against the baseline, per
category and per question style, R@k, refusal accuracy where the runs measured it, the regressed
questions by id and text with both scores and the cause (`regression_cause`: a drop beyond the
judges' noise, or the gold document no longer retrieved, whatever the scores did), which bounds
came from the cache and from the baseline's own calls (`cube.run.bounds_reuse.bounds_reuse_of`,
also in decision.json as `bounds_reuse`), then the decision and its reasons),
`report/junit.xml` (one test case per condition of the rule and one per regressed question) and
`report/decision.json` (decision, reasons, margin, delta_cube, delta_ci, regressed: the interface
a CI job reads; `exit_code` too). The terminal gets the summary's lines (`terminal_lines`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.runpaths import RunPaths
from cube.method.release_rule import HOLD, RELEASE, UNDECIDED, Ruling, cube_bounds, decide

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


def baseline_problems(
    baseline: Baseline, run_folder: Path | None = None, *, relative: bool = False
) -> list[str]:
    """What keeps `baseline.folder` from being a completed run to compare with, each naming the
    folder ([] when none): it must hold a published run's `data/answers.parquet` and
    `data/scores.parquet`, and not be the folder this run publishes into. `relative`: the folder
    shown relative to the project (else by name), for the reports; the terminal gets it whole."""
    from cube.config.project import display_path

    f = baseline.folder
    where = f"baseline.run ({display_path(f) if relative else f})"
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


def params_baseline_problems(params: Params, base_dir: str | Path = ".") -> list[str]:
    """`baseline_problems` of the params' `baseline` block as `cube run` checks it before its
    first stage (for `cube validate`; [] without the block). A relative `outputs_dir` is taken
    against `base_dir`, as the run takes it against its working folder."""
    baseline = baseline_of(params)
    if baseline is None:
        return []
    run_folder = RunPaths.for_params(params, Path(base_dir) / params.outputs_dir).root
    return baseline_problems(baseline, run_folder)


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
    problems = baseline_problems(baseline, relative=True)
    if problems:
        return head | _undecided(problems, baseline.margin)
    try:
        a, b = resolve_side(baseline.folder), resolve_side(paths.root)
        differ = differing_questions(a.load_if_present("questions"), b.load_if_present("questions"))
        if differ:
            return head | _undecided([differing_reason(differ)], baseline.margin)
        tables: dict[str, pd.DataFrame] = {}
        out = paths.root / "compare" / FOLDER
        payload = _quiet_compare(a, b, out, n_permutations, tables)
    except (ValueError, FileNotFoundError, KeyError, SchemaError) as err:
        why = f"the baseline's run cannot be compared with this one: {without_paths(str(err))}"
        return head | _undecided([why], baseline.margin)
    head |= {"system": b.system, "baseline": {"run": a.run, "system": a.system}}
    head["bounds_reuse"] = _bounds_reuse(b.params, paths.root, baseline.folder)
    deltas = tables["deltas"]
    ruling = decide(
        deltas,
        int(payload["n_questions"]),
        margin=baseline.margin,
        alpha=float(payload["settings"]["alpha"]),
        min_questions=baseline.min_questions,
        n_units=payload["settings"].get("n_units"),
        baseline_only=len(baseline_only_questions(a, b)),
    )
    jury = deltas[(deltas["judge"] == "jury") & (deltas["metric"] == "cube_score")]
    units = int(payload["settings"].get("n_units") or payload["n_questions"])
    bounds = cube_bounds(jury.iloc[0].to_dict() if len(jury) else {}, ruling.alpha, units)
    head["delta_bounds"] = [_value(x) for x in bounds]  # what the rule read (wider than delta_ci)
    head["intervals"] = {
        "delta_ci": "compare's percentile interval (shown for reference)",
        "delta_bounds": "the bounds the rule read: delta_ci widened to the t bound",
    }
    return head | _figures(payload, deltas, b, a, tables) | _ruled(ruling, payload)


def baseline_only_questions(a: Any, b: Any) -> list[str]:
    """The question ids the baseline's system (`a`, a resolved side) was scored on and this run's
    (`b`) was not: the comparison, on common questions only, would not see them."""
    ids = []
    for side in (a, b):
        scores = side.load_if_present("scores")
        if scores is None or "question_id" not in scores:
            return []
        own = side.own(scores) if "system" in scores else scores
        ids.append(set(own["question_id"].astype(str)))
    return sorted(ids[0] - ids[1])


def differing_questions(qa: pd.DataFrame | None, qb: pd.DataFrame | None) -> list[str]:
    """The question ids both runs hold whose texts differ (whitespace at either end aside): a
    comparison pairs questions by id, so such a pair would compare two different questions. []
    when either run has no questions table (nothing to check against)."""
    if qa is None or qb is None or not {"question_id", "question"} <= set(qa) & set(qb):
        return []
    texts = [
        q.assign(question_id=q["question_id"].astype(str))
        .drop_duplicates("question_id")
        .set_index("question_id")["question"]
        .fillna("")
        .astype(str)
        .str.strip()
        for q in (qa, qb)
    ]
    common = texts[0].index.intersection(texts[1].index)
    differ = texts[0].loc[common] != texts[1].loc[common]
    return sorted(common[differ.to_numpy()])


def differing_reason(ids: list[str], shown: int = 5) -> str:
    """The undecided decision's reason for `differing_questions`."""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return (
        f"{len(ids)} question id{'s' if len(ids) != 1 else ''} of both runs "
        f"{'have' if len(ids) != 1 else 'has'} another text in the baseline than in this version "
        f"({', '.join(ids[:shown])}{more}): the comparison pairs questions by id and would compare "
        "different questions; give a changed question a new id, or run both versions on the same "
        "questions"
    )


def _bounds_reuse(params: Params, run_folder: Path, baseline: Path) -> dict[str, Any]:
    """Which of this run's bounds came from the cache and from the baseline's own calls
    (`cube.run.bounds_reuse.bounds_reuse_of`); `{"unknown": why}` when its tables cannot be read."""
    from cube.run.bounds_reuse import bounds_reuse_of

    try:
        return bounds_reuse_of(params, run_folder, baseline)
    except (OSError, KeyError, ValueError) as err:
        return {"unknown": f"the bounds' calls could not be counted: {err}"}


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
        "cause": regression_cause(r),
    }


LOST_GOLD = "gold document no longer retrieved"


def regression_cause(r: dict[str, Any]) -> str:
    """Why a question is listed as regressed (`cube.diagnose.regressions`: a drop beyond the
    judges' noise, or the gold document lost from the top N): a lost gold document whatever the
    scores did (they may be equal: the judges scored the answer alike without it)."""
    if str(r.get("retrieval_change")) == "lost":
        return LOST_GOLD
    return "jury score dropped beyond the judges' noise"


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
    extra = (
        "exit_code",
        "run",
        "system",
        "baseline",
        "n_questions",
        "conditions",
        "delta_bounds",
        "intervals",
        "bounds_reuse",
        "date",
    )
    return {k: report.get(k) for k in (*keys, *extra) if k in report}


REPORT_FILES = ("summary.md", "junit.xml", "decision.json")


def clear_gate(paths: RunPaths) -> None:
    """Remove an earlier gate's report and comparison from a run published without a baseline:
    a CI job must never read a decision the run did not make."""
    import shutil

    for name in REPORT_FILES:
        (paths.report / name).unlink(missing_ok=True)
    shutil.rmtree(paths.root / "compare" / FOLDER, ignore_errors=True)


_ABSOLUTE = re.compile(r"(?<![\w.~/:\\])(?:[A-Za-z]:\\|/)[^\s'\"`,;()<>]+")  # not a/b, 3/4


def without_paths(text: str) -> str:
    """`text` with every absolute path shown relative to the project (else by its name:
    `cube.config.project.display_path`): reports never carry the local folder layout."""
    from cube.config.project import display_path

    return _ABSOLUTE.sub(lambda m: display_path(m.group(0)), text)


def gate_failed(paths: RunPaths, baseline: Baseline, err: BaseException) -> dict[str, Any]:
    """The `undecided` report of a gate that raised (`err`: its type and message, no traceback,
    no absolute path), written as far as it can be: a CI job must read this run's failure, never
    an earlier run's decision."""
    from cube.pages.release import write_reports

    why = without_paths(str(err)) or "no message"
    reason = f"the release gate failed ({type(err).__name__}: {why}); no decision was made"
    report = {
        "run": paths.root.name,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "baseline": {"run": baseline.folder.name},
        "margin": baseline.margin,
    } | _undecided([reason], baseline.margin)
    clear_gate(paths)
    try:
        write_reports(report, paths.report, decision_record(report))
    except Exception:  # noqa: BLE001 - the record below must be written whatever broke the pages
        clear_gate(paths)
        paths.report.mkdir(parents=True, exist_ok=True)
        (paths.report / "decision.json").write_text(
            json.dumps(decision_record(report), ensure_ascii=True, indent=1, default=str),
            encoding="utf-8",
        )
    return report


def read_gate(report_dir: Path) -> dict[str, Any] | None:
    """A run's decision.json (None when there is none)."""
    path = report_dir / "decision.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
