"""BM25 retrieval over the rendered service guides (the builtin system's retriever).

Each corpus item's rendered text (`corpus.text`) is ONE chunk, as in the paper (3.3: one
file, one chunk). Scoring is bm25s (Lucene BM25 variant, `k1`/`b` from params); this module
only supplies the token lists:

- Chinese: jieba precise-mode segmentation (with its HMM for unknown words such as 蓄能),
  lower-cased, punctuation and a short list of function words dropped. Rendered guides
  repeat many lines (field labels, shared values inside near-duplicate families), so each
  distinct line is segmented once per index build; that is what keeps 6,111 items to
  seconds.
- English: bm25s's own tokenizer (lower-case, `\\w\\w+` tokens, its English stopwords).

A document that shares no token with the question scores 0 and is not returned: like a
keyword engine, the retriever returns at most `top_n` documents, possibly fewer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import bm25s
import numpy as np
import pandas as pd

from cube.kb.text import segment
from cube.systems.region_filter import RegionPlan
from cube.systems.retrieval_store import cached_lists, cached_tokens, results_key

_WORD = re.compile(r"\w", re.UNICODE)
# Function words that carry no retrieval signal; BM25's idf discounts the rest.
_ZH_STOPWORDS = frozenset(
    "的 了 吗 呢 吧 啊 和 与 及 或 是 在 我 你 他 她 它 我们 请问 请 一下 怎么 怎样 如何 什么 哪些 "
    "哪里 多少 可以 能 要 需要 办理 有 个 这个 那个 为 对 就 都 也 还 被 把 从 到".split()
)


def _zh_line_tokens(line: str) -> list[str]:
    return [
        t
        for t in (w.strip().lower() for w in segment(line))
        if t and _WORD.search(t) and t not in _ZH_STOPWORDS
    ]


def _zh_tokens(texts: Sequence[str]) -> list[list[str]]:
    """jieba's tokens of each text, each distinct line segmented once."""
    cache: dict[str, list[str]] = {}
    out: list[list[str]] = []
    for text in texts:
        toks: list[str] = []
        for line in str(text).splitlines():
            if line not in cache:
                cache[line] = _zh_line_tokens(line)
            toks.extend(cache[line])
        out.append(toks)
    return out


def tokenize(texts: Sequence[str], lang: str) -> list[list[str]]:
    """Token lists for BM25: jieba words for `zh`, bm25s's English tokenizer for `en`.

    Args:
        texts: documents or questions.
        lang: `zh` or `en`.

    Returns:
        One token list per text (possibly empty).
    """
    if lang == "zh":
        # the plan's segmentation is read back in stage 02 (`cube.systems.retrieval_store`)
        return cached_tokens(texts, lang, _zh_tokens)
    if lang == "en":
        return bm25s.tokenize(
            [str(t) for t in texts],
            lower=True,
            stopwords="en",
            return_ids=False,
            show_progress=False,
        )
    raise ValueError(f"tokenize: unsupported lang {lang!r}; expected 'zh' or 'en'")


def region_mask(corpus: pd.DataFrame, region: str | None) -> np.ndarray:
    """Items of one region's knowledge base: its own items plus those of enclosing levels.

    The paper (3.3) gives each region its own knowledge base; the province-level items are
    served everywhere in the province. An item belongs to the knowledge base of `region` when
    its `region` equals `region`, or when it is an enclosing administrative level, i.e. the
    system's region name contains the item's region name (贵州省 encloses 贵州省贵阳市;
    "Guizhou Province" encloses "Guiyang City, Guizhou Province").

    Args:
        corpus: the corpus table (needs `region`).
        region: the system's region; None keeps every item.

    Returns:
        Boolean mask aligned with `corpus` rows.
    """
    if region is None:
        return np.ones(len(corpus), dtype=bool)
    if "region" not in corpus.columns:
        raise ValueError("corpus: a system with `region` needs the corpus column 'region'")
    regions = corpus["region"].fillna("").astype(str).str.strip()
    target = region.strip()
    mask = np.array([r == target or (bool(r) and r in target) for r in regions], dtype=bool)
    if not mask.any():
        known = sorted(set(regions))[:10]
        raise ValueError(
            f"region {region!r}: no corpus item has this region or an enclosing one (regions: "
            f"{known} ...)"
        )
    return mask


