"""The first `make run` on a fresh clone (issue 23: the report in <= 2 minutes where the index is
reachable).

Clones the repository at each `--ref` into a temporary folder and times `make run` there: a new
virtual environment, the install (uv, or pip where pip has an index of its own; the package caches
as the machine has them, or empty with `--cold`: every package fetched from the indexes pip or uv is
configured with, which may include a mirror on local disk), then the notebook
stages of the offline default. Refs are run in turn, `--rounds` times (interleaved, so that a change
of the machine's load falls on both), and each run prints its wall time split into the install
(from the start to the first stage line) and the stages (`[cube] NN: done in S s`, summed).

    python benchmarks/first_run.py [--ref HEAD] [--ref 980e0c9] [--rounds 1] [--keep] [--cold]

The last line is the headline: `first_make_run_s: <median wall of the first ref>`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"\[cube\] (\S+): done in ([0-9.]+) s")


def first_run(ref: str, keep: bool, cold: bool = False) -> dict[str, float]:
    """One fresh clone of `ref` and its `make run`: wall, install and stage seconds; `cold`: with
    empty pip and uv caches (every package downloaded, as on a fresh machine)."""
    tmp = Path(tempfile.mkdtemp(prefix="cube-first-run-"))
    # the caches' home, not PIP_CACHE_DIR: a PIP_* variable shows in `pip config list`, which makes
    # the Makefile choose pip over uv
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache")) if cold else None
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(tmp / "repo")], check=True)
        subprocess.run(["git", "-C", str(tmp / "repo"), "checkout", "-q", ref], check=True)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=tmp / "repo",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        first_stage, stages = None, []
        assert proc.stdout is not None
        for line in proc.stdout:
            m = STAGE.search(line)
            if m:
                stages.append(float(m.group(2)))
                if first_stage is None:  # the install ended where the first stage began
                    first_stage = time.monotonic() - t0 - stages[0]
        wall = time.monotonic() - t0
        if proc.wait() != 0:  # make exits 2 whatever cube run's own code was
            keep = True
            raise SystemExit(
                f"make run failed at {ref} (make exit {proc.returncode}); clone kept in {tmp}"
            )
        return {
            "wall": wall,
            "install": first_stage or float("nan"),
            "stages": sum(stages),
            "n_stages": len(stages),
        }
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--ref", action="append", help="a commit to clone (repeatable; default HEAD)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the clones (their outputs and venvs)")
    ap.add_argument(
        "--cold", action="store_true", help="empty pip and uv caches: every package downloaded"
    )
    args = ap.parse_args()
    refs = args.ref or ["HEAD"]
    walls: dict[str, list[float]] = {r: [] for r in refs}
    for k in range(args.rounds):
        for ref in refs:
            r = first_run(ref, args.keep, args.cold)
            walls[ref].append(r["wall"])
            print(
                f"round {k + 1} {ref}: make run {r['wall']:.1f} s = "
                f"install {r['install']:.1f} s + stages "
                f"{r['stages']:.1f} s ({r['n_stages']} stages) + the rest",
                flush=True,
            )
    for ref in refs:
        print(f"{ref}: median {statistics.median(walls[ref]):.1f} s over {len(walls[ref])} runs")
    print(f"first_make_run_s: {statistics.median(walls[refs[0]]):.1f}")


if __name__ == "__main__":
    sys.exit(main())
