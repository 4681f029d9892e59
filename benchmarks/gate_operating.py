"""Operating characteristics of the judge validity gate (issue 20): how often it excludes each simulated judge.

Judges (tests/judge_sim.py): the paper's four judges built from Table 2's bounds (noise SD 1.0,
integer scores, rag 80 % of the way to full when the gold document is retrieved, ranks spread over
1-8) and four content-blind ones (random; set-aware constant full = 10 / zero = 0 / rag = 7;
length-only; question-only), at 20 / 40 / 100 / 300 questions and R@k 0.5 / 0.8 / 0.95 / 1.0.
Each run is evaluated twice with the default analysis params (bootstrap off): on the tables alone
(`evaluate` as a notebook without the audit calls it) and with the audit's probe scores of
min(40, n) questions (`audit=`, when the gate reads an audit). A cell is the share of seeded runs
in which the judge is excluded; its Monte Carlo standard error is sqrt(p (1 - p) / runs), at most
0.5 / sqrt(runs) (0.16 with the default 10 runs; `--runs 100` for 0.05; a cell at 0 or 100 % of
10 runs still allows a true rate up to 26 %, the exact one-sided 95 % bound). About 1 s of CPU
per evaluation of the 8 judges: the default (16 cells x 10 runs x 2 evaluations) takes about
3 minutes on 2 cores (`--jobs 2`).

Goals: a decent judge excluded in <= 5 % of runs from 40 questions up at every R@k (Qwen-like
from 100 questions); every content-blind judge excluded in >= 95 % of runs from 40 questions up.
The last line is `gate_goals_met: <share of goal cells met>` (with the audit when available).

    PYTHONPATH=. python benchmarks/gate_operating.py [--runs 20] [--sizes 20,40,100,300] [--recalls 0.5,0.8,0.95,1.0]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from judge_sim import BLIND, DECENT, simulate, simulate_probes  # noqa: E402

from cube.config.sections import AnalysisParams  # noqa: E402
from cube.method.evaluation import evaluate  # noqa: E402


def excluded(answers: pd.DataFrame, scores: pd.DataFrame, ap: AnalysisParams,
             probes: pd.DataFrame | None) -> tuple[pd.Series, pd.Series]:
    """(excluded, excluded only because W is undefined) per judge."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {"audit": probes} if probes is not None else {}
        t = evaluate(answers, scores, ap, **kw).cube_table
    out = ~t["in_jury"].astype(bool)
    return out, out & t["excluded_reason"].astype(str).str.startswith("W undefined")


def cell(spec: tuple[int, float, int, int, str, bool]) -> list[dict]:
    """Exclusion shares of every judge in one (questions, R@k) cell over `runs` seeded runs."""
    n, r, runs, audit_questions, weights, with_audit = spec
    ap = AnalysisParams(bootstrap=0, weights=weights)
    judges = (*DECENT, *BLIND)
    tab, aud, undef = np.zeros(len(judges)), np.zeros(len(judges)), np.zeros(len(judges))
    for seed in range(runs):
        answers, scores = simulate(n, r, seed=100_000 * n + 1000 * int(100 * r) + seed, judges=judges)
        ex, w_undef = excluded(answers, scores, ap, None)
        tab += ex.reindex(judges).to_numpy(float)
        undef += w_undef.reindex(judges).to_numpy(float)
        if with_audit:
            probes = simulate_probes(min(audit_questions, n), seed=seed, judges=judges)
            aud += excluded(answers, scores, ap, probes)[0].reindex(judges).to_numpy(float)
    return [{"judge": judge, "questions": n, "recall": r, "tables_only": tab[j] / runs,
             "with_audit": aud[j] / runs if with_audit else np.nan, "w_undefined_only": undef[j] / runs}
            for j, judge in enumerate(judges)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="seeded runs per cell (Monte Carlo SE <= 0.5/sqrt(runs))")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one cell of the grid at a time each)")
    parser.add_argument("--sizes", default="20,40,100,300")
    parser.add_argument("--recalls", default="0.5,0.8,0.95,1.0")
    parser.add_argument("--audit-questions", type=int, default=40)
    parser.add_argument("--weights", default="rank_correlation", choices=["rank_correlation", "equal"])
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    recalls = [float(x) for x in args.recalls.split(",")]
    with_audit = "audit" in inspect.signature(evaluate).parameters
    judges = (*DECENT, *BLIND)
    t0 = time.perf_counter()
    cells = [(n, r, args.runs, args.audit_questions, args.weights, with_audit) for n in sizes for r in recalls]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        out = pd.DataFrame([row for rows in pool.map(cell, cells) for row in rows])
    pd.set_option("display.width", 200)
    for col in ("tables_only", "with_audit", "w_undefined_only") if with_audit else ("tables_only", "w_undefined_only"):
        print(f"\nexclusion rate (%), {col.replace('_', ' ')}, weights {args.weights} ({args.runs} runs per cell; MC SE <= "
              f"{0.5 / np.sqrt(args.runs):.2f}):")
        wide = out.pivot_table(index="judge", columns=["questions", "recall"], values=col, sort=False)
        print(wide.reindex(list(judges)).map(lambda v: f"{100 * v:.0f}").to_string())
    col = "with_audit" if with_audit else "tables_only"
    decent = out["judge"].isin(list(DECENT)) & (out["questions"] >= 40) & \
        ((out["judge"] != "qwen2.5-32b") | (out["questions"] >= 100))
    blind = out["judge"].isin(list(BLIND)) & (out["questions"] >= 40)
    ok = pd.concat([out.loc[decent, col] <= 0.05, out.loc[blind, col] >= 0.95])
    print(f"\ndecent judges, worst cell in the goal range: {out.loc[decent, col].max():.2f} (goal <= 0.05)")
    print(f"content-blind judges, worst cell in the goal range: {out.loc[blind, col].min():.2f} (goal >= 0.95)")
    print(f"seconds: {time.perf_counter() - t0:.0f}")
    print(f"gate_goals_met: {ok.mean():.3f}")


if __name__ == "__main__":
    main()
