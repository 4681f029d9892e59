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

`claimed_numbers` and `field_stated`, what an answer claims against its gold document, are in
`cube.diagnose.claims`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import known_retrieval
from cube.diagnose.claims import field_stated, number_mismatch
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


def _patterns_of_low(
    rag: pd.DataFrame, corpus: pd.DataFrame, texts: pd.Series, causes: list[str], params: Any
) -> list[list[str]]:
    """`_low_answer_patterns` of each low answer ([] for the others). A low answer's row is the
    Series `DataFrame.iterrows` makes of it (the frame's values, its columns, its label), made
    only for the low answers: every row's Series was most of the classification's cost."""
    out: list[list[str]] = [[] for _ in range(len(rag))]
    low = np.flatnonzero(rag["low"].to_numpy(bool))
    if not len(low):
        return out
    values = rag.values  # what iterrows reads, once
    for i in low:
        row = pd.Series(values[i], index=rag.columns, name=rag.index[i])
        out[i] = _low_answer_patterns(row, corpus, str(texts.iloc[i]), causes[i], params)
    return out


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
    rag["patterns"] = _patterns_of_low(rag, c, texts, causes, p)
    rag["primary"] = [
        (found[0] if found else UNEXPLAINED) if low else ""
        for found, low in zip(rag["patterns"], rag["low"], strict=True)
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
