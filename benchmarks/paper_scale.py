"""The paper's scale, offline: wall time, CPU time and peak RSS of every stage of `cube run`.

The run of issue 15: a synthetic demo corpus of 6,111 items, one template question each, one
builtin BM25 system (so 3 answer sets: zero, rag, full), the 4 paper dimensions and 4 offline
rubric judges (the lenient and strict presets, each under two model names so that no two judges
share a model spec) = 6,111 x 3 x 4 x 4 = 293,328 judgments, 1,000 bootstrap resamples.

The params are written to a temporary folder and `cube run` is executed in a subprocess (the
same entry point as `make run`). The stages share a warm Jupyter kernel (`cube.run.kernel`; at this
scale each stage after the first large one gets a fresh kernel); a sampler thread
reads /proc every 0.1 s and attributes every descendant process's CPU time and resident memory to
the stage running at that moment (the stage is the newest `outputs/<run>/.staging/notebooks/*`
file being written, until `cube run` logs that stage as done; else "runner": the runner's own work
between stages, and after the last one the manifest written before the commit). The totals (CPU
of all descendants, peak RSS of the largest single process) come from `os.wait4`, so they are
exact; the per-stage split is sampled. The `cube run` process's own peak RSS and CPU (its forked
children apart: `cube.config.forked`, the page worker) are sampled too: `first_runner_peak_rss_mb`,
`first_runner_cpu_s`.

Side by side (issue 31): `--against REV` checks the commit REV out in a git worktree of its own
(`<tmp>/cube-against-<sha>`, kept and re-used by later invocations; `git worktree remove` deletes
it) with its own venv (`make .venv/.installed` there, uv), and runs this checkout (B) and REV (A)
interleaved, A B A B ... for `--pairs N` pairs, each run in a fresh outputs folder (no call
cache, no evaluation cache), the same params. Stages are matched by their notebook's number
(the notebook names did not change; a stage one side lacks shows "-"). It prints each run's
table, then per stage the median CPU, wall and peak RSS of each side and B/A, and the totals.
The machine is shared: interleaving spreads other work's load over both sides alike.

Usage: python benchmarks/paper_scale.py [--items 6111] [--force-too] [--keep DIR]
       python benchmarks/paper_scale.py --against 996c994 [--pairs 2] [--items 6111]
The last line is the first run's total wall time, `paper_scale_wall_s: ...` (its CPU and peak RSS
are printed as `first_cpu_s` and `first_peak_rss_mb`); with `--against`, the totals' medians
`against_cpu_s`, `this_cpu_s`, `against_peak_rss_mb`, `this_peak_rss_mb`.
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
# `cube run`'s line for a stage that ended (`cube.run.execute`): done, failed, up to date, skipped
DONE = re.compile(r"\[cube\] (\d\d)_\w+: (?:done in|FAILED|up to date|skipped)")

PARAMS = """run: paper
lang: zh
title: paper scale benchmark
corpus: {{source: demo, n_items: {items}, family_share: 0.33, seed: 7}}
questions: {{generator: template, seed: 7}}
answerer: {{provider: offline, model: extractive}}
systems:
  - {{kind: builtin, name: bm25-top8, top_n: 8}}
dimensions: [relevance, specificity, completeness, quality]
judges:
  - {{name: lenient-a, model: {{provider: offline, model: rubric-lenient}}}}
  - {{name: strict-a, model: {{provider: offline, model: rubric-strict}}}}
  - {{name: lenient-b, model: {{provider: offline, model: rubric, options: {{preset: lenient}}}}}}
  - {{name: strict-b, model: {{provider: offline, model: rubric, options: {{preset: strict}}}}}}
analysis: {{bootstrap: 1000}}
human: {{sample_size: 40, seed: 7}}
lexical: {{tokenizer: jieba}}
outputs_dir: {outputs}
"""


def _children(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def _stat(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, RSS bytes) of one process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE


class Sampler(threading.Thread):
    def __init__(self, pid: int, staging: Path):
        super().__init__(daemon=True)
        self.pid, self.staging = pid, staging
        self.finished: set[str] = set()  # stage numbers `cube run` logged as done or failed
        self.stop = threading.Event()
        self.cpu: dict[str, float] = {}
        self.rss: dict[str, int] = {}
        self.tree: dict[str, int] = {}  # stage -> peak of the summed RSS of the whole process tree
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.seen: dict[int, tuple[str, float]] = {}  # pid -> (stage, cpu already attributed)
        self.runner_rss = 0  # the `cube run` process's own peak RSS (its forked children apart)
        self.runner_cpu = 0.0  # and its own CPU seconds, as last read

    def stage(self) -> str:
        nbs = (
            list((self.staging / "notebooks").glob("*.ipynb"))
            if (self.staging / "notebooks").exists()
            else []
        )
        newest = max(nbs, key=lambda p: p.stat().st_mtime, default=None)
        if newest is None or time.time() - newest.stat().st_mtime > 600:
            return "runner"
        # a stage logged as done is over: what follows it (the fingerprints, the next stage's
        # set-up, the manifest after the last stage) is the runner's
        return "runner" if newest.stem[:2] in self.finished else newest.stem[:2]

    def read_log(self, stream: Any, lines: list[str]) -> None:
        """Read `cube run`'s output as it comes, noting each stage it logs as finished."""
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            lines.append(line)
            m = DONE.match(line)
            if m:
                self.finished.add(m.group(1))

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                stage = self.stage()
            except OSError:
                stage = "runner"
            now = time.monotonic()
            self.first.setdefault(stage, now)
            self.last[stage] = now
            total = 0
            for pid in [self.pid, *_children(self.pid)]:
                s = _stat(pid)
                if s is None:
                    continue
                cpu, rss = s
                if pid == self.pid:
                    self.runner_rss, self.runner_cpu = max(self.runner_rss, rss), cpu
                _, done = self.seen.get(pid, (stage, 0.0))
                self.cpu[stage] = self.cpu.get(stage, 0.0) + cpu - done
                self.seen[pid] = (stage, cpu)
                self.rss[stage] = max(self.rss.get(stage, 0), rss)
                total += rss
            self.tree[stage] = max(self.tree.get(stage, 0), total)
            self.stop.wait(0.1)


