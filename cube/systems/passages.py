"""Retrieved passages (chunk texts) mapped to the knowledge-base documents they came from.

A system that reports what it retrieved as texts (ragas' `retrieved_contexts`, DeepEval's
`retrieval_context`, an HTTP service returning its chunks) gives no doc ids, yet R@k needs
them. `map_passages` finds, for each passage, the corpus document it was cut from BY WHAT IT
SAYS: the user's chunker wrote the document with the user's own field labels, in its own field
order, wrapped and punctuated its own way, not as the workbench renders it (`corpus.text`, the
"label：value" guide of `cube.kb.document`). So:

1. Content form (`normalise`). Both sides are compared as Unicode NFKC, case folded, with every
   character that is not a letter or a digit removed: whitespace, punctuation (full-width or
   not), Markdown marks, bullets, ellipses. Re-wrapped lines, "：" for ":" or ";" for "," change
   nothing. A document is held twice: its whole rendering, and its field VALUES with the
   workbench's labels taken out (`cube.config.schema` FIELD_LABELS and EXTRA_LABELS, in both
   languages, at the start of a line), joined in order: a chunk that carries values and no
   labels, or other labels, is then text of the document too.
2. Contained. The passage's content form inside exactly one document (whole or values) maps
   to it; inside several, it is a tie (step 5).
3. Pieces. A passage written as lines of "Label: value" with the user's labels: each line's
   label (a short head before the first ":" or "：", `_USER_LABEL`) is cut off, and a document
   holding every piece (in any order: the user's fields need not be in ours) is the match;
   several such documents are a tie.
4. Ranked. Otherwise (lines joined so labels sit mid-line, a few characters edited, a cut
   word), the passage's character 4-grams (of the content form) are compared with each
   candidate document's: the document holding most of them is the match when it holds at
   least `MIN_COVER` of the grams some document holds (a user's label is in no document: it
   must not count against the match) and `MIN_EVIDENCE` of all, and BEATS every other
   candidate: it holds at least `MARGIN` of the passage's grams that the other does not, and
   at least `RATIO` times as many as the other holds that it does not. Near-duplicate
   siblings (one service in several regions) differ in a few grams (the region, the agency,
   the address): a chunk that carries them beats its siblings; one that does not is a tie,
   never a pick. Grams are compared as sets, so the order of the user's fields does not
   matter, and a user label costs only the grams it spans. Sets lose order ("D00066" and
   "D00660" share their 4-grams), so documents still tied are compared again by
   `LONG_GRAM`-grams, where the winner must also hold every long gram a rival holds.
5. Ties. A passage that several documents hold (or cover alike) is ambiguous: the items of a
   family share whole sections. It maps to a document that an unambiguous passage of the SAME
   question mapped to, when that document fits it as well (the earliest-ranked one: a second
   chunk of a document the system retrieved); otherwise it stays unmatched. No arbitrary pick:
   a sibling chosen by corpus order would count a hit or miss that nothing in the passage
   supports. The rule never adds a document to a list; at most it moves a listed one up.

Unmatched passages (no document, too little coverage, an unresolved tie, an empty passage)
keep their rank as `unmapped:passage<k>` (a miss, never moving the passages after them up) and
are counted. `explain_passages` gives each passage's document and how it was found (or why
not). The constants and the error rates (right, wrong and unmatched shares on re-labelled,
re-ordered, re-wrapped and re-punctuated chunks of three knowledge bases, unique or shared by
siblings, before and after) are `benchmarks/passage_mapping.py`'s; the figures are in
docs/explanation/passage-mapping.md.

Speed: a 4-gram index (gram -> documents holding it) picks the candidates from a passage's
rarest grams, so a passage costs a few numpy sums, a few `in` tests and at most `CANDIDATES`
set intersections, not one per document; a passage text is matched once per index.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cube.config.schema import EXTRA_LABELS, FIELD_LABELS, require_columns

GRAM = 4  # characters per n-gram of the candidate index and of the ranked match
LONG_GRAM = 8  # characters per n-gram of the ranked match's second pass among tied documents
PROBE = 32  # rarest grams of a passage used to find its candidates
CANDIDATES = 16  # documents a passage is compared with in the ranked match
MIN_COVER = 0.6  # share of the passage's known grams the best document must hold (ranked)
MIN_EVIDENCE = 0.5  # share of ALL the passage's grams it must hold (ranked match)
MARGIN = 3  # grams the best document must hold that a rival does not (ranked match)
RATIO = 3.0  # ... and that many times the grams the rival holds that the best does not
MIN_RANKED_CHARS = 16  # shorter passages (content form) are matched by containment only

_NOT_CONTENT = re.compile(r"[\W_]+")
_OUR_LABELS = sorted(
    {
        lab
        for table in (FIELD_LABELS, EXTRA_LABELS)
        for lang in table.values()
        for lab in lang.values()
    },
    key=len,
    reverse=True,
)
# Our rendering's label at a line's start ("事项名称：", "Item Name: "): taken out for the values.
_OUR_LABEL = re.compile(rf"^[ \t]*(?:{'|'.join(map(re.escape, _OUR_LABELS))})[ \t]*[:：]", re.M)
# A user's label at a line's start: a short head before the first colon, no sentence inside it
# ("- **Who can apply**:", "办理地点："), not a time ("9:00") or a URL ("https://").
_USER_LABEL = re.compile(
    r"^[\s\-*+#>]*(?:\*\*)?([^\W\d_][^:：。.!?；;,，、()（）\d\n]{0,29}?)(?:\*\*)?\s*[:：](?!//)"
)


def _as_text(text: object) -> str:
    """A cell as text: '' for None and NaN (a missing passage in a table)."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    return str(text)


