"""Throughput of the offline `rubric` judge on ~1,000-character Chinese documents.

One judgment = scoring one (answer, dimension) pair. The workload is a judge's real one:
for every document, three answers (zero: the extractive answerer without documents; rag: with
the gold document's near-duplicate sibling or a neighbour ranked first; full: with the gold
document) x the four paper dimensions, sent through `Model.complete` as the pipeline does.
Documents are synthetic demo guides (cube.kb.demo) whose application-material lists are
extended with their neighbours' materials to reach ~1,000 characters.

Two figures per preset, on one core (this process):
- cold: all tokenisation and analysis caches cleared first; every text is new to the process,
  and each document is segmented once and then reused by its 12 judgments, as in a fresh run;
- warm: the same requests again, every analysis already cached (a re-run in one process).
jieba's one-off dictionary load is excluded from both and printed separately.

The headline (last line) is the cold figure of the strict preset: the conservative one.
Usage: .venv/bin/python benchmarks/rubric_throughput.py [--docs 300]
"""

from __future__ import annotations

import argparse
import gc
import re
import time

import jieba

from cube.config.model_spec import ModelSpec
from cube.judges import rubric
from cube.kb.demo import generate_demo_corpus
from cube.llm import Request, make_model
from cube.systems.extractive import extractive_answer

DIMS = ("relevance", "specificity", "completeness", "quality")
ASKS = (
    "需要准备哪些申请材料？",
    "收费吗？收费标准是什么？",
    "多久能办完？",
    "在哪里办理？",
    "办理流程是怎样的？",
)


def documents(n: int) -> tuple[list[str], list[str], list[str]]:
    """n documents of ~1,000 characters, their item names, and each one's 'rag' document."""
    corpus = generate_demo_corpus(n, "zh", family_share=0.33, seed=0)
    texts, names = corpus["text"].tolist(), corpus["item_name"].tolist()
    materials = [re.findall(r"(?m)^\d+\. (.+)$", t.split("申请材料：", 1)[-1]) for t in texts]
    long_texts = []
    for i, t in enumerate(texts):
        k, extra = len(re.findall(r"(?m)^\d+\. ", t.split("申请材料：", 1)[-1])), []
        j = i + 1
        while len(t) + sum(len(e) for e in extra) < 1000:
            for m in materials[j % n]:
                k += 1
                extra.append(f"\n{k}. {m}")
            j += 1
        long_texts.append(t + "".join(extra))
    fam = corpus["family_id"].tolist()
    rag = [
        long_texts[i - 1]
        if fam[i] and i > 0 and fam[i - 1] == fam[i]
        else long_texts[(i + 7) % n]
        if i % 5 == 0
        else long_texts[i]
        for i in range(n)
    ]
    return long_texts, names, rag


def requests(n: int) -> list[Request]:
    docs, names, rag = documents(n)
    out = []
    for i, (doc, name) in enumerate(zip(docs, names, strict=True)):
        q = name + ASKS[i % len(ASKS)]
        for retrieved in ([], [rag[i]], [doc]):
            answer = extractive_answer(q, retrieved, "zh")[0]
            for d in DIMS:
                ctx = {
                    "question": q,
                    "document": doc,
                    "answer": answer,
                    "item_name": name,
                    "lang": "zh",
                    "dimension": d,
                }
                out.append(Request(messages=(), context=ctx))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=300)
    args = ap.parse_args()
    t0 = time.perf_counter()
    jieba.initialize()
    print(f"jieba dictionary load (one-off, excluded): {time.perf_counter() - t0:.2f} s")
    reqs = requests(args.docs)
    doc_len = sum(len(r.context["document"]) for r in reqs[::12]) / (len(reqs) / 12)
    ans_len = sum(len(r.context["answer"]) for r in reqs[::4]) / (len(reqs) / 4)
    print(
        f"documents: {args.docs} (mean {doc_len:.0f} chars), "
        f"answers: {len(reqs) // 4} (mean {ans_len:.0f} chars), "
        f"judgments per pass: {len(reqs)}"
    )
    headline = 0.0
    for preset in ("lenient", "strict"):
        model = make_model(ModelSpec(provider="offline", model=f"rubric-{preset}"))
        rubric.clear_caches()
        gc.collect()  # a collection left over from setup would land in the timed pass
        t = time.perf_counter()
        cold = model.complete(reqs, role="judging", progress=False)
        cold_rate = len(reqs) / (time.perf_counter() - t)
        gc.collect()
        t = time.perf_counter()
        warm = model.complete(reqs, role="judging", progress=False)
        warm_rate = len(reqs) / (time.perf_counter() - t)
        assert all(r.ok for r in cold) and [r.text for r in cold] == [r.text for r in warm]
        print(
            f"{preset}: cold caches {cold_rate:,.0f} judgments/s, "
            f"warm caches {warm_rate:,.0f} judgments/s"
        )
        headline = cold_rate
    print(f"rubric_judgments_per_s: {headline:.0f}")


if __name__ == "__main__":
    main()
