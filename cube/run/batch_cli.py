"""`cube batch ...`: the command-line side of `cube.run.batch` and `cube.llm.batch` (export, import,
submit, status, fetch)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_batch_parser(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser(
        "batch",
        help="judge through a batch API: export pending calls, import the replies",
        description="Batch judging for runs that outgrow live calls (see cube/llm/batch.py). "
        "export writes the pending judging calls as OpenAI Batch API JSONL (also vLLM run-batch "
        "input); import loads a results file into the call cache, after which `cube run` sends no "
        "request for them; submit/status/fetch drive an OpenAI-compatible Batch API.",
    )
    bs = b.add_subparsers(dest="batch_command", required=True, metavar="ACTION")
    e = bs.add_parser(
        "export", help="write the calls of a stage that are not cached yet as Batch API JSONL"
    )
    e.add_argument("params", type=Path)
    e.add_argument("--stage", default="03", help="stage whose calls to export (03: judging)")
    e.add_argument(
        "--out",
        type=Path,
        default=None,
        help="base name of the output files, one per (endpoint, model): OUT's stem + "
        ".<model>@<host>.<hash>.jsonl (default: outputs/<run>/batch/03.jsonl, i.e. "
        "outputs/<run>/batch/03.<model>@<host>.<hash>.jsonl)",
    )
    i = bs.add_parser(
        "import", help="store Batch API results files (of any model) in the call cache"
    )
    i.add_argument("params", type=Path)
    i.add_argument("file", type=Path, nargs="+")
    i.add_argument("--stage", default="03")
    s = bs.add_parser(
        "submit",
        help="upload a request file and create a batch on the model's endpoint (refused when "
        "a line's body.model is not that model)",
    )
    s.add_argument("params", type=Path)
    s.add_argument("file", type=Path)
    s.add_argument(
        "--model",
        required=True,
        help="name under `models:`, or a judge's name, whose endpoint and key to use",
    )
    st = bs.add_parser("status", help="print a batch's status and request counts")
    st.add_argument("params", type=Path)
    st.add_argument("batch_id")
    st.add_argument("--model", required=True)
    f = bs.add_parser("fetch", help="download a completed batch's results (and errors) to a file")
    f.add_argument("params", type=Path)
    f.add_argument("batch_id")
    f.add_argument("--model", required=True)
    f.add_argument("--out", type=Path, required=True)


def batch_main(args: argparse.Namespace) -> int:
    if args.batch_command == "export":
        return _export(args)
    if args.batch_command == "import":
        return _import(args)
    from cube.llm import batch_remote

    return batch_remote.command(args)


def _batch_folder(params: Path) -> Path:
    """The run's `batch/` folder, where `export` writes by default."""
    from cube.config.params import load_params
    from cube.config.runpaths import RunPaths

    return RunPaths.for_params(load_params(params)).root / "batch"


def _export(args: argparse.Namespace) -> int:
    from cube.run import batch

    out = args.out or _batch_folder(args.params) / f"{args.stage}.jsonl"
    written = batch.export_batch(args.params, out, args.stage)
    for path, n in written.items():
        print(f"{n} pending call(s) written to {path}")
    if not written:
        print(f"nothing to export: every call is cached ({out.parent})")
    elif len(written) > 1:
        print(
            f"{len(written)} files, one per (model, endpoint): submit each with that model's "
            "--model"
        )
    return 0


def _import(args: argparse.Namespace) -> int:
    from cube.run import batch

    problems = False
    for file in args.file:
        report = batch.import_batch(args.params, file, args.stage)
        _print_report(report.lines(), file if len(args.file) > 1 else None)
        problems = problems or bool(report.problems)
    # what is still pending after this import: `cube run` would send it live (paid) requests
    folders = [_batch_folder(args.params), *(Path(f).parent for f in args.file)]
    for line in batch.pending_after_import(args.params, folders, args.stage):
        print(line)
    return 2 if problems else 0


def _print_report(lines: list[str], file: Path | None) -> None:
    """An import's report, its failures and refusals on stderr, each line prefixed with the file
    when several were imported."""
    for line in lines:
        out = sys.stderr if line.startswith(("failed", "refused")) else sys.stdout
        print(f"{file}: {line}" if file is not None else line, file=out)
