"""`cube validate --check-endpoints` for the systems under test: one real question each.

An http system gets ONE request (the run's first question, or a sample question when the question
set is written during the run), sent once (no retry, no cache), and `probe_systems` shows what
came back: the reply's start, or the failure with its status and the body's start (a 422 with
FastAPI's `{"detail": [...]}`, an HTML error page, a refused connection); then what the response
paths extracted from it (the answer, the ids or passages) and what those mapped to in the
knowledge base (`cube.systems.retrieved.ranked_lists`, misses as `unmapped:...`). A python system
is called once the same way. A wrong body, a wrong path or ids in the wrong case are found in
seconds, before a run of hundreds of calls.

What a kind's probe does is the kind's (`cube.systems.kinds.SystemKind.probe`: the http and
python kinds' are in their modules, a user kind is asked one question); a kind without one
(builtin, imported: they call nothing; RAGFlow has its own preflight) is not probed.

Each system gives a few lines to print and, when its call failed or its reply could not be read,
a problem (the command then exits 2).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cube.config.params import Params
from cube.systems.kinds import SystemProbe, excerpt, kind_of

SAMPLE_QUESTION = "What documents do I need to apply?"

__all__ = ["SystemProbe", "probe_report", "probe_systems"]


def _question(questions: pd.DataFrame | None, corpus: pd.DataFrame) -> pd.DataFrame:
    if questions is not None and len(questions):
        return questions.head(1)[["question_id", "doc_id", "question"]].reset_index(drop=True)
    gold = str(corpus["doc_id"].iloc[0]) if len(corpus) else ""
    return pd.DataFrame({"question_id": ["probe"], "doc_id": [gold], "question": [SAMPLE_QUESTION]})


def _probed(params: Params) -> list:
    """The systems whose kind has a probe."""
    return [sp for sp in params.systems if kind_of(sp).probe is not None]


def probe_systems(
    params: Params, corpus: pd.DataFrame, questions: pd.DataFrame | None = None
) -> list[SystemProbe]:
    """One real question to each system of `params` whose kind probes (module docstring)."""
    q = _question(questions, corpus)
    return [kind_of(sp).probe(sp, params, q, corpus) for sp in _probed(params)]  # type: ignore[misc]


def probe_report(params: Params, base_dir: Path) -> tuple[list[str], list[str]]:
    """The probes' lines and problems for `cube validate --check-endpoints`: the knowledge base
    and question set made as the run makes them (`cube.run.validate.run_inputs`; the knowledge base
    alone when the questions are written by an LLM during the run), then `probe_systems`.
    ([], []) when no system is probed."""
    from cube.run.validate import DataReport, check_corpus, run_inputs

    if not _probed(params):
        return [], []
    scratch = DataReport()  # validate_data has reported these inputs' problems already
    inputs = run_inputs(params, base_dir, scratch)
    corpus, questions = (
        inputs if inputs is not None else (check_corpus(params, base_dir, scratch), None)
    )
    if corpus is None or not scratch.ok:
        return [], ["systems not probed: the knowledge base or question set cannot be made (above)"]
    lines, problems = [], []
    for sp in _probed(params):
        try:
            (probe,) = probe_systems(params.model_copy(update={"systems": [sp]}), corpus, questions)
        except Exception as err:  # reported, never raised: a probe says what went wrong
            probe = SystemProbe(
                sp.name,
                problem=f"{sp.name}: the probe failed: {type(err).__name__}: {excerpt(err)}",
            )
            probe.lines.append(probe.problem)
        lines += probe.lines
        problems += [probe.problem] if probe.problem else []
    return lines, problems
