"""Where a small run's time goes (issue 41, item 2: an 8-question run in <= 20 s wall).

Builds the 8-question run of the issue (`params/default.yaml` with `corpus.n_items: 8`; `--items N`
for another size, `--items 300` is the default `make run`), runs `cube run` on it in a subprocess
with its outputs in a temporary folder, and prints wall and CPU seconds per phase: the command's
start-up (interpreter and `cube.cli` imports), the preflight, the input checks, the plan, the
stages' fingerprints, the kernel's start, each stage, the manifest, the commit, and the publishing
(HTML export, navigation bars, judgment browser, index, fonts), then the command's outcome.

    nice -n 10 .venv/bin/python benchmarks/small_run.py [--items 8] [--rounds 1] [--keep DIR]
        [--checkout PATH] [--rerun] [--paper]

CPU is the process's own plus its children's (the notebook kernel, while alive, read from /proc;
reaped children from `getrusage`), so a phase's CPU includes the kernel's work in it (the input
checks and the plan share one forked child, `cube.run.before_stages`, reaped when the plan is
read: their CPU shows in the plan's line, the checks' line is the wait for their report); the column
`runner` is the `cube run` process's own share. Work done beside a phase counts in it: the
kernel's warm-up imports in the fingerprints and the plan, the pages exported on the runner's
thread (`cube.pages.publish.PreparedPages`) in the stages after the one they show. On a shared
machine CPU is the trustworthy figure; wall is indicative and printed beside the load average. A
phase's figures exclude the phases nested in it (the index's fingerprints are not the publishing's
HTML export). The stages execute on runner threads, side by side in two kernels after 03
(`cube.run.lanes`): the phase `stages` holds their whole wall and CPU, and each stage's line below
it (indented, not summed again) its kernel's CPU and its thread's (`runner`). Then each kernel's
stages: fresh or taken over, its memory when the stage began, its peak and after its reset
(`WarmKernel.history`). `--checkout`: measure that checkout's `cube` (first on PYTHONPATH), e.g. a
`git worktree` of main for a before/after pair; the phases it lacks show as absent. `--paper`: the
params of `benchmarks/paper_scale.py` (`--paper --items 6111`: the paper's scale, ~2 min, to see
which stages get a fresh kernel and what each kernel holds).

The last line is the headline: `small_run_wall_s: <median wall of the whole command>`, preceded by
`small_run_cpu_s`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (module, attribute, phase label): the functions timed inside `cube run`. A label None takes the
# stage's name from the notebook argument. Missing attributes (another checkout) are skipped.
PHASES = [
    ("cube.cli.run", "preflight", "preflight"),
    ("cube.cli.run", "_batch_pending", "batch export check"),
    ("cube.run.execute", "check_inputs", "input checks"),
    ("cube.run.execute", "_record_plan", "plan"),
    ("cube.run.execute", "prepare_staging", "staging"),
    ("cube.run.execute", "_forget_stages_run_outside", "notebooks run alone"),
    ("cube.run.stages", "stage_fingerprints", "fingerprints"),
    ("cube.run.execute", "call_failures", "failed-call checks"),
    ("cube.run.kernel", "WarmKernel._start", "kernel start"),
    ("cube.run.kernel", "WarmKernel.warm_up", "kernel warm-up (sent)"),
    ("cube.run.kernel", "WarmKernel._warmed", "waiting for the warm-up"),
    ("cube.run.execute", "_run_stages", "stages (their kernels' CPU below)"),
    ("cube.run.kernel", "WarmKernel.execute", None),
    ("cube.run.kernel", "WarmKernel.close", "kernel shutdown"),
    ("cube.run.execute", "write_manifest", "manifest"),
    ("cube.run.execute", "commit_staging", "commit"),
    ("cube.run.execute", "write_last_run", "last_run page"),
    ("cube.pages.publish", "_exported_page", "publish: HTML export"),
    ("cube.pages.publish", "PreparedPages.finish", "publish: waiting for the pages"),
    ("cube.pages.publish", "export_pages", "publish: HTML export"),
    ("cube.pages.publish", "set_nav", "publish: navigation bars"),
    ("cube.pages.browser", "write_browser", "publish: judgment browser"),
    ("cube.pages.publish", "write_index", "publish: index"),
    ("cube.pages.publish", "embed_fonts", "publish: fonts"),
    ("cube.run.ran_alone", "stages_mixed", "publish: notebooks run alone"),
    ("cube.cli.run", "_outcome", "outcome"),
]

# Run inside the measured `cube run` process: wraps the functions of PHASES, then runs the command
# line. Each phase's exclusive wall and CPU (the process, its reaped children and its live ones,
# the kernel) go to the file named by argv[1] as JSON.
INNER = r"""
import functools, importlib, json, os, resource, sys, threading, time
T_START = time.monotonic()
import psutil
out_file, phases_json, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
me = psutil.Process()

