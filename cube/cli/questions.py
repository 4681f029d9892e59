"""`cube questions`: write the run's question set for a system called elsewhere (its answers come
back with `kind: imported`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cube.cli.common import load_params, preflight, run_cache
from cube.config.project import project_root


def add_parser(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "questions",
        help="write the run's question set (CSV or JSONL) for a system called elsewhere; import "
        "its answers with `kind: imported`",
        description="Build the knowledge base and the question set exactly as `cube run` does "
        "(a `questions.generator: llm` set sends its question-writing calls, cached: the run asks "
        "the same questions) and write them with the columns the import reads: question_id, "
        "question, lang, and the empty answer and retrieved_doc_ids to fill (the gold document is "
        "left out). Have your system answer them, then import the file with a system "
        "`{kind: imported, path: FILE}` (docs/tutorials/own-system.md).",
    )
    q.add_argument("params", type=Path, help="params YAML file")
    q.add_argument("--out", type=Path, required=True, help="output file, .csv or .jsonl")
    q.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file (by default it is kept: it may hold answers already)",
    )
    q.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """`cube questions`: 0 written, 2 the file exists (without --force) or the set cannot be
    made."""
    from cube.run.pipeline import question_set
    from cube.run.question_file import write_question_file

    shown = os.path.relpath(args.out, args.cwd)
    if args.out.exists() and not args.force:
        print(
            f"error: {shown}: exists (it may hold answers already); pass --force to replace it",
            file=sys.stderr,
        )
        return 2
    params = load_params(args.params)
    cache = None
    if params.questions.generator == "llm":  # its calls are cached where the run reads them
        if preflight(params, endpoints=None):
            return 2
        cache = run_cache(params)
    _, questions = question_set(params, project_root(), cache)
    n = write_question_file(questions, params.lang, args.out)
    print(f"questions: {n} written to {shown}")
    print(
        "Fill `answer` and `retrieved_doc_ids` (the documents your system retrieved, in rank "
        "order: a JSON list or ids separated by | or ;) and name the file in a system "
        f"`{{kind: imported, path: ...}}` of {args.params_typed}; `cube validate "
        f"{args.params_typed}` checks it covers every question."
    )
    return 0
