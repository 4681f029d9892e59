"""Refusal figures by category: refusal accuracy and the false-refusal rate per department, per
question style and per refusal kind, each with its Wilson interval.

- Refusal accuracy of a category: share of its answered refusal questions the system declined.
  A refusal question's `department` is the department of the corpus item it asks about
  (`other_province`, `absent_field`, role-play questions naming a corpus item) or
  `NOT_IN_CORPUS` (an item no document has); its `style` is the question's style ("refusal"
  for the templates, "role-play" for the LLM's); its `kind` is the template or generator kind.
- False-refusal rate of a category: share of its answered answerable rag questions the system
  declined (department of the gold document, style of the question; `cube.diagnose.retrieval.
  question_groups`). Answerable questions have no refusal kind.

Failed and empty answers are in neither rate (`cube.diagnose.refusal.answer_outcome`); they are
counted in `no_answer`. A rate over no question is NaN, never 0.
"""

from __future__ import annotations

import pandas as pd

from cube.diagnose.retrieval import wilson

NOT_IN_CORPUS = "(not in corpus)"
BREAKDOWNS: tuple[str, ...] = ("department", "style", "kind")
COLUMNS = [
    "unanswerable",
    "declined",
    "refusal_accuracy",
    "refusal_lo",
    "refusal_hi",
    "answerable",
    "false_refusals",
    "false_refusal_rate",
    "false_refusal_lo",
    "false_refusal_hi",
    "no_answer",
]


def refusal_groups(refusals: pd.DataFrame, corpus: pd.DataFrame) -> pd.DataFrame:
    """Per refusal question (`question_id`): its `department`, `style` and `kind` (see the
    module doc)."""
    q = refusals.drop_duplicates("question_id").copy()
    departments = (
        corpus.drop_duplicates("item_name").set_index("item_name")["department"]
        if {"item_name", "department"} <= set(corpus.columns)
        else pd.Series(dtype=object)
    )
    items = q["item"] if "item" in q else pd.Series("", index=q.index)
    q["department"] = (
        items.fillna("").map(departments).fillna(NOT_IN_CORPUS).replace("", NOT_IN_CORPUS)
    )
    q["style"] = q["style"].fillna("refusal") if "style" in q else "refusal"
    q["kind"] = q["kind"].fillna("(none)") if "kind" in q else "(none)"
    return q[["question_id", "department", "style", "kind"]]


def refusal_by_category(
    refusals: pd.DataFrame,
    answers: pd.DataFrame,
    groups: pd.DataFrame,
    corpus: pd.DataFrame,
    system: str,
    by: str,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per value of `by` ("department", "style" or "kind") with refusal accuracy and the
    false-refusal rate of `system` and their Wilson intervals; rows with more questions first.
    `groups`: `cube.diagnose.retrieval.question_groups` of the answerable questions."""
    from cube.diagnose.refusal import mark_declined

    if by not in BREAKDOWNS:
        raise ValueError(
            f"refusal_by_category: by must be one of {', '.join(BREAKDOWNS)}, got {by!r}"
        )
    r = refusals[refusals["system"] == system]
    r = r if "outcome" in r else mark_declined(r)
    r = r.drop(columns=[c for c in BREAKDOWNS if c in r]).merge(
        refusal_groups(r, corpus), on="question_id", how="left"
    )
    a = mark_declined(answers[(answers["set"] == "rag") & (answers["system"] == system)])
    a = (
        a.merge(groups[["question_id", by]], on="question_id", how="left")
        if by != "kind"
        else a.iloc[:0].assign(kind="")
    )
    a[by] = a[by].fillna("(unknown)")
    values = sorted(set(r[by].astype(str)) | set(a[by].astype(str)))
    rows = []
    for value in values:
        ru, au = r[r[by].astype(str) == value], a[a[by].astype(str) == value]
        ok_r, ok_a = ru[ru["outcome"] == "answered"], au[au["outcome"] == "answered"]
        dec_r, dec_a = (
            int(ok_r["declined"].astype(bool).sum()),
            int(ok_a["declined"].astype(bool).sum()),
        )
        r_lo, r_hi = wilson(dec_r, len(ok_r), confidence)
        a_lo, a_hi = wilson(dec_a, len(ok_a), confidence)
        rows.append(
            {
                by: value,
                "unanswerable": len(ok_r),
                "declined": dec_r,
                "refusal_accuracy": dec_r / len(ok_r) if len(ok_r) else float("nan"),
                "refusal_lo": r_lo,
                "refusal_hi": r_hi,
                "answerable": len(ok_a),
                "false_refusals": dec_a,
                "false_refusal_rate": dec_a / len(ok_a) if len(ok_a) else float("nan"),
                "false_refusal_lo": a_lo,
                "false_refusal_hi": a_hi,
                "no_answer": int(
                    (ru["outcome"] != "answered").sum() + (au["outcome"] != "answered").sum()
                ),
            }
        )
    out = pd.DataFrame(rows, columns=[by, *COLUMNS])
    total = out["unanswerable"] + out["answerable"] + out["no_answer"]
    return (
        out.assign(_n=total)
        .sort_values(["_n", by], ascending=[False, True], kind="stable")
        .drop(columns="_n")
        .reset_index(drop=True)
    )
