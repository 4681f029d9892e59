"""`cube validate`: every check `cube run` makes before its first model call, every problem at
once, ending with one `validate: OK` or `validate: FAILED` line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cube.cli.common import load_params, preflight
from cube.config.project import display_path, project_root, resolve
from cube.config.runpaths import RunPaths

if TYPE_CHECKING:
    from cube.config.params import Params


def add_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "validate",
        help="check a params file, its key variables and every data file it names",
        description="Check a params file, print it resolved, check that every key variable the "
        "run needs is set (and, with --check-endpoints, that each LLM endpoint answers), then "
        "load the knowledge base, the question file and imported QA files as a run would, and "
        "report EVERY problem at once (file, row, column): path, format, sheet, encoding, field "
        "keys, mapped and grouping columns, doc_id uniqueness, empty and exact-duplicate "
        "documents. Ends with one line: `validate: OK: ...` or `validate: FAILED: ...`; exits 2 "
        "on any error. It makes every check `cube run` makes before its first model call: every "
        "file the params name exists (relative paths are read from the params file's folder), "
        "the dimensions load, every system can be made, imported answers are read by the run's "
        "own import against the question set the run will ask (built as the run builds it; "
        "with `questions.generator: llm` that set is written during the run, so their coverage "
        "is checked then) and their retrieved passages and ids mapped to the knowledge base "
        "(more than analysis.max_unmapped_share unmapped is an error: the run could not measure "
        "retrieval), and the run folder holds no data of another params file.",
    )
    v.add_argument("params", type=Path, help="params YAML file to check")
    v.add_argument(
        "--print",
        action="store_true",
        dest="print_params",
        help="also print the resolved params (every default filled in) as YAML",
    )
    v.add_argument(
        "--check-endpoints",
        action="store_true",
        help="also send one tiny request to each LLM endpoint (reports 401, refused, unknown "
        "model...), and one real question to each http system (a python system: one call), "
        "showing what came back (the reply's start, or the status and body excerpt) and what the "
        "response paths extracted (answer, ids or passages, and the documents they map to)",
    )
    v.add_argument(
        "--timeout", type=float, default=10.0, help="seconds per endpoint check (default 10)"
    )
    v.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from cube.run.validate import validate_data

    params = load_params(args.params)
    if args.print_params:
        from cube.config.params import params_to_yaml

        print(params_to_yaml(params), end="")
    problems = preflight(params, endpoints=args.check_endpoints, timeout_s=args.timeout)
    data = validate_data(params, project_root(), args.params)
    if args.check_endpoints and data.ok:  # one real question to each http and python system
        from cube.run.probe_systems import probe_report

        shown, failed = probe_report(params, project_root())
        for line in shown:
            print(f"cube: probe: {line}", file=sys.stderr)
        problems += failed
    folder = _run_folder_problem(params, args)
    if folder:
        data.errors.append(folder)
    lines = data.lines()
    if problems:  # the last line says the whole outcome, the preflight's (on stderr) included
        head, _, rest = lines[-1].partition(": ")
        rest = rest.removeprefix("OK: ").removeprefix("FAILED: ")
        lines[-1] = f"{head}: FAILED: {rest}, {len(problems)} preflight problem(s) (above)"
    print("\n".join(lines))
    return 0 if data.ok and not problems else 2


def _run_folder_problem(params: Params, args: argparse.Namespace) -> str | None:
    """What `cube run` (without --force) would refuse before its first stage: a run folder holding
    data another params file made with other values."""
    from cube.run.stages import ParamsMismatchError, check_run_folder

    published = RunPaths.for_params(params, resolve(params.outputs_dir))
    try:
        check_run_folder(
            published.data, params, display_path(args.params), display_path(published.root)
        )
    except ParamsMismatchError as err:
        return str(err)
    return None
