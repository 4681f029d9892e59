"""How the decision is made: the paper's Lightweight Targeted Assessment (5.5), one number, a
verdict and what to do next. (This module was `cube.diagnose.lta`.)

`assess` turns the CuBE results of a run into the decision
(`cube.diagnose.decision_record.Decision`, a typed record) for non-technical readers: the jury's
CuBE score with its interval, R@k, the weighted score on retrieved cases, a verdict from the
thresholds in params (`cube.diagnose.verdict`, one function per withholding rule), the weakest
dimensions, and suggestions derived from the numbers (`cube.diagnose.suggest`: never from a fixed
list, each one names the figure behind it).
`human_sentence` says the human-calibrated line that notebook 07 records beside the decision.

The decision's other homes, one role each: `cube.diagnose.decision_record` (what it is, and its
JSON), `cube.diagnose.verdict` (the verdict's rules), `cube.diagnose.suggest` (what to do next),
`cube.run.decide` (stage 06: the run folder's inputs in, `results.json` out) and
`cube.pages.decision` (the page's text).
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.diagnose.decision_record import (
    Decision,
    DecisionInputs,
    SystemFigures,
    UsageFigures,
    WeakDimension,
)
from cube.diagnose.suggest import ordered_suggestions, retrieval_suggestions, suggestions
from cube.diagnose.verdict import (
    interval_width,
    not_validated_judges,
    nothing_retrieved,
    provisional_reason,
    retriever_note,
    verdict,
    verdict_bands,
    withheld_reasons,
)
from cube.method.evaluation import CubeResult


def _usage_figures(usage: pd.DataFrame | None, currency: str) -> UsageFigures:
    """The run's calls, tokens and cost from a `usage_summary` of every table holding calls."""
    if usage is None or usage.empty:
        return UsageFigures(
            cost_total=0.0,
            cost_this_run=0.0,
            tokens_total=0,
            calls_total=0,
            calls_cached=0,
            cost_note="",
            currency=currency,
        )
    priced = usage["cost_total"].notna() | (usage["calls"] == 0)
    unpriced = sorted(set(usage.loc[~priced, "model"].astype(str)))
    return UsageFigures(
        cost_total=None if unpriced else float(usage["cost_total"].fillna(0).sum()),
        cost_this_run=None if unpriced else float(usage["cost_this_run"].fillna(0).sum()),
        tokens_total=int((usage["input_tokens"] + usage["output_tokens"]).sum()),
        calls_total=int(usage["calls"].sum()),
        calls_cached=int(usage["cached_calls"].sum()),
        cost_note=f"no price set for {', '.join(unpriced)}" if unpriced else "",
        currency=currency,
    )


# A system's human-calibrated CuBE as results.json records it (`human_calibrated`): a
# `cube.method.ppi.PPIResult.headline()` (NaN as None) with `n_ratings`; read back from JSON, so
# any key may be absent (functional form: `lambda` is a keyword).
HumanHeadline = TypedDict(
    "HumanHeadline",
    {
        "cube_score": float | None,
        "cube_lo": float | None,
        "cube_hi": float | None,
        "weighted_score": float | None,
        "recall_at_k": float | None,
        "judge_only_cube": float | None,
        "n_rated": int,
        "n_retrieved": int | None,
        "n_ratings": int | None,
        "confidence": float,
        "n_resamples": int,
        "n_valid": int,
        "lambda": float | None,
        "flags": list[str],
    },
    total=False,
)


class VerdictFields(TypedDict):
    """The verdict part of a system's `SystemFigures` (`_verdict_fields`)."""

    verdict: str
    verdict_label: str
    verdict_bands: list[str]
    provisional: bool
    provisional_reason: str
    withheld_reasons: list[str]
    judging_failed: bool


class JuryFields(TypedDict):
    """The jury part of a system's `SystemFigures` (`_jury_fields`)."""

    n_judges: int
    judges_used: list[str]
    judges_not_validated: list[str]
    judges_excluded: dict[str, str]
    judge_evidence: dict[str, str]


