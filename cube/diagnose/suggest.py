"""What to do next: suggestions derived from the numbers, each naming the figure behind it, and
the decision's one ordered list of them. Moved out of `cube.diagnose.assessment`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cube.config.dimension_files import dimension_advice
from cube.config.params import Params
from cube.diagnose.verdict import interval_width
from cube.method.evaluation import CubeResult


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
    out += precision_suggestions(result, params)
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
        judges = (
            f"; standard error ±{width.se_questions:.1f} from the questions against "
            f"±{width.se_judges:.1f} from the judges' spread"
            if width.se_judges is not None
            else ""
        )
        out.append(
            f"The {ap.confidence:.0%} interval {lo:.1f}-{hi:.1f} is {width.width:.1f} points wide "
            f"because it rests on {width.n_questions} questions (the bootstrap resamples them"
            f"{judges}): about {width.questions_needed} questions would narrow it to "
            f"{target:g} points; add questions before a deployment decision."
        )
    if np.isfinite(sd) and sd > 10 and (width is None or width.cause == "judges"):
        share = (
            f"; their spread (±{width.se_judges:.1f}) outweighs the questions' "
            f"(±{width.se_questions:.1f})"
            if width is not None and width.se_judges is not None
            else ""
        )
        out.append(
            f"The judges disagree (SD of CuBE across judges {sd:.1f}, interval {lo:.1f}-{hi:.1f}"
            f"{share}): add judges or human ratings (notebook 07) before a deployment decision."
        )
    return out


def retrieval_suggestions(retrieval: dict[str, Any]) -> list[str]:
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
