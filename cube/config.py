"""Run parameters: the params schema, loading from YAML, and the run-directory layout.

A params file is YAML validated by pydantic models that forbid unknown keys, so a typo
(`trim_proportoin`) is an error naming the key and the file instead of a silently ignored
setting. Loaded params are frozen. API keys are never params: a model names the environment
variable that holds its key (`api_key_env`), and only `cube.llm` reads it, at call time.

This module owns every path of a run (cookiecutter-data-science: one module owns the layout):

    outputs/<run>/params.yaml   the resolved params actually used (no secrets)
    outputs/<run>/data/         corpus, questions, answers, scores (parquet, long format)
    outputs/<run>/tables/       every table shown, as CSV
    outputs/<run>/figures/      every figure shown, as PNG
    outputs/<run>/notebooks/    executed notebooks
    outputs/<run>/report/       HTML pages and index.html (last_run.html: how the last attempt ended)
    outputs/<run>/.staging/     where `cube run` executes stages before publishing them (cube.runstate)
    outputs/<run>/.lock         held by the `cube run` working on the folder
    outputs/cache.sqlite        LLM call cache shared by all runs
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

PAPER_DIMENSIONS = ("relevance", "specificity", "completeness", "quality")
SETS = ("zero", "rag", "full")


class ParamsError(ValueError):
    """A params file that cannot be used: the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- models (LLM access)
_SECRET_QUERY = re.compile(r"(key|token|secret|password|passwd|auth|sig|signature|credential)", re.I)


def url_credential_problem(url: str) -> str | None:
    """Why `url` must not be a params value (it carries credentials), or None.

    User-info (`http://user:pass@host/v1`) would be written to params.yaml, the manifest and
    the cache, and httpx turns it into Basic auth that replaces the API key; a query token
    (`?api_key=...`) would be written likewise. The message never repeats the secret.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a valid URL"
    if parts.username is not None or parts.password is not None:
        return ("contains credentials (user:password@host); remove them and put the key in an environment "
                "variable named by api_key_env (or a header's value in one named by header_env)")
    bad = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if _SECRET_QUERY.search(k)})
    if bad:
        return (f"carries a credential in its query ({', '.join(bad)}=...); remove it and put the key in an "
                "environment variable named by api_key_env (or header_env)")
    return None


def redact_url(url: str) -> str:
    """`url` without user-info, query and fragment: safe to print, log and store."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, host, parts.path, "", "")) if parts.scheme else url.split("?")[0].split("@")[-1]


LOCAL_MAX_CONCURRENCY = 64  # default max_concurrency when every base URL is local (a vLLM / Ollama next door)
REMOTE_MAX_CONCURRENCY = 16  # elsewhere (a hosted API's rate limits)


def local_url(url: str) -> bool:
    """True when `url`'s host is local: `localhost` (or `*.localhost`), a loopback, private or
    link-local address, or a one-word host name (a Docker / Kubernetes service, e.g. `vllm`)."""
    import ipaddress

    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost") or (host and "." not in host and ":" not in host):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


