"""`cube plan`: what a run of the params will send, before any call (`cube.run.plan`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cube.cli.common import load_params, run_cache
from cube.config.project import project_root


def add_parser(sub: argparse._SubParsersAction) -> None:
    pl = sub.add_parser(
        "plan",
        help="what a run will send, before any call: calls, tokens, cost and time per role "
        "and model",
        description="Count the calls a run of the params makes, per role and model, from "
        "the same corpus, questions, systems, judges, dimensions and samples the stages use (no "
        "call is sent); prompt tokens by the model's tokenizer where one is known (a local "
        "server's GGUF read here, its tokenize route one request at a time, tiktoken) or a "
        "stated estimate; completion tokens estimated "
        "(and their max_tokens ceiling); cost at the params' prices (judges also at the batch "
        "prices); time at the model's concurrency and the median latency of its cached calls (or "
        "of --pilot calls). `cube run` records the same plan and the manifest sets it beside what "
        "the run reported.",
    )
    pl.add_argument("params", type=Path, help="params YAML file")
    pl.add_argument(
        "--pilot",
        type=int,
        default=0,
        metavar="N",
        help="send up to N of each LLM model's planned "
        "calls to measure its latency when the cache holds none (they are cached: the run reuses "
        "them)",
    )
    pl.add_argument("--json", action="store_true", help="print the plan as JSON records")
    pl.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.run.plan import build_plan, plan_text
    from cube.run.sequential import with_least

    params = load_params(args.params)
    cache = run_cache(params)
    plan = build_plan(params, base_dir=project_root(), cache_path=cache, pilot=args.pilot)
    plan = with_least(plan, params, base_dir=project_root(), cache_path=cache)  # sequential
    print(plan.to_json(orient="records", indent=1) if args.json else plan_text(plan))
    return 0
