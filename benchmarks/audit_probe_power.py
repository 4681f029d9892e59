"""How often the judge audit alone calls each simulated judge content-blind (issue 20, open point
4).

The audit's verdict (`cube.method.audit.audit_verdict` on `audit_summary`, level 0.05, at least 10
pairs) on the simulated probe scores of tests/judge_sim.py, under two models of how a decent judge
scores a worse probe: `zero bound` (the earlier assumption: every worse probe scored like the
judge's zero-set bound on every dimension) and `realistic` (a corrupted fact costs a quarter to
three quarters of the judge's full - zero separation on relevance and completeness only; the
sibling's answer half to all of it on relevance, specificity and completeness; another question's
answer the whole of it). Shares of seeded runs at 10 / 20 / 40 audit questions; a share's Monte
Carlo SE is at most 0.5 / sqrt(runs). The last line is `qwen_audit_excluded_40q_realistic: <share>`.

    PYTHONPATH=. python benchmarks/audit_probe_power.py [--runs 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import pandas as pd  # noqa: E402
from judge_sim import BLIND, DECENT, simulate_probes  # noqa: E402

from cube.method.audit import audit_summary, audit_verdict  # noqa: E402

JUDGES = (*DECENT, *BLIND)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--questions", default="10,20,40")
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows = []
    for n in (int(x) for x in args.questions.split(",")):
        for model, at_zero in (("zero bound", True), ("realistic", False)):
            for seed in range(args.runs):
                summary = audit_summary(
                    simulate_probes(n, seed, JUDGES, worse_at_zero=at_zero)
                ).set_index("judge")
                for j in JUDGES:
                    blind, _ = audit_verdict(summary.loc[j], 0.05, 10)
                    rows.append(
                        {"judge": j, "questions": n, "model": model, "excluded": bool(blind)}
                    )
    out = pd.DataFrame(rows).pivot_table(
        index="judge", columns=["model", "questions"], values="excluded", sort=False
    )
    print(
        f"audit calls the judge content-blind (% of {args.runs} seeded runs; MC SE <= "
        f"{50 / args.runs**0.5:.1f} points):"
    )
    print(out.reindex(list(JUDGES)).map(lambda v: f"{100 * v:.1f}").to_string())
    print(f"seconds: {time.perf_counter() - t0:.0f}")
    last = out.get(("realistic", 40))
    print(
        f"qwen_audit_excluded_40q_realistic: "
        f"{float(last['qwen2.5-32b']) if last is not None else float('nan'):.3f}"
    )


if __name__ == "__main__":
    main()
