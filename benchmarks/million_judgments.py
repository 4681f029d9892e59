"""A million judgments, offline, end to end: CPU, wall and the largest process per stage (issue 41).

The paper's scale (`benchmarks/paper_scale.py`: 6,111 items, one builtin system, 4 offline rubric
judges = 293,328 judgments) made larger the ways a research group's run grows: more systems (a
builtin BM25 system at top 8 and one at top 4), more judges (the four presets) and more samples
per judgment (`judges[].samples`). The default, 2 systems x 4 judges x 2 samples on the 6,111-item
corpus, is 6,111 x 3 sets x 4 dimensions x 16 = 1,173,312 judgments: every zero and full answer
is made and judged (`analysis.bounds_of_missed: all`; with the default `sample` a missed question's
are made only in the gate's sample, 894,912 judgments here); `--systems 1 --samples 2` is
586,656, the paper's judgments twice over.

`cube run` runs in a subprocess, sampled every 0.1 s by `paper_scale.Sampler` (each process's CPU
and RSS attributed to the stage running then; "runner": the runner's own work between stages and
its manifest and publishing after the last), the totals from `os.wait4` (exact). Then, on the
finished run, the judgments table's size (rows, Parquet bytes, row groups) and the per-stage table
again as the growth from the paper's scale when `--paper-cpu` / `--paper-rss` give that run's
figures (a stage's CPU per judgment against the paper's: 1.0 is linear).

`cube batch export` has no call to write for offline judges (they make no LLM call); `--batch`
adds a fifth judge, an OpenAI-compatible model with no endpoint to reach, whose calls `cube batch
export` writes as JSONL and `cube batch import` reads back (as failed replies: the benchmark
writes a results file answering every exported request with an error line), timed and measured
alone on the run's folder; the run itself is then not made with that judge (its calls would fail).

Usage: python benchmarks/million_judgments.py [--items 6111] [--systems 2] [--judges 4]
           [--samples 2] [--keep DIR] [--paper-cpu STAGE=S,...] [--batch | --batch-only]
Run it with `nice -n 10` on a shared machine. The last line is `million_judgments_peak_rss_mb:`.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paper_scale import ROOT, run_once  # noqa: E402

SYSTEMS = (
    "  - {kind: builtin, name: bm25-top8, top_n: 8}\n",
    "  - {kind: builtin, name: bm25-top4, top_n: 4}\n",
    "  - {kind: builtin, name: bm25-top12, top_n: 12}\n",
)
JUDGES = (
    "  - {{name: lenient-a, samples: {n}, model: {{provider: offline, model: rubric-lenient}}}}\n",
    "  - {{name: strict-a, samples: {n}, model: {{provider: offline, model: rubric-strict}}}}\n",
    "  - {{name: lenient-b, samples: {n}, model: {{provider: offline, model: rubric, "
    "options: {{preset: lenient}}}}}}\n",
    "  - {{name: strict-b, samples: {n}, model: {{provider: offline, model: rubric, "
    "options: {{preset: strict}}}}}}\n",
)
# a model no run reaches (port 9 discards): `cube batch export` writes its calls
BATCH_JUDGE = (
    "  - {name: batch-judge, model: {provider: openai, model: batch-model, "
    "base_url: 'http://127.0.0.1:9/v1', api_key_env: CUBE_BENCH_NO_KEY}}\n"
)


def params_text(items: int, systems: int, judges: int, samples: int, outputs: Path) -> str:
    """The run's params: the paper scale's with more systems, judges and samples."""
    return (
        "run: paper\nlang: zh\ntitle: a million judgments\n"
        f"corpus: {{source: demo, n_items: {items}, family_share: 0.33, seed: 7}}\n"
        "questions: {generator: template, seed: 7}\n"
        "answerer: {provider: offline, model: extractive}\n"
        "systems:\n" + "".join(SYSTEMS[:systems]) + "dimensions: [relevance, specificity, "
        "completeness, quality]\njudges:\n"
        + "".join(j.format(n=samples) for j in JUDGES[:judges])
        + "analysis: {bootstrap: 1000, bounds_of_missed: all}\nhuman: {sample_size: 40, seed: 7}\n"
        f"lexical: {{tokenizer: jieba}}\noutputs_dir: {outputs}\n"
    )


def _table_facts(run: Path) -> dict[str, int]:
    """The scores table's rows, Parquet bytes and row groups."""
    import pyarrow.parquet as pq

    path = next(iter(sorted((run / "data").glob("scores.parquet"))), None)
    if path is None:
        return {}
    meta = pq.ParquetFile(path).metadata
    return {"rows": meta.num_rows, "bytes": path.stat().st_size, "row_groups": meta.num_row_groups}


