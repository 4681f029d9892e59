"""Small generated answers/scores tables for the analysis tests (no I/O, seeded)."""

from __future__ import annotations

import numpy as np
import pandas as pd

DIMS = ("relevance", "specificity", "completeness", "quality")


def make_tables(
    n_questions: int = 80,
    judges: tuple[str, ...] = ("judge-a", "judge-b"),
    seed: int = 0,
    recall: float = 0.8,
    top_n: int = 8,
    system: str = "sys",
) -> tuple[pd.DataFrame, pd.DataFrame]:
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
            answers.append(
                {
                    "question_id": q,
                    "doc_id": f"gold-{q}",
                    "system": system,
                    "set": s,
                    "answer": f"{s} answer to {q}",
                    "retrieved_doc_ids": docs,
                    "rank": int(r),
                    "n_retrieved": top_n,
                }
            )
    rows = []
    for j, judge in enumerate(judges):
        for q, r in zip(qids, rank, strict=True):
            base = {
                "zero": 3.0 + j,
                "full": 8.0,
                "rag": (7.0 if r else 4.0) + 0.1 * (top_n - r if r else 0),
            }
            for d, dim in enumerate(DIMS):
                for s in ("zero", "rag", "full"):
                    v = np.clip(base[s] - 0.3 * d + rng.normal(0, 0.8), 0, 10)
                    rows.append(
                        {
                            "question_id": q,
                            "system": system,
                            "set": s,
                            "judge": judge,
                            "dimension": dim,
                            "score": float(np.round(v)),
                            "sample": 0,
                        }
                    )
    return pd.DataFrame(answers), pd.DataFrame(rows)


def make_project(tmp_path, notebooks: tuple[str, ...] = ("00",)):
    """A project folder with the root markers (pyproject.toml, cube/), the default params and some
    of the repository's notebooks (by their two-digit prefix)."""
    from cube.config.project import list_notebooks
    from tests import ROOT

    repo = ROOT
    root = tmp_path / "project"
    (root / "params").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    (root / "cube").symlink_to(repo / "cube", target_is_directory=True)
    (root / "params" / "default.yaml").write_text(
        (repo / "params" / "default.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    for nb in list_notebooks(repo / "notebooks"):
        if nb.name[:2] in notebooks:
            (root / "notebooks" / nb.name).write_text(
                nb.read_text(encoding="utf-8"), encoding="utf-8"
            )
    return root
