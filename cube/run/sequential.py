"""The sequential driver (`analysis.sequential`, `cube run --until-settled`): answer and judge the
question set batch by batch, and stop when every system's verdict is settled.

It runs inside stage 02 (`cube.run.pipeline.questions_stage`, notebook 02), where the question set
is made, so `cube run` and a notebook run alone (papermill, Jupyter) take the same path, and the
stages after it are the ordinary notebooks on the questions it reached:

1. **Order** (`cube.run.sequential_design`, issue 40). Every system whose retrieval costs no call
   (a kind registering `free_outcomes`: builtin, imported) is retrieved on the whole set first
   (`recall: all`), so R@k is known before any judging; then the questions are spread over the
   resampling units (the families of `cube.run.evaluate.question_families`, or single questions
   under `analysis.cluster: question`): systematic sampling within each family, every question
   equally likely to be judged by any look, each family its share +-1 (`order: spread`,
   `analysis.sequential.seed`), batches of exactly `batch` questions; `order: families` takes
   whole families per batch (the order before issue 40). The sequence's independent unit stays the
   family, as in the jackknife that gives its spread (why partial families keep it valid:
   `cube.run.sequential_design`).
2. **Per batch.** Only that batch's questions are answered by every system (rag, and the bound
   sets of its retrieved questions, `cube.systems.build_answers`) and judged by every judge
   (`cube.judges.score_answers`): the stage functions of notebooks 02 and 03, their calls cached
   in the run's call cache. A failed answer or judgment stays failed (its row and reason as in
   stage 02/03); it is not a score.
3. **Look.** For every system, the jury CuBE (the mean of every judge's CuBE, each from
   `cube.method.bootstrap.cube_from_counts`, the point computation of notebooks 04-06 that
   reproduces `evaluate` exactly) on the questions judged so far, and the same with each
   jackknife group of units left out (`jackknife_groups`, at most 40 groups; under `recall: all`
   W of the questions judged times R@k of the whole set, a group left out of both): the sequential
   interval is `functional_look` around the estimate, drawn with the finite-horizon boundary's
   value at this look (`boundary: spending` or `pocock`, `cube.method.group_sequential`) or the
   anytime-valid sequence (`anytime`), the fixed-n interval beside it estimate +- z SE with the
   same jackknife SE. Each judge's CuBE the same way, and R@k (its 0/100 hits, the
   same groups: a family's questions share their retrieval). A look is one `cube_from_counts` call
   of 41 rows per system. The jury leaves out the judges the validity gate will certainly exclude
   (stopped by their pilot, which runs once, on the first batch; failed judgments above
   `analysis.gate_max_failure_rate`), named in the record with the failures counted so far.
4. **Stop** (`decide`) when every watched system's jury interval is settled (`verdict`: inside one
   band of `analysis.verdict_thresholds`; `width`: no wider than `analysis.max_interval_width`;
   `analysis.sequential.systems`: `all` watches every system, `primary` only the primary one, the
   first of `params.systems`, whose verdict the decision states: a TOP-N sweep's other members
   then do not hold the run, and their last intervals are reported as not settled), never
   before `min_questions`, raised to what the judge gate and the audit need to decide
   (`effective_minimum`, said in the record), and never on fewer than 20 families or 10 retrieved
   questions (`cube.method.sequential.not_yet`). An undefined interval never stops a run.
5. **After.** On the questions reached, the judge gate's sample of missed questions' bounds is
   made and judged (`_gate_sample`: a batch makes the bounds of its retrieved questions only, as
   each batch would otherwise draw its own floor, `cube.systems.bounds`; counted per system in
   `design.gate_sample`), then the audit's calls (LLM judges: the probes and the
   screen's ablation twins, `cube.run.ablation.driver_twins`), the record
   `sequential` goes to results.json, and stage 02 keeps only the questions reached: notebooks
   02-12 then read their answers and judgments from the cache, so no call is sent after the driver,
   and questions never reached are never sent to a system or a judge.
6. **The same outcome after it.** Failures are never cached (a later run asks again), so the
   record keeps the calls the driver sent that failed (`failed_calls`: cache key -> reason) and
   its judges' pilot decisions (`judge_pilot`, with the pilot's call keys for a judge it stopped).
   Within the run, stages 02 and 03 take them as arguments from stage 02's record
   (`driver_outcome`, `with_driver_pilots`, `cube.run.record.SequentialRecord`): a failed call
   stays failed with its reason, not sent again, and a pilot is not run a second time (a stopped
   judge is sent nothing more), so the looks and the report rest on the same judgments. Stage 03
   takes them once per drive (`drive_id`; its own record says which it took, `driver_taken`): a
   later run of stage 03 alone, or of the driver, asks every call anew. Only LLM calls' failures
   are kept (the driver's models record them in a `cube.llm.CallLog`, an argument): an answer of a
   Python or RAGFlow system that failed in the driver is asked again by stage 02.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.llm import CallLog
from cube.method.sequential import (
    MIN_GROUPS,
    LookDecision,
    StopRule,
    decide,
    rule_problems,
)
from cube.run.notebook import Run
from cube.run.record import DriverRecord, DriverTaken, RunRecord, SequentialRecord
from cube.run.sequential_design import (
    batches,
    design_problems,
    free_hits,
    look_critical,
    planned_looks,
)
from cube.run.sequential_look import Quantity, system_look

COST_ROLES = ("answering", "judging", "audit")  # the calls the record counts (not question writing)
LEAST = ("calls", "to_send", "cost")  # the plan's columns `with_least` adds, as `<name>_least`
WATCH = ("all", "primary")  # analysis.sequential.systems: the systems whose intervals stop the run


class SequentialError(ValueError):
    """`analysis.sequential` cannot run on this question set (every problem named)."""


def sequential_problems(params: Params, n_questions: int | None = None) -> list[str]:
    """Every problem of `analysis.sequential`, each naming its key and what was expected
    (`rule_problems`), and `min_questions` above the set's size when that is known."""
    sp = params.analysis.sequential
    if sp is None:
        return []
    ns = SimpleNamespace(**_rule_fields(params), low=0.0, high=100.0)
    out = [
        p.replace("max_width", "analysis.max_interval_width", 1)
        if p.startswith("max_width")
        else f"analysis.sequential.{p}"
        for p in rule_problems(ns)  # type: ignore[arg-type]
    ]
    out += design_problems(params)
    if sp.systems not in WATCH:
        out.append(
            f"analysis.sequential.systems is {sp.systems!r}, expected one of {', '.join(WATCH)}"
        )
    if (
        n_questions is not None
        and isinstance(sp.min_questions, int)
        and sp.min_questions > n_questions
    ):
        out.append(
            f"analysis.sequential.min_questions is {sp.min_questions}, expected at most the "
            f"{n_questions} questions of the set"
        )
    return out


