"""The bounds a run took from the cache: cheap re-runs by construction (issue 42, item 4).

The `zero` and `full` answers depend only on the answering model, the prompt and the questions
(`cube.systems.bounds`), and a judge's prompt holds the question, the gold document and the answer,
never the system's name nor the run's (`cube.judges.scoring`; the fence's nonce is a hash of the
text, `cube.config.fence`). Their calls therefore have the same cache keys (`cube.llm.cache`) in
every run with the same answerer, questions and judges: a new version's run that shares the cache
(`cache_path`) with its baseline's sends no call for the bounds the baseline made, only its own
`rag` answers and their judgments. Nothing has to be switched on for that; this module *says* it:

- `cached_bound_answers`: the plan reads the bound answers already in the cache, so an LLM
  judge's prompts on them are the real ones and `cube plan` counts their judgments as cached
  (`cube.run.plan`, column `bounds_cached`, and `bounds_line`).
- `bounds_reuse` / `write_bounds_reuse`: after stage 03, `data/bounds_reused.json` counts the
  bound calls of the run (answers and judgments, distinct calls by `call_id`), how many were taken
  from the cache rather than sent, and, when the baseline's run folder is known
  (`baseline.run`), how many of those are calls of the baseline's own tables. An offline
  algorithm's bounds cost nothing and are counted apart (`offline`). The release decision's page
  reads the file to say which bounds came from the baseline. It is in `data/`, not `report/`: a
  run's report folder is rendered anew when it commits (`cube.run.state`), its data published.

A bound set not made (`analysis.bounds_of_missed: sample`: a missed question outside the gate's
sample) has no row and is counted nowhere; a new version that retrieves a question the baseline
missed makes that question's bounds anew (they are `sent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from cube.config.jsonfile import write_json_atomic
from cube.config.model_spec import ModelSpec
from cube.config.project import display_path

if TYPE_CHECKING:
    from cube.config.params import Params
    from cube.llm import Request
    from cube.run.notebook import Run

BOUNDS_REUSED = "bounds_reused.json"  # under the run's data/ folder
BOUND_SETS = ("zero", "full")


def cached_bound_answers(
    spec: ModelSpec, requests: Sequence[Request], cache_path: Path | None
) -> dict[int, str]:
    """The answers the cache holds for `requests` (the bound sets' answering calls of an LLM
    answerer), by position: what the plan's judges read in place of stand-ins."""
    from cube.llm import CallCache, cache_key

    if cache_path is None or not Path(cache_path).exists() or spec.provider == "offline":
        return {}
    keys = [cache_key(spec, r) for r in requests]
    cache = CallCache(cache_path)
    try:
        stored = cache.get_many(keys)
    finally:
        cache.close()
    return {i: str(stored[k]["text"]) for i, k in enumerate(keys) if k in stored}


def _offline_models(params: Params) -> set[str]:
    """The names of the offline algorithms among the run's answerers and judges (their rows are
    computed, never sent nor cached)."""
    refs = [params.system_answerer(s) for s in params.systems] + [j.model for j in params.judges]
    return {params.model(r).model for r in refs if params.model(r).provider == "offline"}


def _calls(rows: pd.DataFrame, offline: set[str], baseline_ids: set[str] | None) -> dict[str, Any]:
    """The distinct calls of bound rows: how many, taken from the cache, sent, computed offline,
    and (with a baseline) found in the baseline's tables."""
    if not len(rows) or "call_id" not in rows:
        return {"calls": 0, "from_cache": 0, "sent": 0, "offline": 0, "from_baseline": None}
    ids = rows["call_id"].fillna("").astype(str)
    model = rows["model"].astype(str) if "model" in rows else pd.Series("", index=rows.index)
    made = rows[(ids != "") & ~model.isin(offline)]
    calls = made.drop_duplicates("call_id")
    cached = calls["cached"].fillna(False).astype(bool) if "cached" in calls else calls.index < 0
    off = rows[(ids != "") & model.isin(offline)]["call_id"].nunique()
    from_baseline = None
    if baseline_ids is not None:
        from_baseline = int(calls[cached]["call_id"].astype(str).isin(baseline_ids).sum())
    return {
        "calls": len(calls),
        "from_cache": int(cached.sum()),
        "sent": int((~cached).sum()),
        "offline": int(off),
        "from_baseline": from_baseline,
    }


def _baseline_ids(baseline: Path | None) -> tuple[set[str] | None, str]:
    """The call ids of a baseline run folder's answers and scores (None when unknown), and why
    they are unknown ('' when read)."""
    if baseline is None:
        return None, "no baseline run folder (baseline.run)"
    data = Path(baseline) / "data"
    ids: set[str] = set()
    found = False
    for table in ("answers", "scores"):
        path = data / f"{table}.parquet"
        if path.exists():
            found = True
            ids |= set(pd.read_parquet(path, columns=["call_id"])["call_id"].astype(str))
    if not found:
        return None, f"{display_path(data)}: no answers.parquet nor scores.parquet"
    ids.discard("")
    return ids, ""