def own():
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime

def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0.0
    for p in me.children(recursive=True):
        try:
            t = p.cpu_times()
            live += t.user + t.system
        except psutil.Error:
            pass
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime + live

# label -> [wall, cpu, calls, own cpu, side]; side: 1 for a phase on a runner thread (a stage
# executing beside another in the run's second kernel: `cube.run.lanes`), counted in the phase that
# runs the stages, not summed again. Its CPU is its thread's and its kernel's.
# stack (one per thread) of [label, wall0, cpu0, inner wall, inner cpu, own cpu0, inner own cpu]
totals, local = {}, threading.local()
MAIN = threading.main_thread()

# the stage's kernel CPU (`WarmKernel.history`: a fresh kernel's start and imports included; the
# kernel may be replaced inside the stage)
def kernel_cpu(a):
    try:
        return a[0].history[-1]['cpu_s']
    except Exception:
        return 0.0

def wrap(fn, label):
    @functools.wraps(fn)
    def timed(*a, **k):
        name = label or ('stage ' + os.path.basename(str(a[1])).split('.')[0])
        side = threading.current_thread() is not MAIN
        stack = local.__dict__.setdefault('stack', [])
        def cpu_now():
            if not side:
                return cpu()
            return time.thread_time()
        own_now = time.thread_time if side else own
        stack.append([name, time.monotonic(), cpu_now(), 0.0, 0.0, own_now(), 0.0])
        try:
            return fn(*a, **k)
        finally:
            n, w0, c0, iw, ic, o0, io = stack.pop()
            w, c, o = time.monotonic() - w0, cpu_now() - c0, own_now() - o0
            if side and label is None:
                c += kernel_cpu(a)
            t = totals.setdefault(n, [0.0, 0.0, 0, 0.0, int(side)])
            t[0] += w - iw; t[1] += c - ic; t[2] += 1; t[3] += o - io
            if stack:
                stack[-1][3] += w; stack[-1][4] += c; stack[-1][6] += o
    return timed

for mod, attr, label in json.loads(phases_json):
    try:
        m = importlib.import_module(mod)
    except ImportError:
        continue
    owner, _, name = attr.rpartition('.')
    holder = getattr(m, owner, None) if owner else m
    if holder is not None and hasattr(holder, name):
        setattr(holder, name, wrap(getattr(holder, name), label))

# every kernel of the run, for its stages' memory (`WarmKernel.history`)
kernels = []
try:
    import cube.run.kernel as _k
    _init = _k.WarmKernel.__init__
    def _kept(self, *a, **k):
        _init(self, *a, **k)
        kernels.append(self)
    _k.WarmKernel.__init__ = _kept
except (ImportError, AttributeError):
    pass

# the start-up: the interpreter and these imports (cube.cli and the wrapped modules, which
# `cube run` imports anyway), counted as the command's
totals['start-up (interpreter, imports)'] = [time.monotonic() - T_START, cpu(), 1, own(), 0]
from cube.cli import main
try:
    code = main(argv)
finally:
    with open(out_file, 'w') as f:
        json.dump({'phases': totals,
                   'kernels': [[h for h in getattr(k, 'history', [])] for k in kernels]}, f)