def _rule_fields(params: Params) -> dict[str, Any]:
    """The stop rule's fields as `analysis.sequential` and `analysis.max_interval_width` give them
    (checked by `sequential_problems`, made into a `StopRule` by `stop_rule`)."""
    sp = params.analysis.sequential
    assert sp is not None
    return {
        "stop": sp.stop,
        "min_questions": sp.min_questions,
        "batch": sp.batch,
        "alpha": sp.alpha,
        "max_width": params.analysis.max_interval_width,
        "target_questions": sp.target_questions,
        "boundary": sp.boundary,
        "require_band": sp.require_band,
    }


def watched_systems(params: Params) -> list[str]:
    """The systems whose jury interval must be settled for the run to stop: every system
    (`analysis.sequential.systems: all`), or only the primary one (`primary`: the first of
    `params.systems`, `cube.run.evaluate.primary_system`, the one the decision is about)."""
    names = [s.name for s in params.systems]
    sp = params.analysis.sequential
    return names[:1] if sp is not None and sp.systems == "primary" else names


def stop_rule(params: Params, min_questions: int | None = None) -> StopRule:
    """The stop rule of `analysis.sequential` (`min_questions`: the effective minimum)."""
    fields = _rule_fields(params)
    return StopRule(**{**fields, "min_questions": min_questions or fields["min_questions"]})


# ------------------------------------------------------------------------------------ order
def unit_of(params: Params, questions: pd.DataFrame, corpus: pd.DataFrame) -> dict[str, str]:
    """Each question's resampling unit: its family (`question_families`), or itself under
    `analysis.cluster: question`."""
    from cube.run.evaluate import question_families

    if params.analysis.cluster == "question":
        return {str(q): f"question:{q}" for q in questions["question_id"]}
    return question_families(questions[["question_id", "doc_id"]], corpus)