def _judgments(scores: pd.DataFrame) -> pd.DataFrame:
    """The judges' rows (human ratings are no call)."""
    if "judge" not in scores:
        return scores
    return scores[~scores["judge"].astype(str).str.startswith("human")]


def _sum_from_baseline(roles: dict[str, dict[str, Any]], ids: set[str] | None) -> int | None:
    if ids is None:
        return None
    return sum(int(r["from_baseline"] or 0) for r in roles.values())


_READ = ("question_id", "set", "judge", "call_id", "model", "cached")


def bounds_reuse(
    params: Params, answers: pd.DataFrame, scores: pd.DataFrame, baseline: Path | None = None
) -> dict[str, Any]:
    """What `data/bounds_reused.json` holds: per role (`answering`, `judging`) and in all, the
    bound sets' distinct calls, how many came from the cache (made by an earlier run: its
    baseline's when the same call is in the baseline's tables) and how many this run sent."""
    offline = _offline_models(params)
    ids, why = _baseline_ids(baseline)
    # the columns read, before any row is selected: each selection copied every column of the
    # 293k judgments (stage 03's memory peak at the paper's scale)
    answers, scores = (t[[c for c in _READ if c in t]] for t in (answers, scores))
    bound_answers = answers[answers["set"].astype(str).isin(BOUND_SETS)]
    bound_scores = _judgments(scores[scores["set"].astype(str).isin(BOUND_SETS)])
    roles = {
        "answering": _calls(bound_answers, offline, ids),
        "judging": _calls(bound_scores, offline, ids),
    }
    total = {k: sum(int(r[k] or 0) for r in roles.values()) for k in ("calls", "from_cache")}
    total["sent"] = sum(r["sent"] for r in roles.values())
    return {
        "bound_sets": list(BOUND_SETS),
        "questions": int(bound_answers["question_id"].nunique()),
        **roles,
        "total": total,
        "baseline": display_path(baseline) if baseline is not None else None,
        "baseline_unknown": why,
        "from_baseline": _sum_from_baseline(roles, ids),
        "note": "calls taken from the cache were made by an earlier run sharing the cache (same "
        "answerer, questions and judges): they cost nothing now; offline bounds are computed "
        "locally and never sent",
    }


def baseline_folder(params: Params) -> Path | None:
    """The baseline's run folder when the params name one (`baseline.run`, resolved as the release
    gate resolves it), else None. `cube run --baseline FOLDER` is not in the params: the gate
    calls `bounds_reuse_of` with its folder."""
    run = getattr(getattr(params, "baseline", None), "run", None)
    return Path(run).expanduser().resolve() if run else None


def bounds_reuse_of(params: Params, run_folder: Path, baseline: Path | None) -> dict[str, Any]:
    """`bounds_reuse` of a published run folder's tables against a baseline's run folder (what the
    release decision's page reads: which bounds came from the baseline)."""
    data = Path(run_folder) / "data"
    answers = pd.read_parquet(data / "answers.parquet")
    scores = pd.read_parquet(data / "scores.parquet")
    return bounds_reuse(params, answers, scores, baseline)


def write_bounds_reuse(run: Run, answers: pd.DataFrame, scores: pd.DataFrame) -> Path:
    """Write `data/bounds_reused.json` of stage 03's tables (`bounds_reuse`)."""
    target = run.paths.data / BOUNDS_REUSED
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        target, bounds_reuse(run.params, answers, scores, baseline_folder(run.params))
    )
    return target


def bounds_line(plan: pd.DataFrame) -> str:
    """`cube plan`'s line on the cache: how many planned calls it saves, and how many of those
    are the bound sets (zero/full answers and their judgments) made by an earlier run."""
    cached = int(plan["cached_calls"].sum())
    if (plan["tokens_by"] == "offline (no tokens)").all():
        return "cache: every call is computed offline (nothing to send, nothing cached)"
    if not cached:
        return "cache: no planned call is in the cache yet (a run sharing it will reuse its calls)"
    rows = plan[plan["bounds_cached"] > 0]
    bounds = int(rows["bounds_cached"].sum())
    parts = ", ".join(f"{int(r['bounds_cached'])} {r['role']}" for r in rows.to_dict("records"))
    return (
        f"cache: saves {cached} of the planned calls; {bounds} of them are the bounds (zero/full "
        f"answers and their judgments) made by an earlier run sharing this cache"
        + (f" ({parts})" if parts else "")
    )
