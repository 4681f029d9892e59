"""A deterministic refusal detector: did the answer decline (say it does not know / cannot
answer from what it has) rather than give the information?

The detector looks for decline phrasings in the answer's opening (the first `OPENING_CHARS`
characters, where a decline is stated; a long answer that only mentions "无法" deep inside a
procedure is not a decline). A phrase counts only when the opening does not also carry
concrete content markers (`CONTENT_MARKERS`: "根据办事指南", "according to the guide", ...),
and only when it is framed as a decline: phrasings that name the speaker, the asker, the
knowledge source or an empty search count anywhere in the opening (`DECLINE_PATTERNS`); bare
phrasings that guide content also uses ("没有…规定", "无法提供", "不太清楚") count only when they
open their clause or follow a framing word (我, 您, 目前, 抱歉, 知识库, ...) and no condition
(如, 若, 申请人, ...) introduces them (`FRAMED_PATTERNS`); "I cannot find" / "unable to find"
count only with an information object ("any information", "the answer", ...).

Decline phrases (case-insensitive; `DECLINE_PATTERNS` is the full list):

- zh: 未找到/没有找到/未检索到 + 相关 (信息|资料|指南|内容|记录); framed:
  没有/暂无 + (信息|规定|记录|...), 无法 (提供|回答|确定|查询|找到|获取), 不太清楚; 我无法…; 我 (并)
  不 (太) (清楚|确定|了解|知道), 不太清楚; 抱歉…(无法|不能|没有); 超出 (了) …范围;
  (知识库|文档|指南) 中 (没有|未包含|未提及|未载明); 不在…范围;
- en: "I don't know", "I do not know", "I'm not sure", "I cannot (answer|provide|help)",
  "I cannot find (any information|the answer|...)",
  "I can't ...", "I don't have (information|access|the ...)", "no (relevant) information",
  "not (found|covered|available) in (the|my) (documents|knowledge base|sources)", "unable to
  (find|answer|provide)", "outside (the|my) scope", "there is no ... in the provided".

Documented limits: a detector of phrasings, not of meaning; tested on a table of real-world
declines and non-declines (tests/diagnose/test_refusal.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from cube.diagnose.retrieval import wilson

OPENING_CHARS = 160

_INFO_EN = (
    r"(any |the |relevant |specific |such |further |more )*(information|guidance|details|answer|"
    r"documents?|guides?|records?|mention|data|anything|reference|source)"
)

# Phrasings that carry their own decline framing (first person, addressed to the asker, the
# knowledge source or a search that came back empty): they count wherever they stand in the opening.
DECLINE_PATTERNS: tuple[str, ...] = (
    # zh
    r"(未能?找到|没有?找到|未检索到|没有?检索到|未查询到|没有?查询?到|查不到|找不到)[^。，,.]{0,12}"
    r"(相关|对应|有关|可供参考)?的?(信息|资料|指南|办事指南|内容|记录|事项|规定|说明)",
    r"(我|本人|我们)(也)?(并)?(暂时)?(无法|不能)(为您)?(提供|回答|确定|查询|找到|获取|给出|确认|解答)",
    r"(我|本人|目前)(也)?(并)?不(太)?(清楚|确定|了解|知道)",
    r"(抱歉|对不起|很遗憾)[^。]{0,20}(无法|不能|没有)",
    r"超出(了)?[^。]{0,12}(我|我们|本系统|服务|回答|知识|咨询)[^。]{0,6}范围",
    r"(知识库|资料库|文档|现有资料)中?(并)?(没有|未(包含|提及|载明|涉及|收录))",
    r"不在[^。]{0,10}(我的|服务|回答|知识|咨询)范围",
    # en
    r"\bi (really )?(don'?t|do not) know\b",
    r"\bi'?m not (sure|certain|able)\b",
    r"\bi am not (sure|certain|able)\b",
    r"\bi (cannot|can'?t|can not|am unable to|'m unable to) "
    r"(answer|provide|help|determine|confirm|give)",
    r"\bi (cannot|can'?t|can not|am unable to|'m unable to) (find|locate) " + _INFO_EN,
    r"\bi (don'?t|do not) have (any )?(specific |relevant |the )?"
    r"(information|access|details|data|guide)",
    r"\bno (relevant |specific |such )?(information|record|documents?|guide) (is |was )?"
    r"(available|found|about|on|in)",
    r"\bnot (found|covered|available|mentioned|included) in (the|my|our) (provided )?"
    r"(documents?|knowledge base|sources?|context|guides?)",
    r"\bunable to (answer|provide|determine)",
    r"\bunable to (find|locate) " + _INFO_EN,
    r"\boutside (of )?(the |my )?(scope|knowledge)",
    r"\bthere is no [^.]{0,40} in the (provided|given|retrieved)",
)
# Phrasings that are ordinary guide content as often as declines ("该事项没有收费规定", "申请人需
# 提供没有违法记录的证明", "如无法提供原件，可提供复印件"): they count only when framed as a
# decline, i.e. they open their clause (after an apology or greeting clause:
# "很抱歉，暂无该事项的办事指南", "无法回答。") or the clause before them names the speaker, the
# asker or the knowledge at hand
# (`FRAMING`), and no condition introduces them (`CONDITIONS`: 如, 如果, 若, ...).
FRAMED_PATTERNS: tuple[str, ...] = (
    r"(没有|暂无)[^。，,.]{0,12}(相关|对应|有关|可供参考)?的?(信息|资料|指南|办事指南|内容|记录|事项|规定|说明)",
    r"无法(为您)?(提供|回答|确定|查询|找到|获取|给出|确认|解答)",
    r"不太清楚",
)
FRAMING = r"(我|您|你|本人|目前|暂时|抱歉|对不起|遗憾|现有资料|知识库|资料库|检索|查询)"
CONDITIONS = r"(如果|如|若|倘若|假如|凡|对于|申请人|当事人|办理人)"
_OPENERS = r"^(目前|暂时|暂|很|非常|实在)*"
CONTENT_MARKERS: tuple[str, ...] = (
    "根据办事指南",
    "办事指南载明",
    "according to the service guide",
    "according to the guide",
)

_DECLINE = re.compile("|".join(f"(?:{p})" for p in DECLINE_PATTERNS), re.IGNORECASE)
_FRAMED = re.compile("|".join(f"(?:{p})" for p in FRAMED_PATTERNS))
_CLAUSE_END = re.compile(r"[。！？!?；;，,：:\n]")


def _framed_decline(head: str) -> bool:
    for m in _FRAMED.finditer(head):
        ends = [e.end() for e in _CLAUSE_END.finditer(head, 0, m.start())]
        prefix = head[ends[-1] if ends else 0 : m.start()].strip()
        if re.search(CONDITIONS, prefix):
            continue
        if not re.sub(_OPENERS, "", prefix) or re.search(FRAMING, prefix):
            return True
    return False


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
    return bool(_DECLINE.search(head)) or _framed_decline(head)


def answer_outcome(answer: object, error: object = None) -> str:
    """ "failed" when the answering call failed (an error is recorded: there is no answer), "empty"
    when it returned a blank answer, else "answered". Only answered questions can be declined
    or not."""

    def blank(v: object) -> bool:
        return (
            v is None
            or v is pd.NA
            or (isinstance(v, float) and math.isnan(v))
            or str(v).strip() == ""
        )

    if not blank(error):
        return "failed"
    return "empty" if blank(answer) else "answered"


def refusal_accuracy(
    declined: list[bool], answerable: list[bool], outcomes: list[str] | None = None
) -> dict[str, Any]:
    """Refusal accuracy (share of answered unanswerable questions the system declined) and the
    false-refusal rate (share of answered answerable questions it declined); NaN over no questions.

    A question whose answering call failed or came back empty (`outcomes`, see `answer_outcome`) is
    neither a refusal nor a non-refusal: it is left out of both rates and counted in
    `failed_unanswerable` / `empty_unanswerable` / `failed_answerable` / `empty_answerable`; `flag`
    then says how many, since the rates describe only the answered questions."""
    outcomes = outcomes if outcomes is not None else ["answered"] * len(declined)
    rows = list(zip(declined, answerable, outcomes, strict=True))
    un = _declined(rows, answerable=False)
    ans = _declined(rows, answerable=True)
    count = {
        f"{o}_{'answerable' if want else 'unanswerable'}": _counted(rows, want, o)
        for want in (False, True)
        for o in ("failed", "empty")
    }
    out: dict[str, Any] = {
        "refusal_accuracy": _share(un),
        "n_unanswerable": len(un),
        "false_refusal_rate": _share(ans),
        "n_answerable": len(ans),
        **count,
    }
    out["flag"] = no_answer_flag(count)
    return out


def _declined(rows: list[tuple[bool, bool, str]], answerable: bool) -> list[bool]:
    """Whether each answered question of the kind (`answerable` or not) was declined."""
    return [bool(d) for d, a, o in rows if bool(a) == answerable and o == "answered"]


def _counted(rows: list[tuple[bool, bool, str]], answerable: bool, outcome: str) -> int:
    """The questions of the kind whose answer had this `outcome` (failed, empty)."""
    return sum(1 for _, a, o in rows if a == answerable and o == outcome)


def _share(flags: list[bool]) -> float:
    """The share of True (NaN over none)."""
    return sum(flags) / len(flags) if flags else float("nan")


def no_answer_flag(count: dict[str, int]) -> str:
    """The caveat a refusal figure carries when some questions got no answer ("" when none)."""
    parts = []
    for group, name in (("unanswerable", "refusal accuracy"), ("answerable", "false-refusal rate")):
        failed, empty = count.get(f"failed_{group}", 0), count.get(f"empty_{group}", 0)
        if failed or empty:
            parts.append(
                f"{name} leaves out {failed} failed and {empty} empty answer(s) of {group} "
                "questions"
            )
    return "; ".join(parts) + " (neither refusals nor non-refusals)" if parts else ""


# ------------------------------------------------------------------ refusal report
def mark_declined(answers: pd.DataFrame) -> pd.DataFrame:
    """`outcome` ("answered", "failed", "empty": `cube.diagnose.refusal.answer_outcome`) and
    `declined` (nullable boolean: NA when there is no answer to judge, never False)."""
    out = answers.copy()
    errors = out["error"] if "error" in out else pd.Series(None, index=out.index, dtype=object)
    out["outcome"] = [answer_outcome(a, e) for a, e in zip(out["answer"], errors, strict=True)]
    declined = [
        is_refusal(a) if o == "answered" else pd.NA
        for a, o in zip(out["answer"], out["outcome"], strict=True)
    ]
    out["declined"] = pd.array(declined, dtype="boolean")
    return out


def refusal_report(
    refusals: pd.DataFrame, answers: pd.DataFrame, confidence: float = 0.95
) -> dict[str, dict]:
    """Per system: refusal accuracy on the refusal questions (and by kind), false-refusal rate
    on its ordinary rag answers, each with its Wilson interval (`refusal_ci`, `false_refusal_ci`);
    NaN (null) over no questions. Failed and empty answers are in neither rate: they are counted
    and flagged (`cube.diagnose.refusal.refusal_accuracy`)."""
    out = {}
    rag = answers[answers["set"] == "rag"]
    for system, r in refusals.groupby("system", sort=True):
        r = r if "outcome" in r else mark_declined(r)
        ordinary = mark_declined(rag[rag["system"] == system])
        both = pd.concat(
            [r[["declined", "outcome"]], ordinary[["declined", "outcome"]]], ignore_index=True
        )
        figures = refusal_accuracy(
            both["declined"].fillna(False).astype(bool).tolist(),
            [False] * len(r) + [True] * len(ordinary),
            both["outcome"].tolist(),
        )
        for rate, n, key in (
            ("refusal_accuracy", "n_unanswerable", "refusal_ci"),
            ("false_refusal_rate", "n_answerable", "false_refusal_ci"),
        ):
            hits = round(figures[rate] * figures[n]) if figures[n] else 0
            figures[key] = list(wilson(hits, figures[n], confidence))
        answered = r[r["outcome"] == "answered"]
        figures["by_kind"] = {
            k: float(g["declined"].astype(bool).mean())
            for k, g in answered.groupby("kind", sort=True)
        }
        out[str(system)] = figures
    return out


def _ci(figures: dict, key: str, digits: int) -> str:
    lo, hi = ([*(figures.get(key) or []), None, None])[:2]
    ok = all(v is not None and np.isfinite(v) for v in (lo, hi))
    return f" [{lo:.{digits}%}, {hi:.{digits}%}]" if ok else ""


def refusal_sentence(system: str, figures: dict) -> str:
    """The refusal figures in one sentence (with their Wilson intervals and the
    no-answer caution)."""
    acc, fr = figures.get("refusal_accuracy"), figures.get("false_refusal_rate")
    if acc is None or not np.isfinite(acc):
        return f"{system}: no refusal question was answered, so refusal accuracy is undefined."
    kinds = ", ".join(
        f"{k.replace('_', ' ')} {v:.0%}" for k, v in figures.get("by_kind", {}).items()
    )
    wrong = (
        f"wrongly declined {fr:.1%}{_ci(figures, 'false_refusal_ci', 1)} of "
        f"{figures['n_answerable']} answerable ones"
        if fr is not None and np.isfinite(fr)
        else "has no answered answerable question, so no false-refusal rate"
    )
    caution = f" Caution: {figures['flag']}." if figures.get("flag") else ""
    return (
        f"Refusal: {system} declined {acc:.0%}{_ci(figures, 'refusal_ci', 0)} of "
        f"{figures['n_unanswerable']} questions the knowledge base cannot answer ({kinds}) and "
        f"{wrong} (reported beside CuBE, not in it; Wilson intervals).{caution}"
    )
