"""How often `cube.systems.passages` maps a user's chunk to the wrong document, on known truth.

A system that returns chunk texts instead of doc ids has them mapped back to corpus documents
(`map_passages`). The chunks a user's system returns were cut from the USER's text of each
document: the user's field labels, field order, line breaks and punctuation, not the
workbench's rendering (`corpus.text`). Here such chunks are made from documents whose identity
is known, and mapped by main's matcher (ee9daca: the workbench's rendering, whitespace and
Markdown normalised, rapidfuzz at 95; loaded from git) and by the current one.

- Knowledge bases (as `cube` loads them, near-duplicate siblings present): the demo corpus in
  Chinese and English (`generate_demo_corpus(600, seed=11)`: families of one service in several
  regions); the example spreadsheet (`cube.kb.example`, `params/own_kb.yaml`'s mapping, 127
  guides); and `benchmarks/data/port_alder_guides.csv`, an English knowledge base written for
  this benchmark by another template (a fictional harbour city; its own columns: Service,
  Who can apply, What it costs, ...; four services in three districts each, 20 guides),
  loaded with a `corpus.columns` mapping.
- The user's text of a document: its field values (the corpus columns) under the USER's labels
  (port-alder and example: the user's own column names, i.e. the mapping's; demo: other words,
  `USER_LABELS`). A slice of it (random offset, log-uniform length 20-800 characters, at most
  the text) is one chunk, in six forms: `ours` (a slice of `corpus.text`, the workbench's own
  rendering, as before), `relabelled` (user labels, our field order), `reordered` (user labels,
  fields shuffled), `rewrapped` (reordered, lines joined or broken elsewhere, spaces doubled),
  `punctuated` (reordered, the colons, commas, semicolons, brackets and numbering changed) and
  `messy` (reordered, rewrapped, punctuated, about 1 % of the characters edited, the end cut
  with "...").
- Truth. A chunk is UNIQUE when no other document holds every piece of field value it carries
  (content form: letters and digits, `passages.normalise`), else SHARED (the text cannot tell
  the siblings apart: the right answer is "unmatched", or the tie rule's pick).
- Out-of-corpus chunks (truth: unmatched), relabelled and messy: `held-out`, cut from a sixth
  of the documents removed from the knowledge base (their siblings stay), and `foreign`, from
  another source of the same language (demo-zh <-> example, port-alder <- demo-en). One whose
  pieces are all held by a knowledge-base document is indistinguishable and left out.
- Each chunk is mapped ALONE (its own question, the worst case for ties); a last table maps
  shared chunks beside a second chunk (the whole user text) of their own document or of a
  sibling (the tie rule's help and harm).

Printed: per source, form and truth (unique / shared), the right / wrong / unmatched shares
before and after; out-of-corpus chunks matched (wrong); a sweep of `MIN_EVIDENCE`, `MARGIN`
and `RATIO`;
the tie rule's table; the time of a paper-scale mapping (600 questions x 8 chunks against
3,000 documents) before and after; last, as `name: value`, the share of unique in-corpus
chunks mapped right by the current matcher.

    .venv/bin/python benchmarks/passage_mapping.py     (a few minutes)
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cube.config.schema import CORPUS_FIELDS  # noqa: E402
from cube.kb.corpus import load_corpus_file  # noqa: E402
from cube.kb.demo import generate_demo_corpus  # noqa: E402
from cube.kb.example import write_example_kb  # noqa: E402
from cube.systems import passages  # noqa: E402
from cube.systems.passages import PassageIndex, normalise  # noqa: E402

SEED = 11
N_DEMO = 600
SLICES = 250  # in-corpus slices per source (each in every form)
OUTSIDE = 150  # out-of-corpus slices per (source, kind)
HELD_OUT_SHARE = 1 / 6
MAIN = "ee9daca"  # main's commit before this matcher
FORMS = ("ours", "relabelled", "reordered", "rewrapped", "punctuated", "messy")
FIELDS = (*CORPUS_FIELDS[:3], "variant", *CORPUS_FIELDS[3:], "parent_region")
PORT_ALDER = ROOT / "benchmarks" / "data" / "port_alder_guides.csv"
PORT_ALDER_COLUMNS = {
    "doc_id": "Ref",
    "item_name": "Service",
    "region": "District",
    "handling_agency": "Office",
    "requirements": "Who can apply",
    "fee_standard": "What it costs",
    "committed_time_limit": "How long it takes",
    "processing_location": "Where to go",
    "processing_time": "Opening hours",
    "procedure": "Steps",
    "application_materials": "Bring with you",
}
# A user's own words for the demo's fields (the demo's own labels are the workbench's).
USER_LABELS = {
    "zh": dict(
        zip(
            FIELDS,
            "所属地区 网址 服务名称 类别 办理单位 科室 联系方式 申请条件 依据 法定期限 承诺期限 "
            "对象 类型 网上办理 工作时间 地点 费用 步骤 所需材料 上级".split(),
            strict=True,
        )
    ),
    "en": dict(
        zip(
            FIELDS,
            [
                "Area",
                "Web page",
                "Service",
                "Case",
                "Office",
                "Section",
                "Contact",
                "Who qualifies",
                "Law",
                "Legal deadline",
                "Promised deadline",
                "For",
                "Kind",
                "Online",
                "Opening hours",
                "Where",
                "Cost",
                "How to apply",
                "Documents",
                "Parent area",
            ],
            strict=True,
        )
    ),
}
_HAN = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会"


@dataclass
class Chunk:
    source: str
    kind: str  # in-corpus, held-out, foreign
    form: str
    text: str
    length: int  # characters of the slice before it was altered
    truth: str  # the source doc_id ("" out of the corpus)
    shared: bool = False  # in-corpus: another document holds every value piece
    inside: bool = False  # out of the corpus, yet a knowledge-base document holds it
    values: list[str] = field(default_factory=list)  # the value pieces, content form


# --------------------------------------------------------------------------- knowledge bases
def example_corpus() -> tuple[pd.DataFrame, dict[str, str]]:
    spec = yaml.safe_load((ROOT / "params" / "own_kb.yaml").read_text(encoding="utf-8"))["corpus"]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_example_kb(Path(tmp) / "guides.csv")
        kb = load_corpus_file(
            path, columns=spec["columns"], group_by=spec["group_by"], extra_columns="render"
        )
    return kb, {f: str(c) for f, c in spec["columns"].items()}


def port_alder() -> tuple[pd.DataFrame, dict[str, str]]:
    return load_corpus_file(PORT_ALDER, columns=PORT_ALDER_COLUMNS, lang="en"), PORT_ALDER_COLUMNS


def split(corpus: pd.DataFrame, rng: random.Random) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The knowledge base and the held-out documents (a random sixth, siblings kept)."""
    out = set(rng.sample(range(len(corpus)), max(2, round(len(corpus) * HELD_OUT_SHARE))))
    keep = [i for i in range(len(corpus)) if i not in out]
    return corpus.iloc[keep].reset_index(drop=True), corpus.iloc[sorted(out)]


