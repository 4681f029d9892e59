"""The decision of stage 06 (`decision`): built once, from typed inputs, after every stage that
spends calls, and written to `results.json` `decision` from its record
(`cube.diagnose.decision_record.Decision`).

Every call of a run is spent by stages 02 (questions, answers, refusal questions) and 03 (judging
and the audit's probes); the decision's usage reads the same tables as the manifest's usage
(`CALL_TABLES`, `call_usage`), so its cost card and the usage table add up to the same total.
Moved out of `cube.run.pipeline` (which re-exports these names for the notebooks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.runpaths import RunPaths
from cube.diagnose.decision_record import HEADLINE_FIELDS, Decision, DecisionInputs
from cube.method.evaluation import CubeResult
from cube.run.audit import SELF_PREFERENCE_COLUMNS, audit_record
from cube.run.evaluate import primary_system
from cube.run.notebook import Run

# Every data table holding calls, in the order their stages write them: questions (written,
# failed or rejected by the screen), answers, the refusal writer's calls and the refusal answers,
# the judges' scores, the audit's.
CALL_TABLES = (
    "questions",
    "questions_failed",
    "answers",
    "refusal_generation",
    "refusal_answers",
    "scores",
    "audit_scores",
)


def call_usage(paths: RunPaths) -> pd.DataFrame | None:
    """`cube.llm.usage_summary` of every table of `CALL_TABLES` the run has (None when none):
    what the decision's cost card and the manifest's usage table both show. Only the accounting
    columns are read (a paper-scale scores table is about 0.5 GB whole)."""
    import pyarrow.parquet as pq

    from cube.llm import usage_summary
    from cube.llm.usage import USAGE_COLUMNS

    def accounting(name: str) -> pd.DataFrame:
        path = paths.data_file(name)
        present = set(pq.read_schema(path).names)
        columns = [c for c in USAGE_COLUMNS if c in present]
        # a judge's few distinct details, models and roles as categories, not a text per row
        shared = [c for c in ("model", "role", "detail") if c in present]
        return pd.read_parquet(path, columns=columns, read_dictionary=shared)

    names = [n for n in CALL_TABLES if paths.data_file(n).exists()]
    return usage_summary(accounting(n) for n in names) if names else None


def bound_answerer_note(params: Params) -> str:
    """A caveat when the bound sets of the primary system are not written by an LLM like the
    system's."""
    system = params.systems[0]
    spec = params.model(params.system_answerer(system))
    if getattr(system, "bounds", None):
        return (
            f"The zero and full bound sets of {system.name} are written by its own bounds function "
            f"{system.bounds} (docs/how-to/python-system.md)."
        )
    if spec.provider == "offline":
        return (
            f"The zero and full bound sets of {system.name} are written by the offline "
            f"{spec.model} algorithm, not by an LLM."
        )
    return ""


def offline_judges(run: Run) -> list[str]:
    """Judges whose model is an offline algorithm (not an LLM), for the caveats the report
    states."""
    return [j.name for j in run.params.judges if run.params.model(j.model).provider == "offline"]


def retrieval_quality(run: Run, results: dict[str, CubeResult]) -> dict[str, Any]:
    """What the decision says about the primary system's retrieval beyond R@k: R@1, the
    near-duplicate confusion rate (top-1 is the gold's sibling: wrong region or variant) and the
    knowledge base's exact-duplicate texts (a duplicate makes the gold unfindable at rank 1)."""
    from cube.diagnose.near_duplicates import near_duplicate_confusion
    from cube.kb.corpus import corpus_structure

    primary = primary_system(run)
    ranks = results[primary].ranks
    out: dict[str, Any] = {
        "r_at_1": float((ranks["rank"] == 1).mean()) if len(ranks) else float("nan")
    }
    if run.has("corpus"):
        corpus = run.load("corpus")
        out["near_duplicate_confusion"] = near_duplicate_confusion(
            run.load("answers"), corpus, system=primary
        )
        structure = corpus_structure(corpus)
        for key in ("duplicate_texts", "documents_merging_services", "documents_named_placeholder"):
            out[key] = structure[key]
    return out


def decision(run: Run, results: dict[str, CubeResult]) -> Decision:
    """The Lightweight Targeted Assessment of the run (`cube.diagnose.assessment.assess`, a typed
    record), written to `results.json` (`decision`, and its headline keys at the top level) with
    the audit's record (`audit`). The human-calibrated CuBE is not in it: notebook 07 records it
    under its own key (`human_calibrated`)."""
    from cube.diagnose.assessment import assess
    from cube.run.record import DecisionRecord

    audit = audit_record(run)
    out = assess(results, run.params, decision_inputs(run, results, audit))
    record = out.as_json()  # its headline fields as the decision holds them (NaN: null)
    run.write_record(
        DecisionRecord(decision=out, **{k: record[k] for k in HEADLINE_FIELDS}, audit=audit)
    )
    return out


def decision_inputs(
    run: Run, results: dict[str, CubeResult], audit: dict[str, Any] | None = None
) -> DecisionInputs:
    """What the decision reads of the run beside its evaluation (`DecisionInputs`): the usage of
    every table holding calls (`call_usage`), the caveats, the judgments' failure shares, the
    retrieval beyond R@k, the diagnostics and the audit's self-preference per judge."""
    share = _failure_shares(run)
    audit = audit if audit is not None else audit_record(run)
    judges = audit.get("judges") or {}
    return DecisionInputs(
        usage=call_usage(run.paths),
        synthetic=_synthetic(run),
        offline_judges=offline_judges(run),
        call_failure_share=share("call"),
        parse_failure_share=share("parse"),
        skipped_share=share("skipped"),
        bound_note=bound_answerer_note(run.params),
        retrieval=retrieval_quality(run, results),
        diagnosis=_diagnosis(run, results),
        # the decision page's line per judge whose model wrote the answers it judged
        self_preference={
            j: {k: v[k] for k in SELF_PREFERENCE_COLUMNS}
            for j, v in judges.items()
            if "self_preference" in v
        },
        # the injection probe's verdict per judge (issue 29): the decision page's short line
        injection={j: v.get("obeys_injections") for j, v in judges.items()},
        # stage 02's systems whose retrieval was not measured: their verdicts are withheld
        unmeasured=run.read_record().answers.answers_unmeasured or {},
    )


def _failure_shares(run: Run) -> Callable[[str], float]:
    """The share of the judgments whose `error_kind` is a given kind (0 without judgments)."""
    scores = run.load("scores", ("error_kind",))
    kind = (
        scores["error_kind"].fillna("")
        if "error_kind" in scores
        else pd.Series("", index=scores.index)
    )

    def share(what: str) -> float:
        return float((kind == what).mean()) if len(scores) else 0.0

    return share


def _synthetic(run: Run) -> bool:
    """Whether the run's knowledge base is the synthetic demo corpus."""
    if not run.has("corpus"):
        return False
    return bool(run.load("corpus").get("synthetic", pd.Series([False])).all())


def _diagnosis(run: Run, results: dict[str, CubeResult]) -> dict[str, Any]:
    from cube.run.diagnosis import for_decision

    return for_decision(run, primary_system(run), results)
