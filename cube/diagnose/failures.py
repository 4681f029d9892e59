"""Failure patterns: why a rag answer scored low, from evidence (never guessed).

An answer is *low* when its jury score (mean over judges of each judge's mean over dimensions,
on the 0-10 scale; unscored items ignored) is below `diagnostics.low_score_below`. Every low
answer is tested against each pattern below; it gets all patterns that hold (`patterns`) and
one `primary` pattern, the first that holds in this order (the most specific cause first), or
`unexplained` when none does. Primary counts therefore sum to the low answers.

=========================  =====================================================================
pattern                    evidence
=========================  =====================================================================
empty                      the answer is blank (or the answering call failed)
truncated                  the answering call stopped at its token limit (`finish_reason: length`)
wrong_near_duplicate       the first retrieved document is the gold's near-duplicate (same family,
                           other region or variant;
                           `cube.diagnose.near_duplicates.confusion_causes`)
retrieval_miss             the gold document is not in the retrieved list (rank 0)
refusal_despite_gold       the gold document was retrieved, yet the answer declines
                           (`cube.diagnose.refusal.is_refusal`)
low_rank                   the gold document was retrieved at rank >= `diagnostics.low_rank_from`
number_mismatch            the answer states a number (fee, time, count) found neither in the gold
                           document nor in the question; list markers ("1.", "2、", "（1）", "(2)",
                           "第3步", "①", "Step 2") are numbering, not numbers claimed from the
                           source, when item text follows them or they run 1, 2, 3
                           ("收费标准：30、60元", "40. 个工作日", "费用(15)元" claim 30, 40, 15;
                           `claimed_numbers`), and so are citations "[2]", "【3】";
                           "1,000" = "1000", "15.0" = "15", "七个工作日" = "7个工作日", "seven
                           days" = "7 days" (a number word with a unit)
field_missing              the gold was retrieved but the answer does not say what the asked field's
                           value (gold document) means (`field_stated`): a yes/no or fee value by
                           its sense ("否" = "不收费" = "免费" = "no fee"), a value's numbers by
                           value with their units ("10" = "10个工作日" = "十个工作日"), other text
                           by its segments (split at 、，；。 and line breaks; at least 80 % of
                           them, so all of up to four, found with rapidfuzz
                           partial_ratio >= `field_match_below` in the answer, both without blanks,
                           punctuation and list numbering); a placeholder value (无, 暂无, /) has
                           nothing to miss
unsupported                more than `unsupported_share_above` of the answer's clauses are not found
                           in the gold document (under half of a clause's character bigrams)
judge_disagreement         the judges' scores of the answer differ by more than
                           `diagnostics.judge_disagreement_above` points
=========================  =====================================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cube.config.phrasing import YES_NO_FIELDS, is_missing, says_only_value, yes_no
from cube.config.schema import known_retrieval
from cube.diagnose.refusal import is_refusal

PATTERNS: tuple[str, ...] = (
    "empty",
    "truncated",
    "wrong_near_duplicate",
    "retrieval_miss",
    "refusal_despite_gold",
    "low_rank",
    "number_mismatch",
    "field_missing",
    "unsupported",
    "judge_disagreement",
)
UNEXPLAINED = "unexplained"
SUGGESTIONS: dict[str, str] = {
    "empty": "inspect the answering calls' errors and re-run the answering stage (`--only 02.. "
    "--force`)",
    "truncated": "raise the answering model's max_tokens or ask for shorter answers",
    "wrong_near_duplicate": "filter retrieval by the region the question names "
    "(systems[].region_filter: question) and render the variant into the documents",
    "retrieval_miss": "improve retrieval (item-name and alias matching, hybrid search) or raise "
    "TOP-N",
    "refusal_despite_gold": "tell the answering prompt to answer from the retrieved guides, and "
    "check that the gold document's text reaches the model (chunking, context length)",
    "low_rank": "re-rank the retrieved list (a cross-encoder) or put fewer, better documents in "
    "the prompt",
    "field_missing": "make the prompt answer the asked aspect (fee, time limit, materials) "
    "explicitly, quoting the guide's field",
    "number_mismatch": "quote numbers (fees, time limits) verbatim from the guide; check that "
    "neighbouring region documents in the context are not mixed in",
    "unsupported": "constrain the answer to the retrieved guides (cite them) and lower the "
    "temperature",
    "judge_disagreement": "the score is uncertain: add a judge or human ratings (notebook 07) for "
    "these answers",
    UNEXPLAINED: "read these answers in the judgment browser: no evidence-based pattern applies",
}
_NUM = re.compile(r"\d+(?:\.\d+)?")
# List numbering, removed before numbers are compared with the source. Candidates: an item number
# opening a line (after blanks, a bullet or a markdown "#") closed by ". 、 ) ）" (not a decimal
# point: "1.5" stays a number); after a separator (：；，。！？) closed by "、 ) ）" or by "." with
# the item's text right behind it ("：1.身份证"; "Fee: 50. Time…" keeps its 50; a colon after a
# digit is a clock time: "9:30、" keeps its 30); a parenthesised number. A candidate is numbering
# only when item text follows it (not another number or a unit: "收费标准：30、60元",
# "40. 个工作日", "12.Yuan" claim 30, 40, 12) or it belongs to a run of candidates (n-1 before it
# or n+1 after it: "1. 30元\n2. 身份证", "…；4、7个工作日后领取"); a parenthesised one also needs
# to stand at a line start, after a separator or a blank, or in a run ("费用(15)元" claims 15).
# Weaker candidates, numbering only in a run: after a blank inside a line ("：1.身份证 2.照片",
# "1) ID card 2) 1 photo"), or, with item text behind it, after a separator closed by "." and a
# blank ("Steps: 1. book; 2. pay"). A number in square brackets ("【1】", a citation "[2]") is
# numbering unless a unit follows it ("[15]元"). A step ("第3步", "Step 2") and a circled digit
# are always numbering.
_CJK = "\u4e00-\u9fff"
_SEPARATORS = "：:；;，,。！？!?"
_AFTER_SEPARATOR = r"(?:(?<!\d)[：:]|[；;，,。！？!?])"  # "9:30": a clock time, not a separator
_CANDIDATES = re.compile(
    "|".join(
        (
            r"^[ \t>*\-•#]*(?P<line>\d{1,2})[ \t]*[.．、)）](?!\d)",
            _AFTER_SEPARATOR + r"[ \t]*(?P<sep>\d{1,2})(?:[、)）]|[.．](?=[" + _CJK + r"A-Za-z]))",
            _AFTER_SEPARATOR + r"[ \t]*(?P<sepdot>\d{1,2})[.．](?=[ \t])",
            r"(?<=[ \t])(?P<blank>\d{1,2})(?:[、)）]|[.．](?![\d.．]))",
            r"[（(][ \t]*(?P<par>\d{1,2})[ \t]*[)）]",
            r"[\[【][ \t]*(?P<square>\d{1,2})[ \t]*[\]】]",
        )
    ),
    re.MULTILINE,
)
_ALWAYS_MARKERS = re.compile(
    "|".join(
        (
            r"第[ \t]*\d{1,2}[ \t]*(?:步|点|项要求|个步骤)",
            r"\bstep[ \t]*\d{1,2}\b",
            r"[\u2460-\u2473\u2776-\u277f\u2780-\u2793]",
        )
    ),
    re.IGNORECASE,
)
# What can follow a number but never opens an item's text: another number, a currency, a time or a
# count unit ("1、本人身份证", "1、年满18周岁", "1、周一至周五" are item text).
_UNITS = (
    r"元|块钱|角|天|日内|工作日|个(?:工作日|自然日|月|小时|星期|季度)|小时|分钟|周岁|岁|倍|万|千|百|亿"
    r"|张|份|页|次|(?:yuan|rmb|cny|usd|dollars?|days?|(?:working|business|calendar)[ \t]+days?"
    r"|hours?|minutes?"
    r"|weeks?|months?|years?|pages?|cop(?:y|ies)|times|percent|per)\b"
)
_UNIT = re.compile(r"[ \t]*(?:[%％]|" + _UNITS + ")", re.IGNORECASE)
_NOT_ITEM_TEXT = re.compile(
    r"[ \t]*(?:$|[\d%％]|[.．]\d|" + _UNITS + ")", re.IGNORECASE | re.MULTILINE
)
# A Chinese numeral or an English number word with a time, money or count unit ("七个工作日",
# "一百二十元", "两张", "twenty-five days") is a number; without one it is no claim ("一次性告知",
# "一个窗口", "第一", "one of the documents").
_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_NUMERAL = re.compile(
    "([" + "".join(_CN_DIGITS) + "十][" + "".join(_CN_DIGITS) + "十百千万]*)"
    "(?=个(?:工作日|自然日|月|小时)|工作日|小时|分钟|天|日内|元|年内|周岁|岁|张|份|页)"
)
_EN_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_EN_NUMERAL = re.compile(
    r"\b(?:(?P<tens>" + "|".join(_EN_TENS) + r")(?:[ -](?P<ones>one|two|three|four|five|six|seven"
    r"|eight|nine))?|(?P<word>" + "|".join(sorted(_EN_WORDS, key=len, reverse=True)) + r"))"
    r"(?=[ \t-]+(?:(?:working|business|calendar)[ \t]+)?(?:days?|yuan|hours?|weeks?|months?|years?"
    r"|minutes?|cop(?:y|ies)|photos?|pages?)\b)",
    re.IGNORECASE,
)
_WIDE = str.maketrans("０１２３４５６７８９．，", "0123456789.,")
_SENT = re.compile(r"[。！？!?\n；;：:]+|(?<=[a-z])\.\s")
_WORD = re.compile(r"[\W_]+")


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == ""


def jury_scores(
    scores: pd.DataFrame, system: str, judges: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per rag question of `system`: `score` (mean over judges of the mean over dimensions, 0-10)
    and `spread` (largest minus smallest judge mean; NaN with fewer than two scored judges)."""
    s = scores[(scores["system"] == system) & (scores["set"] == "rag")]
    if judges is not None:
        s = s[s["judge"].isin(list(judges))]
    s = s.assign(score=pd.to_numeric(s["score"], errors="coerce"))
    per_judge = s.groupby(["question_id", "judge"])["score"].mean().unstack("judge")
    out = pd.DataFrame(
        {
            "score": per_judge.mean(axis=1),
            "spread": (per_judge.max(axis=1) - per_judge.min(axis=1)).where(
                per_judge.count(axis=1) > 1
            ),
        }
    )
    return out.reset_index()


