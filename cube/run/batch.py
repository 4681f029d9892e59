"""Batch judging of a run: the judging calls of its stage 03, built by its judges, handed to
`cube.llm.batch` to export, import and count (the LLM layer knows requests, not judges).

The round trip is described in `cube.llm.batch`; `cube batch` (`cube.run.batch_cli`) calls these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cube.llm import batch
from cube.llm.batch import BatchError, ImportReport, Pending
from cube.llm.cache import cache_key

STAGES = ("03",)


def stage_calls(params_path: str | Path, stage: str = "03") -> tuple[list[Pending], Path]:
    """Every LLM call of `stage` for the run of these params (deduplicated), and the cache path."""
    from cube.judges import load_dimensions, make_judges
    from cube.run.ablation import twin_requests
    from cube.run.audit import audit_probes, stage_judge_calls, stage_requests
    from cube.run.notebook import open_run

    if stage not in STAGES:
        raise BatchError(
            f"--stage {stage}: only {', '.join(STAGES)} (judging) can be exported as a batch"
        )
    run = open_run(params_path)
    run.require("corpus", "questions", "answers")
    corpus, questions, answers = run.load("corpus"), run.load("questions"), run.load("answers")
    dimensions = load_dimensions(run.params, base_dir=Path.cwd())
    judges = make_judges(run.params, run.paths.cache)
    # the judge audit's calls are stage 03's too, capped by the run's judge calls as stage 03 caps
    # them (`cube.run.audit.judge_calls`, the one count of the three), counted a slice of answers
    # at a time (`stage_judge_calls`, the same count): every judge's requests at once, the offline
    # judges' too, were the export's peak (1.65 GB at 1.17M judgments, issue 41)
    n = stage_judge_calls(judges, answers, corpus, questions, dimensions)
    llm = [j for j in judges if not j.model.offline]  # only a model's calls are exported
    requests = stage_requests(llm, answers, corpus, questions, dimensions)
    twins = twin_requests(run.params, judges, dimensions, corpus, questions, answers, n)
    probes = audit_probes(run.params, corpus, questions, answers, n)
    if not probes.empty:
        audit = stage_requests(
            llm,
            probes.drop(columns=["probe", "expect", "injection"], errors="ignore"),
            corpus,
            questions,
            dimensions,
        )
        for j in llm:
            requests[j.name] += audit[j.name]
    for j in llm:  # the screen's ablation twins (`cube.run.ablation`), stage 03's calls too
        requests[j.name] += twins.get(j.name, [])
    calls: dict[str, Pending] = {}
    for judge in llm:
        spec = judge.model.spec
        for request in requests[judge.name]:
            key = cache_key(spec, request)
            calls.setdefault(key, Pending(key, judge.name, spec, request))
    return list(calls.values()), run.paths.cache


def pending_calls(
    params_path: str | Path, stage: str = "03", every: bool = False
) -> tuple[list, Path]:
    """`stage_calls` without those already in the call cache; with `every`, all calls as
    (call, pending) pairs."""
    calls, cache_path = stage_calls(params_path, stage)
    return batch.pending_of(calls, cache_path, every), cache_path


def export_batch(params_path: str | Path, out: str | Path, stage: str = "03") -> dict[Path, int]:
    """`cube batch export`: the stage's pending calls as Batch API files
    (`cube.llm.batch.export_batch`)."""
    calls, _ = pending_calls(params_path, stage, every=True)
    return batch.export_batch(calls, out)


def import_batch(params_path: str | Path, results: str | Path, stage: str = "03") -> ImportReport:
    """`cube batch import`: store a results file's replies to the calls the run makes now."""
    results = Path(results)
    if not results.exists():
        raise BatchError(f"{results}: no such file")
    calls, cache_path = stage_calls(params_path, stage)
    return batch.import_batch(calls, cache_path, results, stage)


def pending_after_import(params_path: str | Path, folders: Any, stage: str = "03") -> list[str]:
    """What `cube batch import` says afterwards (`cube.llm.batch.pending_after_import`)."""
    pending, _ = pending_calls(params_path, stage)
    return batch.pending_after_import(pending, folders, stage)
