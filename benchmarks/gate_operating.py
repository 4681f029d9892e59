"""Operating characteristics of the judge validity gate (issue 20): how often it excludes each
simulated judge, and how often the verdict is withheld.

Judges (tests/judge_sim.py): the paper's four judges built from Table 2's bounds (noise SD 1.0,
integer scores, rag 80 % of the way to full when the gold document is retrieved, ranks spread over
1-8) and six content-blind ones (random; set-aware constant full = 10 / zero = 0 / rag = 7;
length-only; question-only; form-only: 8 when the text ends a sentence, else 6, plus noise;
position-only: the first sentence's length; issue 30), at 20 / 40 / 100 / 300 questions and R@k 0.5
/ 0.8 / 0.95 / 1.0. The audit's probes are simulated on min(40, n) questions (a corrupted fact costs
a decent judge a quarter to three quarters of its full - zero separation on relevance and
completeness, with its noise; tests/judge_sim.py). Each seeded run is evaluated once, with the
default analysis params (`weights: rank_correlation`, bootstrap off) and the audit's probe scores;
"tables only" is the same decision without the audit's verdict (as `evaluate` on tables alone
decides).

Printed per cell (share of runs, %): excluded (with the audit, the goals' figure; and on the tables
only), kept with a cause to withhold the verdict that is not the judge's (`gate_withhold`: a run too
small for the bounds test, or W undefined or outside the band because of the rank-correlation
weights), and the verdict withheld for the whole panel of ten judges
(`cube.diagnose.verdict.withheld_reasons`). The Monte Carlo standard error of a share p over R
runs is sqrt(p (1 - p) / R), at most 0.5 / sqrt(R) (0.079 at 40 runs); a goal cell's SE is
printed from its own p with the Agresti-Coull estimate (never 0), and the cells that miss their
goal are listed.

Goals: a decent judge excluded in <= 5 % of runs from 40 questions up at every R@k (Qwen-like
from 100 questions); every content-blind judge excluded in >= 95 % of runs from 40 questions up.
About 2-4 s of CPU per run of the 8 judges: 16 cells x 40 runs take 20-40 min on 2 cores.
The last line is `gate_goals_met: <share of goal cells met>`.

    PYTHONPATH=. python benchmarks/gate_operating.py [--runs 40] [--sizes 20,40,100,300]
        [--recalls 0.5,0.8,0.95,1.0] [--probe-form sentence|cut]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from judge_sim import BLIND, DECENT, simulate, simulate_probes  # noqa: E402

from cube.config.sections import AnalysisParams  # noqa: E402
from cube.diagnose.verdict import withheld_reasons  # noqa: E402
from cube.method.audit import audit_summary, audit_verdict  # noqa: E402
from cube.method.evaluation import evaluate  # noqa: E402

JUDGES = (*DECENT, *BLIND)
PROBE_FORM = ["sentence"]  # `--probe-form cut`: the probes before issue 30 (cut mid-sentence)
MEASURES = ("with_audit", "tables_only", "kept_withheld", "panel_withheld")


def one_run(
    n: int, r: float, seed: int, audit_questions: int, ap: AnalysisParams
) -> dict[str, np.ndarray | bool]:
    answers, scores = simulate(n, r, seed=100_000 * n + 1000 * int(100 * r) + seed, judges=JUDGES)
    probes = simulate_probes(
        min(audit_questions, n), seed=seed, judges=JUDGES, probe_form=PROBE_FORM[0]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluate(answers, scores, ap, audit=probes)
    t = result.cube_table.reindex(list(JUDGES))
    summary = audit_summary(probes, ap.confidence).set_index("judge")
    without_audit = []  # the tables-only decision: the same reasons less the audit's own sentence
    for j in JUDGES:
        blind, said = audit_verdict(
            summary.loc[j] if j in summary.index else None, ap.gate_alpha, 10
        )
        reason = str(t.at[j, "excluded_reason"])
        without_audit.append(reason.replace(said, "").strip("; ") if blind else reason)
    kept = t["in_jury"].astype(bool).to_numpy()
    return {
        "with_audit": ~kept,
        "tables_only": np.array([bool(x) for x in without_audit]),
        "kept_withheld": kept & t["gate_withhold"].astype(str).str.len().gt(0).to_numpy(),
        "panel_withheld": bool(withheld_reasons(result, SimpleNamespace(analysis=ap))[0]),
    }


def cell(spec: tuple[int, float, int, int, str]) -> list[dict]:
    """Shares of runs per judge in one (questions, R@k) cell over `runs` seeded runs."""
    n, r, runs, audit_questions, PROBE_FORM[0] = spec
    ap = AnalysisParams(bootstrap=0)
    acc = {m: np.zeros(len(JUDGES)) for m in MEASURES}
    for seed in range(runs):
        out = one_run(n, r, seed, audit_questions, ap)
        for m in MEASURES:
            acc[m] += np.asarray(out[m], float)
    return [
        {
            "judge": judge,
            "questions": n,
            "recall": r,
            "runs": runs,
            **{m: acc[m][j] / runs for m in MEASURES},
        }
        for j, judge in enumerate(JUDGES)
    ]


def agresti_coull_se(p: float, runs: int) -> float:
    """Monte Carlo SE of a share of runs, Agresti-Coull (never 0 at a share of 0 or 1)."""
    k, n = p * runs + 2, runs + 4
    return float(np.sqrt(k / n * (1 - k / n) / n))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=40,
        help="seeded runs per cell (Monte Carlo SE <= 0.5/sqrt(runs))",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="worker processes (one cell of the grid at a time each)"
    )
    parser.add_argument("--sizes", default="20,40,100,300")
    parser.add_argument("--recalls", default="0.5,0.8,0.95,1.0")
    parser.add_argument("--audit-questions", type=int, default=40)
    parser.add_argument(
        "--probe-form", default="sentence", choices=["sentence", "cut"], help="how probes end"
    )
    parser.add_argument(
        "--csv", default="", help="append each finished cell's rows here (a partial grid survives)"
    )
    parser.add_argument(
        "--report", default="", help="only print the tables of a CSV written by --csv"
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.report:
        out = pd.read_csv(args.report)
        report(out, int(out["runs"].min()), time.perf_counter() - t0)
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    recalls = [float(x) for x in args.recalls.split(",")]
    cells = [
        (n, r, args.runs, args.audit_questions, args.probe_form) for n in sizes for r in recalls
    ]
    # goal cells first, the hard ones (few misses) before the others, the 20-question cells last
    cells.sort(key=lambda c: (c[0] < 40, -c[1], c[0]))
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for future in as_completed([pool.submit(cell, c) for c in cells]):
            part = future.result()
            rows += part
            if args.csv:
                pd.DataFrame(part).to_csv(
                    args.csv, mode="a", header=not Path(args.csv).exists(), index=False
                )
    report(pd.DataFrame(rows), args.runs, time.perf_counter() - t0)


def report(out: pd.DataFrame, runs: int, seconds: float) -> None:
    """The tables, the goal cells that miss, and the headline line."""
    args = SimpleNamespace(runs=runs)
    pd.set_option("display.width", 220)
    titles = {
        "with_audit": "excluded, with the audit",
        "tables_only": "excluded, tables only (no audit)",
        "kept_withheld": "kept, with a cause to withhold the verdict that is not the judge's",
    }
    for col, title in titles.items():
        print(
            f"\n{title} (% of {args.runs} runs per cell; MC SE "
            f"<= {50 / np.sqrt(args.runs):.1f} points):"
        )
        wide = out.pivot_table(
            index="judge", columns=["questions", "recall"], values=col, sort=True
        )
        print(wide.reindex(list(JUDGES)).map(lambda v: f"{100 * v:.0f}").to_string())
    panel = out.drop_duplicates(["questions", "recall"]).pivot_table(
        index="questions", columns="recall", values="panel_withheld"
    )
    print(f"\nverdict withheld for the panel of ten judges (% of {args.runs} runs):")
    print(panel.map(lambda v: f"{100 * v:.0f}").to_string())
    decent = (
        out["judge"].isin(list(DECENT))
        & (out["questions"] >= 40)
        & ((out["judge"] != "qwen2.5-32b") | (out["questions"] >= 100))
    )
    blind = out["judge"].isin(list(BLIND)) & (out["questions"] >= 40)
    goal = pd.concat(
        [
            out[decent].assign(goal="<= 5 %", met=out.loc[decent, "with_audit"] <= 0.05),
            out[blind].assign(goal=">= 95 %", met=out.loc[blind, "with_audit"] >= 0.95),
        ]
    )
    goal["se"] = [
        agresti_coull_se(p, r) for p, r in zip(goal["with_audit"], goal["runs"], strict=True)
    ]
    print(
        f"\ngoal cells: {len(goal)}; largest Monte Carlo SE (Agresti-Coull) {goal['se'].max():.3f}"
    )
    miss = goal[~goal["met"]]
    for _, m in miss.iterrows():
        print(
            f"  misses: {m['judge']} at {m['questions']} "
            f"questions, R@k {m['recall']:g}: excluded in "
            f"{100 * m['with_audit']:.0f} % (goal {m['goal']}, SE {m['se']:.3f})"
        )
    print(
        f"decent judges, worst goal cell: {out.loc[decent, 'with_audit'].max():.3f} (goal <= 0.05)"
    )
    print(
        f"content-blind judges, worst goal cell: "
        f"{out.loc[blind, 'with_audit'].min():.3f} (goal >= 0.95)"
    )
    print(f"seconds: {seconds:.0f}")
    print(f"gate_goals_met: {goal['met'].mean():.3f}")


if __name__ == "__main__":
    main()