@dataclass
class Side:
    """One checkout to run: its python, its root (the working directory and PYTHONPATH)."""

    label: str
    python: str
    root: Path


@dataclass
class Result:
    """One run's figures: per stage (sampled) and totals (exact, from wait4)."""

    cpu_s: float
    peak_rss_mb: float
    tree_peak_rss_mb: float
    wall_s: float
    runner_peak_rss_mb: float = 0.0  # the `cube run` process alone (sampled)
    runner_cpu_s: float = 0.0
    stages: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    # stage -> (wall span s, cpu s, largest process rss MB, whole tree rss MB)


def run_once(
    params: Path, outputs: Path, label: str, *extra: str, side: Side | None = None
) -> Result:
    """Run `cube run` once and print its per-stage table and totals."""
    side = side or Side("this", sys.executable, ROOT)
    # unbuffered: the sampler reads the stage lines as they are written
    env = dict(os.environ, PYTHONPATH=str(side.root), PYTHONUNBUFFERED="1")
    started = time.monotonic()
    proc = subprocess.Popen(
        [side.python, "-m", "cube.cli", "run", str(params), "--no-preflight", *extra],
        cwd=side.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    sampler = Sampler(proc.pid, outputs / "paper" / ".staging")
    sampler.start()
    lines: list[str] = []
    sampler.read_log(proc.stdout, lines)
    out = "".join(lines)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    sampler.stop.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 3):
        print(out[-3000:], file=sys.stderr)
        raise SystemExit(f"cube run failed ({proc.returncode}) [{side.label} {side.root}]")
    result = Result(
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # the largest single process (exact)
        tree_peak_rss_mb=max(sampler.tree.values(), default=0) / 2**20,
        wall_s=wall,
        runner_peak_rss_mb=sampler.runner_rss / 2**20,
        runner_cpu_s=sampler.runner_cpu,
    )
    for stage in sorted(sampler.cpu):  # "runner": the cube process between stages
        result.stages[stage] = (
            sampler.last[stage] - sampler.first[stage],
            sampler.cpu[stage],
            sampler.rss.get(stage, 0) / 2**20,
            sampler.tree.get(stage, 0) / 2**20,
        )
    _print_run(label, proc.returncode, result)
    return result


def _print_run(label: str, code: int, result: Result) -> None:
    print(f"--- {label}: cube run exit {code}")
    print(
        f"{'stage':8} {'wall_s':>8} {'cpu_s':>8} "
        f"{'rss_mb':>8} {'tree_mb':>8}   (sampled every 0.1 s)"
    )
    for stage, (span, cpu, rss, tree) in result.stages.items():
        print(f"{stage:8} {span:8.1f} {cpu:8.1f} {rss:8.0f} {tree:8.0f}")
    print(f"{label}_cpu_s: {result.cpu_s:.1f}")
    print(f"{label}_peak_rss_mb: {result.peak_rss_mb:.0f}")
    print(f"{label}_runner_peak_rss_mb: {result.runner_peak_rss_mb:.0f}")
    print(f"{label}_runner_cpu_s: {result.runner_cpu_s:.1f}")
    # every process alive at once (the runner, the kernel and its children), sampled
    print(f"{label}_tree_peak_rss_mb: {result.tree_peak_rss_mb:.0f}")
    print(f"{label}_wall_s: {result.wall_s:.1f}")