def _chinese_value(numeral: str) -> int:
    """The value of a Chinese numeral ("十五" 15, "一百零五" 105, "两万" 20000)."""
    total = section = digit = 0
    for ch in numeral:
        if ch in _CN_DIGITS:
            digit = _CN_DIGITS[ch]
        elif ch == "万":
            total += (section + digit) * 10000
            section = digit = 0
        else:
            section += (digit or 1) * _CN_UNITS[ch]
            digit = 0
    return total + section + digit


def _english_value(m: re.Match[str]) -> str:
    if m.group("word"):
        return str(_EN_WORDS[m.group("word").lower()])
    return str(_EN_TENS[m.group("tens").lower()] + _EN_WORDS[(m.group("ones") or "zero").lower()])


def _numbers(text: str) -> set[float]:
    t = _CN_NUMERAL.sub(lambda m: str(_chinese_value(m.group(1))), text)
    t = _EN_NUMERAL.sub(_english_value, t)
    t = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", t.translate(_WIDE))
    return {float(n) for n in _NUM.findall(t)}


def claimed_numbers(answer: str, question: str = "") -> set[float]:
    """The numbers an answer claims (fees, time limits, counts): every number in it except its list
    numbering (`strip_list_numbering`) and the numbers the question itself states."""
    return _numbers(strip_list_numbering(answer.translate(_WIDE))) - _numbers(question)