def normalise(text: object) -> str:
    """A text's content form: NFKC, case folded, letters and digits only ('' for None, NaN)."""
    return _NOT_CONTENT.sub("", unicodedata.normalize("NFKC", _as_text(text)).casefold())


def values_text(text: object) -> str:
    """A rendered document with the workbench's labels taken out (its field values, in order)."""
    return _OUR_LABEL.sub("", _as_text(text))


def pieces(passage: object) -> list[str]:
    """A passage's lines with a leading label cut off, in content form (empty ones dropped)."""
    out = []
    for line in _as_text(passage).splitlines():
        m = _USER_LABEL.match(line)
        text = normalise(line[m.end() :] if m else line)
        if text:
            out.append(text)
    return out


def _grams(text: str, n: int = GRAM) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}


def _among_held(ranked: Found | None, held: list[int], text: str, parts: tuple[str, ...]) -> Found:
    """The pieces tie between `held`: the ranked match decides when it names one of them alone."""
    if ranked and len(ranked.docs) == 1 and ranked.docs[0] in held:
        return ranked
    return Found(tuple(held), "pieces", 1.0, text, parts)


def _beats(best: set[str], other: set[str]) -> bool:
    """Whether the grams a document covers (`best`) decide against another's (`other`)."""
    ahead, behind = len(best - other), len(other - best)
    return ahead >= MARGIN and ahead >= RATIO * behind


@dataclass(frozen=True)
class Found:
    """What a passage matched: `docs` (indices, corpus order; one = a match, several = a tie),
    `how` ('contained', 'pieces', 'ranked', 'none' or 'empty'), `cover` (the share of the
    passage's known grams the best document holds, 1.0 for containment), `text` (its content
    form) and `parts` (what a document must hold to fit it: the text, or its pieces)."""

    docs: tuple[int, ...]
    how: str
    cover: float = 0.0
    text: str = ""
    parts: tuple[str, ...] = ()


