"""The `rubric` judge: a deterministic, rule-based scorer. It is NOT an LLM.

It scores an answer on the paper's four dimensions (and the article's accuracy grade) by
awarding each dimension's five criteria 0-2 points from measurable evidence in three texts: the
question, the gold (source) document and the answer. It is the offline judge of the demo run
and of tests; its scores are reproducible to the bit and cost nothing, but they measure surface
evidence only.

Each dimension's scoring is a rule registered by name (`@rule("relevance")`, in `RULES`); a
dimension uses the rule its file names (`rubric:` in cube/judges/dimensions/<name>.yaml, passed
in the request's context), else the rule of its own name. A rule's criteria ids are its
dimension file's `criteria`.

What it can see:
- token overlap (jieba words for Chinese, lower-cased words for English) between each answer
  sentence and the source: the share of sentences supported by the source;
- numbers (durations, fees, counts) in the answer that do or do not occur in the source, and
  a "free" claim against a priced fee standard (or the reverse);
- which fields the question asks about (keywords in the question such as 材料 / fee / how
  long; the question generator's `asked_field` is not passed by the judging pipeline, since
  an LLM judge never sees it), and how much of those fields' text the answer
  reproduces; the documents are key-value lines "标签：值" / "Label: value" with the labels of
  `cube.config.schema.FIELD_LABELS`;
- whether the answer names the item of the gold document or a near-duplicate sibling of its
  family ("抽水蓄能电站项目核准（新建）" vs "（变更）");
- clarity signals: length, numbered steps and lists, repeated sentences, sentence length,
  hedging and boilerplate phrases.

An answer that states exactly the asked field's content (the gold document's value, or its
phrasing "否" -> "不收费", optionally after the item's name and the field's label: "收费标准：
不收费") scores the top of the scale on every dimension (`equals_field`): nothing in it is
unsupported, nothing asked is left out, and a one-line answer to a one-field question is clear.

What it cannot see: whether reasoning is sound, whether anything beyond the document is true,
paraphrases that use different words (a correct paraphrase loses points), numbers written in
words (五个工作日), tone, or whether an omitted detail mattered to this user. Treat it as a
transparent baseline judge whose biases are known, not as a stand-in for an LLM or a human.

Presets (their raw scales differ on purpose, so the offline jury shows what CuBE's bounds
correct): `lenient` gives a point for little evidence and has a floor (a non-empty answer
gets at least 3; the points added are reported in `detail` as "lenient_floor"); `strict`
needs much more evidence per point and never gives 2 points for mere brevity (the `Preset`
fields say how, the rules never test a preset's name). Registered as
offline models "rubric-lenient", "rubric-strict" and "rubric" (`options: {preset: ...}`,
default lenient).

Tokenisation and per-text analyses are cached (LRU, per process): a document is judged
3 sets x 4 dimensions times and an answer 4 times, so each is segmented once; `score_answers`
empties the caches after each slice of answers (`RubricJudge.release_caches`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cube.config.dimension_files import packaged_dimensions
from cube.config.model_spec import ModelSpec
from cube.config.phrasing import says_only_value, squash
from cube.config.schema import FIELD_LABELS
from cube.kb.text import clear_segment_caches, segment
from cube.llm import OfflineModel, Request, Response, register_offline


@dataclass(frozen=True)
class Preset:
    """How much evidence a point needs. A feature f in [0, 1] earns 2 if f >= hi, 1 if f >= lo.

    The quality rule's choices are fields too (a preset is never recognised by its name).
    """

    name: str
    lo: float
    hi: float
    support: float  # token overlap with the source for a sentence to count as supported
    concrete_k: int  # source-specific words that make an answer fully "concrete"
    floor: int  # minimum total of a non-empty answer
    list_lines: int  # list lines needed for 2 organisation points
    organised_sentences: int  # sentences needed for 1 organisation point
    long_needs_structure: bool  # 2 length points also need a list or >= 3 sentences
    short_length_point: bool  # a non-empty answer shorter than "short" still earns 1 length point
    hedge_weight: int  # how much hedging costs the wording point


PRESETS = {
    "lenient": Preset(
        "lenient",
        lo=0.15,
        hi=0.5,
        support=0.5,
        concrete_k=5,
        floor=3,
        list_lines=2,
        organised_sentences=2,
        long_needs_structure=False,
        short_length_point=True,
        hedge_weight=1,
    ),
    "strict": Preset(
        "strict",
        lo=0.35,
        hi=0.8,
        support=0.7,
        concrete_k=12,
        floor=0,
        list_lines=3,
        organised_sentences=3,
        long_needs_structure=True,
        short_length_point=False,
        hedge_weight=2,
    ),
}

_LABEL_TO_FIELD = {lab.lower(): f for labels in FIELD_LABELS.values() for f, lab in labels.items()}
_KV = re.compile(r"^\s*([^:：\n]{1,40}?)\s*[:：]\s*(.*)$")
_LIST_MARK = re.compile(
    r"(?m)^\s*(?:\d{1,2}\s*[.、)](?!\d)|[(]\d{1,2}[)]|[-*•·]|第[一二三四五六七八九十\d]+步)\s*"
)
_INLINE_MARK = re.compile(
    r"(?:(?<=^)|(?<=[\s;；。,，:：]))(?:\d{1,2}\s*[.、)](?!\d)|[(]\d{1,2}[)])"
)
_WORDCHAR = re.compile(r"\w")
_DIGIT = re.compile(r"\d")  # what every `_QUANTITY` holds
_NUM = re.compile(r"\d+(?:\.\d+)?")
_SENT = re.compile(r"[。！？!?；;\n]+|(?<=[.])\s+")
_FREE = re.compile(
    r"免费|不收费|不收取|无需缴费|无收费|free of charge|no fee|\bfree\b", re.IGNORECASE
)
_HEDGES = re.compile(
    r"具体以|为准|请咨询|建议咨询|建议您|可能|一般来说|一般情况|通常|"
    r"因地区而异|各地|不同地区|大致|左右|"
    r"作为(?:一个)?AI|无法提供|\bmay\b|\bmight\b|typically|generally|usually|depending on|"
    r"varies|vary by|"
    r"contact your local|please consult|as an ai|approximately",
    re.IGNORECASE,
)
_ZH_STOP = frozenset(
    "的 了 和 是 在 及 与 或 等 您 你 我 请 可以 需要 如果 就 都 也 还 对 "
    "为 由 将 把 被 这 那 有 并 中 上 下 "
    "要 会 能 该 其 之 以 于 后 前 时 个 项 吗 呢 吧 啊".split()
)
_EN_STOP = frozenset(
    "a an the of to in on for and or is are be been was were it this that with by as at from "
    "you your i we our can will would should do does not no if then than so any all".split()
)

_ASK_KEYWORDS: dict[str, tuple[str, ...]] = {
    "fee_standard": (
        "收费",
        "费用",
        "多少钱",
        "免费",
        "缴费",
        "交钱",
        "fee",
        "cost",
        "charge",
        "pay",
        "price",
        "free",
    ),
    "application_materials": (
        "材料",
        "带什么",
        "准备什么",
        "提交什么",
        "证件",
        "资料",
        "material",
        "document",
        "bring",
        "paperwork",
    ),
    "committed_time_limit": (
        "多久",
        "多长时间",
        "几天",
        "时限",
        "办结",
        "多少天",
        "how long",
        "time limit",
        "how many days",
        "deadline",
    ),
    "processing_location": ("在哪", "哪里", "地点", "地址", "去哪", "where", "location", "address"),
    "procedure": (
        "流程",
        "步骤",
        "怎么办",
        "如何办",
        "怎么申请",
        "如何申请",
        "程序",
        "手续",
        "procedure",
        "steps",
        "process",
        "how do i",
        "how to apply",
        "how can i",
    ),
    "requirements": (
        "条件",
        "资格",
        "符合",
        "谁可以",
        "requirement",
        "eligib",
        "condition",
        "qualif",
        "who can",
    ),
    "legal_basis": ("依据", "法律", "法规", "legal basis", "law", "regulation"),
    "online_handling": ("网上", "网办", "线上", "在线", "online", "internet", "website"),
    "consultation_method": ("咨询", "电话", "联系", "contact", "phone", "consult"),
    "processing_time": (
        "办理时间",
        "工作时间",
        "几点",
        "opening hours",
        "office hours",
        "what time",
    ),
    "handling_agency": (
        "哪个部门",
        "谁负责",
        "实施主体",
        "哪个单位",
        "which department",
        "agency",
        "who handles",
    ),
}
_DEFAULT_ASKED = ("requirements", "application_materials", "procedure")
_RELATED = (
    "requirements",
    "application_materials",
    "procedure",
    "committed_time_limit",
    "fee_standard",
    "processing_location",
    "online_handling",
    "consultation_method",
)
_ACTION = ("processing_location", "online_handling", "consultation_method", "procedure")


# --------------------------------------------------------------------------- text analysis (cached)
@lru_cache(maxsize=200_000)
def tokenize(text: str, lang: str) -> tuple[str, ...]:
    """Content words: jieba words (no HMM: faster, dictionary words only) or English words."""
    text = unicodedata.normalize("NFKC", text).lower()
    if lang == "zh":
        # segment's words hold no whitespace (a piece of a block without any, or one character
        # that is none), and the words repeat: each is judged once (`_zh_content_word`'s cache)
        return tuple(filter(_zh_content_word, segment(text, hmm=False)))
    return tuple(w for w in re.findall(r"[a-z0-9]+(?:\.\d+)?", text) if w not in _EN_STOP)


@lru_cache(maxsize=100_000)
def _zh_content_word(w: str) -> bool:
    """A Chinese word that is no stopword, of two characters or more (or a number), with a word
    character."""
    if not w or w in _ZH_STOP:
        return False
    return (len(w) > 1 or w.isdigit()) and bool(_WORDCHAR.search(w))


_UNITS = (
    ("wd", r"个?工作日|working\s+days?|business\s+days?"),
    ("d", r"天|日|days?"),
    ("h", r"小时|hours?"),
    ("mo", r"个月|months?"),
    ("y", r"年|years?"),
    ("yuan", r"元|yuan|rmb|cny"),
)
_QUANTITY = re.compile(
    r"(?:(cny|rmb|¥)\s*)?(\d+(?:\.\d+)?)\s*(?:("
    + "|".join(f"(?P<{k}>{v})" for k, v in _UNITS)
    + r")(?![a-z]))?",
    re.IGNORECASE,
)


# a document's fields repeat across documents ("不收费", a procedure's five steps): 116k texts at
# the paper's scale, 27k distinct (cleared with the other analyses, `clear_caches`)
@lru_cache(maxsize=65_536)
def _numbers(text: str) -> frozenset[str]:
    """Numeric claims as keys: "15|wd" (15 working days), "200|yuan", or a bare "0000"-style number.

    The unit is part of the key so that "4个工作日" does not agree with an unrelated "4" (a floor,
    a window number) elsewhere in the source. List markers ("1.", "(2)") are not claims.
    """
    if not _DIGIT.search(text):  # most of a document's fields hold no number
        return frozenset()
    out = set()
    for m in _QUANTITY.finditer(_INLINE_MARK.sub(" ", text)):
        n = m.group(2)
        n = n.rstrip("0").rstrip(".") if "." in n else n
        unit = "yuan" if m.group(1) else next((k for k, _ in _UNITS if m.group(k)), "")
        out.add(f"{n}|{unit}" if unit else n)
    return frozenset(out)


@dataclass(frozen=True)
class _Doc:
    fields: dict[str, str]
    field_tokens: dict[str, frozenset[str]]
    field_numbers: dict[str, frozenset[str]]
    tokens: frozenset[str]
    numbers: frozenset[str]
    free: bool


def _field_of(m: re.Match[str] | None) -> str | None:
    """The field a "label: value" line's label names (None: no label, or not a field's)."""
    return _LABEL_TO_FIELD.get(m.group(1).strip().lower()) if m else None


@lru_cache(maxsize=20_000)
def _doc(text: str, lang: str) -> _Doc:
    fields: dict[str, str] = {}
    ftoks: dict[str, set[str]] = {}
    other: set[str] = set()
    current: str | None = None
    # Each line is segmented once; the document's words are the union of its fields' words.
    for line in unicodedata.normalize("NFKC", text).splitlines():
        m = _KV.match(line)
        field = _field_of(m)
        if field:
            current, value = field, m.group(2).strip()  # type: ignore[union-attr]
            fields[field] = value
            ftoks[field] = set(tokenize(value, lang))
        elif (
            current and line.strip()
        ):  # a continuation line of a multi-line value (steps, materials)
            fields[current] += "\n" + line.strip()
            ftoks[current].update(tokenize(line.strip(), lang))
        elif line.strip():
            other.update(tokenize(line, lang))
    fnums = {f: _numbers(v) for f, v in fields.items()}
    fee = fields.get("fee_standard", "")
    frozen = {f: frozenset(t) for f, t in ftoks.items()}
    return _Doc(
        fields,
        frozen,
        fnums,
        frozenset(other.union(*frozen.values())),
        _numbers(text),
        bool(_FREE.search(fee)) and not fnums.get("fee_standard"),
    )


@dataclass(frozen=True)
class _Answer:
    norm: str
    sentences: tuple[frozenset[str], ...]
    sentence_chars: tuple[int, ...]
    tokens: frozenset[str]
    numbers: frozenset[str]
    list_lines: int
    duplicate_share: float
    hedges: int
    free_claim: bool
    fee_numbers: frozenset[str]


@lru_cache(maxsize=100_000)
def _answer(text: str, lang: str) -> _Answer:
    norm = unicodedata.normalize("NFKC", text)
    list_lines = len(_LIST_MARK.findall(norm))
    body = _LIST_MARK.sub("", norm)
    parts = [s.strip() for s in _SENT.split(body) if s and s.strip()]
    sents = tuple(frozenset(tokenize(s, lang)) for s in parts)
    keyed = [re.sub(r"\W", "", s) for s in parts]
    dup = 1 - len(set(keyed)) / len(keyed) if keyed else 0.0
    nums = _numbers(norm)
    return _Answer(
        norm,
        sents,
        tuple(len(s) for s in parts),
        frozenset().union(*sents),
        nums,
        list_lines,
        dup,
        len(_HEDGES.findall(norm)),
        bool(_FREE.search(norm)),
        frozenset(k for k in nums if k.endswith("|yuan")),
    )


def asked_fields(question: str, asked_field: str = "") -> tuple[str, ...]:
    """The fields a question asks about: the question set's `asked_field` if valid, else
    keywords."""
    known = _declared_fields(asked_field)
    if known:
        return known
    q = unicodedata.normalize("NFKC", question).lower()
    hits = tuple(f for f, kws in _ASK_KEYWORDS.items() if any(k in q for k in kws))
    return hits or _DEFAULT_ASKED


def _declared_fields(asked_field: str) -> tuple[str, ...]:
    """The question set's `asked_field` as fields (labels mapped to keys); () unless every one is
    a known field."""
    known = [f.strip() for f in re.split(r"[,;|]", asked_field or "") if f.strip()]
    known = [_LABEL_TO_FIELD.get(f.lower(), f) for f in known]
    if known and all(f in FIELD_LABELS["en"] for f in known):
        return tuple(known)
    return ()


def _squash(s: str) -> str:
    """NFKC, lower case, no whitespace: names compared as written together."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", s)).lower()


