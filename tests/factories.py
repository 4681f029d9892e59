"""Small generated answers/scores tables for the analysis tests (no I/O, seeded)."""

from __future__ import annotations

import numpy as np
import pandas as pd

DIMS = ("relevance", "specificity", "completeness", "quality")


def make_tables(n_questions: int = 80, judges: tuple[str, ...] = ("judge-a", "judge-b"), seed: int = 0,
                recall: float = 0.8, top_n: int = 8, system: str = "sys") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Answers and scores where rag lies between zero and full and scores rise with rank_score."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i:03d}" for i in range(n_questions)]
    retrieved = rng.random(n_questions) < recall
    rank = np.where(retrieved, rng.integers(1, top_n + 1, n_questions), 0)
    answers = []
    for q, r in zip(qids, rank, strict=True):
        docs = [f"d{q}-{k}" for k in range(top_n)]
        if r:
            docs[r - 1] = f"gold-{q}"
        for s in ("zero", "rag", "full"):
            answers.append({"question_id": q, "doc_id": f"gold-{q}", "system": system, "set": s,
                            "answer": f"{s} answer to {q}", "retrieved_doc_ids": docs, "rank": int(r),
                            "n_retrieved": top_n})
    rows = []
    for j, judge in enumerate(judges):
        for q, r in zip(qids, rank, strict=True):
            base = {"zero": 3.0 + j, "full": 8.0, "rag": (7.0 if r else 4.0) + 0.1 * (top_n - r if r else 0)}
            for d, dim in enumerate(DIMS):
                for s in ("zero", "rag", "full"):
                    v = np.clip(base[s] - 0.3 * d + rng.normal(0, 0.8), 0, 10)
                    rows.append({"question_id": q, "system": system, "set": s, "judge": judge,
                                 "dimension": dim, "score": float(np.round(v)), "sample": 0})
    return pd.DataFrame(answers), pd.DataFrame(rows)
