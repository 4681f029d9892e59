"""The verdict and the rules that withhold it, one small named function per rule.

`verdict` and `verdict_bands` read the thresholds; `withheld_reasons` runs the `rule_*` functions
(each returns the sentences of its rule, empty when it does not fire); `provisional_reason`,
`retriever_note` and `interval_width` say what a verdict or an interval rests on.
`cube.diagnose.assessment` builds the decision from them (the decision's homes: `cube.diagnose`).
"""

from __future__ import annotations

import numpy as np

from cube.config.params import Params
from cube.diagnose.decision_record import IntervalWidth
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


def withheld_reasons(
    result: CubeResult, params: Params, unmeasured: list[str] | tuple[str, ...] = ()
) -> tuple[list[str], bool]:
    """Why the verdict must be withheld (empty: a verdict may be given), one reason per rule that
    fires (the `rule_*` functions, in this order), and whether judging failed wholesale (no judge
    has usable scores, or every judge fails the gate because of failures). `unmeasured`: why the
    system's retrieval was not measured (stage 02's `answers_unmeasured`), said first."""
    not_the_judges = gate_withhold_reasons(result)
    reasons = [
        *rule_retrieval_not_measured(unmeasured),
        *([] if unmeasured else rule_system_calls_failed(result, params)),
        *rule_no_judge_passed(result),
        *not_the_judges,
        *rule_noise_w(result),
        *rule_cube_undefined_or_outside(result, params, bool(not_the_judges)),
        *rule_few_defined_resamples(result),
        *rule_interval_outside(result, params),
        *rule_interval_too_wide(result, params),
        *rule_injection_undecided(result),
        *rule_jury_twin_drop(result, params),
    ]
    return reasons, judging_failed_wholesale(result)


def rule_injection_undecided(result: CubeResult) -> list[str]:
    """A jury member's scores fell when the text addressed to a grader was removed from the
    system's answers, on too few ablation twins to decide whether it obeys (issue 38): its moved
    scores would be in the published score, whatever remedy the other rules offer (equal weights
    among them), so no verdict until more twins decide (`cube.method.injection.TWIN_MIN_PAIRS`)."""
    table = result.cube_table
    if "injection_undecided" not in table:
        return []
    return [
        f"judge {j} may obey text addressed to a grader in the answers: "
        f"{table.at[j, 'injection_undecided']}; no score it may have moved is published (remove "
        "the judge from judges:, or run more questions so that its twins can decide)"
        for j in result.jury_judges
        if str(table.at[j, "injection_undecided"] or "")
    ]


def rule_jury_twin_drop(result: CubeResult, params: Params) -> list[str]:
    """The jury's own scores fell when the text addressed to a grader was removed from the
    system's answers (issue 38): the median raw drop of its members on the ablation twins is at
    least `cube.method.injection.MIN_DROP` on enough twins and beyond chance. Judges that all obey
    the text drop alike, so none is named against the others; without a reference judge whose drop
    measures the content lost, no verdict (`cube.method.injection.jury_twin_drop`)."""
    from cube.method.injection import jury_twin_drop

    said = jury_twin_drop(result.cube_table, result.jury_judges, params.analysis.gate_alpha)
    return [said] if said else []


def judging_failed_wholesale(result: CubeResult) -> bool:
    """Every judge's scores failed (`judging_failed` on every row of the CuBE table)."""
    table = result.cube_table
    return (
        "judging_failed" in table
        and len(table) > 0
        and bool(table["judging_failed"].astype(bool).all())
    )


def _unknown(result: CubeResult) -> int:
    return int(result.settings.get("retrieval_unknown") or 0)


def _failed(result: CubeResult) -> int:
    """Questions left out because the system call failed (an error recorded), not those whose
    retrieval could not be told (a near-duplicate tie: their own rule and reason, stage 02's);
    an older result without the count: every unknown question."""
    failed = result.settings.get("retrieval_failed")
    return _unknown(result) if failed is None else int(failed)