def strip_list_numbering(text: str) -> str:
    """`text` with its list numbering blanked (see `_CANDIDATES`): what remains are
    claimed numbers."""
    found = [_candidate(text, m) for m in _CANDIDATES.finditer(text)]
    keep = list(text)
    for i, (start, end, n, kind, text_follows) in enumerate(found):
        in_run = any(f[2] == n - 1 for f in found[:i]) or any(f[2] == n + 1 for f in found[i + 1 :])
        if _is_numbering(text, end, kind, text_follows, in_run):
            keep[start:end] = " " * (end - start)
    return _ALWAYS_MARKERS.sub(" ", "".join(keep))


def _candidate(text: str, m: re.Match[str]) -> tuple[int, int, int, str, bool]:
    """A possible list number: (start, end, item number, kind, item text follows); a number in
    parentheses is an item only after a blank, a separator or a list mark."""
    kind = str(m.lastgroup)
    text_follows = not _NOT_ITEM_TEXT.match(text, m.end())
    if kind == "par":
        before = text[m.start() - 1] if m.start() else "\n"
        text_follows = text_follows and (
            before.isspace() or before in _SEPARATORS or before in ">*-•"
        )
    return (m.start(), m.end(), int(m.group(kind)), kind, text_follows)


def _is_numbering(text: str, end: int, kind: str, text_follows: bool, in_run: bool) -> bool:
    """Whether a candidate is list numbering: a square-bracketed number unless a unit follows, a
    bare number in a run of consecutive ones, a number with a separating dot when item text follows
    and it is in a run, any other kind when item text follows or it is in a run."""
    if kind == "square":
        return not _UNIT.match(text, end)
    if kind == "blank":
        return in_run
    if kind == "sepdot":
        return text_follows and in_run
    return text_follows or in_run


