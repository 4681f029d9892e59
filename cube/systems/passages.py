"""Retrieved passages (chunk texts) mapped to the knowledge-base documents they came from.

A system that reports what it retrieved as texts (ragas' `retrieved_contexts`, DeepEval's
`retrieval_context`, an HTTP service returning its chunks) gives no doc ids, yet R@k needs
them. `map_passages` finds, for each passage, the corpus document (`corpus.text`, the rendered
"label：value" guide of `cube.kb.document`) it was cut from:

1. Exact containment. Passage and documents are compared after `normalise`: Unicode NFKC
   (full-width "：" and "（" become ":" and "("), case folded, Markdown bold marks, bullets,
   heading marks and ellipses dropped (RAGFlow shows a chunk as "- **事项名称**：...", a cut
   chunk often ends in "..." or "…"), every whitespace character removed (chunkers re-wrap
   lines, and Chinese text has no spaces to lose). A passage contained in exactly one document
   maps to it.
2. Fuzzy match, for passages contained in no document (a chunker that changed a few
   characters, cut a word, dropped a label): rapidfuzz scores the passage against the
   `CANDIDATES` documents sharing most of its rare character 4-grams; the best document
   scoring at least `FUZZY_THRESHOLD` (0-100) maps, when no other document scores within
   `TIE_MARGIN` of it. `fuzzy_score` says how a score is made.
3. Ties. A passage contained in several documents (the near-duplicate items of a family share
   most of their text: the same requirements, procedure and materials across regions), or
   scoring equally on several, is ambiguous. Rule (`PassageIndex.resolve`): it maps to a
   document an unambiguous passage of the SAME question mapped to, when that document fits it
   as well as its best (the earliest-ranked such document: a second chunk of a document the
   system retrieved); otherwise it stays unmatched. No arbitrary pick: a sibling chosen by
   corpus order would count a retrieval hit or miss that nothing in the passage supports. The
   rule never adds a document to a list; at most it moves a listed one up.

Unmatched passages (no document, a fuzzy score under the threshold, an unresolved tie, an
empty passage) keep their rank as `unmapped:passage<k>` (a miss, never moving the passages
after them up) and are counted. The threshold and the error rates (right,
wrong and unmatched shares by chunk length, with near-duplicate siblings present and for text
not in the corpus) are `benchmarks/passage_mapping.py`'s; docs/measurements.md holds the
figures, docs/explanation/passage-mapping.md what they mean.

Speed: a character 4-gram index (gram -> documents holding it) picks the candidates, so a
passage costs a few numpy array sums, a few `in` tests and at most `CANDIDATES` rapidfuzz
scores, not one per document; the same passage text is matched once per index (per call of
`map_passages`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from rapidfuzz import fuzz

from cube.config.schema import require_columns

GRAM = 4  # characters per n-gram of the candidate index
PROBE = 24  # rarest grams of a passage used to find its candidates
CANDIDATES = 8  # documents a passage is fuzzy-scored against
FUZZY_THRESHOLD = 95.0  # rapidfuzz score (0-100) a fuzzy match needs: benchmarks/passage_mapping.py
TIE_MARGIN = 1.0  # scores this close to the best are a tie (ambiguous)
MIN_FUZZY_CHARS = 12  # shorter passages (normalised) are matched exactly or not at all
PIECE = 64  # rapidfuzz's partial_ratio is bit-parallel (fast) for needles up to 64 characters

_SPACE = re.compile(r"\s+")
# Markdown a system may wrap a chunk in ("- **事项名称**：...", "## 办理流程"): bold
# markers anywhere, list bullets and heading hashes at a line's start; and the ellipsis a
# system marks a cut chunk with ("..." after NFKC turns "…" into it).
_MARKUP = re.compile(r"\*\*|__|^[ \t]*(?:[-*+]|#{1,6})[ \t]+|\.{3,}", re.M)


def normalise(text: object) -> str:
    """Text as compared: NFKC, case folded, Markdown emphasis, bullets, heading marks and
    ellipses dropped, no whitespace ('' for None and NaN)."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    text = _MARKUP.sub("", unicodedata.normalize("NFKC", str(text)))
    return _SPACE.sub("", text.casefold())


def _grams(text: str) -> list[str]:
    return [text[i : i + GRAM] for i in range(len(text) - GRAM + 1)]


