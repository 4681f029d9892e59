"""What a system retrieved, as ranked knowledge-base doc ids: the one policy of every kind.

A system reports its retrieval as ids (an http or python system's `retrieved_ids`, an imported
file's `retrieved_doc_ids`, RAGFlow's chunk names mapped to ids) or as passages (chunk texts:
ragas' `retrieved_contexts`, DeepEval's `retrieval_context`, an http service's chunks). R@k needs
ranked doc ids, and every kind turns a reply into them the same way (`ranked_lists`):

- a reply's ids are used when it gives any (or has no passages); else its passages are mapped to
  the documents they came from (`cube.systems.passages.map_passages`);
- an id the knowledge base does not have keeps its rank as `unmapped:<id>`, an unmatched passage
  as `unmapped:passage<k>`: a miss that never moves the entries after it up (dropping it would
  inflate R@k);
- a document listed again keeps its first rank;
- the list is cut at the system's `top_n` (and whether it was longer is kept per list).

A passage that near-duplicate documents hold equally (siblings that differ only by region) and
that no other passage of its question settles is a tie: it keeps its rank as
`unmapped:passage<k>:tied:<id>|<id>...` with the documents it may have come from (`*`: more than
`cube.systems.passages.CANDIDATES`, any document). A tie is not a mapping failure: when the
question's gold document is not among the tied ones it is a miss like any other, and when it is,
the question's R@k is undetermined (`undetermined`), never counted as a miss nor as a hit.

The kinds of miss are counted apart, each with what was read (`RetrievedLists`): passages no
document matched, ties, ids not in the knowledge base (with a "did you mean": the knowledge-base
id equal to it once case and surrounding whitespace are ignored, `did_you_mean`).
`unmeasured_reasons` says
when more than a share of either did not map (`analysis.max_unmapped_share`): then the system's
retrieval was not measured, and scoring its lists would count an unreadable reply as a miss.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

UNMAPPED = "unmapped:"
TIED = ":tied:"  # an unresolved tie's marker: unmapped:passage<k>:tied:D1|D2 (module docstring)
ANY = "*"  # a tie among more documents than the matcher compares: any document


@dataclass(frozen=True)
class Retrieved:
    """One reply's retrieval as the system gave it: ids, passages, or both (None: not given)."""

    ids: Sequence[str] | None = None
    passages: Sequence[str] | None = None


@dataclass
class RetrievedLists:
    """Per reply, the ranked doc ids (cut at `top_n`), and what did not map.

    Attributes:
        lists: per reply, doc ids in rank order (misses as `unmapped:...`), at most `top_n`.
        long: per reply, whether its list was longer than `top_n` before the cut.
        passages: entries kept from replies mapped by passage (after the cut at `top_n`: what
            R@k reads; a document's second chunk is one entry).
        unmapped_passages: of those, how many matched no document (text of none).
        tied_passages: of those, how many near-duplicate documents hold equally (unresolved).
        ids: entries kept from replies read by id, summed (after the cut).
        unknown_ids: of those, the ids the knowledge base does not have, in order of reading.
        did_you_mean: unknown id -> the knowledge-base id it equals ignoring case and whitespace.
    """

    lists: list[list[str]]
    long: list[bool]
    passages: int = 0
    unmapped_passages: int = 0
    tied_passages: int = 0
    ids: int = 0
    unknown_ids: list[str] = field(default_factory=list)
    did_you_mean: dict[str, str] = field(default_factory=dict)

    @property
    def truncated(self) -> int:
        """Lists longer than `top_n` (cut)."""
        return sum(self.long)

    @property
    def unmapped(self) -> int:
        """Entries that named no knowledge-base document (passages and ids together)."""
        return self.unmapped_passages + len(self.unknown_ids)

    def summary(self) -> dict[str, int]:
        """The counts, for `results.json`."""
        return {
            "passages": self.passages,
            "unmapped_passages": self.unmapped_passages,
            "tied_passages": self.tied_passages,
            "ids": self.ids,
            "unknown_ids": len(self.unknown_ids),
        }


def _key(doc_id: str) -> str:
    return doc_id.strip().casefold()


def did_you_mean(unknown: Iterable[str], known: Iterable[str]) -> dict[str, str]:
    """Each unknown id that equals exactly one known id once case and surrounding whitespace are
    ignored, mapped to that id (`dog01` -> `DOG01`); ids with no such match, or several, are left
    out (a guess between two would be a guess)."""
    by_key: dict[str, list[str]] = {}
    for d in known:
        by_key.setdefault(_key(d), []).append(d)
    out: dict[str, str] = {}
    for d in unknown:
        match = by_key.get(_key(d), [])
        if len(match) == 1 and match[0] != d:
            out[d] = match[0]
    return out


def ranked_lists(
    replies: Sequence[Retrieved | None], corpus: pd.DataFrame, top_n: int | None
) -> RetrievedLists:
    """Each reply's ranked knowledge-base doc ids (module docstring); None (a failed call) gives
    an empty list. `top_n` None: not cut. The counts (`passages`, `ids` and their misses) are of
    the entries kept after the cut, the ones R@k reads: a tail of unknown ids past `top_n` does not
    withhold a system whose first `top_n` are known, nor a known tail hide a first `top_n` that
    named nothing."""
    known = set(corpus["doc_id"].astype(str))
    passages = _passage_replies(replies)
    ids = _id_replies(replies, passages)
    lists = _lists(len(replies), passages, ids, corpus, known)
    out = RetrievedLists(lists=lists, long=[top_n is not None and len(d) > top_n for d in lists])
    if top_n is not None:
        lists[:] = [docs[:top_n] for docs in lists]  # in place: `out.lists` holds the cut lists
    for i, docs in enumerate(lists):
        _count(docs, i in passages, out)
    unknown = [d for listed in ids.values() for d in listed if d not in known]
    out.did_you_mean = did_you_mean(dict.fromkeys(unknown), known)
    return out


