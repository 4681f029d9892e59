"""How often the "retrieval not measured" gate withholds a verdict it should not, or lets one pass
that it should withhold, on simulated systems whose truth is known; and how often its "did you
mean" names the right id.

The gate (`cube.systems.retrieved.unmeasured_reasons`) withholds a system's verdict when more than
`analysis.max_unmapped_share` (10 %) of its retrieved passages match no knowledge-base document,
or of its ids are not knowledge-base doc ids. Its passage side rests on
`cube.systems.passages.map_passages`, whose misses on genuine chunks could withhold a system whose
retrieval is perfectly measurable.

Simulated systems on the English demo knowledge base (`generate_demo_corpus(300, "en", seed=11)`,
near-duplicate families present), each answering `QUESTIONS` questions with `K` retrieved entries:

- `passages genuine` (truth: measurable): each question's chunks cut from two knowledge-base
  documents (a retriever returns several chunks of what it found) at a random offset, 60-400
  characters, lines re-joined with spaces (a chunker's re-wrapping); `passages 1 chunk/doc`: one
  chunk from each of K documents, the worst case for near-duplicate ties (a chunk whose text
  several sibling documents hold is left unmatched unless another chunk of the question decides);
- `passages 5 % foreign` (measurable: under the share): as above, 5 % replaced by text of no
  document;
- `passages 30 % foreign` / `passages all foreign` (truth: NOT measurable);
- `ids exact` (measurable), `ids 5 % unknown` (measurable), `ids lower-cased` and `ids padded`
  (NOT measurable: the did-you-mean should name each id meant), `ids 30 % unknown` (NOT
  measurable; the unknown ids are of no document: any did-you-mean would be false).

A tie (a chunk that near-duplicate siblings hold equally) is not a mapping failure: it makes a
question's R@k undetermined only when the gold document is among the tied ones
(`cube.systems.retrieved.undetermined`; each simulated question's gold is the first document its
chunks were cut from, an id system's its first id), and the verdict is withheld when more than the
share of questions is undetermined (`analysis.max_undetermined_share`, 20 %:
`cube.systems._measured`). Both rules are applied here.

Printed: per class, the systems withheld and the did-you-mean's right / false suggestions; last,
as `name: value`, the share of measurable systems withheld (false withholding) and of
not-measurable ones let through (missed).

    .venv/bin/python benchmarks/unmeasured_retrieval.py     (under a minute)
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cube.kb.demo import generate_demo_corpus  # noqa: E402
from cube.systems.retrieved import (  # noqa: E402
    Retrieved,
    ranked_lists,
    undetermined,
    unmeasured_reasons,
)

GOLDS: list[str] = []  # the gold document of each question of the system made last

SEED = 11
SYSTEMS = 30  # per class
QUESTIONS = 20
K = 5
UNDETERMINED = 0.2  # analysis.max_undetermined_share's default
IDS: list[str] = []  # the knowledge base's doc ids
SHARE = 0.10
FOREIGN = (
    "The harbour ferry timetable changes in winter; boats leave every forty minutes.",
    "Our bakery opens at seven and the sourdough sells out before noon on Saturdays.",
    "Mountain trails above two thousand metres close after the first heavy snowfall.",
)


def chunk(text: str, rng: random.Random) -> str:
    length = min(len(text), rng.randint(60, 400))
    start = rng.randrange(0, len(text) - length + 1)
    return " ".join(text[start : start + length].split())


def passages_system(
    texts: list[str], foreign: float, rng: random.Random, docs_per_question: int = 2
) -> list[Retrieved]:
    """Each question's K chunks cut from `docs_per_question` documents (a retriever returns several
    chunks of the documents it found; K: one chunk per document, the worst case for ties)."""
    out = []
    GOLDS.clear()
    for _ in range(QUESTIONS):
        found = rng.sample(range(len(texts)), docs_per_question)
        GOLDS.append(IDS[found[0]])
        found = [texts[i] for i in found]
        items = [
            rng.choice(FOREIGN) + f" ({rng.random():.6f})"
            if rng.random() < foreign
            else chunk(found[i % docs_per_question], rng)
            for i in range(K)
        ]
        out.append(Retrieved(passages=items))
    return out


def ids_system(ids: list[str], how: str, rng: random.Random) -> list[Retrieved]:
    def one(d: str) -> str:
        if how == "lower":
            return d.lower()
        if how == "padded":
            return f" {d} "
        if how.startswith("unknown") and rng.random() < float(how.split(":")[1]):
            return f"X{rng.randrange(10**6)}"
        return d

    drawn = [rng.sample(ids, K) for _ in range(QUESTIONS)]
    GOLDS[:] = [d[0] for d in drawn]
    return [Retrieved(ids=[one(d) for d in docs]) for docs in drawn]


def main() -> None:
    rng = random.Random(SEED)
    corpus = generate_demo_corpus(300, "en", seed=SEED)
    texts, ids = corpus["text"].astype(str).tolist(), corpus["doc_id"].astype(str).tolist()
    IDS[:] = ids
    classes = {  # name -> (truth measurable, maker)
        "passages genuine": (True, lambda: passages_system(texts, 0.0, rng)),
        "passages 1 chunk/doc": (True, lambda: passages_system(texts, 0.0, rng, K)),
        "passages 5 % foreign": (True, lambda: passages_system(texts, 0.05, rng)),
        "passages 30 % foreign": (False, lambda: passages_system(texts, 0.30, rng)),
        "passages all foreign": (False, lambda: passages_system(texts, 1.0, rng)),
        "ids exact": (True, lambda: ids_system(ids, "exact", rng)),
        "ids 5 % unknown": (True, lambda: ids_system(ids, "unknown:0.05", rng)),
        "ids lower-cased": (False, lambda: ids_system(ids, "lower", rng)),
        "ids padded": (False, lambda: ids_system(ids, "padded", rng)),
        "ids 30 % unknown": (False, lambda: ids_system(ids, "unknown:0.30", rng)),
    }
    false_withheld = missed = measurable = not_measurable = 0
    print(
        f"{'class':<24}{'truth':>14}{'withheld':>10}{'unmapped':>10}{'undeterm.':>10}"
        f"{'dym right':>11}"
        f"{'dym false':>11}"
    )
    for name, (truth, make) in classes.items():
        withheld = right = false = read = unmapped = unsure = 0
        for _ in range(SYSTEMS):
            lists = ranked_lists(make(), corpus, K)
            read += lists.passages + lists.ids
            unmapped += lists.unmapped
            n_unsure = sum(undetermined(g, d) for g, d in zip(GOLDS, lists.lists, strict=True))
            unsure += n_unsure
            withheld += (
                bool(unmeasured_reasons(lists, SHARE)) or n_unsure / QUESTIONS > UNDETERMINED
            )
            for wrong, meant in lists.did_you_mean.items():
                ok = meant in ids and wrong.strip().casefold() == meant.casefold()
                right, false = right + ok, false + (not ok)
        if truth:
            measurable += SYSTEMS
            false_withheld += withheld
        else:
            not_measurable += SYSTEMS
            missed += SYSTEMS - withheld
        label = "measurable" if truth else "not measured"
        print(
            f"{name:<24}{label:>14}{withheld:>7}/{SYSTEMS}{unmapped / read:>10.1%}"
            f"{unsure / (SYSTEMS * QUESTIONS):>10.1%}{right:>11}"
            f"{false:>11}"
        )
    print(f"false_withheld_share: {false_withheld / measurable:.3f}")
    print(f"missed_share: {missed / not_measurable:.3f}")
    print(
        f"unmeasured_gate_errors: {(false_withheld + missed) / (measurable + not_measurable):.3f}"
    )


if __name__ == "__main__":
    main()
