"""The long-format tables every stage exchanges, and the knowledge-base fields.

Tables are pandas DataFrames stored as parquet under `outputs/<run>/data/`:

- corpus: `doc_id` plus the 18 fields of a service guide (`CORPUS_FIELDS`), `family_id`
  (near-duplicate family, may be empty), `text` (the rendered document: one chunk).
- questions: `question_id, doc_id, question, asked_field, generator`, and `style` (template
  questions: `named`, `colloquial` or `ambiguous`; empty for LLM-written questions).
- answers: `question_id, doc_id, system, set, answer, retrieved_doc_ids, rank` and the
  call accounting columns (`ACCOUNTING_COLUMNS`). `set` is `zero` (no documents), `rag`
  (the system under test) or `full` (the gold document alone). `retrieved_doc_ids` is the
  ordered list the system retrieved (empty for zero, `[doc_id]` for full); `rank` is the
  1-based position of the gold `doc_id` in it, 0 when absent. The full table
  (`cube.systems.ANSWERS_COLUMNS`) also has `n_retrieved`, `error`, `answerer`,
  `finish_reason` (the answering model's: 'stop', 'length' = cut at max_tokens, '' unknown)
  and `retrieval_ok` (bool): True when the system's retrieval outcome is known (the call
  returned, even with zero chunks; always for `builtin`, whose bm25 retrieval happens even
  when its answering call fails), False when the system call failed so nothing is known
  about its retrieval (a failed RAGFlow call; an imported row with an `error` and no
  retrieved list). A rank 0 with `retrieval_ok` False is a system failure, not a retrieval
  miss. `zero`/`full` rows carry the `rag` row's `rank`, `n_retrieved` and `retrieval_ok`.
- scores: `question_id, system, set, judge, dimension, score` (float 0-10, NaN = unscored)
  plus `sample`, `raw`, `error`, `error_kind` ('' | 'call' | 'parse' | 'skipped': the answer
  was missing, nothing was judged; human ratings: 'missing'), `detail`, `finish_reason`
  (the judge model's, '' when unknown) and the accounting columns.

Every row produced by a model call carries the full accounting of that call and its
`call_id`, so a run's usage is a sum over the distinct calls of its tables (no hidden
ledger; a bound set reused by several systems, or one all-dimensions judge call filling
several rows, is counted once): `role` is `question_generation`, `answering` or `judging`.
A row that did not come from a model call (template or file questions, imported answers,
human ratings, skipped judgments) has `call_id` "", no tokens and cost 0.0, and is not a
call (`cube.llm.usage`). A real call of unknown price (a RAGFlow answer) has its own `call_id`
and cost NaN.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

HUMAN = "human"  # the judge name of the human consensus; one rater is "human:<rater>"

# refusal questions (no gold document: `doc_id` ""), whichever generator wrote them
REFUSAL_QUESTION_COLUMNS: tuple[str, ...] = (
    "question_id",
    "doc_id",
    "question",
    "kind",
    "style",
    "generator",
    "item",
)

CORPUS_FIELDS: tuple[str, ...] = (
    "region",
    "publication_address",
    "item_name",
    "handling_agency",
    "department",
    "consultation_method",
    "requirements",
    "legal_basis",
    "statutory_time_limit",
    "committed_time_limit",
    "service_object",
    "processing_type",
    "online_handling",
    "processing_time",
    "processing_location",
    "fee_standard",
    "procedure",
    "application_materials",
)

FIELD_LABELS: dict[str, dict[str, str]] = {
    "en": {
        "region": "Administrative Region",
        "publication_address": "Publication Address",
        "item_name": "Item Name",
        "handling_agency": "Handling Agency",
        "department": "Department Name",
        "consultation_method": "Consultation Method",
        "requirements": "Requirements",
        "legal_basis": "Legal Basis",
        "statutory_time_limit": "Statutory Processing Time",
        "committed_time_limit": "Committed Processing Time",
        "service_object": "Service Object",
        "processing_type": "Processing Type",
        "online_handling": "Online Handling Availability",
        "processing_time": "Processing Time",
        "processing_location": "Processing Location",
        "fee_standard": "Fee Standard",
        "procedure": "Processing Procedure",
        "application_materials": "Application Materials",
    },
    "zh": {
        "region": "行政区划",
        "publication_address": "发布地址",
        "item_name": "事项名称",
        "handling_agency": "实施主体",
        "department": "部门名称",
        "consultation_method": "咨询方式",
        "requirements": "受理条件",
        "legal_basis": "设定依据",
        "statutory_time_limit": "法定办结时限",
        "committed_time_limit": "承诺办结时限",
        "service_object": "服务对象",
        "processing_type": "办件类型",
        "online_handling": "是否网办",
        "processing_time": "办理时间",
        "processing_location": "办理地点",
        "fee_standard": "收费标准",
        "procedure": "办理流程",
        "application_materials": "申请材料",
    },
}

SETS: tuple[str, ...] = ("zero", "rag", "full")
ROLES: tuple[str, ...] = ("question_generation", "answering", "judging", "audit")
ACCOUNTING_COLUMNS: tuple[str, ...] = (
    "model",
    "role",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cost",
    "latency_s",
    "queue_s",
    "cached",
    "call_id",
)

QUESTION_COLUMNS = ("question_id", "doc_id", "question", "asked_field", "generator")
ANSWER_COLUMNS = ("question_id", "doc_id", "system", "set", "answer", "retrieved_doc_ids", "rank")
SCORE_COLUMNS = ("question_id", "system", "set", "judge", "dimension", "score")


class SchemaError(ValueError):
    """A table that does not have the expected shape: the message says which and why."""


def require_columns(df: pd.DataFrame, columns: Iterable[str], table: str) -> None:
    """Raise `SchemaError` naming the table and every missing column."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SchemaError(
            f"{table}: missing column(s) {missing}; expected at least {list(columns)}, got "
            f"{list(df.columns)}"
        )