class PassageIndex:
    """The corpus documents in content form (whole and values), with a 4-gram index.

    Args:
        doc_ids: the documents' ids, in corpus order.
        texts: their texts (`corpus.text`).
    """

    def __init__(self, doc_ids: Sequence[str], texts: Iterable[object]):
        self.doc_ids = [str(d) for d in doc_ids]
        raw = list(texts)
        self.texts = [normalise(t) for t in raw]
        self.values = [normalise(values_text(t)) for t in raw]
        postings: dict[str, list[int]] = defaultdict(list)
        self._gramsets: list[set[str]] = []
        for i, (whole, vals) in enumerate(zip(self.texts, self.values, strict=True)):
            grams = _grams(whole) | _grams(vals)
            self._gramsets.append(grams)
            for gram in grams:
                postings[gram].append(i)
        self._postings = {g: np.asarray(v, dtype=np.int32) for g, v in postings.items()}
        self._seen: dict[str, Found] = {}

    def holds(self, doc: int, text: str) -> bool:
        """Whether document `doc` holds a content-form text (in its rendering or its values)."""
        return text in self.texts[doc] or text in self.values[doc]

    def _holding(self, parts: Sequence[str]) -> list[int] | None:
        """The documents holding every part; None when some gram of them is in no document."""
        grams = set().union(*(_grams(p) for p in parts))
        if any(g not in self._postings for g in grams):
            return None
        if not grams:  # parts shorter than a gram: scan (rare, and they are short)
            return [i for i in range(len(self.texts)) if self._holds_all(i, parts)]
        return [int(i) for i in self._probed(grams) if self._holds_all(int(i), parts)]

    def _holds_all(self, doc: int, parts: Sequence[str]) -> bool:
        return all(self.holds(doc, p) for p in parts)

    def _probed(self, grams: set[str]) -> np.ndarray:
        """The documents holding the `PROBE` rarest grams (candidates, checked whole after)."""
        probe = sorted(grams, key=lambda g: len(self._postings[g]))[:PROBE]
        counts = np.bincount(
            np.concatenate([self._postings[g] for g in probe]), minlength=len(self.texts)
        )
        return np.flatnonzero(counts == len(probe))

    def find(self, passage: object) -> Found:
        """The documents one passage matches and how (module docstring, steps 2-4), memoised."""
        key = _as_text(passage)
        if key not in self._seen:
            self._seen[key] = self._find(key)
        return self._seen[key]

    def _find(self, passage: str) -> Found:
        text = normalise(passage)
        if not text:
            return Found((), "empty")
        docs = self._holding([text])
        if docs:
            return Found(tuple(docs), "contained", 1.0, text, (text,))
        parts = tuple(dict.fromkeys(pieces(passage)))
        held = self._pieces_held(parts, text)
        if held and len(held) == 1:
            return Found(tuple(held), "pieces", 1.0, text, parts)
        ranked = self._ranked(text) if len(text) >= MIN_RANKED_CHARS else None
        if held:  # the pieces tie: the ranked match may decide among those documents only
            return _among_held(ranked, held, text, parts)
        return ranked or Found((), "none", 0.0, text)

    def _pieces_held(self, parts: tuple[str, ...], text: str) -> list[int] | None:
        """Step 3: the documents holding every piece of the passage (None when the pieces are
        the passage itself, already looked for whole)."""
        if len(parts) > 1 or (parts and parts[0] != text):
            return self._holding(parts)
        return None

    def _ranked(self, text: str) -> Found:
        """Step 4: the candidate covering most of the passage's grams, if it beats the rest."""
        grams = _grams(text)
        known = sorted((len(self._postings[g]), g) for g in grams if g in self._postings)
        if not known:
            return Found((), "none", 0.0, text)
        order = self._candidates([g for _, g in known[:PROBE]])
        cover = {i: grams & self._gramsets[i] for i in order}
        best = max(order, key=lambda i: len(cover[i]))  # max keeps the first of equals
        # Grams no document holds (a user's label, an edit) cannot point anywhere: the share
        # counts the passage's known grams; `MIN_EVIDENCE` of all of them must be held too.
        share = len(cover[best]) / len(known)
        if share < MIN_COVER or len(cover[best]) < MIN_EVIDENCE * len(grams):
            return Found((), "none", share, text)
        return Found(tuple(sorted(self._tied(text, order, cover, best))), "ranked", share, text)

    def _candidates(self, probe: list[str]) -> list[int]:
        """The `CANDIDATES` documents holding most of the probe grams (any of them), most first."""
        counts = np.bincount(
            np.concatenate([self._postings[g] for g in probe]), minlength=len(self.texts)
        )
        return [int(i) for i in np.argsort(-counts, kind="stable")[:CANDIDATES] if counts[i]]

    def _tied(
        self, text: str, order: list[int], cover: dict[int, set[str]], best: int
    ) -> list[int]:
        """The best candidate and those it does not beat, told apart by longer grams when
        several."""
        tied = [i for i in order if i == best or not _beats(cover[best], cover[i])]
        if len(tied) > 1:  # sets of 4-grams lose order ("D00066" and "D00660" share them)
            tied = self._longer(text, tied)
        return tied

    def _longer(self, text: str, tied: list[int]) -> list[int]:
        """The ranked match's second pass: the tied documents compared by `LONG_GRAM`-grams,
        the same rule; those none beats."""
        grams = _grams(text, LONG_GRAM)
        cover = {i: {g for g in grams if self.holds(i, g)} for i in tied}
        best = max(tied, key=lambda i: len(cover[i]))
        return [
            i
            for i in tied
            if i == best or not (_beats(cover[best], cover[i]) and cover[i] <= cover[best])
        ]

    def fits(self, found: Found, doc: int) -> bool:
        """Whether document `doc` fits a tied passage as well as its tied documents do."""
        if doc in found.docs:
            return True
        if found.how in ("contained", "pieces"):
            return all(self.holds(doc, p) for p in found.parts)
        if found.how != "ranked" or not found.docs:
            return False
        grams = _grams(found.text)
        best = max((grams & self._gramsets[i] for i in found.docs), key=len)
        return not _beats(best, grams & self._gramsets[doc])

    def resolve(self, passages: Sequence[object]) -> list[int | None]:
        """One document (index) or None per passage of ONE question, in rank order.

        A tied passage goes to the earliest-listed document an unambiguous passage of the
        question mapped to that fits it as well (`fits`, so a tie among more documents than
        `CANDIDATES` resolves too); else it stays unmatched. A tie never adds a document to
        the list: at most it moves a listed one up to the tied passage's rank.
        """
        found = [self.find(p) for p in passages]
        anchors = list(dict.fromkeys(f.docs[0] for f in found if len(f.docs) == 1))

        def pick(f: Found) -> int | None:
            if len(f.docs) == 1:
                return f.docs[0]
            return next((a for a in anchors if self.fits(f, a)), None) if f.docs else None

        return [pick(f) for f in found]


