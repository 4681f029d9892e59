"""Chinese word segmentation shared by retrieval, the rubric judge and BLEU/ROUGE (jieba).

One place initialises jieba (quietly, once per process) and caches segmentations: a gold
document is segmented by the retriever, by the rubric for 3 sets x 4 dimensions and by the
lexical metrics, so each text is cut once. Callers apply their own filters (stopwords for
BM25, content words for the rubric, every word for BLEU/ROUGE).
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

_ready = False


def jieba_module() -> ModuleType:
    """jieba, initialised once with its start-up log lines silenced."""
    global _ready
    import jieba

    if not _ready:
        jieba.setLogLevel(60)
        jieba.initialize()
        _ready = True
    return jieba


@lru_cache(maxsize=200_000)
def segment(text: str, hmm: bool = True) -> tuple[str, ...]:
    """jieba's words of `text` (whitespace tokens dropped). `hmm=False` keeps dictionary words
    only (faster, and stable for repeated phrases)."""
    return tuple(w for w in jieba_module().lcut(text, HMM=hmm) if w.strip())