class ModelSpec(_Strict):
    """One model: an OpenAI-compatible endpoint, or an offline deterministic algorithm.

    `provider: openai` covers OpenAI, DeepSeek, vLLM, Ollama and any server speaking
    `/v1/chat/completions`. `provider: offline` names a built-in algorithm (`extractive`
    answerer, `rubric` judge); they are not LLMs and say so in every table they fill.
    """

    provider: Literal["openai", "offline"] = "openai"
    model: str = Field(description="Model name sent to the endpoint, or the offline algorithm's name.")
    base_url: str | None = Field(None, description="Endpoint base URL, e.g. https://api.openai.com/v1.")
    base_urls: list[str] | None = Field(
        None, description="Several replicas of one model; requests are spread across them."
    )
    api_key_env: str | None = Field(
        None, description="NAME of the environment variable holding the API key (never the key)."
    )
    header_env: dict[str, str] = Field(
        default_factory=dict, description="Extra HTTP headers whose values are secrets: header name -> NAME of the "
        "environment variable holding the value (e.g. {api-key: AZURE_KEY}).",
    )
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = 512
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="Request field for max_tokens: OpenAI's o-series models want max_completion_tokens."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra JSON fields sent with every request (e.g. vLLM chat_template_kwargs)."
    )
    timeout_s: float = 60.0
    max_concurrency: int | None = Field(
        None, ge=1, description=f"Most calls in flight: the adaptive limit starts at 4 (or min_concurrency if "
        f"larger, at most this) and doubles per window of answered calls up to this. Default: "
        f"{LOCAL_MAX_CONCURRENCY} when every base URL is local (localhost, a loopback or private address, or a "
        f"one-word host name such as a Docker service), else {REMOTE_MAX_CONCURRENCY}; a value given always wins.")
    min_concurrency: int = Field(
        1, ge=1, description="Fewest calls in flight the adaptive limit goes down to: it is cut to 70 % on HTTP 429 "
        "or a timeout (once for the calls in flight at the cut) and grows back by one per window of answered calls "
        "(cube/llm/concurrency.py).")
    max_attempts: int = Field(5, ge=1, description="Attempts per call, retries included.")
    backoff_base_s: float = Field(0.5, gt=0, description="First retry delay; doubles each attempt, with jitter.")
    backoff_max_s: float = Field(30.0, gt=0)
    breaker_threshold: int = Field(
        5, ge=0, description="Stop sending to an endpoint after this many calls in a row used up all their "
        "attempts on connection errors, timeouts or unusable answers (401/403/404 stop it at once); one trial "
        "call after a 30 s cool-down resumes it; 0: never.",
    )
    price_input_per_m: float | None = Field(None, ge=0, description="Price per million input tokens.")
    price_output_per_m: float | None = Field(None, ge=0, description="Price per million output tokens.")
    batch_price_input_per_m: float | None = Field(
        None, ge=0, description="Price per million input tokens of replies imported by `cube batch import` "
        "(batch APIs are often cheaper; default: price_input_per_m).")
    batch_price_output_per_m: float | None = Field(
        None, ge=0, description="Price per million output tokens of batch replies (default: price_output_per_m).")
    currency: str = "USD"
    options: dict[str, Any] = Field(default_factory=dict, description="Options of an offline algorithm.")

    # Model validators, not field validators: a field validator's error would echo the value,
    # which may be a key pasted where its variable's name belongs (`_format_validation_error`
    # never shows the input of these fields either).
    @model_validator(mode="after")
    def _env_names(self) -> ModelSpec:
        problems = []
        if self.api_key_env is not None and (why := env_name_problem(self.api_key_env)):
            problems.append(f"api_key_env {why}")
        bad = [h for h, v in self.header_env.items() if env_name_problem(v)]
        if bad:
            problems.append(f"header_env[{', '.join(bad)}] must be the NAME of an environment variable, not a value "
                            "(the value is not repeated here)")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="before")
    @classmethod
    def _default_max_concurrency(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("max_concurrency") is None:
            urls = data.get("base_urls") or [data.get("base_url")]
            local = bool(urls) and all(isinstance(u, str) and local_url(u) for u in urls)
            data = {**data, "max_concurrency": LOCAL_MAX_CONCURRENCY if local else REMOTE_MAX_CONCURRENCY}
        return data

    @model_validator(mode="after")
    def _endpoint(self) -> ModelSpec:
        if self.provider == "openai" and not (self.base_url or self.base_urls):
            raise ValueError("an openai-compatible model needs base_url (or base_urls)")
        urls = [("base_url", self.base_url)] + [(f"base_urls[{i}]", u) for i, u in enumerate(self.base_urls or [])]
        problems = [f"{where} {redact_url(u)} {why}" for where, u in urls if u and (why := url_credential_problem(u))]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def endpoints(self) -> list[str]:
        return list(self.base_urls or [self.base_url or ""])


_KEY_PREFIX = re.compile(r"(sk|pk|rk|hf|ghp|gho|ghs|github_pat|glpat|xox[abpr]|AIza|AKIA|nvapi|gsk|r8)[-_]?[A-Za-z0-9]",
                         re.IGNORECASE)
SECRET_FIELDS = ("api_key_env", "header_env")  # their input is never echoed in an error


def env_name_problem(name: str) -> str | None:
    """Why `name` is no environment variable name, or looks like a secret itself; None if fine.
    The message never repeats `name` (it may be a key pasted in the wrong place)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key (the value is not repeated here)"
    mixed = any(c.islower() for c in name) and any(c.isupper() for c in name) and any(c.isdigit() for c in name)
    keyish = _KEY_PREFIX.match(name) and len(name) >= 20 and any(c.isdigit() for c in name) and name != name.upper()
    if keyish or (len(name) >= 24 and mixed):
        return ("looks like a key, not the NAME of an environment variable (the value is not repeated here): "
                "put the key in a variable, e.g. export OPENAI_API_KEY=..., and give its name (OPENAI_API_KEY)")
    return None


ModelRef = str | ModelSpec  # a name from the `models:` section, or an inline spec


# --------------------------------------------------------------------------- data side
class CorpusParams(_Strict):
    source: Literal["demo", "file"] = "demo"
    n_items: int = Field(300, ge=1, le=100_000, description="Demo corpus size (the paper: 6,111).")
    family_share: float = Field(0.33, ge=0, le=1, description="Share of demo items in near-duplicate families.")
    seed: int = Field(0, description="Seed of the demo corpus and of `sample`.")
    path: str | None = Field(None, description="Your knowledge base: a CSV/JSONL/Parquet/Excel file or a folder of TXT files.")
    format: Literal["auto", "csv", "jsonl", "parquet", "excel", "txt"] = "auto"
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="Map from field keys to your column names. Keys: doc_id, the 18 fields (region, item_name, "
        "fee_standard, application_materials, ...), family_id, variant, parent_region, aliases: see the field "
        "table in README.md ('Your knowledge base').",
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
        "render", description="Columns no key maps: rendered under their own label, or dropped (both reported)."
    )
    sheet: str | int | None = None
    encoding: str = "utf-8"
    sample: int | None = Field(
        None, ge=1, description="Use a deterministic sample of N items, stratified by `sample_by` (seeded by `seed`)."
    )
    sample_by: Literal["region", "department"] = "region"
    limit: int | None = Field(None, ge=1, description="Use only the first N items (in file order; see `sample`).")

    @model_validator(mode="after")
    def _file_needs_path(self) -> CorpusParams:
        if self.source == "file" and not self.path:
            raise ValueError("corpus.source 'file' needs corpus.path")
        if self.sample is not None and self.limit is not None:
            raise ValueError("set corpus.sample (a stratified sample) or corpus.limit (the first N), not both")
        return self


class QuestionParams(_Strict):
    generator: Literal["template", "llm", "file"] = "template"
    model: ModelRef | None = Field(None, description="Question-writing model (generator: llm).")
    path: str | None = Field(None, description="An existing question set (generator: file).")
    per_doc: int = Field(1, ge=1)
    limit: int | None = Field(None, ge=1, description="Use at most N questions (sampled deterministically).")
    seed: int = 0
    styles: dict[str, float] = Field(
        default_factory=lambda: {"named": 0.4, "colloquial": 0.45, "ambiguous": 0.15},
        description="Share of template questions per style: named, colloquial, ambiguous.",
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


class BuiltinSystem(_Strict):
    kind: Literal["builtin"] = "builtin"
    name: str
    top_n: int = Field(8, ge=1)
    answerer: ModelRef | None = Field(None, description="Answering model; default: the top-level `answerer`.")
    region: str | None = Field(None, description="Restrict retrieval to one region's items.")
    region_filter: Literal["none", "question"] = Field(
        "none", description="question: search only the knowledge base of the region the question names "
        "(longest corpus region value in the question, with enclosing levels); none: search everything."
    )
    k1: float = 1.5
    b: float = 0.75
    top_n_sweep: list[int] | None = Field(
        None, description="Evaluate this retriever at several TOP-N in one run (e.g. [2, 4, 8, 16]): the entry "
        "becomes one system per N (`top_n` keeps `name`, the others `<name>@top<N>`, or bm25-top8 -> bm25-top16), sharing one retrieval at the "
        "largest N and the bound sets; notebook 10 and the decision page test the TOP-N hypothesis."
    )
    sweep_of: str | None = Field(None, description="Set by `top_n_sweep`: the sweep this system belongs to.")

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
        stem = s.name[:-len(suffix)] if s.name.endswith(suffix) and len(s.name) > len(suffix) else f"{s.name}@"
        out += [base.model_copy(update={"name": f"{stem}top{n}", "top_n": n})
                for n in sorted(set(s.top_n_sweep) - {s.top_n})]
    return out


class RagflowSystem(_Strict):
    kind: Literal["ragflow"] = "ragflow"
    name: str
    base_url: str
    api_key_env: str = "RAGFLOW_API_KEY"
    assistant: str = Field(description="Chat assistant name or id.")
    doc_mapping: Literal["document_name", "document_id"] = "document_name"
    doc_name_pattern: str = Field(
        r"^(?P<doc_id>[^.]+)", description="Regex whose `doc_id` group extracts our doc_id from a RAGFlow document name."
    )
    top_n: int = Field(8, ge=1)
    answerer: ModelRef | None = Field(None, description="Model that writes the zero/full bound sets (RAGFlow's own LLM).")
    max_concurrency: int = Field(4, ge=1)

    @model_validator(mode="after")  # not a field validator: its error would echo the URL
    def _no_credentials(self) -> RagflowSystem:
        why = url_credential_problem(self.base_url)
        if why:
            raise ValueError(f"base_url {redact_url(self.base_url)} {why}")
        return self


class ImportedSystem(_Strict):
    kind: Literal["imported"] = "imported"
    name: str
    path: str
    on_invalid: Literal["error", "drop"] = "error"
    top_n: int = Field(8, ge=1)
    answerer: ModelRef | None = None


SystemParams = Annotated[BuiltinSystem | RagflowSystem | ImportedSystem, Field(discriminator="kind")]


# --------------------------------------------------------------------------- judging
class DimensionParams(_Strict):
    name: str
    description: str = ""
    prompt: str | None = Field(None, description="Inline prompt template (overrides the packaged one).")
    prompt_file: str | None = Field(None, description="Prompt template file (overrides the packaged one).")
    criteria: list[str] | None = Field(None, description="The five 2-point criteria, for annotation sheets.")
    score_format: str | None = Field(
        None, description="The judge's reply format with one {score}, e.g. 'Verdict: {score}' (default: the "
        "prompt's first line holding {score}, if any). Tried before the usual forms ([[8]], [RESULT] 8, ...)."
    )


class JudgeParams(_Strict):
    name: str
    model: ModelRef
    samples: int = Field(1, ge=1, description="Repeats per judgment, to measure run-to-run variance.")
    all_dimensions: bool = Field(False, description="Score all dimensions in one call (LLM-Eval style).")
    role: str = Field("", description="Free text shown in reports, e.g. 'the system's own model'.")
    retry_unscored: int = Field(
        0, ge=0, le=5, description="Ask a call whose reply did not parse again, up to N times (fresh sample index; "
        "the cache keeps both replies).",
    )


class AnalysisParams(_Strict):
    trim_proportion: float = Field(0.1, ge=0, lt=0.5, description="Trimmed-mean cut per tail.")
    subset: Literal["retrieved", "all"] = Field(
        "retrieved", description="Questions of the trimmed means: retrieved ones (the paper); 'all' is refused "
        "because CuBE = W x R@k would count retrieval twice."
    )
    paired: bool = Field(
        True, description="Per judge and dimension, use only questions scored in all three sets."
    )
    weights: Literal["rank_correlation", "equal", "custom"] = "rank_correlation"
    custom_weights: dict[str, float] | None = None
    top_n: int | None = Field(None, ge=1, description="N of rank_score; default: the system's top_n.")
    bootstrap: int = Field(1000, ge=0, description="Bootstrap resamples for confidence intervals (0: none).")
    confidence: float = Field(0.95, gt=0, lt=1)
    seed: int = 0
    verdict_thresholds: dict[str, float] = Field(
        default_factory=lambda: {"excellent": 80.0, "good": 60.0, "fair": 40.0},
        description="Lower bounds of each verdict on the CuBE score (0-100).",
    )
    weak_dimension_below: float = Field(60.0, description="A normalised dimension below this is 'weak'.")
    low_recall_below: float = Field(0.85, description="R@k below this triggers the retrieval suggestion.")
    weights_fallback: Literal["none", "equal"] = Field(
        "none", description="Weights when a judge's rank-correlation weights are undefined: none (W is NaN "
        "with the cause) or equal (1/D, flagged).",
    )
    gate_alpha: float = Field(
        0.05, gt=0, lt=1,
        description="Judge gate: level of its one-sided tests (Wilcoxon full > zero; Pearson with rank_score).",
    )
    gate_min_separation: float = Field(
        0.5, ge=0, description="Judge gate: minimum full - zero weighted total, in points of the 0-10 scale."
    )
    gate_max_failure_rate: float = Field(
        0.2, ge=0, le=1, description="Judge gate: largest share of call + parse failures among judged rows."
    )
    gate_band_tolerance: float = Field(
        25.0, ge=0, description="Judge gate: W must lie within [-tol, 100 + tol]."
    )
    bounds_tolerance: float = Field(
        5.0, ge=0, description="Verdict withheld when the jury CuBE or its interval leaves [0, 100] by more."
    )
    max_interval_width: float = Field(
        30.0, gt=0, description="Verdict withheld when the jury CuBE interval is wider (points)."
    )

    @model_validator(mode="after")
    def _custom(self) -> AnalysisParams:
        if self.weights == "custom" and not self.custom_weights:
            raise ValueError("analysis.weights 'custom' needs analysis.custom_weights")
        if self.subset == "all":
            raise ValueError(
                "analysis.subset: 'all' is refused for CuBE: the weighted score over all questions already "
                "counts the answers whose gold document was not retrieved, so CuBE = W x R@k would count "
                "retrieval twice; use 'retrieved' (the paper's subset)")
        return self


class HumanParams(_Strict):
    ratings: str | None = Field(None, description="Filled annotation sheet(s): a CSV/Excel file or a folder.")
    key: str | None = Field(
        None,
        description="Key file mapping the blind sheet's ids to answers; default the run's "
        "annotation/annotation_key.csv, or the *_key.csv inside the `ratings` folder.",
    )
    sample_size: int = Field(
        40,
        ge=1,
        description="(question, system) pairs sampled for the sheet; each appears in its three answer sets "
        "(zero, rag, full), so the sheet has 3 x sample_size rows (per rater).",
    )
    seed: int = 0
    per_rater_judges: bool = Field(False, description="One judge per rater instead of one 'human' consensus.")
    agreement_sets: list[Literal["rag", "zero", "full", "pooled"]] = Field(
        default_factory=lambda: ["rag"],
        min_length=1,
        description="Answer sets on which agreement (notebook 07) is computed, one row group each; the first "
        "also feeds the heatmap. 'pooled' = all sets together, only when listed: the gap between sets "
        "would otherwise pass for agreement.",
    )


# (lang, lexical.tokenizer) pairs that cannot work, with the reason (see cube.lexical)
LEXICAL_INCOMPATIBLE = {
    ("zh", "13a"): "13a splits on spaces and punctuation only, so a Chinese clause is one token "
    "(ROUGE 0 even for near-identical texts); use jieba, zh or char",
}


class LexicalParams(_Strict):
    tokenizer: Literal["jieba", "zh", "char", "13a"] = Field(
        "jieba", description="Word segmentation for BLEU/ROUGE: jieba words, zh (sacrebleu zh / characters), "
        "char, or 13a (English only; refused with lang: zh). Punctuation and symbols are stripped, Latin is "
        "case-folded.")
    reference: Literal["gold_document", "reference_answer"] = "gold_document"
    example_question_id: str | None = None
    correlation_sets: list[Literal["rag", "zero", "full", "pooled"]] = Field(
        default_factory=lambda: ["rag"],
        min_length=1,
        description="Answer sets on which BLEU/ROUGE are correlated with the judges (notebook 08), one row group "
        "each; 'pooled' = all sets together, only when listed (the gap between sets inflates the correlation).",
    )


class DiagnosticsParams(_Strict):
    low_score_below: float = Field(
        5.0, ge=0, le=10, description="A rag answer whose jury score (mean over judges and dimensions, 0-10) is "
        "below this is classified into failure patterns."
    )
    low_rank_from: int = Field(4, ge=2, description="Pattern low_rank: the gold document retrieved at this rank or lower.")
    judge_disagreement_above: float = Field(
        3.0, ge=0, le=10, description="Pattern judge_disagreement: judges' mean scores of one answer differ by more."
    )
    field_match_below: float = Field(
        60.0, ge=0, le=100, description="Pattern field_missing: the asked field's value matches the answer below "
        "this rapidfuzz partial_ratio."
    )
    unsupported_share_above: float = Field(
        0.5, ge=0, le=1, description="Pattern unsupported: share of answer clauses not found in the gold document."
    )
    refusal_questions: int = Field(
        30, ge=0, description="Questions the knowledge base cannot answer (cube.refusal_questions), answered by "
        "the builtin systems and reported beside CuBE as refusal accuracy (0: none)."
    )
    refusal_generator: Literal["template", "llm"] = Field(
        "template", description="Who writes the refusal questions: template (offline: an absent item, another "
        "province, an absent field) or llm (a model plays a citizen asking about services the knowledge base does "
        "not cover; cube.refusal_llm; questions naming a corpus item are dropped)."
    )
    refusal_model: ModelRef | None = Field(None, description="Model writing the refusal questions (refusal_generator: llm).")

    @model_validator(mode="after")
    def _refusal_model(self) -> DiagnosticsParams:
        if self.refusal_generator == "llm" and self.refusal_model is None:
            raise ValueError("diagnostics.refusal_generator 'llm' needs diagnostics.refusal_model (a name under "
                             "`models:` or an inline spec)")
        return self


class Params(_Strict):
    run: str = Field(description="Run name: outputs go to outputs/<run>/.")
    lang: Literal["zh", "en"] = Field("zh", description="Language of the corpus, prompts and answers.")
    title: str = Field("CuBE evaluation", description="Title of the report.")
    outputs_dir: str = Field("outputs", description="Folder holding run directories and the LLM cache.")
    cache_path: str | None = Field(None, description="Default: <outputs_dir>/cache.sqlite.")
    models: dict[str, ModelSpec] = Field(default_factory=dict, description="Named models referenced elsewhere.")
    corpus: CorpusParams = Field(default_factory=CorpusParams, description="The knowledge base (see `corpus`).")
    questions: QuestionParams = Field(default_factory=QuestionParams, description="The question set (see `questions`).")
    answerer: ModelRef = Field(
        default_factory=lambda: ModelSpec(provider="offline", model="extractive"),
        description="Model writing the answers (rag of builtin systems, and the zero/full bound sets).",
    )
    systems: list[SystemParams] = Field(
        default_factory=lambda: [BuiltinSystem(name="bm25-top8")], description="Systems under test (one or more)."
    )
    dimensions: list[str | DimensionParams] = Field(
        default_factory=lambda: list(PAPER_DIMENSIONS), description="Scoring dimensions: names or full definitions."
    )
    judges: list[JudgeParams] = Field(min_length=1, description="The jury: one or more judges.")
    analysis: AnalysisParams = Field(default_factory=AnalysisParams, description="CuBE computation settings.")
    human: HumanParams = Field(default_factory=HumanParams, description="Human ratings (paper 5.6).")
    lexical: LexicalParams = Field(default_factory=LexicalParams, description="BLEU/ROUGE settings (paper 5.7).")
    diagnostics: DiagnosticsParams = Field(
        default_factory=DiagnosticsParams, description="Failure patterns of low-scoring answers (notebook 10)."
    )

    @field_validator("run")
    @classmethod
    def _run_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", v):
            raise ValueError("run must be a simple name (letters, digits, '_', '-', '.')")
        return v

    @field_validator("systems")
    @classmethod
    def _expand_sweeps(cls, v: list[Any]) -> list[Any]:
        return expand_sweeps(v)

    @model_validator(mode="after")
    def _references(self) -> Params:
        names = [s.name for s in self.systems]
        if len(set(names)) != len(names):
            raise ValueError(f"systems: duplicate system names {names}")
        for s in self.systems:
            if s.kind != "builtin" and s.answerer is None and "answerer" not in self.model_fields_set:
                raise ValueError(
                    f"systems[{s.name}] ({s.kind}): set `answerer` (on the system, or at the top level) to the LLM "
                    "this system answers with: it writes the zero and full bound sets, which must come from the "
                    "same model as the system's answers (METHOD.md)"
                )
        jnames = [j.name for j in self.judges]
        if len(set(jnames)) != len(jnames):
            raise ValueError(f"judges: duplicate judge names {jnames}")
        refs = [("answerer", self.answerer), ("questions.model", self.questions.model),
                ("diagnostics.refusal_model", self.diagnostics.refusal_model)]
        twins = self._twin_judges()
        if twins:
            raise ValueError(
                "judges: " + "; ".join(f"{a!r} and {b!r}" for a, b in twins) + " would make exactly the same calls "
                "(same model spec, sampling settings, samples and all_dimensions), so they share every cached reply "
                "and their scores would be identical: one judge counted twice. Remove one, or make their calls differ "
                "(e.g. another seed or temperature; an offline rubric: another preset)"
            )
        refs += [(f"systems[{s.name}].answerer", s.answerer) for s in self.systems]
        refs += [(f"judges[{j.name}].model", j.model) for j in self.judges]
        for where, ref in refs:
            if isinstance(ref, str) and ref not in self.models:
                raise ValueError(f"{where}: model '{ref}' is not defined under `models:` ({sorted(self.models)})")
        if (self.lang, self.lexical.tokenizer) in LEXICAL_INCOMPATIBLE:
            raise ValueError(f"lexical.tokenizer: {self.lexical.tokenizer!r} cannot be used with lang: {self.lang!r}: "
                             f"{LEXICAL_INCOMPATIBLE[self.lang, self.lexical.tokenizer]}")
        return self

    def _twin_judges(self) -> list[tuple[str, str]]:
        """Pairs of judges whose calls are identical (`cube.cache.key_payload`'s fields, or an offline
        algorithm's name and options), with the same samples and all_dimensions."""
        seen: dict[str, str] = {}
        twins = []
        for j in self.judges:
            if isinstance(j.model, str) and j.model not in self.models:
                continue  # reported as an undefined reference
            spec = self.model(j.model)
            if spec.provider == "offline":
                ident: list[Any] = ["offline", spec.model, spec.options]
            else:
                ident = [spec.model, sorted(u.rstrip("/") for u in spec.endpoints()), spec.temperature,
                         spec.top_p, spec.seed, spec.max_tokens, spec.extra_body]
            key = json.dumps([ident, j.samples, j.all_dimensions], sort_keys=True, default=str)
            if key in seen:
                twins.append((seen[key], j.name))
            else:
                seen[key] = j.name
        return twins

    # -- resolution helpers ------------------------------------------------------------
    def model(self, ref: ModelRef) -> ModelSpec:
        """The spec behind a model reference (a name in `models:` or an inline spec)."""
        return self.models[ref] if isinstance(ref, str) else ref

    def model_name(self, ref: ModelRef) -> str:
        return ref if isinstance(ref, str) else ref.model

    def dimension_list(self) -> list[DimensionParams]:
        return [DimensionParams(name=d) if isinstance(d, str) else d for d in self.dimensions]

    def dimension_names(self) -> list[str]:
        return [d.name for d in self.dimension_list()]

    def system_answerer(self, system: BuiltinSystem | RagflowSystem | ImportedSystem) -> ModelRef:
        return system.answerer if system.answerer is not None else self.answerer


# --------------------------------------------------------------------------- loading
def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid params ({err.error_count()} problem(s))"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  - {key}: unknown key (check the spelling; see the params reference in README.md)")
        elif e["type"] == "missing":
            lines.append(f"  - {key}: required key is missing")
        else:
            got = e.get("input")
            secret = any(str(p) in SECRET_FIELDS for p in e["loc"])
            shown = "" if isinstance(got, dict | list) or secret else f" (got {got!r})"
            lines.append(f"  - {key}: {e['msg']}{shown}")
    return "\n".join(lines)


def parse_params(data: dict[str, Any], source: str = "<params>") -> Params:
    """Validate a params mapping; errors name `source` and every offending key."""
    if not isinstance(data, dict):
        raise ParamsError(f"{source}: expected a YAML mapping at the top level, got {type(data).__name__}")
    try:
        return Params.model_validate(data)
    except ValidationError as err:
        raise ParamsError(_format_validation_error(err, source)) from None


def read_params_yaml(path: str | Path) -> Any:
    """The YAML of a params file, unvalidated; `ParamsError` naming the file when it is missing
    or not YAML (`parse_params` checks its shape)."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None


def load_params(path: str | Path, overrides: dict[str, Any] | None = None) -> Params:
    """Load and validate a params YAML file. `overrides` are merged (deeply) before validation."""
    data = read_params_yaml(path)
    if overrides:
        data = _deep_merge(data, overrides)
    return parse_params(data, str(path))


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def params_to_yaml(params: Params) -> str:
    """The resolved params as YAML (keys never appear: params hold only variable names)."""
    data = json.loads(params.model_dump_json())
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------- run layout
@dataclass(frozen=True)
class RunPaths:
    """Every path of one run. Create with `RunPaths.for_params` or `RunPaths(run_dir)`."""

    root: Path
    cache: Path

    @classmethod
    def for_params(cls, params: Params, base: str | Path | None = None) -> RunPaths:
        outputs = Path(base) if base is not None else Path(params.outputs_dir)
        cache = Path(params.cache_path) if params.cache_path else outputs / "cache.sqlite"
        return cls(root=outputs / params.run, cache=cache)

    @property
    def params(self) -> Path:
        return self.root / "params.yaml"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    @property
    def annotation(self) -> Path:
        """The published `annotation/` also when running in the staging copy: raters fill its
        sheet in place, so it is never staged nor replaced by a commit."""
        root = self.root.parent if self.root.name == ".staging" else self.root
        return root / "annotation"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def data_file(self, name: str) -> Path:
        """`data/<name>.parquet` (name without extension: corpus, questions, answers, scores...)."""
        return self.data / f"{name}.parquet"

    def ensure(self) -> RunPaths:
        for d in (self.data, self.tables, self.figures, self.notebooks, self.report):
            d.mkdir(parents=True, exist_ok=True)
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        return self


def write_resolved_params(params: Params, paths: RunPaths) -> Path:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.params.write_text(params_to_yaml(params), encoding="utf-8")
    return paths.params


def record_results(paths: RunPaths, **figures: Any) -> dict[str, Any]:
    """Merge headline figures into `results.json` (read back by tests and the report)."""
    current = json.loads(paths.results.read_text(encoding="utf-8")) if paths.results.exists() else {}
    current.update(figures)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.results.write_text(json.dumps(current, indent=2, ensure_ascii=False, default=float), encoding="utf-8")
    return current
