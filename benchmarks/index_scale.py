"""Scale of the builtin system: demo-corpus generation, BM25 indexing and retrieval quality.

For zh and en: the time to generate and to index 6,111 items (the paper's province-level
corpus size), and R@8 / R@1 of the builtin system (bm25s, top 8) on the template questions
(one per item) of a 300-item and a 6,111-item demo corpus. jieba's dictionary load (once
per process) is timed separately, not inside the zh index time.

Run: .venv/bin/python benchmarks/index_scale.py
Last line: `index_6111_seconds: <zh index time>` (the slower language).
"""

from __future__ import annotations

import time

import numpy as np

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.sections import BuiltinSystem, JudgeParams
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.kb.text import jieba_module
from cube.systems import make_system
from cube.systems.base import rank_of
from cube.systems.retrieval import BM25Index


def _params(lang: str) -> Params:
    return Params(
        run="bench",
        lang=lang,
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))],
    )


def main() -> None:
    t0 = time.perf_counter()
    jieba_module()
    print(f"jieba dictionary load: {time.perf_counter() - t0:.2f} s")
    index_time: dict[str, float] = {}
    for lang in ("zh", "en"):
        for n in (300, 6111):
            t0 = time.perf_counter()
            corpus = generate_demo_corpus(n, lang)
            t_gen = time.perf_counter() - t0
            t0 = time.perf_counter()
            BM25Index.from_corpus(corpus, lang=lang)
            t_idx = time.perf_counter() - t0
            questions = build_questions(_params(lang), corpus)
            system = make_system(BuiltinSystem(name="bm25-top8", top_n=8), _params(lang), None)
            t0 = time.perf_counter()
            retrieved = system.retrieve(questions, corpus)  # builds its own index, then searches
            t_ret = time.perf_counter() - t0
            ranks = np.array(
                [rank_of(g, r) for g, r in zip(questions["doc_id"], retrieved, strict=True)]
            )
            fam = questions["doc_id"].map(corpus.set_index("doc_id")["family_id"]).ne("").to_numpy()
            print(
                f"{lang} n={n:5d}: generate {t_gen:6.2f} s | index "
                f"{t_idx:6.2f} s | index+search {len(questions)} "
                f"questions {t_ret:6.2f} s | R@8 "
                f"{np.mean(ranks > 0):.3f} | R@1 {np.mean(ranks == 1):.3f} "
                f"(family members {np.mean(ranks[fam] == 1):.3f}, "
                f"singletons {np.mean(ranks[~fam] == 1):.3f})"
            )
            if n == 6111:
                index_time[lang] = t_idx
    print(f"index_6111_seconds: {index_time['zh']:.2f}")


if __name__ == "__main__":
    main()