@dataclass(frozen=True)
class PassageMatch:
    """One passage's outcome: its doc id (None: unmatched), how it was found ('contained',
    'pieces', 'ranked', 'tie' resolved by another passage of the question; unmatched: 'tie',
    'none', 'empty'), the candidates of a tie and the share of its grams the best document
    holds."""

    doc_id: str | None
    how: str
    tied: tuple[str, ...] = ()
    cover: float = 0.0


def explain_passages(lists: list[list[str]], corpus: pd.DataFrame) -> list[list[PassageMatch]]:
    """Each question's passages with their document and how it was found (or why not).

    Raises:
        SchemaError: the corpus lacks `doc_id` or `text`.
    """
    require_columns(corpus, ("doc_id", "text"), "corpus")
    index = PassageIndex(corpus["doc_id"].tolist(), corpus["text"].tolist())
    out = []
    for passages in lists:
        picked = index.resolve(passages)
        row = []
        for p, doc in zip(passages, picked, strict=True):
            f = index.find(p)
            how = f.how if len(f.docs) == 1 else "tie" if f.docs else f.how
            tied = tuple(index.doc_ids[i] for i in f.docs) if len(f.docs) > 1 else ()
            row.append(
                PassageMatch(None if doc is None else index.doc_ids[doc], how, tied, f.cover)
            )
        out.append(row)
    return out


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

    Raises:
        SchemaError: the corpus lacks `doc_id` or `text`.
    """
    explained = explain_passages(lists, corpus)
    out = [
        list(
            dict.fromkeys(
                m.doc_id if m.doc_id is not None else f"unmapped:passage{k + 1}"
                for k, m in enumerate(row)
            )
        )
        for row in explained
    ]
    return out, sum(m.doc_id is None for row in explained for m in row)