# --------------------------------------------------------------------------- the user's text
def user_text(row: pd.Series, labels: dict[str, str], colon: str, order: list[str]):
    """The user's text of a document and the (start, end) spans of its values in it."""
    parts, spans, at = [], [], 0
    for f in order:
        value = str(row.get(f, "") or "").strip()
        if not value or f not in labels:
            continue
        head = f"{labels[f]}{colon}" + ("\n" if "\n" in value else "")
        parts.append(head + value)
        spans.append((at + len(head), at + len(head) + len(value)))
        at += len(head) + len(value) + 1
    return "\n".join(parts), spans


def cut_span(length: int, rng: random.Random) -> tuple[int, int]:
    n = min(length, round(math.exp(rng.uniform(math.log(20), math.log(800)))))
    start = rng.randrange(0, length - n + 1)
    return start, start + n


def rewrap(text: str, rng: random.Random) -> str:
    text = re.sub(r"\s*\n\s*", lambda _: rng.choice([" ", "  ", "\n", ""]), text)
    return re.sub(" ", lambda _: "\n" if rng.random() < 0.05 else " ", text)


_PUNCT = {
    "：": " — ",
    ":": " -",
    "，": ", ",
    "。": ". ",
    "；": "; ",
    ";": ",",
    ",": " ,",
    "、": "/",
}


