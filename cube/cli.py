"""The `cube` command: a thin layer over the package.

    cube run PARAMS.yaml [--only 03..06] [--force]   execute the notebooks, publish the report
    cube report PARAMS.yaml                          re-export HTML and index.html only
    cube validate PARAMS.yaml                        check a params file and every data file it names
    cube example-kb PATH                             write the synthetic long-format example spreadsheet
    cube annotate PARAMS.yaml [--out FILE]           export the human annotation sheet
    cube params-reference                            print the params reference (Markdown)
    cube compare A B                                 paired comparison of two systems or runs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cube.config import Params, ParamsError, RunPaths, load_params, params_to_yaml
from cube.notebook import MissingStageError
from cube.runstate import RunInterrupted, RunLocked, interrupts_raise

EPILOG = """examples:
  cube run params/default.yaml                 the whole sequence, offline, on the demo corpus
  cube run params/llm_jury.yaml --only 03..06  re-score and re-analyse only
  cube run params/default.yaml --force         re-execute every stage even if up to date
API keys are read from the environment variables that params name (api_key_env); they never
appear in params, outputs or reports."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cube",
        description="CuBE workbench: evaluate RAG question answering between zero- and full-information bounds.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="execute the notebook sequence with a params file and write the HTML report",
                       description="Execute notebooks/NN_*.ipynb in order with papermill into "
                       "outputs/<run>/notebooks/, export each to HTML (with and without code) under "
                       "outputs/<run>/report/, and write report/index.html. Stages whose inputs did not "
                       "change since their last execution are skipped; LLM calls are served from the cache. Stages run in "
                       "outputs/<run>/.staging/ and are published only when all succeed. Exit codes: 0 published, "
                       "1 a stage failed (nothing published; see report/last_run.html), 2 bad params, a preflight "
                       "problem (unset key variable, broken LLM endpoint) or the run folder is locked by another "
                       "run, 3 decision withheld because judging failed, "
                       "130 interrupted (re-run to resume).")
    r.add_argument("params", type=Path, help="params YAML file (e.g. params/default.yaml)")
    r.add_argument("--only", metavar="SEL", help="notebooks to run by number: 03, 03..06, ..04, 05.. or 01,03")
    r.add_argument("--force", action="store_true", help="re-execute the selected stages even if up to date")
    r.add_argument("--notebooks", type=Path, default=None, help="notebook folder (default: ./notebooks)")
    r.add_argument("--outputs", type=Path, default=None, help="outputs folder (default: params outputs_dir)")
    r.add_argument("--no-preflight", action="store_true",
                   help="skip the start-of-run check of key variables and LLM endpoints (e.g. a fully cached re-run)")

    rep = sub.add_parser("report", help="re-export the executed notebooks to HTML and rewrite index.html")
    rep.add_argument("params", type=Path)

    v = sub.add_parser("validate", help="check a params file, its key variables and every data file it names",
                       description="Check a params file, print it resolved, check that every key variable the run "
                       "needs is set (and, with --check-endpoints, that each LLM endpoint answers), then load the "
                       "knowledge base, the question file and imported QA files as a run would, and report EVERY "
                       "problem at once (file, row, column): path, format, sheet, encoding, field keys, mapped and "
                       "grouping columns, doc_id uniqueness, empty and exact-duplicate documents. Ends with a "
                       "one-line summary; exits 2 on any error. Relative paths are read from the current folder, "
                       "as `cube run` does.")
    v.add_argument("params", type=Path)
    v.add_argument("--check-endpoints", action="store_true",
                   help="also send one tiny request to each LLM endpoint (reports 401, refused, unknown model...)")
    v.add_argument("--timeout", type=float, default=10.0, help="seconds per endpoint check (default 10)")

    ex = sub.add_parser("example-kb", help="write the synthetic long-format example spreadsheet (.xlsx or .csv)",
                        description="Write a SYNTHETIC spreadsheet shaped like a real government-service export "
                        "(one row per material, no id column, placeholders, nested-bracket variants, a parent-region "
                        "column), the input of params/own_kb.yaml and the README walkthrough.")
    ex.add_argument("path", type=Path, help="output file, .xlsx or .csv")
    ex.add_argument("--seed", type=int, default=0)

    a = sub.add_parser("annotate", help="export an annotation sheet (CSV + Excel) for human raters",
                       description="Sample answers of a run (stratified by set and by retrieved / not "
                       "retrieved; size and seed from params.human) and write a sheet with the question, the "
                       "gold document, the answer and each dimension's five 0-2 criteria to fill in.")
    a.add_argument("params", type=Path)
    a.add_argument("--out", type=Path, default=None, help="sheet path without extension (default: "
                   "outputs/<run>/annotation/annotation_sheet)")
    a.add_argument("--raters", nargs="*", default=None, help="rater ids: one row per rater and item")
    a.add_argument("--overwrite", action="store_true",
                   help="replace an existing sheet (by default it is kept: raters may be filling it in)")

    sub.add_parser("params-reference", help="print the params reference generated from the schema (Markdown)")

    cmp = sub.add_parser("compare", help="paired comparison of two systems or runs (delta, CI, p-value, MDE, regressions)",
                         description="Compare side B with side A on their common questions: ΔCuBE, ΔW, ΔR@k and each "
                         "Δ normalised dimension per judge and jury, a paired bootstrap interval, a paired permutation "
                         "p-value, the minimum detectable ΔCuBE and the largest regressions and improvements. A and B "
                         "are params files or run folders (of completed runs); the same run twice compares its first "
                         "system with its second (or --system-a / --system-b). Writes "
                         "outputs/compare/<a>__vs__<b>/ (comparison.json, tables, figures, index.html).")
    cmp.add_argument("a", type=Path, help="side A: params file or run folder")
    cmp.add_argument("b", type=Path, help="side B: params file or run folder")
    cmp.add_argument("--system-a", default=None, help="system of side A (default: its primary system)")
    cmp.add_argument("--system-b", default=None, help="system of side B (default: its primary, or the second "
                     "system when B is the same run as A)")
    cmp.add_argument("--outputs", type=Path, default=None, help="outputs folder (default: side A's outputs_dir)")
    cmp.add_argument("--permutations", type=int, default=1000, help="permutations of the p-value (default 1000)")
    cmp.add_argument("--top", type=int, default=20, help="regressions / improvements listed (default 20)")
    return p