def against_side(rev: str) -> Side:
    """REV checked out in a kept git worktree with its own venv (made on first use)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    where = Path(tempfile.gettempdir()) / f"cube-against-{sha[:12]}"
    if not (where / "pyproject.toml").exists():
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(where), sha], cwd=ROOT, check=True
        )
    if not (where / ".venv" / ".installed").exists():
        print(f"against {rev}: making {where}/.venv (make .venv/.installed)", flush=True)
        subprocess.run(["make", ".venv/.installed"], cwd=where, check=True)
    return Side(f"against_{sha[:7]}", str(where / ".venv" / "bin" / "python"), where)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _stage_median(results: list[Result], stage: str, i: int) -> float | None:
    got = [r.stages[stage][i] for r in results if stage in r.stages]
    return _median(got) if got else None


def _cell(a: float | None, b: float | None, fmt: str) -> str:
    sa = "-" if a is None else format(a, fmt)
    sb = "-" if b is None else format(b, fmt)
    ratio = f"{b / a:.2f}" if a and b is not None else "-"
    return f"{sa:>7} {sb:>7} {ratio:>5}"


def print_side_by_side(a: list[Result], b: list[Result], rev: str) -> None:
    """Per stage and in total, the median over the pairs of each side, and B/A."""
    print(f"\n=== side by side: A = {rev}, B = this; medians of {len(a)} pairs")
    print(
        f"{'stage':8} {'cpu A':>7} {'cpu B':>7} {'B/A':>5}   {'wall A':>7} {'wall B':>7} "
        f"{'B/A':>5}   {'rss A':>7} {'rss B':>7} {'B/A':>5}"
    )
    stages = sorted({s for r in a + b for s in r.stages})
    for stage in stages:
        cells = [
            _cell(_stage_median(a, stage, i), _stage_median(b, stage, i), fmt)
            for i, fmt in ((1, ".1f"), (0, ".1f"), (2, ".0f"))
        ]
        print(f"{stage:8} " + "   ".join(cells))
    tot = [
        _cell(_median([getattr(r, k) for r in a]), _median([getattr(r, k) for r in b]), fmt)
        for k, fmt in (("cpu_s", ".1f"), ("wall_s", ".1f"), ("peak_rss_mb", ".0f"))
    ]
    print(f"{'total':8} " + "   ".join(tot))
    print(
        "each run, A then B: cpu_s "
        + ", ".join(f"{x.cpu_s:.0f}/{y.cpu_s:.0f}" for x, y in zip(a, b, strict=True))
        + "; peak_rss_mb "
        + ", ".join(f"{x.peak_rss_mb:.0f}/{y.peak_rss_mb:.0f}" for x, y in zip(a, b, strict=True))
    )
    for label, results in (("against", a), ("this", b)):
        print(f"{label}_cpu_s: {_median([r.cpu_s for r in results]):.1f}")
        print(f"{label}_peak_rss_mb: {_median([r.peak_rss_mb for r in results]):.0f}")


def side_by_side(rev: str, pairs: int, items: int, work: Path, this: str | None = None) -> None:
    """A (REV) and B (this checkout, or the revision `this`) interleaved, each run in a fresh
    outputs folder."""
    b = Side("this", sys.executable, ROOT) if this is None else against_side(this)
    sides = [against_side(rev), Side("this", b.python, b.root)]
    got: dict[str, list[Result]] = {s.label: [] for s in sides}
    for n in range(pairs):
        for side in sides:
            outputs = work / f"{side.label}-{n}" / "outputs"
            params = outputs.parent / "paper.yaml"
            outputs.mkdir(parents=True, exist_ok=True)
            params.write_text(PARAMS.format(items=items, outputs=outputs), encoding="utf-8")
            print(
                f"pair {n + 1}/{pairs}, {side.label}: load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            got[side.label].append(run_once(params, outputs, side.label, side=side))
            shutil.rmtree(outputs.parent, ignore_errors=True)
    print_side_by_side(got[sides[0].label], got[sides[1].label], rev)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=6111)
    ap.add_argument(
        "--force-too", action="store_true", help="also time `cube run --force` and a no-op re-run"
    )
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="run in this folder and keep it (default: a temp dir)",
    )
    ap.add_argument("--against", default=None, help="a git revision to run side by side with")
    ap.add_argument("--pairs", type=int, default=2, help="interleaved pairs with --against")
    ap.add_argument(
        "--this", default=None, help="with --against: run this revision as B, not the checkout"
    )
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="cube-paper-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"paper scale: {args.items} items x 3 sets x 4 dimensions "
        f"x 4 judges = {args.items * 48:,} judgments; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
    )
    try:
        if args.against:
            side_by_side(args.against, args.pairs, args.items, work, args.this)
            print(f"load average {os.getloadavg()[0]:.1f} at end")
            return
        outputs = work / "outputs"
        params = work / "paper.yaml"
        params.write_text(PARAMS.format(items=args.items, outputs=outputs), encoding="utf-8")
        first = run_once(params, outputs, "first")
        if args.force_too:
            run_once(params, outputs, "force", "--force")
            run_once(params, outputs, "noop")
        print(f"load average {os.getloadavg()[0]:.1f} at end")
        print(f"paper_scale_wall_s: {first.wall_s:.1f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
