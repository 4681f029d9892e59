"""Token, call and cost accounting: every table row produced by a model call carries its own.

A run's usage is a sum over its tables (questions, answers, scores), split by role, the
"generation cost vs evaluation cost" of the RAG-evaluation README in shared/reference. Rows
that share a `call_id` came from one call (a bound set reused by several systems, or one
all-dimensions judge call filling several rows) and are counted once.

The convention for rows that came from NO model call (template or file questions, imported
answers, human ratings, a judgment skipped because its answer is missing): `call_id` "",
no tokens and cost 0.0 (`no_call_accounting`). They are not calls: `usage_summary` counts them
as `skipped`, never as calls, failed calls or unknown costs. A real call whose price is
unknown (a RAGFlow answer: RAGFlow reports no tokens) has a unique `call_id` and cost NaN.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from cube.config.schema import ACCOUNTING_COLUMNS, ROLES

# What `usage_summary` reads of a table: the call accounting, whether the call failed (`error_kind`,
# else `error`), the retries folded into a row (`detail`) and cut replies (`finish_reason`). Readers
# of large tables (the decision, the manifest) load only these.
USAGE_COLUMNS = (*ACCOUNTING_COLUMNS, "error", "error_kind", "detail", "finish_reason")

if TYPE_CHECKING:
    from cube.llm.calls import Response


class Accounting(TypedDict):
    """The `ACCOUNTING_COLUMNS` of one table row, in their order: what the call that produced it
    cost (`response_accounting`), or nothing when no call did (`no_call_accounting`)."""

    model: str
    role: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost: float
    latency_s: float
    queue_s: float
    cached: bool
    call_id: str


SUMMARY_COLUMNS: tuple[str, ...] = (
    "role",
    "model",
    "calls",
    "cached_calls",
    "failed_calls",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cached_input_share",
    "cost_this_run",
    "cost_total",
    "skipped",
    "truncated",
    "latency_s_median",
    "queue_s_median",
)
# absent from tables written before they existed: NaN (queue_s), 0 (cached_input_tokens)
OPTIONAL_ACCOUNTING = ("queue_s", "cached_input_tokens")


def response_accounting(resp: Response, role: str) -> Accounting:
    """The `ACCOUNTING_COLUMNS` of a table row produced by `resp` in `role`."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {list(ROLES)}")
    return {
        "model": resp.model,
        "role": role,
        "input_tokens": int(resp.input_tokens),
        "output_tokens": int(resp.output_tokens),
        # at most the call's input tokens: a llama-server build whose `prompt_tokens` counts the
        # processed tokens alone reports its `timings.cache_n` beside them, not among them (the
        # price is clipped likewise, `cube.llm.endpoints.call_cost`); the share stays <= 100 %
        "cached_input_tokens": min(int(resp.cached_input_tokens), int(resp.input_tokens)),
        "cost": float("nan") if resp.cost is None else float(resp.cost),
        "latency_s": float(resp.latency_s),
        "queue_s": float(resp.queue_s),
        "cached": bool(resp.cached),
        "call_id": resp.call_id,
    }


def no_call_accounting(model: str, role: str, *, latency_s: float = 0.0) -> Accounting:
    """The `ACCOUNTING_COLUMNS` of a row that no model call produced: call_id "", no tokens, cost
    0.0.

    Args:
        model: what produced the row (e.g. "template", "human", the imported file's answerer).
        role: one of `ROLES`.
        latency_s: NaN when the time is unknown rather than nil (a human rating).
    """
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {list(ROLES)}")
    return {
        "model": model,
        "role": role,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cost": 0.0,
        "latency_s": float(latency_s),
        "queue_s": 0.0,
        "cached": False,
        "call_id": "",
    }


def failed_calls(df: pd.DataFrame) -> pd.Series:
    """Rows whose call failed: `error_kind` 'call' where that column exists, else a non-empty
    `error`."""
    if "error_kind" in df.columns:
        return df["error_kind"].fillna("").astype(str).eq("call")
    if "error" not in df.columns:
        return pd.Series(False, index=df.index)
    err = df["error"].astype(object)
    return err.notna() & (err.astype(str).str.strip() != "")


