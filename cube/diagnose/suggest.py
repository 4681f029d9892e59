"""What to do next: suggestions derived from the numbers, each naming the figure behind it, and
the decision's one ordered list of them (one of the decision's homes: `cube.diagnose` lists them).
`suggestions` reads the evaluation, `retrieval_suggestions` the knowledge base and the retrieval
beyond R@k, and `ordered_suggestions` makes the one list; each suggestion is one small function.
"""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np

from cube.config.dimension_files import dimension_advice
from cube.config.params import Params
from cube.diagnose.decision_record import IntervalWidth
from cube.diagnose.verdict import interval_width
from cube.method.evaluation import CubeResult


class TopPattern(TypedDict):
    """One of the top failure patterns (`cube.diagnose.failures.top_patterns`)."""

    pattern: str
    count: int
    share: float
    suggestion: str
    examples: str  # question ids, comma-separated


class PatternSummary(TypedDict, total=False):
    """The failure patterns of the low rag answers (`cube.diagnose.failures.summary`)."""

    answers: int
    scored: int
    low: int
    low_score_below: float
    patterns: dict[str, int]
    top: list[TopPattern]


class RetrievalQuality(TypedDict, total=False):
    """The retrieval beyond R@k (`cube.run.decide.retrieval_quality`); the knowledge base's counts
    and the confusion are absent without a corpus."""

    r_at_1: float
    near_duplicate_confusion: dict[str, Any]  # open: cube.diagnose.near_duplicates' report
    duplicate_texts: int
    documents_merging_services: int
    documents_named_placeholder: int


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
    return [
        *_recall_suggestions(result, params, top_n, others or {}),
        *_weak_dimension_suggestions(result, params),
        *precision_suggestions(result, params),
        *_bounds_suggestions(result),
        *_failure_suggestions(call_failure_share, parse_failure_share, skipped_share),
        *_unknown_retrieval_suggestions(result),
    ]


def _recall_suggestions(
    result: CubeResult, params: Params, top_n: int, others: dict[str, tuple[int, CubeResult]]
) -> list[str]:
    """R@k below `analysis.low_recall_below`: raise TOP-N, then what the rank correlations predict
    of a larger TOP-N (only when no larger TOP-N was measured: a measurement beats a prediction)
    and what each larger TOP-N of the run did."""
    if not result.recall_at_k < params.analysis.low_recall_below:
        return []
    out = [
        f"Retrieval misses the gold document for {1 - result.recall_at_k:.0%} of questions "
        f"(R@{top_n} = {result.recall_at_k:.1%}): raise TOP-N above {top_n} or improve "
        "retrieval (item-name matching, hybrid search)."
    ]
    larger = {name: (n, other) for name, (n, other) in others.items() if n > top_n}
    if not larger:
        out += _rank_matters_little(result)
    for name, (n, other) in larger.items():
        w0, w1 = (result.jury.at["mean", "weighted_score"], other.jury.at["mean", "weighted_score"])
        out.append(
            f"In this run {name} (TOP-N {n}) retrieved {other.recall_at_k:.1%} (vs "
            f"{result.recall_at_k:.1%}) with a weighted score of {w1:.1f} (vs {w0:.1f}): "
            f"CuBE {other.jury_cube():.1f} vs {result.jury_cube():.1f}."
        )
    return out


def _rank_matters_little(result: CubeResult) -> list[str]:
    """The paper's prediction, when the correlation with rank falls by more than 0.1 once the gold
    document is retrieved: a larger TOP-N should cost little answer quality."""
    r_all = result.correlations_all["r"].mean()
    r_ret = result.correlations_retrieved["r"].mean()
    if not (np.isfinite(r_all) and np.isfinite(r_ret) and r_ret < r_all - 0.1):
        return []
    return [
        "Once the gold document is retrieved its rank matters little (mean correlation "
        f"with rank {r_all:.2f} on all questions, {r_ret:.2f} on retrieved ones), so a "
        "larger TOP-N should cost little answer quality; verify with a second system at a "
        "larger top_n."
    ]