def number_mismatch(answer: str, gold: str, question: str = "") -> set[float]:
    """The claimed numbers of `answer` (`claimed_numbers`) that the gold document does not state."""
    return claimed_numbers(answer, question) - _numbers(gold)


# Sayings of "no fee" / "a fee is charged" and "online" / "not online" (checked negation first).
_SAYS_NO = {
    "fee_standard": re.compile(
        r"不收费|不收取|免费|免收|无需(?:缴|交|收|付)?费|不需要?(?:缴|交|收|付)费|无(?:任何)?费用|没有(?:任何)?费用"
        r"|(?:不需要?|无需|无须|不用|不必)(?:缴纳|交纳|支付|缴|交)[^\W\d_]{0,4}?费用"
        r"|零收费|不用(?:缴|交|付)?(?:钱|费)|\bno (?:fee|charge|cost)s?\b|free of charge|\bfree\b"
        r"|not charged|without charge",
        re.IGNORECASE,
    ),
    "online_handling": re.compile(
        r"不(?:能|可|可以|支持|提供)(?:在)?(?:网上|线上|在线)|无法(?:在)?(?:网上|线上|在线)|仅(?:限)?(?:窗口|现场)"
        r"|cannot be (?:handled|done|applied for) online|not (?:available )?online"
        r"|in person only",
        re.IGNORECASE,
    ),
}
_SAYS_YES = {
    "fee_standard": re.compile(
        r"(?<![不免])(?:需要|需)?(?:缴|交|收|付)费|(?:缴纳|交纳|支付|缴|交)[^\W\d_]{0,4}?费用"
        r"|收取|\d\s*元|\byuan\b|\bfee (?:is|are) charged"
        r"|\bcharges?\b|\bcosts?\b",
        re.IGNORECASE,
    ),
    "online_handling": re.compile(
        r"(?<![不能可无])(?:可以?|能|支持)?(?:在)?(?:网上|线上|在线)(?:办理|申请|提交|办)|网办"
        r"|can be (?:handled|done|applied for) online|\bonline\b",
        re.IGNORECASE,
    ),
}
_PUNCT = re.compile(r"[\W_]+")
_SEGMENT = re.compile(r"[、，,；;。\n]+")


def _plain(text: str) -> str:
    """Text without list numbering, blanks and punctuation, lower case (full-width digits read)."""
    return _PUNCT.sub("", strip_list_numbering(text.translate(_WIDE)).lower())


def field_stated(field: str, value: str, answer: str, match_from: float = 80.0) -> bool:
    """True when `answer` says what `value` (the gold's `field`) means; the rules are in the module
    doc (pattern field_missing). A missing or placeholder value has nothing to miss (True)."""
    if is_missing(value) or says_only_value(answer, field, value):
        # nothing to miss, or the value itself, maybe after the field's label ("是否收费：否")
        return True
    flag = yes_no(value) if field in YES_NO_FIELDS else None
    if flag is not None:  # a yes/no or free/charged value: compare the sense
        return _flag_stated(field, flag, answer)
    by_numbers = _numbers_stated(value, answer)
    return by_numbers if by_numbers is not None else _text_stated(value, answer, match_from)


def _flag_stated(field: str, flag: bool, answer: str) -> bool:
    """A yes/no or free/charged value: the answer says its sense (a saying of "no" read first)."""
    if says_only_value(answer, field, "否" if flag else "是"):  # the other flag after a label
        return False
    says_no = bool(_SAYS_NO[field].search(answer))
    says_yes = bool(_SAYS_YES[field].search(_SAYS_NO[field].sub(" ", answer)))
    return says_no if flag is False else (says_yes and not says_no)