def punctuate(text: str) -> str:
    text = re.sub(r"^(\d+)[.)、]\s*", r"(\1) ", text, flags=re.M)
    text = re.sub(r"[（(]([^()（）\n]*)[)）]", r"[\1]", text)
    return re.sub("|".join(map(re.escape, _PUNCT)), lambda m: _PUNCT[m.group(0)], text)


def edit(text: str, rng: random.Random) -> str:
    chars = list(text)
    alphabet = _HAN if re.search(r"[\u4e00-\u9fff]", text) else "abcdefghijklmnopqrstuvwxyz"
    for i in rng.sample(range(len(chars)), max(1, round(len(chars) * 0.01))):
        chars[i] = rng.choice(alphabet)
    return "".join(chars)


class Source:
    """One knowledge base with the user's labels, and chunks of its documents in every form."""

    def __init__(self, name: str, corpus: pd.DataFrame, labels: dict[str, str], lang: str):
        self.name, self.labels, self.lang = name, labels, lang
        self.colon = "：" if lang == "zh" else ": "
        self.corpus = corpus

    def chunks(self, docs: pd.DataFrame, n: int, kind: str, forms, rng) -> list[Chunk]:
        out = []
        for _ in range(n):
            row = docs.iloc[rng.randrange(len(docs))]
            present = [f for f in FIELDS if f in self.labels]
            shuffled = rng.sample(present, len(present))
            texts = {
                "ours": (str(row["text"]), None),
                "relabelled": user_text(row, self.labels, self.colon, present),
                "reordered": user_text(row, self.labels, self.colon, shuffled),
            }
            span = {k: cut_span(len(t), rng) for k, (t, _) in texts.items()}
            for form in forms:
                base = (
                    "ours"
                    if form == "ours"
                    else "relabelled"
                    if form == "relabelled"
                    else "reordered"
                )
                text, spans = texts[base]
                s, e = span[base]
                piece = text[s:e]
                altered = self.alter(piece, form, rng)
                values = (
                    [text[max(a, s) : min(b, e)] for a, b in spans if max(a, s) < min(b, e)]
                    if spans
                    else [piece]
                )
                truth = str(row["doc_id"]) if kind == "in-corpus" else ""
                c = Chunk(self.name, kind, form, altered, e - s, truth)
                c.values = [v for v in (normalise(v) for v in values) if v]
                out.append(c)
        return out

    @staticmethod
    def alter(piece: str, form: str, rng: random.Random) -> str:
        if form in ("rewrapped", "messy"):
            piece = rewrap(piece, rng)
        if form in ("punctuated", "messy"):
            piece = punctuate(piece)
        if form == "messy":
            piece = edit(piece, rng)
            piece = piece[: max(1, len(piece) - rng.randint(1, 6))] + "..."
        return piece


def mark(chunks: list[Chunk], kb: pd.DataFrame) -> None:
    """Which in-corpus chunks are shared (another document holds every value piece) and which
    out-of-corpus chunks a knowledge-base document holds anyway."""
    index = PassageIndex(kb["doc_id"].tolist(), kb["text"].tolist())
    for c in chunks:
        holders = [
            index.doc_ids[i]
            for i in range(len(index.doc_ids))
            if c.values and all(index.holds(i, v) for v in c.values)
        ]
        c.shared = c.kind == "in-corpus" and any(h != c.truth for h in holders)
        c.inside = c.kind != "in-corpus" and bool(holders)


