"""One knowledge-base item as one document: field values as text, the key-value rendering
("label：value" per line, the paper's 3.3) and its lenient parse back into fields.

Below both `cube.kb.corpus` (which builds the corpus) and `cube.kb.demo` (which generates items):
both render documents here.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import CORPUS_FIELDS, EXTRA_LABELS, FIELD_LABELS
from cube.kb.mapping import LIST_FIELDS, strip_numbering

CORPUS_COLUMNS: tuple[str, ...] = (
    "doc_id",
    *CORPUS_FIELDS,
    "family_id",
    "variant",
    "synthetic",
    "text",
)

_NUMBERED = re.compile(r"^\s*\d+\s*[.、．)）]")


class CorpusError(ValueError):
    """A knowledge base that cannot be used: the message names the file, the row and the problem."""


# --------------------------------------------------------------------------- values and rendering
def _numbered(items: Iterable[Any]) -> str:
    """Numbered lines, one per item; an item's own leading number is replaced, not doubled."""
    parts = [p for p in (strip_numbering(x) for x in items) if p]
    return "\n".join(f"{i}. {p}" for i, p in enumerate(parts, 1))


def field_text(field: str, value: Any) -> str:
    """A field value as text: lists become numbered lines; NaN/None become ""."""
    if value is None:
        return ""
    if isinstance(value, list | tuple | np.ndarray):
        return _numbered(value)
    if isinstance(value, float):
        return _number_text(value)
    if value is pd.NA:
        return ""
    text = str(value).strip()
    if field in LIST_FIELDS and "\n" in text:
        return _numbered_lines(text)
    return text


def _number_text(value: float) -> str:
    """A float cell as text: "" for NaN, an integer without ".0"."""
    if math.isnan(value):
        return ""
    return str(int(value)) if value.is_integer() else str(value)


def _numbered_lines(text: str) -> str:
    """A multi-line list value: numbered when any of its lines is not (unnumbered step lists get
    numbers), else as it is."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not all(_NUMBERED.match(ln) for ln in lines):
        return _numbered(lines)
    return text


def render_document(
    record: Mapping[str, Any], lang: str, extras: Iterable[tuple[str, Any]] = ()
) -> str:
    """Render one item as the paper's key-value document ("label：value" per line).

    Empty fields are left out; multi-line values (procedure steps, materials) start on the
    line after their label. `parent_region` follows the region and `variant` the item name
    (unless the name already contains it, as "食品经营许可（变更）" does "变更"). `extras`
    (a user's unmapped columns, as (label, value)) come first, under their own label, so a
    lenient `parse_document` of the 18 fields skips them. `parse_document` reads the result back.

    Args:
        record: a mapping holding some of the 18 canonical fields (and `variant`, `parent_region`).
        lang: "zh" (labels 事项名称..., full-width colon) or "en" (Item Name...).
        extras: (label, value) pairs rendered before the fields.
    """
    if lang not in FIELD_LABELS:
        raise ValueError(
            f"render_document: lang must be one of {sorted(FIELD_LABELS)}, got {lang!r}"
        )
    labels, colon = {**FIELD_LABELS[lang], **EXTRA_LABELS[lang]}, "：" if lang == "zh" else ": "
    name, variant = (
        field_text("item_name", record.get("item_name")),
        field_text("variant", record.get("variant")),
    )
    order: list[tuple[str, str, Any]] = [("", str(lab), v) for lab, v in extras]
    order += _field_order(record, labels, variant if variant not in name else "")
    lines: list[str] = []
    for key, label, value in order:
        lines += _field_lines(label, colon, field_text(key, value))
    return "\n".join(lines)


def _field_order(
    record: Mapping[str, Any], labels: Mapping[str, str], variant: str
) -> list[tuple[str, str, Any]]:
    """(field, label, value) of the 18 fields in order, `parent_region` after the region and the
    variant ("" : not said) after the item name."""
    order: list[tuple[str, str, Any]] = []
    for f in CORPUS_FIELDS:
        order.append((f, labels[f], record.get(f)))
        if f == "region":
            order.append(("parent_region", labels["parent_region"], record.get("parent_region")))
        if f == "item_name" and variant:
            order.append(("variant", labels["variant"], variant))
    return order


def _field_lines(label: str, colon: str, text: str) -> list[str]:
    """A field's lines: none when empty, a multi-line value on the lines after its label."""
    if not text:
        return []
    if "\n" in text:
        return [f"{label}{colon}".rstrip(), *text.splitlines()]
    return [f"{label}{colon}{text}"]


def _label_pattern(extra_labels: Iterable[str]) -> tuple[re.Pattern[str], dict[str, str]]:
    """The label regex and label -> field map (built once per set of extra labels; read-only)."""
    return _label_pattern_cached(tuple(extra_labels))


@functools.lru_cache(maxsize=64)
def _label_pattern_cached(extra_labels: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, str]]:
    keys = {label: f for lang in FIELD_LABELS.values() for f, label in lang.items()}
    keys.update(
        {EXTRA_LABELS[lang][f]: f for lang in EXTRA_LABELS for f in ("variant", "parent_region")}
    )
    keys["doc_id"] = "doc_id"
    keys.update({lab: lab for lab in extra_labels if lab not in keys})
    alternatives = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    # A label may carry list or bold markup ("- **事项名称**：..."), as chunks returned by a RAG
    # system sometimes do.
    return re.compile(rf"^\s*(?:[-*]\s*)?(?:\*\*)?({alternatives})(?:\*\*)?\s*[:：]\s?(.*)$"), keys


def parse_document(
    text: str, source: str = "<text>", extra_labels: Iterable[str] = (), strict: bool = True
) -> dict[str, str]:
    """Read one key-value document back into fields (zh or en labels; ":" or "：").

    A line starting with a known label opens a field; other lines continue the previous one
    (multi-line procedure and materials). `extra_labels` are a user's own labels (the values
    of `corpus.columns`), kept under their own name. `strict=False` reads whatever it can
    (documents a system retrieved): text before the first label is ignored and a repeated
    label replaces the earlier value.

    Raises:
        CorpusError: (strict) text before the first label, or a label given twice (names
            `source` and line).
    """
    pattern, keys = _label_pattern(extra_labels)
    out: dict[str, list[str]] = {}
    current: str | None = None
    for n, line in enumerate(str(text).splitlines(), 1):
        m = pattern.match(line)
        if m:
            current = keys[m.group(1)]
            if current in out and strict:
                raise CorpusError(
                    f"{source}: line {n}: label '{m.group(1)}' appears a second time (one item "
                    "per file)"
                )
            out[current] = [m.group(2)]
        elif current is not None:
            out[current].append(line)
        elif line.strip() and strict:
            raise CorpusError(
                f"{source}: line {n}: expected 'label：value' with a known label (e.g. "
                f"{FIELD_LABELS['zh']['item_name']}： or {FIELD_LABELS['en']['item_name']}:), got "
                f"{line.strip()[:60]!r}"
            )
    return {k: "\n".join(v).strip() for k, v in out.items()}
