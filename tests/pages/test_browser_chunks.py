"""The judgment browser built chunk by chunk (issue 41 item 4) holds what the whole-table build
holds: the same meta, documents, records in the same order and judgments in the same order."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pandas as pd
import pytest

from cube.config.runpaths import RunPaths
from cube.pages.browser import write_browser
from cube.pages.browser_records import build_records, record_chunks
from tests.factories import make_tables


def _tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Two systems' answers and scores, the scores shuffled (a record's judgments are not
    contiguous), one failed judgment, score rows of a question no answer has, and a record with
    no score row at all."""
    a1, s1 = make_tables(23, judges=("judge-b", "judge-a"), seed=3, system="sys-1")
    a2, s2 = make_tables(23, seed=4, system="sys-0")
    answers = pd.concat([a1, a2], ignore_index=True)
    answers = answers.assign(retrieved_doc_ids=answers["retrieved_doc_ids"].map(list))
    scores = pd.concat([s1, s2], ignore_index=True)
    scores = scores.assign(raw=scores["score"].map(lambda v: f"评分：{v:g}"), error="")
    scores.loc[scores.index[5], ["score", "error"]] = [np.nan, "call failed: HTTP 500"]
    stray = scores.iloc[:4].assign(question_id="q999")  # no answer: no record shows them
    scores = pd.concat([scores, stray], ignore_index=True)
    scores = scores[~((scores["question_id"] == "q007") & (scores["system"] == "sys-0"))]
    scores = scores.sample(frac=1, random_state=1).reset_index(drop=True)
    qids = answers["question_id"].unique()
    questions = pd.DataFrame(
        {"question_id": qids, "question": [f"问题 {q}" for q in qids], "style": "named"}
    ).assign(doc_id=[f"gold-{q}" for q in qids])
    corpus = pd.DataFrame(
        {"doc_id": questions["doc_id"], "item_name": "事项", "text": "正文", "department": "民政"}
    )
    return answers, scores, questions, corpus


@pytest.mark.parametrize("size", [1, 7, 100])
def test_chunks_hold_the_whole_builds_records(size):
    answers, scores, questions, corpus = _tables()
    changes = {("q002", "sys-1"): [["vs a", "regression", -1.5, "lost"]]}
    flagged = {("q004", "sys-0"): [["rag", "instruction", "score 10"]]}
    whole = build_records(answers, scores, questions, corpus, changes, flagged)
    meta, chunks, docs = record_chunks(
        answers, scores, questions, corpus, changes, flagged, size=size
    )
    got = [copy.deepcopy(part) for part in chunks]
    assert all(len(p) == size for p in got[:-1]) and 0 < len(got[-1]) <= size
    records = [r for part in got for r in part]
    assert (meta, records, docs) == whole
    assert json.dumps(records) == json.dumps(whole[1])  # the keys' order too (the files' bytes)
    assert sum(len(r["j"]) for r in records) == len(scores) - 4  # the stray rows are shown nowhere
    assert next(r for r in records if r["q"] == "q007" and r["s"] == 1)["j"] == []


def test_a_judgment_of_an_unknown_set_or_a_missing_value_is_shown_as_the_whole_build_shows_it():
    # the chunks look each row's set, judge and dimension up once for the table (as text): a set
    # outside SETS is -1, a missing score None, as in the whole build
    answers, scores, questions, corpus = _tables()
    scores = scores.astype({"set": object})
    scores.loc[scores.index[2], "set"] = "other"
    scores.loc[scores.index[3], "set"] = None
    scores.loc[scores.index[4], "score"] = np.nan
    whole = build_records(answers, scores, questions, corpus)
    meta, chunks, docs = record_chunks(answers, scores, questions, corpus, size=5)
    records = [r for part in chunks for r in copy.deepcopy(part)]
    assert json.dumps([meta, records, docs]) == json.dumps(list(whole))
    assert any(j[0] == -1 for r in records for j in r["j"])


def test_the_written_files_hold_the_whole_builds_records(tmp_path):
    answers, scores, questions, corpus = _tables()
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    answers.to_parquet(paths.data_file("answers"))
    scores.to_parquet(paths.data_file("scores"))
    questions.to_parquet(paths.data_file("questions"))
    corpus.to_parquet(paths.data_file("corpus"))
    write_browser(paths)
    folder = paths.report / "judgments"
    meta = json.loads(re.sub(r"^CUBE_INDEX\((.*)\);\n$", r"\1", (folder / "index.js").read_text()))
    rows = []
    for name in meta.pop("chunks"):
        text = (folder / name).read_text(encoding="utf-8")
        rows += json.loads(re.sub(r"^CUBE_CHUNK\(\d+,(.*)\);\n$", r"\1", text, flags=re.S))["rows"]
    whole_meta, whole_records, _ = build_records(answers, scores, questions, corpus)
    assert meta == whole_meta and rows == json.loads(json.dumps(whole_records))


def test_no_answers_write_one_empty_chunk(tmp_path):
    answers, scores, _, _ = _tables()
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    answers.iloc[:0].to_parquet(paths.data_file("answers"))
    scores.iloc[:0].to_parquet(paths.data_file("scores"))
    write_browser(paths)
    text = (paths.report / "judgments" / "chunk-0000.js").read_text(encoding="utf-8")
    assert text == 'CUBE_CHUNK(0,{"rows":[],"docs":{}});\n'
    assert not (paths.report / "judgments" / "chunk-0001.js").exists()


def test_a_chunks_documents_are_written_in_id_order():
    # the same records give the same data file in every process (a set's order follows the
    # process's string hashing)
    from cube.pages.browser import _chunk_docs

    part = [{"d": "D9", "r": ["D3", "D7"]}, {"d": "D1", "r": ["D9", "D5"]}]
    docs = {d: [f"name {d}", f"text {d}"] for d in ("D1", "D3", "D5", "D7", "D9")}
    out = _chunk_docs(part, docs)
    assert list(out) == ["D1", "D3", "D5", "D7", "D9"]
    assert out["D9"] == ["name D9", "text D9"] and out["D3"] == ["name D3", ""]
