"""What the judge audit costs, measured from a run's own records (issue 20: <= 15 % of the run's
judge calls).

Runs `cube run PARAMS --only 00..03` (corpus, questions, answers, judging and the audit) in a
subprocess with its outputs in a temporary folder, for params/default.yaml and for a small run (the
same params on a 40-item demo), then reads the calls per role that the run's manifest reports
(`usage`: role `audit` against role `judging`). A run written before the manifest counted the audit
is read from its tables instead (data/audit_scores and data/scores through `cube.llm.usage_summary`,
as the manifest counts them); the line says which. Also printed: the audit's questions and whether
`audit.max_share` capped them (results.json `audit_sample`, when recorded).

    .venv/bin/python benchmarks/audit_cost.py [--keep DIR] [--small-only]

The last line is the headline: `audit_share_of_judge_calls: <audit calls / judge calls>` of the
default run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def calls_by_role(run_dir: Path) -> tuple[dict[str, int], str]:
    """Calls per role of a run: the manifest's usage, else its tables (`usage_summary`)."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    usage = manifest.get("usage") or []
    roles: dict[str, int] = {}
    for u in usage:
        roles[u["role"]] = roles.get(u["role"], 0) + int(u["calls"])
    if "audit" in roles:
        return roles, "manifest usage"
    import pandas as pd

    from cube.llm import usage_summary

    tables = [
        pd.read_parquet(p)
        for n in ("scores", "audit_scores")
        if (p := run_dir / "data" / f"{n}.parquet").exists()
    ]
    audit = [t for t in tables if "probe" in t.columns]
    for t in audit:
        t["role"] = "audit"  # older runs: the audit's rows carry the role its stage set
    u = usage_summary(tables)
    return {
        r: int(g["calls"].sum()) for r, g in u.groupby("role")
    }, "tables (the manifest does not count the audit)"


def measure(label: str, data: dict, work: Path) -> float:
    data = dict(data, outputs_dir=str(work / "outputs"))
    params = work / f"{label}.yaml"
    params.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cube.cli",
            "run",
            str(params),
            "--only",
            "00..03",
            "--no-preflight",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 3):
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"cube run {label} failed ({proc.returncode})")
    run_dir = work / "outputs" / data["run"]
    roles, source = calls_by_role(run_dir)
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    judge, audit = roles.get("judging", 0), roles.get("audit", 0)
    share = audit / judge if judge else float("nan")
    sample = results.get("audit_sample") or {}
    planned: dict[str, int] = {}
    for r in results.get("plan") or []:
        if isinstance(r, dict):
            planned[r["role"]] = planned.get(r["role"], 0) + int(r["calls"])
    print(
        f"--- {label}: judge calls {judge}, audit calls {audit} (from {source}); audit questions "
        f"{sample.get('questions', 'not recorded')} of "
        f"{data.get('audit', {}).get('questions', 40)} requested"
        f"{', capped by audit.max_share' if sample.get('capped') else ''}; planned audit calls "
        f"{planned.get('audit', 'none')}" + ("" if planned else " (no plan recorded)")
    )
    print(f"{label}_audit_share_of_judge_calls: {share:.4f}")
    return share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="run in this folder and keep it (default: a temp dir)",
    )
    ap.add_argument("--small-only", action="store_true", help="only the small run (40 demo items)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="cube-audit-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    small = dict(base, run="small", corpus={**base["corpus"], "n_items": 40})
    measure("small", small, work)
    if args.small_only:
        return
    share = measure("default", dict(base, run="default"), work)
    print(f"audit_share_of_judge_calls: {share:.4f}")


if __name__ == "__main__":
    main()