# --------------------------------------------------------------------------------- minimum
def effective_minimum(params: Params, judge_calls_per_question: float) -> tuple[int, str | None]:
    """`min_questions` raised to what the judge gate (its bounds test, `cube.method.gate`) and the
    audit (`audit.min_pairs` injection pairs, one per audit question, its sample capped at
    `audit.max_share` of the judge calls) need to decide; the sentence saying why when raised."""
    from cube.method.gate import VARY_MIN_QUESTIONS, min_questions
    from cube.systems.probes import calls_per_question, capped_questions

    asked = params.analysis.sequential.min_questions
    gate = max(min_questions(params.analysis.gate_alpha), VARY_MIN_QUESTIONS)
    why = []
    if gate > asked:
        why.append(f"the judge gate's tests need {gate} questions to decide")
    a, per_q = params.audit, calls_per_question(params)
    audit, needed = 0, a.min_pairs
    if a.questions >= needed and per_q and judge_calls_per_question > 0:
        audit = math.ceil(needed * per_q / (a.max_share * judge_calls_per_question))
        while capped_questions(a.questions, int(audit * judge_calls_per_question), per_q,
                               a.max_share) < needed:  # fmt: skip
            audit += 1
        if audit > asked:
            why.append(
                f"the audit needs {needed} probe questions (audit.min_pairs), {per_q} judge calls "
                f"each, at most {a.max_share:.0%} of the run's judge calls (audit.max_share; "
                f"{judge_calls_per_question:.1f} per question): {audit} questions"
            )
    effective = max(asked, gate, audit)
    if effective == asked:
        return asked, None
    return effective, f"raised from {asked} to {effective}: " + "; ".join(why)


# ----------------------------------------------------------------------------------- driver
@dataclass
class _State:
    """What the driver has so far: the questions, answers and judgments of the batches done."""

    ids: list[str] = field(default_factory=list)
    answers: list[pd.DataFrame] = field(default_factory=list)
    scores: list[pd.DataFrame] = field(default_factory=list)
    path: list[dict[str, Any]] = field(default_factory=list)
    last: dict[str, list[Quantity]] = field(default_factory=dict)
    decisions: dict[str, LookDecision] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)  # judge -> why it left the look's jury
    failures: dict[str, Any] = field(default_factory=dict)  # failed answers and judgments so far
    calls: CallLog = field(default_factory=CallLog)  # every failed LLM call: cache key -> reason
    pilots: dict[str, dict[str, Any]] = field(default_factory=dict)  # judge -> its pilot's outcome
    hits: dict[str, dict[str, bool]] = field(default_factory=dict)  # recall: all (free_hits)
    gate_sample: dict[str, int] = field(default_factory=dict)  # system -> missed questions bounded
    order: list[list[str]] = field(default_factory=list)  # the batches (`batches`)
    critical: list[dict[str, Any]] = field(default_factory=list)  # boundary per look that may stop


def _num(x: Any) -> float | None:
    """A plain JSON number (NaN and infinities: null)."""
    return float(x) if x is not None and np.isfinite(x) else None


def _judge_batch(run: Run, judges, dims, corpus, questions: pd.DataFrame, state: _State) -> None:
    """Answer one batch with every system and judge it with every judge (cached calls)."""
    from cube.judges import score_answers
    from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS
    from cube.systems import build_answers

    answers = build_answers(
        run.params,
        corpus,
        questions,
        run.paths.cache,
        progress=False,
        calls=state.calls,
        missed_bounds=False,  # the gate's sample of missed ones: once, on the reached set
    )
    scores = score_answers(answers, judges, dims, corpus, questions=questions, progress=False)
    _note_pilots(judges, scores, state)
    state.ids += questions["question_id"].astype(str).tolist()
    state.answers.append(answers)
    state.scores.append(scores[[c for c in ANALYSIS_SCORE_COLUMNS if c in scores]])


