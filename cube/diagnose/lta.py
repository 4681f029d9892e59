"""The Lightweight Targeted Assessment (paper 5.5): one number, a verdict, and what to do next.

`assess` turns the CuBE results of a run into the decision page's content for non-technical
readers: the jury's CuBE score with its interval, R@k, the weighted score on retrieved
cases, a verdict from the thresholds in params, the weakest dimensions, and suggestions
derived from the numbers (never from a fixed list: each one names the figure behind it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cube.config.dimension_files import dimension_advice
from cube.config.params import Params
from cube.method.evaluation import CubeResult
from cube.method.gate import WITHHOLD_SEP


def verdict(score: float, thresholds: dict[str, float]) -> str:
    """The highest verdict whose lower bound the score reaches (`poor` below all of them)."""
    if not np.isfinite(score):
        return "undetermined"
    for name, low in sorted(thresholds.items(), key=lambda kv: -kv[1]):
        if score >= low:
            return name
    return "poor"


def verdict_bands(lo: float, hi: float, thresholds: dict[str, float]) -> list[str]:
    """Every verdict band the interval [lo, hi] touches, lowest first (one band when it stays in
    one); empty when the interval is undefined."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return []
    names = [name for name, _ in sorted(thresholds.items(), key=lambda kv: kv[1])]
    out = [
        verdict(float(np.clip(lo, 0, 100)), thresholds),
        verdict(float(np.clip(hi, 0, 100)), thresholds),
    ]
    order = ["poor", *names]
    return order[order.index(out[0]) : order.index(out[1]) + 1]


def _usage_figures(usage: pd.DataFrame | None) -> dict[str, Any]:
    if usage is None or usage.empty:
        return {
            "cost_total": 0.0,
            "tokens_total": 0,
            "calls_total": 0,
            "calls_cached": 0,
            "cost_note": "",
        }
    priced = usage["cost_total"].notna() | (usage["calls"] == 0)
    unpriced = sorted(set(usage.loc[~priced, "model"].astype(str)))
    return {
        "cost_total": None if unpriced else float(usage["cost_total"].fillna(0).sum()),
        "cost_this_run": None if unpriced else float(usage["cost_this_run"].fillna(0).sum()),
        "tokens_total": int((usage["input_tokens"] + usage["output_tokens"]).sum()),
        "calls_total": int(usage["calls"].sum()),
        "calls_cached": int(usage["cached_calls"].sum()),
        "cost_note": f"no price set for {', '.join(unpriced)}" if unpriced else "",
    }


