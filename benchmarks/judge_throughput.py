"""Judge-call throughput of `cube.llm` against a local OpenAI-compatible server.

The server (tests/openai_server.py) runs in a child process with a fixed latency per call
(default 100 ms), so it does not compete with the client for the GIL. N judgments go through
the real judging pipeline, `cube.judges.score_answers` (the packaged zh prompts with a
synthetic service guide as source, reply parsing, the scores table): N / 4 answers x the four
paper dimensions, at concurrency C with a fresh temporary cache, compared with the ideal
C / latency. A sequential run (concurrency 1) is timed on a small sample and extrapolated to
N. Finally the same N are re-run fully cached.

    .venv/bin/python benchmarks/judge_throughput.py [--n 2000] [--concurrency 32] [--latency 0.1]

The last line is the headline figure: `throughput_ratio: <achieved / ideal>`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import pandas as pd  # noqa: E402
from openai_server import ServerProcess  # noqa: E402

from cube.config import ModelSpec, parse_params  # noqa: E402
from cube.demo_corpus import generate_demo_corpus  # noqa: E402
from cube.judges import Judge, load_dimensions, score_answers  # noqa: E402
from cube.llm import make_model  # noqa: E402


def judging_inputs(n_answers: int, offset: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A synthetic corpus, its template questions and one answer per question (rag set)."""
    corpus = generate_demo_corpus(n_answers + offset, "zh", seed=1).iloc[offset:].reset_index(drop=True)
    questions = pd.DataFrame({"question_id": [f"Q{i:05d}" for i in range(offset, offset + n_answers)],
                              "doc_id": corpus["doc_id"], "question": corpus["item_name"] + "需要什么材料？"})
    answers = pd.DataFrame({"question_id": questions["question_id"], "doc_id": corpus["doc_id"], "system": "bench",
                            "set": "rag", "answer": corpus["application_materials"].str[:200]})
    return corpus, questions, answers


def timed_run(spec: ModelSpec, cache: Path, inputs: tuple[pd.DataFrame, ...], dims: list) -> tuple[float, int, int]:
    corpus, questions, answers = inputs
    judge = Judge(name="bench", model=make_model(spec, cache))
    t0 = time.perf_counter()
    scores = score_answers(answers, [judge], dims, corpus, questions=questions, progress=False)
    elapsed = time.perf_counter() - t0
    return elapsed, int((scores["error_kind"] == "call").sum()), len(scores)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--sequential-sample", type=int, default=50)
    args = ap.parse_args()
    dims = load_dimensions(parse_params({"run": "bench", "judges": [
        {"name": "j", "model": {"provider": "offline", "model": "rubric"}}]}))
    n_answers = args.n // len(dims)
    batch = judging_inputs(n_answers)
    with ServerProcess(latency_s=args.latency, reply="score") as server, tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec(model="judge", base_url=server.url, max_concurrency=args.concurrency)
        timed_run(spec, None, judging_inputs(1, offset=n_answers + 100), dims)  # warm-up imports and jieba
        server.reset()

        elapsed, failed, n_judged = timed_run(spec, Path(tmp) / "cache.sqlite", batch, dims)
        assert n_judged == args.n - args.n % len(dims)
        stats = server.stats()
        throughput = n_judged / elapsed
        ideal = args.concurrency / args.latency
        print(f"judgments: {n_judged} ({n_answers} answers x {len(dims)} dimensions) at concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms")
        print(f"elapsed: {elapsed:.2f} s  failed: {failed}  server requests: {stats['requests_total']}  "
              f"server max in-flight: {stats['max_in_flight']}")
        print(f"throughput: {throughput:.1f} calls/s  ideal: {ideal:.1f} calls/s")

        seq_spec = spec.model_copy(update={"max_concurrency": 1})
        sample = judging_inputs(args.sequential_sample // len(dims), offset=n_answers)  # not in the cache
        seq_elapsed, _, n_seq = timed_run(seq_spec, Path(tmp) / "seq.sqlite", sample, dims)
        seq_total = seq_elapsed / n_seq * n_judged
        print(f"sequential: {n_seq} judgments in {seq_elapsed:.2f} s, extrapolated to {n_judged}: "
              f"{seq_total:.1f} s  speed-up: {seq_total / elapsed:.1f}x")

        before = server.stats()["requests_total"]
        cached_elapsed, _, _ = timed_run(spec, Path(tmp) / "cache.sqlite", batch, dims)
        new_requests = server.stats()["requests_total"] - before
        print(f"cached re-run of {n_judged}: {cached_elapsed:.2f} s, {new_requests} requests sent")
    print(f"throughput_ratio: {throughput / ideal:.2f}")


if __name__ == "__main__":
    main()