def _note_pilots(judges, scores: pd.DataFrame, state: _State) -> None:
    """Each judge's pilot outcome when its pilot ran (the first batch): its report, and for a
    judge it stopped the cache keys of the pilot's calls (`Judge.pilot_calls` in stage 03)."""
    for j in judges:
        if j.pilot_report is None or j.name in state.pilots:
            continue
        outcome = dict(j.pilot_report)
        if outcome.get("decision") == "stopped":
            mine = scores[(scores["judge"] == j.name) & (scores["error_kind"] != "pilot")]
            outcome["calls"] = sorted({str(c) for c in mine["call_id"] if c})
        state.pilots[j.name] = outcome


def _look(run: Run, units, rule: StopRule, state: _State) -> bool:
    """Every system's sequences on the questions judged so far (added to the path); whether every
    watched system's jury CuBE is settled (`watched_systems`)."""
    answers, scores = pd.concat(state.answers), pd.concat(state.scores)
    thresholds = run.params.analysis.verdict_thresholds
    jury = _jury(run.params, answers, scores, state)
    critical = _critical(rule, state)
    for s in run.params.systems:
        quantities = system_look(
            run.params, answers, scores, s.name, units, rule, jury,
            hits=state.hits.get(s.name), critical=critical,
        )  # fmt: skip
        state.last[s.name] = quantities
        state.decisions[s.name] = (
            decide(quantities[0].current, rule, thresholds)
            if jury
            else LookDecision(
                False, "no judge is left in the jury: " + "; ".join(state.excluded.values())
            )
        )
        state.path += [_path_row(s.name, q, len(state.ids)) for q in quantities]
    return all(state.decisions[s].stop for s in watched_systems(run.params))


def _critical(rule: StopRule, state: _State) -> float | None:
    """The finite-horizon boundary's value at this look (`rule.boundary`), None under `anytime` or
    before the effective minimum (no look may stop there: it spends nothing); noted in the state."""
    n = len(state.ids)
    if rule.boundary == "anytime" or n < rule.min_questions:
        return None
    looks = [int(c["questions"]) for c in state.critical] + [n]
    horizon = sum(len(b) for b in state.order)
    planned = planned_looks(state.order, rule.min_questions)
    value = look_critical(rule.boundary, looks, planned, horizon, rule.alpha)
    state.critical.append({"questions": n, "critical": _num(value)})
    return value


def _jury(params: Params, answers: pd.DataFrame, scores: pd.DataFrame, state: _State) -> list[str]:
    """The judges a look's jury CuBE averages: every judge but those the validity gate will
    certainly exclude, as it would (a judge stopped by its pilot; one whose failed judgments exceed
    `analysis.gate_max_failure_rate`), each named with why in `state.excluded`; the failed answers
    and judgments so far are counted in `state.failures`."""
    unscored = scores["score"].isna()
    by_judge = unscored.groupby(scores["judge"]).mean()
    state.failures = {
        "answers": int((answers["error"].fillna("").astype(str) != "").sum()),
        "judgments": {str(j): int(v) for j, v in unscored.groupby(scores["judge"]).sum().items()},
    }
    limit = params.analysis.gate_max_failure_rate
    for judge, share in by_judge.items():
        if judge not in state.excluded and share > limit:
            state.excluded[str(judge)] = (
                f"{judge}: {share:.0%} of its judgments failed, above "
                f"analysis.gate_max_failure_rate {limit:g}"
            )
    return [j.name for j in params.judges if j.name not in state.excluded]


def _path_row(system: str, q: Quantity, questions: int) -> dict[str, Any]:
    return {
        "system": system,
        "quantity": q.name,
        "questions": questions,
        "estimate": _num(q.current.estimate),
        "lower": _num(q.current.lower),
        "upper": _num(q.current.upper),
        "fixed_lower": _num(q.fixed_lower),
        "fixed_upper": _num(q.fixed_upper),
    }


def _calls_per_question(judges, dims, corpus, questions, state: _State) -> float:
    from cube.run.audit import judge_calls, stage_requests

    answers = pd.concat(state.answers)
    n = judge_calls(judges, stage_requests(judges, answers, corpus, questions, dims))
    return n / max(len(state.ids), 1)


