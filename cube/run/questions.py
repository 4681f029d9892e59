"""The run's question set by `questions.generator`, and the questions a run leaves out.

`build_question_set` is the one entry point of stages 01-02, `cube validate`, `cube questions` and
`cube plan`: an imported file's questions (`generator: imported`) are made in the systems layer
(`cube.systems.imported_questions`: they need the file's import and the passage mapping), the
others by `cube.kb.questions.build_questions`. Rows that cannot be asked stay in the set with the
reason in `error`; `unusable_questions` marks them, and the questions stage drops them with a count.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cube.config.params import Params


def unusable_questions(questions: pd.DataFrame) -> pd.Series:
    """The questions a run leaves out: empty (their generation failed), rejected by the screen,
    or without a gold document (an imported file's: `cube.systems.imported_questions`); each
    such row says why in `error`."""
    return questions["question"].fillna("").astype(str).str.strip().eq("") | questions[
        "error"
    ].fillna("").astype(str).ne("")


def build_question_set(
    params: Params, corpus: pd.DataFrame, cache_path: Path | None = None, base_dir: Path = Path(".")
) -> pd.DataFrame:
    """The question set by `questions.generator`, rows that cannot be asked included (with their
    `error`): an imported file's questions (`cube.systems.imported_questions`, a layer above the
    knowledge base), else `cube.kb.questions.build_questions`."""
    if params.questions.generator == "imported":
        from cube.systems.imported_questions import questions_from_imported

        return questions_from_imported(params, corpus, base_dir)
    from cube.kb.questions import build_questions

    return build_questions(params, corpus, cache_path, base_dir=base_dir)