def _weak_dimension_suggestions(result: CubeResult, params: Params) -> list[str]:
    """One per dimension below `analysis.weak_dimension_below`, lowest first, with its advice
    (`cube.config.dimension_files.dimension_advice`, else a generic line)."""
    jury = result.jury
    dims = [c for c in result.cube_table.columns if c in set(result.weights["dimension"])]
    out = []
    for d in sorted(dims, key=lambda d: (not np.isfinite(jury.at["mean", d]), jury.at["mean", d])):
        score = jury.at["mean", d]
        if np.isfinite(score) and score < params.analysis.weak_dimension_below:
            advice = dimension_advice(d) or f"raise {d}: revise the answering prompt for it"
            out.append(
                f"{d.capitalize()} is weak ({score:.1f} of 100 between the bounds): {advice}."
            )
    return out


def _bounds_suggestions(result: CubeResult) -> list[str]:
    """The judges whose bounds are anomalous (a flag on their row of the CuBE table)."""
    flagged = result.cube_table.index[result.cube_table["flags"] != ""].tolist()
    if not flagged:
        return []
    return [
        f"Bounds anomalies for {', '.join(map(str, flagged))} (a score outside its zero-full "
        "range or a zero denominator): inspect the bound sets of those judges in notebook 05."
    ]


# a share of judgments failed above which the decision says what to do about it
_FAILURE_SHARE_ABOVE = 0.02


def _failure_suggestions(call: float, parse: float, skipped: float) -> list[str]:
    """What to do when more than 2 % of the judgments failed at the call, held no usable score or
    were skipped for a missing answer."""
    said = (
        (
            call,
            f"{call:.1%} of judgments failed at the call (after retries): re-execute the scoring "
            "with `cube run PARAMS --only 03.. --force` to retry them; answered calls come from "
            "the cache.",
        ),
        (
            parse,
            f"{parse:.1%} of judge replies held no usable 0-10 score: re-running returns the same "
            "cached replies, so adjust the judge's prompt or max_tokens, or add samples.",
        ),
        (
            skipped,
            f"{skipped:.1%} of judgments were skipped because the answer itself is missing (the "
            "answering call failed): re-run the answering stage with `--only 02.. --force`.",
        ),
    )
    return [text for share, text in said if share > _FAILURE_SHARE_ABOVE]


def _unknown_retrieval_suggestions(result: CubeResult) -> list[str]:
    """The questions left out because the system call failed: answer them again."""
    unknown = result.settings.get("retrieval_unknown", 0)
    if not unknown:
        return []
    return [
        f"{unknown} question(s) are left out because the system call failed (retrieval "
        "unknown): re-run the answering stage (`--only 02.. --force`) once the system is "
        "reachable."
    ]


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
    retrieval_tips: list[str], number_tips: list[str], patterns: PatternSummary | None = None
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
        if not (said and any(said in o for o in out)):
            out.append(_pattern_tip(t, low, raise_top_n))
    return out or [KEEP]


def _pattern_tip(top: TopPattern, low: int, raise_top_n: bool) -> str:
    """A top failure pattern's remedy with its count among the `low` answers (low_rank's yields to
    a suggestion to raise TOP-N: re-rank instead)."""
    low_rank = top["pattern"] == "low_rank" and raise_top_n
    remedy = _LOW_RANK_WITH_RAISE if low_rank else top["suggestion"]
    name = top["pattern"].replace("_", " ")
    return (
        f"{name[0].upper() + name[1:]} explains {top['count']} of the {low} low-scoring answers "
        f"({top['share']:.0%}): {remedy}."
    )