def item_match(answer_norm: str, item_name: str, answer_tokens: frozenset[str], lang: str) -> float:
    """1: names the gold item; 0.4: its family name without qualifier; 0: names a sibling; else
    partial."""
    gold, ans = _squash(item_name), _squash(answer_norm)
    if not gold:
        return 0.0
    m = re.match(r"^(.*?)\(([^()]*)\)$", gold)
    base, qual = (m.group(1), m.group(2)) if m else (gold, "")
    siblings = {q for q in re.findall(re.escape(base) + r"\(([^()]*)\)", ans) if q != qual}
    if siblings:
        return 0.5 if gold in ans else 0.0  # a named sibling is the near-duplicate confusion
    if gold in ans:
        return 1.0
    if qual and base in ans:  # the family name only: unspecific (it may be the base sibling itself)
        return 0.4
    return _partial_item_match(item_name, answer_tokens, lang)


def _partial_item_match(item_name: str, answer_tokens: frozenset[str], lang: str) -> float:
    """Half the share of the item name's words the answer holds."""
    item_toks = frozenset(tokenize(item_name, lang))
    return 0.5 * len(item_toks & answer_tokens) / len(item_toks) if item_toks else 0.0


_FILLERS = (
    "根据办事指南",
    "办事指南",
    "根据指南",
    "关于",
    "您好",
    "的",
    "是",
    "为",
    "答",
    "accordingto",
    "theguide",
    "the",
    "is",
    "are",
    "for",
)


