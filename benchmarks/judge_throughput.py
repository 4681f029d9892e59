"""Judge-call throughput of `cube.llm` against a local OpenAI-compatible server.

The server (tests/openai_server.py) runs in a child process with a fixed latency per call
(default 100 ms), so it does not compete with the client for the GIL. We send N judge-like
requests (a judge prompt with a question, a ~1,000-character document and an answer; the
server replies `Score: k`) at concurrency C through `make_model(...).complete` with a fresh
temporary cache, and compare with the ideal C / latency. A sequential loop (concurrency 1)
is timed on a small sample and extrapolated to N. Finally the same N are re-run fully cached.

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

from openai_server import ServerProcess  # noqa: E402

from cube.config import ModelSpec  # noqa: E402
from cube.llm import Request, make_model  # noqa: E402

JUDGE_PROMPT = (
    "You are grading an answer to a citizen's question about a public service.\n"
    "Rate its {dimension} from 0 to 10 and reply exactly as 'Score: <integer>'.\n\n"
    "Question: {question}\n\nReference document:\n{document}\n\nAnswer: {answer}"
)


def judge_requests(n: int) -> list[Request]:
    """N distinct judge-like requests (deterministic)."""
    out = []
    for i in range(n):
        document = (f"Item {i}: residence permit renewal. Handling agency: district office {i % 17}. "
                    "Requirements: valid ID, proof of address, two photos. Fee: none. ") * 6
        prompt = JUDGE_PROMPT.format(
            dimension=("relevance", "specificity", "completeness", "quality")[i % 4],
            question=f"What do I need to renew residence permit number {i}?",
            document=document[:1000],
            answer=f"Bring your ID, proof of address and two photos to district office {i % 17}.",
        )
        out.append(Request(messages=({"role": "user", "content": prompt},), template_version="bench-v1"))
    return out


def timed_run(spec: ModelSpec, cache: Path, batch: list[Request]) -> tuple[float, int]:
    t0 = time.perf_counter()
    rs = make_model(spec, cache).complete(batch, role="judging", desc="judge", progress=False)
    elapsed = time.perf_counter() - t0
    failed = sum(not r.ok for r in rs)
    return elapsed, failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--sequential-sample", type=int, default=50)
    args = ap.parse_args()
    batch = judge_requests(args.n)
    with ServerProcess(latency_s=args.latency, reply="score") as server, tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec(model="judge", base_url=server.url, max_concurrency=args.concurrency)
        make_model(spec).complete(judge_requests(1), role="judging", progress=False)  # warm-up imports
        server.reset()

        elapsed, failed = timed_run(spec, Path(tmp) / "cache.sqlite", batch)
        stats = server.stats()
        throughput = args.n / elapsed
        ideal = args.concurrency / args.latency
        print(f"calls: {args.n} at concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms")
        print(f"elapsed: {elapsed:.2f} s  failed: {failed}  server requests: {stats['requests_total']}  "
              f"server max in-flight: {stats['max_in_flight']}")
        print(f"throughput: {throughput:.1f} calls/s  ideal: {ideal:.1f} calls/s")

        seq_spec = spec.model_copy(update={"max_concurrency": 1})
        sample = judge_requests(args.n + args.sequential_sample)[args.n:]  # not in the cache
        seq_elapsed, _ = timed_run(seq_spec, Path(tmp) / "seq.sqlite", sample)
        seq_total = seq_elapsed / len(sample) * args.n
        print(f"sequential: {len(sample)} calls in {seq_elapsed:.2f} s, extrapolated to {args.n}: "
              f"{seq_total:.1f} s  speed-up: {seq_total / elapsed:.1f}x")

        before = server.stats()["requests_total"]
        cached_elapsed, _ = timed_run(spec, Path(tmp) / "cache.sqlite", batch)
        new_requests = server.stats()["requests_total"] - before
        print(f"cached re-run of {args.n}: {cached_elapsed:.2f} s, {new_requests} requests sent")
    print(f"throughput_ratio: {throughput / ideal:.2f}")


if __name__ == "__main__":
    main()
