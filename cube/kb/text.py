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
    only (faster, and stable for repeated phrases).

    `jieba.lcut` itself, with each run of Chinese/alphanumeric characters cut once: jieba splits
    a text at punctuation and spaces and cuts each such run on its own (the loop below is
    `jieba.Tokenizer.cut`'s), so an answer quoting its document's sentences reuses their cuts.
    Both caches hold cuts made with jieba's dictionary as it was: after `jieba.add_word` or
    `jieba.load_userdict`, call `segment.cache_clear()` and `_cut_block.cache_clear()` (cube itself
    never changes jieba's dictionary)."""
    jieba = jieba_module()
    han, skip = jieba.re_han_default, jieba.re_skip_default
    words: list[str] = []
    for block in han.split(text):
        if not block:
            continue
        if han.match(block):
            words.extend(_cut_block(block, hmm))
        else:
            # punctuation and spaces: jieba yields whitespace runs whole and anything else per
            # character
            for part in skip.split(block):
                words.extend([part] if skip.match(part) else part)
    return tuple(w for w in words if w.strip())


@lru_cache(maxsize=400_000)
def _cut_block(block: str, hmm: bool) -> tuple[str, ...]:
    return tuple(jieba_module().lcut(block, HMM=hmm))


def clear_segment_caches() -> None:
    """Empty the caches of `segment` (and its blocks' cuts): a stage that has cut all its texts
    frees their memory before it goes on."""
    segment.cache_clear()
    _cut_block.cache_clear()