# --------------------------------------------------------------------------- matchers
def main_matcher() -> ModuleType | None:
    """main's `cube.systems.passages` (before this matcher), from git; None without git."""
    try:
        code = subprocess.run(
            ["git", "show", f"{MAIN}:cube/systems/passages.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader("passages_main", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(code, "passages_main.py", "exec"), module.__dict__)  # noqa: S102 - our own code
    return module


def mapped(matcher: ModuleType, kb: pd.DataFrame, chunks: list[Chunk]) -> list[str]:
    """Each chunk mapped alone: right, wrong or unmatched."""
    index = matcher.PassageIndex(kb["doc_id"].tolist(), kb["text"].tolist())
    out = []
    for c in chunks:
        doc = index.resolve([c.text])[0]
        got = None if doc is None else index.doc_ids[doc]
        out.append("unmatched" if got is None else "right" if got == c.truth else "wrong")
    return out


def shares(rows: list[str]) -> str:
    n, total = Counter(rows), len(rows) or 1
    return " ".join(f"{k[:5]} {100 * n[k] / total:5.1f}" for k in ("right", "wrong", "unmatched"))


# --------------------------------------------------------------------------- main
def build() -> tuple[list[Chunk], dict[str, pd.DataFrame]]:
    rng = random.Random(SEED)
    example, example_cols = example_corpus()
    alder, alder_cols = port_alder()
    sources = {
        "demo-zh": Source(
            "demo-zh", generate_demo_corpus(N_DEMO, "zh", seed=SEED), USER_LABELS["zh"], "zh"
        ),
        "demo-en": Source(
            "demo-en", generate_demo_corpus(N_DEMO, "en", seed=SEED), USER_LABELS["en"], "en"
        ),
        "example": Source("example", example, example_cols, "zh"),
        "port-alder": Source("port-alder", alder, alder_cols, "en"),
    }
    foreign_of = {"demo-zh": "example", "example": "demo-zh", "port-alder": "demo-en"}
    chunks, kbs = [], {}
    for name, src in sources.items():
        kb, held = split(src.corpus, rng)
        kbs[name] = kb
        part = src.chunks(kb, SLICES, "in-corpus", FORMS, rng)
        part += src.chunks(held, OUTSIDE, "held-out", ("relabelled", "messy"), rng)
        if name in foreign_of:
            other = sources[foreign_of[name]]
            foreign = other.chunks(other.corpus, OUTSIDE, "foreign", ("relabelled", "messy"), rng)
            for c in foreign:
                c.source = name
            part += foreign
        mark(part, kb)
        chunks += part
    return chunks, kbs


def report(chunks, kbs, matchers) -> dict[str, list[str]]:
    marks: dict[str, list[str]] = {}
    for label, m in matchers.items():
        marks[label] = []
        for source, kb in kbs.items():
            marks[label] += mapped(m, kb, [c for c in chunks if c.source == source])
    order = [c for s in kbs for c in chunks if c.source == s]
    chunks[:] = order
    print("In-corpus chunks by source / form / truth: " + " | ".join(matchers))
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(chunks):
        if c.kind == "in-corpus":
            groups.setdefault((c.source, c.form, "shared" if c.shared else "unique"), []).append(i)
            groups.setdefault((c.source, "ALL", "shared" if c.shared else "unique"), []).append(i)
    for key in sorted(groups):
        idx = groups[key]
        cells = " | ".join(shares([marks[m][i] for i in idx]) for m in matchers)
        print(f"  {' / '.join(key):34s} n={len(idx):4d}  {cells}")
    print("\nOut-of-corpus chunks (any match is wrong) by source / kind / form:")
    out: dict[tuple, list[int]] = {}
    for i, c in enumerate(chunks):
        if c.kind != "in-corpus" and not c.inside:
            out.setdefault((c.source, c.kind, c.form), []).append(i)
    for key in sorted(out):
        cells = " | ".join(shares([marks[m][i] for i in out[key]]) for m in matchers)
        print(f"  {' / '.join(key):34s} n={len(out[key]):4d}  {cells}")
    inside = sum(c.inside for c in chunks)
    print(f"  ({inside} out-of-corpus chunks held by a knowledge-base document: left out)")
    return marks


def truths(chunks, marks) -> tuple[list[str], list[str], list[str]]:
    """The outcomes of unique and shared in-corpus chunks and of distinguishable outside ones."""
    pairs = list(zip(chunks, marks, strict=True))
    return (
        [m for c, m in pairs if c.kind == "in-corpus" and not c.shared],
        [m for c, m in pairs if c.kind == "in-corpus" and c.shared],
        [m for c, m in pairs if c.kind != "in-corpus" and not c.inside],
    )


def pct(rows: list[str], what: str) -> float:
    return 100 * rows.count(what) / (len(rows) or 1)


def sweep(chunks, kbs) -> None:
    print("\nSweep (current matcher): unique right/wrong, shared wrong, out-of-corpus matched")
    keep = (passages.MIN_EVIDENCE, passages.MARGIN, passages.RATIO)
    for evidence, margin, ratio in itertools.product((0.3, 0.5, 0.6), (2, 3), (2.0, 3.0)):
        passages.MIN_EVIDENCE, passages.MARGIN, passages.RATIO = evidence, margin, ratio
        marks = [
            m
            for s, kb in kbs.items()
            for m in mapped(passages, kb, [c for c in chunks if c.source == s])
        ]
        uniq, shar, outs = truths(chunks, marks)
        print(
            f"  MIN_EVIDENCE {evidence:.1f} MARGIN {margin} RATIO {ratio:.0f}: unique right "
            f"{pct(uniq, 'right'):5.1f} wrong {pct(uniq, 'wrong'):4.1f} | shared wrong "
            f"{pct(shar, 'wrong'):4.1f} | out-of-corpus matched {pct(outs, 'wrong'):4.1f}"
        )
    passages.MIN_EVIDENCE, passages.MARGIN, passages.RATIO = keep


def with_context(chunks, kbs, rng) -> None:
    """Shared in-corpus chunks at rank 1 of a question whose rank 2 is a whole user text of their
    own document or of a sibling (`PassageIndex.resolve`, as `map_passages` does)."""
    print("\nShared chunks beside a second chunk (current matcher) of:")
    rows: dict[str, list[str]] = {"own document": [], "a sibling": []}
    for source, kb in kbs.items():
        index = PassageIndex(kb["doc_id"].tolist(), kb["text"].tolist())
        for c in (c for c in chunks if c.source == source and c.kind == "in-corpus" and c.shared):
            row = kb[kb["doc_id"] == c.truth].iloc[0]
            fam = kb[(kb["family_id"] == row["family_id"]) & (kb["doc_id"] != c.truth)]
            anchors = [("own document", row)]
            if row["family_id"] != "" and not fam.empty:
                anchors.append(("a sibling", fam.iloc[rng.randrange(len(fam))]))
            for label, anchor in anchors:
                got = index.resolve([c.text, str(anchor["text"])])[0]
                doc = None if got is None else index.doc_ids[got]
                rows[label].append(
                    "unmatched" if doc is None else "right" if doc == c.truth else "wrong"
                )
    for label, marks in rows.items():
        print(f"  {label:14s} n={len(marks):4d}  {shares(marks)}")


def timing(matchers) -> None:
    """CPU seconds of one `map_passages` call: 600 questions x 8 chunks (half our rendering,
    half the user's, messy) against a 3,000-item demo corpus."""
    rng = random.Random(SEED)
    corpus = generate_demo_corpus(3000, "zh", seed=SEED)
    src = Source("t", corpus, USER_LABELS["zh"], "zh")
    lists = [
        [c.text for c in src.chunks(corpus, 4, "in-corpus", ("ours", "messy"), rng)]
        for _ in range(600)
    ]
    for label, m in matchers.items():
        start = time.process_time()
        m.map_passages(lists, corpus)
        print(
            f"map_passages ({label}), 4,800 chunks against 3,000 documents: "
            f"{time.process_time() - start:.1f} s CPU"
        )


def main() -> None:
    chunks, kbs = build()
    matchers = {"after": passages}
    before = main_matcher()
    if before is not None:
        matchers = {"before": before, "after": passages}
    marks = report(chunks, kbs, matchers)
    sweep(chunks, kbs)
    with_context(chunks, kbs, random.Random(SEED))
    print()
    timing(matchers)
    for label in matchers:
        uniq, shar, outs = truths(chunks, marks[label])
        print(f"\n{label}: unique in-corpus chunks ({len(uniq)}): {shares(uniq)}")
        print(f"{label}: shared in-corpus chunks ({len(shar)}): {shares(shar)}")
        print(f"{label}: out-of-corpus chunks ({len(outs)}): matched {pct(outs, 'wrong'):.1f} %")
    uniq, shar, outs = truths(chunks, marks["after"])
    print(f"\npassage_mapping_wrong_unique: {uniq.count('wrong') / len(uniq):.4f}")
    print(f"passage_mapping_wrong_shared: {shar.count('wrong') / len(shar):.4f}")
    print(f"passage_mapping_out_of_corpus_matched: {outs.count('wrong') / len(outs):.4f}")
    print(f"passage_mapping_right_unique: {uniq.count('right') / len(uniq):.4f}")


if __name__ == "__main__":
    main()