def withheld_reasons(result: CubeResult, params: Params) -> tuple[list[str], bool]:
    """Why the verdict must be withheld (empty: a verdict may be given), and whether judging failed
    wholesale (no judge has usable scores, or every judge fails the gate because of failures)."""
    ap = params.analysis
    reasons: list[str] = []
    excluded = result.excluded_judges
    table = result.cube_table
    failed = (
        "judging_failed" in table
        and len(table) > 0
        and bool(table["judging_failed"].astype(bool).all())
    )
    unknown = int(result.settings.get("retrieval_unknown") or 0)
    asked = result.n_questions + unknown
    if result.n_questions == 0 and unknown:  # every system call failed: the judges are not at fault
        reasons.append(f"retrieval unknown for all {unknown} questions (system calls failed)")
    elif asked and unknown / asked > ap.max_system_failure_rate:
        reasons.append(
            f"{unknown} of {asked} calls to the system under test failed ({unknown / asked:.0%}, "
            f"more than analysis.max_system_failure_rate = {ap.max_system_failure_rate:.0%}): the "
            f"figures rest on the {result.n_questions} questions it answered, which need not be "
            "typical"
        )
    if nothing_retrieved(result):
        # CuBE = W x 0 = 0 whatever the judges: the retriever, not the judges, decides
        # (retriever_note)
        pass
    elif not result.jury_judges and not (result.n_questions == 0 and unknown):
        detail = "; ".join(f"{j}: {r}" for j, r in excluded.items()) or "no judge"
        reasons.append(f"no judge passed the validity gate ({detail})")
    not_the_judges = gate_withhold_reasons(result)
    reasons += not_the_judges
    if noise := noise_w_judges(result):
        reasons.append(
            f"the jury CuBE and W are undefined: the W of {', '.join(noise)} is noise on this run "
            "(the causes above), so no mean including it is published; per-judge values are shown "
            "per judge"
        )
    cube = result.jury_cube()
    lo, hi = result.interval("jury", "cube_score")
    tol = ap.bounds_tolerance
    if nothing_retrieved(result):
        cube = 0.0
    if result.jury_judges and not np.isfinite(cube) and not not_the_judges:
        reasons.append("the jury CuBE score is undefined (see the flags)")
    elif np.isfinite(cube) and not -tol <= cube <= 100 + tol:
        reasons.append(
            f"the jury CuBE {cube:.1f} leaves [0, 100] by more than analysis.bounds_tolerance = "
            f"{tol:g}"
        )
    boot, n_boot = (
        result.bootstrap,
        int(result.settings.get("bootstrap") or 0),
    )  # the resamples drawn
    if boot is not None and len(boot) and n_boot > 0 and not nothing_retrieved(result):
        from cube.method.bootstrap import MIN_VALID_SHARE

        row = boot[(boot["judge"] == "jury") & (boot["metric"] == "cube_score")]
        n_valid = int(row["n_valid"].iloc[0]) if len(row) else 0
        if result.jury_judges and n_valid < MIN_VALID_SHARE * n_boot:
            reasons.append(
                f"only {n_valid} of {n_boot} bootstrap resamples give a defined jury CuBE (fewer "
                f"than {MIN_VALID_SHARE:.0%}): the interval rests on a selection of resamples"
            )
    if np.isfinite(lo) and np.isfinite(hi):
        if lo < -tol or hi > 100 + tol:
            reasons.append(
                f"the {ap.confidence:.0%} interval {lo:.1f}-{hi:.1f} leaves [0, 100] by more than "
                f"analysis.bounds_tolerance = {tol:g}"
            )
        if hi - lo > ap.max_interval_width:
            reasons.append(
                f"the {ap.confidence:.0%} interval {lo:.1f}-{hi:.1f} is {hi - lo:.1f} points wide, "
                f"more than analysis.max_interval_width = {ap.max_interval_width:g}"
            )
    return reasons, failed


def gate_withhold_reasons(result: CubeResult) -> list[str]:
    """The gate's causes to withhold the verdict that are facts about the run, not the judges
    (`gate_withhold` of the jury's members: a run too small for the bounds test, W undefined or
    outside the band because of rank-correlation weights), each said once with the judges
    it concerns."""
    table = result.cube_table
    if "gate_withhold" not in table or nothing_retrieved(result):
        return []
    by_cause: dict[str, list[str]] = {}
    for judge in result.jury_judges:
        for cause in filter(None, str(table.at[judge, "gate_withhold"] or "").split(WITHHOLD_SEP)):
            if cause.startswith("the bounds test cannot decide"):
                by_cause.setdefault(f"no judge could be validated: {cause}", []).append(judge)
            else:
                by_cause.setdefault(f"judge {judge}: {cause}", []).append(judge)
    return list(by_cause)


def noise_w_judges(result: CubeResult) -> list[str]:
    """The jury members the gate kept although their W fails rule (f) for a cause that is not theirs
    (`gate_w_unusable`): `jury_summary` leaves the jury's W and CuBE undefined for them."""
    table = result.cube_table
    if "gate_w_unusable" not in table or nothing_retrieved(result):
        return []
    return [j for j in result.jury_judges if bool(table.at[j, "gate_w_unusable"])]


