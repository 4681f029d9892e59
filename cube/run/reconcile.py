"""The plan and the run's calls, reconciled in one line (`cube run`'s summary).

A run logs its plan before any call ("plan: 17920 calls, 0 to send (17920 computed offline)",
`cube.run.plan.plan_line`) and ended with the calls its tables hold ("calls: 8679"): two numbers
in different units that nothing related. `calls_line` says, in the plan's words, what happened to
the planned calls:

    calls: 8679 made of 17920 planned (8679 computed offline, 0 from the cache, 0 sent);
    9241 not made: an offline algorithm computes equal inputs once (the plan's count is an
    upper bound)

- **planned**: the plan the run recorded before its first call (`results.json` `plan`, rows of
  `cube.run.plan.build_plan`); a row is offline when its `tokens_by` says so;
- **made**: the calls the run's tables hold (the manifest's `usage`, `cube.llm.usage_summary`),
  split into those **computed offline** (rows of an offline model of the plan), those served
  **from the cache**, and those **sent**, of which some **failed** (after retries);
- **not made**: planned minus made, with its causes: the calls the **early stop** saved
  (`results.json` `sequential.calls.saved`, counted by the plan as the driver counts them), an
  offline algorithm's upper bound (equal inputs computed once), answers whose call failed (not
  judged), and model calls the run did not need (questions screened out, a judge stopped at its
  pilot, stages not run), split into offline and model calls where the plan can say;
  **more than planned** when the run made calls the plan does not count (re-asks of unscored
  judgments, an LLM refusal writer's calls).

Nothing here is recomputed: the plan, the usage and the sequential record are read as the run wrote
them; a run folder without a recorded plan or usage gives '' (the summary then says what it knows).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

OFFLINE_TOKENS_BY = "offline"  # the plan's `tokens_by` of an offline algorithm's row starts so


def _key(row: Mapping[str, Any]) -> tuple[str, str]:
    return str(row.get("role", "")), str(row.get("model", ""))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _sum(rows: Iterable[Mapping[str, Any]], column: str) -> int:
    return sum(_int(r.get(column)) for r in rows)


def _offline_models(plan: list[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """The (role, model) of the plan's rows an offline algorithm computes."""
    return {_key(r) for r in plan if str(r.get("tokens_by", "")).startswith(OFFLINE_TOKENS_BY)}


def _rows(
    rows: Iterable[Mapping[str, Any]], offline: set[tuple[str, str]], *, of_offline: bool
) -> list[Mapping[str, Any]]:
    """The rows of offline algorithms (`of_offline`), or those of models."""
    return [r for r in rows if (_key(r) in offline) == of_offline]


def _made_parts(made_off: int, cached: int, sent: int, failed: int, *, offline: bool) -> str:
    """How the calls made were made: computed offline (when the plan or the run has any), from
    the cache, sent (and how many of those failed)."""
    parts = [f"{made_off} computed offline"] * offline + [
        f"{cached} from the cache",
        f"{sent} sent" + (f", {failed} of them failed" if failed else ""),
    ]
    return ", ".join(parts)


def calls_line(
    plan: list[Mapping[str, Any]], usage: list[Mapping[str, Any]], saved: int | None = None
) -> str:
    """The plan's calls and the run's in one line (see the module docstring).

    Args:
        plan: the plan's rows (`role`, `model`, `calls`, `tokens_by`), as `results.json` holds them.
        usage: the run's usage rows (`role`, `model`, `calls`, `cached_calls`, `failed_calls`).
        saved: the calls the sequential driver's early stop saved, None for a fixed-n run.
    """
    offline = _offline_models(plan)
    planned, made = _sum(plan, "calls"), _sum(usage, "calls")
    planned_off = _sum(_rows(plan, offline, of_offline=True), "calls")
    made_off = _sum(_rows(usage, offline, of_offline=True), "calls")
    models = _rows(usage, offline, of_offline=False)
    cached, failed = _sum(models, "cached_calls"), _sum(models, "failed_calls")
    sent = made - made_off - cached
    how = _made_parts(made_off, cached, sent, failed, offline=bool(planned_off or made_off))
    head = f"calls: {made} made of {planned} planned ({how})"
    gaps = _gaps(
        planned - planned_off - (made - made_off),
        planned_off - made_off,
        saved,
        failed,
        models_planned=planned > planned_off,
    )
    return head + ("; " + "; ".join(gaps) if gaps else "")


OFFLINE_GAP = "an offline algorithm computes equal inputs once (the plan's count is an upper bound)"
FAILED_GAP = "an answer whose call failed is not judged"
MODEL_GAP = "questions screened out, a judge stopped at its pilot, or stages not run"
MORE = "more than planned (re-asks of unscored judgments, calls the plan does not count)"


def _gaps(
    model_gap: int, offline_gap: int, saved: int | None, failed: int, *, models_planned: bool
) -> list[str]:
    """What became of the planned calls not made (and the calls made beyond the plan), each with
    its count; the early stop first, as it is the one the user chose. With an early stop the rest
    is not split between offline and model calls, so every cause that may apply is named."""
    if saved:
        # the driver counts its saving with the plan, offline and model calls together, so the
        # rest of the gap is not split between them
        rest = model_gap + offline_gap - saved
        short, more, split = max(rest, 0), max(-rest, 0), ""
        out = [f"{saved} not made: saved by the early stop"]
        label = "more not made"
    else:
        short = max(model_gap, 0) + max(offline_gap, 0)
        more = -min(model_gap, 0) - min(offline_gap, 0)
        split = (
            f" ({offline_gap} offline, {model_gap} to models)"
            if offline_gap > 0 and model_gap > 0
            else ""
        )
        out, label = [], "not made"
    if short:
        causes = (
            [OFFLINE_GAP] * (offline_gap > 0)
            + [FAILED_GAP] * bool(failed)
            + [MODEL_GAP] * (model_gap > 0 or (bool(saved) and models_planned))
        )
        out.append(f"{short} {label}{split}: " + ", ".join(causes))
    if more:
        out.append(f"{more} {MORE}")
    return out


def read_calls_line(results: Path, manifest: Path) -> str:
    """`calls_line` of a run folder: the plan and the early stop from `results.json`, the usage
    from `manifest.json` ('' when either is missing or the plan could not be made)."""
    from cube.run.record import read_record

    try:
        recorded = read_record(results)
        usage = json.loads(manifest.read_text(encoding="utf-8")).get("usage")
    except (OSError, ValueError):  # RecordError is a ValueError
        return ""
    plan = recorded.plan.plan
    if not isinstance(plan, list) or not isinstance(usage, list):
        return ""
    sequential = recorded.sequential.sequential
    saved = (sequential.calls or {}).get("saved") if sequential is not None else None
    return calls_line(plan, usage, _int(saved) if saved is not None else None)
