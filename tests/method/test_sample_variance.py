"""`sample_variance`: only items with at least two valid samples say whether samples agree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cube.method.analysis import sample_variance


def _rows(judge: str, item: int, samples: list[float]) -> list[dict]:
    return [
        {
            "question_id": f"q{item}",
            "system": "s",
            "set": "rag",
            "judge": judge,
            "dimension": "quality",
            "score": v,
            "sample": i,
        }
        for i, v in enumerate(samples)
    ]


def test_items_with_fewer_than_two_valid_samples_are_counted_apart():
    rows = (
        _rows("j", 0, [6, 8])
        + _rows("j", 1, [7, np.nan])
        + _rows("j", 2, [np.nan, np.nan])
        + _rows("j", 3, [5, 5])
    )
    out = sample_variance(pd.DataFrame(rows)).set_index("judge").loc["j"]
    assert out["items"] == 4 and out["samples"] == 2
    assert out["items_compared"] == 2 and out["items_single"] == 2
    assert out["share_disagreeing"] == pytest.approx(
        0.5
    )  # q0 disagrees, q3 agrees; q1 and q2 are not "agreeing"
    assert out["mean_within_sd"] == pytest.approx((np.std([6, 8], ddof=1) + 0) / 2)


def test_no_item_with_two_valid_samples_gives_nan_not_zero():
    rows = (
        _rows("once", 0, [7])
        + _rows("once", 1, [3])
        + _rows("failed", 0, [4, np.nan])
        + _rows("failed", 1, [np.nan, 9])
    )
    out = sample_variance(pd.DataFrame(rows)).set_index("judge")
    for judge in ("once", "failed"):
        assert out.loc[judge, "items_compared"] == 0 and out.loc[judge, "items_single"] == 2
        assert np.isnan(out.loc[judge, "share_disagreeing"]) and np.isnan(
            out.loc[judge, "mean_within_sd"]
        )
