"""The near-duplicate confusion rate (`cube.diagnose.near_duplicates`)."""

from __future__ import annotations

import math

import pandas as pd

from cube.diagnose.near_duplicates import (
    confusion_by_system,
    confusion_note,
    confusion_table,
    near_duplicate_confusion,
)

CORPUS = pd.DataFrame(
    {
        "doc_id": ["g", "r", "v", "n", "d", "o"],
        "item_name": [
            "残疾人证换领",
            "残疾人证换领",
            "残疾人证换领（残损换新（户籍地））",
            "残疾人证换领（遗失补办）",
            "残疾人证换领",
            "护照签发",
        ],
        "region": ["绿园区", "朝阳区", "绿园区", "绿园区", "绿园区", "绿园区"],
        "variant": ["", "", "残损换新（户籍地）", "遗失补办", "", ""],
        "family_id": ["", "", "", "", "", ""],
    }
)


def _answers(rows: list[tuple[str, list[str]]], system: str = "s", ok: bool = True) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "system": system,
            "set": "rag",
            "doc_id": [g for g, _ in rows],
            "retrieved_doc_ids": [d for _, d in rows],
            "retrieval_ok": ok,
        }
    )


def test_each_cause_is_counted_once_and_misses_outside_the_family_are_not():
    answers = _answers(
        [
            ("g", ["g", "r"]),  # hit
            ("g", ["r", "g"]),  # same item, other region
            ("g", ["v"]),  # nested-bracket variant of the same item, same region
            ("v", ["n"]),  # another variant
            ("g", ["d"]),  # the same item twice in one region
            ("g", ["o", "g"]),  # another service: a miss, not a confusion
            ("g", []),
        ]
    )  # nothing retrieved
    out = near_duplicate_confusion(answers, CORPUS)
    assert out == {"rate": 4 / 7, "count": 4, "n": 7, "region": 1, "variant": 2, "duplicate": 1}


def test_family_id_links_items_with_different_names_and_bounds_rows_are_ignored():
    corpus = CORPUS.assign(family_id=["F1", "", "", "", "", "F1"])
    answers = pd.concat([_answers([("g", ["o"])]), _answers([("g", ["r"])]).assign(set="zero")])
    assert near_duplicate_confusion(answers, corpus)["variant"] == 1
    assert near_duplicate_confusion(answers, corpus)["n"] == 1


def test_no_rows_gives_nan_and_failed_retrievals_are_left_out():
    out = near_duplicate_confusion(_answers([("g", [])], ok=False), CORPUS)
    assert out["n"] == 0 and out["count"] == 0 and math.isnan(out["rate"])
    assert confusion_note(out) == ""


def test_by_system_table_and_note():
    answers = pd.concat(
        [_answers([("g", ["r"]), ("g", ["r"])], "a"), _answers([("g", ["g"])], "b")]
    )
    by = confusion_by_system(answers, CORPUS)
    assert by["a"]["rate"] == 1.0 and by["a"]["region"] == 2 and by["b"]["rate"] == 0.0
    table = confusion_table(by)
    assert table["system"].tolist() == ["a", "b"] and table["confused"].tolist() == [2, 0]
    assert "region_filter: question" in confusion_note(by["a"]) and confusion_note(by["b"]) == ""


def test_for_results_writes_null_for_nan():
    from cube.diagnose.near_duplicates import for_results

    by = confusion_by_system(_answers([("g", [])], "a", ok=False), CORPUS)
    assert for_results(by) == {
        "a": {"rate": None, "count": 0, "n": 0, "region": 0, "variant": 0, "duplicate": 0}
    }


def test_confusion_by_item_names_the_real_items_most_confused_first():
    from cube.diagnose.near_duplicates import confusion_by_item

    answers = _answers(
        [("g", ["r"]), ("g", ["v"]), ("g", ["g"]), ("r", ["g"]), ("o", ["g"]), ("o", ["o"])]
    )
    table = confusion_by_item(answers, CORPUS, "s")
    assert table.to_dict("records") == [
        {
            "item": "残疾人证换领",
            "questions": 4,
            "region": 2,
            "variant": 1,
            "duplicate": 0,
            "confused": 3,
        }
    ]
    assert confusion_by_item(_answers([("o", ["o"])]), CORPUS, "s").empty
    assert confusion_by_item(_answers([("g", [])], ok=False), CORPUS, "s").empty
