"""How long the command line takes to answer: `cube --help`, each subcommand's `--help`, and
`import cube.cli`, as whole processes (median wall time of several runs after a warm-up).

    python benchmarks/cli_startup.py [--runs N] [--checkout PATH]

Each figure is a fresh interpreter: `python -m cube.cli ARGS` (what the `cube` script runs) and
`python -c "import cube.cli"`. With `--checkout`, that checkout's `cube` package is measured (put
first on PYTHONPATH; its dependencies come from this interpreter), e.g. a `git worktree` of an
earlier commit for a before/after pair. The subcommands are read from the measured package's own
parser, so a new command is measured without editing this script. The last line is the headline:
`cube_help_median_s: N`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The measured package's own commands, nested ones (`batch export`) included, as word lists.
LIST_COMMANDS = """
import argparse, json
from cube.cli import build_parser
def words(parser, prefix):
    out = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, p in a.choices.items():
                out += [prefix + [name]] + words(p, prefix + [name])
    return out
print(json.dumps(words(build_parser(), [])))
"""


def wall_times(cmd: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Wall seconds of `runs` runs of `cmd` after one warm-up run (not counted)."""
    out = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i:  # the first run warms the file cache and the byte-code
            out.append(time.perf_counter() - start)
    return out


def subcommands(env: dict[str, str]) -> list[list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", LIST_COMMANDS], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def measure(runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall seconds per command line."""
    cases = {"import cube.cli": [sys.executable, "-c", "import cube.cli"]}
    cases["cube --help"] = [sys.executable, "-m", "cube.cli", "--help"]
    cases["cube --version"] = [sys.executable, "-m", "cube.cli", "--version"]
    for words in subcommands(env):
        cases[f"cube {' '.join(words)} --help"] = [
            sys.executable,
            "-m",
            "cube.cli",
            *words,
            "--help",
        ]
    return {label: statistics.median(wall_times(cmd, runs, env)) for label, cmd in cases.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="counted runs per command (default 5)")
    ap.add_argument(
        "--checkout", type=Path, default=None, help="measure this checkout's package instead"
    )
    args = ap.parse_args(argv)
    env = dict(os.environ)
    if args.checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.checkout.resolve()), env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
    medians = measure(args.runs, env)
    width = max(map(len, medians))
    for label, seconds in medians.items():
        print(f"{label:<{width}}  {seconds:6.3f} s")
    print(f"slowest: {max(medians, key=medians.get)} {max(medians.values()):.3f} s")
    print(f"cube_help_median_s: {medians['cube --help']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
