"""Review 1 item 6: a configured dimension with absent rows behaves exactly like NaN rows."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from cube.config.sections import AnalysisParams
from cube.method.evaluation import evaluate
from tests.factories import make_tables


def _evaluate(answers, scores, ap, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate(answers, scores, ap, **kw)


@pytest.mark.parametrize(
    "weights,custom",
    [
        ("equal", None),
        ("rank_correlation", None),
        ("custom", {"relevance": 1, "specificity": 1, "completeness": 1, "quality": 1}),
    ],
)
def test_absent_rows_equal_nan_rows_for_a_configured_dimension(weights, custom):
    """Item 6 (metamorphic): a configured dimension without any score row gives exactly what NaN
    rows give, in the point estimate, the flags and the bootstrap."""
    from tests.factories import DIMS

    answers, scores = make_tables(n_questions=30, seed=3)
    lost = scores["dimension"] == "quality"
    ap = AnalysisParams(bootstrap=30, weights=weights, custom_weights=custom)
    nan_rows = _evaluate(
        answers, scores.assign(score=scores["score"].where(~lost)), ap, dimensions=list(DIMS)
    )
    absent = _evaluate(answers, scores[~lost], ap, dimensions=list(DIMS))
    cols = ["weighted_score", "cube_score", "flags"]
    pd.testing.assert_frame_equal(absent.cube_table[cols], nan_rows.cube_table[cols])
    pd.testing.assert_frame_equal(
        absent.weights.reset_index(drop=True), nan_rows.weights.reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(absent.bootstrap, nan_rows.bootstrap)
    point = absent.cube_table["weighted_score"]
    boot = absent.bootstrap[absent.bootstrap["metric"] == "weighted_score"].set_index("judge")[
        "estimate"
    ]
    np.testing.assert_allclose(boot.reindex(point.index).to_numpy(float), point.to_numpy(float))
    if (
        weights != "rank_correlation"
    ):  # a weighted dimension without any measurement: W undefined, flagged
        assert point.isna().all()
        assert absent.cube_table["flags"].str.contains("quality").all()


def test_custom_weights_lacking_a_configured_dimension_is_a_clear_error():
    """Item 6: custom weights without the configured dimension 'quality' (which has no rows) used to
    crash the bootstrap with KeyError 'quality'; it is a ValueError naming the key and the
    dimension."""
    from tests.factories import DIMS

    answers, scores = make_tables(n_questions=20, seed=3)
    ap = AnalysisParams(
        bootstrap=10,
        weights="custom",
        custom_weights={"relevance": 1, "specificity": 1, "completeness": 1},
    )
    with pytest.raises(ValueError, match=r"custom_weights.*quality"):
        _evaluate(answers, scores[scores["dimension"] != "quality"], ap, dimensions=list(DIMS))
