"""Which stages hold failed calls, so that a plain re-run retries them (review finding 4)."""

from __future__ import annotations

import pandas as pd

from cube.config import RunPaths
from cube.report import call_failures


def test_failed_answer_and_question_calls_make_their_stage_out_of_date(tmp_path):
    # answers/questions tables carry `error` but no `error_kind`: their failed calls were counted as
    # 0, so `cube run` thought notebook 02 was up to date and never retried them.
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    pd.DataFrame({"question_id": ["q1", "q2", "q3"], "set": ["rag"] * 3, "answer": [None, "ok", "ok"],
                  "error": ["HTTP 500 after 5 attempts: boom", "", None]}).to_parquet(paths.data_file("answers"))
    pd.DataFrame({"question_id": ["q1", "q2"], "question": [None, "x"],
                  "error": ["connection error after 5 attempts", ""]}).to_parquet(paths.data_file("questions"))
    pd.DataFrame({"question_id": ["q1", "q2", "q3"], "error": ["bad reply", "timeout", ""],
                  "error_kind": ["parse", "call", None]}).to_parquet(paths.data_file("scores"))
    assert call_failures(paths, "02_qa_sets") == 2  # one answer, one question
    assert call_failures(paths, "03_scoring_sets") == 1  # error_kind decides where present: parse is no call failure
    assert call_failures(paths, "01_dataset_prep") == 0  # no corpus file


def test_a_stage_without_failures_is_clean(tmp_path):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    pd.DataFrame({"question_id": ["q1"], "answer": ["ok"], "error": [""]}).to_parquet(paths.data_file("answers"))
    pd.DataFrame({"question_id": ["q1"], "answer": ["ok"]}).to_parquet(paths.data_file("questions"))
    assert call_failures(paths, "02_qa_sets") == 0
