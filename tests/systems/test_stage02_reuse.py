"""What stage 02 no longer recomputes (issue 31, paper scale): an offline answerer's prompt, a
retrieved guide's fields, a second BM25 index over the same knowledge base. Each shortcut gives
what the full computation gives."""

from __future__ import annotations

import pandas as pd

from cube.kb.document import parse_document as corpus_parse
from cube.systems import extractive
from cube.systems.builtin import answer_request
from cube.systems.retrieval import BM25Index

GUIDE = "事项名称：护照签发\n办理时限：10个工作日\n收费标准：不收费\n申请材料：\n1. 身份证\n2. 照片"


def test_an_offline_answerers_request_is_the_llm_request_without_its_prompt():
    llm = answer_request("护照怎么办？", [GUIDE, "事项名称：其他"], "zh")
    offline = answer_request("护照怎么办？", [GUIDE, "事项名称：其他"], "zh", offline=True)
    assert offline.messages == () and len(llm.messages) == 2
    assert offline.context == llm.context
    assert offline.template_version == llm.template_version
    assert (offline.sample, offline.schema) == (llm.sample, llm.schema)


def test_a_guide_is_parsed_once_read_only_and_as_the_corpus_parser_reads_it():
    extractive.parse_document.cache_clear()
    first = extractive.parse_document(GUIDE)
    assert dict(first) == corpus_parse(GUIDE, strict=False)
    assert extractive.parse_document(GUIDE) is first
    assert extractive.parse_document.cache_info().hits == 1
    try:
        first["item_name"] = "x"  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("the shared parse must be read-only")


def _corpus(texts: list[str], region: str = "r") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "doc_id": [f"D{i}" for i in range(len(texts))],
            "text": texts,
            "region": region,
        }
    )


def test_the_same_knowledge_base_is_indexed_once_and_searches_the_same():
    texts = [
        GUIDE,
        "事项名称：驾驶证换领\n办理时限：5个工作日",
        "事项名称：出生登记\n收费标准：免费",
    ]
    a = BM25Index.from_corpus(_corpus(texts), lang="zh")
    other_rows = _corpus(texts, region="s")
    b = BM25Index.from_corpus(other_rows, lang="zh")
    assert b._bm25 is a._bm25  # built once
    assert b.rows is not a.rows and b.rows["region"].eq("s").all()  # each keeps its own rows
    queries = ["护照签发要多久", "驾驶证换领", "出生登记收费吗"]
    fresh = BM25Index([f"D{i}" for i in range(3)], texts, lang="zh")
    assert b.search(queries, 2) == a.search(queries, 2) == fresh.search(queries, 2)
    changed = BM25Index.from_corpus(_corpus([*texts[:2], "事项名称：结婚登记"]), lang="zh")
    assert changed._bm25 is not a._bm25  # other texts: another index
    assert BM25Index.from_corpus(_corpus(texts), lang="zh", k1=1.2)._bm25 is not a._bm25