def drive(run: Run, corpus: pd.DataFrame, questions: pd.DataFrame) -> SequentialRecord:
    """Run the sequential evaluation over the question set (module docstring); returns the record
    `sequential` (also written to results.json).

    Raises:
        SequentialError: `analysis.sequential` is invalid for this set (every problem named).
    """
    from cube.judges import load_dimensions, make_judges

    params = run.params
    problems = sequential_problems(params, len(questions))
    if problems:
        raise SequentialError("analysis.sequential: " + "; ".join(problems))
    sp = params.analysis.sequential
    by_id = questions.assign(question_id=questions["question_id"].astype(str)).set_index(
        "question_id", drop=False
    )
    units = unit_of(params, by_id, corpus)
    state, rule, why, stopped = _State(), stop_rule(params), None, False
    state.order = batches(units, sp.batch, sp.seed, sp.order)
    state.hits = free_hits(params, corpus, by_id)  # no call: module docstring
    judges = make_judges(params, run.paths.cache, calls=state.calls)
    dims = load_dimensions(params, base_dir=run.base_dir)
    active = judges
    # every LLM call the driver's systems and judges send that fails is added to state.calls
    for i, ids in enumerate(state.order):
        _judge_batch(run, active, dims, corpus, by_id.loc[ids], state)
        if i == 0:  # the judge calls per question are known once a batch is judged
            per_q = _calls_per_question(judges, dims, corpus, by_id.loc[state.ids], state)
            rule, why = raised_rule(params, per_q, len(questions))
            active = _after_pilot(judges, state)
        if _look(run, units, rule, state):
            stopped = len(state.ids) < len(questions)
            break
    used = by_id.loc[state.ids]
    _gate_sample(run, active, dims, corpus, used, state)
    _audit_calls(run, judges, dims, corpus, used, state)
    record = _record(run, rule, why, questions, used, state, stopped)
    run.write_record(DriverRecord(sequential=record))
    return record


def _after_pilot(judges: list, state: _State) -> list:
    """The judges of the batches after the first: a judge's pilot runs once, on the first batch
    (not on every batch: each would send `pilot` calls again and could decide differently); a judge
    it stopped is asked nothing more and leaves the jury, as the gate excludes it."""
    import dataclasses

    out = []
    for j in judges:
        report = j.pilot_report or {}
        if report.get("decision") == "stopped":
            state.excluded[j.name] = f"{j.name}: stopped by its pilot ({report.get('reason', '')})"
            continue
        out.append(dataclasses.replace(j, pilot=0) if j.pilot else j)
    return out


def raised_rule(params: Params, per_question: float, available: int) -> tuple[StopRule, str | None]:
    """The stop rule with `effective_minimum` (at most the set's size: then the run goes to the
    end, and the sentence says so)."""
    minimum, why = effective_minimum(params, per_question)
    if minimum > available:
        why = f"{why}; the set has {available} questions: the run goes to the end"
    return stop_rule(params, min(minimum, available)), why


def _gate_sample(run: Run, judges, dims, corpus, used: pd.DataFrame, state: _State) -> None:
    """The judge gate's sample of missed questions' bounds (`cube.systems.bounds`: every retrieved
    question and, when those are fewer than `analysis.gate_bounds_questions`, a seeded sample of
    missed ones making up that floor), drawn ONCE on the questions reached, as stage 02 draws it
    after the driver (the batches made none: each would draw up to the floor), and judged with the
    batches' scoring call by the judges still asked, so stages 02-03 find every call in the cache.
    Counted per system in the record (`design.gate_sample`)."""
    from cube.judges import score_answers
    from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS
    from cube.systems import build_answers
    from cube.systems.bounds import bound_questions

    made = pd.concat(state.answers)
    keys = ["system", "set", "question_id"]
    have = made[made["set"] == "zero"].groupby("system")["question_id"].agg(set)
    rag = made[made["set"] == "rag"]
    if all(
        set(bound_questions(g, run.params.analysis)) <= have.get(name, set())
        for name, g in rag.groupby("system", sort=False)
    ):
        return
    answers = build_answers(
        run.params, corpus, used, run.paths.cache, progress=False, calls=state.calls
    )
    old = pd.MultiIndex.from_frame(made[keys].astype(str))
    new = answers[~pd.MultiIndex.from_frame(answers[keys].astype(str)).isin(old)]
    if not len(new):
        return
    state.gate_sample = {
        str(k): int(v) for k, v in new[new["set"] == "zero"].groupby("system").size().items()
    }
    scores = score_answers(new, judges, dims, corpus, questions=used, progress=False)
    state.answers.append(new)
    state.scores.append(scores[[c for c in ANALYSIS_SCORE_COLUMNS if c in scores]])


