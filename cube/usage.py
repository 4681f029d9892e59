"""Token, call and cost accounting: every table row produced by a model call carries its own.

A run's usage is a sum over its tables (questions, answers, scores), split by role, the
"generation cost vs evaluation cost" of the RAG-evaluation README in shared/reference. Rows
that share a `call_id` came from one call (a bound set reused by several systems, or one
all-dimensions judge call filling several rows) and are counted once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from cube.schema import ACCOUNTING_COLUMNS, ROLES

if TYPE_CHECKING:
    from cube.llm import Response


def response_accounting(resp: Response, role: str) -> dict[str, Any]:
    """The `ACCOUNTING_COLUMNS` of a table row produced by `resp` in `role`."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {list(ROLES)}")
    return {
        "model": resp.model, "role": role, "input_tokens": int(resp.input_tokens),
        "output_tokens": int(resp.output_tokens), "cost": float("nan") if resp.cost is None else float(resp.cost),
        "latency_s": float(resp.latency_s), "cached": bool(resp.cached), "call_id": resp.call_id,
    }


def usage_summary(tables: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Calls, tokens and cost per (role, model) over every row that carries accounting columns.

    Rows sharing a non-empty `call_id` are one call and counted once. `cost_this_run` sums the
    calls not served from the cache (what this run spent); `cost_total` sums all calls (what
    the whole evaluation cost, cached calls at their original price). A cost is NaN (unknown)
    when any of its calls has no price. `failed_calls` counts calls that failed: rows whose
    `error_kind` is 'call' where that column exists (a judge reply that could not be parsed
    was still a successful call), else rows with a non-empty `error`. Tables without
    accounting columns are skipped.
    """
    from cube.schema import require_columns

    cols = ["role", "model", "calls", "cached_calls", "failed_calls", "input_tokens", "output_tokens",
            "cost_this_run", "cost_total"]
    parts = []
    for n, df in enumerate(tables):
        if not any(c in df.columns for c in ACCOUNTING_COLUMNS):
            continue
        require_columns(df, ACCOUNTING_COLUMNS, f"usage_summary: table #{n}")
        part = df[list(ACCOUNTING_COLUMNS)].copy()
        if "error_kind" in df.columns:
            part["failed"] = df["error_kind"].astype(str).eq("call").to_numpy()
        else:
            err = df["error"] if "error" in df.columns else pd.Series(None, index=df.index, dtype=object)
            part["failed"] = (err.notna() & (err.astype(object).astype(str).str.strip() != "")).to_numpy()
        parts.append(part)
    if not parts:
        return pd.DataFrame({c: [] for c in cols})
    rows = pd.concat(parts, ignore_index=True)
    ids = rows["call_id"].fillna("").astype(str)
    rows = rows[(ids == "") | ~ids.duplicated()]
    rows["cached"] = rows["cached"].astype(bool)
    rows["cost"] = pd.to_numeric(rows["cost"], errors="coerce")

    def known_sum(costs: pd.Series) -> float:
        return float(costs.sum()) if costs.notna().all() else float("nan")

    out = []
    for (role, model), g in rows.groupby(["role", "model"], sort=False):
        out.append({
            "role": role, "model": model, "calls": len(g), "cached_calls": int(g["cached"].sum()),
            "failed_calls": int(g["failed"].sum()), "input_tokens": int(g["input_tokens"].sum()),
            "output_tokens": int(g["output_tokens"].sum()), "cost_this_run": known_sum(g.loc[~g["cached"], "cost"]),
            "cost_total": known_sum(g["cost"]),
        })
    order = {r: i for i, r in enumerate(ROLES)}
    summary = pd.DataFrame(out, columns=cols)
    summary["_o"] = summary["role"].map(lambda r: order.get(r, len(order)))
    return summary.sort_values(["_o", "model"], kind="stable").drop(columns="_o").reset_index(drop=True)
