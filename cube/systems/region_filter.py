"""Retrieval restricted to the region a question names (builtin option `region_filter: question`).

The paper gives each region its own knowledge base (3.3). A single index over a whole
province's items lets BM25 answer "绿园区的X怎么办" with the X guide of another district: same
text, wrong region. With `region_filter: question` the builtin retriever first reads the
region named in the question and searches only the items that region's knowledge base
holds:

- the named region is the LONGEST corpus region value that occurs in the question
  ("明川省青石市" wins over "明川省"), among the values of `region` and, when the corpus has
  it, `parent_region` (the enclosing level, e.g. a 上级区划名称 column). Values shorter than 2
  characters are ignored (too many accidental matches);
- the named region's knowledge base holds its own items, the items of every enclosing
  level (a region whose name contains another's, as `region_mask` has it: 明川省 encloses
  明川省青石市; or the chain of `parent_region` values) and, when the named region is itself a
  parent, the items of every region whose `parent_region` it is (asking about 长春市 reaches
  its districts' items);
- a question naming no region is searched without a filter; `RegionFilter.plan` counts
  these (`unfiltered`) next to the filtered ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cube.config.phrasing import clean

MIN_REGION_CHARS = 2


def _values(corpus: pd.DataFrame, column: str) -> list[str]:
    """The column's values as stripped text; missing values and placeholders (无, 暂无, N/A)
    are ""."""
    if column not in corpus.columns:
        return [""] * len(corpus)
    return [clean(v) if isinstance(v, str) or pd.notna(v) else "" for v in corpus[column].tolist()]


@dataclass
class RegionPlan:
    """Per question: the named region (None: no filter) and the allowed rows per named region."""

    named: list[str | None]
    masks: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def filtered(self) -> int:
        return sum(r is not None for r in self.named)

    @property
    def unfiltered(self) -> int:
        return sum(r is None for r in self.named)


class RegionFilter:
    """The region vocabulary of a corpus (its rows in index order) and each region's knowledge base.

    Args:
        corpus: the indexed rows (`region`; `parent_region` optional).
    """

    def __init__(self, corpus: pd.DataFrame):
        self.regions = np.asarray(_values(corpus, "region"), dtype=object)
        self.parents = np.asarray(_values(corpus, "parent_region"), dtype=object)
        self.parent_of: dict[str, str] = {}
        for r, p in zip(self.regions, self.parents, strict=True):
            if r and p and r != p:
                self.parent_of.setdefault(r, p)
        names = {v for v in (*self.regions, *self.parents) if len(v) >= MIN_REGION_CHARS}
        self.vocabulary: tuple[str, ...] = tuple(sorted(names, key=lambda v: (-len(v), v)))

    def named_region(self, question: str) -> str | None:
        """The longest region value occurring in `question` (None when it names none)."""
        text = str(question)
        for name in self.vocabulary:  # longest first
            if name in text:
                return name
        return None

    def ancestors(self, region: str) -> set[str]:
        """`region` and every enclosing level: region values contained in its name, and its
        parent chain."""
        out = {region} | {r for r in set(self.regions) if r and r in region}
        cur, seen = region, set()
        while cur in self.parent_of and cur not in seen:
            seen.add(cur)
            cur = self.parent_of[cur]
            out.add(cur)
            out |= {r for r in set(self.regions) if r and r in cur}
        return out

    def mask(self, region: str) -> np.ndarray:
        """The rows of `region`'s knowledge base (own items, enclosing levels, child
        regions' items)."""
        enclosing = self.ancestors(region)
        return np.array(
            [
                r in enclosing or p == region
                for r, p in zip(self.regions, self.parents, strict=True)
            ],
            dtype=bool,
        )

    def plan(self, questions: Sequence[str]) -> RegionPlan:
        """The named region of each question and the allowed rows of each named region."""
        named = [self.named_region(q) for q in questions]
        masks = {r: self.mask(r) for r in sorted({r for r in named if r is not None})}
        return RegionPlan(named=named, masks=masks)
