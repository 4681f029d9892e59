"""Dead or restarting: how often the breaker's death rule misjudges a local server (issue 38).

A server on this machine that answered and then refuses connections may have crashed (a
llama-cpp-python server's segmentation fault: every pending call should fail at once, named as
dead) or be restarting (the calls should wait and go through). Each trial sends a batch of
`--n` judge calls (concurrency 2, 5 attempts, backoff 0.05-0.1 s) to an OpenAI-compatible server
process on 127.0.0.1 (tests/openai_server.py), kills it after its 6th request, and either leaves
it dead (truth: dead) or starts it again on the same port after a downtime (truth: alive; 0.1,
0.3, 0.6 and 1.5 s: the last outlasts the death check's wait, so it is judged dead by design, and
its calls go through again only after the cool-down trial). A trial is judged "dead" when a
call's error names the server dead.

Per case it prints the trials judged dead, the calls lost (failed), the attempts the failed calls
made, and the seconds from the kill to the batch's end. The last line is the headline:
`misjudged: <trials judged wrongly, dead named alive or a restart named dead> of <trials>`.

    PYTHONPATH=. .venv/bin/python benchmarks/dead_or_restarting.py [--trials 5] [--n 40]

The code measured is the `cube` first on the path (PYTHONPATH), so an older checkout can be
measured with this script and test server.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.append(str(ROOT))  # after PYTHONPATH: the cube measured is the one it names

from openai_server import ServerProcess  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.llm import Request, make_model  # noqa: E402

CASES: tuple[tuple[str, float | None], ...] = (
    ("dead", None),
    ("restart 0.1 s", 0.1),
    ("restart 0.3 s", 0.3),
    ("restart 0.6 s", 0.6),
    ("restart 1.5 s", 1.5),  # longer than the death check waits (DEATH_CHECK_S): a known miss
)


def trial(downtime_s: float | None, n: int) -> dict[str, float]:
    """One batch against a server killed mid-batch (and restarted after `downtime_s`)."""
    first = ServerProcess(latency_s=0.05, reply="score").start()
    spec = ModelSpec(
        model="m",
        base_url=first.url,
        max_concurrency=2,
        max_attempts=5,
        backoff_base_s=0.05,
        backoff_max_s=0.1,
    )
    reqs = [Request(({"role": "user", "content": f"q {i}"},)) for i in range(n)]
    out: list = []
    with tempfile.TemporaryDirectory() as tmp:
        worker = threading.Thread(
            target=lambda: out.extend(
                make_model(spec, Path(tmp) / "c.sqlite").complete(
                    reqs, role="judging", progress=False
                )
            )
        )
        second = ServerProcess(latency_s=0.05, reply="score", port=first.port)
        try:
            worker.start()
            while first.stats()["requests_total"] < 6:
                time.sleep(0.01)
            assert first.proc is not None
            first.proc.kill()
            first.proc.wait()
            first.proc = None
            killed = time.monotonic()
            if downtime_s is not None:
                time.sleep(downtime_s)
                second.start()
            worker.join(timeout=120)
            after_s = time.monotonic() - killed
        finally:
            second.stop()
    failed = [r for r in out if not r.ok]
    return {
        "dead": float(any("server dead" in (r.error or "") for r in failed)),
        "lost": float(len(failed)),
        "attempts": float(sum(r.attempts for r in failed)),
        "after_s": after_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    logging.getLogger("cube").setLevel(logging.ERROR)
    wrong = total = 0
    for name, downtime in CASES:
        got = [trial(downtime, args.n) for _ in range(args.trials)]
        dead = int(sum(g["dead"] for g in got))
        wrong += (args.trials - dead) if downtime is None else dead
        total += args.trials
        print(
            f"{name:>14}: judged dead {dead}/{args.trials}; calls lost (median) "
            f"{statistics.median(g['lost'] for g in got):g} of {args.n}; attempts of the lost "
            f"calls (median) {statistics.median(g['attempts'] for g in got):g}; kill to batch end "
            f"(median) {statistics.median(g['after_s'] for g in got):.2f} s"
        )
    print(f"misjudged: {wrong} of {total}")


if __name__ == "__main__":
    main()
