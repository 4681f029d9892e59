"""The paper's scale, stage by stage: CPU, wall and peak RSS of each, one process per stage.

Issue 31 item 4. `benchmarks/paper_scale.py` times the whole `cube run` and splits it per stage
by sampling; this script isolates stages 01_dataset_prep, 02_qa_sets and 03_scoring_sets: each
runs in a fresh Python process that executes the notebook's code cells in order (the parameters
injected as papermill would, no Jupyter kernel), so its CPU time and peak RSS (`os.wait4`, exact)
are that stage's own, including the imports its cells make. The params are paper_scale.py's
(6,111 items, one builtin BM25 system, 4 offline rubric judges: 293,328 judgments), written to a
temporary folder with a fresh call cache, so every pass starts cold.

`--code DIR` runs another checkout's package and notebooks (e.g. `git archive <commit> | tar -x -C
DIR`), so before and after can be interleaved back to back: `--code /tmp/old --code .` runs the
old, then the new, `--pairs` times. `--profile DIR` writes a cProfile file per stage there.
`--keep DIR` keeps the run folders (to diff the tables of two checkouts).

Later stages: `--stages 08_bleu_rouge,12_validation` runs those notebooks instead of 01-03, each
pass on a copy of `--from-run DIR` (a paper-scale run folder, `outputs/paper` of
`benchmarks/paper_scale.py --keep` or of `cube run`), so a stage finds the data of the stages
before it and every pass starts from the same inputs.

Usage: .venv/bin/python benchmarks/paper_scale_stages.py [--items 6111] [--code DIR ...]
       [--pairs 1] [--profile DIR] [--keep DIR] [--stages A,B --from-run DIR]
The last line is the last pass's CPU time of its stages, `paper_scale_stages_cpu_s: ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from paper_scale import PARAMS  # noqa: E402  (the same params as the whole-run benchmark)

STAGES = ("01_dataset_prep", "02_qa_sets", "03_scoring_sets")
# The environment `cube run` starts its kernels with: Arrow allocating from glibc's heap, glibc's
# mmap threshold kept at 128 KiB (`cube.run.kernel.WarmKernel`) and one BLAS/OpenMP thread
# (`cube.run.execute.kernel_thread_limits`).
KERNEL_ENV = {
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "MALLOC_MMAP_THRESHOLD_": str(128 * 1024),
    **dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"),
}

# Runs in the stage's own process: the notebook's code cells, the parameters set after the
# parameters cell as papermill injects them; `display` is IPython's, a no-op here.
RUNNER = """
import cProfile, json, sys
nb = json.load(open(sys.argv[1], encoding="utf-8"))
ns = {"display": lambda *a, **k: None, "__name__": "__main__"}
inject = "params_path = %r\\nrun_dir = None\\noverrides = None\\n" % sys.argv[2]
cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
source = "\\n".join(c + ("\\n" + inject if "params_path: str" in c else "") for c in cells)
code = compile(source, sys.argv[1], "exec")
if sys.argv[3]:
    cProfile.runctx(code, ns, ns, sys.argv[3])
else:
    exec(code, ns)
"""


def run_stage(code: Path, stage: str, params: Path, profile: Path | None) -> dict[str, float]:
    """One stage in a fresh process: wall, CPU (user + system) and peak RSS in MB."""
    env = dict(os.environ, PYTHONPATH=str(code), MPLBACKEND="Agg")
    # byte-compiled modules are read, as in a user's environment: with PYTHONDONTWRITEBYTECODE set
    # every stage process compiled its imports again (~8 s of CPU each)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # what `cube run` gives its kernels (`cube.run.kernel`, `cube.run.execute`), unless set here
    for var, value in KERNEL_ENV.items():
        env.setdefault(var, value)
    out = str(profile / f"{stage}.prof") if profile else ""
    log = params.parent / f"{stage}.log"  # a file, not a pipe: progress bars fill a pipe
    t0 = time.monotonic()
    with log.open("wb") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(code / "notebooks" / f"{stage}.ipynb"), str(params)]
            + [out],
            cwd=code,
            env=env,
            stdout=err_file,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = log.read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{stage} failed under {code}:\n{err[-3000:]}")
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
    }


def one_pass(
    code: Path,
    items: int,
    work: Path,
    profile: Path | None,
    stages: tuple[str, ...] = STAGES,
    from_run: Path | None = None,
) -> dict[str, dict]:
    """`stages` of one checkout in a fresh folder (fresh call cache), on a copy of `from_run`
    (the run folder the stages read) when given."""
    work.mkdir(parents=True, exist_ok=True)
    params = work / "paper.yaml"
    params.write_text(PARAMS.format(items=items, outputs=work / "outputs"), encoding="utf-8")
    if from_run is not None:
        shutil.copytree(from_run, work / "outputs" / "paper")
    return {stage: run_stage(code, stage, params, profile) for stage in stages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=6111)
    ap.add_argument("--code", type=Path, action="append", help="checkout(s) to run, in turn")
    ap.add_argument("--pairs", type=int, default=1, help="rounds over the --code checkouts")
    ap.add_argument("--profile", type=Path, default=None, help="write <stage>.prof files here")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    ap.add_argument("--stages", default=",".join(STAGES), help="notebooks to run, in order")
    ap.add_argument("--from-run", type=Path, default=None, help="run folder the stages read")
    args = ap.parse_args()
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    if stages != STAGES and args.from_run is None:
        ap.error("--stages other than 01-03 need --from-run (the run folder they read)")
    codes = [c.resolve() for c in (args.code or [ROOT])]
    base = args.keep or Path(tempfile.mkdtemp(prefix="cube-stages-"))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    total = 0.0
    try:
        for r in range(args.pairs):
            for i, code in enumerate(codes):
                res = one_pass(
                    code, args.items, base / f"r{r}-c{i}", args.profile, stages, args.from_run
                )
                total = sum(v["cpu_s"] for v in res.values())
                peak = max(v["peak_rss_mb"] for v in res.values())
                print(json.dumps({"round": r, "code": str(code), **res}))
                print(f"round {r} {code}: cpu_s {total:.1f}, largest peak_rss_mb {peak}")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    print(f"paper_scale_stages_cpu_s: {total:.1f}")  # the last pass's stages


if __name__ == "__main__":
    main()
