"""Field values as a reader says them: placeholders, yes/no fields and bare numbers.

Real exports hold values that read badly when copied into a sentence: placeholders for
"nothing here" (无, 暂无, /, N/A), yes/no flags in a fee column ("是否收费: 是") and time
limits without a unit ("承诺办结时限: 10"). One helper phrases them for both the template
question generator (`cube.kb.questions`) and the offline extractive answerer
(`cube.systems.extractive`), so a question and its answer say a value the same way:

- placeholders (`PLACEHOLDERS`, compared after stripping, case-insensitively) are missing
  values: never asked about, never put into a question, "not stated" in an answer. The
  corpus loader (`corpus.empty_values`) already turns them into missing values; this is the
  second line of defence for a corpus built some other way;
- yes/no values (`YES`/`NO`) of `fee_standard` and `online_handling` become a phrase
  ("是" -> "需要收费" / "可以网上办理"; "否" -> "不收费" / "不能网上办理");
- a bare number in a time-limit field (`committed_time_limit`, `statutory_time_limit`) gets
  the unit 工作日 / working days. The choice: Chinese service-guide standards count 承诺办结时限
  and 法定办结时限 in working days, and an export that drops the unit drops exactly that one;
  0 is said as immediate (即办). A value with any unit or text of its own is kept as it is.

An answer that is only the value: `says_only_value` (the rubric judge's `equals_field` and the
failure pattern `field_missing` share it) accepts the value or its phrasing, optionally after the
field's label in any language (`FIELD_LABELS`, and the yes/no question labels of `LABEL_ALIASES`:
"是否收费：否") and the caller's fillers, compared without blanks, punctuation and case.

Item names: `base_name` / `strip_variant` take a variant off a name (nested brackets
included: "残疾人证换领（残损换新（户籍地））" -> "残疾人证换领"), for ambiguous questions and for
grouping near-duplicates (`cube.diagnose.near_duplicates`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from cube.config.schema import FIELD_LABELS

PLACEHOLDERS: tuple[str, ...] = ("无", "无情形", "暂无", "/", "-", "—", "N/A")
_PLACEHOLDER_KEYS = frozenset(p.casefold() for p in PLACEHOLDERS) | {
    "",
    "n/a",
    "na",
    "none",
    "null",
    "nan",
    "／",
    "－",
}
YES = frozenset({"是", "y", "yes", "true", "收费", "有"})
NO = frozenset({"否", "n", "no", "false", "不收费", "免费", "无需收费"})
# Bare flags: values that say yes or no and nothing else (收费/免费 are phrases already).
FLAGS = frozenset({"是", "否", "y", "n", "yes", "no", "true", "false"})
YES_NO_FIELDS: tuple[str, ...] = ("fee_standard", "online_handling")
TIME_FIELDS: tuple[str, ...] = ("committed_time_limit", "statutory_time_limit")
_BARE_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$")
_PHRASES = {
    "zh": {
        ("fee_standard", True): "需要收费",
        ("fee_standard", False): "不收费",
        ("online_handling", True): "可以网上办理",
        ("online_handling", False): "不能网上办理",
    },
    "en": {
        ("fee_standard", True): "a fee is charged",
        ("fee_standard", False): "free of charge",
        ("online_handling", True): "can be handled online",
        ("online_handling", False): "cannot be handled online",
    },
}


_OPEN, _CLOSE = "（(", "）)"


def base_name(item_name: str) -> str:
    """The item name without its trailing variant in brackets, nested brackets included.

    "食品经营许可（变更）" -> "食品经营许可"; "残疾人证换领（残损换新（户籍地））" ->
    "残疾人证换领"; full- and half-width brackets may be mixed. A name that is only a bracket group,
    or whose trailing brackets do not balance, is kept as it is.
    """
    name = str(item_name).strip()
    if not name or name[-1] not in _CLOSE:
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        ch = name[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            depth -= 1
            if depth == 0:
                return name[:i].rstrip() or name
    return name


def strip_variant(name: str, variant: str) -> str:
    """The item name without its variant: the trailing bracket group that holds it (nested brackets
    included), or the variant said before the name ("变更食品经营许可"); a name that does not
    hold the variant there is already the base service."""
    if not variant:
        return base_name(name)
    base = base_name(name)
    if base != name and variant in name[len(base) :]:
        return base
    if name.startswith(variant):  # "变更食品经营许可"
        return name[len(variant) :].strip(" ·-—_") or name
    return name


def short_variant(variant: str, lang: str) -> bool:
    """A variant said before the service ("注销食品经营许可", "... for cancellation"): a short verb
    phrase without brackets; anything longer is said in brackets after the name."""
    plain = not any(c in variant for c in _OPEN + _CLOSE)
    return plain and (len(variant) <= 4 if lang == "zh" else True)


def is_missing(value: Any) -> bool:
    """True for None, NaN, an empty string or a placeholder such as 无, 暂无, /, N/A."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return str(value).strip().casefold() in _PLACEHOLDER_KEYS