def human_sentence(calibrated: HumanHeadline | None) -> str:
    """'Human-calibrated CuBE X [lo, hi] from N retrieved questions rated (M ratings)' (a
    `PPIResult.headline()` with `n_ratings`, as notebook 07 records it), '' without ratings; its
    flags follow whenever there are any (why the score is undefined, or what a defined one rests
    on). It says what it counts: `n_rated` is retrieved questions with a rating, not ratings."""
    h: HumanHeadline = calibrated or {}
    if not h.get("n_rated"):
        return ""
    of = f" of {h['n_retrieved']}" if h.get("n_retrieved") is not None else ""
    rows = f" ({h['n_ratings']} ratings)" if h.get("n_ratings") is not None else ""
    counted = f"With {h['n_rated']}{of} retrieved questions rated by humans{rows}"
    flags = list(h.get("flags") or [])
    if h.get("cube_score") is None:
        return (
            f"{counted}: the human-calibrated CuBE is undefined ("
            + "; ".join(flags or ["see notebook 07"])
            + ")."
        )
    note = (" Note: " + "; ".join(flags) + ".") if flags else ""
    return f"{counted}: {_human_cube(h)}.{note}"


def _human_cube(h: HumanHeadline) -> str:
    """The defined human-calibrated CuBE with its interval, beside the judges' alone."""
    ci = (
        f" [{h['cube_lo']:.1f}, {h['cube_hi']:.1f}] ({h['confidence']:.0%} interval, bootstrap "
        "over the questions and their ratings)"
        if h.get("cube_lo") is not None
        else " (no interval)"
    )
    judge = h.get("judge_only_cube")
    beside = f"; the judges alone, on the same means: {judge:.1f}" if judge is not None else ""
    return (
        f"CuBE {h['cube_score']:.1f}{ci}, the judges calibrated to the raters by "
        f"prediction-powered inference{beside}"
    )


def _defined(value: float | None) -> bool:
    return value is not None and bool(np.isfinite(value))


def _clip_note(head: SystemFigures, params: Params) -> str:
    values = [head.cube_score, *(head.cube_ci or [])]
    if all(0 <= v <= 100 for v in values if _defined(v)):
        return ""
    return (
        " (values outside [0, 100] by at most analysis.bounds_tolerance = "
        f"{params.analysis.bounds_tolerance:g} points are read at the nearest bound)"
    )


def _system_figures(
    result: CubeResult, params: Params, top_n: int = 8, unmeasured: list[str] | None = None
) -> SystemFigures:
    cube = 0.0 if nothing_retrieved(result) else result.jury_cube()
    lo, hi = result.interval("jury", "cube_score")
    return SystemFigures(
        system=str(result.system),
        cube_score=cube,
        cube_ci=[lo, hi] if np.isfinite(lo) else None,
        recall_at_k=result.recall_at_k,
        top_n=top_n,
        weighted_score=float(result.jury.at["mean", "weighted_score"]),
        **_verdict_fields(result, params, cube, unmeasured or []),
        retriever_note=retriever_note(result, top_n),
        **_jury_fields(result),
        n_questions=result.n_questions,
    )


def _verdict_fields(
    result: CubeResult, params: Params, cube: float, unmeasured: list[str]
) -> VerdictFields:
    """The verdict (or why it is withheld), its label, the bands its interval touches and whether
    it is provisional; `judging_failed` when no judge has usable scores."""
    reasons, failed = withheld_reasons(result, params, unmeasured)
    # within the tolerance, a value just outside [0, 100] is read at the nearest bound for the
    # verdict
    shown = float(np.clip(cube, 0, 100)) if np.isfinite(cube) else cube
    thresholds = params.analysis.verdict_thresholds
    name = "withheld" if reasons else verdict(shown, thresholds)
    provisional = "" if reasons else provisional_reason(result, params)
    lo, hi = result.interval("jury", "cube_score")
    bands = [] if reasons or nothing_retrieved(result) else verdict_bands(lo, hi, thresholds)
    label = " to ".join(bands) if len(bands) > 1 else name
    return {
        "verdict": name,
        "verdict_label": label + (" (provisional)" if provisional else ""),
        "verdict_bands": bands or [name],
        "provisional": bool(provisional),
        "provisional_reason": provisional,
        "withheld_reasons": reasons,
        "judging_failed": bool(failed and not result.jury_judges),
    }