def _audit_calls(run: Run, judges, dims, corpus, used: pd.DataFrame, state: _State) -> None:
    """The judge audit's calls on the questions reached, made as stage 03 makes them (same sample,
    same probes), so that stage 03 finds them in the cache; nothing for offline judges (they send
    no call)."""
    from cube.run.ablation import driver_twins
    from cube.run.audit import judge_audit, judge_calls, stage_requests

    if run.params.audit.questions <= 0 or all(j.model.offline for j in judges):
        return
    answers = pd.concat(state.answers)
    n_judge = judge_calls(judges, stage_requests(judges, answers, corpus, used, dims))
    judge_audit(run.params, judges, dims, corpus, used, answers, n_judge, progress=False)
    driver_twins(run.params, judges, dims, corpus, used, answers, n_judge)  # the screen's twins


def _calls_and_cost(run: Run, used_ids: list[str] | None) -> tuple[int | None, float | None]:
    """The answering, judging and audit calls of a run of these params on the questions (all when
    None), as `cube plan` counts them, and their cost at the params' prices (None when a price is
    unknown; 0 offline). None, None when the plan cannot be made."""
    from cube.run.plan import build_plan

    try:
        plan = build_plan(run.params, base_dir=run.base_dir, question_ids=used_ids)
    except Exception:  # noqa: BLE001 - the record says unknown rather than failing the run
        return None, None
    rows = plan[plan["role"].isin(COST_ROLES)]
    cost = pd.to_numeric(rows["cost"], errors="coerce")
    return int(rows["calls"].sum()), (None if cost.isna().any() else float(cost.sum()))


# ------------------------------------------------------------------------- cube plan
def with_least(
    plan: pd.DataFrame, params: Params, *, base_dir: Path, cache_path: Path | None = None
) -> pd.DataFrame:
    """The plan with, under `analysis.sequential`, the least a sequential run sends per row
    (`calls_least`, `to_send_least`, `cost_least`: the plan of the driver's first batches up to
    its effective minimum, `least_questions`) and `plan.attrs["sequential"]` (questions of the
    full set and of the least, the minimum and why it was raised); the plan as it is otherwise."""
    if params.analysis.sequential is None:
        return plan
    ids, facts = least_questions(plan, params, base_dir)
    from cube.run.plan import build_plan

    least = build_plan(params, base_dir=base_dir, cache_path=cache_path, question_ids=ids)
    by_row = least.set_index(["role", "model"])
    out = plan.copy()
    for col in LEAST:
        out[f"{col}_least"] = [
            by_row[col].get((r, m), 0) for r, m in zip(plan["role"], plan["model"], strict=True)
        ]
    out.attrs["sequential"] = facts
    return out


def least_questions(
    plan: pd.DataFrame, params: Params, base_dir: Path
) -> tuple[list[str], dict[str, Any]]:
    """The questions of the driver's first batches (its seeded order, `order`) up to its
    effective minimum and at least `MIN_GROUPS` families (no look stops before both; the guard of
    `MIN_RETRIEVED` retrieved questions is not known before answering, so the least may still be
    below the run's), and the facts `plan_text` says. The minimum is raised with the judge calls
    per question of the first batch as the driver counts them (`_first_batch_calls`) when every
    system is builtin and answers offline; else with the plan's (an upper bound for an offline
    judge, so the minimum may be below the run's: `min_questions_from` says which)."""
    from cube.kb.corpus import build_corpus
    from cube.run.plan import planned_questions

    sp = params.analysis.sequential
    assert sp is not None
    corpus = build_corpus(params, base_dir=base_dir)
    questions = planned_questions(params, corpus, base_dir)
    questions = questions.assign(question_id=questions["question_id"].astype(str))
    n = len(questions)
    units = unit_of(params, questions, corpus)
    order = batches(units, sp.batch, sp.seed, sp.order)
    per_q = _first_batch_calls(params, corpus, questions, order[0] if order else [], base_dir)
    source = "the driver's count on its first batch"
    if per_q is None:
        per_q = float(plan.loc[plan["role"] == "judging", "calls"].sum()) / max(n, 1)
        source = "the plan's judge calls (an upper bound: the run's minimum may be higher)"
    rule, why = raised_rule(params, per_q, n)
    ids: list[str] = []
    for batch in order:  # no look may stop before the minimum nor on fewer than MIN_GROUPS families
        if len(ids) >= rule.min_questions and len({units[q] for q in ids}) >= MIN_GROUPS:
            break
        ids += batch
    facts = {
        "questions_full": n,
        "questions_least": len(ids),
        "min_questions": rule.min_questions,
        "min_questions_why": why,
        "min_questions_from": source,
    }
    return ids, facts


