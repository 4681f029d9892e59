"""What the decision is: the typed record that `cube.diagnose.assessment.assess` builds once,
`results.json` `decision` holds (`Decision.as_json`), and the decision page, the report's index
and `cube run`'s last lines read by attribute.

`Decision` is flat in JSON (the keys the readers have always read) and typed by its parts:
`SystemFigures` (one system's score, interval, verdict and jury; `Decision.systems` has one per
system), `UsageFigures` (the run's calls, tokens and cost: every table holding calls, as the
manifest's usage), `DiagnosisText` (the diagnostics in sentences, and the figures they state),
`IntervalWidth` (what the interval's width comes from, and how many questions would narrow it) and
`WeakDimension`. The diagnostics' figures (the R@k curve, failure patterns, refusal, TOP-N sweep,
retrieval beyond R@k, self-preference, design effect) are typed parts of their own
(`cube.diagnose.decision_parts`), written back with the keys their diagnostics wrote. Every field
says what the page shows and in what unit (the docstring under it: its pydantic description).

`DecisionInputs` are the typed inputs `assess` reads beside the evaluation (what used to be its 11
keyword arguments). Every field has a default (empty, None for a figure) so that a `results.json`
of an older run, or a partial decision a test writes, reads back (`Decision.read`; unknown keys are
ignored; a value of the wrong shape is refused naming every field at fault); `assess` sets every
field. The human-calibrated CuBE is not part of the decision: notebook 07 writes it under its own
key (`results.json` `human_calibrated`, per system), and the pages put its line beside the
decision (`cube.diagnose.assessment.human_sentence`).
docs/reference/decision.md lists the fields (generated from these models) and the places that read
them. The decision's homes and their roles: `cube.diagnose` (its package docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from cube.diagnose import decision_parts as parts
from cube.diagnose.decision_parts import (
    DesignEffect,
    FailurePatterns,
    RefusalFigures,
    RetrievalCurve,
    RetrievalQuality,
    SelfPreference,
    TopNSweep,
    finite_or_none,
)

if TYPE_CHECKING:
    import pandas as pd

# The decision's fields `results.json` also holds at its top level (`cube.run.execute` forgets them
# with the decision when a stage it reads re-executes).
HEADLINE_FIELDS = (
    "cube_score",
    "recall_at_k",
    "weighted_score",
    "verdict",
    "verdict_label",
    "provisional",
    "withheld_reasons",
    "judging_failed",
)


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)


class SystemFigures(_Record):
    """One system's figures and verdict (`Decision.systems`; the decision's own head)."""

    system: str = ""
    """the system the figures are about (the decision: the first of params.systems)"""
    cube_score: float | None = None
    """the jury's CuBE (None: undefined)"""
    cube_ci: list[float] | None = None
    """its interval at `confidence`, None when not computed"""
    recall_at_k: float | None = None
    """R@k: share of questions whose gold document was retrieved"""
    top_n: int = 0
    """k of R@k: N of this system's retrieved list (each system its own)"""
    weighted_score: float | None = None
    """W: answer quality when the gold document is retrieved"""
    verdict: str = ""
    """excellent | good | fair | poor | withheld | undetermined"""
    verdict_label: str = ""
    """the verdict as said: "good to excellent", "fair (provisional)", ..."""
    verdict_bands: list[str] = []
    """every band the interval touches"""
    provisional: bool = False
    """a verdict given without an interval to check it"""
    provisional_reason: str = ""
    """why it is provisional"""
    retriever_note: str = ""
    """the cause named when nothing was retrieved"""
    withheld_reasons: list[str] = []
    """one per withholding rule that fired (empty: a verdict)"""
    judging_failed: bool = False
    """no judge has usable scores: `cube run` exits 3"""
    n_judges: int = 0
    """jury size"""
    judges_used: list[str] = []
    """the jury"""
    judges_not_validated: list[str] = []
    """jury members no test could validate on this run"""
    judges_excluded: dict[str, str] = {}
    """judge -> why the gate excluded it"""
    judge_evidence: dict[str, str] = {}
    """judge -> what the gate read"""
    n_questions: int = 0
    """questions of known retrieval the figures rest on"""

    _figures_nan = field_validator("cube_score", "recall_at_k", "weighted_score", mode="before")(
        finite_or_none
    )

    @field_validator("cube_ci", mode="before")
    @classmethod
    def _ci(cls, value: Any) -> Any:
        if value is None or any(finite_or_none(float(v)) is None for v in value):
            return None
        return [float(v) for v in value]


