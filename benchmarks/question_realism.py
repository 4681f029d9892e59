"""How citizen-like the offline template questions are, and what that costs retrieval (issue 23).

Run from the repository root: .venv/bin/python benchmarks/question_realism.py
For the demo corpus (params/default.yaml) and the synthetic example spreadsheet
(params/own_kb.yaml, its `questions` section as the file sets it), prints: questions, the share
quoting the item's full official name verbatim, the share with nested brackets, the share with
"的的", the share per style, and R@k of the file's primary built-in system (BM25, its top_n and
region filter). Quoting the official name is what makes BM25 find the document; a citizen does
not, so R@k is expected to FALL when the questions read more like a citizen's: the lower figure
is the more honest one. The last line is the headline: the share of example-spreadsheet questions
quoting the full official name.

To measure "before", run this same script in a checkout of an earlier commit.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd

from cube.config.params import load_params
from cube.config.phrasing import clean
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions
from cube.llm import make_model
from cube.systems.builtin import BuiltinRAG

ROOT = Path(__file__).resolve().parents[1]
NESTED = re.compile(r"[（(][^（()）]*[（(]")


def measure(params_file: str) -> dict[str, float]:
    params = load_params(ROOT / params_file)
    corpus = build_corpus(params, ROOT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        questions = build_questions(params, corpus, None, ROOT)
    names = dict(zip(corpus["doc_id"].astype(str), corpus["item_name"].map(clean), strict=True))
    q = questions["question"].astype(str)
    full = [
        bool(names[d]) and names[d] in text
        for d, text in zip(questions["doc_id"].astype(str), q, strict=True)
    ]
    system = next(s for s in params.systems if s.kind == "builtin")
    rag = BuiltinRAG(system, make_model(params.model(params.answerer), None), lang=params.lang)
    ranked = rag.retrieve(questions, corpus)
    hit = [d in r for d, r in zip(questions["doc_id"].astype(str), ranked, strict=True)]
    out = {
        "questions": len(q),
        "full_official_name": sum(full) / len(q),
        "nested_brackets": float(q.str.contains(NESTED).mean()),
        "de_de": float(q.str.contains("的的").mean()),
        f"recall_at_{system.top_n}": sum(hit) / len(hit),
    }
    for style, share in questions["style"].value_counts(normalize=True).items():
        out[f"style_{style}"] = float(share)
    return out


def main() -> None:
    rows = {
        name: measure(f)
        for name, f in (("demo", "params/default.yaml"), ("example", "params/own_kb.yaml"))
    }
    print(pd.DataFrame(rows).round(3).to_string())
    print(f"example_full_official_name_share: {rows['example']['full_official_name']:.3f}")


if __name__ == "__main__":
    main()