def rule_retrieval_not_measured(unmeasured: list[str] | tuple[str, ...]) -> list[str]:
    """More than `analysis.max_unmapped_share` of the system's retrieved passages matched no
    document, or of its ids are not knowledge-base ids: its retrieval was not measured (every row's
    `retrieval_ok` is False, R@k undefined), so no verdict; each reason says how many and the fix
    (`cube.systems.retrieved.unmeasured_reasons`)."""
    return list(unmeasured)


def rule_system_calls_failed(result: CubeResult, params: Params) -> list[str]:
    """Every call to the system failed, or more than `analysis.max_system_failure_rate` did."""
    ap = params.analysis
    unknown = _failed(result)
    asked = result.n_questions + _unknown(result)
    if result.n_questions == 0 and unknown:  # every system call failed: the judges are not at fault
        return [f"retrieval unknown for all {unknown} questions (system calls failed)"]
    if asked and unknown / asked > ap.max_system_failure_rate:
        return [
            f"{unknown} of {asked} calls to the system under test failed ({unknown / asked:.0%}, "
            f"more than analysis.max_system_failure_rate = {ap.max_system_failure_rate:.0%}): the "
            f"figures rest on the {result.n_questions} questions it answered, which need not be "
            "typical"
        ]
    return []


def rule_no_judge_passed(result: CubeResult) -> list[str]:
    """No judge passed the validity gate (not said when nothing was retrieved: CuBE = W x 0 = 0
    whatever the judges, `retriever_note`; nor when every system call failed)."""
    if nothing_retrieved(result) or result.jury_judges:
        return []
    if result.n_questions == 0 and _unknown(result):
        return []
    excluded = result.excluded_judges
    detail = "; ".join(f"{j}: {r}" for j, r in excluded.items()) or "no judge"
    return [f"no judge passed the validity gate ({detail})"]


def rule_noise_w(result: CubeResult) -> list[str]:
    """A jury member's W is noise on this run (`noise_w_judges`): no jury mean is published."""
    noise = noise_w_judges(result)
    if not noise:
        return []
    return [
        f"the jury CuBE and W are undefined: the W of {', '.join(noise)} is noise on this run "
        "(the causes above), so no mean including it is published; per-judge values are shown "
        "per judge"
    ]


def rule_cube_undefined_or_outside(
    result: CubeResult, params: Params, gate_said: bool = False
) -> list[str]:
    """The jury CuBE is undefined (unless the gate's run causes already said why: `gate_said`), or
    leaves [0, 100] by more than `analysis.bounds_tolerance`."""
    tol = params.analysis.bounds_tolerance
    cube = 0.0 if nothing_retrieved(result) else result.jury_cube()
    if result.jury_judges and not np.isfinite(cube) and not gate_said:
        return ["the jury CuBE score is undefined (see the flags)"]
    if np.isfinite(cube) and not -tol <= cube <= 100 + tol:
        return [
            f"the jury CuBE {cube:.1f} leaves [0, 100] by more than analysis.bounds_tolerance = "
            f"{tol:g}"
        ]
    return []


def rule_few_defined_resamples(result: CubeResult) -> list[str]:
    """Fewer than `MIN_VALID_SHARE` of the bootstrap resamples give a defined jury CuBE."""
    from cube.method.bootstrap import MIN_VALID_SHARE

    boot, n_boot = result.bootstrap, int(result.settings.get("bootstrap") or 0)
    if boot is None or not len(boot) or n_boot <= 0 or nothing_retrieved(result):
        return []
    row = boot[(boot["judge"] == "jury") & (boot["metric"] == "cube_score")]
    n_valid = int(row["n_valid"].iloc[0]) if len(row) else 0
    if result.jury_judges and n_valid < MIN_VALID_SHARE * n_boot:
        return [
            f"only {n_valid} of {n_boot} bootstrap resamples give a defined jury CuBE (fewer "
            f"than {MIN_VALID_SHARE:.0%}): the interval rests on a selection of resamples"
        ]
    return []


