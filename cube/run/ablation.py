"""Stage 03's ablation twins (issue 38): the run's answers that speak to a grader, judged again
without those words.

`ablation_twins` screens every answer the judges scored (`cube.judges.screen.screen_answers`);
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


def ablation_twins(
    params: Params, answers: pd.DataFrame, judge_calls: int, calls_per_answer: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(twins, record): the twin answers (`answers`' columns, system `TWIN_PREFIX` + the
    original's, probe `ablated`) and what the screen found (flagged, twinned, per kind)."""
    from cube.judges.screen import screen_answers

    flagged = screen_answers(answers)
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
        "answers": [
            f"{q}/{s}/{t}"
            for q, s, t in zip(
                flagged["question_id"], flagged["system"], flagged["set"], strict=True
            )
        ][:200],
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
    twins, record = ablation_twins(params, answers, judge_calls, per_answer)
    if twins.empty or not audited or params.audit.questions <= 0:
        return pd.DataFrame(), {**record, "calls": 0}
    out = judge_twins(audited, dimensions, corpus, questions, twins)
    inputs = twins.drop(columns=["probe", "expect", "injection"])
    calls = count_calls(audited, inputs, corpus, questions, dimensions, out)
    share = round(calls / judge_calls, 4) if judge_calls else None
    return out, {**record, "calls": calls, "share_of_judge_calls": share}
