"""The decision's diagnostics as typed parts: what `cube.diagnose.decision_record.Decision` holds
of the R@k curve, the failure patterns, the refusal figures, the TOP-N sweep, the retrieval beyond
R@k, the audit's self-preference per judge and the families' design effect.

Each part is the dict its diagnostic writes (`cube.diagnose.retrieval.for_results`,
`cube.diagnose.failures.summary`, `cube.diagnose.refusal.refusal_report`,
`cube.diagnose.topn_sweep.for_results`, `cube.run.decide.retrieval_quality`,
`cube.run.audit.audit_record`, `cube.method.design.design_summary`) read once into a model, so the
pages read attributes, not keys. `results.json` keeps the diagnostics' keys and values: a part is
written back as that dict (`Part`: the keys its diagnostic wrote, in the order declared here, which
is the order the diagnostics write them; a key it did not write, say the corpus figures of a run
without a corpus, is not written either). NaN reads as None (null in `results.json`: undefined).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator


def finite_or_none(value: Any) -> Any:
    """NaN and infinities as None, in dicts and lists too: `results.json` stays strict JSON, and
    None reads "undefined"."""
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Part(BaseModel):
    """A diagnostic's dict as a model: read by name or by its JSON key (the sweep table's `R@N`),
    written with the keys it was given."""

    model_config = ConfigDict(
        extra="ignore",
        use_attribute_docstrings=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _undefined(cls, value: Any) -> Any:
        return finite_or_none(value) if isinstance(value, dict) else value

    @model_serializer(mode="wrap")
    def _given(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        fields = type(self).model_fields
        given = {fields[name].alias or name for name in self.model_fields_set}
        return {k: v for k, v in out.items() if k in given}


class RetrievalCurve(Part):
    """The R@k curve of the decision's system (`cube.diagnose.retrieval.system_metrics` in its
    `results.json` form: k as text, NaN as null), stated in `retrieval_sentence`."""

    n: int = 0
    """questions of known retrieval the figures rest on"""
    top_n: int = 0
    """N: the length of the system's retrieved list"""
    r_at_k: dict[str, float | None] = {}
    """k -> R@k: share of the questions whose gold document is among the first k (0-1)"""
    p_at_k: dict[str, float | None] = {}
    """k -> P@k: R@k / k (one gold document per question)"""
    ndcg_at_k: dict[str, float | None] = {}
    """k -> nDCG@k of the gold document's rank (0-1)"""
    mrr: float | None = None
    """mean reciprocal rank of the gold document (a miss counts 0)"""
    hit_rate: float | None = None
    """R@N: share of the questions whose gold document was retrieved at all (0-1)"""
    curve: list[float | None] = []
    """R@1 .. R@N, the curve the decision page's sentence reads (0-1 each)"""
    unknown: int = 0
    """questions left out because the system call failed (never counted as misses)"""
    system: str = ""
    """the system the curve is about"""


class PatternRow(Part):
    """One of the top failure patterns (`cube.diagnose.failures.top_patterns`)."""

    pattern: str = ""
    """the pattern's name (`retrieval_miss`, `wrong_near_duplicate`, ...)"""
    count: int = 0
    """low answers whose primary pattern it is"""
    share: float = 0.0
    """its share of the low answers (0-1)"""
    suggestion: str = ""
    """what to change, the pattern's advice"""
    examples: str = ""
    """question ids of examples, comma-separated (the page links each to the judgment browser)"""


class FailurePatterns(Part):
    """The failure patterns of the decision's system's low rag answers
    (`cube.diagnose.failures.summary`), stated in `patterns_sentence`."""

    answers: int = 0
    """rag answers classified"""
    scored: int = 0
    """of them with a jury score"""
    low: int = 0
    """of them scored below `low_score_below`"""
    low_score_below: float = 0.0
    """the low-answer threshold, points of 10 (diagnostics.low_score_below)"""
    patterns: dict[str, int] = {}
    """pattern -> low answers whose primary pattern it is"""
    top: list[PatternRow] = []
    """the three most frequent patterns (unexplained left out), listed on the page with examples"""


class RefusalFigures(Part):
    """The refusal figures of the decision's system (`cube.diagnose.refusal.refusal_report`),
    stated in `refusal_sentence`. Failed and empty answers are in neither rate (counted, and
    `flag` says so)."""

    refusal_accuracy: float | None = None
    """share of the answered unanswerable questions the system declined (0-1; null: none)"""
    n_unanswerable: int = 0
    """answered unanswerable questions"""
    false_refusal_rate: float | None = None
    """share of the answered answerable questions it declined (0-1; null: none)"""
    n_answerable: int = 0
    """answered answerable questions"""
    failed_unanswerable: int = 0
    """unanswerable questions whose answering call failed"""
    empty_unanswerable: int = 0
    """unanswerable questions answered with an empty text"""
    failed_answerable: int = 0
    """answerable questions whose answering call failed"""
    empty_answerable: int = 0
    """answerable questions answered with an empty text"""
    flag: str = ""
    """the caveat when some questions got no answer ('' when none)"""
    refusal_ci: list[float | None] = []
    """Wilson interval of `refusal_accuracy` at analysis.confidence, [low, high]"""
    false_refusal_ci: list[float | None] = []
    """Wilson interval of `false_refusal_rate`, [low, high]"""
    by_kind: dict[str, float] = {}
    """kind of unanswerable question -> share declined (0-1)"""