def _child(cmd: list[str], cwd: Path) -> tuple[float, float, float, str]:
    """(CPU s, peak RSS MB, wall s, output) of one command, from `os.wait4` (exact)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    t = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-3000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, time.monotonic() - t, out


def batch_round_trip(work: Path, args: argparse.Namespace) -> None:
    """`cube batch export` of the batch judge's calls on the finished run, then `cube batch
    import` of a results file answering each with an error line; CPU, peak RSS and wall each."""
    params = work / "batch.yaml"
    text = params_text(args.items, args.systems, args.judges, args.samples, work / "outputs")
    params.write_text(text.replace("judges:\n", "judges:\n" + BATCH_JUDGE), encoding="utf-8")
    out = work / "batch" / "03.jsonl"
    cpu, rss, wall, _ = _child(
        [sys.executable, "-m", "cube.cli", "batch", "export", str(params), "--out", str(out)], ROOT
    )
    files = sorted(out.parent.glob("03.*.jsonl"))
    lines = sum(1 for f in files for _ in f.open("rb"))
    size = sum(f.stat().st_size for f in files)
    print(f"batch export: {lines:,} requests, {size / 2**20:.0f} MB; CPU {cpu:.1f} s, peak RSS")
    print(f"  {rss:.0f} MB, wall {wall:.1f} s")
    results = work / "batch" / "results.jsonl"
    with results.open("w", encoding="utf-8") as w:
        for f in files:
            for line in f.open(encoding="utf-8"):
                cid = json.loads(line)["custom_id"]
                w.write(
                    json.dumps(
                        {
                            "custom_id": cid,
                            "response": None,
                            "error": {"code": "server_error", "message": "benchmark"},
                        }
                    )
                    + "\n"
                )
    cpu, rss, wall, report = _child(
        [sys.executable, "-m", "cube.cli", "batch", "import", str(params), str(results)], ROOT
    )
    print(f"batch import: CPU {cpu:.1f} s, peak RSS {rss:.0f} MB, wall {wall:.1f} s")
    summary = [x for x in report.splitlines() if x.strip() and not x.startswith("  failed:")]
    print("  " + "\n  ".join(summary[-6:]))
    print(f"batch_export_requests: {lines}")


def _growth(result: object, paper: dict[str, float], ratio: float) -> None:
    """Per stage: CPU here / (the paper run's CPU x the judgments' ratio); 1.0 is linear."""
    print(f"CPU per judgment against the paper's ({ratio:.2f}x the judgments; 1.0 = linear):")
    for stage, (_, cpu, _, _) in result.stages.items():  # type: ignore[attr-defined]
        if stage in paper and paper[stage] > 0:
            print(f"  {stage:8} {cpu / (paper[stage] * ratio):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=6111)
    ap.add_argument("--systems", type=int, default=2, choices=(1, 2, 3))
    ap.add_argument("--judges", type=int, default=4, choices=(2, 3, 4))  # 07 compares judges
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    ap.add_argument(
        "--paper-cpu",
        default="",
        help="the paper-scale run's CPU s per stage, `00=0.9,03=22.6,...,runner=16.1` "
        "(benchmarks/paper_scale.py's table): prints each stage's growth against linear",
    )
    ap.add_argument("--batch", action="store_true", help="also time cube batch export/import")
    ap.add_argument(
        "--batch-only",
        action="store_true",
        help="only the batch round trip, on the run kept in --keep (made by an earlier call)",
    )
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="cube-million-"))
    work.mkdir(parents=True, exist_ok=True)
    asked = args.items * 3 * 4 * args.systems * args.judges * args.samples
    print(
        f"million judgments: {args.items} items x 3 sets x 4 dimensions x {args.systems} "
        f"system(s) x {args.judges} judge(s) x {args.samples} sample(s) = up to {asked:,}; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
    )
    if args.batch_only:
        batch_round_trip(work, args)
        return
    try:
        outputs = work / "outputs"
        params = work / "million.yaml"
        params.write_text(
            params_text(args.items, args.systems, args.judges, args.samples, outputs),
            encoding="utf-8",
        )
        result = run_once(params, outputs, "million")
        facts = _table_facts(outputs / "paper")
        print(
            f"scores table: {facts.get('rows', 0):,} rows, {facts.get('bytes', 0) / 2**20:.0f} MB "
            f"of Parquet, {facts.get('row_groups', 0)} row group(s)"
        )
        if args.paper_cpu:
            paper = {k: float(v) for k, v in (p.split("=") for p in args.paper_cpu.split(","))}
            _growth(result, paper, facts.get("rows", asked) / 293_328)
        if args.batch:
            batch_round_trip(work, args)
        print(f"load average {os.getloadavg()[0]:.1f} at end")
        print(f"million_judgments_rows: {facts.get('rows', 0)}")
        print(f"million_judgments_cpu_s: {result.cpu_s:.1f}")
        print(f"million_judgments_peak_rss_mb: {result.peak_rss_mb:.0f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
