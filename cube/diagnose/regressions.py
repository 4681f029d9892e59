"""Per-question regressions and improvements between two sides A and B (issue 13 item 3).

For every question both sides answered: the retrieval change on the rag set (gold document
`lost` / `found` / `rank up` / `rank down` / `same`, with both ranks) and each judge's rag-set
score change (the mean over the dimensions it scored, B − A), plus the jury's (the mean of the
jury judges' changes). A **regression** is a question whose jury score fell or whose gold
document was lost; an **improvement** the reverse. They are ranked by the size of the score
change (retrieval changes break ties), and each comes with its details: question, gold item,
both answers and a readable line diff (`difflib`), both retrieved lists, and every judge's
scores per dimension with the raw reply and any failure reason.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import SchemaError, known_retrieval, parse_doc_list, require_columns

_NEEDED = ("question_id", "set", "rank")


def check_answers(answers: pd.DataFrame, table: str = "answers") -> None:
    """Raise `SchemaError` naming `table` (the file) and every row whose `rank` is not an integer
    >= 0 (0 = gold not retrieved), with its question and set; missing columns are named first."""
    require_columns(answers, _NEEDED, table)
    ranks = pd.to_numeric(answers["rank"], errors="coerce")
    bad = ranks.isna() | (ranks < 0) | (ranks != ranks.round())
    if bad.any():
        rows = [
            f"row {i} (question_id {q}, set {s}): {v!r}"
            for i, q, s, v in zip(
                answers.index[bad],
                answers.loc[bad, "question_id"],
                answers.loc[bad, "set"],
                answers.loc[bad, "rank"],
                strict=True,
            )
        ]
        raise SchemaError(
            f"{table}: column 'rank' must be an integer >= 0 (0 = gold document not retrieved); "
            f"{len(rows)} bad row(s): " + "; ".join(rows)
        )


def _rag(answers: pd.DataFrame) -> pd.DataFrame:
    rag = answers[answers["set"] == "rag"].drop_duplicates("question_id").set_index("question_id")
    if "retrieval_ok" in rag:
        rag = rag[known_retrieval(rag)]
    return rag


def _judge_means(scores: pd.DataFrame) -> pd.DataFrame:
    s = scores[scores["set"] == "rag"].assign(
        score=lambda d: pd.to_numeric(d["score"], errors="coerce")
    )
    return s.groupby(["question_id", "judge"])["score"].mean().unstack("judge")


def _retrieval_change(ra: int, rb: int) -> str:
    if ra and not rb:
        return "lost"
    if rb and not ra:
        return "found"
    if ra and rb and rb < ra:
        return "rank up"
    if ra and rb and rb > ra:
        return "rank down"
    return "same"


def question_changes(
    a_answers: pd.DataFrame,
    a_scores: pd.DataFrame,
    b_answers: pd.DataFrame,
    b_scores: pd.DataFrame,
    jury_judges: list[str],
    *,
    tables: tuple[str, str] = ("answers (A)", "answers (B)"),
) -> pd.DataFrame:
    """One row per common question: `question_id, doc_id, rank_a, rank_b, retrieval_change`,
    `score_a:<judge>`, `score_b:<judge>`, `delta:<judge>` per judge and `jury_a, jury_b, delta`.
    `tables` name the two answers tables (their files) in a `SchemaError` (`check_answers`)."""
    check_answers(a_answers, tables[0])
    check_answers(b_answers, tables[1])
    ra, rb = _rag(a_answers), _rag(b_answers)
    qids = sorted(set(ra.index) & set(rb.index), key=str)
    out = pd.DataFrame({"question_id": qids})
    out["doc_id"] = [ra.at[q, "doc_id"] if "doc_id" in ra else None for q in qids]
    out["rank_a"] = [int(ra.at[q, "rank"]) for q in qids]
    out["rank_b"] = [int(rb.at[q, "rank"]) for q in qids]
    out["retrieval_change"] = [
        _retrieval_change(x, y) for x, y in zip(out["rank_a"], out["rank_b"], strict=True)
    ]
    ma, mb = _judge_means(a_scores).reindex(qids), _judge_means(b_scores).reindex(qids)
    judges = sorted(set(ma.columns) & set(mb.columns), key=str)
    for j in judges:
        out[f"score_a:{j}"] = ma[j].to_numpy()
        out[f"score_b:{j}"] = mb[j].to_numpy()
        out[f"delta:{j}"] = out[f"score_b:{j}"] - out[f"score_a:{j}"]
    jury = [j for j in jury_judges if j in judges]
    with np.errstate(all="ignore"):
        out["jury_a"] = out[[f"score_a:{j}" for j in jury]].mean(axis=1) if jury else np.nan
        out["jury_b"] = out[[f"score_b:{j}" for j in jury]].mean(axis=1) if jury else np.nan
    out["delta"] = out["jury_b"] - out["jury_a"]
    return out


_TIE = {"lost": 0, "rank down": 1, "same": 2, "rank up": 3, "found": 4}


def ranked(changes: pd.DataFrame, kind: str = "regressions", k: int | None = 20) -> pd.DataFrame:
    """The largest regressions (jury score fell or gold lost) or improvements, largest first."""
    d = changes["delta"].fillna(0.0)
    if kind == "regressions":
        sel = changes[(d < 0) | (changes["retrieval_change"] == "lost")]
        key = (
            sel["delta"].fillna(0.0)
            + sel["retrieval_change"].astype(object).map(_TIE).astype(float) * 1e-6
        )
    elif kind == "improvements":
        sel = changes[(d > 0) | (changes["retrieval_change"] == "found")]
        key = -(
            sel["delta"].fillna(0.0)
            + sel["retrieval_change"].astype(object).map(_TIE).astype(float) * 1e-6
        )
    else:
        raise ValueError(f"kind must be 'regressions' or 'improvements', got {kind!r}")
    out = sel.assign(_k=key).sort_values(["_k", "question_id"], kind="stable").drop(columns="_k")
    return out.head(k) if k is not None else out


def answer_diff(a: str, b: str) -> list[dict[str, str]]:
    """A readable diff of two answers: `[{op: ' '|'-'|'+', text}]` by line (by sentence when an
    answer is one line, on the Chinese and Latin full stops)."""

    def split(s: str) -> list[str]:
        s = "" if s is None else str(s)
        lines = s.splitlines()
        if len(lines) <= 1:
            lines = [p for p in _sentences(s) if p]
        return lines

    out = []
    for line in difflib.ndiff(split(a), split(b)):
        if line[:1] in (" ", "-", "+"):
            out.append({"op": line[0], "text": line[2:]})
    return out


def _sentences(s: str) -> list[str]:
    parts, cur = [], ""
    for ch in s:
        cur += ch
        if ch in "。！？!?；;" or (ch == "." and len(cur) > 1):
            parts.append(cur)
            cur = ""
    return [*parts, cur] if cur else parts


def details(
    row: pd.Series,
    a_answers: pd.DataFrame,
    a_scores: pd.DataFrame,
    b_answers: pd.DataFrame,
    b_scores: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    corpus: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Everything a reader needs to judge one question's change (plain data; escape
    when rendering)."""
    q = row["question_id"]
    ra, rb = _rag(a_answers), _rag(b_answers)
    info: dict[str, Any] = {
        k: (None if isinstance(v, float) and np.isnan(v) else v)
        for k, v in row.items()
        if not isinstance(v, (list, dict))
    }
    info = {k: (v.item() if hasattr(v, "item") else v) for k, v in info.items()}
    if questions is not None and "question" in questions:
        m = questions[questions["question_id"] == q]
        info["question"] = str(m["question"].iloc[0]) if len(m) else None
    if corpus is not None and "doc_id" in corpus:
        m = corpus[corpus["doc_id"] == row.get("doc_id")]
        info["gold_item"] = str(m["item_name"].iloc[0]) if len(m) and "item_name" in m else None
    info["answer_a"], info["answer_b"] = (
        str(r.at[q, "answer"]) if "answer" in r else "" for r in (ra, rb)
    )
    info["diff"] = answer_diff(info["answer_a"], info["answer_b"])
    info["retrieved_a"] = (
        parse_doc_list(ra.at[q, "retrieved_doc_ids"]) if "retrieved_doc_ids" in ra else []
    )
    info["retrieved_b"] = (
        parse_doc_list(rb.at[q, "retrieved_doc_ids"]) if "retrieved_doc_ids" in rb else []
    )
    judgments = []
    for side, sc in (("a", a_scores), ("b", b_scores)):
        s = sc[(sc["question_id"] == q) & (sc["set"] == "rag")]
        for _, r in s.sort_values(["judge", "dimension"]).iterrows():
            score = pd.to_numeric(r["score"], errors="coerce")
            judgments.append(
                {
                    "side": side,
                    "judge": str(r["judge"]),
                    "dimension": str(r["dimension"]),
                    "score": None if pd.isna(score) else float(score),
                    "raw": "" if pd.isna(r.get("raw")) else str(r.get("raw", "")),
                    "error": "" if pd.isna(r.get("error")) else str(r.get("error", "")),
                }
            )
    info["judgments"] = judgments
    return info
