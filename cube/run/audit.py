"""The judge audit of stage 03 and its report (notebook 11, issue 20), and self-preference.

    audit_sample / audit_probes   how many questions, which probes (`cube.systems.probes`)
    stage_requests / judge_calls  the judge calls a stage makes, which cap the audit's share
    stage_judge_calls             the same count, a slice of answers at a time (stage 03)
    audit_stage / judge_audit     the probes judged by every judge: data/audit_scores.parquet
    audit_report                  per judge: discrimination, biases, verdict, self-preference
    audit_record                 `results.json` `audit`

Moved out of `cube.run.pipeline` (which re-exports these names for the notebooks).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.config.schema import ACCOUNTING_COLUMNS
from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS, evaluate_run, primary_system
from cube.run.notebook import Run
from cube.run.record import AuditSample, ScoresRecord

# The columns of the probe judgments (one row per probe answer judged); not
# `cube.method.audit.AUDIT_COLUMNS`, which are the per-judge audit table's.
PROBE_JUDGMENT_COLUMNS = (
    "question_id",
    "system",
    "set",
    "judge",
    "dimension",
    "sample",
    "score",
    "error_kind",
    "probe",
    "expect",
    "injection",
)


def audit_probes(
    params: Params,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    judge_calls: int,
) -> pd.DataFrame:
    """The audit's probes (`cube.systems.probes.build_probes` of the primary system's full answers):
    `audit.questions` of them, fewer when their calls would exceed `audit.max_share` of the run's
    `judge_calls` (`audit_sample`). Judged by stage 03, exported with its calls by `cube batch`.
    Under `analysis.bounds_of_missed: sample` the full answers are those made (the retrieved
    questions', and the gate's sample of missed ones up to `analysis.gate_bounds_questions`,
    `cube.systems.bounds`): the audit draws among them, and its cap follows the judge calls made,
    so its sample is another seeded one than with `all`. W and CuBE do not read it, but its
    verdicts feed the judge gate: with few retrieved questions it may decide differently."""
    from cube.systems.probes import build_probes

    full = answers[(answers["system"] == params.systems[0].name) & (answers["set"] == "full")]
    n = audit_sample(params, judge_calls)["questions"]
    return build_probes(full, corpus, questions, n, params.audit.seed, params.lang)


def audit_sample(params: Params, judge_calls: int) -> dict[str, Any]:
    """How many questions the audit samples: `audit.questions`, capped so that its calls are at most
    `audit.max_share` of the run's judge calls (`cube.systems.probes.capped_questions`; `cube plan`
    counts the same). Recorded in results.json (`audit_sample`) and said by notebook 11."""
    from cube.systems.probes import calls_per_question, capped_questions

    a = params.audit
    per_q = calls_per_question(params)
    n = capped_questions(a.questions, judge_calls, per_q, a.max_share)
    return {
        "requested": a.questions,
        "questions": n,
        "capped": n < a.questions,
        "max_share": a.max_share,
        "judge_calls": int(judge_calls),
        "calls_per_question": per_q,
        "audit_calls": n * per_q,
    }


def audit_sample_sentence(sample: AuditSample | None) -> str:
    """What notebook 11 and the audit's verdicts say of the sample (empty when it was not
    capped)."""
    if sample is None or not sample.capped or not sample.requested:
        return ""
    return (
        f"the audit sample shrank from {sample.requested} to {sample.questions} questions: "
        f"{sample.calls_per_question} judge calls per question, at most "
        f"{sample.max_share or 0:.0%} of the run's {sample.judge_calls} judge calls "
        "(audit.max_share)"
    )


def audit_sample_note(run: Run) -> str:
    """Notebook 11's sentence on the audit's sample: how many questions, their calls against the
    run's judge calls, and whether `audit.max_share` shrank it (what stage 03 recorded)."""
    rec = run.read_record().scores
    sample = rec.audit_sample
    if not sample:
        return "The audit's sample was not recorded: re-run stage 03 (cube run PARAMS --only 03)."
    if not sample.requested:
        return "The audit is off (audit.questions: 0)."
    head = (
        f"The audit sampled {sample.questions} questions: "
        f"{rec.audit_calls if rec.audit_calls is not None else sample.audit_calls} judge "
        f"calls, {rec.audit_share_of_judge_calls or 0:.1%} of the run's {sample.judge_calls} "
        f"judge calls (at most {sample.max_share or 0:.0%}, audit.max_share)."
    )
    note = audit_sample_sentence(sample)
    return head + (
        f" Capped: {note}; with fewer than audit.min_pairs ({run.params.audit.min_pairs}) probe "
        "pairs a judge gets no audit verdict (never an exclusion)."
        if note
        else ""
    )


