"""Stage 03's ablation twins (issue 38): the run's answers that speak to a grader, judged again
without those words.

`ablation_twins` screens every answer the judges scored (`cube.judges.screen.screen_answers`,
with the corpus: a span the answer shares with its gold or retrieved documents is content);
each flagged answer gets a twin (system `audit:ablated:<system>`, the same question and set, the
answer with its grader-addressed spans removed), at most `TWIN_MAX_SHARE` of the run's judge calls
(a seeded sample of the flagged answers beyond that, said in `results.json` → `screen`). Only
flagged answers cost calls: a run whose answers say nothing to a grader costs none.
`judge_twins` scores them with every audited judge under the role `audit`; their rows join
data/audit_scores with probe `ablated` (`cube.method.injection` reads them).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.method.injection import TWIN_PREFIX

TWIN_MAX_SHARE = 0.1  # of the run's judge calls (issue 38's budget for the extra calls)
SPAN_CHARS = 300  # of a flagged answer's spans kept in results.json


def ablation_twins(
    params: Params,
    answers: pd.DataFrame,
    judge_calls: int,
    calls_per_answer: int,
    corpus: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(twins, record): the twin answers (`answers`' columns, system `TWIN_PREFIX` + the
    original's, probe `ablated`) and what the screen found (flagged, twinned, per kind).
    `corpus` (`doc_id, text`): the knowledge base, whose text in an answer is not flagged."""
    from cube.judges.screen import screen_answers

    flagged = screen_answers(answers, corpus=corpus)
    cap = int(TWIN_MAX_SHARE * judge_calls // max(1, calls_per_answer))
    chosen = (
        flagged.sample(n=cap, random_state=params.audit.seed) if len(flagged) > cap else flagged
    )
    record = {
        "flagged": len(flagged),
        "twinned": len(chosen),
        "capped": len(chosen) < len(flagged),
        "max_share": TWIN_MAX_SHARE,
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
    from dataclasses import replace

    from cube.systems.probes import PROBES_PER_QUESTION, calls_per_question

    audited = [
        replace(j, pilot=0, pilot_report=None)
        for j in judges
        if not (j.pilot_report and j.pilot_report.get("decision") == "stopped")
    ]
    per_answer = calls_per_question(params) // PROBES_PER_QUESTION
    twins, record = ablation_twins(params, answers, judge_calls, per_answer, corpus)
    if twins.empty or not audited or params.audit.questions <= 0:
        return pd.DataFrame(), {**record, "calls": 0}
    out = judge_twins(audited, dimensions, corpus, questions, twins)
    inputs = twins.drop(columns=["probe", "expect", "injection"])
    calls = count_calls(audited, inputs, corpus, questions, dimensions, out)
    share = round(calls / judge_calls, 4) if judge_calls else None
    return out, {**record, "calls": calls, "share_of_judge_calls": share}


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
            "markers, master keys): no ablation twin, no extra call."
        )
    kinds = ", ".join(f"{k} {v}" for k, v in rec.kinds.items())
    capped = (
        f" (capped at {rec.max_share or 0:.0%} of the run's judge calls: a seeded sample)"
        if rec.capped
        else ""
    )
    share = rec.share_of_judge_calls
    return (
        f"{rec.flagged} answers hold text addressed to a grader ({kinds}); {rec.twinned} "
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