def _first_batch_calls(
    params: Params, corpus, questions: pd.DataFrame, ids, base_dir: Path
) -> float | None:
    """The judge calls per question of the driver's first batch, counted as the driver counts them
    (`_calls_per_question`), when every system is builtin and answered offline
    (`_offline_builtin`: nothing is sent, no user code runs); None otherwise."""
    from cube.judges import load_dimensions, make_judges
    from cube.run.audit import judge_calls, stage_requests
    from cube.systems import build_answers

    if not ids or not _offline_builtin(params):
        return None
    first = questions[questions["question_id"].isin(set(ids))]
    # as the driver's batches: no missed question's bounds (the gate's sample comes after it)
    answers = build_answers(params, corpus, first, None, progress=False, missed_bounds=False)
    judges = make_judges(params, None)
    dims = load_dimensions(params, base_dir=base_dir)
    return judge_calls(judges, stage_requests(judges, answers, corpus, first, dims)) / len(first)


def _offline_builtin(params: Params) -> bool:
    """Every system is a builtin retriever answered by the offline answerer, its bound sets too:
    answering a batch then sends no request and runs none of the user's code (a Python, HTTP or
    RAGFlow system may pay for calls, and `cube plan` sends nothing without `--pilot`)."""
    return all(
        getattr(s, "kind", None) == "builtin"
        and not getattr(s, "bounds", None)
        and params.model(params.system_answerer(s)).provider == "offline"
        for s in params.systems
    )


def _saved(used: float | None, full: float | None) -> float | None:
    return None if used is None or full is None else full - used


def _reason(rule: StopRule, state: _State, stopped: bool, watched: list[str]) -> str:
    """Why the run ended: the stop rule met by the watched systems, or the open intervals."""
    n = len(state.ids)
    primary = len(watched) < len(state.decisions)
    whose = f"the primary system {watched[0]}'s interval" if primary else "every system's interval"
    if stopped:
        what = (
            f"{whose} lies inside one verdict band"
            if rule.stop == "verdict"
            else f"{whose} is no wider than {rule.max_width:g}"
        )
        return f"stopped at {n}: {what}{_others(state, watched) if primary else ''}"
    open_ = [
        d.reason.replace("the interval", f"{s}'s interval", 1)
        if d.reason.startswith("the interval")
        else f"{s}: {d.reason}"
        for s, d in state.decisions.items()
        if not d.stop and s in watched
    ]
    why = "; ".join(open_) or f"{whose} was settled only on the whole set"
    return f"question set ended at {n}: {why}{_others(state, watched) if primary else ''}"


def _others(state: _State, watched: list[str]) -> str:
    """Under `systems: primary`, the systems that did not hold the run, those not settled named."""
    open_ = [s for s, d in state.decisions.items() if s not in watched and not d.stop]
    return " (analysis.sequential.systems: primary; " + (
        f"not settled: {', '.join(open_)})" if open_ else "the other systems settled too)"
    )


def _final(state: _State) -> dict[str, Any]:
    out = {}
    for system, quantities in state.last.items():
        jury = quantities[0]
        out[system] = {
            "estimate": _num(jury.current.estimate),
            "lower": _num(jury.current.lower),
            "upper": _num(jury.current.upper),
            "fixed_lower": _num(jury.fixed_lower),
            "fixed_upper": _num(jury.fixed_upper),
            "settled": bool(state.decisions[system].stop),
        }
    return out


