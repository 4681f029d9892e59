"""Stage 03's ablation twins (issue 38): the run's answers that speak to a grader, or carry text
that is not the answer, judged again without those words.

`ablation_twins` screens every answer the judges scored (`cube.judges.screen.screen_answers`,
with the corpus and the questions: a span the answer shares with its gold or retrieved documents
is content, and the asides, `cube.judges.asides`, are text set apart from the answer or saying
nothing of its question and documents); each flagged answer gets a twin (system
`audit:ablated:<system>`, the same question and set, the answer with its flagged spans removed),
at most `TWIN_MAX_SHARE` of the run's judge calls (`twin_cap`; beyond it `choose_twins` takes
grader-addressed or hidden text first, then asides set apart by structure, then unsupported runs,
the heaviest first, said in `results.json` → `screen`). Only flagged answers cost calls: a run
whose answers hold neither costs none. `judge_twins` scores them with every audited judge under the
role `audit`; their rows join data/audit_scores with probe `ablated` (`cube.method.injection`
reads them).

The twins are stage 03's judge calls like the others: `cube plan` counts them (`plan_twins`: an
upper bound, the cap, since which answers the screen flags is known only once they are written),
`cube batch` exports and imports them (`twin_requests`, the same screen, cap and choice from the
same answers), and the sequential driver judges them on the questions it reached
(`driver_twins`), so that stage 03 finds them in the cache.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.method.injection import TWIN_PREFIX

TWIN_MAX_SHARE = 0.1  # of the run's judge calls (issue 38's budget for the extra calls)
SPAN_CHARS = 300  # of a flagged answer's spans kept in results.json


def twin_cap(judge_calls: int, calls_per_answer: int) -> int:
    """The most answers that get a twin: their calls (`calls_per_answer`, every judge's) at most
    `TWIN_MAX_SHARE` of the run's `judge_calls`."""
    return int(TWIN_MAX_SHARE * judge_calls // max(1, calls_per_answer))


def ablation_twins(
    params: Params,
    answers: pd.DataFrame,
    judge_calls: int,
    calls_per_answer: int,
    corpus: pd.DataFrame | None = None,
    questions: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(twins, record): the twin answers (`answers`' columns, system `TWIN_PREFIX` + the
    original's, probe `ablated`) and what the screen found (flagged, twinned, per kind, per tier).
    `corpus` (`doc_id, text`): the knowledge base, whose text in an answer is not flagged and
    which, with the `questions`, the asides are measured against (`cube.judges.asides`). Beyond
    the cap, `choose_twins` picks: text addressed to a grader first, then asides set apart by
    structure, then unsupported runs."""
    from cube.judges.screen import choose_twins, screen_answers

    flagged = screen_answers(answers, corpus=corpus, questions=questions)
    chosen = choose_twins(flagged, twin_cap(judge_calls, calls_per_answer), params.audit.seed)
    record = {
        "flagged": len(flagged),
        "twinned": len(chosen),
        "capped": len(chosen) < len(flagged),
        "max_share": TWIN_MAX_SHARE,
        "tiers": {str(k): int(v) for k, v in flagged["tier"].value_counts().sort_index().items()},
        "kinds": {
            k: int(v) for k, v in flagged["kinds"].str.split(",").explode().value_counts().items()
        }
        if len(flagged)
        else {},
        # every flagged answer, its spans cut short: the audit page and the judgment browser
        "flagged_answers": [
            {
                "question_id": str(q),
                "system": str(s),
                "set": str(t),
                "kinds": k,
                "spans": sp[:SPAN_CHARS],
            }
            for q, s, t, k, sp in zip(
                flagged["question_id"],
                flagged["system"],
                flagged["set"],
                flagged["kinds"],
                flagged["spans"],
                strict=True,
            )
        ],
    }
    if chosen.empty:
        return pd.DataFrame(columns=[*answers.columns, "probe", "expect", "injection"]), record
    keys = ["question_id", "system", "set"]
    base = answers.merge(chosen[[*keys, "twin"]], on=keys)
    twins = base.assign(
        answer=base["twin"],
        system=TWIN_PREFIX + base["system"].astype(str),
        probe="ablated",
        expect="same",
        injection="",
    ).drop(columns=["twin"])
    return twins, record


def judge_twins(
    audited: list[Any],
    dimensions: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    twins: pd.DataFrame,
    progress: bool = True,
) -> pd.DataFrame:
    """The twins scored by the audited judges (role `audit`), with `probe, expect, injection`."""
    from cube.judges import score_answers

    inputs = twins.drop(columns=["probe", "expect", "injection"])
    out = score_answers(inputs, audited, dimensions, corpus, questions=questions, progress=progress)
    if "role" in out:
        out["role"] = "audit"
    return out.assign(probe="ablated", expect="same", injection="")


def twin_stage(
    params: Params,
    judges: list[Any],
    dimensions: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    judge_calls: int,
    count_calls: Any,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Stage 03's twins: screened, capped, judged by every judge its judging pilot did not stop
    (empty with `audit.questions: 0`: the audit is off). Returns the twin judgments and the
    screen's record (`results.json` → `screen`, with the twins' judge calls, counted by
    `count_calls`: `cube.run.audit.stage_judge_calls`)."""
    from cube.systems.probes import PROBES_PER_QUESTION, calls_per_question

    audited = _audited(judges)
    per_answer = calls_per_question(params) // PROBES_PER_QUESTION
    twins, record = ablation_twins(params, answers, judge_calls, per_answer, corpus, questions)
    if twins.empty or not audited or params.audit.questions <= 0:
        return pd.DataFrame(), {**record, "calls": 0}
    out = judge_twins(audited, dimensions, corpus, questions, twins)
    inputs = twins.drop(columns=["probe", "expect", "injection"])
    calls = count_calls(audited, inputs, corpus, questions, dimensions, out)
    share = round(calls / judge_calls, 4) if judge_calls else None
    return out, {**record, "calls": calls, "share_of_judge_calls": share}


def _audited(judges: list[Any]) -> list[Any]:
    """The judges the twins go to: every judge its judging pilot did not stop (no pilot again)."""
    from dataclasses import replace

    return [
        replace(j, pilot=0, pilot_report=None)
        for j in judges
        if not (j.pilot_report and j.pilot_report.get("decision") == "stopped")
    ]


def _stage_twins(
    params: Params,
    judges: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    judge_calls: int,
) -> tuple[list[Any], pd.DataFrame]:
    """The audited judges and the twin answers stage 03 judges (empty with the audit off)."""
    from cube.systems.probes import PROBES_PER_QUESTION, calls_per_question

    audited = _audited(judges)
    if params.audit.questions <= 0 or not audited:
        return audited, pd.DataFrame()
    per_answer = calls_per_question(params) // PROBES_PER_QUESTION
    twins, _ = ablation_twins(params, answers, judge_calls, per_answer, corpus, questions)
    return audited, twins


def twin_requests(
    params: Params,
    judges: list[Any],
    dimensions: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    judge_calls: int,
) -> dict[str, list[Any]]:
    """Per judge, the requests of the twins stage 03 judges (`cube batch` exports and imports them
    with the other judge calls of stage 03): the same screen, cap and choice from the same
    answers and the run's `judge_calls` (`cube.run.audit.judge_calls`, the count stage 03 caps
    with)."""
    from cube.judges.scoring import judge_inputs, judge_requests

    audited, twins = _stage_twins(params, judges, corpus, questions, answers, judge_calls)
    if twins.empty:
        return {}
    inputs = twins.drop(columns=["probe", "expect", "injection"])
    # as `cube.run.audit.stage_requests` builds them (not imported: audit imports this module)
    records = judge_inputs(inputs, corpus, questions).to_dict("records")
    return {j.name: judge_requests(j, records, dimensions)[1] for j in audited}


def driver_twins(
    params: Params,
    judges: list[Any],
    dimensions: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    judge_calls: int,
) -> int:
    """The sequential driver's twins (`cube.run.sequential`): judged on the questions reached as
    stage 03 judges them, so that stage 03 finds their calls in the cache; returns how many."""
    audited, twins = _stage_twins(params, judges, corpus, questions, answers, judge_calls)
    if twins.empty:
        return 0
    judge_twins(audited, dimensions, corpus, questions, twins, progress=False)
    return len(twins)


def plan_twins(
    plan: Any, params: Params, judges: list[tuple[Any, int, list[Any], int]], judge_calls: int
) -> None:
    """`cube plan`'s twins (role `audit`): an upper bound, the cap (`twin_cap`: at most
    `TWIN_MAX_SHARE` of the judge calls planned) x each judge's calls per answer, as if the screen
    flagged that many answers (it flags only those with text addressed to a grader or set apart
    from the answer, often none: then no call). `judges`: per judge its spec, calls per answer,
    requests (stand-ins for the twins' prompts, as the audit's) and completion tokens per call."""
    if params.audit.questions <= 0 or not judges:
        return
    cap = twin_cap(judge_calls, sum(per for _, per, _, _ in judges))
    if not cap:
        return
    note = (
        f"ablation twins: at most {cap} answers ({TWIN_MAX_SHARE:.0%} of the judge calls, an upper "
        "bound: only the answers the screen flags get one)"
    )
    for spec, per_answer, reqs, per_call in judges:
        calls = cap * per_answer
        stand_in = [reqs[i % len(reqs)] for i in range(calls)] if reqs else []
        g = plan.add("audit", spec, stand_in, calls=calls, exact=False, per_call=per_call or None)
        if note not in g.notes:
            g.notes.append(note)


def with_twins(run: Any, summary: pd.DataFrame) -> pd.DataFrame:
    """The audit table (`cube.run.audit.audit_report`) with the ablation twins per judge: pairs,
    mean drop, p, the answers that dropped, `ablation` (the verdict's sentence), and
    `obeys_injections` True when the twins name the judge (either signal)."""
    from cube.method.injection import TWIN_COLUMNS, twin_verdict
    from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS, ablation_summary

    twins = ablation_summary(run, run.load("scores", ANALYSIS_SCORE_COLUMNS))
    ap = run.params.analysis
    t = twins.set_index("judge") if twins is not None else pd.DataFrame(columns=TWIN_COLUMNS[1:])
    out = summary.copy()
    for c in TWIN_COLUMNS[1:]:
        out[c] = out["judge"].map(t[c]) if c in t else None
    said = [
        twin_verdict(t.loc[j] if j in t.index else None, ap.gate_alpha, n_judges=len(out))
        for j in out["judge"]
    ]
    out["ablation"] = [w for _, w in said]
    out["obeys_injections"] = [
        True if v else o for (v, _), o in zip(said, out["obeys_injections"], strict=True)
    ]
    return out


def screen_note(run: Any) -> str:
    """Notebook 11's sentence on the screen: how many answers speak to a grader, of which kinds,
    how many got a twin and what the twins cost (what stage 03 recorded)."""
    rec = run.read_record().scores.screen
    if rec is None:
        return "The screen did not run: re-run stage 03 (cube run PARAMS --only 03)."
    if not rec.flagged:
        return (
            "No answer holds text addressed to a grader (score claims, instructions, role "
            "markers, master keys) or set apart from the answer (footnotes, comments, text after "
            "a rule, signatures, asides, hidden or unsupported text): no ablation twin, no extra "
            "call."
        )
    kinds = ", ".join(f"{k} {v}" for k, v in rec.kinds.items())
    capped = (
        f" (capped at {rec.max_share or 0:.0%} of the run's judge calls: a seeded sample)"
        if rec.capped
        else ""
    )
    share = rec.share_of_judge_calls
    return (
        f"{rec.flagged} answers hold text addressed to a grader or set apart from the answer "
        f"({kinds}); {rec.twinned} "
        f"got an ablation twin{capped}, judged by every judge: {rec.calls} judge calls"
        + (f", {share:.1%} of the run's" if share is not None else "")
        + ". A judge whose score falls when the text goes is named in the audit table above "
        "(`ablation`, `twin_answers`) and excluded by the gate; the answers are flagged in the "
        "judgment browser."
    )


def flagged_table(run: Any) -> pd.DataFrame:
    """The answers the screen flagged (notebook 11): question, system, set, kinds, the spans."""
    screen = run.read_record().scores.screen
    rows = screen.flagged_answers if screen is not None else []
    return pd.DataFrame(rows, columns=["question_id", "system", "set", "kinds", "spans"])