def _mentioning(texts: pd.Series, word: str) -> list[int]:
    """Positions of the texts that contain `word`, found column-wise (not a Python string made
    per cell: ~300k judgments at the paper's scale); a cell that is no text never does."""
    try:
        hits = texts.str.contains(word, regex=False, na=False)
    except AttributeError:  # a column without any text (all missing, numbers)
        return []
    return hits.to_numpy(dtype=bool).nonzero()[0].tolist()


def _folded_calls(df: pd.DataFrame) -> tuple[list[int], list[int]]:
    """Per row: how many calls its accounting adds up, and how many of the extra ones failed.
    1 and 0, except a judge row whose unparsed reply was asked again (`retry_unscored`): its
    `detail` JSON holds "calls" and "failed_calls" (`cube.judges.scoring._reask_unscored`)."""
    import json

    calls, failed = [1] * len(df), [0] * len(df)
    if "detail" in df.columns:
        detail = df["detail"]
        for n in _mentioning(detail, '"calls"'):
            text = detail.iloc[n]
            if isinstance(text, str):
                try:
                    d = json.loads(text)
                    calls[n], failed[n] = int(d.get("calls", 1)), int(d.get("failed_calls", 0))
                except (ValueError, TypeError, AttributeError):
                    pass
    return calls, failed


def _accounting_rows(df: pd.DataFrame) -> pd.DataFrame:
    """A table's accounting columns in the dtypes `usage_summary` sums (text, bool, int64,
    float64), with whether each row's call failed, how many calls it folds in and whether it was
    cut. Converted table by table, before the tables are put together: every column then keeps a
    compact dtype (a Python object per cell of a paper-scale scores table took ~200 MB).

    Column-wise, not a Python call per row (~300k rows at the paper's scale): a missing text is ""
    (cached: False), any other its text (cached: its truth); unreadable numbers are NaN (tokens
    0)."""
    n = len(df)
    part = pd.DataFrame(index=pd.RangeIndex(n))
    for c in ACCOUNTING_COLUMNS:
        col = (
            df[c].reset_index(drop=True)
            if c in df.columns
            else pd.Series(float("nan"), index=part.index)
        )
        if c in ("role", "model", "call_id"):
            col = col.astype(str).where(col.notna(), "")
        elif c == "cached":
            col = col.where(col.notna(), False).astype(bool)
        elif c in ("input_tokens", "output_tokens", "cached_input_tokens"):
            col = pd.to_numeric(col, errors="coerce").fillna(0).astype("int64")
        else:  # cost, latency_s, queue_s
            col = pd.to_numeric(col, errors="coerce").astype("float64")
        part[c] = col
    part["call_id"] = part["call_id"].str.strip()
    part["failed"] = failed_calls(df).to_numpy(dtype=bool)
    part["n_calls"], part["n_failed"] = _folded_calls(df)
    finish = df["finish_reason"] if "finish_reason" in df.columns else pd.Series("", index=df.index)
    part["truncated"] = finish.fillna("").astype(str).eq("length").to_numpy(dtype=bool)
    return part