class UsageFigures(_Record):
    """The run's calls, tokens and cost, from every table holding calls (the manifest's usage)."""

    cost_total: float | None = None
    """None: a model without a price (`cost_note` names it)"""
    cost_this_run: float | None = None
    """without the calls answered from the cache"""
    tokens_total: int = 0
    """input + output tokens"""
    calls_total: int = 0
    """calls of every role, offline algorithms included"""
    calls_cached: int = 0
    """of them answered from the call cache"""
    cost_note: str = ""
    """why the cost is unknown"""
    currency: str = ""
    """the currency of the prices in params"""


class DiagnosisText(_Record):
    """The diagnostics the decision states (`cube.run.diagnosis.for_decision`), absent ones None."""

    retrieval_sentence: str = ""
    """the R@k curve in a sentence"""
    retrieval: RetrievalCurve | None = None
    """the R@k curve of the decision's system"""
    failure_patterns: FailurePatterns | None = None
    """the failure patterns of its low rag answers, the top three listed with examples"""
    patterns_sentence: str = ""
    """the failure patterns in a sentence"""
    refusal: RefusalFigures | None = None
    """its refusal accuracy and false-refusal rate"""
    refusal_sentence: str = ""
    """the refusals in a sentence"""
    top_n_sweep: TopNSweep | None = None
    """the TOP-N sweep and its reading"""
    sweep_sentence: str = ""
    """the TOP-N hypothesis in a sentence"""


class IntervalWidth(_Record):
    """What the jury CuBE interval's width comes from: the bootstrap resamples questions (or their
    families), so its half-width is about t x `se_questions` (shrinking as 1/sqrt(n)); the
    judges' spread puts a standard error of `se_judges` (SD across judges / sqrt(judges)) on the
    jury mean. `cause` is the larger ("questions" or "judges"); `questions_needed` the questions
    for a width of `target` points (`cube.method.compare.questions_needed`, a normal
    approximation)."""

    width: float
    """hi - lo of the jury CuBE interval, points"""
    n_questions: int
    """questions it rests on"""
    target: float
    """the width asked for (analysis.max_interval_width)"""
    questions_needed: int | None
    """questions for an interval `target` points wide"""
    se_questions: float
    """standard error from the questions: width / (2 z)"""
    se_judges: float | None
    """standard error from the judges: SD across judges / sqrt(judges)"""
    n_judges: int
    """jury size"""
    cause: str
    """questions | judges"""

    _width_nan = field_validator("se_judges", mode="before")(finite_or_none)


class WeakDimension(_Record):
    """A dimension below `analysis.weak_dimension_below` (or the lowest): jury mean and SD."""

    dimension: str = ""
    """the dimension's name"""
    score: float | None = None
    """normalised jury mean"""
    sd: float | None = None
    """spread across judges"""

    _weak_nan = field_validator("score", "sd", mode="before")(finite_or_none)


