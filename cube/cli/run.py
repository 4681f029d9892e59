"""`cube run`: the preflight, the notebook sequence (`cube.run.execute`), then the outcome in the
terminal and its exit code (0 published, 1 a stage failed, 2 bad input, 3 verdict withheld or
release undecided, 4 held for a regression, 130 interrupted). With a baseline (`baseline:` in the
params or `--baseline RUN_FOLDER`), the published run's primary system is compared with the
baseline's and a release decision made (`cube.run.release`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from cube.cli.common import load_params, preflight
from cube.config.project import display_path, resolve
from cube.config.runpaths import RunPaths

if TYPE_CHECKING:
    from cube.run.release import Baseline


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "run",
        help="execute the notebook sequence with a params file and write the HTML report",
        description="Execute notebooks/NN_*.ipynb in order with papermill into "
        "outputs/<run>/notebooks/, export each to HTML (with and without code) under "
        "outputs/<run>/report/, and write report/index.html. Stages whose inputs did not "
        "change since their last execution are skipped; LLM calls are served from the cache. "
        "Stages run in outputs/<run>/.staging/ and are published only when all succeed. Exit "
        "codes: 0 published, 1 a stage failed (nothing published; see report/last_run.html), 2 "
        "bad params or data (`cube validate`'s errors, checked before any stage runs), a preflight "
        "problem (unset key variable, broken LLM endpoint) or the run folder is locked by another "
        "run, 3 published but the verdict is withheld (judging failed, or another reason the "
        "summary names), 130 interrupted (re-run to resume). With a baseline (params "
        "`baseline:` or --baseline), "
        "after publishing: 0 released, 4 held for a regression, 3 verdict withheld or release "
        "undecided (a hold wins over a withheld verdict: the regression is shown). It ends with a "
        "summary: per system CuBE with its interval, R@k at its own TOP-N and the verdict (or "
        "WITHHELD and its first reason), the run's calls against the plan (made: computed "
        "offline, from the cache, sent, failed; not made: what the early stop saved and why the "
        "rest was not needed), the cost, the report's path; with a baseline, the release "
        "decision, ΔCuBE, the regressed questions and the reasons (report/summary.md, "
        "report/junit.xml, report/decision.json).",
    )
    r.add_argument("params", type=Path, help="params YAML file (e.g. params/default.yaml)")
    r.add_argument(
        "--only", metavar="SEL", help="notebooks to run by number: 03, 03..06, ..04, 05.. or 01,03"
    )
    r.add_argument(
        "--force", action="store_true", help="re-execute the selected stages even if up to date"
    )
    r.add_argument(
        "--notebooks", type=Path, default=None, help="notebook folder (default: ./notebooks)"
    )
    r.add_argument(
        "--outputs", type=Path, default=None, help="outputs folder (default: params outputs_dir)"
    )
    r.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the start-of-run check of key variables and LLM endpoints (e.g. a fully "
        "cached re-run)",
    )
    r.add_argument(
        "--until-settled",
        action="store_true",
        help="sequential evaluation: answer and judge in batches and stop when every system's "
        "verdict is settled (analysis.sequential, its defaults when the params lack it)",
    )
    r.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="RUN_FOLDER",
        help="a completed run of the previous version (outputs/<run>): compare the primary system "
        "with its primary and decide the release (overrides the params' baseline.run; margin "
        "from baseline.margin, default 5 CuBE points)",
    )
    r.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    with _fewer_collections():
        _clear_earlier_gate(args)
        if not args.no_preflight and preflight(load_params(args.params), endpoints=None):
            return 2
        if _baseline_refused(args):
            return 2
        _batch_pending(args)
        return _execute(args)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Within the block, the runner and its forked children (the input checks, the plan, the usage
    table, the page worker) collect cyclic garbage as the kernels do
    (`cube.run.kernel.GC_THRESHOLDS`) and what the runner imported by then, living as long as it,
    is frozen (no collection walks it again). The caller's settings come back after it: a process
    calling `cube run` in-process (a test, a notebook) keeps its own collector; a heap it had
    frozen itself stays frozen."""
    import gc

    from cube.run.kernel import GC_THRESHOLDS

    before, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if not frozen_before:
            gc.unfreeze()


def _clear_earlier_gate(args: argparse.Namespace) -> None:
    """Delete an earlier run's gate report (decision.json, summary.md, junit.xml,
    compare/baseline/) before anything can fail: a CI job publishing the report after a refused
    baseline, a failed stage, an interrupt or a crash must not read the previous build's
    decision."""
    from cube.config.params import ParamsError
    from cube.run.release import clear_gate

    try:
        params = load_params(args.params)
    except (ParamsError, OSError):  # no run folder to name; the run says what is wrong
        return
    paths = RunPaths.for_params(params, args.outputs or resolve(params.outputs_dir))
    if paths.root.is_dir():
        clear_gate(paths)


def _baseline(args: argparse.Namespace) -> Baseline | None:
    """The run's baseline (`--baseline` over the params' `baseline.run`), or None."""
    from cube.run.release import baseline_of

    typed = getattr(args, "baseline", None)
    override = (args.cwd / typed).resolve() if typed is not None else None
    return baseline_of(load_params(args.params), override)


def _baseline_refused(args: argparse.Namespace) -> bool:
    """Say every problem of the baseline before any stage runs (True: refused, exit 2)."""
    from cube.config.params import ParamsError
    from cube.run.release import baseline_problems

    args.release_baseline = None  # read once here: the run's own errors say what is wrong
    try:
        params = load_params(args.params)
        baseline = _baseline(args)
    except ParamsError:  # said by the run itself, with every other problem of the file
        return False
    args.release_baseline = baseline
    if baseline is None:
        return False
    run_folder = RunPaths.for_params(params, args.outputs or resolve(params.outputs_dir)).root
    problems = baseline_problems(baseline, run_folder)
    for problem in problems:
        print(f"error: {args.params_typed}: {problem}", file=sys.stderr)
    return bool(problems)


