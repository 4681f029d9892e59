"""What an answer claims against its gold document: the numbers it states (`claimed_numbers`,
its list numbering left out: `strip_list_numbering`; Chinese and English number words read) and
whether it says what a field's value means (`field_stated`). The failure patterns
`number_mismatch` and `field_missing` (`cube.diagnose.failures`, whose module docstring states the
rules) are read from them.
"""

from __future__ import annotations

import re

from cube.config.phrasing import YES_NO_FIELDS, is_missing, says_only_value, yes_no

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
    """True when `answer` says what `value` (the gold's `field`) means; the rules are in
    `cube.diagnose.failures`' module doc (pattern field_missing). A missing or placeholder value
    has nothing to miss (True)."""
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