def _numbers_stated(value: str, answer: str) -> bool | None:
    """A value with numbers (fee, time limit): False when one of its numbers, said in any form, is
    not in the answer; True when all are and the numbers are the value ("10个工作日"); None when
    the value has no numbers, or more than its numbers (its text decides, `_text_stated`)."""
    wanted = claimed_numbers(value)
    if not wanted:
        return None
    if not wanted <= _numbers(answer.translate(_WIDE)):
        return False
    return True if len(_plain(_NUM.sub("", value.translate(_WIDE)))) <= 8 else None


def _text_stated(value: str, answer: str, match_from: float) -> bool:
    """At least 80 % of the value's segments (split at its commas and stops) partly match the
    answer at `match_from` or more (rapidfuzz's partial ratio, without numbering and
    punctuation)."""
    from rapidfuzz import fuzz

    plain_answer = _plain(answer)
    segments = [p for p in (_plain(s) for s in _SEGMENT.split(value)) if len(p) >= 2] or [
        _plain(value)
    ]
    found = [fuzz.partial_ratio(p[:120], plain_answer) >= match_from for p in segments if p]
    return sum(found) >= 0.8 * len(found)


def _bigrams(text: str) -> set[str]:
    t = _WORD.sub("", text.lower())
    return {t[i : i + 2] for i in range(len(t) - 1)}


def _supported_share(answer: str, gold: str) -> float:
    """Share of the answer's clauses (split at 。！？；：and line breaks) of which at least half the
    character bigrams occur in the gold document (1.0 when there is nothing to check)."""
    ref = _bigrams(gold)
    clauses = [b for b in (_bigrams(t) for t in _SENT.split(answer)) if len(b) >= 2]
    if not clauses or not ref:
        return 1.0
    return float(np.mean([len(b & ref) / len(b) >= 0.5 for b in clauses]))


def evidence(
    row: pd.Series, gold_text: str, field_value: str, confusion: str, params: Any, field: str = ""
) -> list[str]:
    """The patterns that hold for one answer (see the module doc), in `PATTERNS` order; `field` is
    the asked field's key (its `field_value` in the gold document is judged by `field_stated`)."""
    answer = "" if _blank(row.get("answer")) else str(row["answer"])
    rank = int(row.get("rank", 0) or 0)
    said = _AnswerSaid(answer, gold_text, str(row.get("question", "") or ""), rank)
    return [
        *_delivery_patterns(row, answer),
        *_retrieval_patterns(rank, answer, confusion, params),
        *_content_patterns(said, params, field, field_value),
        *_judge_patterns(row, params),
    ]


@dataclass(frozen=True)
class _AnswerSaid:
    """What the content patterns read of one answer: its text, the gold document's, the question
    and the gold's rank (0: not retrieved)."""

    answer: str
    gold_text: str
    question: str
    rank: int


def _delivery_patterns(row: pd.Series, answer: str) -> list[str]:
    """`empty` (no answer text, or the call failed) and `truncated` (cut at the length limit)."""
    checks = (
        ("empty", not answer.strip() or not _blank(row.get("error"))),
        ("truncated", str(row.get("finish_reason") or "") == "length"),
    )
    return [name for name, holds in checks if holds]


def _retrieval_patterns(rank: int, answer: str, confusion: str, params: Any) -> list[str]:
    """`wrong_near_duplicate`, `retrieval_miss`, `refusal_despite_gold` and `low_rank`."""
    checks = (
        ("wrong_near_duplicate", bool(confusion)),
        ("retrieval_miss", rank == 0),
        ("refusal_despite_gold", rank > 0 and bool(answer) and is_refusal(answer)),
        ("low_rank", rank >= params.low_rank_from),
    )
    return [name for name, holds in checks if holds]


def _content_patterns(said: _AnswerSaid, params: Any, field: str, field_value: str) -> list[str]:
    """`number_mismatch` (the more specific cause than a missing field), `field_missing` and
    `unsupported`: what an answer says against the gold document."""
    if not said.answer:
        return []
    checks = (
        ("number_mismatch", _number_mismatch(said)),
        ("field_missing", _field_missing(said, params, field, field_value)),
        ("unsupported", _unsupported(said, params)),
    )
    return [name for name, holds in checks if holds]


