"""`cube init`: write a params file for a first run, from flags or a few questions asked on a
terminal (`cube.run.scaffold` writes and checks the file)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cube.run.scaffold import InitChoices


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cube.run.scaffold import JUDGES, SYSTEMS

    i = sub.add_parser(
        "init",
        help="write a params file for a first run: the demo, your knowledge base, an HTTP or "
        "Python system, imported answers; offline, OpenAI-compatible or local judges",
        description="Write a params file from a few choices, with a comment before each section "
        "saying what to change. On a terminal without --system it asks (the defaults in "
        "brackets); otherwise it takes the flags. Paths are written relative to the new file's "
        "folder (where a params file's relative paths are read from). The file is checked as "
        "`cube validate` loads it before it is written; an existing file is kept unless --force. "
        "Systems: "
        + "; ".join(f"{k}: {v}" for k, v in SYSTEMS.items())
        + ". Judges: "
        + "; ".join(f"{k}: {v}" for k, v in JUDGES.items())
        + ".",
    )
    i.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=Path("params.yaml"),
        help="file to write (default ./params.yaml)",
    )
    i.add_argument("--system", choices=list(SYSTEMS), help="the system to evaluate (default demo)")
    i.add_argument("--judge", choices=list(JUDGES), help="the judge (default offline)")
    i.add_argument("--kb", type=Path, help="your knowledge-base file or folder")
    i.add_argument("--questions-file", type=Path, help="your question file (default: templates)")
    i.add_argument("--url", help="--system http: your service's URL")
    i.add_argument(
        "--callable", help="--system python: package.module:function or file.py:function"
    )
    i.add_argument("--answers", type=Path, help="--system imported: your system's answers file")
    i.add_argument("--model", help="--judge openai: the judge model's name")
    i.add_argument("--base-url", help="--judge openai: the endpoint (default OpenAI's)")
    i.add_argument("--api-key-env", help="--judge openai: variable holding the key")
    i.add_argument("--answerer-model", help="the model your system answers with (bound sets)")
    i.add_argument("--answerer-base-url", help="its OpenAI-compatible endpoint")
    i.add_argument("--answerer-api-key-env", help="variable holding its key")
    i.add_argument("--port", type=int, help="--judge local: `cube serve`'s port (default 8765)")
    i.add_argument("--run", dest="run_name", help="run name (default: the file's folder name)")
    i.add_argument("--lang", choices=["en", "zh"], help="language of the knowledge base (en)")
    i.add_argument("--force", action="store_true", help="replace an existing file")
    i.add_argument("--no-input", action="store_true", help="never ask, even on a terminal")
    i.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """`cube init`: 0 written, 2 the file exists (without --force), a choice lacks a value, or
    the file would not validate."""
    from cube.run.scaffold import UnsafeTarget, check_written, params_text, write_params_file

    shown = os.path.relpath(args.path, args.cwd)
    if args.path.exists() and not args.force:
        print(f"error: {shown}: exists; pass --force to replace it", file=sys.stderr)
        return 2
    choices = _complete_choices(args)
    if choices is None:
        return 2
    text = params_text(choices, args.path)
    check_written(text, args.path)
    try:
        write_params_file(getattr(args, "path_unresolved", args.path), text)
    except UnsafeTarget as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _print_next(args.path, shown, choices)
    return 0


def _complete_choices(args: argparse.Namespace) -> InitChoices | None:
    """The flags' choices, asked for on a terminal when --system is not given; None (and the
    error said) when the system or judge chosen lacks a value it needs."""
    from cube.run.scaffold import prompt_choices

    choices = _init_choices(args)
    if args.system is None and not args.no_input and sys.stdin.isatty():
        prompt_choices(choices, _ask)
    missing = choices.missing()
    if missing:
        print(
            f"error: --system {choices.system} and --judge {choices.judge} need "
            f"{', '.join(missing)}",
            file=sys.stderr,
        )
        return None
    return choices


def _print_next(path: Path, shown: str, choices: InitChoices) -> None:
    """What the file written still needs (what `cube validate` would find) and the next steps."""
    from cube.run.scaffold import data_problems, next_steps

    problems = data_problems(path)
    if problems:  # the file is the user's to finish: what to edit before `cube run`
        print(f"wrote {shown}; `cube validate` finds {len(problems)} thing(s) to fix in it first:")
        print("\n".join(f"  - {p}" for p in problems))
    print("next:" if problems else f"wrote {shown}; next:")
    print("\n".join(f"  {line}" for line in next_steps(choices, shown)))


def _init_choices(args: argparse.Namespace) -> InitChoices:
    """The choices the flags give (the rest keep `InitChoices`' defaults)."""
    from cube.run.scaffold import InitChoices, typed_callable

    c = InitChoices(run=args.run_name or args.path.parent.name or "my-eval")
    given = {
        "system": args.system,
        "judge": args.judge,
        "lang": args.lang,
        "kb": args.kb,
        "questions": args.questions_file,
        "url": args.url,
        "callable": typed_callable(args.callable, args.cwd),
        "answers": args.answers,
        "model": args.model,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "answerer_model": args.answerer_model,
        "answerer_base_url": args.answerer_base_url,
        "answerer_api_key_env": args.answerer_api_key_env,
        "port": args.port,
    }
    for field, value in given.items():
        if value is not None:
            setattr(c, field, value)
    return c


def _ask(question: str, default: object, choices: dict[str, str] | None = None) -> object:
    """One question on the terminal; the default on an empty answer, asked again on an answer
    that is not among `choices`."""
    if choices:
        for key, text in choices.items():
            print(f"  {key:<9} {text}")
    shown = f" [{default}]" if default not in (None, "") else ""
    while True:
        answer = input(f"{question}{shown}: ").strip()
        if not answer:
            return default
        if not choices or answer in choices:
            return answer
        print(f"  one of: {', '.join(choices)}")
