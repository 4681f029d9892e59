"""The sub-records of the run record (`cube.run.record.RunRecord`): one `Part` per writer, whose
fields are top-level keys of results.json, in the order the file holds them; the payloads inside
them readers branch on (`Payload`: typed fields, extra keys kept); the sequential driver's record
(`SequentialRecord`) and what stage 03 took of it (`DriverTaken`). Field descriptions are the
documentation of results.json (docs/reference/results.md is generated from them).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_serializer, field_validator

from cube.diagnose.decision_record import Decision

Json = JsonValue  # a payload kept as its producer builds it (see cube.run.record's docstring)
JsonObject = dict[str, JsonValue]


def _as_json(value: Any) -> Any:
    """A value as the JSON file holds it: numpy scalars as numbers, tuples as lists (what the
    untyped writer's `json.dumps(default=float)` made of them, so values are unchanged)."""
    if isinstance(value, BaseModel) or value is None:
        return value
    return json.loads(json.dumps(value, default=float, ensure_ascii=False))


class Part(BaseModel):
    """One stage's sub-record: its fields are top-level keys of results.json."""

    model_config = ConfigDict(extra="forbid")
    TITLE: ClassVar[str] = ""  # the sub-record's heading in docs/reference/results.md
    WRITER: ClassVar[str] = ""  # who writes it (for the reference page)

    @field_validator("*", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return _as_json(value)

    def as_json(self) -> dict[str, Any]:
        """The fields this part holds (set by its writer or read from the file), as JSON."""
        return self.model_dump(mode="python", exclude_unset=True)


class Payload(BaseModel):
    """A typed payload inside a part: the fields readers branch on are typed; a key its producer
    adds later is kept as it is (`extra="allow"`), so a file is never refused for one."""

    model_config = ConfigDict(extra="allow")

    def as_json(self) -> dict[str, Any]:
        """The keys its producer wrote (none added)."""
        return self.model_dump(mode="python", exclude_unset=True)


class QuestionScreen(Payload):
    """`question_screen`: what the question screen did (`cube.run.pipeline.screen_question_set`)."""

    screened: bool = Field(False, description="Whether the screen read the questions.")
    why: str = Field("", description="Why not, when it did not.")
    questions: int = Field(0, description="Questions it was given.")
    usable: int | None = Field(None, description="Questions it kept.")
    reasons: dict[str, int] = Field({}, description="Rejected questions per reason.")
    table: list[JsonObject] = Field([], description="Page 02's rows: reason, questions, share.")


class FailureReason(Payload):
    """One reason calls to a system failed, and how often."""

    reason: str = Field("", description="Status and a short body excerpt.")
    count: int = Field(0, description="Calls that failed so.")


class SystemFailures(Payload):
    """One system's failed calls (`answers_failures`, `cube.systems.failure_reasons`)."""

    failed: int = Field(0, description="Calls to the system that failed.")
    calls: int = Field(0, description="Calls to the system.")
    reasons: list[FailureReason] = Field([], description="Each reason and its count, most first.")


class AuditSample(Payload):
    """`audit_sample`: the audit's question sample (`cube.run.audit.audit_sample`)."""

    requested: int = Field(0, description="`audit.questions`.")
    questions: int = Field(0, description="Questions sampled (capped by `audit.max_share`).")
    capped: bool = Field(False, description="Whether the cap shrank the sample.")
    max_share: float | None = Field(None, description="`audit.max_share`.")
    judge_calls: int = Field(0, description="The stage's judge calls.")
    calls_per_question: int | float = Field(0, description="Audit calls per question.")
    audit_calls: int = Field(0, description="Audit calls planned.")


class AnswerScreen(Payload):
    """`screen`: the answer screen of stage 03 (`cube.run.ablation.twin_stage`, issue 38)."""

    flagged: int = Field(
        0,
        description="Answers holding text addressed to a grader or set apart from the answer "
        "(asides: `cube.judges.asides`).",
    )
    twinned: int = Field(0, description="Of them, those given an ablation twin.")
    capped: bool = Field(False, description="Whether the twins were capped (a seeded sample).")
    max_share: float | None = Field(None, description="Cap: share of the run's judge calls.")
    tiers: dict[str, int] = Field(
        {},
        description="Flagged answers per tier (1 addressed to a grader or hidden, 2 set apart by "
        "structure, 3 unsupported text at an edge): the twins are chosen in that order.",
    )
    kinds: dict[str, int] = Field({}, description="Flagged answers per kind.")
    flagged_answers: list[JsonObject] = Field([], description="Each flagged answer, spans cut.")
    calls: int = Field(0, description="The twins' judge calls.")
    share_of_judge_calls: float | None = Field(None, description="Their share of judge calls.")


class PlanRecord(Part):
    TITLE = "Plan"
    WRITER = "`cube run` before the first call (`cube.run.execute`)"

    plan: list[JsonObject] | dict[str, str] | None = Field(
        None,
        description="`cube plan`'s rows (role, model, calls, cached calls, tokens, cost, "
        "latency...) as recorded before any call of the run; read back by the reconciliation "
        "of planned against spent calls (`cube.run.reconcile`). A plan that could not be made "
        'is `{"error": its reason}`.',
    )


class PaperRecord(Part):
    TITLE = "Paper tables (stage 00)"
    WRITER = "notebook 00 (`paper.reproduction_check`)"

    paper_table4_max_abs_difference: float | None = Field(
        None, description="Largest absolute difference from the paper's Table 4."
    )
    paper_table4_reproduced: bool | None = Field(
        None, description="Whether Table 4 is reproduced within its tolerance."
    )


class CorpusRecord(Part):
    TITLE = "Knowledge base (stage 01)"
    WRITER = "`corpus_stage`; `corpus_structure` by notebook 01"

    corpus_items: int | None = Field(None, description="Documents in the knowledge base.")
    corpus_synthetic: bool | None = Field(
        None, description="Whether every document is synthetic (the demo generator's)."
    )
    corpus_structure: JsonObject | None = Field(
        None,
        description="Exact duplicates and family structure (`cube.kb.corpus.corpus_structure`): "
        "documents, duplicate texts and groups, families and their sizes.",
    )


class QuestionsRecord(Part):
    TITLE = "Questions (stage 02)"
    WRITER = "`questions_stage` (with its screen, `screen_question_set`)"

    question_screen: QuestionScreen | None = Field(
        None,
        description="The question screen: `screened`, else `why` not; `questions`, `usable`, "
        "the count per rejection `reason` and page 02's `table` (reason, questions, share, "
        "examples).",
    )
    questions: int | None = Field(None, description="Questions of the set kept for answering.")
    questions_failed: int | None = Field(
        None,
        description="Questions left out (generation failed, screen, no gold document); kept in "
        "data/questions_failed.parquet with their reason.",
    )


class SequentialRecord(BaseModel):
    """The sequential driver's outcome (`analysis.sequential`, `cube.run.sequential.drive`): what
    it judged, how it stopped, and what stage 03 takes from it as arguments (`failed_calls`,
    `judge_pilot`). Its layout is documented in docs/how-to/sequential.md; the page reads it
    through `cube.pages.sequential.read_record`."""

    model_config = ConfigDict(extra="forbid")

    stop: str = Field(description="The stop rule: `verdict` or `width`.")
    batch: int = Field(description="Questions per batch.")
    min_questions: int = Field(description="Questions judged before the first allowed stop.")
    min_questions_why: str | None = Field(None, description="Why `min_questions` was raised.")
    alpha: float = Field(description="Error level of the confidence sequences.")
    max_width: float | None = Field(None, description="Width that stops (`stop: width`).")
    seed: int | None = Field(None, description="Seed of the batches' order.")
    questions_available: int = Field(description="Questions of the set.")
    questions_used: int = Field(description="Questions judged (the set stage 02 keeps).")
    question_ids: list[str] = Field([], description="The ids of the questions judged, in order.")
    stopped_early: bool = Field(description="Whether the run stopped before the set ended.")
    reason: str = Field(description="Why it stopped, in a sentence.")
    systems: str | None = Field(None, description="`all` or `primary`: the systems watched.")
    watched: list[str] | None = Field(None, description="Systems whose intervals could stop it.")
    thresholds: dict[str, float] = Field(description="The verdict bands' thresholds.")
    calls: JsonObject | None = Field(None, description="Calls `used`, `full_set`, `saved`.")
    cost_usd: JsonObject | None = Field(None, description="Cost `used`, `full_set`, `saved`.")
    path: list[JsonObject] = Field(description="One row per look and quantity.")
    final: dict[str, JsonObject] = Field(description="Each system's last look.")
    excluded_judges: dict[str, str] = Field({}, description="Judge -> why it left the jury.")
    failures: Json = Field(None, description="Failed judgments and answers per look.")
    judge_pilot: dict[str, JsonObject] = Field(
        {},
        description="Each LLM judge's pilot outcome (its report, and `calls`: the pilot's "
        "calls, for a judge its pilot stopped); stage 03 runs no second pilot.",
    )
    failed_calls: dict[str, str] = Field(
        {},
        description="Every LLM call the driver sent that failed: its cache key -> the reason. "
        "Stage 03 takes them as arguments (once per drive: `ScoresRecord.driver_taken`).",
    )
    drive_id: str | None = Field(
        None, description="This drive's identity: stage 03 takes its outcome once."
    )
    design: JsonObject | None = Field(
        None,
        description="The design (`cube.run.sequential_design`): `order`, `boundary`, "
        "`require_band`, `recall` (per system: `all`, every question's retrieval, or `judged`), "
        "`critical` (the boundary's value at each look that could stop the run) and "
        "`gate_sample` (per system, the missed questions whose bounds the judge gate's floor "
        "made on the questions reached, `analysis.gate_bounds_questions`).",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        return _as_json(value)


class DriverRecord(Part):
    TITLE = "Sequential driver (stage 02, `analysis.sequential`)"
    WRITER = "`cube.run.sequential.drive` (null once a later run has no `analysis.sequential`)"

    sequential: SequentialRecord | None = Field(
        None, description="The driver's record (`SequentialRecord`, its fields below)."
    )


class AnswersRecord(Part):
    TITLE = "Answers (stage 02)"
    WRITER = (
        "`answers_stage`; `retrieval`, `near_duplicate_confusion`, `region_filter` by notebook 02"
    )

    answers: int | None = Field(None, description="Answers written (every system).")
    answers_failed: int | None = Field(None, description="Answers whose call failed.")
    answers_dropped: dict[str, int] | None = Field(
        None, description="Per system: answers dropped (no question of the set)."
    )
    answers_unmapped: dict[str, int] | None = Field(
        None,
        description="Per system: retrieved ids or passages that named no knowledge-base document.",
    )
    answers_retrieval: dict[str, JsonObject] | None = Field(
        None, description="Per system: passages and ids read, and those that did not map."
    )
    answers_unmeasured: dict[str, list[str]] | None = Field(
        None,
        description="Per system whose retrieval was not measured (too much did not map): why, "
        "and the fix, one sentence each (`cube.systems.retrieved.unmeasured_reasons`). Its "
        "verdict is withheld.",
    )
    answers_failures: dict[str, SystemFailures] | None = Field(
        None,
        description="Per system whose calls failed: how many, and each reason (status, body "
        "excerpt) counted.",
    )
    retrieval: JsonObject | None = Field(
        None,
        description="The primary system's retrieval figures (R@k, P@k, nDCG@k, MRR...) and "
        "`system`.",
    )
    near_duplicate_confusion: JsonObject | None = Field(
        None, description="Per system: rate and count of near-duplicate confusions, by kind."
    )
    region_filter: JsonObject | None = Field(
        None, description="Per system: the region filter's effect on retrieval (empty: none)."
    )


class RefusalRecord(Part):
    TITLE = "Refusal questions (`diagnostics.refusal_questions`)"
    WRITER = "`refusal_stage`"

    refusal: JsonObject | None = Field(
        None,
        description="Per system: refusal accuracy, false-refusal rate, their intervals and "
        "counts, and a flag.",
    )
    refusal_generation: JsonObject | None = Field(
        None,
        description="How the refusal questions were made: generator, requested, questions; "
        "for the LLM generator its calls, failed ones with their reason, those dropped.",
    )


class DriverTaken(BaseModel):
    """What stage 03 took of the sequential driver's outcome (`SequentialRecord`)."""

    model_config = ConfigDict(extra="forbid")

    drive_id: str | None = Field(None, description="The drive whose outcome was taken.")
    failed_calls: int = Field(0, description="The driver's failed calls, failed again unsent.")
    pilots: list[str] = Field([], description="Judges whose pilot was the driver's.")


class ScoresRecord(Part):
    TITLE = "Scores, pilots, concurrency and the audit (stage 03)"
    WRITER = "`scores_stage`; `audit_sample` and `screen` by its audit (`cube.run.audit`)"

    audit_sample: AuditSample | None = Field(
        None,
        description="The audit's question sample: requested, questions, capped, max_share, "
        "judge calls, calls per question, audit calls.",
    )
    screen: AnswerScreen | None = Field(
        None,
        description="The answer screen (issue 38): answers flagged and twinned, kinds, the "
        "flagged answers (spans cut), calls.",
    )
    scores: int | None = Field(None, description="Judgments written (every judge, dimension).")
    scores_unscored: int | None = Field(None, description="Judgments without a score.")
    judge_concurrency: dict[str, JsonObject] | None = Field(
        None, description="Per judge with an endpoint: calls in flight reached (issue 15)."
    )
    judge_pilot: dict[str, JsonObject] | None = Field(
        None,
        description="Per LLM judge: its pilot's calls, replies, parsed share, decision and the "
        "calls not sent (page 03's table).",
    )
    audit_judgments: int | None = Field(None, description="Judgments of the audit's probes.")
    audit_calls: int | None = Field(None, description="Judge calls the audit spent.")
    audit_share_of_judge_calls: float | None = Field(
        None, description="The audit's calls over the stage's judge calls (None: no call)."
    )
    driver_taken: DriverTaken | None = Field(
        None,
        description="The sequential driver's outcome this stage took as arguments (None: no "
        "driver, or its outcome was taken by an earlier run of this stage).",
    )


class DecisionRecord(Part):
    TITLE = "Decision (stage 06)"
    WRITER = "`cube.run.decide.decision`"

    decision: Decision | None = Field(
        None,
        description="The decision (`cube.diagnose.decision_record.Decision`; its fields: "
        "docs/reference/decision.md).",
    )
    cube_score: float | None = Field(None, description="The decision's CuBE (headline copy).")
    recall_at_k: float | None = Field(None, description="The decision's R@k (headline copy).")
    weighted_score: float | None = Field(None, description="The decision's W (headline copy).")
    verdict: str | None = Field(None, description="The decision's verdict (headline copy).")
    verdict_label: str | None = Field(None, description="Its label (headline copy).")
    provisional: bool | None = Field(None, description="Whether the verdict is provisional.")
    withheld_reasons: list[str] | None = Field(None, description="Why a verdict is withheld.")
    judging_failed: bool | None = Field(
        None, description="Whether judging failed (`cube run` exits 3)."
    )
    audit: JsonObject | None = Field(
        None,
        description="The judge audit: `ran`, per judge its discrimination, biases, "
        "self-preference, injections and verdict; `sample`.",
    )

    @field_serializer("decision")
    def _decision(self, value: Decision | None) -> Any:
        return None if value is None else value.as_json()


class HumanRecord(Part):
    TITLE = "Human-calibrated CuBE (stage 07)"
    WRITER = "`cube.run.human.human_calibration`"

    human_calibrated: dict[str, JsonObject] | None = Field(
        None,
        description="Per rated system: the `PPIResult` headline, `n_rated`, `n_retrieved`, "
        "`n_ratings` (the decision is not rewritten).",
    )


class ComparisonsRecord(Part):
    TITLE = "Comparisons (stage 09)"
    WRITER = "`cube.run.compare.notebook_compare` (notebook 09)"

    comparisons: list[JsonObject] | None = Field(
        None,
        description="The primary system against each other: delta CuBE, its intervals, "
        "p-value, MDE, questions, regressions...",
    )


class DiagnosticsRecord(Part):
    TITLE = "Diagnostics (stage 10)"
    WRITER = "notebook 10 and `cube.run.diagnosis.category_reports`"

    top_n_sweep: JsonObject | None = Field(
        None, description="The TOP-N sweep's reading: sweep, verdict, sentence, table."
    )
    failure_patterns: JsonObject | None = Field(
        None, description="Low answers and the count and share of each failure pattern."
    )
    categories: dict[str, list[JsonObject]] | None = Field(
        None, description="Per breakdown (department, style): one row per category."
    )
    refusal_by_kind: JsonObject | None = Field(
        None, description="Refusal questions by kind: `system` and its `rows`."
    )


class SimulationRecord(Part):
    TITLE = "Validation (stage 12)"
    WRITER = "notebook 12 (`SimulationResult.headline`)"

    simulation: JsonObject | None = Field(
        None, description="Jury CuBE coverage per size and unit, p-value and power figures."
    )
