"""A deterministic refusal detector: did the answer decline (say it does not know / cannot
answer from what it has) rather than give the information?

The detector looks for decline phrasings in the answer's opening (the first `OPENING_CHARS`
characters, where a decline is stated; a long answer that only mentions "无法" deep inside a
procedure is not a decline). A phrase counts only when the opening does not also carry
concrete content markers (`CONTENT_MARKERS`: "根据办事指南", "according to the guide", ...).

Decline phrases (case-insensitive; `DECLINE_PATTERNS` is the full list):

- zh: 没有/暂无/未找到/未检索到 + 相关 (信息|资料|指南|内容|记录); 无法 (提供|回答|确定|查询|找到|获取);
  我 (并) 不 (太) (清楚|确定|了解|知道), 不太清楚; 抱歉…(无法|不能|没有); 超出 (了) …范围;
  (知识库|文档|指南) 中 (没有|未包含|未提及|未载明); 不在…范围;
- en: "I don't know", "I do not know", "I'm not sure", "I cannot (answer|provide|find|help)",
  "I can't ...", "I don't have (information|access|the ...)", "no (relevant) information",
  "not (found|covered|available) in (the|my) (documents|knowledge base|sources)", "unable to (find|answer|provide)",
  "outside (the|my) scope", "there is no ... in the provided".

Documented limits: a detector of phrasings, not of meaning; tested on a table of real-world
declines and non-declines (tests/test_refusal.py).
"""

from __future__ import annotations

import re

OPENING_CHARS = 160

DECLINE_PATTERNS: tuple[str, ...] = (
    # zh
    r"(没有|暂无|未能?找到|未检索到|未查询到|查不到|找不到)[^。，,.]{0,12}(相关|对应|有关|可供参考)?的?(信息|资料|指南|办事指南|内容|记录|事项|规定|说明)",
    r"无法(为您)?(提供|回答|确定|查询|找到|获取|给出|确认|解答)",
    r"(我|本人|目前)(也)?(并)?不(太)?(清楚|确定|了解|知道)",
    r"不太清楚",
    r"抱歉[^。]{0,20}(无法|不能|没有)",
    r"超出(了)?[^。]{0,12}范围",
    r"(知识库|资料库|文档|指南)中?(并)?(没有|未(包含|提及|载明|涉及|收录))",
    r"不在[^。]{0,10}(服务|回答|知识)?范围",
    # en
    r"\bi (really )?(don'?t|do not) know\b",
    r"\bi'?m not (sure|certain|able)\b",
    r"\bi am not (sure|certain|able)\b",
    r"\bi (cannot|can'?t|can not|am unable to|'m unable to) (answer|provide|find|help|determine|confirm|give)",
    r"\bi (don'?t|do not) have (any )?(specific |relevant |the )?(information|access|details|data|guide)",
    r"\bno (relevant |specific |such )?(information|record|documents?|guide) (is |was )?(available|found|about|on|in)",
    r"\bnot (found|covered|available|mentioned|included) in (the|my|our) (provided )?"
    r"(documents?|knowledge base|sources?|context|guides?)",
    r"\bunable to (find|answer|provide|locate|determine)",
    r"\boutside (of )?(the |my )?(scope|knowledge)",
    r"\bthere is no [^.]{0,40} in the (provided|given|retrieved)",
)
CONTENT_MARKERS: tuple[str, ...] = ("根据办事指南", "办事指南载明", "according to the service guide",
                                    "according to the guide")

_DECLINE = re.compile("|".join(f"(?:{p})" for p in DECLINE_PATTERNS), re.IGNORECASE)


def is_refusal(answer: str | None) -> bool:
    """True when the answer declines (see the module doc); an empty answer is not a refusal
    (it is an empty answer, its own failure pattern)."""
    text = (answer or "").strip()
    if not text:
        return False
    head = text[:OPENING_CHARS]
    low = head.lower()
    if any(m.lower() in low for m in CONTENT_MARKERS):
        return False
    return bool(_DECLINE.search(head))


def refusal_accuracy(declined: list[bool], answerable: list[bool]) -> dict[str, float | int]:
    """Refusal accuracy (share of unanswerable questions the system declined) and the
    false-refusal rate (share of answerable questions it declined); NaN over no questions."""
    un = [d for d, a in zip(declined, answerable, strict=True) if not a]
    ans = [d for d, a in zip(declined, answerable, strict=True) if a]
    nan = float("nan")
    return {"refusal_accuracy": sum(un) / len(un) if un else nan, "n_unanswerable": len(un),
            "false_refusal_rate": sum(ans) / len(ans) if ans else nan, "n_answerable": len(ans)}