def known_retrieval(rows: pd.DataFrame) -> pd.Series:
    """Rows whose retrieval outcome is known: `retrieval_ok` True. The one reading of an unknown
    outcome everywhere (analysis and diagnostics): False, None or NaN is unknown (a failed system
    call), left out and counted, never read as retrieved nor as missed. No column: all known."""
    if "retrieval_ok" not in rows:
        return pd.Series(True, index=rows.index)
    return (
        rows["retrieval_ok"].map(lambda v: v is True or (not pd.isna(v) and bool(v))).astype(bool)
    )


# ------------------------------------------------------------ knowledge-base field keys
EXTRA_FIELDS: tuple[str, ...] = ("family_id", "variant", "parent_region", "aliases")
MAPPABLE: tuple[str, ...] = ("doc_id", *CORPUS_FIELDS, *EXTRA_FIELDS)
REQUIRED_FIELDS: tuple[str, ...] = ("item_name",)  # doc_id is derived when absent
# Labels of the keys that are not among the 18 document fields (zh, en). `variant` and
# `parent_region` are rendered into the document under these labels; the others are not.
EXTRA_LABELS: dict[str, dict[str, str]] = {
    "zh": {
        "doc_id": "编号",
        "family_id": "事项族",
        "variant": "情形",
        "parent_region": "上级区划",
        "aliases": "俗称",
    },
    "en": {
        "doc_id": "ID",
        "family_id": "Family",
        "variant": "Variant",
        "parent_region": "Parent Region",
        "aliases": "Aliases",
    },
}


def key_label(key: str, lang: str) -> str:
    """A field key's label in `lang` ("region" -> "行政区划")."""
    return FIELD_LABELS[lang].get(key) or EXTRA_LABELS[lang][key]


def field_keys_help() -> str:
    """Every valid field key with its Chinese and English label, for error messages."""
    return ", ".join(f"{k} ({key_label(k, 'zh')} / {key_label(k, 'en')})" for k in MAPPABLE)


_ROLES: dict[str, str] = {
    "doc_id": "optional: derived from the group key (or row content) when absent; must be unique",
    "item_name": "**required**; the item's official name",
    "region": "rendered; questions name it; strata of `corpus.sample`",
    "procedure": "rendered as a numbered list (one step per line or per grouped row)",
    "application_materials": "rendered as a numbered list (one material per line or per grouped "
    "row)",
    "family_id": "not rendered; groups near-duplicates (the same item across regions or variants) "
    "for the family statistics, ambiguous questions and the near-duplicate confusion rate",
    "variant": "rendered after the item name unless the name already contains it; questions of the "
    "ambiguous style leave it out",
    "parent_region": "rendered after the region (a district's city); lets a region filter contain "
    "its children",
    "aliases": "not rendered; colloquial names (newline-separated) for colloquial template "
    "questions",
}


def field_key_table() -> str:
    """Markdown: every field key of `corpus.columns` with its Chinese and English label and its
    role."""
    out = ["| key | 中文 label | English label | role |", "|---|---|---|---|"]
    for k in MAPPABLE:
        role = _ROLES.get(k, "rendered when non-empty")
        out.append(f"| `{k}` | {key_label(k, 'zh')} | {key_label(k, 'en')} | {role} |")
    return "\n".join(out)


# ---------------------------------------------------------------- a retrieved-documents cell
def parse_doc_list(value: Any) -> list[str]:
    """A retrieved-documents cell as a list of doc ids (JSON list, list, or `|`/`;` string)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, list | tuple | np.ndarray):
        return _stripped(value)
    text = str(value).strip()
    if text.startswith("["):
        return _stripped(_json_list(text))
    return [p.strip() for p in re.split(r"[|;]", text) if p.strip()]


def _stripped(values: Any) -> list[str]:
    """Each value as stripped text, the empty ones left out."""
    return [str(v).strip() for v in values if str(v).strip()]


def _json_list(text: str) -> list[Any]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a valid JSON list ({exc.msg})") from None
    if not isinstance(parsed, list):
        raise ValueError("expected a JSON list")
    return parsed