sys.exit(code)
"""


def write_params(work: Path, items: int, paper: bool = False) -> Path:
    """The default params with `corpus.n_items: items` and the outputs in `work`; `paper`: those of
    `benchmarks/paper_scale.py` (4 offline judges, one BM25 system) instead."""
    import yaml

    if paper:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from paper_scale import PARAMS

        params = work / "paper.yaml"
        params.write_text(PARAMS.format(items=items, outputs=work / "outputs"), encoding="utf-8")
        return params

    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data["corpus"]["n_items"] = items
    data["outputs_dir"] = str(work / "outputs")
    params = work / "default.yaml"
    params.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return params


def one_run(params: Path, work: Path, checkout: Path, preflight: bool) -> dict:
    """`cube run params` in a subprocess; its phases, wall and CPU (children included)."""
    import resource

    env = dict(os.environ, PYTHONPATH=str(checkout))
    phases_file = work / "phases.json"
    argv = ["run", str(params)] + ([] if preflight else ["--no-preflight"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", INNER, str(phases_file), json.dumps(PHASES), *argv],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 3):
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"cube run failed ({proc.returncode})")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    record = json.loads(phases_file.read_text())
    return {
        "wall": wall,
        "cpu": cpu,
        "phases": record["phases"],
        "kernels": record.get("kernels", []),
        "rss_mb": after.ru_maxrss / 1024,
    }


def show(run: dict, label: str) -> None:
    print(f"--- {label}: wall {run['wall']:.1f} s, CPU {run['cpu']:.1f} s (children included)")
    print(f"{'phase':40} {'wall s':>7} {'CPU s':>7} {'runner':>7} {'calls':>5}")
    timed_w = timed_c = 0.0
    for name, (w, c, n, o, *side) in run["phases"].items():
        if side and side[0]:  # on a runner thread: inside the stages' phase, not summed again
            print(f"  {name:38} {w:7.2f} {c:7.2f} {o:7.2f} {n:5d}")
            continue
        print(f"{name:40} {w:7.2f} {c:7.2f} {o:7.2f} {n:5d}")
        timed_w, timed_c = timed_w + w, timed_c + c
    print(f"{'the rest (untimed)':40} {run['wall'] - timed_w:7.2f} {run['cpu'] - timed_c:7.2f}")
    show_kernels(run.get("kernels", []))


def show_kernels(kernels: list[list[dict]]) -> None:
    """Each kernel's stages: fresh or taken over, its memory when the stage began, its peak, after
    the reset, and whether it was then closed (MB)."""
    mb = 2**20
    print(
        f"{'kernel':>6} {'stage':28} {'fresh':>5} {'start':>6} {'peak':>6} {'after':>6} "
        f"{'closed':>6} {'cpu_s':>6}"
    )
    for n, history in enumerate(kernels):
        for h in history:
            print(
                f"{n:6d} {h['stage']:28} {'yes' if h['fresh'] else 'no':>5} "
                f"{h['before'] / mb:6.0f} {h['peak'] / mb:6.0f} {h['after'] / mb:6.0f} "
                f"{'yes' if h['closed'] else 'no':>6} {h.get('cpu_s', 0.0):6.2f}"
            )
    fresh = [h.get("cpu_s", 0.0) for history in kernels for h in history if h["fresh"]]
    print(f"fresh kernels: {len(fresh)}, their first stages' CPU {sum(fresh):.1f} s")
    peaks = [h["peak"] for history in kernels for h in history]
    if peaks:
        print(f"small_run_kernel_peak_mb: {max(peaks) / mb:.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=8, help="corpus.n_items (default 8)")
    ap.add_argument("--rounds", type=int, default=1, help="fresh runs, each in a new folder")
    ap.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose cube runs")
    ap.add_argument("--no-preflight", action="store_true", help="pass --no-preflight")
    ap.add_argument(
        "--paper",
        action="store_true",
        help="paper_scale.py's params (--items 6111 for the paper's scale): the kernels' memory",
    )
    ap.add_argument(
        "--rerun", action="store_true", help="then run it again unchanged (every stage up to date)"
    )
    args = ap.parse_args()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{os.cpu_count()} cores; {uptime}")
    walls, cpus = [], []
    for k in range(args.rounds):
        work = args.keep or Path(tempfile.mkdtemp(prefix="cube-small-run-"))
        if args.keep and args.rounds > 1:
            work = args.keep / f"round{k + 1}"
        work.mkdir(parents=True, exist_ok=True)
        try:
            params = write_params(work, args.items, args.paper)
            run = one_run(params, work, args.checkout.resolve(), not args.no_preflight)
            show(run, f"round {k + 1}, {args.items} items, load {os.getloadavg()[0]:.2f}")
            walls.append(run["wall"])
            cpus.append(run["cpu"])
            if args.rerun:
                again = one_run(params, work, args.checkout.resolve(), not args.no_preflight)
                show(again, f"round {k + 1}, unchanged re-run, load {os.getloadavg()[0]:.2f}")
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    print(f"small_run_cpu_s: {statistics.median(cpus):.1f}")
    print(f"small_run_wall_s: {statistics.median(walls):.1f}")


if __name__ == "__main__":
    main()
