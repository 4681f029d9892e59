"""How often `cube.systems.passages` maps a retrieved chunk to the wrong document, on known truth.

A system that returns chunk texts instead of doc ids has them mapped back to corpus documents
(`map_passages`: exact containment, then a rapidfuzz match at `FUZZY_THRESHOLD`, ties left
unmatched unless another chunk of the same question mapped to a document that fits as well).
Here the chunks are cut from documents whose identity is known:

- sources: the demo corpus in Chinese and in English (`generate_demo_corpus(600, seed=11)`:
  near-duplicate families, the same service in several regions) and the example spreadsheet's
  documents (`cube.kb.example`, loaded with `params/own_kb.yaml`'s mapping: 127 short guides,
  a few services in six regions). Near-duplicate siblings are in the knowledge base;
- IN-CORPUS chunks (truth: their source document), cut at a random offset with a random length
  (log-uniform, 20-800 characters, at most the document), seeded, in five forms:
  `exact` (the slice), `whitespace` (lines joined by spaces, spaces doubled, full-width colons
  half-width), `edited` (about 2 % of the characters replaced, at least one), `messy`
  (whitespace, edits and the end cut mid-word with "..." appended) and `markdown` (each
  "label：value" line as "- **label**：value", as RAGFlow shows chunks);
- OUT-OF-CORPUS chunks (truth: unmatched), `exact` and `edited`: `held-out` are cut from a
  sixth of the source's documents removed from the knowledge base (their siblings stay: a
  system indexing more than the sample the knowledge base holds), `foreign` from the other
  Chinese source (demo <-> example: the same fictional province's guides, another generator).
  A chunk whose normalised text is nevertheless inside some knowledge-base document cannot be
  told from an in-corpus one: it is counted as `indistinguishable` and left out of the rates;
- every chunk is mapped ALONE (its own question), the worst case for ties; a last table maps
  each in-corpus chunk that is shared by several documents beside a second chunk, unambiguous,
  from its own document (the tie rule's help) or from a sibling of the same family (its harm:
  the sibling, already listed, moves up to the shared chunk's rank).

Printed: per source and form, and per length band, the share mapped to the right document, to
a wrong one and unmatched (out-of-corpus: the share matched at all, i.e. wrong); `shared` is
the share of in-corpus chunks whose exact text is in several documents (a tie by
construction). Then the threshold sweep (wrong and unmatched shares at thresholds 70-98), from
which `FUZZY_THRESHOLD` was chosen, and the headline at the threshold in use; last, as
`name: value`, the share of in-corpus chunks mapped to a wrong document and the share of
out-of-corpus chunks matched to any.

    .venv/bin/python benchmarks/passage_mapping.py     (about a minute)
"""

from __future__ import annotations

import math
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cube.kb.corpus import load_corpus_file  # noqa: E402
from cube.kb.demo import generate_demo_corpus  # noqa: E402
from cube.kb.example import write_example_kb  # noqa: E402
from cube.systems import passages  # noqa: E402
from cube.systems.passages import PassageIndex, normalise  # noqa: E402

SEED = 11
N_DEMO = 600
PER_FORM = 300  # in-corpus chunks per (source, form)
PER_OUTSIDE = 300  # out-of-corpus chunks per (source, kind, form)
HELD_OUT_SHARE = 1 / 6
BANDS = ((20, 50), (50, 100), (100, 200), (200, 400), (400, 801))
THRESHOLDS = (70, 80, 85, 88, 90, 92, 95, 98)
FORMS = ("exact", "whitespace", "edited", "messy", "markdown")
_HAN = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会"  # common characters
_LABEL_LINE = re.compile(r"^([^：:\n]{1,30})([：:])", re.M)


@dataclass
class Chunk:
    source: str
    kind: str  # in-corpus, held-out, foreign
    form: str
    text: str
    length: int  # characters of the slice before it was altered
    truth: str  # the source doc_id ("" when out of the corpus)
    piece: str  # the slice as cut, before it was altered
    shared: bool = False  # in-corpus: the slice is in several knowledge-base documents
    inside: bool = False  # out of the corpus, yet its text is inside a knowledge-base document


