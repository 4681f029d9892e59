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
    han = jieba_module().re_han_default
    if han.groups == 1:
        return _segment_split(han.split(text), hmm)
    return _segment_blocks(han.split(text), hmm)


def _segment_split(parts: list[str], hmm: bool) -> tuple[str, ...]:
    """`_segment_blocks` of a split by jieba's pattern with its one group: the blocks alternate,
    others at even indices and runs at odd ones (a run is a maximal match, so no other block
    holds a run's character), read by position rather than matched again (~100 blocks a
    document)."""
    words: list[str] = []
    for i in range(0, len(parts), 2):
        other = parts[i]
        if other:
            # every character but whitespace (`str.split` splits at what `str.isspace` sees)
            words.extend("".join(other.split()))
        if i + 1 < len(parts):
            words.extend(_cut_block(parts[i + 1], hmm))
    return tuple(words)


def _segment_blocks(blocks: list[str], hmm: bool) -> tuple[str, ...]:
    """`segment`'s words of the blocks of its text (jieba's runs and what lies between them)."""
    han = jieba_module().re_han_default
    words: list[str] = []
    for block in blocks:
        if not block:
            continue
        if han.match(block):
            # a block's words are pieces of it, never blank (it holds no whitespace)
            words.extend(_cut_block(block, hmm))
        else:
            # punctuation and spaces: jieba yields whitespace runs whole and anything else per
            # character, and the runs are dropped here (`str.isspace` is what `\s` and
            # `str.strip` see)
            words.extend([c for c in block if not c.isspace()])
    return tuple(words)


@lru_cache(maxsize=400_000)
def _cut_block(block: str, hmm: bool) -> tuple[str, ...]:
    return tuple(jieba_module().lcut(block, HMM=hmm))


def clear_segment_caches() -> None:
    """Empty the caches of `segment` (and its blocks' cuts): a stage that has cut all its texts
    frees their memory before it goes on."""
    segment.cache_clear()
    _cut_block.cache_clear()