def _number_mismatch(said: _AnswerSaid) -> bool:
    return bool(said.gold_text) and bool(
        number_mismatch(said.answer, said.gold_text, said.question)
    )


def _field_missing(said: _AnswerSaid, params: Any, field: str, field_value: str) -> bool:
    """The asked field's value not said, the gold retrieved (a refusal is its own pattern)."""
    return (
        said.rank > 0
        and bool(field)
        and not is_refusal(said.answer)
        and not field_stated(field, field_value, said.answer, params.field_match_below)
    )


def _unsupported(said: _AnswerSaid, params: Any) -> bool:
    """More than `unsupported_share_above` of the answer's clauses not in the gold document (a
    refusal states nothing to support)."""
    if not said.gold_text or is_refusal(said.answer):
        return False
    return 1 - _supported_share(said.answer, said.gold_text) > params.unsupported_share_above


def _judge_patterns(row: pd.Series, params: Any) -> list[str]:
    """`judge_disagreement`: the judges' spread on the answer above `judge_disagreement_above`."""
    spread = row.get("spread")
    if spread is not None and np.isfinite(spread) and spread > params.judge_disagreement_above:
        return ["judge_disagreement"]
    return []


def _with_question(rag: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """The question's text, asked field and style beside each answer ("" or a placeholder when
    the questions table has no such column)."""
    q = questions.set_index("question_id")
    rag["question"] = rag["question_id"].map(q["question"]) if "question" in q else ""
    rag["asked_field"] = (
        rag["question_id"].map(q["asked_field"]).fillna("") if "asked_field" in q else ""
    )
    rag["style"] = (
        rag["question_id"].map(q["style"]).fillna("").replace("", "(llm or file)")
        if "style" in q
        else "(none)"
    )
    return rag


def _gold_texts(rag: pd.DataFrame, corpus: pd.DataFrame) -> pd.Series:
    """The gold document's department beside each answer (set on `rag`, "(none)" when unknown),
    and its text (returned, "" when unknown); `corpus` indexed by doc_id as text."""
    gold = rag["doc_id"].astype(str)
    rag["department"] = (
        gold.map(corpus["department"]).fillna("").replace("", "(none)")
        if "department" in corpus
        else "(none)"
    )
    if "text" not in corpus:
        return pd.Series("", index=rag.index)
    return gold.map(corpus["text"]).fillna("")


def _low_answer_patterns(
    row: pd.Series, corpus: pd.DataFrame, gold_text: str, confusion: str, params: Any
) -> list[str]:
    """`evidence` of a low answer, with the asked field's value in its gold document (`corpus`
    indexed by doc_id as text; "" when the field or the document is unknown)."""
    field, doc = row["asked_field"], str(row["doc_id"])
    value = str(corpus.at[doc, field]) if field and field in corpus and doc in corpus.index else ""
    return evidence(row, gold_text, "" if _blank(value) else value, confusion, params, field)


def classify(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    system: str,
    params: Any = None,
    judges: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every rag answer of `system` with a known retrieval outcome: its jury `score`, `spread`,
    `low`, the `patterns` that hold and the `primary` one (low answers only; "" otherwise), with
    the question's `style`, the gold's `department` and the `question` text.

    `params`: a `cube.config.params.DiagnosticsParams` (defaults when None)."""
    from cube.config.sections import DiagnosticsParams
    from cube.diagnose.near_duplicates import confusion_causes

    p = params or DiagnosticsParams()
    rag = answers[(answers["system"] == system) & (answers["set"] == "rag")]
    if "retrieval_ok" in rag:
        rag = rag[known_retrieval(rag)]
    rag = rag.merge(jury_scores(scores, system, judges), on="question_id", how="left")
    rag = _with_question(rag, questions)
    c = corpus.set_index(corpus["doc_id"].astype(str))
    texts = _gold_texts(rag, c)
    causes = confusion_causes(rag, corpus)["cause"].tolist()
    rag["low"] = rag["score"] < p.low_score_below
    patterns = [
        _low_answer_patterns(row, c, str(texts.iloc[i]), causes[i], p) if row["low"] else []
        for i, (_, row) in enumerate(rag.iterrows())
    ]
    rag["patterns"] = patterns
    rag["primary"] = [
        (found[0] if found else UNEXPLAINED) if low else ""
        for found, low in zip(patterns, rag["low"], strict=True)
    ]
    keep = [
        "question_id",
        "doc_id",
        "system",
        "question",
        "answer",
        "rank",
        "score",
        "spread",
        "low",
        "patterns",
        "primary",
        "style",
        "department",
        "asked_field",
    ]
    return rag[[k for k in keep if k in rag]].reset_index(drop=True)


def pattern_table(classified: pd.DataFrame, examples: int = 2) -> pd.DataFrame:
    """One row per pattern (and `unexplained`): `count` (primary), `any` (answers where it holds),
    `share` of the low answers, `examples` (question ids) and the `suggestion`; most
    frequent first."""
    low = classified[classified["low"]]
    rows = []
    for pat in (*PATTERNS, UNEXPLAINED):
        prim = low[low["primary"] == pat]
        holds = (
            low["patterns"].map(lambda ps, pat=pat: pat in ps)
            if pat != UNEXPLAINED
            else low["primary"] == pat
        )
        rows.append(
            {
                "pattern": pat,
                "count": len(prim),
                "any": int(holds.sum()),
                "share": len(prim) / len(low) if len(low) else np.nan,
                "examples": ", ".join(map(str, prim["question_id"].head(examples))),
                "suggestion": SUGGESTIONS[pat],
            }
        )
    out = pd.DataFrame(rows)
    return out.sort_values(["count", "any"], ascending=False, kind="stable").reset_index(drop=True)


def examples_table(classified: pd.DataFrame, per_pattern: int = 2, width: int = 80) -> pd.DataFrame:
    """Two example answers per primary pattern (question, answer cut to `width`, score, rank)."""
    low = classified[classified["low"]]
    parts = [g.head(per_pattern) for _, g in low.groupby("primary", sort=True)]
    if not parts:
        return pd.DataFrame(
            columns=["primary", "question_id", "question", "answer", "rank", "score"]
        )
    out = pd.concat(parts)[["primary", "question_id", "question", "answer", "rank", "score"]].copy()
    for col in ("question", "answer"):
        out[col] = out[col].fillna("").astype(str).map(lambda t: t[:width] + "…" * (len(t) > width))
    return out.reset_index(drop=True)


def by_category(classified: pd.DataFrame, by: str) -> pd.DataFrame:
    """Low answers per value of `by` and primary pattern (`by, pattern, count`); sums to the
    low answers."""
    low = classified[classified["low"]]
    return (
        low.groupby([by, "primary"])
        .size()
        .rename("count")
        .reset_index()
        .rename(columns={"primary": "pattern"})
    )


def top_patterns(classified: pd.DataFrame, n: int = 3) -> list[dict[str, Any]]:
    """The `n` most frequent primary patterns (count > 0) for the decision page."""
    t = pattern_table(classified)
    t = t[(t["count"] > 0) & (t["pattern"] != UNEXPLAINED)].head(n)
    return [
        {
            "pattern": r.pattern,
            "count": int(r.count),
            "share": float(r.share),
            "suggestion": r.suggestion,
            "examples": r.examples,
        }
        for r in t.itertuples()
    ]


def summary(classified: pd.DataFrame, params: Any = None) -> dict[str, Any]:
    """For `results.json`: how many answers were low and the count of each primary pattern."""
    from cube.config.sections import DiagnosticsParams

    p = params or DiagnosticsParams()
    low = classified[classified["low"]]
    scored = int(classified["score"].notna().sum())
    return {
        "answers": len(classified),
        "scored": scored,
        "low": len(low),
        "low_score_below": p.low_score_below,
        "patterns": {k: int(v) for k, v in low["primary"].value_counts().items()},
        "top": top_patterns(classified),
    }


def patterns_sentence(result: dict[str, Any]) -> str:
    """The top patterns in one sentence for the decision page."""
    if not result.get("scored"):
        return "No rag answer has a jury score, so no failure pattern can be computed."
    if not result["low"]:
        return (
            f"No rag answer scores below {result['low_score_below']:g} of 10 on the jury: "
            "no failure pattern."
        )
    top = "; ".join(
        f"{t['pattern'].replace('_', ' ')} {t['count']} ({t['share']:.0%})" for t in result["top"]
    )
    return (
        f"{result['low']} of {result['scored']} rag answers score below "
        f"{result['low_score_below']:g} of 10; top failure patterns: {top or 'none identified'}."
    )