# --------------------------------------------------------------------------- corpora
def example_corpus() -> pd.DataFrame:
    spec = yaml.safe_load((ROOT / "params" / "own_kb.yaml").read_text(encoding="utf-8"))["corpus"]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_example_kb(Path(tmp) / "guides.csv")
        return load_corpus_file(
            path, columns=spec["columns"], group_by=spec["group_by"], extra_columns="render"
        )


def split(corpus: pd.DataFrame, rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The knowledge base and the held-out documents (a random sixth, siblings kept)."""
    out = set(rng.sample(range(len(corpus)), round(len(corpus) * HELD_OUT_SHARE)))
    keep = [i for i in range(len(corpus)) if i not in out]
    return corpus.iloc[keep].reset_index(drop=True), corpus.iloc[sorted(out)]


# --------------------------------------------------------------------------- chunks
def cut(text: str, rng: random.Random) -> str:
    length = min(len(text), round(math.exp(rng.uniform(math.log(20), math.log(800)))))
    start = rng.randrange(0, len(text) - length + 1)
    return text[start : start + length]


def edit(text: str, rng: random.Random) -> str:
    chars = list(text)
    alphabet = _HAN if re.search(r"[\u4e00-\u9fff]", text) else "abcdefghijklmnopqrstuvwxyz"
    for i in rng.sample(range(len(chars)), max(1, round(len(chars) * 0.02))):
        chars[i] = rng.choice(alphabet)
    return "".join(chars)


def rewrap(text: str, rng: random.Random) -> str:
    text = text.replace("\n", " ").replace("：", ":")
    return re.sub(" ", lambda _: "  " if rng.random() < 0.3 else " ", text)


def alter(text: str, form: str, rng: random.Random) -> str:
    if form == "whitespace":
        return rewrap(text, rng)
    if form == "edited":
        return edit(text, rng)
    if form == "messy":
        cut_at = max(1, len(text) - rng.randint(1, 6))
        return rewrap(edit(text, rng), rng)[:cut_at] + "..."
    if form == "markdown":
        return _LABEL_LINE.sub(r"- **\1**\2", text)
    return text


def chunks_from(
    docs: pd.DataFrame, n: int, source: str, kind: str, forms: tuple[str, ...], rng: random.Random
) -> list[Chunk]:
    out = []
    for form in forms:
        for _ in range(n):
            row = docs.iloc[rng.randrange(len(docs))]
            piece = cut(str(row["text"]), rng)
            truth = str(row["doc_id"]) if kind == "in-corpus" else ""
            text = alter(piece, form, rng)
            out.append(Chunk(source, kind, form, text, len(piece), truth, piece))
    return out


def mark(chunks: list[Chunk], kb: pd.DataFrame) -> None:
    """Which in-corpus slices are in several documents (a tie by construction, whatever the
    alteration) and which out-of-corpus chunks are inside a document anyway."""
    texts = [normalise(t) for t in kb["text"]]
    for c in chunks:
        text = normalise(c.piece if c.kind == "in-corpus" else c.text)
        holders = sum(text in t for t in texts)
        c.shared = c.kind == "in-corpus" and holders > 1
        c.inside = c.kind != "in-corpus" and holders > 0


# --------------------------------------------------------------------------- mapping
def outcome(chunk: Chunk, docs: list[str]) -> str:
    """right, wrong, tie (unmatched: several documents fit equally) or none (unmatched)."""
    if len(docs) != 1:
        return "tie" if docs else "none"
    if chunk.kind != "in-corpus":
        return "wrong"
    return "right" if docs[0] == chunk.truth else "wrong"


def scored(chunks: list[Chunk], index: PassageIndex) -> list[tuple[list[str], float]]:
    memo: dict[str, tuple[list[str], float]] = {}
    for c in chunks:
        if c.text not in memo:
            docs, score = index.match_scored(c.text)
            memo[c.text] = ([index.doc_ids[i] for i in docs], score)
    return [memo[c.text] for c in chunks]


def outcomes(chunks, results, threshold: float) -> list[str]:
    return [
        outcome(c, docs if score >= threshold else [])
        for c, (docs, score) in zip(chunks, results, strict=True)
    ]


def band(length: int) -> str:
    lo, hi = next((lo, hi) for lo, hi in BANDS if lo <= length < hi)
    return f"{lo:3d}-{hi - 1}"  # padded: the bands sort by length


def shares(rows: list[str]) -> str:
    """right / wrong / unmatched shares, the unmatched split into ties and no document."""
    n = Counter(rows)
    total = len(rows) or 1
    pct = {k: 100 * n[k] / total for k in ("right", "wrong", "tie", "none")}
    return (
        f"right {pct['right']:5.1f}  wrong {pct['wrong']:4.1f}  unmatched "
        f"{pct['tie'] + pct['none']:5.1f} (tie {pct['tie']:4.1f}, none {pct['none']:5.1f})"
    )


def table(chunks, marks, key) -> None:
    groups: dict[tuple, list[str]] = {}
    shared: dict[tuple, list[bool]] = {}
    for c, m in zip(chunks, marks, strict=True):
        if c.inside:
            continue
        groups.setdefault(key(c), []).append(m)
        shared.setdefault(key(c), []).append(c.shared)
    for k in sorted(groups):
        share = 100 * sum(shared[k]) / len(shared[k])
        name = " / ".join(k)
        print(f"  {name:34s} n={len(groups[k]):4d}  {shares(groups[k])}  shared {share:4.1f} %")


# --------------------------------------------------------------------------- context (tie rule)
def with_context(chunks, kbs, rng) -> dict[str, list[str]]:
    """Shared in-corpus chunks resolved (`PassageIndex.resolve`, as `map_passages` does) at rank 1
    of a question whose rank 2 is a chunk, unambiguous (a whole document), of their own document
    or of a sibling (same family_id, another document)."""
    out: dict[str, list[str]] = {"own document": [], "a sibling": []}
    for source, kb in kbs.items():
        index = PassageIndex(kb["doc_id"].tolist(), kb["text"].tolist())
        for c in (c for c in chunks if c.source == source and c.kind == "in-corpus" and c.shared):
            row = kb[kb["doc_id"] == c.truth].iloc[0]
            family = kb[(kb["family_id"] == row["family_id"]) & (kb["doc_id"] != c.truth)]
            anchors = [("own document", row)]
            if row["family_id"] != "" and not family.empty:
                anchors.append(("a sibling", family.iloc[rng.randrange(len(family))]))
            for label, anchor in anchors:
                first = index.resolve([c.text, str(anchor["text"])])[0]
                out[label].append(outcome(c, [] if first is None else [index.doc_ids[first]]))
    return out


# --------------------------------------------------------------------------- main
def build() -> tuple[list[Chunk], dict[str, pd.DataFrame]]:
    rng = random.Random(SEED)
    full = {
        "demo-zh": generate_demo_corpus(N_DEMO, "zh", seed=SEED),
        "demo-en": generate_demo_corpus(N_DEMO, "en", seed=SEED),
        "example": example_corpus(),
    }
    foreign_of = {"demo-zh": "example", "example": "demo-zh"}
    chunks, kbs = [], {}
    for source, corpus in full.items():
        kb, held = split(corpus, rng)
        kbs[source] = kb
        part = chunks_from(kb, PER_FORM, source, "in-corpus", FORMS, rng)
        part += chunks_from(held, PER_OUTSIDE, source, "held-out", ("exact", "edited"), rng)
        if source in foreign_of:
            other = full[foreign_of[source]]
            part += chunks_from(other, PER_OUTSIDE, source, "foreign", ("exact", "edited"), rng)
        mark(part, kb)
        chunks += part
    return chunks, kbs


def main() -> None:
    chunks, kbs = build()
    results: list[tuple[list[str], float]] = []
    for source, kb in kbs.items():
        index = PassageIndex(kb["doc_id"].tolist(), kb["text"].tolist())
        results += scored([c for c in chunks if c.source == source], index)
    threshold = passages.FUZZY_THRESHOLD
    marks = outcomes(chunks, results, threshold)
    inside = sum(c.inside for c in chunks)
    print(f"{len(chunks)} chunks ({inside} out-of-corpus chunks inside a knowledge-base document: ")
    print("  indistinguishable, left out); threshold", threshold, "\n")
    print("In-corpus chunks by source / form:")
    table(*_only(chunks, marks, "in-corpus"), key=lambda c: (c.source, c.form))
    print("\nIn-corpus chunks by source / length band (characters):")
    table(*_only(chunks, marks, "in-corpus"), key=lambda c: (c.source, band(c.length)))
    print("\nOut-of-corpus chunks (any match is wrong) by source / kind / form:")
    table(*_outside(chunks, marks), key=lambda c: (c.source, c.kind, c.form))
    sweep(chunks, results)
    print("\nShared in-corpus chunks mapped beside a second, unambiguous chunk of:")
    for label, rows in with_context(chunks, kbs, random.Random(SEED)).items():
        print(f"  {label:14s} n={len(rows):4d}  {shares(rows)}")
    timing()
    headline(chunks, marks)


def _only(chunks, marks, kind):
    pairs = [(c, m) for c, m in zip(chunks, marks, strict=True) if c.kind == kind]
    return [c for c, _ in pairs], [m for _, m in pairs]


def _outside(chunks, marks):
    pairs = [(c, m) for c, m in zip(chunks, marks, strict=True) if c.kind != "in-corpus"]
    return [c for c, _ in pairs], [m for _, m in pairs]


def sweep(chunks, results) -> None:
    print("\nThreshold sweep: in-corpus altered chunks (not exact) / out-of-corpus chunks")
    for t in THRESHOLDS:
        marks = outcomes(chunks, results, t)
        inn = [m for c, m in zip(chunks, marks, strict=True) if c.kind == "in-corpus"]
        alt = [
            m
            for c, m in zip(chunks, marks, strict=True)
            if c.kind == "in-corpus" and c.form != "exact"
        ]
        out = [
            m for c, m in zip(chunks, marks, strict=True) if c.kind != "in-corpus" and not c.inside
        ]
        print(
            f"  {t:3d}: in-corpus {shares(inn)} | altered {shares(alt)} | out-of-corpus "
            f"matched {100 * out.count('wrong') / len(out):5.1f} %"
        )


def timing() -> None:
    """CPU seconds of one `map_passages` call: 600 questions x 8 chunks (half of them edited)
    against a 3,000-item demo corpus."""
    rng = random.Random(SEED)
    corpus = generate_demo_corpus(3000, "zh", seed=SEED)
    texts = corpus["text"].tolist()
    lists = [
        [
            alter(cut(texts[rng.randrange(len(texts))], rng), ("exact", "edited")[k % 2], rng)
            for k in range(8)
        ]
        for _ in range(600)
    ]
    start = time.process_time()
    passages.map_passages(lists, corpus)
    seconds = time.process_time() - start
    print(f"\nmap_passages, 4,800 chunks against 3,000 documents: {seconds:.1f} s CPU")


def headline(chunks, marks) -> None:
    inn = [m for c, m in zip(chunks, marks, strict=True) if c.kind == "in-corpus"]
    own = [m for c, m in zip(chunks, marks, strict=True) if c.kind == "in-corpus" and not c.shared]
    out = [m for c, m in zip(chunks, marks, strict=True) if c.kind != "in-corpus" and not c.inside]
    print(f"\nIn-corpus chunks, all ({len(inn)}): {shares(inn)}")
    print(f"In-corpus chunks whose text is in one document only ({len(own)}): {shares(own)}")
    print(f"Out-of-corpus chunks matched to a document: {out.count('wrong')} of {len(out)}")
    print(f"passage_mapping_in_corpus_wrong: {inn.count('wrong') / len(inn):.4f}")
    print(f"passage_mapping_out_of_corpus_matched: {out.count('wrong') / len(out):.4f}")


if __name__ == "__main__":
    main()
