"""Adaptive concurrency against a rate-limited local server: share of the limit achieved, share of
429s.

The server (tests/openai_server.py, a child process, keep-alive HTTP/1.1) answers after a fixed
latency and rate-limits at R requests per second (a token bucket of 0.1 s; beyond it, HTTP 429
with `retry-after-ms`). N distinct calls go through `cube.llm` at `max_concurrency` C (default 64,
far above the R x latency the limit allows), so the client must find the right concurrency
itself (cube/llm/concurrency.py: AIMD). Printed: achieved calls/s over R, the 429s as a share of all
requests, and the limit's course (peak in flight, lowest and final limit, cuts).

    python benchmarks/adaptive_concurrency.py [--n 2000] [--rps 100] [--latency 0.1]
        [--concurrency 64]

The last line is the headline figure: `adaptive_share_of_limit: <achieved / R>`.

With `--base-url` (a running `cube serve`, which answers one request at a time) N distinct short
judge-like calls go to that server instead, at the default `max_concurrency` of a local URL (64), in
batches of `--batch` (the model's later batches start where the earlier settled). Printed: the
limit's course per batch, and last `settled_limit: <final limit>` (goal: 1-2).

    python benchmarks/adaptive_concurrency.py --base-url http://127.0.0.1:8765/v1
        [--n 60] [--batch 30]

With `--trials T` the flat-rate detector's error rate on known truth, simulated in asyncio (no
HTTP): T servers that answer one call at a time and T that answer all at once, each call's service
time drawn log-normal (median 20 ms, `--sigma` 1 by default: spread like LLM calls of 0.4-15 s), 160
calls per trial at max_concurrency 64. A miss: a one-at-a-time server whose last 60 calls had more
than 2 in flight at some answer; a false alarm: a parallel server whose limit ended below 8. Last
line: `flat_detector_error_rate: <(misses + false alarms) / 2T>`.

    python benchmarks/adaptive_concurrency.py --trials 40 [--sigma 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from openai_server import ServerProcess  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.llm import Request, make_model  # noqa: E402
from cube.llm.concurrency import AdaptiveLimit  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rps", type=float, default=100.0)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument(
        "--base-url", default=None, help="a real one-at-a-time server (cube serve) instead"
    )
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument(
        "--trials",
        type=int,
        default=0,
        help="simulated known-truth trials of the flat-rate detector",
    )
    ap.add_argument(
        "--sigma", type=float, default=1.0, help="log-normal sigma of the simulated service times"
    )
    args = ap.parse_args()
    if args.trials:
        return detector(args.trials, args.sigma)
    if args.base_url:
        return real_server(args.base_url, args.n, args.batch)
    with ServerProcess(latency_s=args.latency, reply="score", rate_limit_rps=args.rps) as server:
        spec = ModelSpec(
            model="m",
            base_url=server.url,
            max_concurrency=args.concurrency,
            min_concurrency=1,
            max_attempts=50,
            backoff_max_s=5,
            timeout_s=30,
        )
        model = make_model(spec)
        requests = [Request(({"role": "user", "content": f"call {i}"},)) for i in range(args.n)]
        t0, c0 = time.perf_counter(), time.process_time()
        out = model.complete(requests, role="judging", progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        stats = server.stats()
    ok = sum(r.ok for r in out)
    total = stats["requests_total"]
    print(
        f"{args.n} calls, {ok} ok, rate limit "
        f"{args.rps:g}/s, latency {args.latency * 1000:.0f} ms, "
        f"max_concurrency {args.concurrency} (ideal in flight {args.rps * args.latency:.0f})"
    )
    print(f"wall {wall:.1f} s, client CPU {cpu / args.n * 1000:.2f} ms per call")
    print(f"concurrency: {model.concurrency}")
    print(
        f"429_share_of_requests: "
        f"{stats['rate_limited'] / max(total, 1):.3f} ({stats['rate_limited']} of {total})"
    )
    print(f"adaptive_share_of_limit: {ok / wall / args.rps:.2f}")


async def _simulate(
    serial: bool, rng: random.Random, sigma: float, n: int = 160
) -> tuple[AdaptiveLimit, list[int]]:
    lim, server, seen = AdaptiveLimit(1, 64), asyncio.Lock(), []
    times = [rng.lognormvariate(math.log(0.02), sigma) for _ in range(n)]

    async def one(t: float) -> None:
        async with lim:
            if serial:
                async with server:
                    await asyncio.sleep(t)
            else:
                await asyncio.sleep(t)
            seen.append(lim.in_flight)
            lim.success()

    await asyncio.gather(*(one(t) for t in times))
    return lim, seen


def detector(trials: int, sigma: float) -> None:
    rng = random.Random(7)
    misses = [
        max(seen[-60:]) > 2
        for lim, seen in (asyncio.run(_simulate(True, rng, sigma)) for _ in range(trials))
    ]
    alarms = [
        lim.limit < 8
        for lim, seen in (asyncio.run(_simulate(False, rng, sigma)) for _ in range(trials))
    ]
    print(
        f"service time sigma {sigma:g}; {trials} one-at-a-time servers: "
        f"{sum(misses)} not settled at <= 2 in flight over their last 60 calls"
    )
    print(f"{trials} parallel servers: {sum(alarms)} ended with a limit below 8")
    print(f"flat_detector_error_rate: {(sum(misses) + sum(alarms)) / (2 * trials):.3f}")


def real_server(url: str, n: int, batch: int) -> None:
    model = make_model(
        ModelSpec(model="local", base_url=url, temperature=0, max_tokens=8, timeout_s=300)
    )
    reqs = [
        Request(
            (
                {
                    "role": "user",
                    "content": f"Rate from 0 to 10 how well '{i} apples' answers 'how many "
                    f"apples are there?'. Reply with the score only.",
                },
            )
        )
        for i in range(n)
    ]
    t0 = time.perf_counter()
    for k in range(0, n, batch):
        out = model.complete(reqs[k : k + batch], role="judging", progress=False)
        s = model.concurrency
        print(
            f"batch {k // batch + 1}: {sum(r.ok for r in out)} of "
            f"{len(out)} ok, {time.perf_counter() - t0:.0f} s; "
            f"peak in flight {s['peak_in_flight']}, final limit "
            f"{s['final_limit']}, flat steps {s['flat_steps']}, "
            f"timeouts {s['timeouts']}"
        )
    print(f"concurrency: {model.concurrency}")
    print(f"settled_limit: {model.concurrency['final_limit']}")


if __name__ == "__main__":
    main()