def rule_interval_outside(result: CubeResult, params: Params) -> list[str]:
    """The interval leaves [0, 100] by more than `analysis.bounds_tolerance`."""
    ap = params.analysis
    lo, hi = result.interval("jury", "cube_score")
    tol = ap.bounds_tolerance
    if np.isfinite(lo) and np.isfinite(hi) and (lo < -tol or hi > 100 + tol):
        return [
            f"the {ap.confidence:.0%} interval {lo:.1f}-{hi:.1f} leaves [0, 100] by more than "
            f"analysis.bounds_tolerance = {tol:g}"
        ]
    return []


def rule_interval_too_wide(result: CubeResult, params: Params) -> list[str]:
    """The interval is wider than `analysis.max_interval_width`; says how many questions would
    narrow it to that width (`interval_width`)."""
    ap = params.analysis
    lo, hi = result.interval("jury", "cube_score")
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo <= ap.max_interval_width:
        return []
    width = interval_width(result, params, ap.max_interval_width)
    need = (
        f": about {width.questions_needed} questions would narrow it to that width (this run has "
        f"{width.n_questions})"
        if width is not None and width.questions_needed
        else ""
    )
    return [
        f"the {ap.confidence:.0%} interval {lo:.1f}-{hi:.1f} is {hi - lo:.1f} points wide, "
        f"more than analysis.max_interval_width = {ap.max_interval_width:g}{need}"
    ]


def interval_width(result: CubeResult, params: Params, target: float) -> IntervalWidth | None:
    """What the jury CuBE interval's width comes from (`IntervalWidth`), None without an interval.

    The bootstrap resamples questions (or their families): the half-width is about q x se with q
    the quantile the interval was read at (z widened to Student's t at the units resampled,
    `cube.method.bootstrap.expanded_alpha`: dividing by z alone overstated se by t/z, the needed
    questions by (t/z)^2, 1.46x at 8 questions) and se = sigma / sqrt(n), so sigma = se x sqrt(n)
    per question, and `cube.method.compare.questions_needed` (delta = target / 2, power 0.5,
    alpha = 1 - confidence) gives the n whose interval is `target` wide.
    The judges' spread gives the jury mean a standard error of SD / sqrt(judges); the larger of
    the two is the `cause`."""
    from cube.method.compare import questions_needed

    lo, hi = result.interval("jury", "cube_score")
    n = result.n_questions
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo or n < 1 or target <= 0:
        return None
    conf = params.analysis.confidence
    se_q = (hi - lo) / (2 * _interval_quantile(result, conf))
    k = len(result.jury_judges)
    se_j = _judges_se(result)
    need = questions_needed(target / 2, se_q * np.sqrt(n), alpha=1 - conf, power=0.5)
    return IntervalWidth(
        width=hi - lo,
        n_questions=n,
        target=target,
        questions_needed=need,
        se_questions=se_q,
        se_judges=se_j,
        n_judges=k,
        cause="judges" if np.isfinite(se_j) and se_j > se_q else "questions",
    )


def _interval_quantile(result: CubeResult, confidence: float) -> float:
    """The quantile the bootstrap interval was read at: z widened to Student's t at the units
    resampled (families, else questions: `cube.method.bootstrap.expanded_alpha`)."""
    from scipy import stats

    from cube.method.bootstrap import expanded_alpha

    units = int((getattr(result, "design", None) or {}).get("units") or result.n_questions)
    return float(stats.norm.ppf(1 - expanded_alpha((1 - confidence) / 2, units)))


def _judges_se(result: CubeResult) -> float:
    """The jury mean's standard error from the judges' spread, SD / sqrt(judges) (NaN with one
    judge or an undefined SD)."""
    k = len(result.jury_judges)
    sd = float(result.jury.at["sd", "cube_score"]) if "cube_score" in result.jury else np.nan
    return sd / np.sqrt(k) if k > 1 and np.isfinite(sd) else float("nan")


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