def usage_summary(tables: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Calls, tokens and cost per (role, model) over every row that carries accounting columns.

    A call is a distinct non-empty `call_id` (rows sharing one are one call: a bound set
    replicated to several systems, an all-dimensions judge call filling one row per dimension).
    Rows with an empty `call_id` came from no call and are only counted in `skipped`; their
    tokens and costs are ignored. Columns (`SUMMARY_COLUMNS`):

    - `calls`, `cached_calls` (every row of the call was served from the cache); a judge row
      asked again (`retry_unscored`) adds up several calls: its `detail` says how many;
      `failed_calls` (any row of the call has `error_kind` 'call' where that column exists, else
      a non-empty `error`; a judge reply that could not be parsed was still a successful call);
    - `input_tokens`, `output_tokens`: summed once per call; `cached_input_tokens`: of the input
      tokens, those the provider reported as served from its prompt cache (0 when not reported:
      `cube.llm.wire.cached_prompt_tokens` reads each provider's shape); `cached_input_share`:
      their share of the input tokens (NaN when there is no input token), a lower bound where
      the server reports no count (llama-cpp-python's);
    - `cost_this_run` sums the calls not served from the cache (what this run spent),
      `cost_total` all calls (cached ones at their original price); NaN (unknown) when any
      call of that (role, model) has no price, 0.0 when there is no call;
    - `skipped`: rows that came from no call (template/file questions, imported answers,
      human ratings, judgments skipped because the answer was missing);
    - `truncated`: calls with `finish_reason` 'length' (cut at max_tokens), counted in tables
      that have a `finish_reason` column (0 elsewhere);
    - `latency_s_median`: median time a call of this run held a concurrency slot (its requests),
      `queue_s_median`: median time it waited for one (NaN when no call was sent this run, or
      for `queue_s` in tables written before that column existed).

    Tables without accounting columns are skipped.
    """
    from cube.config.schema import require_columns

    parts = []
    for n, df in enumerate(tables):
        if not any(c in df.columns for c in ACCOUNTING_COLUMNS):
            continue
        require_columns(
            df,
            [c for c in ACCOUNTING_COLUMNS if c not in OPTIONAL_ACCOUNTING],
            f"usage_summary: table #{n}",
        )
        parts.append(_accounting_rows(df))
    if not parts:
        return pd.DataFrame({c: [] for c in SUMMARY_COLUMNS})
    rows = pd.concat(parts, ignore_index=True)
    del parts  # each table's rows, no longer needed once put together

    is_call = rows["call_id"] != ""
    no_call = rows[~is_call].assign(_call=False)
    calls = rows[is_call].copy()
    del rows  # freed before the calls are grouped (a paper-scale run has ~300k rows)
    by_call = calls.groupby("call_id", sort=False)
    # A call paid in this run shows as not cached on at least one of its rows.
    calls["cached"] = by_call["cached"].transform("all")
    calls["failed"] = by_call["failed"].transform("any")
    calls["truncated"] = by_call["truncated"].transform("any")
    calls = calls.drop_duplicates("call_id").assign(_call=True)
    every = pd.concat([calls, no_call], ignore_index=True)

    def known_sum(costs: pd.Series) -> float:
        return float(costs.sum()) if costs.notna().all() else float("nan")

    out = []
    for (role, model), g in every.groupby(["role", "model"], sort=False):
        c = g[g["_call"].astype(bool)]
        cached = c["cached"].astype(bool)
        out.append(
            {
                "role": role,
                "model": model,
                "calls": int(c["n_calls"].sum()),
                "cached_calls": int(c.loc[cached, "n_calls"].sum()),
                "failed_calls": int(c["failed"].astype(bool).sum() + c["n_failed"].sum()),
                "input_tokens": int(c["input_tokens"].sum()),
                "output_tokens": int(c["output_tokens"].sum()),
                "cached_input_tokens": int(c["cached_input_tokens"].sum()),
                "cached_input_share": _share(
                    c["cached_input_tokens"].sum(), c["input_tokens"].sum()
                ),
                "cost_this_run": known_sum(c.loc[~cached, "cost"]),
                "cost_total": known_sum(c["cost"]),
                "skipped": int(len(g) - len(c)),
                "truncated": int(c["truncated"].astype(bool).sum()),
                # of the requests this run sent (cached calls took no time now)
                "latency_s_median": float(c.loc[~cached, "latency_s"].median()),
                "queue_s_median": float(c.loc[~cached, "queue_s"].median()),
            }
        )
    order = {r: i for i, r in enumerate(ROLES)}
    summary = pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
    summary["_o"] = summary["role"].map(lambda r: order.get(r, len(order)))
    return (
        summary.sort_values(["_o", "model"], kind="stable")
        .drop(columns="_o")
        .reset_index(drop=True)
    )


def _share(part: float, whole: float) -> float:
    """part / whole, NaN when whole is not positive (no input token: no share to publish)."""
    return float(part) / float(whole) if whole > 0 else float("nan")


def prefix_share(prompts: Iterable[str]) -> float:
    """The share of the prompts' characters a prefix cache holding the last prompt could serve
    when the prompts are sent in text order (as `cube.judges.scoring` sends a judge's calls):
    per prompt, the longest common prefix with the one before it in sorted order, summed, over
    the prompts' total length. An estimate from the prompt layout, for `cube plan`: characters
    stand for tokens, and a provider's rules (OpenAI caches prefixes of 1024 tokens or more, in
    steps of 128; llama.cpp any length) make the served share lower. NaN for no prompt text."""
    ordered = sorted(str(p) for p in prompts)
    total = sum(map(len, ordered))
    if not total:
        return float("nan")
    shared = sum(_common_prefix(a, b) for a, b in zip(ordered, ordered[1:], strict=False))
    return shared / total


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of a and b, by bisection on slice equality (each
    comparison runs in C: a character loop in Python would cost seconds over a plan's prompts)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
