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
file being written, else "runner"). The totals (CPU of all descendants, peak RSS of the largest
single process) come from `os.wait4`, so they are exact; the per-stage split is sampled.

Usage: python benchmarks/paper_scale.py [--items 6111] [--force-too] [--keep DIR]
The last line is the first run's total wall time, `paper_scale_wall_s: ...` (its CPU and peak RSS
are printed as `first_cpu_s` and `first_peak_rss_mb`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

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
        self.stop = threading.Event()
        self.cpu: dict[str, float] = {}
        self.rss: dict[str, int] = {}
        self.tree: dict[str, int] = {}  # stage -> peak of the summed RSS of the whole process tree
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.seen: dict[int, tuple[str, float]] = {}  # pid -> (stage, cpu already attributed)

    def stage(self) -> str:
        nbs = (
            list((self.staging / "notebooks").glob("*.ipynb"))
            if (self.staging / "notebooks").exists()
            else []
        )
        newest = max(nbs, key=lambda p: p.stat().st_mtime, default=None)
        if newest is None or time.time() - newest.stat().st_mtime > 600:
            return "runner"
        return newest.stem[:2]

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
                _, done = self.seen.get(pid, (stage, 0.0))
                self.cpu[stage] = self.cpu.get(stage, 0.0) + cpu - done
                self.seen[pid] = (stage, cpu)
                self.rss[stage] = max(self.rss.get(stage, 0), rss)
                total += rss
            self.tree[stage] = max(self.tree.get(stage, 0), total)
            self.stop.wait(0.1)


def run_once(params: Path, outputs: Path, label: str, *extra: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cube.cli", "run", str(params), "--no-preflight", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    sampler = Sampler(proc.pid, outputs / "paper" / ".staging")
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    sampler.stop.set()
    sampler.join()
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 3):
        print(out[-3000:], file=sys.stderr)
        raise SystemExit(f"cube run failed ({proc.returncode})")
    print(f"--- {label}: cube run exit {proc.returncode}")
    print(
        f"{'stage':8} {'wall_s':>8} {'cpu_s':>8} "
        f"{'rss_mb':>8} {'tree_mb':>8}   (sampled every 0.1 s)"
    )
    for stage in sorted(
        sampler.cpu
    ):  # "runner": the cube process between stages (its wall: the whole run)
        span = sampler.last[stage] - sampler.first[stage]
        print(
            f"{stage:8} {span:8.1f} {sampler.cpu[stage]:8.1f} "
            f"{sampler.rss.get(stage, 0) / 2**20:8.0f} "
            f"{sampler.tree.get(stage, 0) / 2**20:8.0f}"
        )
    cpu = usage.ru_utime + usage.ru_stime
    print(f"{label}_cpu_s: {cpu:.1f}")
    print(
        f"{label}_peak_rss_mb: {usage.ru_maxrss / 1024:.0f}"
    )  # the largest single process (exact)
    # every process alive at once (the runner, the kernel and its children), sampled
    print(f"{label}_tree_peak_rss_mb: {max(sampler.tree.values(), default=0) / 2**20:.0f}")
    print(f"{label}_wall_s: {wall:.1f}")
    return wall


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
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="cube-paper-"))
    work.mkdir(parents=True, exist_ok=True)
    outputs = work / "outputs"
    params = work / "paper.yaml"
    params.write_text(PARAMS.format(items=args.items, outputs=outputs), encoding="utf-8")
    print(
        f"paper scale: {args.items} items x 3 sets x 4 dimensions "
        f"x 4 judges = {args.items * 48:,} judgments; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
    )
    try:
        wall = run_once(params, outputs, "first")
        if args.force_too:
            run_once(params, outputs, "force", "--force")
            run_once(params, outputs, "noop")
        print(f"load average {os.getloadavg()[0]:.1f} at end")
        print(f"paper_scale_wall_s: {wall:.1f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
