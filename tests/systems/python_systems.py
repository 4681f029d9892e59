"""Python systems for tests/systems/test_systems_python.py, written as a user would write theirs: a
small real RAG (bm25s over the run's knowledge base, an extractive answer: the sentence of the best
document sharing most characters with the question) in each shape the contract allows.

The knowledge base is the one the run builds: `build_corpus` of the params file named by
`CUBE_TEST_PARAMS`. Each call appends one line (`<function>\\t<question_id>`) to the file named by
`CUBE_TEST_CALLS`, so a test counts the calls made inside the notebook kernel of `cube run`.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from functools import lru_cache

from cube.systems import Question, SystemAnswer

PARAMS_ENV = "CUBE_TEST_PARAMS"
CALLS_ENV = "CUBE_TEST_CALLS"
_LOCK = threading.Lock()  # bm25s searches and the calls file, from the system's thread pool


def _count(function: str, question_id: str) -> None:
    path = os.environ.get(CALLS_ENV)
    if path:
        with _LOCK, open(path, "a", encoding="utf-8") as f:
            f.write(f"{function}\t{question_id}\n")


def _knowledge_base():
    return _knowledge_base_of(os.environ[PARAMS_ENV])


@lru_cache(maxsize=4)
def _knowledge_base_of(params_path: str):
    from cube.config.params import load_params
    from cube.kb.corpus import build_corpus
    from cube.systems.retrieval import BM25Index

    params = load_params(params_path)
    corpus = build_corpus(params)
    texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    return BM25Index.from_corpus(corpus, lang=params.lang), texts


def _best_sentence(question: str, documents: list[str]) -> str:
    """The sentence of the documents sharing most characters with the question (extractive)."""
    sentences = [s for d in documents for s in re.split(r"[\n。；]", d) if s.strip()]
    if not sentences:
        return "没有找到相关资料，无法回答。"
    asked = set(question)
    return max(sentences, key=lambda s: len(asked & set(s))).strip()


def _retrieve(question: Question) -> tuple[list[str], list[str]]:
    index, texts = _knowledge_base()
    with _LOCK:
        ids = index.search([question.text], question.top_n)[0]
    return ids, [texts[d] for d in ids]


def _rag(question: Question) -> dict:
    ids, docs = _retrieve(question)
    return {"answer": _best_sentence(question.text, docs), "retrieved_ids": ids}


def answer(question: Question) -> dict:
    """A sync system returning a dict of ids."""
    _count("answer", question.question_id)
    return _rag(question)


async def answer_async(question: Question) -> SystemAnswer:
    """An async system returning a `SystemAnswer` of passages (the retrieved texts)."""
    _count("answer_async", question.question_id)
    await asyncio.sleep(0.01)
    ids, docs = _retrieve(question)
    return SystemAnswer(answer=_best_sentence(question.text, docs), retrieved_passages=docs)


def _number(question: Question) -> int:
    return int(re.sub(r"\D", "", question.question_id) or 0)


def flaky(question: Question) -> dict | str:
    """Raises on every third question, answers in the wrong shape (a bare str) on the next one of
    three, answers properly otherwise."""
    _count("flaky", question.question_id)
    n = _number(question)
    if n % 3 == 0:
        raise ConnectionError(f"vector store unreachable for {question.question_id}")
    if n % 3 == 1:
        return "an answer without its retrieved documents"
    return _rag(question)


def bounds(question: Question, documents: list[str]) -> str:
    """The bound sets with the system's own (extractive) answering: no document, or the gold one."""
    _count("bounds", question.question_id)
    return _best_sentence(question.text, documents)
