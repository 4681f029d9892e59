"""Calls a fixed-n run makes with and without the unread bounds (issue 40, item 1).

With `analysis.bounds_of_missed: all` every question gets its zero and full answers and their
judgments; with `sample` (the default) a missed question gets them only in the judge gate's seeded
sample (`cube.systems.bounds`). This runs stages 01-03 of an offline run (the demo knowledge base,
template questions, two rubric judges, the default 4 dimensions) both ways at three retrievers:
BM25 TOP-1 (R@k about 0.5, the issue's goal: >= 1.4x fewer calls; its rag answer is the full
answer when retrieved, so W is 100), TOP-2, and the default TOP-8 (R@k about 0.8, ~1.14x). It
counts the calls an LLM answerer and jury would send: one answering call per answer row, one judge
call per score row (a judge scores one dimension per call by default; identical requests are one
call, and there are none here). The judge audit's calls (a capped share of the judge calls) are
left out. It also checks that W, CuBE and CuBE's interval are the same both ways.

    python benchmarks/unread_calls.py [--items 300] 2>/dev/null   # the stages' progress on stderr

The headline, last: the ratio of calls at R@k about 0.5.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml

from cube.run import evaluate, pipeline
from cube.run.notebook import open_run

JUDGES = [
    {"name": "rubric-lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
    {"name": "rubric-strict", "model": {"provider": "offline", "model": "rubric-strict"}},
]


def run_calls(tmp: Path, items: int, top_n: int, bounds_of_missed: str) -> dict:
    """Stages 01-03 of one run; its calls, R@k and figures."""
    name = f"top{top_n}-{bounds_of_missed}"
    params = tmp / f"{name}.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": name,
                "judges": JUDGES,
                "systems": [{"kind": "builtin", "name": "bm25", "top_n": top_n}],
                "corpus": {"n_items": items, "seed": 7},
                "questions": {"seed": 7},
                "analysis": {"bootstrap": 200, "bounds_of_missed": bounds_of_missed},
                "audit": {"questions": 0},
            }
        ),
        encoding="utf-8",
    )
    r = open_run(params, tmp / name)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(r)
    answers, scores = r.load("answers"), r.load("scores")
    result = evaluate.evaluate_run(r)["bm25"]
    jury = result.jury.iloc[0]
    boot = result.bootstrap
    ci = boot[(boot["judge"] == "jury") & (boot["metric"] == "cube_score")][["lo", "hi"]]
    return {
        "recall": result.recall_at_k,
        "answering": len(answers),
        "judging": len(scores),
        "calls": len(answers) + len(scores),
        "figures": (
            round(float(jury["weighted_score"]), 9),
            round(float(jury["cube_score"]), 9),
            tuple(round(float(x), 9) for x in ci.iloc[0]),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=300, help="knowledge-base items (questions)")
    args = ap.parse_args()
    ratios = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for top_n in (1, 2, 8):
            before = run_calls(tmp, args.items, top_n, "all")
            after = run_calls(tmp, args.items, top_n, "sample")
            same = before["figures"] == after["figures"]
            ratios[top_n] = before["calls"] / after["calls"]
            print(
                f"TOP-{top_n}: R@k {before['recall']:.3f}, {args.items} questions; calls before "
                f"{before['calls']} (answering {before['answering']}, judging {before['judging']}),"
                f" after {after['calls']} (answering {after['answering']}, judging "
                f"{after['judging']}): {ratios[top_n]:.3f}x fewer; W, CuBE and its interval "
                f"{'identical' if same else 'DIFFER'} {after['figures']}"
            )
            if not same:
                raise SystemExit(f"figures differ: {before['figures']} vs {after['figures']}")
    print(f"calls_ratio_default_rk: {ratios[8]:.3f}")
    print(f"calls_ratio_rk_0.5: {ratios[1]:.3f}")


if __name__ == "__main__":
    main()
