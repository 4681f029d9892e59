"""A realistic `results.json` `sequential` record, built as the driver builds it, without a driver.

Per system, seeded per-question scores on 0-100 (a beta around the system's true CuBE) are taken
batch by batch; after each batch the confidence sequence (`cube.method.sequential.sequence`) and
the fixed-n interval (`fixed_n_interval`) are read at the questions judged so far, and the run
stops at the first look where `decide` stops every system (or when the set ends). The per-judge
quantities and R@k are recorded beside the jury CuBE, as the driver's schema has them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cube.method.sequential import (
    Look,
    StopRule,
    decide,
    fixed_n_interval,
    sequence,
    thresholds_inside,
)

HOSTILE = "<img src=x onerror=alert(1)>"
THRESHOLDS = {"excellent": 80.0, "good": 60.0, "fair": 40.0}
CALLS_PER_QUESTION = 3 * 2 * 5 + 3  # three answers, two judges on five dimensions, + answering


def _scores(mean: float, n: int, seed: int) -> np.ndarray:
    """n per-question scores on 0-100 with the given mean and SD about 20 (a beta)."""
    m = mean / 100
    k = m * (1 - m) / 0.04 - 1  # beta with variance 0.04 (SD 20 points)
    return 100 * np.random.default_rng(seed).beta(m * k, (1 - m) * k, n)


def _look(system: str, quantity: str, n: int, seq: dict, fixed: dict) -> dict[str, Any]:
    i = n - 1
    return {
        "system": system,
        "quantity": quantity,
        "questions": n,
        "estimate": float(seq["estimate"][i]),
        "lower": float(seq["lower"][i]),
        "upper": float(seq["upper"][i]),
        "fixed_lower": float(fixed["lower"][i]),
        "fixed_upper": float(fixed["upper"][i]),
    }


def _at(seq: dict, n: int) -> Look:
    """The sequence's look after n questions."""
    return Look(n, *(float(seq[k][n - 1]) for k in ("estimate", "lower", "upper")))


FINAL_KEYS = ("estimate", "lower", "upper", "fixed_lower", "fixed_upper")


def build_record(
    means: dict[str, float] | None = None,
    available: int = 300,
    costs: bool = True,
    seed: int = 7,
) -> dict[str, Any]:
    """The record of a sequential run of systems with these true CuBE scores, as results.json holds
    it, stop rule `verdict`, batches of 20 from 40 questions on."""
    means = means or {"bm25": 71.0, HOSTILE: 25.0}
    rule = StopRule(stop="verdict", min_questions=40, batch=20, alpha=0.05)
    data = {s: _scores(m, available, seed + k) for k, (s, m) in enumerate(means.items())}
    recall = {  # a hit (100) or a miss (0) per question, 80 % hits
        s: (np.random.default_rng(seed + 50 + k).random(available) < 0.8) * 100.0
        for k, s in enumerate(means)
    }
    seqs = {s: sequence(x, rule) for s, x in data.items()}
    fixed = {s: fixed_n_interval(x, rule.alpha) for s, x in data.items()}
    path, used, stopped = [], available, False
    for n in range(rule.batch, available + 1, rule.batch):
        for s in means:
            judge = data[s] * 0.95 + 2  # a lenient judge's CuBE
            path += [
                _look(s, "CuBE", n, seqs[s], fixed[s]),
                _look(s, "CuBE · lenient", n, sequence(judge, rule), fixed_n_interval(judge, 0.05)),
                _look(s, "R@k", n, sequence(recall[s], rule), fixed_n_interval(recall[s], 0.05)),
            ]
        if all(decide(_at(seqs[s], n), rule, THRESHOLDS).stop for s in means):
            used, stopped = n, True
            break
    final = {
        s: {
            **{k: _look(s, "CuBE", used, seqs[s], fixed[s])[k] for k in FINAL_KEYS},
            "settled": decide(_at(seqs[s], used), rule, THRESHOLDS).stop,
        }
        for s in means
    }
    if stopped:
        reason = f"stopped at {used}: every system's interval lies inside one verdict band"
    else:
        unsettled = next(s for s in means if not final[s]["settled"])
        lo, hi = final[unsettled]["lower"], final[unsettled]["upper"]
        spans = ", ".join(f"{t:g}" for t in thresholds_inside(lo, hi, THRESHOLDS))
        reason = (
            f"question set ended at {used}: {unsettled}'s interval {lo:.1f}-{hi:.1f} spans {spans}"
        )
    calls = {
        "used": used * CALLS_PER_QUESTION,
        "full_set": available * CALLS_PER_QUESTION,
        "saved": (available - used) * CALLS_PER_QUESTION,
    }
    price = 0.0004  # USD per call
    cost = {k: (round(v * price, 4) if costs else None) for k, v in calls.items()}
    return {
        "stop": "verdict",
        "batch": rule.batch,
        "min_questions": rule.min_questions,
        "min_questions_why": "the gate needs 30 questions and the audit 20 pairs",
        "alpha": rule.alpha,
        "max_width": None,
        "seed": seed,
        "questions_available": available,
        "questions_used": used,
        "question_ids": [f"q{i:04d}" for i in range(used)],
        "stopped_early": stopped,
        "reason": reason,
        "thresholds": THRESHOLDS,
        "calls": calls,
        "cost_usd": cost if costs else {"used": None, "full_set": None, "saved": None},
        "path": path,
        "final": final,
    }
