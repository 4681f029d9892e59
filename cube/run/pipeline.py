"""The stages of a run, one function each: read the run directory, compute, write it back.

    corpus_stage      params.corpus            -> data/corpus.parquet          (notebook 01)
    questions_stage   corpus                   -> data/questions.parquet       (notebook 02)
    answers_stage     corpus, questions        -> data/answers.parquet         (notebook 02)
    scores_stage      answers                  -> data/scores.parquet          (notebook 03)
    evaluate_run      answers, scores          -> {system: CubeResult}         (notebooks 04-06)
    human_stage       params.human.ratings     -> data/human_ratings.parquet   (notebook 07)

Each stage reads only files of the run directory, so every notebook also runs standalone
once the earlier stages' files exist (`Run.require` says which notebook to run first). LLM
work is resumable through the call cache (`outputs/cache.sqlite`): a re-executed stage only
pays for calls it has never made.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.config.runpaths import RunPaths
from cube.config.schema import ACCOUNTING_COLUMNS
from cube.config.sheets import read_guarded_csv
from cube.method.evaluation import CubeResult
from cube.pages.escape import escape_text
from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS, evaluate_run, system_top_n  # noqa: F401  (stages of notebooks 02-06)
from cube.run.notebook import Run


def corpus_stage(run: Run) -> pd.DataFrame:
    """Build the knowledge base (demo generator or the user's file) and save it."""
    from cube.kb.corpus import build_corpus

    corpus = build_corpus(run.params, base_dir=run.base_dir)
    run.save("corpus", corpus)
    run.record(
        corpus_items=len(corpus),
        corpus_synthetic=bool(corpus.get("synthetic", pd.Series([False])).all()),
    )
    return corpus


def questions_stage(run: Run) -> pd.DataFrame:
    """Write the question set (template, LLM role-play or a file) and save it.

    Questions whose generation failed, and LLM-written ones the screen rejects (`cube.kb.screen`,
    `questions.screen`), are dropped here, counted in `results.json` (`question_screen`) and kept in
    `data/questions_failed.parquet` with the reason in `error`. Fewer usable LLM-written questions
    than `questions.min_usable_share` stops the run with one line naming the reasons. Page 02 shows
    the screen's counts and examples (`question_screen_table`)."""
    from cube.kb.questions import QuestionError, build_questions

    corpus = run.load("corpus")
    questions = build_questions(run.params, corpus, run.paths.cache)
    screen = screen_question_set(run.params, corpus, questions)
    run.record(question_screen=screen)
    stop = too_few_usable(run.params, screen)
    if stop:
        run.save("questions_failed", questions[questions["error"].fillna("").ne("")])
        raise QuestionError(f"{stop}; examples in data/questions_failed.parquet")
    failed = unusable_questions(questions)
    if failed.any():
        warnings.warn(
            f"{int(failed.sum())} question(s) could not be generated or failed the screen and are "
            "left out (see the error column of data/questions_failed.parquet)",
            stacklevel=2,
        )
        run.save("questions_failed", questions[failed])
    elif run.data_path("questions_failed").exists():  # an earlier run's failures are not this run's
        run.data_path("questions_failed").unlink()
    questions = questions[~failed].reset_index(drop=True)
    run.save("questions", questions)
    run.record(questions=len(questions), questions_failed=int(failed.sum()))
    return questions


def screen_question_set(params: Params, corpus: pd.DataFrame, questions: pd.DataFrame) -> dict:
    """Screen LLM-written questions (`questions.screen`, `cube.kb.screen`): a rejected one gets
    `error` 'screen: <reason>' (in place). Returns the screen's record (`question_screen` of
    results.json): whether it ran (else why not), the counts per reason and examples."""
    from cube.kb.questions import question_prompt_template
    from cube.kb.screen import screen_questions, screen_table

    qp = params.questions
    if not (qp.generator == "llm" and qp.screen and len(questions)):
        why = (
            "the screen reads LLM-written questions only"
            if qp.generator != "llm"
            else "questions.screen is off"
        )
        return {"screened": False, "why": why, "questions": len(questions)}
    reasons = screen_questions(questions, corpus, question_prompt_template(params.lang))
    hit = reasons.ne("")
    questions.loc[hit, "error"] = "screen: " + reasons[hit]
    return {
        "screened": True,
        "questions": len(questions),
        "usable": int((questions["error"].fillna("").eq("")).sum()),
        "reasons": {r: int(n) for r, n in reasons[hit].value_counts().items()},
        "table": screen_table(questions, reasons).to_dict("records"),
    }


def too_few_usable(params: Params, screen: dict) -> str | None:
    """Why the run stops before answering (fewer usable screened questions than
    `questions.min_usable_share`), or None."""
    qp, n = params.questions, screen["questions"]
    if not screen["screened"] or screen["usable"] >= qp.min_usable_share * n:
        return None
    counts = screen["reasons"]
    why = ", ".join(f"{r} {k}" for r, k in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (
        f"only {screen['usable']} of {n} generated questions are usable ({why}; "
        f"questions.min_usable_share {qp.min_usable_share:g}): stopped before answering them"
    )


def unusable_questions(questions: pd.DataFrame) -> pd.Series:
    """The questions a run leaves out: empty (their generation failed) or rejected by the
    screen."""
    return questions["question"].fillna("").astype(str).str.strip().eq("") | questions[
        "error"
    ].fillna("").astype(str).str.startswith("screen: ")


def question_set(
    params: Params, base_dir: Path, cache_path: Path | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's knowledge base and question set exactly as stages 01 and 02 make them (the same
    builders, screen and drops), without a run folder: for `cube validate` and `cube questions`.
    A `questions.generator: llm` set sends its question-writing calls (cached in `cache_path`, so
    the run reuses them and gets the same set).

    Raises:
        CorpusError, QuestionError: the knowledge base or the question set cannot be made.
    """
    from cube.kb.corpus import build_corpus
    from cube.kb.questions import QuestionError, build_questions

    corpus = build_corpus(params, base_dir=base_dir)
    questions = build_questions(params, corpus, cache_path, base_dir=base_dir)
    stop = too_few_usable(params, screen_question_set(params, corpus, questions))
    if stop:
        raise QuestionError(stop)
    return corpus, questions[~unusable_questions(questions)].reset_index(drop=True)


def question_screen_table(run: Run) -> pd.DataFrame:
    """Page 02's screen table: per reason (and `usable`) the questions, their share and examples;
    one row saying why when the run's questions were not screened."""
    rec = run.record().get("question_screen") or {}
    if rec.get("screened"):
        return pd.DataFrame(rec["table"])
    why = rec.get("why", "questions_stage has not run")
    return pd.DataFrame(
        [
            {
                "reason": f"not screened: {why}",
                "questions": rec.get("questions"),
                "share": float("nan"),
                "examples": "",
            }
        ]
    )


def judge_pilot_table(run: Run) -> pd.DataFrame:
    """Page 03's table of the LLM judges' pilots: calls, replies, their dimension scores, the parsed
    scores and their share, the decision, the calls not sent and example replies that did not
    parse."""
    pilots = run.record().get("judge_pilot") or {}
    if not pilots:
        return pd.DataFrame([{"judge": "(no LLM judge with a pilot)"}])
    return pd.DataFrame(
        [
            {
                "judge": name,
                **{k: v for k, v in p.items() if k not in ("reason", "examples")},
                "examples": " | ".join(p.get("examples") or []),
            }
            for name, p in pilots.items()
        ]
    )


def answers_stage(run: Run) -> pd.DataFrame:
    """Answer the question set with every system (`rag`) and write the two bound sets."""
    from cube.systems import build_answers

    run.require("corpus", "questions")  # one message naming every stage to run first
    corpus, questions = run.load("corpus"), run.load("questions")
    answers = build_answers(run.params, corpus, questions, run.paths.cache)
    run.save("answers", answers)
    run.record(
        answers=len(answers),
        answers_failed=int((answers["error"].fillna("") != "").sum()),
        answers_dropped={k: int(v) for k, v in answers.attrs.get("dropped", {}).items()},
        # retrieved ids or passages that named no knowledge-base document, per system
        answers_unmapped={k: int(v) for k, v in answers.attrs.get("unmapped", {}).items()},
    )
    return answers


def scores_stage(run: Run) -> pd.DataFrame:
    """Score every answer of the three sets with every judge on every dimension.

    Each LLM judge starts with its pilot (`judges[].pilot`, `cube.judges.scoring.pilot_decision`);
    the pilots' decisions go to `results.json` (`judge_pilot`, shown on page 03 by
    `judge_pilot_table`), a stopped judge also to a warning with example replies."""
    from cube.judges import load_dimensions, make_judges, score_answers

    run.require("corpus", "questions", "answers")
    corpus, questions, answers = run.load("corpus"), run.load("questions"), run.load("answers")
    judges = make_judges(run.params, run.paths.cache)
    dimensions = load_dimensions(run.params, base_dir=run.base_dir)
    scores = score_answers(answers, judges, dimensions, corpus, questions=questions)
    run.save("scores", scores)
    # the judging pilots' reports, taken before the audit scores its probes with the same judges
    pilots = [j.pilot_report for j in judges if j.pilot_report]
    n_judge = judge_calls(judges, stage_requests(judges, answers, corpus, questions, dimensions))
    audit, n_audit = audit_stage(run, judges, dimensions, corpus, questions, answers, n_judge)
    # calls in flight reached (issue 15), per judge with an endpoint; always written, so that a
    # re-run whose calls were all cached does not keep the previous run's figures (record() merges
    # keys)
    concurrency = {
        j.name: j.model.concurrency_record()
        for j in judges
        if hasattr(j.model, "concurrency_record")
    }
    run.record(
        scores=len(scores),
        scores_unscored=int(scores["score"].isna().sum()),
        judge_concurrency=concurrency,
        judge_pilot={p["judge"]: {k: v for k, v in p.items() if k != "judge"} for p in pilots},
        audit_judgments=len(audit),
        audit_calls=n_audit,
        audit_share_of_judge_calls=round(n_audit / n_judge, 4) if n_judge else None,
    )
    for p in pilots:
        if p["decision"] == "stopped":
            warnings.warn(
                f"{p['reason']}; {p['calls_not_sent']} calls not sent (set judges[].insist: true "
                f"to send them anyway). Replies: {p['examples']}",
                stacklevel=2,
            )
    return scores


AUDIT_COLUMNS = (
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
    `judge_calls` (`audit_sample`). Judged by stage 03, exported with its calls by `cube batch`."""
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


def audit_sample_sentence(sample: dict[str, Any] | None) -> str:
    """What notebook 11 and the audit's verdicts say of the sample (empty when it was not
    capped)."""
    if not sample or not sample.get("capped") or not sample.get("requested"):
        return ""
    return (
        f"the audit sample shrank from {sample['requested']} to {sample['questions']} questions: "
        f"{sample['calls_per_question']} judge calls per question, at most "
        f"{sample['max_share']:.0%} of the run's {sample['judge_calls']} judge calls "
        "(audit.max_share)"
    )


def audit_sample_note(run: Run) -> str:
    """Notebook 11's sentence on the audit's sample: how many questions, their calls against the
    run's judge calls, and whether `audit.max_share` shrank it (what stage 03 recorded)."""
    rec = _recorded(run)
    sample = rec.get("audit_sample")
    if not sample:
        return "The audit's sample was not recorded: re-run stage 03 (cube run PARAMS --only 03)."
    if not sample["requested"]:
        return "The audit is off (audit.questions: 0)."
    head = (
        f"The audit sampled {sample['questions']} questions: "
        f"{rec.get('audit_calls', sample['audit_calls'])} judge calls, "
        f"{rec.get('audit_share_of_judge_calls') or 0:.1%} of the run's {sample['judge_calls']} "
        f"judge calls (at most {sample['max_share']:.0%}, audit.max_share)."
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
    import json

    from cube.llm.cache import cache_key

    n = 0
    for j in judges:
        if j.model.offline:
            n += len(
                {
                    json.dumps(
                        [r.context, r.template_version, r.sample], sort_keys=True, default=str
                    )
                    for r in requests[j.name]
                }
            )
        else:
            n += len({cache_key(j.model.spec, r) for r in requests[j.name]})
    return n


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
    out, sample, n_audit = judge_audit(
        run.params, judges, dimensions, corpus, questions, answers, n_judge
    )
    run.record(audit_sample=sample)
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
                for c in (*AUDIT_COLUMNS, *ACCOUNTING_COLUMNS)
            }
        )
        return out, sample, 0
    inputs = probes.drop(columns=["probe", "expect"])
    out = score_answers(inputs, audited, dimensions, corpus, questions=questions, progress=progress)
    if "role" in out:
        out["role"] = "audit"
    out = out.merge(
        probes[["question_id", "system", "probe", "expect"]], on=["question_id", "system"]
    )
    return (
        out,
        sample,
        judge_calls(audited, stage_requests(audited, inputs, corpus, questions, dimensions)),
    )


def audit_report(run: Run) -> pd.DataFrame:
    """Per judge: the audit's figures (`cube.method.audit.audit_summary`), its verdict for the gate
    and whether the judge is in the primary system's jury (notebook 11). Empty when the audit did
    not run."""
    from cube.method.audit import audit_summary, audit_verdict, injection_verdict
    from cube.run.evaluate import audit_probe_scores

    run.require("scores")
    probes = audit_probe_scores(run, run.load("scores", ANALYSIS_SCORE_COLUMNS))
    if probes is None:
        return pd.DataFrame(columns=["judge", "audit"])
    summary = audit_summary(probes, run.params.analysis.confidence)
    a, ap = run.params.audit, run.params.analysis
    verdicts = [audit_verdict(row, ap.gate_alpha, a.min_pairs) for _, row in summary.iterrows()]
    summary["content_blind"] = [v for v, _ in verdicts]
    summary["audit"] = [why for _, why in verdicts]
    note = audit_sample_sentence(_recorded(run).get("audit_sample"))
    summary["audit"] = [f"{why} ({note})" if note and v is None else why for v, why in verdicts]
    inj = [injection_verdict(row, ap.gate_alpha, a.min_pairs) for _, row in summary.iterrows()]
    summary["obeys_injections"], summary["injection"] = [v for v, _ in inj], [w for _, w in inj]
    table = evaluate_run(run, bootstrap=False)[primary_system(run)].cube_table
    summary["in_jury"] = summary["judge"].map(table["in_jury"]) if "in_jury" in table else None
    own = self_preference_table(run)
    for c in SELF_PREFERENCE_COLUMNS:
        summary[c] = summary["judge"].map(own[c]) if c in own else np.nan
    return summary.set_index("judge")


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
    """The answer sets a system's answerer writes: every set of a builtin system, the bound sets of
    another (its rag answers come from a file or RAGFlow, by a model the run does not know)."""
    from cube.config.sections import BuiltinSystem

    return ("zero", "rag", "full") if isinstance(system, BuiltinSystem) else ("zero", "full")


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


def bound_answerer_note(params: Params) -> str:
    """A caveat when the bound sets of the primary system are not written by an LLM like the
    system's."""
    system = params.systems[0]
    spec = params.model(params.system_answerer(system))
    if getattr(system, "bounds", None):
        return (
            f"The zero and full bound sets of {system.name} are written by its own bounds function "
            f"{system.bounds} (docs/how-to/python-system.md)."
        )
    if spec.provider == "offline":
        return (
            f"The zero and full bound sets of {system.name} are written by the offline "
            f"{spec.model} algorithm, not by an LLM."
        )
    return ""


def offline_judges(run: Run) -> list[str]:
    """Judges whose model is an offline algorithm (not an LLM), for the caveats the report
    states."""
    return [j.name for j in run.params.judges if run.params.model(j.model).provider == "offline"]


def primary_system(run: Run) -> str:
    """The system the decision page is about: the first of `params.systems`."""
    return run.params.systems[0].name


# ------------------------------------------------------------------------------ human ratings
def annotation_dir(paths: RunPaths) -> Path:
    return paths.annotation  # the published folder, also from staging (cube.run.state)


def export_annotation(
    params: Params,
    out: Path | None = None,
    raters: list[str] | None = None,
    paths: RunPaths | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Export the blind annotation sheet (CSV, criteria CSV, Excel) and its key file for a run's
    answers.

    An existing sheet is kept unless `overwrite`: raters may be filling it in place, and the
    sample is deterministic, so writing it again could only erase their work."""
    from cube.judges.annotation import export_annotation_sheet, key_path

    paths = paths or RunPaths.for_params(params)
    target = out or annotation_dir(paths) / "annotation_sheet"
    key = key_path(
        target
    )  # `x_key.csv` for a sheet `x`: matched by the glob below, listed once, last
    existing = (
        sorted(p for p in target.parent.glob(f"{target.name}*") if p != key)
        if target.parent.exists()
        else []
    )
    if existing and not overwrite:
        return existing + [key] * key.exists()
    run = Run(params=params, paths=paths, params_path=Path("."))
    answers, questions, corpus = run.load("answers"), run.load("questions"), run.load("corpus")
    target.parent.mkdir(parents=True, exist_ok=True)
    export_annotation_sheet(
        answers,
        questions,
        corpus,
        params.dimension_names(),
        params.lang,
        target,
        size=params.human.sample_size,
        seed=params.human.seed,
        raters=raters,
        paired=True,
    )
    return sorted(p for p in target.parent.glob(f"{target.name}*") if p != key) + [key]


def human_stage(run: Run) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """Import the filled annotation sheet(s) named by `human.ratings`; None when there are none."""
    from cube.judges.annotation import key_path
    from cube.judges.human import import_ratings

    if not run.params.human.ratings:
        return None
    answers = run.load("answers")
    ratings = Path(run.params.human.ratings)
    key = (
        Path(run.params.human.key)
        if run.params.human.key
        else key_path(annotation_dir(run.paths) / "annotation_sheet")
    )
    if not run.params.human.key and (
        not key.exists() or (ratings.is_dir() and any(ratings.glob("*_key.csv")))
    ):
        key = None  # the ratings folder's own key, or a sheet written before blinding
    human, report = import_ratings(
        ratings,
        answers,
        run.params.dimension_names(),
        per_rater=run.params.human.per_rater_judges,
        key=key,
    )
    run.save("human_ratings", human)
    return human, report


# ------------------------------------------------------------------------------ decision (06)
def retrieval_quality(run: Run, results: dict[str, CubeResult]) -> dict[str, Any]:
    """What the decision says about the primary system's retrieval beyond R@k: R@1, the
    near-duplicate confusion rate (top-1 is the gold's sibling: wrong region or variant) and the
    knowledge base's exact-duplicate texts (a duplicate makes the gold unfindable at rank 1)."""
    from cube.diagnose.near_duplicates import near_duplicate_confusion
    from cube.kb.corpus import corpus_structure

    primary = primary_system(run)
    ranks = results[primary].ranks
    out: dict[str, Any] = {
        "r_at_1": float((ranks["rank"] == 1).mean()) if len(ranks) else float("nan")
    }
    if run.has("corpus"):
        corpus = run.load("corpus")
        out["near_duplicate_confusion"] = near_duplicate_confusion(
            run.load("answers"), corpus, system=primary
        )
        structure = corpus_structure(corpus)
        for key in ("duplicate_texts", "documents_merging_services", "documents_named_placeholder"):
            out[key] = structure[key]
    return out


def decision(run: Run, results: dict[str, CubeResult]) -> dict[str, Any]:
    """The Lightweight Targeted Assessment of the run, also written to `results.json`."""
    from cube.diagnose.lta import assess
    from cube.llm import usage_summary
    from cube.llm.usage import USAGE_COLUMNS

    # One table at a time, the scores with only what `usage_summary` reads (its replies, keys and
    # scores are most of a paper-scale table): the three whole tables at once were stage 06's peak.
    names = [n for n in ("questions", "answers", "scores") if run.has(n)]
    usage = (
        usage_summary(run.load(n, USAGE_COLUMNS) if n == "scores" else run.load(n) for n in names)
        if names
        else None
    )
    corpus_synthetic = (
        bool(run.load("corpus").get("synthetic", pd.Series([False])).all())
        if run.has("corpus")
        else False
    )
    offline = offline_judges(run)
    scores = run.load("scores", ("error_kind",))
    kind = (
        scores["error_kind"].fillna("")
        if "error_kind" in scores
        else pd.Series("", index=scores.index)
    )
    out = assess(
        results,
        run.params,
        usage=usage,
        synthetic=corpus_synthetic,
        offline_judges=offline,
        call_failure_share=float((kind == "call").mean()) if len(scores) else 0.0,
        parse_failure_share=float((kind == "parse").mean()) if len(scores) else 0.0,
        skipped_share=float((kind == "skipped").mean()) if len(scores) else 0.0,
        bound_note=bound_answerer_note(run.params),
        retrieval=retrieval_quality(run, results),
        diagnosis=_diagnosis(run, results),
    )
    if (
        run.params.human.ratings
    ):  # notebook 07's human-calibrated CuBE, when it ran (it reads `human`, 06 not)
        _attach_human(out, _recorded(run).get("human_calibrated") or {}, run=run, results=results)
    audit = _audit_record(run)
    own = {
        j: {k: v[k] for k in SELF_PREFERENCE_COLUMNS}
        for j, v in (audit.get("judges") or {}).items()
        if "self_preference" in v
    }
    if own:  # the decision page's line per judge whose model wrote the answers it judged
        out["self_preference"] = own
    # the injection probe's verdict per judge (issue 29): the decision page's short line
    if inj := {j: v.get("obeys_injections") for j, v in (audit.get("judges") or {}).items()}:
        out["injection"] = inj
    run.record(
        decision=out,
        cube_score=out["cube_score"],
        recall_at_k=out["recall_at_k"],
        weighted_score=out["weighted_score"],
        verdict=out["verdict"],
        verdict_label=out["verdict_label"],
        provisional=out["provisional"],
        withheld_reasons=out["withheld_reasons"],
        judging_failed=out["judging_failed"],
        audit=audit,
    )
    return out


def human_calibration(
    run: Run,
    results: dict[str, CubeResult] | None = None,
    imported: tuple[pd.DataFrame, Any] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any], dict[str, dict[str, Any]]] | None:
    """The human-calibrated CuBE of every rated system (`cube.method.ppi`), None without ratings:
    the table of notebook 07, the `PPIResult` per system and their `results.json` headlines
    (recorded as `human_calibrated`, and in the decision recorded by notebook 06, whose page
    then says "With N human ratings: CuBE X [lo, hi]"; a later run of 06 carries it over)."""
    from cube.method.ppi import calibrate_systems

    if not run.params.human.ratings:
        return None
    imported = imported or human_stage(run)
    if imported is None:
        return None
    results = results if results is not None else evaluate_run(run)
    ap = run.params.analysis
    answers, scores = run.load("answers"), run.load("scores")
    table, per = calibrate_systems(
        answers,
        scores,
        imported[0],
        results,
        ap,
        system_top_n(run.params),
        widths=(10.0, ap.max_interval_width),
    )
    heads = {
        s: p.headline() | {"basis": human_basis(answers, scores, imported[0], results, s)}
        for s, p in per.items()
    }
    decision = _recorded(run).get("decision")
    run.record(
        human_calibrated=heads, **({"decision": _attach_human(decision, heads)} if decision else {})
    )
    return table, per, heads


def _recorded(run: Run) -> dict[str, Any]:
    """`results.json` as recorded so far ({} before the first record)."""
    import json

    path = run.paths.results
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


HUMAN_BASIS_COLUMNS = (
    "question_id",
    "system",
    "set",
    "judge",
    "dimension",
    "score",
    "rank",
    "retrieval_ok",
)


def human_basis(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    human: pd.DataFrame | None,
    results: dict[str, CubeResult],
    system: str,
) -> str:
    """A fingerprint of what a system's human-calibrated CuBE is computed from: its answers'
    retrieval outcomes, the judges' scores, the human ratings, the jury and its weights. Notebook
    07 stamps the figure with it; the decision (06) shows the figure only when it still matches."""
    import hashlib
    import json

    from cube.method.ppi import jury_weights

    digest = hashlib.sha256()
    for table in (answers, scores, human):
        if table is None or "system" not in table:
            digest.update(b"-")
            continue
        t = table.loc[
            table["system"].astype(str) == system, [c for c in HUMAN_BASIS_COLUMNS if c in table]
        ]
        t = t.astype({c: str for c in t.columns if c != "score"})
        if "score" in t:
            t["score"] = pd.to_numeric(t["score"], errors="coerce")
        t = t.sort_values(list(t.columns), kind="stable").reset_index(drop=True)
        digest.update(
            ",".join(t.columns).encode()
            + pd.util.hash_pandas_object(t, index=False).to_numpy().tobytes()
        )
    res = results.get(system)
    jury = sorted(str(j) for j in res.jury_judges) if res is not None else None
    weights = jury_weights(res) if res is not None else None
    digest.update(json.dumps([system, jury, weights], sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def _attach_human(
    decision: dict[str, Any],
    heads: dict[str, dict[str, Any]],
    run: Run | None = None,
    results: dict[str, CubeResult] | None = None,
) -> dict[str, Any]:
    """The decision with its system's human-calibrated CuBE and the sentence the page shows. Given
    the run and its results (notebook 06 carrying over what 07 recorded), a figure whose `basis`
    no longer matches the run's answers, scores, ratings and jury is not attached: it was computed
    for another decision."""
    from cube.diagnose.lta import human_sentence

    system = str(decision.get("system"))
    head = heads.get(system) or {}
    if head and run is not None and results is not None:
        human = run.load("human_ratings") if run.has("human_ratings") else None
        now = human_basis(
            run.load("answers", HUMAN_BASIS_COLUMNS),
            run.load("scores", HUMAN_BASIS_COLUMNS),
            human,
            results,
            system,
        )
        if head.get("basis") != now:
            decision["human_calibrated"] = {}
            decision["human_sentence"] = (
                "The human-calibrated CuBE recorded by notebook 07 was computed from other "
                "answers, judges' scores, human ratings or jury than this decision's, so it is not "
                "shown: re-run notebook 07 (cube run PARAMS --only 07..08) for the figure that "
                "goes with this decision."
            )
            return decision
    decision["human_calibrated"] = head
    decision["human_sentence"] = human_sentence(head)
    return decision


def _audit_record(run: Run) -> dict[str, Any]:
    """`results.json` `audit`: per judge its discrimination, biases and verdict (`ran: false` when
    it did not run)."""
    import json

    report = audit_report(run)
    sample = _recorded(run).get("audit_sample")
    if report.empty:
        return {"ran": False, **({"sample": sample} if sample else {})}
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
    return {"ran": True, "judges": judges, **({"sample": sample} if sample else {})}


def _diagnosis(run: Run, results: dict[str, CubeResult]) -> dict[str, Any]:
    from cube.run.diagnosis import for_decision

    return for_decision(run, primary_system(run), results)


# ------------------------------------------------------------------------ human agreement (07)
@dataclass
class HumanSection:
    """What notebook 07 shows: with ratings, human-vs-judge agreement and Table 5; without,
    the sheet to fill in and judge-vs-judge agreement (never invented ratings)."""

    has_ratings: bool
    message: str
    sheet: list[Path]
    sheet_preview: pd.DataFrame | None
    import_report: dict[str, Any] | None
    agreement: pd.DataFrame
    reliability: pd.DataFrame
    pairwise: pd.DataFrame
    table5: pd.DataFrame | None
    scores: pd.DataFrame  # LLM judges' scores on the compared items, with human rows when rated
    sets: list[
        str
    ]  # the answer sets the agreement is computed on (`human.agreement_sets`, present ones)
    agreement_note: str  # which sets the statistics are on and what was left out
    set_scores: (
        pd.DataFrame
    )  # `scores` in the first of `sets` (all of them when it is "pooled"): the figures
    calibrated: pd.DataFrame | None = (
        None  # human-calibrated CuBE per rated system (cube.method.ppi)
    )
    calibrated_means: pd.DataFrame | None = (
        None  # its per (system, set, dimension) means: judge, human, PPI
    )


def _sheet_size(sample_size: int, files: list[Path]) -> str:
    """What the sheet's rows are, from its key file: '40 sampled question-system pairs x 3 answer
    sets (zero, rag, full), shuffled, with blind ids'."""
    key = next((p for p in files if p.stem.endswith("_key")), None)
    if key is None:  # a sheet written before blinding
        return f"{sample_size} sampled question-system pairs, each in all its answer sets"
    k = read_guarded_csv(key, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    pairs = k[["question_id", "system"]].drop_duplicates().shape[0]
    sets = (
        sorted(k["set"].unique(), key=["zero", "rag", "full"].index)
        if set(k["set"]) <= {"zero", "rag", "full"}
        else sorted(k["set"].unique())
    )
    return (
        f"{pairs} sampled question-system pairs × {len(sets)} answer sets ({', '.join(sets)}), "
        "shuffled; raters see only the question, the gold document and the answer under an opaque "
        f"id, and `{key.name}` maps the ids back"
    )


def human_agreement(run: Run) -> HumanSection:
    from cube.method import agreement as ag
    from cube.method.tables import table5_human_vs_cube

    scores = run.load("scores")
    answers = run.load("answers")
    sheet = export_annotation(run.params, paths=run.paths)
    sheet_csv = next(
        p for p in sheet if p.suffix == ".csv" and not p.stem.endswith(("_criteria", "_key"))
    )
    preview = read_guarded_csv(sheet_csv, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    n_rows = len(preview)
    preview = preview.head(5)
    first = run.params.dimension_names()[0]
    preview = preview[
        [c for c in ("item_id", "question", "answer", "rater") if c in preview.columns]
        + [c for c in preview.columns if c.startswith(f"{first}.")]
    ]
    preview[["question", "answer"]] = preview[["question", "answer"]].map(
        lambda t: t[:60] + "…" * (len(t) > 60)
    )
    imported = human_stage(run)
    judges = sorted(scores["judge"].unique())
    ap = run.params.analysis
    if imported is None:
        reference = judges[0]
        msg = (
            "No human ratings were given (params `human.ratings` is empty), so none are shown: "
            f"this notebook never invents them. The annotation sheet ({n_rows} rows: "
            f"{escape_text(_sheet_size(run.params.human.sample_size, sheet))}) is ready in "
            # <code>, not backticks: a code span shows character references as written
            f"<code>{escape_text(run.shown_path(annotation_dir(run.paths)))}/</code>; fill it in "
            "(or hand it to raters), then set `human: {ratings: <the filled file or folder>}` in "
            "the params and re-run "
            "notebooks 07-08. Meanwhile, the judges are compared with each other, taking "
            f"{escape_text(reference)} as the reference."  # Markdown: a name is outside text
        )
        both = scores
        groups = {"LLM/offline judges": judges}
        t5 = None
        report = None
        calibrated = None
    else:
        human, report = imported
        reference = "human"
        rated = set(zip(human["question_id"], human["system"], human["set"], strict=True))
        key = list(zip(scores["question_id"], scores["system"], scores["set"], strict=True))
        both = pd.concat([scores[[k in rated for k in key]], human], ignore_index=True)
        raters = sorted(j for j in human["judge"].unique())
        groups = {"human raters": raters, "judges": judges}
        full = evaluate_run(run, bootstrap=False)
        full_recall = {s: r.recall_at_k for s, r in full.items()}
        jury = {s: r.jury_judges for s, r in full.items()}  # Table 5 over the jury only
        t5 = table5_human_vs_cube(
            answers, scores, human, ap, system_top_n(run.params), full_recall, jury
        )
        calibrated = human_calibration(run, imported=imported)
        msg = (
            f"{len(raters)} human rater(s) rated "
            f"{human[['question_id', 'system', 'set']].drop_duplicates().shape[0]} answers; "
            f"{int(human['score'].isna().sum())} cells were left blank and are reported, not "
            "guessed."
        )
    sets, note = _agreement_sets(run.params.human.agreement_sets, both)
    agreement = ag.agreement_table(
        both,
        reference_judge=reference,
        sets=sets,
        bootstrap=min(ap.bootstrap, 200),
        confidence=ap.confidence,
        seed=ap.seed,
    )
    reliability = (
        ag.reliability_table(both, {k: v for k, v in groups.items() if len(v) > 1}, sets=sets)
        if any(len(v) > 1 for v in groups.values())
        else pd.DataFrame()
    )
    unpaired = int(agreement["n_missing"].sum()) if len(agreement) else 0
    note += (
        f" {unpaired} (judge, answer, dimension) pair(s) where a side is unscored are left out and "
        "counted in `n_missing`."
        if unpaired
        else ""
    )
    first = sets[0]
    set_scores = both if first == ag.POOLED else both[both["set"].astype(str) == first]
    cal_means = (
        None
        if calibrated is None
        else pd.concat(
            [p.means.assign(system=s) for s, p in calibrated[1].items()], ignore_index=True
        )
    )
    return HumanSection(
        imported is not None,
        msg,
        sheet,
        preview,
        report,
        agreement,
        reliability,
        ag.pairwise_agreement(both, set_name=first),
        t5,
        both,
        sets,
        note,
        set_scores,
        None if calibrated is None else calibrated[0],
        cal_means,
    )


def _agreement_sets(requested: list[str], scores: pd.DataFrame) -> tuple[list[str], str]:
    """The requested agreement sets that have scores, and a one-paragraph note saying which sets the
    statistics are on and which were left out (never pooled unless `pooled` is requested)."""
    present = sorted(scores["set"].astype(str).unique())
    sets = [s for s in dict.fromkeys(requested) if s == "pooled" or s in present]
    absent = [s for s in dict.fromkeys(requested) if s not in sets]
    if not sets:
        raise ValueError(
            f"human.agreement_sets: none of {requested} has scores in this run; sets present: "
            f"{present}"
        )
    named = ", ".join(
        "all sets pooled" if s == "pooled" else f"the {escape_text(s)} set" for s in sets
    )  # the note is Markdown: the set names are escaped
    left = [s for s in present if s not in sets and "pooled" not in sets]
    note = (
        f"Agreement is computed on {named} (`human.agreement_sets`), each separately"
        + (", never pooled across sets" if "pooled" not in sets else "")
        + "; bootstrap intervals resample questions (all answers of a question move together)."
    )
    if left:
        note += f" Not included: the {escape_text(', '.join(left))} set(s)."
    if absent:
        note += f" Requested but without scores: {escape_text(', '.join(absent))}."
    return sets, note


# --------------------------------------------------------------------------- lexical (08)
def lexical_stage(run: Run) -> pd.DataFrame:
    """Sentence BLEU and ROUGE of every answer against its reference; saved as
    data/lexical.parquet."""
    from cube.kb.text import segment
    from cube.method.lexical import lexical_scores

    lex = lexical_scores(
        run.load("answers"),
        run.load("corpus"),
        tokenizer=run.params.lexical.tokenizer,
        reference=run.params.lexical.reference,
        questions=run.load("questions"),
        lang=run.params.lang,
        segment=segment,
    )
    run.save("lexical", lex)
    return lex


def scores_with_human(run: Run) -> pd.DataFrame:
    """The judges' scores plus the imported human ratings, when notebook 07 imported them."""
    scores = run.load("scores")
    if run.params.human.ratings and run.has("human_ratings"):
        human = run.load("human_ratings")
        return pd.concat(
            [scores, human[[c for c in human.columns if c in scores.columns]]], ignore_index=True
        )
    return scores


def lexical_example(run: Run, lexical: pd.DataFrame, scores: pd.DataFrame) -> dict[str, Any]:
    """The answer for Tables 6-7: `lexical.example_question_id` if set, else the first human-rated
    rag answer of the primary system, else its first retrieved rag answer."""
    system = primary_system(run)
    questions = run.load("questions").set_index("question_id")
    rated = scores[
        scores["judge"].astype(str).str.startswith("human")
        & (scores["system"] == system)
        & (scores["set"] == "rag")
        & (scores["dimension"] == "completeness")
    ]
    qid = run.params.lexical.example_question_id
    if qid is None:
        if len(rated):
            qid = str(sorted(rated["question_id"].astype(str))[0])
        else:
            answers = run.load("answers")
            rag = answers[(answers["system"] == system) & (answers["set"] == "rag")].sort_values(
                "question_id"
            )
            pick = rag[rag["rank"] > 0]
            qid = str((pick if len(pick) else rag)["question_id"].iloc[0])
    if qid not in questions.index:
        raise KeyError(f"lexical.example_question_id: {qid!r} is not a question of this run")
    return {
        "question_id": qid,
        "system": system,
        "set": "rag",
        "question": str(questions.at[qid, "question"]),
        "rated": bool((rated["question_id"].astype(str) == qid).any()),
    }


@dataclass
class SystemData:
    """One system's answers and (once notebook 03 has run) scores, and its list length N.

    `scores` holds the columns the analysis and its figures read (`ANALYSIS_SCORE_COLUMNS`), not
    the raw replies, criterion details and call accounting (`run.load("scores")` has them): a
    second whole copy of the table beside notebook 03's was that stage's peak at the paper's
    scale."""

    answers: pd.DataFrame
    scores: pd.DataFrame | None
    top_n: int


def system_data(run: Run, system: str | None = None) -> SystemData:
    system = system or primary_system(run)
    answers = run.load("answers")
    scores = run.load("scores", ANALYSIS_SCORE_COLUMNS) if run.has("scores") else None
    return SystemData(
        answers[answers["system"] == system],
        None if scores is None else scores[scores["system"] == system],
        system_top_n(run.params)[system],
    )
