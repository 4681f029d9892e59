"""The run's evaluation, computed once per attempt: `evaluate_run` (notebooks 04-06, the decision,
the diagnostics) and the TOP-N of each system.

Below `cube.run.pipeline` and `cube.run.diagnosis`, which both read it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.jsonfile import file_lock
from cube.config.params import Params
from cube.method.analysis import CubeWarning
from cube.method.evaluation import CubeResult, evaluate_systems, intervals_alone
from cube.run.notebook import Run
from cube.run.stages import modules_digest

_EVALUATION_CODE = "import cube.method.evaluation"


def primary_system(run: Run) -> str:
    """The system the decision page is about: the first of `params.systems`."""
    return run.params.systems[0].name


def system_top_n(params: Params) -> dict[str, int]:
    """N of each system's retrieved list (for `rank_score`)."""
    return {s.name: s.top_n for s in params.systems}


def evaluate_run(run: Run, *, bootstrap: bool = True) -> dict[str, CubeResult]:
    """`cube.method.analysis.evaluate` for every system of the run (warnings kept in each result).

    Computed once per run: notebooks 03-05 ask for the same evaluation, so the results are kept in
    `evaluations/<key>.pkl` next to the call cache (`<outputs>/cache.sqlite`), keyed by the sha256
    of the answers and scores files, the analysis params, systems, judges, dimensions and the
    package code `evaluate` runs (`cube.method.evaluation` and every module it imports, followed by
    `cube.run.stages.modules_digest`, so no list of files can go stale); any change of those is a
    new key (a stale result cannot be read back). Never inside the run folder: a pickle executes
    code when loaded, and a run folder may come from someone else; the outputs folder's cache
    directory holds only what this code wrote."""
    run.require("answers", "scores")
    ap = (
        run.params.analysis
        if bootstrap
        else run.params.analysis.model_copy(update={"bootstrap": 0})
    )
    judges, dims, top_n = (
        [j.name for j in run.params.judges],
        run.params.dimension_names(),
        system_top_n(run.params),
    )
    # the same evaluation without intervals (notebook 04's), when kept: only the intervals are
    # added to it (`with_intervals`, ~1 s of CPU at the paper's scale not spent twice)
    aps = [ap, ap.model_copy(update={"bootstrap": 0})] if ap.bootstrap > 0 else [ap]
    key, *plain_key = _evaluation_keys(run, aps, judges, dims, top_n)
    cached = evaluation_cache_dir(run) / f"{key}.pkl"
    cached.parent.mkdir(parents=True, exist_ok=True)
    plain = evaluation_cache_dir(run) / f"{plain_key[0]}.pkl" if plain_key else None
    # stages executing side by side (`cube.run.lanes`: 04 and 05) ask for it at once: one computes
    # it, the other waits and reads it (computing it twice cost ~4 s of CPU at 300 questions)
    with file_lock(cached.with_suffix(".lock")):
        return _evaluated(run, ap, judges, dims, top_n, cached, plain)


def _evaluated(
    run: Run,
    ap: Any,
    judges: list[str],
    dims: list[str],
    top_n: dict[str, int],
    cached: Path,
    plain: Path | None = None,
) -> dict[str, CubeResult]:
    """The evaluation kept in `cached`, else computed (from the one without intervals kept in
    `plain`, when there is one) and kept there."""
    kept = _kept(cached)
    if kept is not None:
        return kept
    without_intervals = _kept(plain) if plain is not None else None
    answers, scores = run.load("answers"), run.load("scores", ANALYSIS_SCORE_COLUMNS)
    # the audit and the twins are read by the gate alone, whose verdicts the kept evaluation has
    alone = without_intervals is not None and all(
        intervals_alone(r, ap) for r in without_intervals.values()
    )
    audit = None if alone else audit_probe_scores(run, scores)
    families = question_families(answers, run.load("corpus") if run.has("corpus") else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CubeWarning)  # shown by the notebooks from result.warnings
        results = evaluate_systems(
            answers,
            scores,
            ap,
            top_n,
            judges=judges,
            dimensions=dims,
            audit=audit,
            audit_min_pairs=run.params.audit.min_pairs,
            clusters=families,
            twins=None if alone else ablation_summary(run, scores),
            without_intervals=without_intervals,
        )
    out = {s.name: results[s.name] for s in run.params.systems if s.name in results}  # params order
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(cached)
    return out


