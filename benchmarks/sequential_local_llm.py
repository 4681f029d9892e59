"""The sequential design with an LLM judge on a real local server, requests counted at the server
(issue 40's closing measure): `stop: verdict` against the fixed-n run of the same questions.

The params are params/default.yaml (Chinese demo corpus, extractive answerer, bands 40/60/80) with:
one system (bm25-top8, no TOP-N sweep), one dimension (`completeness`: stage 08 reads it),
`questions.limit` N, `audit.questions: 0`, 200 bootstrap resamples, `lang: en` (SmolLM2's
tokenizer makes a Chinese judge prompt ~2,100 tokens, over a 2,048 window), and a third judge:
SmolLM2-135M-Instruct (Q4_1 GGUF) on llama-cpp-python's server at URL (max_concurrency 1,
temperature 0, max_tokens 16, structured_output auto). The sequential run adds
`analysis.sequential: {stop: verdict, systems: primary, min_questions: 20, batch: 10}`. Each run
gets its own outputs folder (its own call cache). Requests are counted in the server's access log
(`--server-log`, the uvicorn lines `POST /v1/chat/completions ... 200` and `... 500`) before and
after each run; never run `cube plan` beside it (its tokenize requests would interleave).

Start the server first, e.g.
    python -m llama_cpp.server --model SmolLM2-135M-Instruct.Q4_1.gguf --port 8765 \
        --host 127.0.0.1 --model_alias local --n_ctx 4096 > server.log 2>&1 &
    PYTHONPATH=. python benchmarks/sequential_local_llm.py --server-log server.log [--questions 40]

Last line: `sequential_local_llm_requests: sequential S / fixed-n F` (answered + refused).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def params_for(mode: str, questions: int, outputs: Path, url: str) -> dict:
    """The run's params (module docstring): `mode` is `sequential` or `fixed`."""
    p = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    p.update(
        run=f"{mode}{questions}",
        lang="en",
        lexical={"tokenizer": "13a"},
        outputs_dir=str(outputs),
        systems=[{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
        dimensions=["completeness"],
        audit={"questions": 0},
    )
    p["questions"] = {**p["questions"], "limit": questions}
    p["analysis"] = {**p["analysis"], "bootstrap": 200}
    if mode == "sequential":
        p["analysis"]["sequential"] = {
            "stop": "verdict",
            "systems": "primary",
            "min_questions": 20,
            "batch": 10,
        }
    p["models"] = {
        "local-judge": {
            "provider": "openai",
            "model": "local",
            "base_url": url,
            "max_concurrency": 1,
            "structured_output": "auto",
            "temperature": 0,
            "max_tokens": 16,
            "timeout_s": 300,
            "breaker_threshold": 3,
        }
    }
    p["judges"] = [
        *p["judges"],
        {"name": "SmolLM2-135M", "model": "local-judge", "role": "a 135M local model (llama.cpp)"},
    ]
    return p


def requests(log: Path) -> dict[str, int]:
    """The chat requests the server's access log holds, by status."""
    text = log.read_text(errors="replace")
    codes = re.findall(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', text)
    return {code: codes.count(code) for code in sorted(set(codes))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-log", type=Path, required=True)
    parser.add_argument("--url", default="http://127.0.0.1:8765/v1")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--work", type=Path, default=Path("/tmp/sequential_local_llm"))
    args = parser.parse_args()
    sent = {}
    for mode in ("sequential", "fixed"):
        folder = args.work / mode
        path = args.work / f"{mode}.yaml"
        folder.mkdir(parents=True, exist_ok=True)
        params = params_for(mode, args.questions, folder / "outputs", args.url)
        path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
        before, t0 = requests(args.server_log), time.time()
        done = subprocess.run(
            [sys.executable, "-m", "cube.cli", "run", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        after = requests(args.server_log)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        sent[mode] = sum(delta.values())
        tail = [line for line in done.stdout.splitlines() if "CuBE" in line or "judged on" in line]
        print(
            f"{mode}: exit {done.returncode}, requests {delta}, {time.time() - t0:.0f} s wall; "
            + " | ".join(tail),
            flush=True,
        )
    print(
        f"sequential_local_llm_requests: sequential {sent['sequential']} / fixed-n {sent['fixed']}"
    )


if __name__ == "__main__":
    main()
