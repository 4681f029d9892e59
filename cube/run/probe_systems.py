"""`cube validate --check-endpoints` for the systems under test: one real question each.

An http system gets ONE request (the run's first question, or a sample question when the question
set is written during the run), sent once (no retry, no cache), and `probe_systems` shows what
came back: the reply's start, or the failure with its status and the body's start (a 422 with
FastAPI's `{"detail": [...]}`, an HTML error page, a refused connection); then what the response
paths extracted from it (the answer, the ids or passages) and what those mapped to in the
knowledge base (`cube.systems.retrieved.ranked_lists`, misses as `unmapped:...`). A python system
is called once the same way. A wrong body, a wrong path or ids in the wrong case are found in
seconds, before a run of hundreds of calls.

Each system gives a few lines to print and, when its call failed or its reply could not be read,
a problem (the command then exits 2).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from cube.config.http_system import HttpSystem
from cube.config.params import Params
from cube.config.sections import PythonSystem
from cube.systems.retrieved import Retrieved, RetrievedLists, ranked_lists

if TYPE_CHECKING:
    from cube.systems.http import HttpRAG
    from cube.systems.python_system import PythonRAG

EXCERPT = 200  # characters of a reply shown
SAMPLE_QUESTION = "What documents do I need to apply?"


@dataclass
class SystemProbe:
    """One system's probe: the lines shown, and the problem (None: it answered readably)."""

    system: str
    lines: list[str] = field(default_factory=list)
    problem: str | None = None


def _excerpt(text: object) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= EXCERPT else flat[: EXCERPT - 1] + "…"


def _question(questions: pd.DataFrame | None, corpus: pd.DataFrame) -> pd.DataFrame:
    if questions is not None and len(questions):
        return questions.head(1)[["question_id", "doc_id", "question"]].reset_index(drop=True)
    gold = str(corpus["doc_id"].iloc[0]) if len(corpus) else ""
    return pd.DataFrame({"question_id": ["probe"], "doc_id": [gold], "question": [SAMPLE_QUESTION]})


def _extracted(system: str, answer: object, retrieved: RetrievedLists) -> list[str]:
    """What the paths (or the function's reply) gave, and what it maps to in the knowledge base."""
    out = [f"{system}: extracted answer: {_excerpt(answer)}"]
    docs = retrieved.lists[0] if retrieved.lists else []
    if retrieved.passages:
        out.append(
            f"{system}: extracted {retrieved.passages} passage(s), mapped to {docs} "
            f"({retrieved.unmapped_passages} matched no document)"
        )
    else:
        hint = retrieved.did_you_mean
        out.append(
            f"{system}: extracted ids {docs}"
            + (
                f" (did you mean {', '.join(f'{k!r} -> {v!r}' for k, v in hint.items())}?)"
                if hint
                else ""
            )
        )
    return out


def _probe_http(
    system: HttpRAG, spec: HttpSystem, q: pd.DataFrame, corpus: pd.DataFrame
) -> SystemProbe:
    probe = SystemProbe(spec.name)
    requests = system.requests(q, corpus)
    body = json.dumps(requests[0].payload, ensure_ascii=False)
    probe.lines.append(f"{spec.name}: sent {spec.method} {spec.url} {_excerpt(body)}")
    with warnings.catch_warnings():  # the failure is shown below, once
        warnings.simplefilter("ignore")
        (resp,) = system.model.complete(requests, role="answering", progress=False)
    if not resp.ok:  # the status and the body's start, or why nothing came back
        probe.problem = f"{spec.name}: the call failed: {_excerpt(resp.error)}"
        probe.lines.append(probe.problem)
        return probe
    probe.lines.append(f"{spec.name}: reply: {_excerpt(resp.text)}")
    reading = system.read(json.loads(str(resp.text)))  # the wire checked it reads
    lists = ranked_lists(
        [Retrieved(ids=reading.ids, passages=reading.passages)], corpus, spec.top_n
    )
    probe.lines += _extracted(spec.name, reading.answer, lists)
    return probe


def _probe_python(
    system: PythonRAG, spec: PythonSystem, q: pd.DataFrame, corpus: pd.DataFrame
) -> SystemProbe:
    probe = SystemProbe(spec.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = system.answer(q, corpus, progress=False)
    row = df.iloc[0]
    probe.lines.append(f"{spec.name}: called {spec.callable} once")
    if row["error"]:
        probe.problem = f"{spec.name}: the call failed: {_excerpt(row['error'])}"
        probe.lines.append(probe.problem)
        return probe
    probe.lines += _extracted(spec.name, row["answer"], df.attrs["retrieved"])
    return probe


def probe_systems(
    params: Params, corpus: pd.DataFrame, questions: pd.DataFrame | None = None
) -> list[SystemProbe]:
    """One real question to each http and python system of `params` (module docstring); other
    kinds are not probed (builtin and imported call nothing; RAGFlow has its own preflight)."""
    from cube.systems import make_system

    q = _question(questions, corpus)
    out = []
    for sp in params.systems:
        if isinstance(sp, HttpSystem):
            once = sp.model_copy(update={"max_attempts": 1})
            out.append(_probe_http(make_system(once, params, None), once, q, corpus))  # type: ignore[arg-type]
        elif isinstance(sp, PythonSystem):
            out.append(_probe_python(make_system(sp, params, None), sp, q, corpus))  # type: ignore[arg-type]
    return out


def probe_report(params: Params, base_dir: Path) -> tuple[list[str], list[str]]:
    """The probes' lines and problems for `cube validate --check-endpoints`: the knowledge base
    and question set made as the run makes them (`cube.run.validate.run_inputs`; the knowledge base
    alone when the questions are written by an LLM during the run), then `probe_systems`.
    ([], []) when no system is http or python."""
    from cube.run.validate import DataReport, check_corpus, run_inputs

    if not any(isinstance(s, (HttpSystem, PythonSystem)) for s in params.systems):
        return [], []
    scratch = DataReport()  # validate_data has reported these inputs' problems already
    inputs = run_inputs(params, base_dir, scratch)
    corpus, questions = (
        inputs if inputs is not None else (check_corpus(params, base_dir, scratch), None)
    )
    if corpus is None or not scratch.ok:
        return [], ["systems not probed: the knowledge base or question set cannot be made (above)"]
    lines, problems = [], []
    for sp in params.systems:
        if not isinstance(sp, (HttpSystem, PythonSystem)):
            continue
        try:
            (probe,) = probe_systems(params.model_copy(update={"systems": [sp]}), corpus, questions)
        except Exception as err:  # reported, never raised: a probe says what went wrong
            probe = SystemProbe(
                sp.name,
                problem=f"{sp.name}: the probe failed: {type(err).__name__}: {_excerpt(err)}",
            )
            probe.lines.append(probe.problem)
        lines += probe.lines
        problems += [probe.problem] if probe.problem else []
    return lines, problems
