"""Judge-call throughput of `cube.llm` against a local keep-alive OpenAI-compatible server.

The server (tests/openai_server.py: HTTP/1.1 keep-alive, listen backlog 1024) runs in a child
process with a fixed latency per call, so it does not compete with the client for the GIL. N
judgments go through the real judging pipeline, `cube.judges.score_answers` (the packaged zh
prompts with a synthetic service guide as source, reply parsing, the scores table): N / 4
answers x the four paper dimensions, with a fresh temporary cache, at each concurrency C with its
latency L, compared with the ideal C / L. Per C:

- `steady`: the adaptive limit starts at C (`min_concurrency = C`): what the client sustains;
- `slow start`: a cache folder never used (no learned limit): the start at 4, doubling per window
  of answered calls (~log2(C/4) x L before C is in flight): what a first run of this size gets;
- `learned start`: the next run in the same cache folder (other answers): it starts from the limit
  `slow start` stored in `concurrency_limits.json` (`cube.llm.learned_limit`; slow start from half
  of it);
- `bare openai SDK`: the same number of calls through `AsyncOpenAI` and a semaphore alone, the
  floor of CPU per call for any client that uses the SDK (as this project must);
- client CPU per call: this process's CPU time (the server is another process) / calls.

Each of the `rounds` interleaves the four runs (the machine's load drifts between them); the share
of the bare loop is each run's rate over its round's bare loop, printed min / median / max over the
rounds with the load average before and after.

The default latencies (0.1 s at 32, 1.0 s at 256) keep the ideal rate within one client core:
at 256 and 0.1 s the ideal is 2,560 calls/s, i.e. 2.5 cores at 1 ms of CPU per call, which would
measure the machine, not the client's concurrency (real judge calls take 0.5-5 s).

    .venv/bin/python benchmarks/judge_throughput.py [--concurrency 32,256] [--latency 0.1,1.0]
        [--windows 60] [--rounds 3]

N per C is `windows` x C (60 latency windows of calls: 1,920 judgments at 32, close to the 2,000 of
the earlier benchmark; fewer windows weigh the fixed start-up of a run more). The last line is the
headline figure: `throughput_ratio: <the lowest steady ratio>`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import pandas as pd  # noqa: E402
from openai_server import ServerProcess  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.config.params import parse_params  # noqa: E402
from cube.judges import Judge, load_dimensions, score_answers  # noqa: E402
from cube.kb.demo import generate_demo_corpus  # noqa: E402
from cube.llm import make_model  # noqa: E402


def judging_inputs(
    n_answers: int, offset: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A synthetic corpus, its template questions and one answer per question (rag set)."""
    corpus = (
        generate_demo_corpus(n_answers + offset, "zh", seed=1).iloc[offset:].reset_index(drop=True)
    )
    questions = pd.DataFrame(
        {
            "question_id": [f"Q{i:05d}" for i in range(offset, offset + n_answers)],
            "doc_id": corpus["doc_id"],
            "question": corpus["item_name"] + "需要什么材料？",
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


def timed_run(
    spec: ModelSpec, cache: Path | None, inputs: tuple[pd.DataFrame, ...], dims: list
) -> tuple[float, float, int, int, dict]:
    """(wall s, client CPU s, failed calls, judgments, the model's concurrency summary)."""
    corpus, questions, answers = inputs
    judge = Judge(name="bench", model=make_model(spec, cache))
    t0, c0 = time.perf_counter(), time.process_time()
    scores = score_answers(answers, [judge], dims, corpus, questions=questions, progress=False)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return (
        elapsed,
        cpu,
        int((scores["error_kind"] == "call").sum()),
        len(scores),
        judge.model.concurrency,
    )


def bare_sdk(url: str, concurrency: int, n: int) -> tuple[float, float]:
    """The floor any client of the `openai` SDK pays: (wall s, CPU s) of n bare chat calls through
    `AsyncOpenAI` (aiohttp transport when installed) and a semaphore, without cube (no prompts,
    cache, parsing or adaptive limit)."""
    import asyncio

    import openai

    async def go() -> None:
        http = openai.DefaultAioHttpClient() if hasattr(openai, "DefaultAioHttpClient") else None
        client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", http_client=http, max_retries=0)
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                await client.chat.completions.create(
                    model="judge", messages=[{"role": "user", "content": f"q{i}"}]
                )

        await asyncio.gather(*(one(i) for i in range(n)))
        await client.close()

    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(go())
    return time.perf_counter() - t0, time.process_time() - c0


def _spread(xs: list[float]) -> str:
    """min / median / max."""
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"


def one_round(
    server: ServerProcess, spec: ModelSpec, n_answers: int, dims: list, tmp: Path, r: int
) -> dict[str, tuple[float, float, dict]]:
    """One interleaved round: (calls/s, client CPU s per call, concurrency summary) per label.
    Every run judges other answers (nothing cached between runs); `slow start` and `learned start`
    share a cache folder of their own (`learned start` reads the limit `slow start` stored)."""
    conc = spec.max_concurrency
    out = {}
    runs = (
        ("steady", conc, f"steady-{conc}-{r}"),
        ("slow start", 1, f"learn-{conc}-{r}"),
        ("learned start", 1, f"learn-{conc}-{r}"),
    )
    for i, (label, start, folder) in enumerate(runs):
        server.reset()
        batch = judging_inputs(n_answers, offset=(3 * r + i + 1) * n_answers)
        cache = tmp / folder / "cache.sqlite"
        cache.parent.mkdir(exist_ok=True)
        elapsed, cpu, failed, n, c = timed_run(
            spec.model_copy(update={"min_concurrency": start}), cache, batch, dims
        )
        if failed:
            raise SystemExit(f"{label}: {failed} calls failed")
        out[label] = (n / elapsed, cpu / n, c)
    n = n_answers * len(dims)
    elapsed, cpu = bare_sdk(server.url, conc, n)
    out["bare openai SDK"] = (n / elapsed, cpu / n, {})
    return out


def measure(
    concurrency: int, latency: float, windows: int, dims: list, tmp: Path, rounds: int = 1
) -> float:
    n_answers = max(1, windows * concurrency // len(dims))
    with ServerProcess(latency_s=latency, reply="score") as server:
        spec = ModelSpec(model="judge", base_url=server.url, max_concurrency=concurrency)
        timed_run(spec, None, judging_inputs(1, offset=0), dims)  # warm-up imports and jieba
        ideal = concurrency / latency
        print(
            f"concurrency {concurrency}, server latency "
            f"{latency * 1000:.0f} ms: ideal {ideal:.0f} calls/s, "
            f"{n_answers * len(dims)} judgments per run, {rounds} interleaved round(s); "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        results = [one_round(server, spec, n_answers, dims, tmp, r) for r in range(rounds)]
        print(f"  load average after: {os.getloadavg()[0]:.1f}")
        bare = [res["bare openai SDK"] for res in results]
        for label in ("steady", "slow start", "learned start", "bare openai SDK"):
            runs = [res[label] for res in results]
            share = [run[0] / b[0] for run, b in zip(runs, bare, strict=True)]
            cpu = [run[1] / b[1] for run, b in zip(runs, bare, strict=True)]
            starts = sorted({run[2].get("start") for run in runs if run[2]})
            print(
                f"  {label:15}: of ideal {_spread([run[0] / ideal for run in runs])}; "
                f"of the bare loop {_spread(share)}; client CPU "
                f"{_spread([run[1] * 1000 for run in runs])} ms/call = "
                f"{_spread(cpu)} x the bare loop" + (f"; start {starts}" if starts else "")
            )
        return min(res["steady"][0] / ideal for res in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="32,256", help="comma-separated concurrencies")
    ap.add_argument(
        "--latency", default="0.1,1.0", help="server latency (s) per concurrency, comma-separated"
    )
    ap.add_argument("--windows", type=int, default=60, help="calls per run = windows x concurrency")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (min/median/max)")
    args = ap.parse_args()
    concs = [int(x) for x in args.concurrency.split(",")]
    lats = [float(x) for x in args.latency.split(",")]
    if len(lats) != len(concs):
        raise SystemExit(f"--latency: {len(lats)} value(s) for {len(concs)} concurrencies")
    dims = load_dimensions(
        parse_params(
            {
                "run": "bench",
                "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
            }
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        steady = [
            measure(c, lat, args.windows, dims, Path(tmp), args.rounds)
            for c, lat in zip(concs, lats, strict=True)
        ]
    print(f"throughput_ratio: {min(steady):.2f}")


if __name__ == "__main__":
    main()
