"""The TOP-N hypothesis, tested on a `top_n_sweep` (one retriever at several TOP-N in one run).

The CuBE paper's hypothesis: a larger TOP-N raises recall without hurting the answers. On a
sweep (the systems sharing `sweep_of`, `cube.config.params.expand_sweeps`), every member is
evaluated like any system (`cube.method.analysis.evaluate`), so each TOP-N has its R@N (Wilson
interval), W and CuBE (bootstrap intervals). The reading, from the smallest to the largest TOP-N:

- recall rises: R@N at the largest TOP-N is above R@N at the smallest, beyond the smallest's
  Wilson interval;
- answers not hurt: W at every larger TOP-N is at least the lower end of W's interval at the
  smallest TOP-N (a W below it is a measurable loss);
- `holds` when both; `does not hold` naming which part fails; `undetermined` when a figure
  is NaN (W undefined, no interval) — never a guess.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cube.diagnose.retrieval import wilson


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def sweeps(params: Any) -> dict[str, list[tuple[str, int]]]:
    """sweep name -> [(system name, TOP-N)] in ascending TOP-N, for every sweep of the params."""
    out: dict[str, list[tuple[str, int]]] = {}
    for s in params.systems:
        if getattr(s, "sweep_of", None):
            out.setdefault(s.sweep_of, []).append((s.name, s.top_n))
    return {k: sorted(v, key=lambda t: t[1]) for k, v in out.items()}


def sweep_table(
    results: dict[str, Any], members: list[tuple[str, int]], confidence: float = 0.95
) -> pd.DataFrame:
    """One row per TOP-N: `system, top_n, questions, R@N (+ _lo/_hi), W, W_lo, W_hi, CuBE,
    CuBE_lo, CuBE_hi`."""
    rows = []
    for name, n in members:
        if name not in results:
            continue
        r = results[name]
        hits = int(r.ranks["retrieved"].sum())
        d = r.design if getattr(r, "design", None) and r.design.get("unit") == "family" else {}
        units = d.get("units") if d and d.get("units", 0) < r.n_questions else None
        # families of near-duplicates (issue 30): Kish's design effect and t at the families
        lo, hi = wilson(hits, r.n_questions, confidence, d.get("deff_retrieval", 1.0), units)
        w_lo, w_hi = r.interval("jury", "weighted_score")
        c_lo, c_hi = r.interval("jury", "cube_score")
        rows.append(
            {
                "system": name,
                "top_n": n,
                "questions": r.n_questions,
                "R@N": r.recall_at_k,
                "R@N_lo": lo,
                "R@N_hi": hi,
                "W": float(r.jury.at["mean", "weighted_score"]),
                "W_lo": w_lo,
                "W_hi": w_hi,
                "CuBE": r.jury_cube(),
                "CuBE_lo": c_lo,
                "CuBE_hi": c_hi,
            }
        )
    return pd.DataFrame(rows)


def hypothesis(table: pd.DataFrame) -> dict[str, Any]:
    """`{"verdict": holds | does not hold | undetermined, "sentence",
    "recall_rises", "answers_kept"}`."""
    if len(table) < 2:
        return {
            "verdict": "undetermined",
            "recall_rises": None,
            "answers_kept": None,
            "sentence": "The TOP-N hypothesis needs a sweep of at least two TOP-N values "
            "(systems[].top_n_sweep).",
        }
    t = table.sort_values("top_n")
    first, last = t.iloc[0], t.iloc[-1]
    span = f"from TOP-N {int(first.top_n)} to {int(last.top_n)}"
    figures = (
        f"R@N {first['R@N']:.1%} → {last['R@N']:.1%}, W {first.W:.1f} → {last.W:.1f}, "
        f"CuBE {first.CuBE:.1f} → {last.CuBE:.1f}"
    )
    needed = [first["R@N"], last["R@N"], first["R@N_hi"], first.W_lo, *t.W]
    if not all(_finite(v) for v in needed):
        return {
            "verdict": "undetermined",
            "recall_rises": None,
            "answers_kept": None,
            "sentence": f"TOP-N hypothesis undetermined on this data ({span}: {figures}): W or an "
            "interval is undefined (see the flags), so whether answers are hurt cannot be read.",
        }
    rises = bool(last["R@N"] > first["R@N_hi"])
    hurt = t[t.W < first.W_lo]
    kept = hurt.empty
    if rises and kept:
        verdict, why = (
            "holds",
            "recall rises beyond its interval and W stays within or above the smallest TOP-N's",
        )
    else:
        parts = [] if rises else ["recall does not rise beyond the smallest TOP-N's interval"]
        if not kept:
            parts.append(
                f"W falls below the smallest TOP-N's interval ({first.W_lo:.1f}) at TOP-N "
                + ", ".join(str(int(n)) for n in hurt.top_n)
            )
        verdict, why = "does not hold", "; ".join(parts)
    return {
        "verdict": verdict,
        "recall_rises": rises,
        "answers_kept": kept,
        "sentence": "TOP-N hypothesis (a larger TOP-N raises recall without hurting answers) "
        f"{verdict} on this data {span}: {figures}; {why}.",
    }


def for_results(table: pd.DataFrame, reading: dict[str, Any]) -> dict[str, Any]:
    rows = table.replace({np.nan: None}).to_dict("records")
    return {**reading, "table": rows}