class Decision(SystemFigures, UsageFigures, DiagnosisText):
    """The decision of a run about its first system (see the module docstring)."""

    confidence: float | None = None
    """the intervals' level (analysis.confidence)"""
    sentence: str = ""
    """the one sentence for decision makers"""
    weakest: list[WeakDimension] = []
    """the weak dimensions, lowest first (the page's table)"""
    suggestions: list[str] = []
    """one ordered list, no two contradicting"""
    retrieval_quality: RetrievalQuality = RetrievalQuality()
    """R@1, near-duplicate confusion, duplicate texts (the page's "Retrieval:" line)"""
    weighted_label: str = ""
    """the W card's label"""
    judges: list[str] = []
    """every judge of the run, in the jury or not"""
    systems: list[SystemFigures] = []
    """every system, the primary first"""
    synthetic_data: str = ""
    """caveats: synthetic knowledge base, offline judges, bound answerer"""
    method_note: str = ""
    """CuBE in one sentence"""
    width: IntervalWidth | None = None
    """None: no interval"""
    self_preference: dict[str, SelfPreference] = {}
    """judge -> its self-preference (audit)"""
    injection: dict[str, bool | None] = {}
    """judge -> obeys injections (None: no verdict)"""
    design: DesignEffect = DesignEffect()
    """families' design effect of retrieval and the rag score (issue 30)"""

    @classmethod
    def read(
        cls, value: Decision | dict[str, Any], source: str = "results.json decision"
    ) -> Decision:
        """The record itself, or one read from its `results.json` form (an older one reads: every
        field has a default, unknown keys are ignored). A form that does not read is refused with
        every field at fault named (`source` says where it came from)."""
        if isinstance(value, Decision):
            return value
        try:
            return cls.model_validate(value)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'the record'}: {e['msg']}"
                for e in err.errors()
            )
            raise ValueError(
                f"{source} is not a decision record ({problems}); run stage 06 again "
                "(`cube run`) to write it"
            ) from None

    def as_json(self) -> dict[str, Any]:
        """The record as `results.json` `decision` (NaN as null)."""
        return finite_or_none(self.model_dump(mode="json"))


@dataclass
class DecisionInputs:
    """What `assess` reads beside the evaluation: the run's call accounting (`usage`, a
    `cube.llm.usage_summary` of every table holding calls), caveats, the judgments' failure
    shares, the retrieval beyond R@k (`cube.run.decide.retrieval_quality`), the diagnostics
    (`cube.run.diagnosis.for_decision`) and the audit's self-preference per judge."""

    usage: pd.DataFrame | None = None
    synthetic: bool = False
    offline_judges: list[str] = field(default_factory=list)
    call_failure_share: float = 0.0
    parse_failure_share: float = 0.0
    skipped_share: float = 0.0
    bound_note: str = ""
    retrieval: dict[str, Any] = field(default_factory=dict)
    diagnosis: dict[str, Any] = field(default_factory=dict)
    self_preference: dict[str, dict[str, Any]] = field(default_factory=dict)
    injection: dict[str, bool | None] = field(default_factory=dict)  # judge -> obeys injections
    # system -> why its retrieval was not measured (`cube.systems.retrieved.unmeasured_reasons`)
    unmeasured: dict[str, list[str]] = field(default_factory=dict)


PARTS = (
    Decision,
    SystemFigures,
    UsageFigures,
    DiagnosisText,
    IntervalWidth,
    WeakDimension,
    *parts.PARTS,
)


def field_table() -> list[tuple[str, str, str, str]]:
    """(part, field, type, description) of every field of the parts of `Decision`, each field under
    the part that declares it, by its `results.json` key (the sweep table's `R@N`), the description
    from the docstring under it: the reference page's table (docs/reference/decision.md is
    generated from it: `python -m cube.diagnose.decision_record`)."""
    rows = []
    for part in PARTS:
        for name, kind in part.__annotations__.items():
            info = part.model_fields.get(name)
            if info is not None:
                rows.append((part.__name__, info.alias or name, kind, info.description or ""))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "&#124;")


def reference_markdown() -> str:
    """The fields table of docs/reference/decision.md."""
    lines = ["| Part | Field | Type | Meaning |", "| --- | --- | --- | --- |"]
    for part, name, kind, note in field_table():
        lines.append(f"| `{part}` | `{name}` | `{_cell(kind)}` | {_cell(note)} |")
    return "\n".join(lines) + "\n"


def write_reference_page(path: str) -> None:
    """Rewrite the fields table between the page's `<!-- fields:start -->` and `fields:end` marks
    (`make reference`), keeping the prose around it."""
    from pathlib import Path

    page = Path(path).read_text(encoding="utf-8")
    head, rest = page.split("<!-- fields:start -->\n", 1)
    tail = rest.split("<!-- fields:end -->", 1)[1]
    text = f"{head}<!-- fields:start -->\n{reference_markdown()}<!-- fields:end -->{tail}"
    Path(path).write_text(text, encoding="utf-8")


if __name__ == "__main__":  # `python -m cube.diagnose.decision_record [PAGE]`: print or rewrite
    import sys

    if len(sys.argv) > 1:
        write_reference_page(sys.argv[1])
    else:
        print(reference_markdown(), end="")