def clean(value: Any) -> str:
    """The value as stripped text, "" when it is missing (`is_missing`)."""
    return "" if is_missing(value) else str(value).strip()


def yes_no(value: Any) -> bool | None:
    """True / False for a yes/no value (是/否, yes/no, 收费/免费, ...), None for anything else."""
    key = clean(value).casefold()
    if key in YES:
        return True
    if key in NO:
        return False
    return None


def is_flag(value: Any) -> bool:
    """True for a bare yes/no flag (是, 否, yes, no, true, false, y, n)."""
    return clean(value).casefold() in FLAGS


def bare_number(value: Any) -> str | None:
    """The number when the value is only a number ("10", " 5 ", "0.5"), else None (full-width digits
    count)."""
    text = clean(value)
    m = _BARE_NUMBER.match(text.translate({0xFF10 + i: 0x30 + i for i in range(10)}))
    return m.group(1) if m else None


def phrase_value(field: str, value: Any, lang: str) -> str:
    """How an answer says `field`'s value ("" when missing; see the module docstring)."""
    text = clean(value)
    if not text:
        return ""
    if field in YES_NO_FIELDS and (flag := yes_no(text)) is not None:
        return _PHRASES[lang][field, flag]
    if field in TIME_FIELDS and (num := bare_number(text)) is not None:
        if float(num) == 0:
            return "即办（0个工作日）" if lang == "zh" else "immediate (0 working days)"
        if lang == "zh":
            return f"{num}个工作日"
        return f"{num} working day" + ("" if num == "1" else "s")
    return text


# Labels a yes/no field is also asked by ("是否收费：否"), besides its `FIELD_LABELS`.
LABEL_ALIASES: dict[str, tuple[str, ...]] = {
    "fee_standard": ("是否收费", "是否需要收费", "是否需要缴费", "收费", "fee", "fees", "charged"),
    "online_handling": (
        "是否可以网上办理",
        "是否可以网办",
        "是否网上办理",
        "网上办理",
        "网办",
        "online",
    ),
}


def squash(text: str) -> str:
    """`text` compared as a value: NFKC, lower case, without blanks, punctuation and underscores."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", str(text))).lower()


def says_only_value(
    answer: str,
    field: str,
    value: Any,
    lang: str | None = None,
    names: Iterable[str] = (),
    fillers: Iterable[str] = (),
) -> bool:
    """True when `answer` states `field`'s `value` and nothing else: after `squash`, it ends with
    the value or its phrasing (`phrase_value`, in `lang` or, when None, every language: 否 ->
    不收费), and what precedes it is made only of, removed in this order, `names` (the item's name),
    the field's labels in every language and its `LABEL_ALIASES`, and `fillers` ("根据办事指南");
    names and fillers are squashed. An empty value is never said."""
    said = squash(answer)
    if not said or not squash(value):
        return False
    removed = [squash(n) for n in names] + _field_labels(field) + [squash(f) for f in fillers]
    for form in _value_forms(field, value, lang):
        if said.endswith(form) and not _without(said[: len(said) - len(form)], removed):
            return True
    return False


def _value_forms(field: str, value: Any, lang: str | None) -> set[str]:
    """The value squashed, and its phrasing in `lang` (None: in every language), squashed."""
    langs = (lang,) if lang else tuple(_PHRASES)
    return ({squash(value)} | {squash(phrase_value(field, value, lg)) for lg in langs}) - {""}


def _field_labels(field: str) -> list[str]:
    """The field's labels in every language, then its aliases longest first, squashed."""
    labels = [squash(FIELD_LABELS[k].get(field, "")) for k in FIELD_LABELS]
    return labels + sorted((squash(a) for a in LABEL_ALIASES.get(field, ())), key=len, reverse=True)


def _without(text: str, parts: list[str]) -> str:
    """`text` with every occurrence of each part removed, in order (empty parts skipped)."""
    for part in parts:
        if part:
            text = text.replace(part, "")
    return text