def _jury_fields(result: CubeResult) -> JuryFields:
    """The jury, its members no test could validate, the judges the gate excluded (with why) and
    what the gate read of each judge."""
    table = result.cube_table
    evidence = table["gate_evidence"].items() if "gate_evidence" in table else ()
    return {
        "n_judges": len(result.jury_judges),
        "judges_used": [str(j) for j in result.jury_judges],
        "judges_not_validated": [str(j) for j in not_validated_judges(result)],
        "judges_excluded": {str(j): str(r) for j, r in result.excluded_judges.items()},
        "judge_evidence": {str(j): str(e) for j, e in evidence},
    }


def _sentence(head: SystemFigures, result: CubeResult, params: Params, top_n: int) -> str:
    """The decision's one sentence: the verdict (or why it is withheld), the score with its
    interval, R@k and W, whether it is provisional and which verdicts the interval spans."""
    from cube.method.design import design_note  # the families' design effect (issue 30)

    ci = head.cube_ci
    ci_text = f" ({params.analysis.confidence:.0%} interval {ci[0]:.1f}-{ci[1]:.1f})" if ci else ""
    if head.verdict == "withheld":
        sentence = _withheld_sentence(head, result, ci_text, top_n)
    elif head.retriever_note:
        sentence = f"{head.system}: CuBE 0.0, {head.verdict}: {head.retriever_note}."
    else:
        sentence = _verdict_sentence(head, result, params, ci_text, top_n)
    if head.provisional:
        sentence += f" The verdict is provisional: {head.provisional_reason}."
    families = design_note(getattr(result, "design", {}))
    sentence += f" {families}" if families else ""
    if len(head.verdict_bands) > 1:
        sentence += (
            f" The {params.analysis.confidence:.0%} interval spans the verdicts "
            f"{', '.join(head.verdict_bands)}, so the verdict is given as "
            f'"{" to ".join(head.verdict_bands)}".'
        )
    return sentence


def _jury_text(head: SystemFigures, result: CubeResult) -> str:
    return f"{head.n_judges} of {len(result.cube_table)} judges"


def _withheld_sentence(head: SystemFigures, result: CubeResult, ci_text: str, top_n: int) -> str:
    """Why the verdict is withheld, the jury's score said to be no basis, and R@k."""
    return (
        f"{head.system}: verdict withheld ({'; '.join(head.withheld_reasons)}). "
        + (
            f"The jury of {_jury_text(head, result)} gives a CuBE score of "
            f"{head.cube_score:.1f}{ci_text}, which is not a reliable basis for a decision. "
            if _defined(head.cube_score)
            else ""
        )
        + (
            f"Retrieval found the gold document for {result.recall_at_k:.1%} of questions "
            f"(R@{top_n})."
            if _defined(result.recall_at_k)
            else f"R@{top_n} is undefined: the retrieval was not measured."
        )
    )


def _verdict_sentence(
    head: SystemFigures, result: CubeResult, params: Params, ci_text: str, top_n: int
) -> str:
    """The score with its interval across the dimensions, the verdict, R@k and W."""
    dims = [c for c in result.cube_table.columns if c in set(result.weights["dimension"])]
    return (
        f"{head.system} achieved a CuBE score of {head.cube_score:.1f}{ci_text} across "
        f"{', '.join(dims)} (jury of {_jury_text(head, result)}): "
        f"{head.verdict_label}{_clip_note(head, params)}. Retrieval found the gold document "
        f"for {result.recall_at_k:.1%} of questions (R@{top_n}), and on those the answers "
        f"reach {head.weighted_score:.1f} of 100 on the scale from the no-document bound "
        "(0) to the gold-document bound (100)."
    )


def _caveats(inputs: DecisionInputs) -> str:
    """Synthetic data, offline judges and the bound answerer, said once."""
    notes = []
    if inputs.synthetic:
        notes.append(
            "This run uses a SYNTHETIC knowledge base (every row marked synthetic: generated, not "
            "real service guides)."
        )
    if inputs.offline_judges:
        notes.append(
            f"Judges {', '.join(inputs.offline_judges)} are deterministic rubric algorithms, not "
            "LLMs."
        )
    if inputs.bound_note:
        notes.append(inputs.bound_note)
    return " ".join(notes)