def _lists(
    n: int,
    passages: dict[int, list[str]],
    ids: dict[int, list[str]],
    corpus: pd.DataFrame,
    known: set[str],
) -> list[list[str]]:
    """Every reply's doc ids before the cut (empty for a failed call), each document once in its
    first rank."""
    lists: list[list[str]] = [[] for _ in range(n)]
    if passages:
        for i, docs in zip(passages, _mapped(list(passages.values()), corpus), strict=True):
            lists[i] = docs
    for i, listed in ids.items():
        lists[i] = _id_list(listed, known)
    return [list(dict.fromkeys(docs)) for docs in lists]  # a document keeps its first rank


def _passage_replies(replies: Sequence[Retrieved | None]) -> dict[int, list[str]]:
    """The replies ranked by their passages (no ids, passages given): index -> passages."""
    return {
        i: list(r.passages)
        for i, r in enumerate(replies)
        if r is not None and not r.ids and r.passages is not None
    }


def _id_replies(
    replies: Sequence[Retrieved | None], passages: dict[int, list[str]]
) -> dict[int, list[str]]:
    """The replies ranked by their ids: index -> the ids as text, each once in its first rank."""
    return {
        i: list(dict.fromkeys(str(d) for d in r.ids))
        for i, r in enumerate(replies)
        if r is not None and i not in passages and r.ids is not None
    }


def _id_list(ids: list[str], known: set[str]) -> list[str]:
    """A reply's ids, those not in the knowledge base marked `unmapped:<id>` (they count as
    misses)."""
    return [d if d in known else f"{UNMAPPED}{d}" for d in ids]


def _count(docs: list[str], by_passage: bool, out: RetrievedLists) -> None:
    """One kept list's entries counted into `out`: passages (matched, tied, of no document) or ids
    (known, unknown)."""
    if by_passage:
        out.passages += len(docs)
        for d in docs:
            if d.startswith(UNMAPPED):
                if TIED in d:
                    out.tied_passages += 1
                else:
                    out.unmapped_passages += 1
        return
    out.ids += len(docs)
    out.unknown_ids += [d[len(UNMAPPED) :] for d in docs if d.startswith(UNMAPPED)]


def _mapped(texts: list[list[str]], corpus: pd.DataFrame) -> list[list[str]]:
    """Each reply's passages as doc ids (`cube.systems.passages.explain_passages`): a match its
    document, an unresolved tie `unmapped:passage<k>:tied:...`, text of no document
    `unmapped:passage<k>`."""
    from cube.systems.passages import CANDIDATES, explain_passages

    lists = []
    for row in explain_passages(texts, corpus):
        docs = []
        for k, m in enumerate(row, start=1):
            if m.doc_id is not None:
                docs.append(m.doc_id)
            elif m.tied:
                tied = ANY if len(m.tied) >= CANDIDATES else "|".join(m.tied)
                docs.append(f"{UNMAPPED}passage{k}{TIED}{tied}")
            else:
                docs.append(f"{UNMAPPED}passage{k}")
        lists.append(docs)
    return lists


def tied_with(entry: str) -> set[str] | None:
    """The documents an unresolved tie's entry may have come from ({'*'}: any); None: no tie."""
    if not entry.startswith(UNMAPPED) or TIED not in entry:
        return None
    return set(entry.split(TIED, 1)[1].split("|"))


def undetermined(gold: str, docs: Sequence[str]) -> bool:
    """Whether a question's R@k cannot be told from its list: a tie that may be the gold document
    stands before the gold's own rank (or anywhere, when the gold is not listed). A tie among
    other documents is a miss like any other; one after the gold's rank changes nothing."""
    for d in docs:
        if d == gold:
            return False
        tied = tied_with(str(d))
        if tied is not None and (gold in tied or ANY in tied):
            return True
    return False


def unmeasured_reasons(r: RetrievedLists, max_share: float) -> list[str]:
    """Why the retrieval was not measured (empty: it was): more than `max_share` of the passages
    read matched no document, or more than `max_share` of the ids read are not knowledge-base ids.
    Each reason says how many of how many, and the fix."""
    out = []
    if r.passages and r.unmapped_passages / r.passages > max_share:
        out.append(
            f"{r.unmapped_passages} of {r.passages} retrieved passages matched no document: "
            "retrieval not measured (a passage must be text of one knowledge-base document: check "
            "the field read as passages, an http system's response.retrieved_passages or an "
            "imported file's `columns:`, and the knowledge base's mapping; "
            "docs/explanation/passage-mapping.md)"
        )
    if r.ids and len(r.unknown_ids) / r.ids > max_share:
        distinct = list(dict.fromkeys(r.unknown_ids))
        hint = ", ".join(f"{d!r} -> {r.did_you_mean[d]!r}" for d in distinct if d in r.did_you_mean)
        head = f"{len(r.unknown_ids)} of {r.ids} retrieved ids are not knowledge-base doc ids"
        out.append(
            f"{head}: retrieval not measured (did you mean {_cut(hint)}? ids must match the "
            "knowledge base's doc_id exactly, case included)"
            if hint
            else f"{head} (e.g. {distinct[:3]}): retrieval not measured (the ids must be the "
            "knowledge base's doc_id values: check its mapping and the field read as ids)"
        )
    return out


def _cut(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