def equals_field(
    answer: str, fields: dict[str, str], asked: tuple[str, ...], item_name: str, lang: str
) -> str:
    """The asked field whose content the answer states and nothing else ("" when none): the answer,
    without blanks and punctuation, is the field's value (or its phrasing: 否 -> 不收费), optionally
    after the item's name, the field's label and fillers ("关于…的收费标准：不收费")."""
    if not squash(answer):
        return ""
    for f in asked:
        if says_only_value(
            answer, f, fields.get(f, ""), lang, names=(item_name,), fillers=_FILLERS
        ):
            return f
    return ""


def _recall(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


# --------------------------------------------------------------------------- evidence
# `_features` gathers one answer's preset-independent evidence in named steps, each a dict of
# features: the fields asked, the numbers claimed, the coverage of the asked fields, the answer's
# focus on the question, and its form.
def _asked_in_doc(d: _Doc, question: str, asked: str) -> list[str]:
    """The asked fields the document has (else its default ones)."""
    return [f for f in asked_fields(question, asked) if f in d.fields] or [
        f for f in _DEFAULT_ASKED if f in d.fields
    ]


def _claim_features(d: _Doc, a: _Answer, question: str) -> dict[str, Any]:
    """Numbers the answer claims beyond the question's, how many the source holds, and how many
    contradict its fee standard (a "free" claim against a price, or a price against "free")."""
    claims = a.numbers - _numbers(unicodedata.normalize("NFKC", question))
    conflicts = int(a.free_claim and not d.free and bool(d.field_numbers.get("fee_standard")))
    conflicts += len(a.fee_numbers) if d.free else 0
    return {"claims": len(claims) + conflicts, "agree": len(claims & d.numbers)}


def _segments(d: _Doc, fields: list[str], lang: str) -> list[frozenset[str]]:
    """The asked fields' values cut into segments (at separators and sentence ends), as words."""
    segments = [
        frozenset(tokenize(seg, lang))
        for f in fields
        for seg in re.split(r"[;；、,，\n]|(?<=[.。])", d.fields[f])
        if seg.strip()
    ]
    return [s for s in segments if s]


def _coverage_features(d: _Doc, a: _Answer, fields: list[str], lang: str) -> dict[str, Any]:
    """How much of the asked fields, their segments and numbers, the related fields and the
    action fields (where, online, whom to ask, steps) the answer reproduces."""
    asked_cov = [_recall(d.field_tokens[f], a.tokens) for f in fields]
    segments = _segments(d, fields, lang)
    asked_nums = frozenset().union(*(d.field_numbers[f] for f in fields))
    related, actions = _other_fields(d, fields)
    return {
        "asked_cov": _mean(asked_cov),
        "segments_cov": _mean([_recall(s, a.tokens) >= 0.6 for s in segments]),
        "asked_nums_recall": len(asked_nums & a.numbers) / len(asked_nums) if asked_nums else None,
        "related_cov": _mean([_recall(d.field_tokens[f], a.tokens) >= 0.3 for f in related]),
        "action_cov": max([_recall(d.field_tokens[f], a.tokens) for f in actions], default=0.0),
    }


def _other_fields(d: _Doc, fields: list[str]) -> tuple[list[str], list[str]]:
    """The document's related fields not asked, and its action fields."""
    related = [f for f in _RELATED if f in d.fields and f not in fields]
    return related, [f for f in _ACTION if f in d.fields]


def _mean(values: list[float] | list[bool]) -> float:
    """The mean (a share, for truth values); 0.0 for none."""
    return sum(values) / len(values) if values else 0.0


def _focus_features(
    d: _Doc, a: _Answer, q_tokens: frozenset[str], fields: list[str]
) -> dict[str, Any]:
    """Whether the answer stays on the question's topic: source words beyond the question's,
    sentences on the topic, a supported lead, and hedging."""
    topic = (
        q_tokens | frozenset().union(*(d.field_tokens[f] for f in fields)) if fields else q_tokens
    )
    return {
        "specific_words": len((a.tokens & d.tokens) - q_tokens),
        "on_topic": (
            sum(len(s & topic) >= max(1, 0.2 * len(s)) for s in a.sentences) / len(a.sentences)
        )
        if a.sentences
        else 0.0,
        "lead_overlap": max(
            [_recall(s, d.tokens) * bool(s & topic) for s in a.sentences[:2]], default=0.0
        ),
        "hedge_rate": a.hedges / max(1, len(a.sentences)),
    }


def _form_features(a: _Answer, lang: str) -> dict[str, Any]:
    """Length, sentences, list lines, repetition and the share of fluent-length sentences."""
    return {
        "chars": len(a.norm.strip()),
        "sentences": len(a.sentences),
        "list_lines": a.list_lines,
        "duplicate_share": a.duplicate_share,
        "fluent_share": (
            sum(5 <= n <= (120 if lang == "zh" else 300) for n in a.sentence_chars)
            / len(a.sentence_chars)
        )
        if a.sentence_chars
        else 0.0,
    }


@lru_cache(maxsize=100_000)
def _features(
    answer: str, document: str, question: str, item_name: str, asked: str, lang: str
) -> dict[str, Any]:
    """Preset-independent evidence for one answer (shared by its dimensions)."""
    d, a = _doc(document, lang), _answer(answer, lang)
    q_tokens = frozenset(tokenize(question, lang))
    fields = _asked_in_doc(d, question, asked)
    name = item_name or d.fields.get("item_name", "")
    one_field = (
        equals_field(answer, d.fields, tuple(fields), name, lang) if len(fields) == 1 else ""
    )
    claims = _claim_features(d, a, question)
    focus = _focus_features(d, a, q_tokens, fields)
    return {
        "empty": not answer.strip(),
        "equals_field": one_field,
        "overlaps": [len(s & d.tokens) / len(s) for s in a.sentences if len(s) >= 2],
        "precision": _recall(a.tokens, d.tokens),
        **claims,
        **_coverage_features(d, a, fields, lang),
        "item": item_match(a.norm, name, a.tokens, lang),
        **focus,
        **_form_features(a, lang),
    }


# One answer's judgment on one dimension under one preset, by exactly the inputs `judge` reads
# (the context's texts and language, the dimension and its rubric): the paper's 4 judges are two
# presets under two model names, 2 samples each, so each judgment is the same 4 times over. One
# memo per preset (`Preset` is a frozen dataclass: equal presets share one), emptied with the
# other analyses (`RubricJudge.release_caches`, after each slice of answers).
_Judged = tuple[int, tuple[tuple[str, int], ...]]
_MEMOS: dict[Preset, dict[tuple[Any, ...], _Judged]] = {}


def clear_caches() -> None:
    """Forget every cached tokenisation and analysis (for cold-cache benchmarks)."""
    for fn in (tokenize, _numbers, _doc, _answer, _features):
        fn.cache_clear()
    for memo in _MEMOS.values():
        memo.clear()


# --------------------------------------------------------------------------- rules
Points = tuple[int, ...]


@dataclass(frozen=True)
class Rule:
    """How the rubric judge scores one dimension.

    Attributes:
        name: The name it is registered under (a dimension file's `rubric:` names it).
        criteria: Ids of its five criteria, in order (the `detail` keys of its points).
        points: The criteria's points from the evidence `x`, the preset and the language; called
            only for a non-empty answer that is not the asked field's content itself.
        full: A criterion's top points (an answer stating exactly the asked field gets them all).
        grade: The total from the points; None: their sum, raised to the preset's floor.
    """

    name: str
    criteria: tuple[str, ...]
    points: Callable[[dict[str, Any], Preset, str], Points]
    full: int = 2
    grade: Callable[[Points], int] | None = None


RULES: dict[str, Rule] = {}


def rule(
    name: str,
    criteria: tuple[str, ...] | None = None,
    full: int = 2,
    grade: Callable[[Points], int] | None = None,
) -> Callable[[Callable[[dict[str, Any], Preset, str], Points]], Callable[..., Points]]:
    """Register a function `points(x, preset, lang) -> five points` as the rubric rule `name`.

    Its criteria ids are `criteria`, else those of the packaged dimension file `name`
    (cube/judges/dimensions/<name>.yaml).
    """

    def register(fn: Callable[[dict[str, Any], Preset, str], Points]) -> Callable[..., Points]:
        if criteria is not None:
            ids = tuple(criteria)
        elif name in packaged_dimensions():
            ids = packaged_dimensions()[name].criteria
        else:
            raise ValueError(
                f"rubric rule {name!r}: no packaged dimension file of that name; "
                "give its criteria ids"
            )
        RULES[name] = Rule(name, ids, fn, full, grade)
        for memo in _MEMOS.values():  # judgments made under a rule this one replaces
            memo.clear()
        return fn

    return register


def _pts(f: float, p: Preset) -> int:
    return 2 if f >= p.hi else 1 if f >= p.lo else 0


def _supported(x: dict[str, Any], p: Preset) -> float:
    """The share of the answer's sentences supported by the source."""
    ov = x["overlaps"]
    return sum(o >= p.support for o in ov) / len(ov) if ov else 0.0


def _numbers_ok(x: dict[str, Any]) -> float | None:
    """The share of the answer's numeric claims the source holds (None: it claims none)."""
    return x["agree"] / x["claims"] if x["claims"] else None


def _cap_unsupported_number(points: list[int], x: dict[str, Any], at: int) -> Points:
    """A number the source contradicts or lacks is never full marks on criterion `at`."""
    if x["claims"] > x["agree"]:
        points[at] = min(points[at], 1)
    return tuple(points)


@rule("relevance")
def _relevance(x: dict[str, Any], p: Preset, lang: str) -> Points:
    supported, num_ok = _supported(x, p), _numbers_ok(x)
    no_distortion = (
        0.0
        if x["item"] == 0.0 and x["precision"] > 0
        else supported * (num_ok if num_ok is not None else 1.0)
    )
    f = (
        supported,
        x["precision"],
        num_ok if num_ok is not None else supported,
        x["asked_cov"],
        no_distortion,
    )
    return _cap_unsupported_number([_pts(v, p) for v in f], x, at=2)  # reasoning_supported


@rule("specificity")
def _specificity(x: dict[str, Any], p: Preset, lang: str) -> Points:
    concrete = min(1.0, x["specific_words"] / p.concrete_k)
    f = (
        x["item"],
        x["asked_cov"],
        concrete,
        x["on_topic"],
        x["lead_overlap"] * max(0.0, 1 - x["hedge_rate"]),
    )
    return tuple(_pts(v, p) for v in f)


@rule("completeness")
def _completeness(x: dict[str, Any], p: Preset, lang: str) -> Points:
    nums, num_ok = x["asked_nums_recall"], _numbers_ok(x)
    integrity = (nums if nums is not None else x["segments_cov"]) * (
        num_ok if num_ok is not None else 1.0
    )
    f = (x["asked_cov"], x["related_cov"], integrity, x["segments_cov"], x["action_cov"])
    return _cap_unsupported_number([_pts(v, p) for v in f], x, at=2)  # integrity_of_details


@rule("quality")
def _quality(x: dict[str, Any], p: Preset, lang: str) -> Points:
    length = _length_point(x, p, lang)
    organisation = _organisation_point(x, p)
    repetition = _pts(1 - 2 * x["duplicate_share"], p)
    fluent = _pts(x["fluent_share"], p)
    wording = _pts(max(0.0, 1 - x["hedge_rate"] * p.hedge_weight), p)
    return (length, organisation, repetition, fluent, wording)


def _length_point(x: dict[str, Any], p: Preset, lang: str) -> int:
    """2 for a length between good and long (structured, where the preset asks it), else 1 from
    the short length on (or always, by the preset's `short_length_point`), else 0."""
    short, good, long_ = (30, 60, 1200) if lang == "zh" else (80, 150, 3000)
    structured = x["list_lines"] >= 2 or x["sentences"] >= 3
    if good <= x["chars"] <= long_ and short <= x["chars"]:
        if structured or not p.long_needs_structure:
            return 2
    # strict never gives 2 for a short answer: brevity alone is not clarity evidence
    return 1 if x["chars"] >= short or p.short_length_point else 0


def _organisation_point(x: dict[str, Any], p: Preset) -> int:
    """2 for a list, 1 for several sentences, else 0."""
    if x["list_lines"] >= p.list_lines:
        return 2
    return 1 if x["sentences"] >= p.organised_sentences else 0


def _accuracy_grade(points: Points) -> int:
    """10 when all five checks hold, 5 when the item, the asked aspect and the absence of
    contradiction hold (checks 1, 2 and 4), else 0."""
    if all(points):
        return 10
    right_item, asked_aspect, _, no_contradiction, _ = points
    return 5 if right_item and asked_aspect and no_contradiction else 0


@rule("accuracy", full=1, grade=_accuracy_grade)
def _accuracy(x: dict[str, Any], p: Preset, lang: str) -> Points:
    """The accuracy grade 1 / 0.5 / 0 as 10 / 5 / 0 (the `accuracy` prompt's scheme): each of
    its five checks holds (1) or not (0) on the evidence `x`. No floor."""
    checks = (
        x["item"] >= p.hi,  # right_item
        x["asked_cov"] >= p.lo,  # asked_aspect
        x["claims"] <= x["agree"],  # numbers_agree
        _supported(x, p) >= p.lo,  # no_contradiction
        x["asked_cov"] >= p.hi,  # key_info
    )
    return tuple(int(c) for c in checks)


def rule_for(dimension: str, name: str | None = None) -> Rule:
    """The rule of a dimension: `name` (its file's `rubric:`), else the one of its own name."""
    key = name or dimension
    if key not in RULES:
        raise ValueError(
            f"the rubric judge has rules for {list(RULES)} only, not dimension {dimension!r}"
            + (f" (rubric: {name!r})" if name else "")
        )
    return RULES[key]


def score(rule_: Rule, x: dict[str, Any], p: Preset, lang: str) -> tuple[int, dict[str, int]]:
    """One answer's total (0-10) and per-criterion points [+ lenient_floor] under a rule."""
    n = len(rule_.criteria)
    if x["empty"]:
        pts: Points = (0,) * n
    elif x["equals_field"]:  # the asked field's content itself: right, complete, to the point
        pts = (rule_.full,) * n
    else:
        pts = rule_.points(x, p, lang)
    points = dict(zip(rule_.criteria, pts, strict=True))
    if rule_.grade is not None:
        return rule_.grade(pts), points
    total = sum(pts)
    if not x["empty"] and total < p.floor:
        points["lenient_floor"] = p.floor - total
        total = p.floor
    return total, points


def judge(
    context: dict[str, Any], preset: Preset, dimension: str, rubric: str | None = None
) -> tuple[int, dict[str, int]]:
    """Score one answer on one dimension: (total 0-10, per-criterion points [+ lenient_floor]).

    `rubric` names the rule (a dimension file's `rubric:`); default: the rule of `dimension`.
    """
    rule_ = rule_for(dimension, rubric)
    lang = context.get("lang") or (
        "zh" if re.search(r"[\u4e00-\u9fff]", context.get("document", "")) else "en"
    )
    x = _features(
        str(context.get("answer", "")),
        str(context.get("document", "")),
        str(context.get("question", "")),
        str(context.get("item_name") or ""),
        str(context.get("asked_field") or ""),
        lang,
    )
    return score(rule_, x, preset, lang)


def _memo_key(ctx: dict[str, Any]) -> tuple[Any, ...]:
    return (
        str(ctx.get("answer", "")),
        str(ctx.get("document", "")),
        str(ctx.get("question", "")),
        str(ctx.get("item_name") or ""),
        str(ctx.get("asked_field") or ""),
        str(ctx.get("lang") or ""),
        str(ctx.get("dimension")),
        ctx.get("rubric"),
    )


# The replies "0" to "10", one string each: a reply per call made 86k strings "10" at the paper's
# scale (~5 MB of stage 03's peak, its frames of rows held until the table is assembled)
_SCORE_TEXTS = tuple(str(i) for i in range(11))


def _score_text(total: int) -> str:
    """`str(int(total))`, the one string of each total 0-10."""
    return _SCORE_TEXTS[total] if type(total) is int and 0 <= total <= 10 else str(int(total))


class RubricJudge(OfflineModel):
    """The rubric judge as an offline model: reads `Request.context`, never `messages`."""

    fixed_preset: str | None = None  # the named variants ignore options.preset

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        name = self.fixed_preset or str(spec.options.get("preset", "lenient"))
        if name not in PRESETS:
            raise ValueError(
                f"model {spec.model!r}: options.preset {name!r} unknown; "
                f"expected one of {list(PRESETS)}"
            )
        self.preset = PRESETS[name]
        self._memo = _MEMOS.setdefault(self.preset, {})

    def respond(self, request: Request) -> Response:
        ctx = request.context
        dims = ctx.get("dimensions")
        if ctx.get("dimension") is None and dims:  # all-dimensions mode: a JSON reply
            rubrics = ctx.get("rubrics") or {}
            results = {d: judge(ctx, self.preset, d, rubrics.get(d)) for d in dims}
            return Response(
                text=json.dumps({d: s for d, (s, _) in results.items()}),
                detail={d: pts for d, (_, pts) in results.items()},
            )
        key = _memo_key(ctx)
        memo = self._memo
        if key not in memo:
            total, points = judge(ctx, self.preset, key[6], ctx.get("rubric"))
            memo[key] = (total, tuple(points.items()))
        total, items = memo[key]
        return Response(text=_score_text(total), detail=dict(items))

    def release_caches(self) -> None:
        """Forget the cached analyses and segmentations: `score_answers` calls it after each
        slice of answers has been scored by every offline judge (the next slice's texts are
        others), so that the caches hold one slice's texts, not the whole run's (~0.3 GB at the
        paper's scale; the segmentations alone ~30 MB, still held by the screen after judging).
        Keeping jieba's block cuts between slices (the documents share most of theirs) saved
        ~0.4 s of CPU at the paper's scale but raised stage 03's peak by ~6 MB: not kept."""
        super().release_caches()
        clear_caches()
        clear_segment_caches()


@register_offline("rubric")
class Rubric(RubricJudge):
    """`provider: offline, model: rubric, options: {preset: lenient|strict}`."""


@register_offline("rubric-lenient")
class RubricLenient(RubricJudge):
    fixed_preset = "lenient"


@register_offline("rubric-strict")
class RubricStrict(RubricJudge):
    fixed_preset = "strict"