def _batch_pending(args: argparse.Namespace) -> None:
    """One line before `cube run` sends anything: calls of the run's batch export not in the call
    cache (e.g. after a partial `cube batch import`) would go out as live, paid requests."""
    from cube.config.params import ParamsError
    from cube.llm.batch import unanswered_exports

    try:
        params = load_params(args.params)
    except ParamsError:  # said by the run itself, with every other problem of the file
        return
    left = unanswered_exports(
        RunPaths.for_params(params, args.outputs or resolve(params.outputs_dir))
    )
    if left:
        print(
            f"cube: {sum(left.values())} call(s) of the batch export "
            f"({', '.join(p.name for p in left)}) are not in the call cache: this run sends those "
            "it needs as live requests (import their results first with `cube batch import` to "
            "avoid that)",
            file=sys.stderr,
        )


def _execute(args: argparse.Namespace) -> int:
    """`cube run`: 0 committed, 1 a stage failed, 2 bad input or the run folder is locked,
    3 judging failed wholesale (decision withheld) or the release undecided, 4 the release held
    for a regression, 130 interrupted."""
    from cube.run.execute import InputError, execute_run
    from cube.run.state import RunInterrupted, interrupts_raise

    try:
        with interrupts_raise():
            summary = execute_run(
                args.params,
                notebooks_dir=args.notebooks,
                only=args.only,
                force=args.force,
                outputs_dir=args.outputs,
                overrides=_settled_overrides(args),
            )
    except InputError as err:  # validate's errors, found before any stage ran
        print(
            f"error: {args.params_typed}: the run's data inputs have problems:\n{err}\n"
            f"(`cube validate {args.params_typed}` lists them with the warnings and notes)",
            file=sys.stderr,
        )
        return 2
    except (RunInterrupted, KeyboardInterrupt) as exc:
        signame = getattr(exc, "signame", "SIGINT")
        print(
            f"\ncube: interrupted ({signame}); the published run is unchanged and the notebook "
            f"kernel was stopped. Resume with `cube run {args.params_typed}` (completed stages and "
            "cached LLM calls are kept).",
            file=sys.stderr,
        )
        return 130
    if not summary.ok:
        from cube.run.execute import has_published_run

        failed = next((s for s in summary.stages if s.status == "failed"), None)
        shown = (
            "the report still shows the last successful run"
            if has_published_run(summary.paths)
            else "no run of these params has succeeded yet"
        )
        print(
            f"cube: stage {failed.notebook if failed else '?'} failed; nothing was published, "
            f"{shown} "
            f"(see {display_path(summary.paths.report / 'last_run.html')}); fix the cause and run "
            f"`cube run {args.params_typed}` again (completed stages are kept)",
            file=sys.stderr,
        )
        return 1
    code = _outcome(summary.paths, args.cwd)
    baseline = getattr(args, "release_baseline", None)  # as checked before the run
    if baseline is None:
        from cube.run.release import clear_gate

        clear_gate(summary.paths)  # no decision of an earlier run is left for a CI job to read
        return code
    return _gate(summary.paths, baseline, code)


def _gate(paths: RunPaths, baseline: Baseline, code: int) -> int:
    """The release gate after publishing: its lines, its report files and the exit code (4 held
    for a regression; else 3 when the verdict was withheld (`code`) or the release undecided;
    else 0)."""
    from cube.pages.release import terminal_lines
    from cube.run.outcome import with_release
    from cube.run.release import gate_failed, release_gate

    try:
        report = release_gate(paths, baseline)
    except Exception as err:  # noqa: BLE001 - any failure is an undecided record, never silence
        report = gate_failed(paths, baseline, err)
    print("\n".join(terminal_lines(report)))
    print(
        f"release summary: {display_path(paths.report / 'summary.md')} (junit.xml, decision.json)"
    )
    return with_release(code, int(report["exit_code"]))


def _settled_overrides(args: argparse.Namespace) -> list[str] | None:
    """`--until-settled`: `analysis.sequential` with its defaults, unless the params set it."""
    if not getattr(args, "until_settled", False):
        return None
    return None if load_params(args.params).analysis.sequential else ["analysis.sequential={}"]


def _outcome(paths: RunPaths, cwd: Path) -> int:
    """The run's result in the terminal (`cube.run.outcome`); 3 when the primary system's verdict
    was withheld, else 0."""
    from cube.run.outcome import (
        failure_lines,
        outcome_lines,
        read_decision,
        read_questions,
        withheld,
    )
    from cube.run.reconcile import read_calls_line

    decision = read_decision(paths.results)
    index = (paths.report / "index.html").resolve()
    shown = index.relative_to(cwd.resolve()) if index.is_relative_to(cwd.resolve()) else index
    calls = read_calls_line(paths.results, paths.manifest)
    lines = outcome_lines(decision, str(shown), read_questions(paths.results), calls)
    if lines:
        print("\n".join(lines))
    for line in failure_lines(paths.results):  # the systems' failures: the cause, whatever the code
        print(f"cube: {line}", file=sys.stderr)
    if withheld(decision):
        why = "judging failed" if decision and decision.judging_failed else "see the reasons above"
        print(
            f"cube: the verdict is withheld ({why}; exit code 3): the report's decision page says "
            "why in full",
            file=sys.stderr,
        )
        return 3
    return 0
