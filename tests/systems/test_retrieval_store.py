"""The store of segmentations between the plan and stage 02 (`cube.systems.retrieval_store`):
an entry is read only for exactly the texts, language and code it was made from; anything else is
recomputed, and retrieval with the store gives what it gives without."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cube.systems import retrieval, retrieval_store
from cube.systems.retrieval import BM25Index, tokenize
from cube.systems.retrieval_store import cached_tokens, stored_in

DOCS = [
    "居民身份证申领\n办理地点：户籍所在地派出所\n所需材料：户口簿、近期照片",
    "机动车驾驶证换证\n办理地点：车管所\n所需材料：身份证、体检证明",
    "营业执照办理\n办理地点：市场监督管理局\n所需材料：公司章程、股东身份证明",
    "护照申请\n办理地点：出入境管理处\n所需材料：身份证、照片",
]
QUESTIONS = ["身份证在哪里办理？", "驾驶证换证需要什么材料", "营业执照去哪个部门办"]


def _counting(calls: list[int]):
    def compute(texts):
        calls.append(len(texts))
        return retrieval._zh_tokens(texts)

    return compute


def test_entry_is_written_then_read_without_segmenting(tmp_path: Path) -> None:
    calls: list[int] = []
    with stored_in(tmp_path):
        first = cached_tokens(DOCS, "zh", _counting(calls))
        again = cached_tokens(DOCS, "zh", _counting(calls))
    assert calls == [len(DOCS)]  # the second read the entry
    assert again == first == retrieval._zh_tokens(DOCS)
    assert len(list(tmp_path.glob("tokens-*.npz"))) == 1


@pytest.mark.parametrize(
    "changed",
    [
        DOCS[:-1] + [DOCS[-1] + "\n办理时限：5个工作日"],  # one text changed
        DOCS[:-1],  # one text fewer
        list(reversed(DOCS)),  # the same texts in another order
    ],
)
def test_changed_texts_are_recomputed(tmp_path: Path, changed: list[str]) -> None:
    calls: list[int] = []
    with stored_in(tmp_path):
        cached_tokens(DOCS, "zh", _counting(calls))
        out = cached_tokens(changed, "zh", _counting(calls))
    assert calls == [len(DOCS), len(changed)]
    assert out == retrieval._zh_tokens(changed)


def test_language_and_code_are_in_the_key() -> None:
    assert retrieval_store.fingerprint(DOCS, "zh") != retrieval_store.fingerprint(DOCS, "en")
    assert retrieval_store.fingerprint(DOCS, "zh") == retrieval_store.fingerprint(list(DOCS), "zh")


def test_foreign_or_broken_entry_is_never_read(tmp_path: Path) -> None:
    key = retrieval_store.fingerprint(DOCS, "zh")
    path = tmp_path / f"tokens-{key[:32]}.npz"
    # an entry under this name holding another key's tokens (a collision, a copied folder)
    np.savez(
        path,
        key=np.array("0" * 64),
        vocab=np.array(["假"]),
        ids=np.zeros(len(DOCS), dtype=np.int32),
        offsets=np.arange(len(DOCS) + 1),
    )
    calls: list[int] = []
    with stored_in(tmp_path):
        assert cached_tokens(DOCS, "zh", _counting(calls)) == retrieval._zh_tokens(DOCS)
    assert calls == [len(DOCS)]
    path.write_bytes(b"not an npz")  # a truncated or damaged file
    calls.clear()
    with stored_in(tmp_path):
        assert cached_tokens(DOCS, "zh", _counting(calls)) == retrieval._zh_tokens(DOCS)
    assert calls == [len(DOCS)]


def test_off_unless_a_folder_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    tokenize(DOCS, "zh")
    assert not list(tmp_path.rglob("*.npz"))


@pytest.mark.parametrize("top_n", [1, 2, 4])
def test_search_with_the_store_equals_search_without(tmp_path: Path, top_n: int) -> None:
    def search(questions: list[str]) -> list[list[str]]:
        retrieval._built_index.cache_clear()  # another process: the index is built again
        index = BM25Index(["a", "b", "c", "d"], DOCS, lang="zh")
        return index.search(questions, top_n)

    plain = search(QUESTIONS)
    with stored_in(tmp_path):
        written = search(QUESTIONS)  # the plan: computed and stored
        read = search(QUESTIONS)  # stage 02: read back
        other = search(QUESTIONS[:1] + ["护照怎么申请"])  # a changed question: recomputed
    assert written == read == plain
    assert other == search(QUESTIONS[:1] + ["护照怎么申请"])
    assert other[1][:1] == ["d"]


def test_top_n_and_scoring_settings_are_in_the_results_key(tmp_path: Path) -> None:
    def search(top_n: int, k1: float = 1.5) -> list[list[str]]:
        retrieval._built_index.cache_clear()
        return BM25Index(["a", "b", "c", "d"], DOCS, lang="zh", k1=k1).search(QUESTIONS, top_n)

    plain = {(n, k1): search(n, k1) for n in (1, 3) for k1 in (1.5, 0.1)}
    with stored_in(tmp_path):
        for _ in range(2):  # written, then read
            for (n, k1), expected in plain.items():
                assert search(n, k1) == expected
    assert len(list(tmp_path.glob("results-*.npz"))) == len(plain)
    assert [len(r) for r in plain[(1, 1.5)]] != [len(r) for r in plain[(3, 1.5)]]
