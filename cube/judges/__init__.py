"""Judges: dimensions and prompt templates, score parsing, the LLM judge pipeline, the rubric judge.

Public API (others call these names):

    Dimension, load_dimensions, dimension_criteria        (cube.judges.dimensions)
    parse_score, parse_scores_json                        (cube.judges.parsing)
    Judge, make_judges, score_answers                     (cube.judges.scoring)

A judge's failure rates are read by the validity gate: `cube.method.gate.failure_rates`.

The deterministic, non-LLM `rubric` judge lives in `cube.judges.rubric` and registers itself
as the offline models "rubric", "rubric-lenient" and "rubric-strict".
"""

from cube.judges.dimensions import Dimension, DimensionError, dimension_criteria, load_dimensions
from cube.judges.parsing import parse_score, parse_scores_json
from cube.judges.scoring import Judge, make_judges, score_answers

__all__ = [
    "Dimension",
    "DimensionError",
    "Judge",
    "dimension_criteria",
    "human",  # the module: human ratings and the tables built from them (notebooks 07, 08)
    "load_dimensions",
    "make_judges",
    "parse_score",
    "parse_scores_json",
    "score_answers",
]
