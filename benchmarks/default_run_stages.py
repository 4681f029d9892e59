"""Stage time of the default `make run` (issue 15: the notebook stages in <= 45 s).

Runs `cube run params/default.yaml` (the offline default: 300 synthetic items, two rubric judges,
the TOP-N sweep, 11 notebooks) in a subprocess with its outputs in a temporary folder, then an
unchanged re-run, and prints each stage's time as `cube run` logs it. Since issue 15 the stages
share one warm kernel (`cube.run.kernel`): the kernel starts once and the imports are paid once.

    .venv/bin/python benchmarks/default_run_stages.py [--keep DIR]

The last line is the headline: `default_run_stages_s: <sum of the first run's stage times>`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"\[cube\] (\S+): done in ([0-9.]+) s")


def run(params: Path, label: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "cube.cli", "run", str(params), "--no-preflight"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 3):
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"cube run failed ({proc.returncode})")
    stages = STAGE.findall(proc.stdout + proc.stderr)
    print(f"--- {label}: {len(stages)} stages executed, wall {wall:.1f} s")
    for name, secs in stages:
        print(f"{name:28} {float(secs):6.1f}")
    total = sum(float(s) for _, s in stages)
    print(f"{label}_stages_s: {total:.1f}")
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="run in this folder and keep it (default: a temp dir)",
    )
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="cube-default-"))
    work.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data["outputs_dir"] = str(work / "outputs")
    params = work / "default.yaml"
    params.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    try:
        first = run(params, "first")
        run(params, "rerun")
        print(f"load average {os.getloadavg()[0]:.1f} at end")
        print(f"default_run_stages_s: {first:.1f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
