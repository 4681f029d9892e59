"""Share of the judge prompts' tokens that a local llama.cpp server serves from its prefix cache.

llama-cpp-python's server keeps the last prompt's KV cache and reuses its longest common prefix with
the next prompt; it reports no `cached_tokens`, but its log (verbose, the default) says
"Llama.generate: N prefix-match hit, remaining M prompt tokens to eval" for each reuse. Here a
server is started on a free port with its log in a temporary file (`cube serve`'s `LocalServer`, the
SmolLM2-135M GGUF), and the judge calls of N questions x 3 answer sets (zero, rag, full: the same
question and document, three answers) x 4 dimensions go to it (fresh cache each, the default
adaptive limit) twice:

- `built order`: as `cube.judges.judge_requests` builds them (per answer, its four dimensions),
  through `cube.llm` as they are (how the judge sent them before it sorted them);
- `judge's order`: through `cube.judges.score_answers`, which sends a judge's calls (its pilot's,
  then the rest) in prompt-text order, so one dimension's calls follow each other and so do the
  three answers of one question.

Printed per order: the prompt tokens the server reported (usage), the tokens it reused, and their
share. The judge prompts put their fixed part first (instructions, then question, source and answer
last; tests/llm/test_local_llm.py checks that two prompts for different questions share the whole
instruction block), so a cache can only hit when the same dimension's prompts follow each other.

    .venv/bin/python benchmarks/local_llm_prefix_cache.py [--questions 1]

Needs `make local-llm` (else a NaN headline). Last line: `prefix_cache_hit_share: x`, in the
judge's order.
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import tempfile
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

HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")


def inputs(n: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """n questions, each answered three ways (zero: a refusal, rag: the materials, full: the
    fee)."""
    corpus = generate_demo_corpus(n, "en", seed=3)
    questions = pd.DataFrame(
        {
            "question_id": [f"Q{i:05d}" for i in range(n)],
            "doc_id": corpus["doc_id"],
            "question": "What do I need to bring to apply for " + corpus["item_name"] + "?",
        }
    )
    sets = {
        "zero": pd.Series("I do not know.", index=corpus.index),
        "rag": corpus["application_materials"].str[:200],
        "full": corpus["fee_standard"].astype(str).str[:200],
    }
    answers = pd.concat(
        [
            pd.DataFrame(
                {
                    "question_id": questions["question_id"],
                    "doc_id": corpus["doc_id"],
                    "system": "bench",
                    "set": k,
                    "answer": v,
                }
            )
            for k, v in sets.items()
        ],
        ignore_index=True,
    )
    return corpus, questions, answers


def hits(log: Path, start: int) -> int:
    text = log.read_text(encoding="utf-8", errors="replace")[start:]
    return sum(int(m.group(1)) for m in HIT.finditer(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--questions",
        type=int,
        default=1,
        help="questions (x 3 sets x 4 dimensions calls per order)",
    )
    args = ap.parse_args()
    missing = missing_parts()
    if missing:
        print("local_llm_prefix_cache: not measured: " + "; ".join(missing), file=sys.stderr)
        print("prefix_cache_hit_share: nan")
        return
    params = parse_params(
        {
            "run": "bench",
            "lang": "en",
            "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
            "dimensions": ["relevance", "specificity", "completeness", "quality"],
        }
    )
    dims = load_dimensions(params)
    corpus, questions, answers = inputs(args.questions)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shares = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalServer(port=port, log=Path(tmp) / "server.log") as server,
    ):
        log = Path(tmp) / "server.log"
        spec = ModelSpec(
            model="local",
            base_url=server.base_url,
            temperature=0,
            max_tokens=16,
            timeout_s=300,
            structured_output="on",
        )
        records = judge_inputs(answers, corpus, questions).to_dict("records")
        _, requests, _ = judge_requests(
            Judge(name="SmolLM2-135M", model=make_model(spec)), records, dims
        )

        def built(cache: Path) -> list[int]:
            out = make_model(spec, cache).complete(requests, role="judging", progress=False)
            return [r.input_tokens for r in out if r.ok]

        def judged(cache: Path) -> list[int]:
            judge = Judge(name="SmolLM2-135M", model=make_model(spec, cache))
            scores = score_answers(
                answers, [judge], dims, corpus, questions=questions, progress=False
            )
            return [int(n) for n in scores.loc[scores["error_kind"] != "call", "input_tokens"]]

        for k, (name, send) in enumerate((("built order", built), ("judge's order", judged))):
            start = len(log.read_text(encoding="utf-8", errors="replace"))
            tokens = send(Path(tmp) / f"cache{k}.sqlite")
            total, reused = sum(tokens), hits(log, start)
            shares[name] = reused / total if total else float("nan")
            print(
                f"{name}: {len(tokens)} calls answered of "
                f"{len(requests)}; prompt tokens {total}, reused from the "
                f"prefix cache {reused}: share {shares[name]:.3f}",
                flush=True,
            )
    share = shares["judge's order"]
    print(f"prefix_cache_hit_share: {share:.3f}")


if __name__ == "__main__":
    main()