def _weakest(result: CubeResult, params: Params) -> list[WeakDimension]:
    """The dimensions below `analysis.weak_dimension_below`, lowest first (else the lowest)."""
    dims = [c for c in result.cube_table.columns if c in set(result.weights["dimension"])]
    means = result.jury.loc["mean", dims].astype(float)
    sds = result.jury.loc["sd", dims].astype(float)
    known = means.dropna()
    weak = [d for d in known.sort_values().index if known[d] < params.analysis.weak_dimension_below]
    if not weak and len(known):
        weak = [known.idxmin()]
    return [WeakDimension(dimension=d, score=float(means[d]), sd=float(sds[d])) for d in weak]


def assess(
    results: dict[str, CubeResult], params: Params, inputs: DecisionInputs | None = None
) -> Decision:
    """The decision about the run's first system (and a row for every system), built once.

    `inputs.retrieval` (from `cube.run.decide.retrieval_quality`): the primary system's `r_at_1`,
    its `near_duplicate_confusion` and the knowledge base's `duplicate_texts`, shown beside R@k
    with a suggestion when the confusion is high or the knowledge base holds duplicates.
    `inputs.diagnosis`: `cube.run.diagnosis.for_decision` (R@k curve, failure patterns, refusal,
    TOP-N sweep), stated in sentences."""
    inputs = inputs or DecisionInputs()
    primary, top_n = params.systems[0].name, params.systems[0].top_n
    result = results[primary]
    head = _system_figures(result, params, top_n, inputs.unmeasured.get(primary))
    others = {s.name: (s.top_n, results[s.name]) for s in params.systems[1:] if s.name in results}
    tips = suggestions(
        result,
        params,
        top_n,
        inputs.call_failure_share,
        inputs.parse_failure_share,
        inputs.skipped_share,
        others=others,
    )
    currency = next((m.currency for m in params.models.values()), "USD")
    return Decision(
        **head.model_dump(),
        **_usage_figures(inputs.usage, currency).model_dump(),
        **diagnosis_sentences(primary, inputs.diagnosis),
        confidence=params.analysis.confidence,
        design=getattr(result, "design", {}),
        sentence=_sentence(head, result, params, top_n),
        weakest=_weakest(result, params),
        suggestions=ordered_suggestions(
            retrieval_suggestions(inputs.retrieval),
            tips,
            inputs.diagnosis.get("failure_patterns"),
        ),
        retrieval_quality=inputs.retrieval,
        weighted_label="Answer quality when retrieved",
        judges=[str(j) for j in result.cube_table.index],
        systems=[
            _system_figures(
                r,
                params,
                next((s.top_n for s in params.systems if s.name == n), top_n),
                inputs.unmeasured.get(n),
            )
            for n, r in results.items()
        ],
        synthetic_data=_caveats(inputs),
        method_note="CuBE = weighted score × R@k; each dimension is placed between the same "
        "answering model without documents (0) and with the gold document alone (100), which "
        "cancels each judge's own leniency.",
        width=interval_width(result, params, params.analysis.max_interval_width),
        self_preference=inputs.self_preference,
        injection=inputs.injection,
    )


def diagnosis_sentences(system: str, diagnosis: dict[str, Any]) -> dict[str, Any]:
    """The diagnostics of the decision page: `retrieval_sentence` (the R@k curve) and
    `failure_patterns` (the top three with counts and suggestions) with `patterns_sentence`."""
    from cube.diagnose.failures import patterns_sentence
    from cube.diagnose.retrieval import curve_sentence, for_results

    out: dict[str, Any] = {}
    if diagnosis.get("retrieval"):
        out["retrieval_sentence"] = curve_sentence(system, diagnosis["retrieval"])
        out["retrieval"] = {**for_results(diagnosis["retrieval"]), "system": system}
    if diagnosis.get("failure_patterns"):
        out["failure_patterns"] = diagnosis["failure_patterns"]
        out["patterns_sentence"] = patterns_sentence(diagnosis["failure_patterns"])
    if diagnosis.get("refusal"):
        from cube.diagnose.refusal import refusal_sentence

        out["refusal"] = diagnosis["refusal"]
        out["refusal_sentence"] = refusal_sentence(
            system, {k: (float("nan") if v is None else v) for k, v in diagnosis["refusal"].items()}
        )
    if diagnosis.get("top_n_sweep"):
        out["top_n_sweep"] = diagnosis["top_n_sweep"]
        out["sweep_sentence"] = diagnosis["top_n_sweep"]["sentence"]
    return out