def precision_suggestions(result: CubeResult, params: Params) -> list[str]:
    """What to do about an imprecise CuBE, naming the cause the numbers support (`interval_width`):
    an interval wider than 20 points (or `analysis.max_interval_width`) that comes from the
    questions asks for more questions, with how many; judges who disagree (SD of CuBE across
    judges above 10) are named only when their spread is the larger part of the uncertainty or the
    interval is narrow, and then ask for judges or human ratings."""
    ap = params.analysis
    sd = result.jury.at["sd", "cube_score"]
    lo, hi = result.interval()
    wide = bool(np.isfinite(hi - lo) and hi - lo > min(20.0, ap.max_interval_width))
    target = ap.max_interval_width if hi - lo > ap.max_interval_width else 20.0
    width = interval_width(result, params, target) if wide else None
    out = []
    if width is not None and width.cause == "questions":
        out.append(_more_questions(width, (lo, hi), target, ap.confidence))
    if np.isfinite(sd) and sd > 10 and (width is None or width.cause == "judges"):
        out.append(_judges_disagree(width, (lo, hi), sd))
    return out


def _more_questions(
    width: IntervalWidth, interval: tuple[float, float], target: float, confidence: float
) -> str:
    """The interval is wide because of the questions: how many would narrow it to `target`."""
    lo, hi = interval
    judges = (
        f"; standard error ±{width.se_questions:.1f} from the questions against "
        f"±{width.se_judges:.1f} from the judges' spread"
        if width.se_judges is not None
        else ""
    )
    return (
        f"The {confidence:.0%} interval {lo:.1f}-{hi:.1f} is {width.width:.1f} points wide "
        f"because it rests on {width.n_questions} questions (the bootstrap resamples them"
        f"{judges}): about {width.questions_needed} questions would narrow it to "
        f"{target:g} points; add questions before a deployment decision."
    )


def _judges_disagree(width: IntervalWidth | None, interval: tuple[float, float], sd: float) -> str:
    """The judges' spread is the larger part of the uncertainty (or the interval is narrow)."""
    lo, hi = interval
    share = (
        f"; their spread (±{width.se_judges:.1f}) outweighs the questions' "
        f"(±{width.se_questions:.1f})"
        if width is not None and width.se_judges is not None
        else ""
    )
    return (
        f"The judges disagree (SD of CuBE across judges {sd:.1f}, interval {lo:.1f}-{hi:.1f}"
        f"{share}): add judges or human ratings (notebook 07) before a deployment decision."
    )


def retrieval_suggestions(retrieval: RetrievalQuality) -> list[str]:
    """What the knowledge base and the retrieval beyond R@k call for (`retrieval`:
    `cube.run.decide.retrieval_quality`): a mis-mapped knowledge base, duplicate texts, and the
    near-duplicate confusion's note."""
    from cube.diagnose.near_duplicates import confusion_note

    out = [*_mis_mapped(retrieval), *_duplicate_texts(retrieval)]
    note = confusion_note(retrieval.get("near_duplicate_confusion") or {})
    if note:
        out.append(note[0].upper() + note[1:])
    return out


def _mis_mapped(retrieval: RetrievalQuality) -> list[str]:
    """A mapping that ran but is wrong: the score describes a broken knowledge base."""
    merged = retrieval.get("documents_merging_services") or 0
    named = retrieval.get("documents_named_placeholder") or 0
    what = [f"{merged} document(s) each merge 3 or more services (family_id)"] if merged else []
    what += [f"{named} document(s) are named by a placeholder (无, /...)"] if named else []
    if not what:
        return []
    return [
        "Warning: the knowledge base looks mis-mapped: "
        + " and ".join(what)
        + "; the score is about those merged documents, not your services. Fix corpus.columns "
        "/ group_by as `cube validate` suggests (page 01 lists the warnings)."
    ]


def _duplicate_texts(retrieval: RetrievalQuality) -> list[str]:
    dup = retrieval.get("duplicate_texts") or 0
    if not dup:
        return []
    return [
        f"The knowledge base holds {dup} document(s) whose text duplicates another's, so their "
        "questions cannot reach rank 1: deduplicate it (`cube validate` lists them; a "
        "long-format file needs corpus.group_by)."
    ]