def fuzzy_score(passage: str, document: str) -> float:
    """How well a (normalised) passage fits somewhere in a (normalised) document, 0-100.

    A passage up to `PIECE` characters, or one longer than the document: rapidfuzz's
    `fuzz.partial_ratio` (the best-fitting window of the longer text). A longer passage:
    `fuzz.partial_ratio_alignment` places its head, middle and tail `PIECE` characters in the
    document, and the passage is scored with `fuzz.ratio` against the document's text of the
    passage's length at each of those places (the best of the three). partial_ratio of a
    600-character passage costs about 1.9 ms per document here, ratio 21 us: the three
    placements keep the sliding search to 64 characters.
    """
    if len(passage) <= PIECE or len(passage) >= len(document):
        return float(fuzz.partial_ratio(passage, document))
    best = 0.0
    for start in sorted({0, (len(passage) - PIECE) // 2, len(passage) - PIECE}):
        where = fuzz.partial_ratio_alignment(passage[start : start + PIECE], document)
        if where is None:
            continue
        # partial_ratio_alignment names the needle src (the piece, shorter) and the window dest
        at = max(0, min(where.dest_start - start, len(document) - len(passage)))
        best = max(best, fuzz.ratio(passage, document[at : at + len(passage)]))
    return best


class PassageIndex:
    """The corpus documents, normalised, with a character 4-gram index for candidates.

    Args:
        doc_ids: the documents' ids, in corpus order.
        texts: their texts (`corpus.text`).
    """

    def __init__(self, doc_ids: Sequence[str], texts: Iterable[object]):
        self.doc_ids = [str(d) for d in doc_ids]
        self.texts = [normalise(t) for t in texts]
        postings: dict[str, list[int]] = defaultdict(list)
        for i, text in enumerate(self.texts):
            for gram in set(_grams(text)):
                postings[gram].append(i)
        self._postings = {g: np.asarray(v, dtype=np.int32) for g, v in postings.items()}
        self._seen: dict[str, tuple[list[int], float]] = {}

    def match(self, passage: object, threshold: float = FUZZY_THRESHOLD) -> list[int]:
        """The documents (indices, corpus order) a passage fits: one, several (a tie) or none;
        a fuzzy match counts from `threshold` (0-100) up."""
        docs, score = self.match_scored(passage)
        return docs if score >= threshold else []

    def match_scored(self, passage: object) -> tuple[list[int], float]:
        """The documents a passage fits best and their score: 100.0 for containment, else the
        best fuzzy score (documents within `TIE_MARGIN` of it), whatever the threshold; ([], 0.0)
        when no document shares a gram or the passage is too short for a fuzzy match."""
        text = normalise(passage)
        if not text:
            return [], 0.0
        if len(text) < GRAM:  # no gram to look up: scan (rare, and such passages are short)
            return [i for i, doc in enumerate(self.texts) if text in doc], 100.0
        grams = set(_grams(text))
        known = sorted((len(self._postings[g]), g) for g in grams if g in self._postings)
        if not known:
            return [], 0.0
        probe = [g for _, g in known[:PROBE]]
        counts = np.bincount(
            np.concatenate([self._postings[g] for g in probe]), minlength=len(self.texts)
        )
        if len(known) == len(grams):  # every gram occurs somewhere: try containment
            holding = [
                int(i) for i in np.flatnonzero(counts == len(probe)) if text in self.texts[i]
            ]
            if holding:
                return holding, 100.0
        if len(text) < MIN_FUZZY_CHARS:
            return [], 0.0
        return self._fuzzy(text, counts)

    def _fuzzy(self, text: str, counts: np.ndarray) -> tuple[list[int], float]:
        """The best-scoring candidates (within `TIE_MARGIN` of the best) and the best score."""
        order = np.argsort(-counts, kind="stable")[:CANDIDATES]
        scored = [(fuzzy_score(text, self.texts[i]), int(i)) for i in order if counts[i] > 0]
        best = max((s for s, _ in scored), default=0.0)
        return sorted(i for s, i in scored if s >= best - TIE_MARGIN), best

    def fits(self, text: str, doc: int, score: float) -> bool:
        """Whether a (normalised) passage fits document `doc` as well as its best `score`:
        contained in it (score 100), else a fuzzy score within `TIE_MARGIN` of `score`."""
        if score >= 100.0:
            return text in self.texts[doc]
        return fuzzy_score(text, self.texts[doc]) >= score - TIE_MARGIN

    def resolve(self, passages: Sequence[object]) -> list[int | None]:
        """One document (index) or None per passage of ONE question, in rank order.

        A passage fitting several documents (a tie) goes to the earliest-listed document an
        unambiguous passage of the question mapped to that fits it as well as its best (scored
        here, so a tie among more documents than `CANDIDATES` resolves too); else it stays
        unmatched. A tie never adds a document to the list: at most it moves a listed one up to
        the tied passage's rank. Each distinct passage text is matched once per index.
        """
        texts = [normalise(p) for p in passages]
        found = [self._found(t) for t in texts]
        anchors = list(dict.fromkeys(docs[0] for docs, _ in found if len(docs) == 1))
        out: list[int | None] = []
        for text, (docs, score) in zip(texts, found, strict=True):
            if len(docs) == 1:
                out.append(docs[0])
            elif docs:
                out.append(
                    next((a for a in anchors if a in docs or self.fits(text, a, score)), None)
                )
            else:
                out.append(None)
        return out

    def _found(self, text: str) -> tuple[list[int], float]:
        """`match_scored` at `FUZZY_THRESHOLD`, memoised (chunks repeat across questions)."""
        if text not in self._seen:
            docs, score = self.match_scored(text)
            self._seen[text] = (docs, score) if score >= FUZZY_THRESHOLD else ([], score)
        return self._seen[text]


def map_passages(lists: list[list[str]], corpus: pd.DataFrame) -> tuple[list[list[str]], int]:
    """Each question's retrieved passages mapped to knowledge-base doc ids (module docstring).

    Args:
        lists: per question, its retrieved passages (chunk texts) in rank order.
        corpus: the knowledge base (`doc_id`, `text`).

    Returns:
        Per question, the doc ids in rank order, a document listed again collapsed to its first
        listing, an unmatched passage kept at its rank as `unmapped:passage<k>` (k its 1-based
        position: dropping it would move the passages after it up and inflate R@k); and the
        number of passages left unmatched.
    """
    require_columns(corpus, ("doc_id", "text"), "corpus")
    index = PassageIndex(corpus["doc_id"].tolist(), corpus["text"].tolist())
    out: list[list[str]] = []
    unmatched = 0
    for passages in lists:
        picked = index.resolve(passages)
        unmatched += sum(i is None for i in picked)
        out.append(
            list(
                dict.fromkeys(
                    index.doc_ids[i] if i is not None else f"unmapped:passage{k + 1}"
                    for k, i in enumerate(picked)
                )
            )
        )
    return out, unmatched
