"""The sections of a params file, one pydantic model each (`corpus`, `questions`, `systems[]`,
`dimensions[]`, `judges[]`, `analysis`, `human`, `lexical`, `diagnostics`), with their defaults
and checks. They forbid unknown keys. The whole file, its loading and its errors are
`cube.config.params`.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from cube.config.dimension_files import paper_dimensions
from cube.config.http_system import HttpSystem
from cube.config.model_spec import (
    ModelRef,
    Name,
    StrictModel,
    redact_url,
    url_credential_problem,
)

# The paper's four dimensions, in order: the dimension files with a `paper:` position
# (cube/judges/dimensions/*.yaml, read by cube.config.dimension_files).
PAPER_DIMENSIONS = paper_dimensions()


# --------------------------------------------------------------------------- data side
class CorpusParams(StrictModel):
    source: Literal["demo", "file"] = "demo"
    n_items: int = Field(300, ge=1, le=100_000, description="Demo corpus size (the paper: 6,111).")
    family_share: float = Field(
        0.33, ge=0, le=1, description="Share of demo items in near-duplicate families."
    )
    seed: int = Field(0, description="Seed of the demo corpus and of `sample`.")
    path: str | None = Field(
        None,
        description="Your knowledge base: a CSV/JSONL/Parquet/Excel file or a folder of TXT files.",
    )
    format: Literal["auto", "csv", "jsonl", "parquet", "excel", "txt"] = "auto"
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="Map from field keys to your column names. Keys: doc_id, the 18 fields "
        "(region, item_name, fee_standard, application_materials, ...), family_id, variant, "
        "parent_region, aliases: see the field table of the params reference "
        "(docs/reference/params.md).",
    )
    group_by: list[str] = Field(
        default_factory=list,
        description="Long format (one row per material): your columns that identify one item, e.g. "
        "[区划名称, 业务办理项名称, 情形]; one document per group.",
    )
    empty_values: list[str] = Field(
        default_factory=lambda: ["无", "无情形", "暂无", "/", "-", "—", "N/A"],
        description="Placeholder cell values read as missing (an empty cell always is).",
    )
    extra_columns: Literal["render", "drop"] = Field(
        "render",
        description="Columns no key maps: rendered under their own label, or dropped (both "
        "reported).",
    )
    sheet: str | int | None = None
    encoding: str = "utf-8"
    sample: int | None = Field(
        None,
        ge=1,
        description="Use a deterministic sample of N items, stratified by `sample_by` (seeded by "
        "`seed`).",
    )
    sample_by: Literal["region", "department"] = "region"
    limit: int | None = Field(
        None, ge=1, description="Use only the first N items (in file order; see `sample`)."
    )

    @model_validator(mode="after")
    def _no_secrets(self) -> CorpusParams:
        """A key pasted into `columns` is refused (`cube.config.secret_scan`)."""
        from cube.config.secret_scan import secrets_problem

        if why := secrets_problem({"corpus.columns": self.columns}):
            raise ValueError(why)
        return self

    @model_validator(mode="after")
    def _file_needs_path(self) -> CorpusParams:
        if self.source == "file" and not self.path:
            raise ValueError("corpus.source 'file' needs corpus.path")
        if self.sample is not None and self.limit is not None:
            raise ValueError(
                "set corpus.sample (a stratified sample) or corpus.limit (the first N), not both"
            )
        return self


class QuestionParams(StrictModel):
    generator: Literal["template", "llm", "file", "imported"] = Field(
        "template",
        description="template: offline templates; llm: a model writes them; file: your question "
        "file (`path`; columns: docs/reference/question-files.md); "
        "imported: the questions of an imported system's file (a ragas or DeepEval dataset), "
        "each with the gold document its reference contexts come from (`system`).",
    )
    model: ModelRef | None = Field(None, description="Question-writing model (generator: llm).")
    path: str | None = Field(None, description="An existing question set (generator: file).")
    encoding: str = Field(
        "utf-8", description="Text encoding of the question file (generator: file; CSV, JSONL)."
    )
    system: str | None = Field(
        None,
        description="generator: imported: the `kind: imported` system whose file holds the "
        "questions; may be left out when there is one.",
    )
    per_doc: int = Field(1, ge=1)
    limit: int | None = Field(
        None, ge=1, description="Use at most N questions (sampled deterministically)."
    )
    seed: int = 0
    styles: dict[str, float] = Field(
        default_factory=lambda: {"named": 0.4, "colloquial": 0.45, "ambiguous": 0.15},
        description="Share of template questions per style: named, colloquial, ambiguous.",
    )
    screen: bool = Field(
        True,
        description="Screen LLM-written questions (instruction echoes, URLs, non-questions, "
        "near-duplicates, questions naming no service: cube/kb/screen.py); the ones failing it are "
        "left out and counted on page 02.",
    )
    min_usable_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Stop the run (one line naming the screen's reasons) when fewer than this "
        "share of the LLM-written questions are usable after the screen; 0: never stop.",
    )

    @field_validator("styles")
    @classmethod
    def _styles(cls, v: dict[str, float]) -> dict[str, float]:
        known = ("named", "colloquial", "ambiguous")
        unknown = sorted(set(v) - set(known))
        if unknown:
            raise ValueError(f"unknown style(s) {unknown}; expected keys among {list(known)}")
        if any(not math.isfinite(x) or x < 0 for x in v.values()) or sum(v.values()) <= 0:
            raise ValueError(f"style shares must be finite, >= 0 and sum to > 0, got {v}")
        total = sum(v.values())
        return {s: v.get(s, 0.0) / total for s in known}  # normalised; a missing style gets 0


class BuiltinSystem(StrictModel):
    kind: Literal["builtin"] = "builtin"
    name: Name
    top_n: int = Field(8, ge=1)
    answerer: ModelRef | None = Field(
        None, description="Answering model; default: the top-level `answerer`."
    )
    region: str | None = Field(None, description="Restrict retrieval to one region's items.")
    region_filter: Literal["none", "question"] = Field(
        "none",
        description="question: search only the knowledge base of the region the question names "
        "(longest corpus region value in the question, with enclosing levels); none: search "
        "everything.",
    )
    k1: float = 1.5
    b: float = 0.75
    top_n_sweep: list[int] | None = Field(
        None,
        description="Evaluate this retriever at several TOP-N in one run (e.g. [2, 4, 8, 16]): the "
        "entry becomes one system per N (`top_n` keeps `name`, the others `<name>@top<N>`, or "
        "bm25-top8 -> bm25-top16), sharing one retrieval at the largest N and the bound sets; "
        "notebook 10 and the decision page test the TOP-N hypothesis.",
    )
    sweep_of: str | None = Field(
        None, description="Set by `top_n_sweep`: the sweep this system belongs to."
    )

    @field_validator("top_n_sweep")
    @classmethod
    def _sweep(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (len(v) < 2 or min(v) < 1 or len(set(v)) != len(v)):
            raise ValueError(f"top_n_sweep: give at least two distinct TOP-N values >= 1, got {v}")
        return v


def expand_sweeps(systems: list[Any]) -> list[Any]:
    """Each builtin entry with `top_n_sweep` becomes one system per N: first the entry's own
    `top_n` (keeping its name, so it stays the primary system when listed first), then the
    other N in ascending order named `<name>@top<N>` (or, when the name ends in `top<top_n>`,
    with that number replaced: bm25-top8 -> bm25-top16); all carry `sweep_of: <name>`."""
    out: list[Any] = []
    for s in systems:
        if not isinstance(s, BuiltinSystem) or not s.top_n_sweep:
            out.append(s)
            continue
        base = s.model_copy(update={"top_n_sweep": None, "sweep_of": s.name})
        out.append(base)
        suffix = f"top{s.top_n}"
        stem = (
            s.name[: -len(suffix)]
            if s.name.endswith(suffix) and len(s.name) > len(suffix)
            else f"{s.name}@"
        )
        out += [
            base.model_copy(update={"name": f"{stem}top{n}", "top_n": n})
            for n in sorted(set(s.top_n_sweep) - {s.top_n})
        ]
    return out


class RagflowSystem(StrictModel):
    kind: Literal["ragflow"] = "ragflow"
    name: Name
    base_url: str
    api_key_env: str = "RAGFLOW_API_KEY"
    assistant: str = Field(description="Chat assistant name or id.")
    doc_mapping: Literal["document_name", "document_id"] = "document_name"
    doc_name_pattern: str = Field(
        r"^(?P<doc_id>[^.]+)",
        description="Regex whose `doc_id` group extracts our doc_id from a RAGFlow document name.",
    )
    top_n: int = Field(8, ge=1)
    answerer: ModelRef | None = Field(
        None, description="Model that writes the zero/full bound sets (RAGFlow's own LLM)."
    )
    max_concurrency: int = Field(4, ge=1)

    @model_validator(mode="after")  # not a field validator: its error would echo the URL
    def _no_credentials(self) -> RagflowSystem:
        why = url_credential_problem(self.base_url)
        if why:
            raise ValueError(f"base_url {redact_url(self.base_url)} {why}")
        return self

    def secret_envs(self) -> list[tuple[str, str, str]]:
        """(variable, params key, who needs it): the API key (`cube.llm.preflight.check_keys`)."""
        return [(self.api_key_env, "api_key_env", f"RAGFlow at {redact_url(self.base_url)}")]


# The columns of an imported QA file (cube.systems.imported; docs/reference/imported-files.md).
ImportedColumn = Literal[
    "question_id",
    "question",
    "answer",
    "retrieved_doc_ids",
    "retrieved_passages",
    "answerer",
    "error",
    "reference",
    "doc_id",
    "reference_passages",
]


class ImportedSystem(StrictModel):
    kind: Literal["imported"] = "imported"
    name: Name
    path: str = Field(
        description="CSV, JSONL, JSON (a list of objects) or Parquet file of answers; its "
        "columns: docs/reference/imported-files.md (ragas and DeepEval names are recognised)."
    )
    on_invalid: Literal["error", "drop"] = "error"
    top_n: int = Field(8, ge=1)
    answerer: ModelRef | None = None
    columns: dict[ImportedColumn, str] = Field(
        default_factory=dict,
        description="Our column -> the file's column, for names neither ours nor ragas' nor "
        "DeepEval's, e.g. {question: query, retrieved_passages: chunks}.",
    )


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def split_target(target: str) -> tuple[str, str, bool]:
    """`package.module:function` or `path/to/file.py:function` as (module or file, function name,
    whether it is a file); the function may be `Class.method`."""
    where, _, name = target.strip().rpartition(":")
    return where, name, where.endswith(".py") or "/" in where or "\\" in where


def callable_problem(target: str) -> str | None:
    """Why `target` is no `package.module:function` or `path/to/file.py:function`, or None."""
    where, name, is_file = split_target(target)
    if not where or not _DOTTED.fullmatch(name):
        return (
            "expected `package.module:function` or `path/to/file.py:function` (a colon, then the "
            "function's name)"
        )
    if not is_file and not _DOTTED.fullmatch(where):
        return f"{where!r} is neither a Python module name (package.module) nor a .py file"
    return None


class PythonSystem(StrictModel):
    kind: Literal["python"] = "python"
    name: Name
    callable: str = Field(
        description="Your system as a Python function: `package.module:function` (importable "
        "from the project root) or `path/to/file.py:function`; called with one "
        "`cube.systems.Question`, returns a dict (`answer`, `retrieved_ids` and/or "
        "`retrieved_passages`) or a `cube.systems.SystemAnswer`; sync or async "
        "(docs/how-to/python-system.md)."
    )
    top_n: int = Field(8, ge=1, description="Retrieved documents kept per question (N of R@k).")
    answerer: ModelRef | None = Field(
        None,
        description="The model your function answers with: it writes the zero and full bound "
        "sets. Required unless `bounds` is given.",
    )
    bounds: str | None = Field(
        None,
        description="A function of yours (same forms as `callable`) answering one question with "
        "the documents it is handed (none for the zero set, the gold document for the full set), "
        "with your own prompt and model; replaces `answerer` for the bound sets.",
    )
    version: str = Field(
        "",
        description="Your label for what the source hash cannot see (a model, an index, another "
        "module): changing it calls the function again instead of reusing cached answers.",
    )
    max_concurrency: int = Field(4, ge=1, description="Questions answered at the same time.")

    @model_validator(mode="after")
    def _targets(self) -> PythonSystem:
        problems = [
            f"{key} {value!r}: {why}"
            for key, value in (("callable", self.callable), ("bounds", self.bounds))
            if value is not None and (why := callable_problem(value))
        ]
        if self.bounds is not None and self.answerer is not None:
            problems.append(
                "give `answerer` or `bounds`, not both: each would write the zero and full sets"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self


SystemParams = Annotated[
    BuiltinSystem | RagflowSystem | ImportedSystem | HttpSystem | PythonSystem,
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------- judging
class DimensionParams(StrictModel):
    name: Name
    path: str | None = Field(
        None,
        description="The dimension's YAML file, or a folder holding `<name>.yaml` (schema: "
        "docs/how-to/add-a-dimension.md); `prompt`, `prompt_file`, `description`, `criteria` and "
        "`score_format` given here override the file's.",
    )
    description: str = ""
    prompt: str | None = Field(
        None, description="Inline prompt template (overrides the packaged one)."
    )
    prompt_file: str | None = Field(
        None, description="Prompt template file (overrides the packaged one)."
    )
    criteria: list[str] | None = Field(
        None, description="The five 2-point criteria, for annotation sheets."
    )
    score_format: str | None = Field(
        None,
        description="The judge's reply format with one {score}, e.g. 'Verdict: {score}' (default: "
        "the prompt's first line holding {score}, if any). Tried before the usual forms ([[8]], "
        "[RESULT] 8, ...).",
    )


class JudgeParams(StrictModel):
    name: Name
    model: ModelRef
    samples: int = Field(
        1, ge=1, description="Repeats per judgment, to measure run-to-run variance."
    )
    all_dimensions: bool = Field(
        False, description="Score all dimensions in one call (LLM-Eval style)."
    )
    role: str = Field("", description="Free text shown in reports, e.g. 'the system's own model'.")
    retry_unscored: int = Field(
        0,
        ge=0,
        le=5,
        description="Ask a call whose reply did not parse again, up to N times (fresh sample "
        "index; the cache keeps both replies).",
    )
    pilot: int = Field(
        20,
        ge=0,
        description="An LLM judge's first N calls are its pilot: when fewer than "
        "`pilot_min_parsed` of the dimension scores in the pilot's replies parse, the judge is "
        "stopped, its remaining calls never sent (rows 'skipped', with the reason) and the pilot's "
        "replies shown on page 03; 0: no pilot.",
    )
    pilot_min_parsed: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Share of the dimension scores (score rows) of the pilot's replies (calls that "
        "answered) that must parse: an all-dimensions reply missing one of four scores counts 3 of "
        "4.",
    )
    insist: bool = Field(
        False,
        description="Send every call even when the pilot would stop the judge (the pilot is still "
        "reported).",
    )


class SequentialParams(StrictModel):
    """`analysis.sequential`: answer and judge the questions batch by batch and stop when the jury
    CuBE's confidence sequence is settled (`cube.run.sequential`; the rule's values are checked by
    `cube.method.sequential.rule_problems`, every problem at once, by `cube validate` and the
    run)."""

    batch: int = Field(
        20, description="Questions per look (whole families: a batch may hold a few more)."
    )
    min_questions: int = Field(
        40,
        description="Fewest questions before any stop; raised to what the judge gate and the "
        "audit need to decide (the record says so).",
    )
    stop: str = Field(
        "verdict",
        description="verdict: stop when every system's interval lies inside one verdict band; "
        "width: when it is no wider than analysis.max_interval_width (the terminal and the "
        "report then name every band an interval still spans, 'good or excellent').",
    )
    require_band: bool = Field(
        False,
        description="With stop: width, stop only when the interval is narrow enough AND lies "
        "inside one verdict band (both).",
    )
    order: str = Field(
        "spread",
        description="spread: systematic sampling within each family (a seeded start per family, "
        "its questions in a seeded order), batches of exactly `batch` questions: every question "
        "is judged by a look with the same probability whatever its family's size, and each "
        "family's questions are spread over the run (the 20-family guard is met after about 20 "
        "questions); families: whole families per batch (the order before issue 40).",
    )
    recall: str = Field(
        "all",
        description="all: R@k from every question's retrieval, made before the first batch where "
        "it costs no call (builtin and imported systems); an http, python or RAGFlow system's "
        "retrieval comes only with its answer, so its R@k is from the questions judged. judged: "
        "R@k from the questions judged for every system.",
    )
    boundary: str = Field(
        "spending",
        description="spending: a finite-horizon group-sequential boundary for the question set "
        "(Lan-DeMets alpha-spending, Pocock-type: about +-2.5-2.7 SE on 40..300 by 20 against "
        "+-3.0-3.1); pocock: one constant for the planned looks; anytime: the anytime-valid "
        "confidence sequence (a run that may go on past its question set).",
    )
    alpha: float = Field(0.05, description="Error level of the confidence sequence.")
    seed: int = Field(0, description="Seed of the order in which families are taken.")
    target_questions: int = Field(
        100, description="Sample size at which the sequence's boundary is tightest."
    )
    systems: str = Field(
        "all",
        description="all: stop when every system's interval is settled; primary: when the primary "
        "system's (the first of systems) is (the others' final intervals are still reported, "
        "marked not settled where they are not).",
    )


class AnalysisParams(StrictModel):
    trim_proportion: float = Field(0.1, ge=0, lt=0.5, description="Trimmed-mean cut per tail.")
    subset: Literal["retrieved", "all"] = Field(
        "retrieved",
        description="Questions of the trimmed means: retrieved ones (the paper); 'all' is refused "
        "because CuBE = W x R@k would count retrieval twice.",
    )
    bounds_of_missed: Literal["sample", "all"] = Field(
        "sample",
        description="Zero and full answers (and their judgments) of questions whose gold document "
        "the system missed: sample makes them only for a seeded sample of missed ones when fewer "
        "questions were retrieved than analysis.gate_bounds_questions (no estimator reads them: "
        "given the same jury W, CuBE and their intervals are identical; the judge gate's bounds "
        "test, failure rates and the audit's sample read fewer items and may decide differently "
        "when few were retrieved; a missed question costs a third of its calls); all makes every "
        "one.",
    )
    paired: bool = Field(
        True, description="Per judge and dimension, use only questions scored in all three sets."
    )
    weights: Literal["rank_correlation", "equal", "custom"] = "rank_correlation"
    custom_weights: dict[str, float] | None = None
    top_n: int | None = Field(
        None, ge=1, description="N of rank_score; default: the system's top_n."
    )
    bootstrap: int = Field(
        1000, ge=0, description="Bootstrap resamples for confidence intervals (0: none)."
    )
    confidence: float = Field(0.95, gt=0, lt=1)
    interval: Literal["percentile", "bca"] = Field(
        "bca",
        description="Bootstrap interval of CuBE, W and R@k, and of the human-calibrated CuBE: bca "
        "(bias-corrected and accelerated, the acceleration from a jackknife of at most 200 "
        "question groups) or percentile (the estimator's upward bias, repeated by the resamples, "
        "left it short); the judge-only CuBE's and W's at levels widened by Student's t for the "
        "number of questions (2.16 / 97.84 % at 40 questions, 2.45 / 97.55 % at 300), as a "
        "bootstrap interval falls short of its confidence on a few dozen questions (the "
        "human-calibrated CuBE's and compare's are not widened); coverage measured by `cube "
        "simulate` and benchmarks/simulation_coverage.py.",
    )
    seed: int = 0
    cluster: Literal["family", "question"] = Field(
        "family",
        description="Resampling unit of every interval: family (the questions whose gold documents "
        "share a corpus `family_id` move together; a document outside any family is its own "
        "unit) or question (each question alone: right only when questions are independent).",
    )
    verdict_thresholds: dict[str, float] = Field(
        default_factory=lambda: {"excellent": 80.0, "good": 60.0, "fair": 40.0},
        description="Lower bounds of each verdict on the CuBE score (0-100).",
    )
    weak_dimension_below: float = Field(
        60.0, description="A normalised dimension below this is 'weak'."
    )
    low_recall_below: float = Field(
        0.85, description="R@k below this triggers the retrieval suggestion."
    )
    weights_fallback: Literal["none", "equal"] = Field(
        "none",
        description="Weights when a judge's rank-correlation weights are undefined: none (W is NaN "
        "with the cause) or equal (1/D, flagged).",
    )
    gate_alpha: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Judge gate: level of its one-sided tests (Wilcoxon full > zero; Mann-Whitney "
        "rag retrieved > missed; the audit's signed-rank test).",
    )
    gate_min_separation: float = Field(
        0.0,
        ge=0,
        description="Judge gate: optional floor on the full - zero weighted total, in points of "
        "the 0-10 scale (0: off; the one-sided test decides, not a point threshold).",
    )
    gate_max_failure_rate: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Judge gate: largest share of unscored items (call, parse, blank or absent) "
        "among judged ones.",
    )
    gate_bounds_questions: int = Field(
        30,
        ge=1,
        description="Judge gate: fewest questions its bounds test reads under "
        "bounds_of_missed: sample (every retrieved question, and a seeded sample of missed ones "
        "making up this floor when fewer were retrieved; all when the set is smaller; never below "
        "what the test needs to decide at gate_alpha).",
    )
    gate_band_tolerance: float = Field(
        25.0, ge=0, description="Judge gate: W must lie within [-tol, 100 + tol]."
    )
    bounds_tolerance: float = Field(
        5.0,
        ge=0,
        description="Verdict withheld when the jury CuBE or its interval leaves [0, 100] by more.",
    )
    max_interval_width: float = Field(
        30.0, gt=0, description="Verdict withheld when the jury CuBE interval is wider (points)."
    )
    max_system_failure_rate: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Verdict withheld when a larger share of the system-under-test's calls failed "
        "(retrieval unknown); the count is given.",
    )
    max_unmapped_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Retrieval not measured (R@k undefined, verdict withheld) when a larger share "
        "of a system's retrieved passages matched no document, or of its retrieved ids are not "
        "knowledge-base doc ids; the count and the fix are given.",
    )
    max_undetermined_share: float = Field(
        0.2,
        ge=0,
        le=1,
        description="A question's R@k is undetermined when a retrieved passage that "
        "near-duplicate documents (the gold one among them) hold equally stands before the gold's "
        "rank: such questions are left out of R@k and the analysis (counted, never misses), and "
        "the verdict is withheld when a larger share of the questions is undetermined.",
    )
    sequential: SequentialParams | None = Field(
        None,
        description="Sequential evaluation (`cube run --until-settled`): null runs every question.",
    )

    @model_validator(mode="after")
    def _custom(self) -> AnalysisParams:
        if self.weights == "custom" and not self.custom_weights:
            raise ValueError("analysis.weights 'custom' needs analysis.custom_weights")
        if self.subset == "all":
            raise ValueError(
                "analysis.subset: 'all' is refused for CuBE: the weighted score over all questions "
                "already counts the answers whose gold document was not retrieved, so CuBE = W x "
                "R@k would count retrieval twice; use 'retrieved' (the paper's subset)"
            )
        return self


class AuditParams(StrictModel):
    questions: int = Field(
        40,
        ge=0,
        description="Questions sampled for the judge audit (0: off). Each gets two length-matched "
        "worse probes (two of corrupted facts, the sibling's answer, another question's answer, in "
        "turn), one of an empty and a truncated answer (in turn), one not-worse probe (padded, "
        "authority line, reordered, in turn) and the injected twin of its first worse probe, "
        "judged by every judge under the role 'audit'. Fewer when `max_share` caps them.",
    )
    max_share: float = Field(
        0.15,
        gt=0,
        le=1,
        description="The audit's calls are at most this share of the run's judge calls (role "
        "'judging'): the sample shrinks to fit (`cube plan` counts it so, notebook 11 says so); "
        "with too few probe pairs left the audit gives no verdict (never an exclusion).",
    )
    min_pairs: int = Field(
        10,
        ge=1,
        description="Scored (original, worse probe) pairs a judge needs before the audit may "
        "exclude it; with fewer the gate gives no audit verdict (never an exclusion).",
    )
    seed: int = Field(0, description="Seed of the audit's question sample and probe choices.")


class HumanParams(StrictModel):
    ratings: str | None = Field(
        None, description="Filled annotation sheet(s): a CSV/Excel file or a folder."
    )
    key: str | None = Field(
        None,
        description="Key file mapping the blind sheet's ids to answers; default the run's "
        "annotation/annotation_key.csv, or the *_key.csv inside the `ratings` folder.",
    )
    sample_size: int = Field(
        40,
        ge=1,
        description="(question, system) pairs sampled for the sheet; each appears in its three "
        "answer sets (zero, rag, full), so the sheet has 3 x sample_size rows (per rater); a "
        "missed question has its rag answer alone unless its bounds were made "
        "(analysis.bounds_of_missed).",
    )
    seed: int = 0
    per_rater_judges: bool = Field(
        False, description="One judge per rater instead of one 'human' consensus."
    )
    agreement_sets: list[Literal["rag", "zero", "full", "pooled"]] = Field(
        default_factory=lambda: ["rag"],
        min_length=1,
        description="Answer sets on which agreement (notebook 07) is computed, one row group each; "
        "the first also feeds the heatmap. 'pooled' = all sets together, only when listed: the gap "
        "between sets would otherwise pass for agreement.",
    )


# (lang, lexical.tokenizer) pairs that cannot work, with the reason (see cube.method.lexical)
LEXICAL_INCOMPATIBLE = {
    ("zh", "13a"): "13a splits on spaces and punctuation only, so a Chinese clause is one token "
    "(ROUGE 0 even for near-identical texts); use jieba, zh or char",
}


class LexicalParams(StrictModel):
    tokenizer: Literal["jieba", "zh", "char", "13a"] = Field(
        "jieba",
        description="Word segmentation for BLEU/ROUGE: jieba words, zh (sacrebleu zh / "
        "characters), char, or 13a (English only; refused with lang: zh). Punctuation and symbols "
        "are stripped, Latin is case-folded.",
    )
    reference: Literal["gold_document", "reference_answer"] = "gold_document"
    example_question_id: str | None = None
    correlation_sets: list[Literal["rag", "zero", "full", "pooled"]] = Field(
        default_factory=lambda: ["rag"],
        min_length=1,
        description="Answer sets on which BLEU/ROUGE are correlated with the judges (notebook 08), "
        "one row group each; 'pooled' = all sets together, only when listed (the gap between sets "
        "inflates the correlation).",
    )


class DiagnosticsParams(StrictModel):
    low_score_below: float = Field(
        5.0,
        ge=0,
        le=10,
        description="A rag answer whose jury score (mean over judges and dimensions, 0-10) is "
        "below this is classified into failure patterns.",
    )
    low_rank_from: int = Field(
        4, ge=2, description="Pattern low_rank: the gold document retrieved at this rank or lower."
    )
    judge_disagreement_above: float = Field(
        3.0,
        ge=0,
        le=10,
        description="Pattern judge_disagreement: judges' mean scores of one answer differ by more.",
    )
    field_match_below: float = Field(
        80.0,
        ge=0,
        le=100,
        description="Pattern field_missing: a segment of the asked field's value (split at "
        "、，；。 and line breaks) counts as said when it matches the answer at this rapidfuzz "
        "partial_ratio or above; the field is missing when under 80 % of its segments are said "
        "(yes/no, fee and numeric values are compared by meaning: "
        "cube.diagnose.failures.field_stated).",
    )
    unsupported_share_above: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Pattern unsupported: share of answer clauses not found in the gold document.",
    )
    refusal_questions: int = Field(
        30,
        ge=0,
        description="Questions the knowledge base cannot answer (cube.kb.refusal_questions), "
        "answered by the builtin systems and reported beside CuBE as refusal accuracy (0: none).",
    )
    refusal_generator: Literal["template", "llm"] = Field(
        "template",
        description="Who writes the refusal questions: template (offline: an absent item, another "
        "province, an absent field) or llm (a model plays a citizen asking about services the "
        "knowledge base does not cover; cube.kb.refusal_llm; questions naming a corpus item are "
        "dropped).",
    )
    refusal_model: ModelRef | None = Field(
        None, description="Model writing the refusal questions (refusal_generator: llm)."
    )

    @model_validator(mode="after")
    def _refusal_model(self) -> DiagnosticsParams:
        if self.refusal_generator == "llm" and self.refusal_model is None:
            raise ValueError(
                "diagnostics.refusal_generator 'llm' needs diagnostics.refusal_model (a name under "
                "`models:` or an inline spec)"
            )
        return self


class SimulationParams(StrictModel):
    """The simulation study of notebook 12 and `cube simulate` (`cube.method.simulate`): the run's
    own estimator on replicates of a generative model whose truth is known. The defaults keep
    notebook 12 within seconds in `cube run`; `cube simulate` scales them up from its command
    line."""

    replicates: int = Field(
        8,
        ge=1,
        description="Simulated runs per question-set size (Monte Carlo error "
        "of a 95 % coverage: about sqrt(0.95 x 0.05 / replicates)).",
    )
    questions: list[int] = Field(
        default_factory=lambda: [40], description="Question-set sizes simulated."
    )
    bootstrap: int = Field(
        200,
        ge=10,
        description="Bootstrap resamples per simulated run (the run's own "
        "`analysis.bootstrap` is not used: the study repeats the estimator many times).",
    )
    permutations: int = Field(
        200, ge=10, description="Permutations of compare's p-value per simulated pair."
    )
    power: bool = Field(
        False,
        description="Also simulate pairs whose true difference is the printed MDE "
        "(power at the MDE; `cube simulate` does by default).",
    )
    recall: float = Field(
        0.8041,
        ge=0,
        le=1,
        description="R@k of the simulated system (the paper's: 0.8041; a "
        "value k/n of the simulated sizes would make R@k's closed intervals cover more often).",
    )
    cluster_size: int = Field(
        1,
        ge=1,
        description="Questions sharing one difficulty (a shift that cancels in the bounds; "
        "1: independent questions).",
    )
    family_size: int = Field(
        1,
        ge=1,
        description="Questions per near-duplicate family (1: independent questions); the study "
        "shows question-level and family-level resampling side by side.",
    )
    family_retrieval_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Probability a family member takes its family's retrieval outcome (rank).",
    )
    family_correctness_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Probability a family member takes its family's answer correctness (the rag "
        "answer's share of the gap beyond what retrieval explains; SD `answer_sd`).",
    )
    answer_sd: float = Field(
        0.0,
        ge=0,
        description="SD of the rag answer's correctness around what its retrieval predicts, as a "
        "share of the zero-to-full gap (0: retrieval decides alone).",
    )
    judge_bias: float = Field(
        0.0,
        description="Points the second simulated judge adds to rag answers only "
        "(a bias the zero/full bounds do not remove).",
    )
    seed: int = 0

    @field_validator("questions")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        bad = [n for n in v if n < 10]
        if not v or bad:
            raise ValueError(
                f"simulation.questions: one or more sizes of at least 10 questions, got {v}"
            )
        return v


# A run with fewer questions than this skips the optional stages set to `auto` (`StagesParams`).
SMALL_RUN_QUESTIONS = 50


class StagesParams(StrictModel):
    """The optional stages of `cube run` (issue 31): the paper's published tables (00) and the
    simulation study (12) read nothing of the run's data, so a small or repeated run may skip
    them. `auto` skips them when the run has fewer than `SMALL_RUN_QUESTIONS` (50) questions
    (known from its question set; 00 then runs after the other stages); the report's index says
    which stage was skipped and why, and the skipped stage's earlier page, tables and figures
    are removed."""

    paper_tables: Literal["auto", "on", "off"] = Field(
        "auto",
        description="00_paper_tables: on, off, or auto (skipped under 50 questions).",
    )
    validation: Literal["auto", "on", "off"] = Field(
        "auto",
        description="12_validation: on, off, or auto (skipped under 50 questions).",
    )


class BaselineParams(StrictModel):
    """The baseline a run is compared with after it publishes (issue 42): its primary system
    against the baseline run's primary on their common questions (`cube.run.release`), and a
    release decision by the non-inferiority rule of `cube.method.release_rule`
    (docs/explanation/release-gate.md). Checked when `cube run` starts: the folder must hold a
    completed run."""

    run: str = Field(
        description="The baseline's run folder (a completed run: `outputs/<run>`, with its "
        "data/answers.parquet and data/scores.parquet); relative to the params file's folder. "
        "`cube run --baseline FOLDER` overrides it."
    )
    margin: float = Field(
        5.0,
        ge=0,
        allow_inf_nan=False,
        description="Non-inferiority margin in CuBE points: released when ΔCuBE's lower bound "
        "is above -margin (dimensions on the same scale, R@k in percentage points).",
    )
    min_questions: int = Field(
        20, ge=2, description="Fewer common questions than this: the release is undecided."
    )