class BM25Index:
    """A bm25s index over corpus documents, searchable by question text.

    Args:
        doc_ids: document ids, aligned with `texts`.
        texts: rendered documents (one chunk each).
        lang: `zh` or `en` (selects the tokenizer).
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
    """

    def __init__(
        self,
        doc_ids: Sequence[str],
        texts: Sequence[str],
        *,
        lang: str,
        k1: float = 1.5,
        b: float = 0.75,
    ):
        if len(doc_ids) != len(texts):
            raise ValueError(f"BM25Index: {len(doc_ids)} doc ids but {len(texts)} texts")
        if not len(doc_ids):
            raise ValueError("BM25Index: no documents to index")
        self.lang = lang
        self.doc_ids = np.asarray([str(d) for d in doc_ids], dtype=object)
        self._source = (tuple(self.doc_ids), tuple(str(t) for t in texts), lang, k1, b)
        self._engine: bm25s.BM25 | None = bm25s.BM25(k1=k1, b=b)
        self._engine.index(tokenize(texts, lang), show_progress=False)
        self.rows: pd.DataFrame | None = None  # the indexed corpus rows (set by `from_corpus`)

    @property
    def _bm25(self) -> bm25s.BM25:
        """The bm25s index, built on first use: a search whose results the plan stored
        (`cube.systems.retrieval_store`) never builds it."""
        if self._engine is None:
            self._engine = _built_index(type(self), *self._source)._engine
        return self._engine

    @classmethod
    def from_corpus(
        cls,
        corpus: pd.DataFrame,
        *,
        lang: str,
        k1: float = 1.5,
        b: float = 0.75,
        region: str | None = None,
    ) -> BM25Index:
        """Index `corpus.text` (restricted to `region`'s knowledge base when given)."""
        for col in ("doc_id", "text"):
            if col not in corpus.columns:
                raise ValueError(f"corpus: missing column {col!r} needed for BM25 retrieval")
        sub = corpus[region_mask(corpus, region)].reset_index(drop=True)
        index = cls.__new__(cls)  # built on first use (`_bm25`), shared through `_built_index`
        index.lang = lang
        index.doc_ids = np.asarray([str(d) for d in sub["doc_id"]], dtype=object)
        texts = tuple(str(t) for t in sub["text"].fillna(""))
        index._source = (tuple(index.doc_ids), texts, lang, k1, b)
        index._engine = None
        index.rows = sub
        return index

    def search(
        self, queries: Sequence[str], top_n: int, plan: RegionPlan | None = None
    ) -> list[list[str]]:
        """The top-`top_n` doc ids per query, best first; documents scoring 0 are left out.

        `plan` (`cube.systems.region_filter`, built over this index's rows) restricts each
        question that names a region to that region's knowledge base; the others search all.
        """
        k = min(int(top_n), len(self.doc_ids))
        key = results_key(self._source, [str(q) for q in queries], k, plan)
        return cached_lists("results", key, len(queries), lambda: self._search(queries, k, plan))

    def _search(self, queries: Sequence[str], k: int, plan: RegionPlan | None) -> list[list[str]]:
        q_tokens = [
            [t for t in toks if t in self._bm25.vocab_dict] for toks in tokenize(queries, self.lang)
        ]
        out: list[list[str]] = [[] for _ in q_tokens]
        named = _regions_named(plan, len(q_tokens))
        for region, todo in _by_region(q_tokens, named).items():
            idx, scores = self._bm25.retrieve(
                [q_tokens[i] for i in todo],
                k=k,
                show_progress=False,
                n_threads=0,
                weight_mask=_region_mask(plan, region),
            )
            for row, i in enumerate(todo):
                keep = scores[row] > 0
                out[i] = [str(d) for d in self.doc_ids[idx[row][keep]]]
        return out


def _regions_named(plan: RegionPlan | None, n: int) -> list[str | None]:
    """The region each of the `n` questions names (None: none, or no plan)."""
    named = plan.named if plan is not None else [None] * n
    if len(named) != n:
        raise ValueError(f"BM25Index.search: region plan for {len(named)} questions, {n} given")
    return named


def _by_region(q_tokens: list[list[str]], named: list[str | None]) -> dict[str | None, list[int]]:
    """The questions with a known token, grouped by the region they name (searched together)."""
    groups: dict[str | None, list[int]] = {}
    for i, toks in enumerate(q_tokens):
        if toks:
            groups.setdefault(named[i], []).append(i)
    return groups


def _region_mask(plan: RegionPlan | None, region: str | None) -> np.ndarray | None:
    """The weight mask restricting a search to `region`'s documents (None: all of them)."""
    return None if region is None or plan is None else plan.masks[region].astype(np.float32)


@lru_cache(maxsize=2)
def _built_index(
    cls: type[BM25Index],
    doc_ids: tuple[str, ...],
    texts: tuple[str, ...],
    lang: str,
    k1: float,
    b: float,
) -> BM25Index:
    """The index of these documents, built once per process for the same texts and settings:
    stage 02 retrieves for the question set and again for the refusal questions over the same
    knowledge base (at the paper's scale a second build cost ~5 s). Searching never changes an
    index; the kernel's reset empties the memo between stages (`cube.run.kernel`)."""
    return cls(doc_ids, texts, lang=lang, k1=k1, b=b)