class SweepRow(Part):
    """One TOP-N of the sweep (`cube.diagnose.topn_sweep.sweep_table`; JSON keys as the table's
    columns)."""

    system: str = ""
    """the sweep's member system at this TOP-N"""
    top_n: int = 0
    """its N"""
    questions: int = 0
    """questions of known retrieval"""
    recall: float | None = Field(None, alias="R@N")
    """R@N (0-1)"""
    recall_lo: float | None = Field(None, alias="R@N_lo")
    """R@N's Wilson interval, low end"""
    recall_hi: float | None = Field(None, alias="R@N_hi")
    """R@N's Wilson interval, high end"""
    weighted: float | None = Field(None, alias="W")
    """W, the jury's weighted score on retrieved questions (points of 100)"""
    weighted_lo: float | None = Field(None, alias="W_lo")
    """W's bootstrap interval, low end"""
    weighted_hi: float | None = Field(None, alias="W_hi")
    """W's bootstrap interval, high end"""
    cube: float | None = Field(None, alias="CuBE")
    """the jury CuBE (points of 100)"""
    cube_lo: float | None = Field(None, alias="CuBE_lo")
    """CuBE's bootstrap interval, low end"""
    cube_hi: float | None = Field(None, alias="CuBE_hi")
    """CuBE's bootstrap interval, high end"""


class TopNSweep(Part):
    """The TOP-N sweep's reading (`cube.diagnose.topn_sweep.hypothesis`) with its table, stated
    in `sweep_sentence`; notebook 10 reads it back (`cube.run.diagnosis.recorded_sweep`)."""

    sweep: str = ""
    """the sweep's name (systems[].sweep_of)"""
    verdict: str = ""
    """holds | does not hold | undetermined"""
    recall_rises: bool | None = None
    """R@N at the largest TOP-N above the smallest's interval (null: undetermined)"""
    answers_kept: bool | None = None
    """W at every larger TOP-N within or above the smallest's interval (null: undetermined)"""
    sentence: str = ""
    """the reading in one sentence"""
    table: list[SweepRow] = []
    """one row per TOP-N, ascending"""


class NearDuplicateConfusion(Part):
    """How often the top-1 document is a sibling of the gold one
    (`cube.diagnose.near_duplicates.near_duplicate_confusion`)."""

    rate: float | None = None
    """`count` / `n` (0-1; null over no question)"""
    count: int = 0
    """questions whose first retrieved document is a sibling of the gold one"""
    n: int = 0
    """questions it is read on"""
    region: int = 0
    """of them, the sibling of another region"""
    variant: int = 0
    """of them, the sibling of another variant"""
    duplicate: int = 0
    """of them, a document with the gold one's text"""


class RetrievalQuality(Part):
    """The decision's system's retrieval beyond R@k (`cube.run.decide.retrieval_quality`), the
    page's "Retrieval:" line; the corpus figures only when the run has a corpus."""

    r_at_1: float | None = None
    """R@1: share of the questions whose gold document is ranked first (0-1)"""
    near_duplicate_confusion: NearDuplicateConfusion | None = None
    """the top-1 document a sibling of the gold one"""
    duplicate_texts: int = 0
    """knowledge-base documents identical to an earlier one (the gold unfindable at rank 1)"""
    documents_merging_services: int = 0
    """documents joining several services (a family_id or an item_name)"""
    documents_named_placeholder: int = 0
    """documents whose item is named by a placeholder (无, /, ...)"""


class SelfPreference(Part):
    """A judge's preference for its own model's answers apart from its leniency
    (`cube.method.audit.self_preference`, as `results.json` `audit` holds it)."""

    self_preference: float | None = None
    """mean residual of its own model's answers, points (null: not measurable)"""
    self_preference_lo: float | None = None
    """its interval over resampled questions, low end"""
    self_preference_hi: float | None = None
    """its interval, high end"""
    self_preference_items: int | float | None = None
    """its own model's answers it scored"""
    self_preference_control_items: int | float | None = None
    """answers of other models the prediction is read on"""
    self_preference_note: str | None = None
    """why it is not measurable"""


class DesignEffect(Part):
    """The families' design effect of retrieval and the rag score (`CubeResult.design`,
    `cube.method.design.design_summary`; issue 30): empty without an evaluation's design."""

    unit: str = ""
    """what the intervals resample: question | family (analysis.cluster)"""
    families_known: bool = False
    """the questions' families were known"""
    questions: int = 0
    """questions"""
    units: int = 0
    """families (a question without one is its own)"""
    mean_unit_size: float | None = None
    """questions per family, mean"""
    largest_unit: int = 0
    """questions of the largest family"""
    icc_retrieval: float | None = None
    """intraclass correlation of retrieval (0/1) within families"""
    deff_retrieval: float | None = None
    """Kish's design effect of retrieval (1: none)"""
    icc_rag_score: float | None = None
    """intraclass correlation of a question's rag score within families"""
    deff_rag_score: float | None = None
    """Kish's design effect of the rag score"""


PARTS = (
    RetrievalCurve,
    FailurePatterns,
    PatternRow,
    RefusalFigures,
    TopNSweep,
    SweepRow,
    RetrievalQuality,
    NearDuplicateConfusion,
    SelfPreference,
    DesignEffect,
)
