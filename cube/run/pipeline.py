"""The stages of a run, one function each: read the run directory, compute, write it back.

    corpus_stage      params.corpus            -> data/corpus.parquet          (notebook 01)
    questions_stage   corpus                   -> data/questions.parquet       (notebook 02)
    answers_stage     corpus, questions        -> data/answers.parquet         (notebook 02)
    scores_stage      answers                  -> data/scores.parquet          (notebook 03)
                                                  data/audit_scores.parquet    (`cube.run.audit`)
    evaluate_run      answers, scores          -> {system: CubeResult}         (notebooks 04-06)
    decision          the run's data           -> results.json `decision`      (`cube.run.decide`)
    human_stage       params.human.ratings     -> data/human_ratings.parquet   (`cube.run.human`)
    lexical_stage     answers                  -> data/lexical.parquet         (notebook 08)

Each stage reads only files of the run directory, so every notebook also runs standalone
once the earlier stages' files exist (`Run.require` says which notebook to run first). LLM
work is resumable through the call cache (`outputs/cache.sqlite`): a re-executed stage only
pays for calls it has never made.

The audit (`cube.run.audit`), the decision (`cube.run.decide`), the evaluation
(`cube.run.evaluate`) and human ratings (`cube.run.human`) live in modules of their own, and the
notebooks import them from `cube.run` by name (`decide.decision`, `audit.audit_report`): this module
re-exports nothing.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from cube.config.params import Params
from cube.run.audit import audit_stage, stage_judge_calls
from cube.run.evaluate import ANALYSIS_SCORE_COLUMNS, primary_system, system_top_n
from cube.run.notebook import Run
from cube.run.questions import build_question_set, unusable_questions

if TYPE_CHECKING:
    from cube.run.record import SequentialRecord


def corpus_stage(run: Run) -> pd.DataFrame:
    """Build the knowledge base (demo generator or the user's file) and save it."""
    from cube.kb.corpus import build_corpus
    from cube.run.record import CorpusRecord

    corpus = build_corpus(run.params, base_dir=run.base_dir)
    run.save("corpus", corpus)
    run.write_record(
        CorpusRecord(
            corpus_items=len(corpus),
            corpus_synthetic=bool(corpus.get("synthetic", pd.Series([False])).all()),
        )
    )
    return corpus


def questions_stage(run: Run) -> pd.DataFrame:
    """Write the question set (template, LLM role-play or a file) and save it.

    Questions whose generation failed, and LLM-written ones the screen rejects (`cube.kb.screen`,
    `questions.screen`), are dropped here, counted in `results.json` (`question_screen`) and kept in
    `data/questions_failed.parquet` with the reason in `error`. Fewer usable LLM-written questions
    than `questions.min_usable_share` stops the run with one line naming the reasons. Page 02 shows
    the screen's counts and examples (`question_screen_table`)."""
    from cube.kb.questions import QuestionError
    from cube.run.record import QuestionsRecord

    corpus = run.load("corpus")
    questions = build_question_set(run.params, corpus, run.paths.cache)
    screen = screen_question_set(run.params, corpus, questions)
    run.write_record(QuestionsRecord(question_screen=screen))
    stop = too_few_usable(run.params, screen)
    if stop:
        run.save("questions_failed", questions[questions["error"].fillna("").ne("")])
        raise QuestionError(f"{stop}; examples in data/questions_failed.parquet")
    failed = unusable_questions(questions)
    if failed.any():
        warnings.warn(
            f"{int(failed.sum())} question(s) could not be generated, failed the screen or have "
            "no gold document, and are left out (see the error column of "
            "data/questions_failed.parquet)",
            stacklevel=2,
        )
        run.save("questions_failed", questions[failed])
    elif run.data_path("questions_failed").exists():  # an earlier run's failures are not this run's
        run.data_path("questions_failed").unlink()
    questions = questions[~failed].reset_index(drop=True)
    from cube.run.sequential import reached_questions  # analysis.sequential: the driver runs here

    questions = reached_questions(run, corpus, questions)
    run.save("questions", questions)
    run.write_record(QuestionsRecord(questions=len(questions), questions_failed=int(failed.sum())))
    return questions


def screen_question_set(params: Params, corpus: pd.DataFrame, questions: pd.DataFrame) -> dict:
    """Screen LLM-written questions (`questions.screen`, `cube.kb.screen`): a rejected one gets
    `error` 'screen: <reason>' (in place). Returns the screen's record (`question_screen` of
    results.json): whether it ran (else why not), the counts per reason and examples."""
    from cube.kb.questions import question_prompt_template
    from cube.kb.screen import screen_questions, screen_table

    qp = params.questions
    if qp.generator == "imported":
        return left_out_record(questions)
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


def left_out_record(questions: pd.DataFrame) -> dict:
    """An imported file's questions (`questions.generator: imported`) are not screened; page 02's
    table (`question_screen_table`) counts those left out without a gold document, per reason,
    with their row ids as examples."""
    from cube.systems.imported_questions import NO_GOLD

    errors = questions["error"].fillna("").astype(str)
    reasons = errors.str.removeprefix(NO_GOLD)
    n = len(questions)
    table = [{"reason": "usable", "questions": int(errors.eq("").sum()), "examples": ""}]
    for reason, ids in questions["question_id"][errors.ne("")].groupby(reasons).groups.items():
        shown = questions.loc[ids, "question_id"].astype(str).head(10)
        table.append(
            {
                "reason": f"no gold document: {reason}",
                "questions": len(ids),
                "examples": " | ".join(shown),
            }
        )
    for row in table:
        row["share"] = row["questions"] / n if n else float("nan")
    return {
        "screened": False,
        "why": "the questions of an imported file are not screened",
        "questions": n,
        "table": table,
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
    from cube.kb.questions import QuestionError

    corpus = build_corpus(params, base_dir=base_dir)
    questions = build_question_set(params, corpus, cache_path, base_dir)
    stop = too_few_usable(params, screen_question_set(params, corpus, questions))
    if stop:
        raise QuestionError(stop)
    return corpus, questions[~unusable_questions(questions)].reset_index(drop=True)


def question_screen_table(run: Run) -> pd.DataFrame:
    """Page 02's screen table: per reason (and `usable`) the questions, their share and examples;
    one row saying why when the run's questions were not screened."""
    rec = run.read_record().questions.question_screen
    if rec is not None and rec.table:  # screened, or an imported file's questions left out
        return pd.DataFrame(rec.table)[["reason", "questions", "share", "examples"]]
    why = rec.why if rec is not None else "questions_stage has not run"
    return pd.DataFrame(
        [
            {
                "reason": f"not screened: {why}",
                "questions": rec.questions if rec is not None else None,
                "share": float("nan"),
                "examples": "",
            }
        ]
    )


def judge_pilot_table(run: Run) -> pd.DataFrame:
    """Page 03's table of the LLM judges' pilots: calls, replies, their dimension scores, the parsed
    scores and their share, the decision, the calls not sent and example replies that did not
    parse."""
    pilots = run.read_record().scores.judge_pilot or {}
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
    from cube.llm import CallLog
    from cube.systems import build_answers

    run.require("corpus", "questions")  # one message naming every stage to run first
    corpus, questions = run.load("corpus"), run.load("questions")
    # the driver ran in this stage, just before: a call it sent that failed stays failed
    driver = run.read_record().sequential.sequential
    calls = CallLog(replay=driver.failed_calls) if driver is not None else None
    answers = build_answers(run.params, corpus, questions, run.paths.cache, calls=calls)
    run.save("answers", answers)
    from cube.run.record import AnswersRecord

    run.write_record(
        AnswersRecord(
            answers=len(answers),
            answers_failed=int((answers["error"].fillna("") != "").sum()),
            answers_dropped={k: int(v) for k, v in answers.attrs.get("dropped", {}).items()},
            # retrieved ids or passages that named no knowledge-base document, per system
            answers_unmapped={k: int(v) for k, v in answers.attrs.get("unmapped", {}).items()},
            # per system: passages and ids read, and those that did not map (apart)
            answers_retrieval=answers.attrs.get("retrieval", {}),
            # per system whose retrieval was not measured (too much did not map): why, and the fix
            answers_unmeasured=answers.attrs.get("unmeasured", {}),
            # per system whose calls failed: how many, and each reason (status, body excerpt)
            answers_failures=answers.attrs.get("failures", {}),
        )
    )
    return answers


def scores_stage(run: Run) -> pd.DataFrame:
    """Score every answer of the three sets with every judge on every dimension.

    Each LLM judge starts with its pilot (`judges[].pilot`, `cube.judges.scoring.pilot_decision`);
    the pilots' decisions go to `results.json` (`judge_pilot`, shown on page 03 by
    `judge_pilot_table`), a stopped judge also to a warning with example replies."""
    from cube.run.sequential import driver_outcome

    run.require("corpus", "questions", "answers")
    corpus, questions, answers = run.load("corpus"), run.load("questions"), run.load("answers")

    # the sequential driver's outcome, an argument from stage 02's record (None: no driver, or
    # this stage took it already)
    outcome = driver_outcome(run.read_record())
    return _scores_stage(run, corpus, questions, answers, outcome)


def _scores_stage(
    run: Run,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    outcome: SequentialRecord | None,
) -> pd.DataFrame:
    """Stage 03 with the sequential driver's outcome as its argument: its failed calls fail again
    with their reasons (not sent) and its pilots are not run a second time; the stage's record
    says it took them (`driver_taken`), so a later run of this stage asks them anew."""
    from cube.judges import load_dimensions, make_judges, score_answers
    from cube.llm import CallLog
    from cube.run.record import ScoresRecord
    from cube.run.sequential import driver_taken, with_driver_pilots

    calls = CallLog(replay=outcome.failed_calls) if outcome is not None else None
    judges = with_driver_pilots(make_judges(run.params, run.paths.cache, calls), outcome)
    dimensions = load_dimensions(run.params, base_dir=run.base_dir)
    scores = score_answers(answers, judges, dimensions, corpus, questions=questions)
    run.save("scores", scores)
    from cube.run.bounds_reuse import write_bounds_reuse

    write_bounds_reuse(run, answers, scores)  # data/bounds_reused.json: the bounds reused
    # the judging pilots' reports, taken before the audit scores its probes with the judges
    pilots = [j.pilot_report for j in judges if j.pilot_report]
    n_judge = stage_judge_calls(judges, answers, corpus, questions, dimensions, scores)
    audit, n_audit = audit_stage(run, judges, dimensions, corpus, questions, answers, n_judge)
    # calls in flight reached (issue 15), per judge with an endpoint; always written, so that a
    # re-run whose calls were all cached does not keep the previous run's figures (record() merges
    # keys)
    concurrency = {
        j.name: j.model.concurrency_record()
        for j in judges
        if hasattr(j.model, "concurrency_record")
    }
    run.write_record(
        ScoresRecord(
            scores=len(scores),
            scores_unscored=int(scores["score"].isna().sum()),
            judge_concurrency=concurrency,
            judge_pilot={p["judge"]: {k: v for k, v in p.items() if k != "judge"} for p in pilots},
            audit_judgments=len(audit),
            audit_calls=n_audit,
            audit_share_of_judge_calls=round(n_audit / n_judge, 4) if n_judge else None,
            # set only when taken: a later run of this stage keeps saying this drive was taken
            **({"driver_taken": driver_taken(outcome)} if outcome is not None else {}),
        )
    )
    for p in pilots:
        if p["decision"] == "stopped":
            warnings.warn(
                f"{p['reason']}; {p['calls_not_sent']} calls not sent (set judges[].insist: true "
                f"to send them anyway). Replies: {p['examples']}",
                stacklevel=2,
            )
    return scores


# --------------------------------------------------------------------------- lexical (08)
def lexical_stage(run: Run) -> pd.DataFrame:
    """Sentence BLEU and ROUGE of every answer against its reference; saved as
    data/lexical.parquet."""
    from cube.kb.text import clear_segment_caches, segment
    from cube.method.lexical import lexical_scores

    reference = run.params.lexical.reference
    lex = lexical_scores(  # only the columns it reads (the call accounting is not text)
        run.load("answers", ("question_id", "doc_id", "system", "set", "answer")),
        run.load("corpus", ("doc_id", "text")),
        tokenizer=run.params.lexical.tokenizer,
        reference=reference,
        questions=None if reference == "gold_document" else run.load("questions"),
        lang=run.params.lang,
        segment=segment,
    )
    # the cuts of every answer and gold document (~50 MB at the paper's scale) are not read again
    # in this stage (the next stage's kernel reset empties them anyway)
    clear_segment_caches()
    run.save("lexical", lex)
    return lex


def scores_with_human(run: Run) -> pd.DataFrame:
    """The judges' scores plus the imported human ratings, when notebook 07 imported them. Of the
    judges' rows only the columns the analysis reads (`ANALYSIS_SCORE_COLUMNS`: the raw replies,
    details and call accounting were ~100 MB at the paper's scale); the human rows keep their
    criterion `detail` (Table 7)."""
    scores = run.load("scores", ANALYSIS_SCORE_COLUMNS)
    if run.params.human.ratings and run.has("human_ratings"):
        human = run.load("human_ratings")
        keep = [c for c in human.columns if c in scores.columns or c == "detail"]
        return pd.concat([scores, human[keep]], ignore_index=True)
    return scores


def lexical_example(run: Run, lexical: pd.DataFrame, scores: pd.DataFrame) -> dict[str, Any]:
    """The answer for Tables 6-7: `lexical.example_question_id` if set, else the first human-rated
    rag answer of the primary system, else its first retrieved rag answer."""
    system = primary_system(run)
    questions = run.load("questions", ("question_id", "question")).set_index("question_id")
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
            answers = run.load("answers", ("question_id", "system", "set", "rank"))
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
