"""Duplicate requests when two processes share one LLM call cache (issue 10: two concurrent
runs paid 2,192 requests for 1,112 unique calls).

Two worker processes start at the same time and ask the same N calls through `cube.llm`, with
the same `cache.sqlite`, against a local OpenAI-compatible server in a third process
(tests/openai_server.py, fixed latency). The server counts every request and every distinct
request body; a duplicate is a request beyond the first for a body.

    .venv/bin/python benchmarks/concurrent_cache.py [--n 400] [--concurrency 8] [--latency 0.05]

The last line is the headline: `duplicate_requests: <requests - unique calls>`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def worker(url: str, cache: str, n: int, concurrency: int) -> None:
    from cube.config.model_spec import ModelSpec
    from cube.llm import Request, make_model

    spec = ModelSpec(model="m", base_url=url, max_concurrency=concurrency)
    reqs = [Request(messages=({"role": "user", "content": f"shared call {i}"},)) for i in range(n)]
    out = make_model(spec, Path(cache)).complete(reqs, role="judging", progress=False)
    print(sum(r.ok for r in out), sum(r.cached for r in out), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--worker", nargs=2, metavar=("URL", "CACHE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.n, args.concurrency)

    from openai_server import ServerProcess

    with ServerProcess(latency_s=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        cache = str(Path(tmp) / "cache.sqlite")
        cmd = [
            sys.executable,
            __file__,
            "--n",
            str(args.n),
            "--concurrency",
            str(args.concurrency),
            "--worker",
            server.url,
            cache,
        ]
        t0 = time.perf_counter()
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=600)[0].split() for p in procs]
        elapsed = time.perf_counter() - t0
        stats = server.stats()
    total, unique = stats["requests_total"], len(stats["body_counts"])
    for i, (ok, cached) in enumerate(outs):
        print(f"worker {i}: ok={ok}/{args.n} served_from_cache_or_peer={cached}")
    print(f"requests={total} unique_calls={unique} elapsed_s={elapsed:.2f}")
    print(f"duplicate_requests: {total - unique}")


if __name__ == "__main__":
    main()