def not_validated_judges(result: CubeResult) -> list[str]:
    """Jury members no test could validate on this run (`gate_validated` False: the bounds test
    could not decide and neither the audit nor the retrieval test passed them): kept,
    not validated."""
    table = result.cube_table
    if "gate_validated" not in table:
        return []
    return [j for j in result.jury_judges if not bool(table.at[j, "gate_validated"])]


def nothing_retrieved(result: CubeResult) -> bool:
    """R@k = 0 on questions of known retrieval: CuBE = W x R@k is 0 whatever the judges say."""
    return result.n_questions > 0 and result.recall_at_k == 0


def provisional_reason(result: CubeResult, params: Params) -> str:
    """Why a verdict is provisional ('' when it is not): without an interval neither the width
    rule nor the [0, 100] rule on the interval could be checked."""
    lo, hi = result.interval("jury", "cube_score")
    if nothing_retrieved(result) or (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    if int(result.settings.get("bootstrap") or 0) == 0:
        why = "no interval was computed (analysis.bootstrap = 0)"
    else:
        why = "the interval is undefined"
    return (
        f"{why}, so the precision of this score is unknown and neither analysis.max_interval_width "
        "nor the [0, 100] rule on the interval could be checked"
    )


def retriever_note(result: CubeResult, top_n: int) -> str:
    """The cause named when nothing was retrieved ('' otherwise)."""
    if not nothing_retrieved(result):
        return ""
    return (
        f"the retriever found the gold document for none of the {result.n_questions} questions "
        f"(R@{top_n} = 0), so CuBE = W × R@k = 0 whatever the judges score: the cause is "
        "retrieval, not the judges"
    )


def human_sentence(calibrated: dict[str, Any] | None) -> str:
    """'With N human ratings: CuBE X [lo, hi]' (a `PPIResult.headline()`), '' without ratings; its
    flags follow whenever there are any (why the score is undefined, or what a defined one
    rests on)."""
    h = calibrated or {}
    if not h.get("n_rated"):
        return ""
    flags = list(h.get("flags") or [])
    if h.get("cube_score") is None:
        return (
            f"With {h['n_rated']} human ratings: the human-calibrated CuBE is undefined ("
            + "; ".join(flags or ["see notebook 07"])
            + ")."
        )
    ci = (
        f" [{h['cube_lo']:.1f}, {h['cube_hi']:.1f}] ({h['confidence']:.0%} interval, bootstrap "
        "over the questions and their ratings)"
        if h.get("cube_lo") is not None
        else " (no interval)"
    )
    judge = h.get("judge_only_cube")
    beside = f"; the judges alone, on the same means: {judge:.1f}" if judge is not None else ""
    note = (" Note: " + "; ".join(flags) + ".") if flags else ""
    return (
        f"With {h['n_rated']} human ratings: CuBE {h['cube_score']:.1f}{ci}, the judges calibrated "
        f"to the raters by prediction-powered inference{beside}.{note}"
    )


def _clip_note(head: dict[str, Any], params: Params) -> str:
    values = [head["cube_score"], *(head["cube_ci"] or [])]
    if all(0 <= v <= 100 for v in values if np.isfinite(v)):
        return ""
    return (
        " (values outside [0, 100] by at most analysis.bounds_tolerance = "
        f"{params.analysis.bounds_tolerance:g} points are read at the nearest bound)"
    )


def _system_figures(result: CubeResult, params: Params, top_n: int = 8) -> dict[str, Any]:
    cube = 0.0 if nothing_retrieved(result) else result.jury_cube()
    lo, hi = result.interval("jury", "cube_score")
    reasons, failed = withheld_reasons(result, params)
    # within the tolerance, a value just outside [0, 100] is read at the nearest bound for the
    # verdict
    shown = float(np.clip(cube, 0, 100)) if np.isfinite(cube) else cube
    thresholds = params.analysis.verdict_thresholds
    name = "withheld" if reasons else verdict(shown, thresholds)
    provisional = "" if reasons else provisional_reason(result, params)
    bands = [] if reasons or nothing_retrieved(result) else verdict_bands(lo, hi, thresholds)
    label = " to ".join(bands) if len(bands) > 1 else name
    if provisional:
        label += " (provisional)"
    return {
        "system": result.system,
        "cube_score": cube,
        "cube_ci": [lo, hi] if np.isfinite(lo) else None,
        "recall_at_k": result.recall_at_k,
        "weighted_score": float(result.jury.at["mean", "weighted_score"]),
        "verdict": name,
        "verdict_label": label,
        "verdict_bands": bands or [name],
        "provisional": bool(provisional),
        "provisional_reason": provisional,
        "retriever_note": retriever_note(result, top_n),
        "withheld_reasons": reasons,
        "judging_failed": bool(failed and not result.jury_judges),
        "n_judges": len(result.jury_judges),
        "judges_used": result.jury_judges,
        "judges_not_validated": not_validated_judges(result),
        "judges_excluded": result.excluded_judges,
        "judge_evidence": {str(j): str(e) for j, e in result.cube_table["gate_evidence"].items()}
        if "gate_evidence" in result.cube_table
        else {},
    }


def suggestions(
    result: CubeResult,
    params: Params,
    top_n: int,
    call_failure_share: float = 0.0,
    parse_failure_share: float = 0.0,
    skipped_share: float = 0.0,
    others: dict[str, tuple[int, CubeResult]] | None = None,
) -> list[str]:
    """Suggestions derived from the numbers, each naming the figure behind it (none when no number
    calls for a change: `ordered_suggestions` decides whether to keep the configuration). `others`:
    the run's other systems with their top_n, to report what a larger TOP-N actually did."""
    ap = params.analysis
    out: list[str] = []
    if result.recall_at_k < ap.low_recall_below:
        out.append(
            f"Retrieval misses the gold document for {1 - result.recall_at_k:.0%} of questions "
            f"(R@{top_n} = {result.recall_at_k:.1%}): raise TOP-N above {top_n} or improve "
            "retrieval (item-name matching, hybrid search)."
        )
        r_all = result.correlations_all["r"].mean()
        r_ret = result.correlations_retrieved["r"].mean()
        measured = any(
            n > top_n for n, _ in (others or {}).values()
        )  # a measurement beats a prediction
        if np.isfinite(r_all) and np.isfinite(r_ret) and r_ret < r_all - 0.1 and not measured:
            out.append(
                "Once the gold document is retrieved its rank matters little (mean correlation "
                f"with rank {r_all:.2f} on all questions, {r_ret:.2f} on retrieved ones), so a "
                "larger TOP-N should cost little answer quality; verify with a second system at a "
                "larger top_n."
            )
        for name, (n, other) in (others or {}).items():
            if n > top_n:
                w0, w1 = (
                    result.jury.at["mean", "weighted_score"],
                    other.jury.at["mean", "weighted_score"],
                )
                out.append(
                    f"In this run {name} (TOP-N {n}) retrieved {other.recall_at_k:.1%} (vs "
                    f"{result.recall_at_k:.1%}) with a weighted score of {w1:.1f} (vs {w0:.1f}): "
                    f"CuBE {other.jury_cube():.1f} vs {result.jury_cube():.1f}."
                )
    jury = result.jury
    dims = [c for c in result.cube_table.columns if c in set(result.weights["dimension"])]
    for d in sorted(dims, key=lambda d: (not np.isfinite(jury.at["mean", d]), jury.at["mean", d])):
        score = jury.at["mean", d]
        if np.isfinite(score) and score < ap.weak_dimension_below:
            advice = dimension_advice(d) or f"raise {d}: revise the answering prompt for it"
            out.append(
                f"{d.capitalize()} is weak ({score:.1f} of 100 between the bounds): {advice}."
            )
    sd = jury.at["sd", "cube_score"]
    lo, hi = result.interval()
    if (np.isfinite(sd) and sd > 10) or (np.isfinite(hi - lo) and hi - lo > 20):
        out.append(
            f"The judges disagree (SD of CuBE across judges {sd:.1f}, interval {lo:.1f}-{hi:.1f}): "
            "add judges or human ratings (notebook 07) before a deployment decision."
        )
    flagged = result.cube_table.index[result.cube_table["flags"] != ""].tolist()
    if flagged:
        out.append(
            f"Bounds anomalies for {', '.join(map(str, flagged))} (a score outside its zero-full "
            "range or a zero denominator): inspect the bound sets of those judges in notebook 05."
        )
    if call_failure_share > 0.02:
        out.append(
            f"{call_failure_share:.1%} of judgments failed at the call (after retries): re-execute "
            "the scoring with `cube run PARAMS --only 03.. --force` to retry them; answered calls "
            "come from the cache."
        )
    if parse_failure_share > 0.02:
        out.append(
            f"{parse_failure_share:.1%} of judge replies held no usable 0-10 score: re-running "
            "returns the same cached replies, so adjust the judge's prompt or max_tokens, or add "
            "samples."
        )
    if skipped_share > 0.02:
        out.append(
            f"{skipped_share:.1%} of judgments were skipped because the answer itself is missing "
            "(the answering call failed): re-run the answering stage with `--only 02.. --force`."
        )
    unknown = result.settings.get("retrieval_unknown", 0)
    if unknown:
        out.append(
            f"{unknown} question(s) are left out because the system call failed (retrieval "
            "unknown): re-run the answering stage (`--only 02.. --force`) once the system is "
            "reachable."
        )
    return out


KEEP = (
    "No dimension is below the threshold, retrieval is above target and no failure pattern or data "
    "problem calls for a change: keep this configuration and re-evaluate on a fresh question set "
    "before each release."
)
# A failure pattern whose remedy a number-based suggestion already gives (said once, by the number).
_SAID_BY = {
    "retrieval_miss": "Retrieval misses",
    "wrong_near_duplicate": "retrieved a near-duplicate",
    "judge_disagreement": "The judges disagree",
}
# low_rank's own remedy ("put fewer documents in the prompt") contradicts "raise TOP-N": with low
# recall, re-ranking is what keeps a larger TOP-N from pushing the gold document down.
_LOW_RANK_WITH_RAISE = (
    "re-rank the retrieved list (a cross-encoder) so that the gold document found by a larger "
    "TOP-N comes first, rather than putting fewer documents in the prompt"
)


def ordered_suggestions(
    retrieval_tips: list[str], number_tips: list[str], patterns: dict[str, Any] | None = None
) -> list[str]:
    """The decision's one list of suggestions, in order and without contradictions: data and
    knowledge-base problems and retrieval first (`retrieval_tips`, then `number_tips` from
    `suggestions`), then the remedies of the top failure patterns (each with its count) that no
    number-based suggestion already gives. "Keep this configuration" only when nothing else is
    suggested; "put fewer documents in the prompt" (low_rank) yields to "raise TOP-N"
    (re-rank instead)."""
    out = [*retrieval_tips, *number_tips]
    raise_top_n = any("raise TOP-N" in t for t in out)
    low = (patterns or {}).get("low") or 0
    for t in (patterns or {}).get("top", []):
        said = _SAID_BY.get(t["pattern"])
        if said and any(said in o for o in out):
            continue
        remedy = (
            _LOW_RANK_WITH_RAISE if t["pattern"] == "low_rank" and raise_top_n else t["suggestion"]
        )
        name = t["pattern"].replace("_", " ")
        out.append(
            f"{name[0].upper() + name[1:]} explains {t['count']} of the {low} low-scoring answers "
            f"({t['share']:.0%}): {remedy}."
        )
    return out or [KEEP]


def assess(
    results: dict[str, CubeResult],
    params: Params,
    *,
    usage: pd.DataFrame | None = None,
    synthetic: bool = False,
    offline_judges: list[str] | None = None,
    call_failure_share: float = 0.0,
    parse_failure_share: float = 0.0,
    skipped_share: float = 0.0,
    bound_note: str = "",
    retrieval: dict[str, Any] | None = None,
    diagnosis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The decision page's content for the run's first system (and a row for every system).

    `retrieval` (from `pipeline.retrieval_quality`): the primary system's `r_at_1`, its
    `near_duplicate_confusion` and the knowledge base's `duplicate_texts`, shown beside R@k
    with a suggestion when the confusion is high or the knowledge base holds duplicates.
    `diagnosis`: `cube.run.diagnosis.for_decision` (R@k curve, failure patterns, refusal, TOP-N
    sweep), stated in sentences."""
    primary = params.systems[0].name
    result = results[primary]
    top_n = params.systems[0].top_n
    head = _system_figures(result, params, top_n)
    dims = [c for c in result.cube_table.columns if c in set(result.weights["dimension"])]
    means = result.jury.loc["mean", dims].astype(float)
    sds = result.jury.loc["sd", dims].astype(float)
    known = means.dropna()
    weak = [d for d in known.sort_values().index if known[d] < params.analysis.weak_dimension_below]
    if not weak and len(known):
        weak = [known.idxmin()]
    ci = head["cube_ci"]
    ci_text = f" ({params.analysis.confidence:.0%} interval {ci[0]:.1f}-{ci[1]:.1f})" if ci else ""
    jury_text = f"{head['n_judges']} of {len(result.cube_table)} judges"
    if head["verdict"] == "withheld":
        sentence = (
            f"{primary}: verdict withheld ({'; '.join(head['withheld_reasons'])}). "
            + (
                f"The jury of {jury_text} gives a CuBE score of {head['cube_score']:.1f}{ci_text}, "
                "which is not a reliable basis for a decision. "
                if np.isfinite(head["cube_score"])
                else ""
            )
            + f"Retrieval found the gold document for {result.recall_at_k:.1%} of questions "
            f"(R@{top_n})."
        )
    elif head["retriever_note"]:
        sentence = f"{primary}: CuBE 0.0, {head['verdict']}: {head['retriever_note']}."
    else:
        sentence = (
            f"{primary} achieved a CuBE score of {head['cube_score']:.1f}{ci_text} across "
            f"{', '.join(dims)} (jury of {jury_text}): "
            f"{head['verdict_label']}{_clip_note(head, params)}. Retrieval found the gold document "
            f"for {result.recall_at_k:.1%} of questions (R@{top_n}), and on those the answers "
            f"reach {head['weighted_score']:.1f} of 100 on the scale from the no-document bound "
            "(0) to the gold-document bound (100)."
        )
    if head["provisional"]:
        sentence += f" The verdict is provisional: {head['provisional_reason']}."
    from cube.method.design import design_note  # the families' design effect (issue 30)

    families = design_note(getattr(result, "design", {}))
    sentence += f" {families}" if families else ""
    if len(head["verdict_bands"]) > 1:
        sentence += (
            f" The {params.analysis.confidence:.0%} interval spans the verdicts "
            f"{', '.join(head['verdict_bands'])}, so the verdict is given as "
            f'"{" to ".join(head["verdict_bands"])}".'
        )
    notes = []
    if synthetic:
        notes.append(
            "This run uses a SYNTHETIC knowledge base (every row marked synthetic: generated, not "
            "real service guides)."
        )
    if offline_judges:
        notes.append(
            f"Judges {', '.join(offline_judges)} are deterministic rubric algorithms, not LLMs."
        )
    if bound_note:
        notes.append(bound_note)
    return {
        **head,
        "top_n": top_n,
        "confidence": params.analysis.confidence,
        "design": getattr(result, "design", {}),
        "sentence": sentence,
        "weakest": [{"dimension": d, "score": float(means[d]), "sd": float(sds[d])} for d in weak],
        "suggestions": ordered_suggestions(
            _retrieval_suggestions(retrieval or {}),
            suggestions(
                result,
                params,
                top_n,
                call_failure_share,
                parse_failure_share,
                skipped_share,
                others={
                    s.name: (s.top_n, results[s.name])
                    for s in params.systems[1:]
                    if s.name in results
                },
            ),
            (diagnosis or {}).get("failure_patterns"),
        ),
        "retrieval_quality": _json_safe(retrieval or {}),
        "weighted_label": "Answer quality when retrieved",
        "judges": [str(j) for j in result.cube_table.index],
        "n_questions": result.n_questions,
        "systems": [
            _system_figures(
                r, params, next((s.top_n for s in params.systems if s.name == n), top_n)
            )
            for n, r in results.items()
        ],
        "synthetic_data": " ".join(notes),
        "method_note": "CuBE = weighted score × R@k; each dimension is placed between the same "
        "answering model without documents (0) and with the gold document alone (100), which "
        "cancels each judge's own leniency.",
        "currency": next((m.currency for m in params.models.values()), "USD"),
        **_usage_figures(usage),
        **diagnosis_sentences(primary, diagnosis or {}),
    }


def _json_safe(value: Any) -> Any:
    """NaN as null, so `results.json` stays strict JSON."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _retrieval_suggestions(retrieval: dict[str, Any]) -> list[str]:
    from cube.diagnose.near_duplicates import confusion_note

    out = []
    merged, named = (
        retrieval.get("documents_merging_services") or 0,
        retrieval.get("documents_named_placeholder") or 0,
    )
    if (
        merged or named
    ):  # a mapping that ran but is wrong: the score describes a broken knowledge base
        what = [f"{merged} document(s) each merge 3 or more services (family_id)"] if merged else []
        what += [f"{named} document(s) are named by a placeholder (无, /...)"] if named else []
        out.append(
            "Warning: the knowledge base looks mis-mapped: "
            + " and ".join(what)
            + "; the score is about those merged documents, not your services. Fix corpus.columns "
            "/ group_by as `cube validate` suggests (page 01 lists the warnings)."
        )
    dup = retrieval.get("duplicate_texts") or 0
    if dup:
        out.append(
            f"The knowledge base holds {dup} document(s) whose text duplicates another's, so their "
            "questions cannot reach rank 1: deduplicate it (`cube validate` lists them; a "
            "long-format file needs corpus.group_by)."
        )
    note = confusion_note(retrieval.get("near_duplicate_confusion") or {})
    if note:
        out.append(note[0].upper() + note[1:])
    return out


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


def correlation_reading(result: CubeResult) -> str:
    """The paper's 5.3 reading, stated from this run's data whatever it shows."""
    ca, cr = result.correlations_all, result.correlations_retrieved
    r_all, r_ret = ca["r"].mean(), cr["r"].mean()
    if not (np.isfinite(r_all) and np.isfinite(r_ret)):
        return (
            "The correlation with rank is undefined for this run (a constant score or rank, or too "
            "few questions), so the paper's reading cannot be checked here."
        )
    per_judge = ca.groupby("judge")["r"].mean() - cr.groupby("judge")["r"].mean()
    dropped = int((per_judge > 0.1).sum())
    text = (
        f"Mean Pearson r between rank_score and the dimension scores: {r_all:.2f} over all "
        f"{result.n_questions} questions, {r_ret:.2f} over the {result.n_retrieved} retrieved "
        f"ones; the correlation falls by more than 0.1 for {dropped} of {len(per_judge)} judges. "
    )
    if r_ret < r_all - 0.1:
        text += (
            "As in the paper, the correlation collapses once the gold document is retrieved: "
            "whether the document is found matters far more than its position in the top N."
        )
    else:
        text += (
            "Unlike the paper, the correlation does not collapse on retrieved questions: in this "
            "run the rank of the gold document still matters once it is retrieved."
        )
    return text
