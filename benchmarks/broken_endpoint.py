"""Time-to-failure and requests sent against a broken LLM endpoint (issue 10).

For each broken-endpoint case (401, connection refused, empty choices, unknown model) a batch
of N judge calls goes through `cube.llm` with the default ModelSpec retry settings against a
local OpenAI-compatible server (tests/openai_server.py) on 127.0.0.1; the script reports how
many requests the client tried and how many reached the server, how many calls failed and how long
the batch took. It also times the preflight check (`cube.llm.preflight.check_endpoints`), and a
whole `cube run` of the default params with an LLM judge on that endpoint (it now exits 2 at its
preflight).

    .venv/bin/python benchmarks/broken_endpoint.py [--n 181] [--concurrency 16]

The last line is the headline: `attempts_total: <requests tried, summed over the four cases>`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from openai_server import OpenAIServer, broken_endpoint  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.config.params import parse_params  # noqa: E402
from cube.llm import Request, make_model  # noqa: E402

CASES = ("401", "refused", "no_choices", "unknown_model")


def run_case(case: str, n: int, concurrency: int) -> dict[str, float]:
    with OpenAIServer(strict_model=True) as server:
        url, model = broken_endpoint(server, case, "test-model")
        spec = ModelSpec(model=model, base_url=url, max_concurrency=concurrency)
        requests = [
            Request(messages=({"role": "user", "content": f"judge {i}"},)) for i in range(n)
        ]
        t0 = time.perf_counter()
        out = make_model(spec).complete(requests, role="judging", progress=False)
        batch_s = time.perf_counter() - t0
        sent = server.requests_total
        failed = sum(not r.ok for r in out)
        attempts = sum(
            r.attempts for r in out
        )  # requests tried, counted by the client (refused: none arrive)
        try:
            from cube.llm.preflight import check_endpoints
        except ImportError:  # before the preflight existed
            preflight_s = float("nan")
        else:
            params = parse_params(
                {
                    "run": "b",
                    "models": {"m": spec.model_dump()},
                    "judges": [{"name": "j", "model": "m"}],
                }
            )
            t0 = time.perf_counter()
            problems = check_endpoints(params, timeout_s=10)
            preflight_s = time.perf_counter() - t0
            assert len(problems) == 1, problems
        run_s, code = cube_run(spec)
    return {
        "requests_sent": sent,
        "attempts": attempts,
        "failed_calls": failed,
        "batch_s": batch_s,
        "preflight_s": preflight_s,
        "run_s": run_s,
        "exit": code,
    }


def cube_run(spec: ModelSpec) -> tuple[float, int]:
    """`cube run` of the default params with an LLM judge on the broken endpoint: time to exit."""
    import contextlib
    import io
    import tempfile

    import yaml

    from cube.cli import main as cube_main

    with tempfile.TemporaryDirectory() as tmp:
        params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
        params.update(
            run="broken",
            outputs_dir=str(Path(tmp) / "outputs"),
            models={"llm": spec.model_dump(exclude_defaults=True)},
            judges=params["judges"] + [{"name": "llm", "model": "llm"}],
        )
        path = Path(tmp) / "p.yaml"
        path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            code = cube_main(["run", str(path), "--notebooks", str(ROOT / "notebooks")])
        return time.perf_counter() - t0, code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--n", type=int, default=181, help="calls in the batch (the issue's run sent 181)"
    )
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    total = 0
    for case in CASES:
        r = run_case(case, args.n, args.concurrency)
        total += int(r["attempts"])
        print(
            f"{case}: requests_received={r['requests_sent']} "
            f"attempts={r['attempts']} failed_calls={r['failed_calls']}/{args.n} "
            f"batch_s={r['batch_s']:.2f} preflight_s={r['preflight_s']:.3f} "
            f"cube_run_exit={r['exit']} cube_run_s={r['run_s']:.2f}",
            flush=True,
        )
    print(f"attempts_total: {total}")


if __name__ == "__main__":
    main()
