"""The share of the judge prompts a prefix cache could serve, estimated from their layout.

`cube.llm.usage.prefix_share` (what `cube plan` prints as "prefix ~x % shareable"): the prompts
in text order (the order `cube.judges.scoring` sends a judge's calls in), each sharing its longest
common prefix with the one before; characters stand for tokens. Built for N demo questions x 3
answer sets (zero, rag, full; benchmarks/local_llm_prefix_cache.py's material) x the four default
dimensions, and S systems (each adds a rag answer; zero and full are shared), for:

- `per-dimension, built order`: the calls as `judge_requests` builds them (per answer, its
  dimensions), a cache holding the last prompt;
- `per-dimension, text order`: the packaged prompts as sent (dimension instructions and rubric,
  question, source, answer last);
- `one call (all_dimensions)`: one prompt per answer listing every dimension;
- `what-if: dimension after the source`: the per-dimension prompts with the dimension's
  instructions moved after the source block (question and source first, shared by every
  dimension of a question). Not cube's layout: it would move the paper's verbatim relevance prompt
  and change every packaged prompt's cache key; measured here to say what it would gain.

Printed per layout: prompts, characters, the share and the characters left to evaluate.

    PYTHONPATH=. python benchmarks/prompt_prefix_layout.py [--questions 50] [--systems 3]

Last line: `prefix_share_text_order: x`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import pandas as pd  # noqa: E402
from local_llm_prefix_cache import inputs  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.config.params import parse_params  # noqa: E402
from cube.judges import Judge, load_dimensions  # noqa: E402
from cube.judges.scoring import judge_inputs, judge_requests  # noqa: E402
from cube.llm import make_model  # noqa: E402
from cube.llm.usage import _common_prefix, prefix_share  # noqa: E402

SPEC = ModelSpec(model="m", base_url="http://127.0.0.1:9/v1")  # never contacted: prompts only


def _systems(answers: pd.DataFrame, n: int) -> pd.DataFrame:
    """The answers with n systems: each its own rag answer (a suffix), zero and full shared."""
    bounds = answers[answers["set"] != "rag"]
    rags = [
        answers[answers["set"] == "rag"].assign(
            system=f"s{k}", answer=lambda d, k=k: d["answer"] + f" (system {k})"
        )
        for k in range(n)
    ]
    return pd.concat([bounds, *rags], ignore_index=True)


def _prompts(records: list, dims: list, all_dimensions: bool) -> list[str]:
    judge = Judge(name="j", model=make_model(SPEC), all_dimensions=all_dimensions)
    _, requests, _ = judge_requests(judge, records, dims)
    return ["\n".join(m["content"] for m in r.messages) for r in requests]


def _dimension_after_source(prompt: str) -> str:
    """The prompt with its text before the fence notice (the dimension's instructions and
    rubric) moved after the source block."""
    notice = prompt.index("The material to evaluate follows")
    cut = prompt.index("\n", prompt.index("</source-")) + 1
    return prompt[notice:cut] + prompt[:notice] + prompt[cut:]


def _in_order(prompts: list[str]) -> float:
    """The share served when the prompts go in the order given (a cache holding the last)."""
    total = sum(map(len, prompts))
    shared = sum(_common_prefix(a, b) for a, b in zip(prompts, prompts[1:], strict=False))
    return shared / total if total else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--systems", type=int, default=3)
    args = ap.parse_args()
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
    answers = _systems(answers, args.systems)
    records = judge_inputs(answers, corpus, questions).to_dict("records")
    per = _prompts(records, dims, all_dimensions=False)
    one = _prompts(records, dims, all_dimensions=True)
    layouts = {
        "per-dimension, built order": (per, _in_order(per)),
        "per-dimension, text order": (per, prefix_share(per)),
        "one call (all_dimensions)": (one, prefix_share(one)),
        "what-if: dimension after the source": (
            moved := [_dimension_after_source(p) for p in per],
            prefix_share(moved),
        ),
    }
    for name, (prompts, share) in layouts.items():
        chars = sum(map(len, prompts))
        print(
            f"{name:<38} prompts {len(prompts):>5}  characters {chars:>9}  share {share:.3f}  "
            f"left to evaluate {chars * (1 - share):>9.0f}"
        )
    print(f"prefix_share_text_order: {layouts['per-dimension, text order'][1]:.3f}")


if __name__ == "__main__":
    main()