def stage_requests(
    judges: list[Any],
    answers: pd.DataFrame,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    dimensions: list[Any],
) -> dict[str, list[Any]]:
    """Per judge, the requests stage 03 makes of these answers
    (`cube.judges.scoring.judge_requests`)."""
    from cube.judges.scoring import judge_inputs, judge_requests

    records = judge_inputs(answers, corpus, questions).to_dict("records")
    return {j.name: judge_requests(j, records, dimensions)[1] for j in judges}


def judge_calls(judges: list[Any], requests: dict[str, list[Any]]) -> int:
    """The judge calls of these requests, counted per judge: identical requests of one judge are one
    call (an LLM's cache key; an offline algorithm's inputs). Stage 03, `cube batch` and `cube plan`
    cap the audit with this count: neither the call cache (two judges on one model share their first
    sample's calls) nor a pilot that stopped a judge (its calls not sent) changes it, and the
    re-asks of `retry_unscored`, which none can foresee, are not in it."""
    return sum(len({_call_key(j, r) for r in requests[j.name]}) for j in judges)


# Answers whose requests `stage_judge_calls` builds at a time (all of one judge's at once were
# 73k requests per judge at the paper's scale).
CALLS_SLICE = 4096


def stage_judge_calls(
    judges: list[Any],
    answers: pd.DataFrame,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    dimensions: list[Any],
    scores: pd.DataFrame | None = None,
) -> int:
    """`judge_calls` of `stage_requests(...)`, the same count, without holding every judge's
    requests at once (stage 03 counts its judging calls this way to cap the audit).

    An offline judge's calls are the distinct `call_id`s of its rows in `scores` (the judged
    table of these answers), when given: its call id is the hash of exactly the inputs
    `judge_calls` compares (`cube.llm.OfflineModel`), and a row without a call (a missing answer)
    has none. Every other judge's requests are built a slice of answers at a time and only their
    call keys kept."""
    from cube.judges.scoring import judge_inputs, judge_requests

    n, todo = 0, []
    ids, names = (scores["call_id"], scores["judge"]) if scores is not None else (None, None)
    for j in judges:
        if j.model.offline and ids is not None:
            n += int(ids[(names == j.name) & (ids != "")].nunique())  # one column, not the table
        else:
            todo.append(j)
    records = judge_inputs(answers, corpus, questions).to_dict("records") if todo else []
    for j in todo:
        keys: set[Any] = set()
        for start in range(0, len(records), CALLS_SLICE):
            part = records[start : start + CALLS_SLICE]
            keys.update(_call_key(j, r) for r in judge_requests(j, part, dimensions)[1])
        n += len(keys)
    return n


def _call_key(judge: Any, request: Any) -> Any:
    """What makes two requests of one judge the same call: an LLM's cache key; for an offline
    algorithm its inputs (context, template version, sample), compared as `_frozen` values that
    share the request's strings (a JSON text of each request's context, ~8 KB with its document,
    was stage 03's peak at the paper's scale)."""
    if judge.model.offline:
        return (_frozen(request.context), request.template_version, request.sample)
    from cube.llm.cache import cache_key

    return cache_key(judge.model.spec, request)