def _kept(path: Path) -> dict[str, CubeResult] | None:
    """The evaluation kept in `path`; None when there is none or it cannot be read (recomputed)."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as f:
            return pickle.load(f)
    except Exception:  # noqa: BLE001 - an unreadable cache entry is recomputed
        return None


# What `evaluate` reads of the scores table; the raw replies, criterion details and call accounting
# (13 more columns) were most of its memory at the paper's scale.
ANALYSIS_SCORE_COLUMNS = (
    "question_id",
    "system",
    "set",
    "judge",
    "dimension",
    "sample",
    "score",
    "error_kind",
)


def question_families(answers: pd.DataFrame, corpus: pd.DataFrame | None) -> dict[str, str]:
    """Each question's resampling family: the corpus `family_id` of its gold document (a user's
    knowledge base gets it from the mapping's grouping column), else the gold document itself
    (questions about one document share it), else the question alone (no gold document)."""
    gold = answers.drop_duplicates("question_id").set_index("question_id")["doc_id"]
    gold = gold.fillna("").astype(str)
    fam: dict[str, str] = {}
    if corpus is not None and "family_id" in corpus:
        ids = corpus["family_id"].fillna("").astype(str)
        fam = {d: f for d, f in zip(corpus["doc_id"].astype(str), ids, strict=True) if f.strip()}
    return {
        str(q): f"family:{fam[d]}" if d in fam else f"doc:{d}" if d else f"question:{q}"
        for q, d in gold.items()
    }


def audit_probe_scores(run: Run, scores: pd.DataFrame) -> pd.DataFrame | None:
    """The judge audit's probe scores with the primary system's full-set scores as originals
    (`cube.method.audit.probe_table`); None when the audit did not run (no data/audit_scores, or
    empty)."""
    from cube.method.audit import probe_table

    if not run.has("audit_scores"):
        return None
    probes = run.load("audit_scores")
    if probes.empty:
        return None
    return probe_table(
        pd.concat([scores, probes[list(ANALYSIS_SCORE_COLUMNS)]], ignore_index=True),
        probes,
        run.params.systems[0].name,
    )


def ablation_summary(run: Run, scores: pd.DataFrame) -> pd.DataFrame | None:
    """Per judge, what removing the grader-addressed text of the flagged answers did to its scores
    (`cube.method.injection.twin_summary`, the offline judges as the reference whose drop is the
    content lost); None when no twin was judged."""
    from cube.method.injection import twin_pairs, twin_summary

    if not run.has("audit_scores"):
        return None
    probes = run.load("audit_scores")
    if probes.empty or "probe" not in probes:
        return None
    twins = probes[probes["probe"] == "ablated"]
    if twins.empty:
        return None
    p = run.params
    offline = [j.name for j in p.judges if p.model(j.model).provider == "offline"]
    return twin_summary(twin_pairs(scores, twins), reference=offline)


def evaluation_cache_dir(run: Run) -> Path:
    """Where `evaluate_run` keeps its results: beside the call cache, outside every run folder."""
    return run.paths.cache.parent / "evaluations"


def _evaluation_keys(
    run: Run, aps: list[Any], judges: list[str], dims: list[str], top_n: dict[str, int]
) -> list[str]:
    """The cache key of each analysis params in `aps` (the input files read once)."""
    h = hashlib.sha256()
    extra = [n for n in ("audit_scores", "corpus") if run.has(n)]  # the corpus: the families
    for name in ("answers", "scores", *extra):
        with run.data_path(name).open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):  # noqa: B023 - f is bound for the loop
                h.update(block)
    code = modules_digest(_EVALUATION_CODE).encode()  # the code the result depends on
    systems = [s.name for s in run.params.systems]
    keys = []
    for ap in aps:
        k = h.copy()
        k.update(
            json.dumps(
                [ap.model_dump(mode="json"), judges, dims, top_n, systems],
                sort_keys=True,
                default=str,
            ).encode()
        )
        k.update(code)
        keys.append(k.hexdigest())
    return keys


def _evaluation_key(
    run: Run, ap: Any, judges: list[str], dims: list[str], top_n: dict[str, int]
) -> str:
    """The cache key of one analysis params (`_evaluation_keys`)."""
    return _evaluation_keys(run, [ap], judges, dims, top_n)[0]