def _preflight(params: Params, *, endpoints: bool | None, timeout_s: float = 10.0) -> list[str]:
    """Print every preflight problem (missing key variables, failing LLM endpoints) to stderr
    and return them. `endpoints=None`: check endpoints when the params use LLM models."""
    from cube.preflight import check_endpoints, check_keys, uses_llm

    problems = check_keys(params)
    if endpoints or (endpoints is None and uses_llm(params)):
        problems += check_endpoints(params, timeout_s=timeout_s)
    for line in problems:
        print(f"cube: preflight: {line}", file=sys.stderr)
    if problems:
        print("cube: preflight failed; nothing was run (fix the above, or skip the check with --no-preflight)"
              if endpoints is None else "cube: preflight failed", file=sys.stderr)
    return problems


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            if not args.no_preflight and _preflight(load_params(args.params), endpoints=None):
                return 2
            return _run(args)
        if args.command == "report":
            from cube.report import publish

            params = load_params(args.params)
            print(f"report: {publish(params, RunPaths.for_params(params))}")
            return 0
        if args.command == "validate":
            from cube.validate import validate_data

            params = load_params(args.params)
            print(params_to_yaml(params), end="")
            problems = _preflight(params, endpoints=args.check_endpoints, timeout_s=args.timeout)
            data = validate_data(params, Path.cwd())
            print("\n".join(data.lines()))
            return 0 if data.ok and not problems else 2
        if args.command == "example-kb":
            from cube.example_kb import write_example_kb

            print(write_example_kb(args.path, seed=args.seed))
            return 0
        if args.command == "annotate":
            from cube.pipeline import export_annotation

            params = load_params(args.params)
            for path in export_annotation(params, out=args.out, raters=args.raters, overwrite=args.overwrite):
                print(path)
            return 0
        if args.command == "compare":
            from cube.compare_report import run_compare

            out = run_compare(args.a, args.b, system_a=args.system_a, system_b=args.system_b, outputs=args.outputs,
                              n_permutations=args.permutations, k=args.top)
            head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
            ci = head["delta_cube_ci"]
            print(f"{head['b']} vs {head['a']}: ΔCuBE {_fmt(head['delta_cube'])} "
                  f"[{_fmt(ci[0])}, {_fmt(ci[1])}], p = {_fmt(head['p_value'], 3)}, MDE {_fmt(head['mde'])}, "
                  f"{head['n_questions']} questions, {head['n_regressions']} regressions, "
                  f"{head['n_improvements']} improvements")
            print(f"comparison: {out / 'index.html'}")
            return 0
        if args.command == "params-reference":
            from cube.params_doc import params_reference

            print(params_reference())
            return 0
    except RunLocked as err:
        print(f"cube: {err}", file=sys.stderr)
        return 2
    except ParamsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError, MissingStageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 1


def _run(args: argparse.Namespace) -> int:
    """`cube run`: 0 committed, 1 a stage failed, 2 bad input or the run folder is locked,
    3 judging failed wholesale (decision withheld), 130 interrupted."""
    from cube.report import execute_run

    try:
        with interrupts_raise():
            summary = execute_run(args.params, notebooks_dir=args.notebooks, only=args.only, force=args.force,
                                  outputs_dir=args.outputs)
    except (RunInterrupted, KeyboardInterrupt) as exc:
        signame = getattr(exc, "signame", "SIGINT")
        print(f"\ncube: interrupted ({signame}); the published run is unchanged and the notebook kernel was stopped. "
              f"Resume with `cube run {args.params}` (completed stages and cached LLM calls are kept).",
              file=sys.stderr)
        return 130
    if not summary.ok:
        failed = next((s for s in summary.stages if s.status == "failed"), None)
        print(f"cube: stage {failed.notebook if failed else '?'} failed; nothing was published, the report still "
              f"shows the last successful run (see {summary.paths.report / 'last_run.html'})", file=sys.stderr)
        return 1
    decision = _decision(summary.paths)
    if decision.get("judging_failed"):
        reasons = "; ".join(str(r) for r in decision.get("withheld_reasons") or []) or "no reason recorded"
        print(f"cube: decision withheld: judging failed ({reasons})", file=sys.stderr)
        return 3
    return 0


def _fmt(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _decision(paths: RunPaths) -> dict:
    import json

    if not paths.results.exists():
        return {}
    decision = json.loads(paths.results.read_text(encoding="utf-8")).get("decision")
    return decision if isinstance(decision, dict) else {}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