def _frozen(value: Any) -> Any:
    """A hashable value equal for two values exactly when their JSON texts
    (`json.dumps(..., sort_keys=True, default=str)`) are equal: mappings by their keys as JSON
    writes them, lists and tuples alike (both JSON arrays), floats by their JSON text (NaN equals
    NaN, 1.0 differs from 1), other objects by `str` (as `default=str`) tagged like strings."""
    if isinstance(value, dict):
        return ("{", tuple(sorted((_json_key(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("[", tuple(_frozen(v) for v in value))
    if value is None or isinstance(value, bool):
        return ("c", value)
    if isinstance(value, int):
        return ("i", int(value))
    if isinstance(value, float):
        return ("f", float.__repr__(value))
    return ("s", value if isinstance(value, str) else str(value))


def _json_key(key: Any) -> str:
    """A mapping key as JSON writes it (`json.dumps` turns None, booleans and numbers into text)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    return float.__repr__(key) if isinstance(key, float) else str(key)


def audit_stage(
    run: Run,
    judges: list[Any],
    dimensions: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    n_judge: int,
) -> tuple[pd.DataFrame, int]:
    """The judge audit (issue 20) of stage 03 (`judge_audit`): saved as data/audit_scores, its
    sample recorded (`audit_sample` in results.json); returns it with its judge calls
    (`judge_calls`)."""
    from cube.run.ablation import twin_stage

    out, sample, n_audit = judge_audit(
        run.params, judges, dimensions, corpus, questions, answers, n_judge
    )
    twins, screen = twin_stage(
        run.params, judges, dimensions, corpus, questions, answers, n_judge, stage_judge_calls
    )
    run.write_record(ScoresRecord(audit_sample=sample, screen=screen))
    if len(twins):  # the screen's ablation twins beside the probes (issue 38)
        out = pd.concat([out, twins], ignore_index=True) if len(out) else twins
    run.save("audit_scores", out)
    return out, n_audit


def judge_audit(
    params: Params,
    judges: list[Any],
    dimensions: list[Any],
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    n_judge: int,
    progress: bool = True,
) -> tuple[pd.DataFrame, dict[str, Any], int]:
    """Probes of the primary system's full answers (`cube.systems.probes`) judged by every judge,
    their accounting under the role 'audit' (empty with `audit.questions: 0`, or when the cap leaves
    no question), the sample (`audit_sample`, capped by the run's `n_judge` judge calls,
    `judge_calls`) and the audit's judge calls. The audit has no pilot of its own (the judging pilot
    decided: a judge it stopped is not audited, and the judges' `pilot_report` stays the judging
    pilot's)."""
    from dataclasses import replace

    from cube.judges import score_answers

    sample = audit_sample(params, n_judge)
    probes = audit_probes(params, corpus, questions, answers, n_judge)
    audited = [
        replace(j, pilot=0, pilot_report=None)
        for j in judges
        if not (j.pilot_report and j.pilot_report.get("decision") == "stopped")
    ]
    if probes.empty or not audited:
        out = pd.DataFrame(
            {
                c: pd.Series(dtype=float if c == "score" else object)
                for c in (*PROBE_JUDGMENT_COLUMNS, *ACCOUNTING_COLUMNS)
            }
        )
        return out, sample, 0
    inputs = probes.drop(columns=["probe", "expect", "injection"])
    out = score_answers(inputs, audited, dimensions, corpus, questions=questions, progress=progress)
    n_audit = stage_judge_calls(audited, inputs, corpus, questions, dimensions, out)
    if "role" in out:
        out["role"] = "audit"
    out = out.merge(
        probes[["question_id", "system", "probe", "expect", "injection"]],
        on=["question_id", "system"],
    )
    return out, sample, n_audit


def audit_report(run: Run) -> pd.DataFrame:
    """Per judge: the audit's figures (`cube.method.audit.audit_summary`), its verdict for the gate
    and whether the judge is in the primary system's jury (notebook 11). Empty when the audit did
    not run."""
    from cube.method.audit import audit_summary
    from cube.run.ablation import with_twins
    from cube.run.evaluate import audit_probe_scores

    run.require("scores")
    probes = audit_probe_scores(run, run.load("scores", ANALYSIS_SCORE_COLUMNS))
    if probes is None:
        return pd.DataFrame(columns=["judge", "audit"])
    summary = audit_summary(probes, run.params.analysis.confidence)
    summary = with_twins(run, _with_verdicts(run, summary))
    return _with_jury_and_self_preference(run, summary).set_index("judge")


def _with_verdicts(run: Run, summary: pd.DataFrame) -> pd.DataFrame:
    """Each judge's content-blindness verdict for the gate (`content_blind`, why in `audit`) and
    its injection verdict (`obeys_injections`, why in `injection`)."""
    from cube.method.audit import audit_verdict, injection_verdict

    a, ap = run.params.audit, run.params.analysis
    verdicts = [audit_verdict(row, ap.gate_alpha, a.min_pairs) for _, row in summary.iterrows()]
    summary["content_blind"] = [v for v, _ in verdicts]
    summary["audit"] = [why for _, why in verdicts]
    note = audit_sample_sentence(run.read_record().scores.audit_sample)
    summary["audit"] = [f"{why} ({note})" if note and v is None else why for v, why in verdicts]
    k = len(summary)  # Bonferroni over the judges tested, as the gate
    inj = [injection_verdict(row, ap.gate_alpha, a.min_pairs, k) for _, row in summary.iterrows()]
    summary["obeys_injections"], summary["injection"] = [v for v, _ in inj], [w for _, w in inj]
    return summary


def _with_jury_and_self_preference(run: Run, summary: pd.DataFrame) -> pd.DataFrame:
    """Whether each judge is in the primary system's jury, and its self-preference figures."""
    table = evaluate_run(run, bootstrap=False)[primary_system(run)].cube_table
    summary["in_jury"] = summary["judge"].map(table["in_jury"]) if "in_jury" in table else None
    own = self_preference_table(run)
    for c in SELF_PREFERENCE_COLUMNS:
        summary[c] = summary["judge"].map(own[c]) if c in own else np.nan
    return summary


SELF_PREFERENCE_COLUMNS = (
    "self_preference",
    "self_preference_lo",
    "self_preference_hi",
    "self_preference_items",
    "self_preference_control_items",
    "self_preference_note",
)


def same_model(params: Params, a: Any, b: Any) -> bool:
    """Whether two model references (a `models:` entry name or an inline spec) are one model: the
    same provider, endpoints and model, whatever else differs (two entries at temperature 0.7 and 0
    are one)."""
    x, y = params.model(a), params.model(b)
    return (x.provider, x.base_url, tuple(x.base_urls or ()), x.model) == (
        y.provider,
        y.base_url,
        tuple(y.base_urls or ()),
        y.model,
    )


def answerer_sets(params: Params, system: Any) -> tuple[str, ...]:
    """The answer sets a system's answerer writes: every set of a kind whose answering model writes
    its rag answers too (builtin: `SystemKind.answerer_writes_rag`), the bound sets of another (its
    rag answers come from a file, a service or a function, by a model the run does not know)."""
    from cube.systems.kinds import kind_of

    return ("zero", "rag", "full") if kind_of(system).answerer_writes_rag else ("zero", "full")


def self_judges(params: Params, system: str) -> dict[str, tuple[str, ...]]:
    """The judges whose model wrote `system`'s answers (`same_model` as its answerer), each with the
    answer sets that model wrote (`answerer_sets`)."""
    sp = next((x for x in params.systems if x.name == system), None)
    if sp is None:
        return {}
    ref = params.system_answerer(sp)
    return {
        j.name: answerer_sets(params, sp) for j in params.judges if same_model(params, j.model, ref)
    }


def self_preference_table(run: Run) -> pd.DataFrame:
    """Per judge whose model answered the primary system (`self_judges`): its preference for those
    answers apart from its leniency and scale (`cube.method.audit.self_preference`, an ANCOVA
    on the answers of the run's other systems written by another model: points,
    interval, answers, control answers, and the cause when not measurable). Empty (no row, never a
    0) when no judge answered."""
    from cube.method.audit import self_preference

    primary = primary_system(run)
    own = self_judges(run.params, primary)
    if not own:
        return pd.DataFrame(columns=list(SELF_PREFERENCE_COLUMNS))
    scores = run.load("scores", ANALYSIS_SCORE_COLUMNS)
    models = {j.name: j.model for j in run.params.judges}
    rows = {}
    for judge, sets in own.items():
        mine = (scores["system"] == primary) & scores["set"].isin(sets)
        control = pd.Series(False, index=scores.index)
        for sp in run.params.systems[1:]:  # answers known to be written by another model
            if not same_model(run.params, run.params.system_answerer(sp), models[judge]):
                control |= (scores["system"] == sp.name) & scores["set"].isin(
                    answerer_sets(run.params, sp)
                )
        r = self_preference(
            scores[mine | control].assign(own=mine[mine | control]),
            judge,
            run.params.analysis.confidence,
        )
        rows[judge] = {
            "self_preference": r["self_preference"],
            "self_preference_lo": r["self_preference_lo"],
            "self_preference_hi": r["self_preference_hi"],
            "self_preference_items": r["items"],
            "self_preference_control_items": r["control_items"],
            "self_preference_note": r["note"],
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SELF_PREFERENCE_COLUMNS))


def audit_record(run: Run) -> dict[str, Any]:
    """`results.json` `audit`: per judge its discrimination, biases and verdict (`ran: false` when
    it did not run)."""
    import json

    report = audit_report(run)
    sample = run.read_record().scores.audit_sample
    if report.empty:
        return {"ran": False, **({"sample": sample.as_json()} if sample else {})}
    keep = [
        "pairs",
        "discrimination",
        "discrimination_lo",
        "discrimination_hi",
        "discrimination_p_value",
        "empty_truncated_pairs",
        "empty_truncated_wins",
        "verbosity_bias",
        "authority_bias",
        "order_bias",
        "leniency",
        "modal_share",
        "content_blind",
        "audit",
        "obeys_injections",
        "injection",
        "ablation",
    ]
    judges = json.loads(report[keep].to_json(orient="index"))  # NaN as null, plain types
    # self-preference only for a judge whose model answered (absent, never 0, for the others)
    own = json.loads(
        report.loc[report["self_preference_items"].notna(), list(SELF_PREFERENCE_COLUMNS)].to_json(
            orient="index"
        )
    )
    for judge, values in own.items():
        judges[judge].update(values)
    return {"ran": True, "judges": judges, **({"sample": sample.as_json()} if sample else {})}