def _record(
    run: Run,
    rule: StopRule,
    why: str | None,
    questions: pd.DataFrame,
    used: pd.DataFrame,
    state: _State,
    stopped: bool,
) -> SequentialRecord:
    """The record `sequential` of results.json (its schema: docs/how-to/sequential.md); a new
    `drive_id`, so that stage 03 takes this drive's outcome once (`driver_outcome`)."""
    calls_used, cost_used = _calls_and_cost(run, list(state.ids))
    calls_full, cost_full = _calls_and_cost(run, None)
    sp = run.params.analysis.sequential
    watched = watched_systems(run.params)
    fields = {
        "stop": rule.stop,
        "batch": rule.batch,
        "min_questions": rule.min_questions,
        "min_questions_why": why,
        "alpha": rule.alpha,
        "max_width": _num(rule.max_width),
        "seed": sp.seed,
        "questions_available": len(questions),
        "questions_used": len(used),
        "question_ids": list(state.ids),
        "stopped_early": bool(stopped),
        "reason": _reason(rule, state, stopped, watched),
        "systems": sp.systems,
        "watched": watched,
        "thresholds": {k: float(v) for k, v in run.params.analysis.verdict_thresholds.items()},
        "calls": {
            "used": calls_used,
            "full_set": calls_full,
            "saved": _saved(calls_used, calls_full),
        },
        "cost_usd": {
            "used": cost_used,
            "full_set": cost_full,
            "saved": _saved(cost_used, cost_full),
        },
        "path": state.path,
        "final": _final(state),
        "excluded_judges": dict(state.excluded),
        "failures": state.failures,
        "judge_pilot": state.pilots,
        "failed_calls": dict(sorted(state.calls.failed.items())),
        "drive_id": uuid.uuid4().hex,
        "design": {
            "order": sp.order,
            "boundary": rule.boundary,
            "require_band": rule.require_band,
            "recall": {
                s.name: "all" if s.name in state.hits else "judged" for s in run.params.systems
            },
            "critical": state.critical,
            "gate_sample": dict(state.gate_sample),
        },
    }
    return SequentialRecord(**fields)


def driver_outcome(record: RunRecord) -> SequentialRecord | None:
    """The driver's outcome stage 03 has still to take (its failed calls and pilots): the
    driver's record, unless stage 03's own record says it took this drive already (a later run of
    stage 03 alone then asks every call anew, as any run does); None when the driver did not run."""
    seq = record.sequential.sequential
    taken = record.scores.driver_taken
    if seq is None or (taken is not None and taken.drive_id == seq.drive_id):
        return None
    return seq


def driver_taken(outcome: SequentialRecord | None) -> DriverTaken | None:
    """What stage 03 writes in its own record when it took the driver's outcome."""
    if outcome is None:
        return None
    return DriverTaken(
        drive_id=outcome.drive_id,
        failed_calls=len(outcome.failed_calls),
        pilots=sorted(outcome.judge_pilot),
    )


def with_driver_pilots(judges: list, outcome: SequentialRecord | None) -> list:
    """The judges of stage 03 with the driver's pilot outcome: a judge its pilot let go on runs no
    second pilot (its report kept); one it stopped takes its pilot's calls again and sends nothing
    (`Judge.pilot_calls`). The judges unchanged without an outcome to take."""
    pilots = outcome.judge_pilot if outcome is not None else {}
    out = []
    for j in judges:
        pilot = pilots.get(j.name)
        if not isinstance(pilot, dict) or j.model.offline:
            out.append(j)
            continue
        report = {k: v for k, v in pilot.items() if k != "calls"}
        calls = pilot.get("calls")
        if calls:
            out.append(replace(j, pilot_report=report, pilot_calls=frozenset(map(str, calls))))
        else:
            out.append(replace(j, pilot=0, pilot_report=report))
    return out


def reached_questions(run: Run, corpus: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Stage 02's question set under `analysis.sequential`: the driver runs (its calls cached) and
    only the questions it reached are kept, in the set's order; without it, the whole set (and an
    earlier run's `sequential` record is cleared)."""
    if run.params.analysis.sequential is None:
        if "sequential" in run.read_record().sequential.model_fields_set:
            run.write_record(DriverRecord(sequential=None))
        return questions
    record = drive(run, corpus, questions)
    keep = set(record.question_ids)
    return questions[questions["question_id"].astype(str).isin(keep)].reset_index(drop=True)
