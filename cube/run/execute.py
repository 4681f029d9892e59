"""Executing the notebook sequence (papermill) and publishing it as HTML (nbconvert, in-process).

`execute_run` runs `notebooks/[0-9][0-9]_*.ipynb` in order into `outputs/<run>/notebooks/` (a
stage starts once the stages it reads have ended; in a run of a small knowledge base those that do
not read each other execute side by side in two warm kernels, `cube.run.lanes`; a failed stage
stops the stages reading it, the others still execute; lines are logged in the sequence's order),
skipping a notebook whose inputs are unchanged since its last successful execution (its
fingerprint, `cube.run.stages`: the notebook, the params sections and package modules it reads, the
files those sections name and the fingerprints of the stages it takes data from; `force=True`
re-executes). A stage that a notebook run alone changed since (other params in its data's
provenance, an executed notebook that `cube run` did not write, `params.yaml` of other values, or
the params the notebook recorded in `notebooks/.ran_alone.json`, `cube.run.ran_alone`) is not up to
date either. Re-executing a stage makes the stages reading its data stale: they re-execute in this
run when selected, else in the next run that selects them (make-like; LLM calls are served from the
cache either way). Paths resolve against the project root (`cube.config.project`); outputs show them
relative to it. A stage whose data hold failed calls is never up to date. Stages run in the run's
staging copy, published only when every selected stage succeeded (`cube.run.state`: lock, staging,
interrupts). The input checks, the plan and the manifest's usage table are computed in forked
children (`cube.config.forked`): their memory leaves with them, not held by the runner through
the stages and publishing. Each executed notebook is exported twice (in a worker process while the
next stages execute, `cube.pages.publish.PreparedPages`): `report/<name>.html` without code (for
readers) and `report/code/<name>.html` with code, each with a header linking the index and the
previous/next page, and no script loaded from the network (the pages work offline). `index.html`
opens on the decision page (`cube.diagnose.assessment`), then lists the pages and, grouped by the
page that made them, every table and figure with its caption, stale ones marked. Everything that
came from a system or a judge is escaped (jinja2 autoescape; pandas escapes DataFrame cells).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cube.config.params import Params, load_params
from cube.config.project import (
    ROOT_ENV,
    default_notebooks_dir,
    display_path,
    list_notebooks,
    project_root,
    resolve,
    shared_values,
)
from cube.config.runpaths import RunPaths
from cube.pages.publish import PreparedPages
from cube.pages.publish import publish as publish_pages
from cube.run.notebook import LOCAL_PATHS_ENV, shared_params_yaml, write_shared_params
from cube.run.record import PlanRecord, forget, read_record, write_part
from cube.run.stages import written_keys
from cube.run.state import (
    RunInterrupted,
    commit_staging,
    finish_interrupted_commit,
    kill_child_kernels,
    prepare_staging,
    run_lock,
    write_last_run,
)

if TYPE_CHECKING:
    from cube.config.forked import Child
    from cube.run.kernel import WarmKernel
    from cube.run.lanes import Lanes, StageJob


def publish(
    params: Params,
    paths: RunPaths,
    attempt: dict[str, str] | None = None,
    notebooks_dir: Path | None = None,
    prepared: PreparedPages | None = None,
) -> Path:
    """The run's report (`cube.pages.publish.publish`), its pages' freshness read from this run's
    stage fingerprints (`cube.run.stages.stage_fingerprints`) and from what notebooks run alone
    changed since (`cube.run.ran_alone.stages_mixed`: their pages and the decision are marked out
    of date). `prepared`: the pages exported while the stages ran."""
    from cube.config.project import NOTEBOOK_GLOB
    from cube.run.ran_alone import stages_mixed

    def fingerprints(known: list[Path]) -> dict[str, str]:
        from cube.run.stages import stage_fingerprints

        return stage_fingerprints(params, known, project_root())

    stems = [p.stem for p in sorted(paths.notebooks.glob(NOTEBOOK_GLOB))]
    return publish_pages(
        params,
        paths,
        attempt,
        notebooks_dir,
        fingerprints=fingerprints,
        mixed=stages_mixed(paths.root, params, stems) if stems else {},
        decision_page=DECISION_STAGE,
        prepared=prepared,
    )


def select_notebooks(notebooks: list[Path], only: str | None) -> list[Path]:
    """Pick notebooks by number: `03`, `03..06`, `..04`, `05..`, or a comma list `01,03..04`."""
    if not only:
        return notebooks
    numbers = {p: int(p.name[:2]) for p in notebooks}
    wanted = set().union(*(_numbers_meant(part.strip()) for part in only.split(",")))
    chosen = [p for p in notebooks if numbers[p] in wanted]
    if not chosen:
        raise ValueError(f"--only {only}: matches none of {[p.name for p in notebooks]}")
    return chosen


def _numbers_meant(part: str) -> set[int]:
    """The stage numbers one part of `--only` names: `03`, or a range `03..06`, `..04`, `05..`."""
    m = re.fullmatch(r"(\d+)?\s*\.\.\s*(\d+)?", part)
    if m:
        lo = int(m.group(1)) if m.group(1) else 0
        hi = int(m.group(2)) if m.group(2) else 99
        return set(range(lo, hi + 1))
    if part.isdigit():
        return {int(part)}
    raise ValueError(f"--only: cannot read {part!r}; use e.g. 03, 03..06, ..04, 05.. or 01,03")


DECISION_STAGE = (
    "06_cube_score"  # writes the decision; a stage it reads re-executing makes it stale
)
# every key `pipeline.decision` records: a stale `judging_failed` would make `cube run` exit 3
HEADLINE_KEYS = written_keys(DECISION_STAGE)
# notebook 07 writes the human-calibrated CuBE under its own key: stale as soon as 07 or a stage
# feeding the decision re-executes (a failed or rating-less 07 must not leave the old line beside
# a new decision)
HUMAN_STAGE = "07_human_agreement"
HUMAN_KEYS = written_keys(HUMAN_STAGE)


def _forget_decision(paths: RunPaths, keys: tuple[str, ...] = HEADLINE_KEYS + HUMAN_KEYS) -> None:
    forget(paths, keys)


def _forget_stale(paths: RunPaths, stage: str, feeds_decision: set[str] | Any) -> None:
    """Before a stage executes: forget the decision when it is stale until 06 runs again (06 or a
    stage it reads), or the human-calibrated line alone when 07 itself runs again."""
    if stage == DECISION_STAGE or stage in feeds_decision:
        _forget_decision(paths)
    elif stage == HUMAN_STAGE:
        _forget_decision(paths, HUMAN_KEYS)


@dataclass
class StageOutcome:
    notebook: str
    # executed | up to date | failed | skipped (`cube.run.skip`) | not run (a stage it reads failed)
    status: str
    seconds: float
    error: str = ""
    failed_calls: int = 0


@dataclass
class RunSummary:
    paths: RunPaths  # the published run (stages ran in its staging folder)
    stages: list[StageOutcome] = field(default_factory=list)
    interrupted: str = ""  # the signal's name when the run was interrupted
    committed: bool = False

    @property
    def index(self) -> Path:
        return self.paths.report / "index.html"

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(s.status != "failed" for s in self.stages)


def call_failures(paths: RunPaths, stage: str) -> int:
    """Failed calls in the data files the stage writes (answers, questions, scores...), by the rule
    of `usage_summary`: `error_kind == "call"` where that column exists, else a non-empty `error`.
    A stage holding failed calls is never up to date, so a plain re-run retries exactly those
    calls (successful ones are served from the cache; failures are never cached)."""
    import pandas as pd
    import pyarrow.parquet as pq

    from cube.llm.usage import failed_calls
    from cube.run.notebook import PRODUCED_BY

    failed = 0
    for name, producer in PRODUCED_BY.items():
        path = paths.data_file(name)
        if producer == stage and path.exists():
            columns = [c for c in ("error_kind", "error") if c in pq.read_schema(path).names]
            if columns:
                failed += int(failed_calls(pd.read_parquet(path, columns=columns)).sum())
    return failed


def execute_run(
    params_path: str | Path,
    *,
    notebooks_dir: Path | None = None,
    only: str | None = None,
    force: bool = False,
    outputs_dir: str | Path | None = None,
    log=print,
    overrides: list[str] | None = None,
) -> RunSummary:
    """Execute the notebook sequence for a params file and publish the report.

    The run folder is locked for the duration (`RunLocked` if another run holds it); stages run
    in its staging copy, committed over the published run only when every selected stage
    succeeded (see `cube.run.state`). SIGINT/SIGTERM (`RunInterrupted`, `KeyboardInterrupt`) kill
    the kernel, record the attempt and propagate. `overrides`: params changes (`key.path=value`,
    `cube run --until-settled`), given to every notebook as its papermill `overrides`."""
    from cube.config.overrides import load_params_with_overrides
    from cube.run.kernel import WarmKernel

    params_path = Path(params_path).resolve()
    params = (
        load_params_with_overrides(params_path, overrides)
        if overrides
        else load_params(params_path)
    )
    root = project_root()
    published = _published_paths(params, outputs_dir, root)
    notebooks = list_notebooks(notebooks_dir or default_notebooks_dir())
    chosen = set(select_notebooks(notebooks, only))
    plan_too = _calls_models(chosen)
    # the plan goes on in the checks' child (their demo corpus is its own) once the run holds
    # its folder's lock (`go()`): reaped if the run stops before it is read
    planned = check_inputs(
        params,
        root,
        log,
        params_file=params_path,
        then=(lambda: _plan_rows(params, published, root)) if plan_too else None,
    )
    with _reaped(planned):
        if not force:  # a copied params file that kept the `run:` name never replaces another's
            _check_run_folder(params, published, params_path, root)  # data; silently
    with _reaped(planned), run_lock(published.root, log=log):
        _go_ahead(planned)
        finish_interrupted_commit(published.root, log=log)
        staging = prepare_staging(
            published.root, shared_params_yaml(params, published.root), log=log
        )
        paths = RunPaths(root=staging, cache=published.cache).ensure()
        write_shared_params(params, paths)
        if not force:
            _forget_stages_run_outside(
                params, published, paths, notebooks, params_path, root, log, overrides
            )
        else:
            _forget_forced(paths, notebooks, chosen)
        summary = RunSummary(published)
        started = dt.datetime.now(dt.UTC)
        run_env = _run_env(params_path, published, root)
        # forked before any thread of the runner exists (the kernel's client, the pages' pool)
        plan = _start_plan(params, paths, root, planned) if plan_too else None
        kernel = WarmKernel(root, KERNEL_ARGUMENTS)
        pages = PreparedPages()  # each stage's pages, exported while the next ones execute
        try:
            current = _fingerprints_warming(
                params, paths, notebooks, chosen, force, kernel, run_env
            )
            if plan is not None:
                _record_plan(plan, paths, log)
            with _kernel_env(**run_env):
                _run_stages(
                    params,
                    params_path,
                    paths,
                    notebooks,
                    chosen,
                    force,
                    summary,
                    log,
                    overrides,
                    _Kernel(kernel, current, pages),
                )
        except BaseException as exc:  # an interrupt, or the runner's own failure
            status = _abandon(plan, kernel, pages, exc, summary)
            reason = f"{type(exc).__name__}: {exc}"
            _record_attempt(params, params_path, paths, summary, started, status, reason=reason)
            raise
        finally:
            kernel.close()  # a no-op when the stages closed it (a failed plan or check did not)
        try:
            if not summary.ok:  # a first run's failure is published (index, last_run.html say why)
                _record_attempt(params, params_path, paths, summary, started, "failed")
            else:
                _publish(
                    params,
                    params_path,
                    paths,
                    published,
                    summary,
                    started,
                    notebooks_dir,
                    log,
                    pages,
                )
        finally:
            pages.close()
        return summary


def _abandon(
    plan: Any, kernel: Any, pages: PreparedPages, exc: BaseException, summary: RunSummary
) -> str:
    """A run stopped before publishing by `exc` (an interrupt, or an error of the runner itself):
    the plan's child reaped, the kernels killed, the page being exported finished and the others
    dropped. The attempt's status: interrupted (the signal in `summary`) or failed."""
    if plan is not None:
        with contextlib.suppress(Exception):
            plan.kill()
    kernel.kill()
    kill_child_kernels()
    pages.close()
    if isinstance(exc, RunInterrupted | KeyboardInterrupt):
        summary.interrupted = getattr(exc, "signame", "SIGINT")
        return "interrupted"
    return "failed"


def _run_env(params_path: Path, published: RunPaths, root: Path) -> dict[str, str]:
    """The environment of the run's kernels: where the paths the notebooks are given are (by
    their shown paths, relative to the project root or their name when outside it; the kernel
    maps them back), and IN_RUN_ENV: no count made while the stages run (the sequential driver's
    plan, in the kernel beside the run's calls) asks a local server's tokenize route; and
    FACTS_ENV: the store of the package modules' facts the runner's fingerprints wrote
    (`cube.run.facts_store`), read by the stages digesting modules instead of parsing them."""
    from cube.llm.tokens import IN_RUN_ENV
    from cube.run.facts_store import FACTS_ENV, store_file

    local = {
        _param_path(params_path, root): str(params_path),
        _param_path(published.root, root): str(published.root.resolve()),
    }
    return {
        LOCAL_PATHS_ENV: json.dumps(local),
        IN_RUN_ENV: "1",
        FACTS_ENV: str(store_file(published.cache).resolve()),
    }


def _fingerprints_warming(
    params: Params,
    paths: RunPaths,
    notebooks: list[Path],
    chosen: set[Path],
    force: bool,
    kernel: WarmKernel,
    run_env: dict[str, str],
) -> dict[str, str]:
    """The stages' current fingerprints. The kernel starts and imports (`WarmKernel.warm_up`) on
    the other core meanwhile when the run is forced or the folder's first (stages will execute),
    else after them when a stage may execute (`_may_execute`); then during the plan."""
    from cube.run.facts_store import store_file
    from cube.run.stages import facts_stored_in, stage_fingerprints

    root = kernel.cwd
    first = force or not (paths.notebooks / ".fingerprints.json").exists()
    if first:
        _warm_up(kernel, run_env, paths, root)
    with facts_stored_in(store_file(paths.cache)):  # the modules' facts, kept between runs
        current = stage_fingerprints(params, notebooks, root)
    if not first and _may_execute(params, paths, notebooks, chosen, force, current):
        _warm_up(kernel, run_env, paths, root)
    return current


def _published_paths(params: Params, outputs_dir: str | Path | None, root: Path) -> RunPaths:
    """The published run folder (`--outputs-dir` over the params') and its cache."""
    published = RunPaths.for_params(params, resolve(outputs_dir or params.outputs_dir, root))
    if params.cache_path:
        published = RunPaths(root=published.root, cache=resolve(params.cache_path, root))
    return published


def _check_run_folder(params: Params, published: RunPaths, params_path: Path, root: Path) -> None:
    from cube.run.stages import check_run_folder

    check_run_folder(
        published.data,
        params,
        display_path(params_path, root),
        display_path(published.root, root),
    )


def _forget_forced(paths: RunPaths, notebooks: list[Path], chosen: set[Path]) -> None:
    """The stages forced now no longer hold what a notebook run alone wrote; when every stage is
    forced, neither does any (a notebook not recognised counted for them all)."""
    from cube.run.ran_alone import forget_ran_alone

    forget_ran_alone(
        paths.notebooks, None if chosen >= set(notebooks) else {nb.stem for nb in chosen}
    )


KERNEL_ARGUMENTS = ["--IPKernelApp.capture_fd_output=False", "--IPKernelApp.log_level=CRITICAL"]


@dataclass
class _Kernel:
    """The run's warm kernel (maybe warming up already), the stages' current fingerprints, and the
    pages exported in the background as stages end."""

    kernel: WarmKernel
    current: dict[str, str]
    pages: PreparedPages


def _warm_up(kernel: WarmKernel, run_env: dict[str, str], paths: RunPaths, root: Path) -> None:
    """Start the run's kernel with the stages' environment and have it import (`warm_up`)."""
    with _kernel_env(**run_env, **_stage_env(paths, root)):
        kernel.warm_up()


def _may_execute(
    params: Params,
    paths: RunPaths,
    notebooks: list[Path],
    chosen: set[Path],
    force: bool,
    current: dict[str, str],
) -> bool:
    """Whether a chosen stage that is not skipped may execute (forced, or its fingerprint or
    executed copy not as recorded): then the kernel is started early (`WarmKernel.warm_up`). A
    run with nothing to do starts no kernel; one whose only stage to re-execute holds failed calls
    starts it when that stage executes."""
    from cube.run.skip import skip_reason

    prints_file = paths.notebooks / ".fingerprints.json"
    prints = json.loads(prints_file.read_text()) if prints_file.exists() else {}
    return any(
        not skip_reason(params, nb.stem, paths)
        and (
            force
            or prints.get(nb.name) != current[nb.name]
            or not (paths.notebooks / nb.name).exists()
        )
        for nb in notebooks
        if nb in chosen
    )


def _calls_models(chosen: set[Path]) -> bool:
    """Whether a chosen stage calls models (questions, answers, judgments): `--only 00` plans
    nothing."""
    return any(nb.name[:2] in ("02", "03") for nb in chosen)


class InputError(ValueError):
    """The run's data inputs have problems (`cube validate`'s errors): nothing was run."""


def check_inputs(
    params: Params,
    root: Path,
    log=print,
    params_file: Path | None = None,
    then: Callable[[], Any] | None = None,
) -> Child[Any] | None:
    """`cube validate`'s data checks before any stage runs: a bad knowledge base, question file or
    imported QA file stops the run here (`InputError`, every problem at once) instead of in the
    stage that reads it; the warnings are logged, one line each, and the run goes on. `then`: work
    the checks' child goes on with once they passed (the plan: `cube.run.before_stages`), returned
    as that child (None without `then`)."""
    from cube.config.forked import in_child
    from cube.run.before_stages import checks_then
    from cube.run.validate import validate_data

    # in a child process: the demo corpus it builds (150 MB at the paper's scale) leaves with it
    child = checks_then(params, root, params_file, then) if then is not None else None
    report = child.first() if child else in_child(lambda: validate_data(params, root, params_file))
    for warning in report.warnings:
        log(f"[cube] warning: {warning}")
    if not report.ok:
        if child:
            child.kill()
        raise InputError(
            "\n".join(
                [*(f"  - {e}" for e in report.errors), f"{report.summary()}; nothing was run"]
            )
        )
    return child


def _go_ahead(planned: Child[Any] | None) -> None:
    """The checks' child begins the plan: once the run holds its folder, not on a folder another
    run holds (the plan runs BM25 and writes the retrieval store)."""
    if planned is not None:
        planned.go()


@contextlib.contextmanager
def _reaped(child: Child[Any] | None) -> Iterator[None]:
    """The block, `child` killed if it raises before the child's result was read."""
    try:
        yield
    except BaseException:
        if child is not None:
            child.kill()
        raise


def _forget_stages_run_outside(
    params: Params,
    published: RunPaths,
    paths: RunPaths,
    notebooks: list[Path],
    params_path: Path,
    root: Path,
    log,
    overrides: list[str] | None = None,
) -> None:
    """A notebook run alone into the published run (other overrides, another params file) makes its
    stage and the stages reading its data out of date, whatever `cube run`'s fingerprints say:
    drop their fingerprints from the staging copy so that they re-execute."""
    from cube.run.ran_alone import forget_ran_alone, stages_run_outside

    injected = {
        "params_path": _param_path(params_path, root),
        "run_dir": _param_path(published.root, root),
        **({"overrides": overrides} if overrides else {}),
    }
    stems = [nb.stem for nb in notebooks]
    outside = stages_run_outside(
        published.root, params, shared_params_yaml(params, published.root), injected, stems
    )
    prints_file = paths.notebooks / ".fingerprints.json"
    prints = json.loads(prints_file.read_text(encoding="utf-8")) if prints_file.exists() else {}
    dropped = {
        nb.name: outside[nb.stem] for nb in notebooks if nb.stem in outside and nb.name in prints
    }
    for name, why in dropped.items():
        prints.pop(name)
        log(f"[cube] {name[:-6]}: out of date ({why})")
    if dropped:
        prints_file.write_text(json.dumps(prints, indent=1), encoding="utf-8")
    # What notebooks run alone recorded is now in the staging copy's fingerprints (a stage without
    # one re-executes when selected): the commit publishes the run without those records.
    forget_ran_alone(paths.notebooks)


def _publish(
    params: Params,
    params_path: Path,
    paths: RunPaths,
    published: RunPaths,
    summary: RunSummary,
    started: dt.datetime,
    notebooks_dir: Path | None,
    log,
    prepared: PreparedPages | None = None,
) -> None:
    """Every selected stage succeeded: commit the staging copy and publish the report."""
    write_manifest(params, paths, summary, started, status="committed", params_file=params_path)
    commit_staging(published.root)
    summary.committed = True
    write_last_run(
        published.report,
        status="committed",
        params_path=Path(display_path(params_path)),
        stages=_stage_dicts(summary),
        message="Every selected stage succeeded; the report shows this run.",
    )
    publish(params, published, notebooks_dir=notebooks_dir, prepared=prepared)
    log(f"[cube] report: {summary.index}")


@dataclass
class _Reported:
    """A stage's line in the run's log and summary, reported in the sequence's order: `outcome`
    None for a stage not run (it reads one that failed); `job` the execution still running."""

    nb: Path
    outcome: StageOutcome | None = None
    line: str = ""
    job: StageJob | None = None


@dataclass
class _StageLoop:
    """What the stage loop of one run reads and updates: the stages' recorded and current
    fingerprints, the stages re-executed so far (the stages reading their data must too), and the
    stages whose lines wait for an earlier stage's (`report`)."""

    params: Params
    paths: RunPaths
    root: Path
    force: bool
    summary: RunSummary
    log: Callable[[str], Any]
    prints: dict[str, str]  # the fingerprints recorded by the stages' last executions
    current: dict[str, str]  # the fingerprints of the stages as they are now
    stems: list[str]
    feeds_decision: set[str]  # the stages whose data and record the decision is computed from
    executed: set[str] = field(default_factory=set)
    pages: PreparedPages | None = None
    waiting: list[_Reported] = field(default_factory=list)  # in the sequence's order
    jobs: dict[str, StageJob] = field(default_factory=dict)  # stem -> its execution
    not_run: set[str] = field(default_factory=set)  # failed, or reading one that failed

    def reads_executed(self, stem: str) -> bool:
        from cube.run.stages import upstream

        return any(s in self.executed for s in upstream(stem, self.stems))

    def forget_if_stale(self, nb: Path) -> None:
        """A stage not selected that reads a re-executed one: re-executed by the next run that
        selects it."""
        if self.reads_executed(nb.stem):
            self.prints.pop(nb.name, None)

    def up_to_date(self, nb: Path, out: Path) -> bool:
        """Not forced, nothing it reads re-executed, its fingerprint unchanged, its executed copy
        present and no failed call left in its data."""
        return (
            not self.force
            and not self.reads_executed(nb.stem)
            and self.prints.get(nb.name) == self.current[nb.name]
            and out.exists()
            and not call_failures(self.paths, nb.stem)
        )

    def done(self, outcome: StageOutcome | None, line: str, nb: Path | None = None) -> None:
        nb = nb or Path(f"{outcome.notebook if outcome else ''}.ipynb")
        self.waiting.append(_Reported(nb, outcome, line))
        self.report()

    def report(self) -> None:
        """Log and record every stage whose line is due: those of the sequence's head that ended."""
        while self.waiting and (self.waiting[0].job is None or self.waiting[0].job.done):
            entry = self.waiting.pop(0)
            if entry.job is not None:
                entry.outcome, entry.line = entry.job.wait()
                self._ended(entry.nb, entry.outcome)
            if entry.outcome is not None:
                self.summary.stages.append(entry.outcome)
            self.log(f"[cube] {entry.nb.stem}: {entry.line}")

    def _ended(self, nb: Path, outcome: StageOutcome) -> None:
        """An executed stage's fingerprint (none while its data hold failed calls: a plain re-run
        retries them) and its pages, exported while the next stages execute."""
        if outcome.status == "failed":
            return
        if not outcome.failed_calls:
            self.prints[nb.name] = self.current[nb.name]
        if self.pages is not None:
            self.pages.add(self.paths.notebooks / nb.name)
        (self.paths.notebooks / ".fingerprints.json").write_text(json.dumps(self.prints, indent=1))

    def keep_ended(self) -> None:
        """After an interrupt: the fingerprints of the stages that ended well but were not reported
        yet (their outputs are kept; a re-run does not execute them again)."""
        for entry in self.waiting:
            job = entry.job
            if job is not None and job.done and job.error is None:
                outcome = job.result[0]
                if outcome.status == "executed" and not outcome.failed_calls:
                    self.prints[entry.nb.name] = self.current[entry.nb.name]

    def failed_input(self, nb: Path) -> str:
        """Wait for the stages `nb` waits for (`waits_for`); the first of them that failed or did
        not run ('' when none)."""
        for stem in waits_for(nb.stem, self.stems, self.params):
            job = self.jobs.get(stem)
            if job is not None:
                outcome, _ = job.wait()
                if outcome.status == "failed":
                    self.not_run.add(stem)
                self.report()
            if stem in self.not_run:
                return stem
        return ""


def waits_for(stem: str, stems: list[str], params: Params | None = None) -> list[str]:
    """The stages a stage may start only after: those it reads (`cube.run.stages.upstream`) and,
    for an optional stage left to `auto` (`params`; None: any switch), the stage writing the
    question set its skipping depends on. 00 and 12 read nothing of the run: switched `on` or
    `off` they wait for nothing (and run even when 02 failed)."""
    from cube.run.skip import QUESTION_STAGE, SWITCHES, switch
    from cube.run.stages import upstream

    out = upstream(stem, stems)
    decided_by_questions = params is None or switch(params, stem) == "auto"
    if (
        stem in SWITCHES
        and decided_by_questions
        and QUESTION_STAGE not in out
        and QUESTION_STAGE in stems
    ):
        out.append(QUESTION_STAGE)
    return out


def fans_out(stem: str, later: list[str], stems: list[str]) -> bool:
    """Whether at least two of the later stages read `stem` directly (after it ends they may
    execute side by side: the run's second kernel starts while it executes)."""
    from cube.run.stages import stage_inputs

    return sum(stem in stage_inputs(s, stems) for s in later) >= 2


def small_corpus(paths: RunPaths) -> bool:
    """Whether the run's knowledge base (01's table) has at most `SECOND_KERNEL_ITEMS` items: only
    then does the run start a second kernel (`cube.run.lanes`), while the stage before the
    fan-out executes."""
    import pyarrow.parquet as pq

    from cube.run.lanes import SECOND_KERNEL_ITEMS

    path = paths.data_file("corpus")
    try:
        return path.exists() and pq.read_metadata(path).num_rows <= SECOND_KERNEL_ITEMS
    except (OSError, ValueError):
        return False


def _run_stages(
    params: Params,
    params_path: Path,
    paths: RunPaths,
    notebooks: list[Path],
    chosen: set[Path],
    force: bool,
    summary: RunSummary,
    log,
    overrides: list[str] | None,
    warm: _Kernel,
) -> None:
    """Each chosen stage in the sequence's order: skipped, up to date, or executed in a free kernel
    of the run (`cube.run.lanes`) once every stage it reads has ended. A failed stage stops the
    stages reading it (each logged as not run); the others still execute, and every line is
    logged in the sequence's order, whichever kernel ended first."""
    from cube.run.lanes import Lanes
    from cube.run.skip import run_order
    from cube.run.stages import upstream

    root = project_root()
    prints_file = paths.notebooks / ".fingerprints.json"
    stems = [nb.stem for nb in notebooks]
    loop = _StageLoop(
        params,
        paths,
        root,
        force,
        summary,
        log,
        prints=json.loads(prints_file.read_text()) if prints_file.exists() else {},
        current=warm.current,
        stems=stems,
        feeds_decision=set(upstream(DECISION_STAGE, stems)),
        pages=warm.pages,
    )
    injected = _injected(params_path, paths, root, overrides)
    lanes = Lanes(warm.kernel)
    order = run_order(params, notebooks, chosen)
    try:
        with _kernel_env(**_stage_env(paths, root)):
            for i, nb in enumerate(order):
                later = [s.stem for s in order[i + 1 :] if s in chosen]
                _next_stage(loop, lanes, nb, nb in chosen, injected, later)
            for job in list(loop.jobs.values()):
                job.wait()
            loop.report()
    except BaseException:
        lanes.kill()  # interrupted: no event loop may run again (see `WarmKernel.kill`)
        loop.keep_ended()
        raise
    finally:
        lanes.close()
        prints_file.write_text(json.dumps(loop.prints, indent=1))


def _next_stage(
    loop: _StageLoop,
    lanes: Lanes,
    nb: Path,
    chosen: bool,
    injected: dict[str, str | list[str]],
    later: list[str],
) -> None:
    """Decide one stage of the sequence (after the stages it reads ended) and start it when it
    executes."""
    from cube.run.skip import note_skipped

    if not chosen:
        loop.forget_if_stale(nb)
        return
    failed = loop.failed_input(nb)
    if failed:
        loop.not_run.add(nb.stem)
        why = f"it reads {failed}, which did not succeed"
        loop.done(StageOutcome(nb.stem, "not run", 0.0, error=why), f"not run: {why}", nb)
        return
    if _skipped(loop, nb):
        return
    note_skipped(loop.paths.notebooks, nb.stem, "")
    out = loop.paths.notebooks / nb.name
    if loop.up_to_date(nb, out):
        loop.done(StageOutcome(nb.stem, "up to date", 0.0), "up to date")
        return
    loop.prints.pop(nb.name, None)
    loop.executed.add(nb.stem)
    _forget_stale(loop.paths, nb.stem, loop.feeds_decision)
    if (
        fans_out(nb.stem, later, loop.stems)
        or (later and fans_out(later[0], later[1:], loop.stems))
    ) and small_corpus(loop.paths):
        lanes.warm_second()  # warm when the stages after the fan-out begin
    job = lanes.submit(lambda kernel: _execute_stage(loop, kernel, nb, out, injected))
    loop.jobs[nb.stem] = job
    loop.waiting.append(_Reported(nb, job=job))


def _injected(
    params_path: Path, paths: RunPaths, root: Path, overrides: list[str] | None
) -> dict[str, str | list[str]]:
    """The parameters the notebooks receive: paths relative to the project root (the executed
    notebooks are published); the staging folder is named by an environment variable."""
    return {
        "params_path": _param_path(params_path, root),
        "run_dir": _param_path(paths.root.parent, root),
        **({"overrides": overrides} if overrides else {}),
    }


def _skipped(loop: _StageLoop, nb: Path) -> bool:
    """An optional stage its params turn off (`cube.run.skip`): its data forgotten, the reason
    recorded; `on` again executes it."""
    from cube.run.skip import forget_skipped, skip_reason

    reason = skip_reason(loop.params, nb.stem, loop.paths)
    if not reason:
        return False
    loop.prints.pop(nb.name, None)
    forget_skipped(loop.paths, nb, reason)
    loop.done(StageOutcome(nb.stem, "skipped", 0.0, reason), reason)
    return True


def _execute_stage(
    loop: _StageLoop, kernel: WarmKernel, nb: Path, out: Path, injected: dict[str, str | list[str]]
) -> tuple[StageOutcome, str]:
    """Execute one stage in one of the run's warm kernels (on a runner thread): its outcome and
    log line; a failure keeps what earlier stages computed and is published."""
    t0 = time.perf_counter()
    try:
        # Progress bars go to the terminal of `cube run`, not into the published pages: the
        # kernel writes them to its inherited stderr, which it is told not to capture. Its
        # own log (transport warnings, shutdown noise) is silenced: errors reach the
        # notebook. The kernel is reset before each stage (`cube.run.kernel`).
        kernel.execute(nb, out, injected)
    except Exception as exc:  # keep what earlier stages computed; publish the failure
        _relative_papermill_paths(out, nb, loop.root)
        seconds = time.perf_counter() - t0
        return (
            StageOutcome(nb.stem, "failed", seconds, _short(exc)),
            f"FAILED after {seconds:.1f} s: {_short(exc)}",
        )
    _relative_papermill_paths(out, nb, loop.root)
    failed = call_failures(loop.paths, nb.stem)
    note = ""
    if failed:  # not fingerprinted: a plain re-run retries exactly the failed calls
        note = f" ({failed} rows hold a failed call; a plain `cube run` retries those calls)"
    seconds = time.perf_counter() - t0
    return (
        StageOutcome(nb.stem, "executed", seconds, failed_calls=failed),
        f"done in {seconds:.1f} s{note}",
    )


def _stage_env(paths: RunPaths, root: Path) -> dict[str, str]:
    """The environment a stage's kernel starts with (besides the run's): progress bars to the
    terminal, the thread limits, the staging folder and the project root."""
    from cube.run.notebook import STAGING_ENV

    return {
        "CUBE_PROGRESS": "terminal",
        "PYTHONWARNINGS": "ignore:IProgress not found",
        **kernel_thread_limits(),
        STAGING_ENV: str(paths.root.resolve()),
        ROOT_ENV: str(root),
    }


def _relative_papermill_paths(executed: Path, source: Path, root: Path) -> None:
    """papermill records the input and output paths in the executed notebook's metadata: keep
    them relative to the project root (the published run never holds local absolute paths)."""
    if not executed.exists():
        return
    nb = json.loads(executed.read_text(encoding="utf-8"))
    meta = nb.get("metadata", {}).get("papermill")
    if isinstance(meta, dict):
        meta["input_path"] = display_path(source, root)
        meta["output_path"] = f"notebooks/{executed.name}"
        executed.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _param_path(path: Path, root: Path) -> str:
    """A path given to a notebook (and so shown in its executed copy and pages): relative to the
    project root when inside it, else its name only; `execute_run` maps it back to the local path
    for the kernel (`cube.run.notebook.LOCAL_PATHS_ENV`)."""
    return display_path(path.resolve(), root)


def _stage_dicts(summary: RunSummary) -> list[dict[str, Any]]:
    return [s.__dict__ for s in summary.stages]


def _record_attempt(
    params: Params,
    params_path: Path,
    paths: RunPaths,
    summary: RunSummary,
    started: dt.datetime,
    status: str,
    reason: str = "",
) -> None:
    """A failed or interrupted attempt (`reason`: the runner's own error, when no stage failed):
    its manifest in the staging folder, `report/last_run.html`
    in the published run; the published params, results, tables and index stay as they were
    (an index is written only when nothing was published yet)."""
    write_manifest(params, paths, summary, started, status=status, params_file=params_path)
    failed = next((s for s in summary.stages if s.status == "failed"), None)
    if status == "interrupted":
        message = (
            f"Interrupted ({summary.interrupted}). Nothing was published by this attempt; its "
            f"completed stages are kept in {display_path(paths.root)} and `cube run "
            f"{display_path(params_path)}` resumes them "
            "(LLM calls already made are served from the cache)."
        )
    else:
        before = (
            "the report still shows the last successful run"
            if has_published_run(summary.paths)
            else "no run of these params has succeeded yet"
        )
        what = f"Stage {failed.notebook} failed: {failed.error}" if failed else ""
        message = (
            f"{what or f'The run failed: {reason}'}. "
            f"Nothing was published by this attempt; {before}. Fix the cause and run `cube run "
            f"{display_path(params_path)}` again: completed stages are kept."
        )
    published = summary.paths
    write_last_run(
        published.report,
        status=status,
        params_path=Path(display_path(params_path)),
        stages=_stage_dicts(summary),
        message=message,
    )
    if not (published.report / "index.html").exists():
        publish(params, published, attempt={"status": status, "message": message})


def has_published_run(paths: RunPaths) -> bool:
    """A run of this folder was committed before (its manifest says so): the report shows it."""
    if not paths.manifest.exists():
        return False
    try:
        return json.loads(paths.manifest.read_text(encoding="utf-8")).get("status") == "committed"
    except (OSError, ValueError):
        return False


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def kernel_thread_limits() -> dict[str, str]:
    """One BLAS/OpenMP thread per kernel, unless the user set these variables: the stages' matrix
    products are small, and spinning BLAS threads doubled their CPU time for no speed-up."""
    return {v: "1" for v in THREAD_VARS if v not in os.environ}


@contextlib.contextmanager
def _kernel_env(**values: str) -> Iterator[None]:
    """Environment variables for the kernels started inside the block (they inherit ours)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[-1] if text else type(exc).__name__)[:500]


# --------------------------------------------------------------------------------- manifest
def write_manifest(
    params: Params,
    paths: RunPaths,
    summary: RunSummary,
    started: dt.datetime,
    status: str = "committed",
    params_file: Path | None = None,
) -> Path:
    """`manifest.json`: what produced this report (params, commit, versions, usage, timing).

    Stage timings are merged with the previous manifest's: a stage that was not executed this
    time (not selected, or up to date) keeps the entry of the run that executed it."""
    stages = _merged_stages(paths, summary)
    usage = _usage(paths)
    plan, vs_actual = _plan_vs_actual(paths, usage)
    manifest = {
        "run": params.run,
        "status": f"interrupted ({summary.interrupted})" if summary.interrupted else status,
        "params_file": display_path(params_file) if params_file else None,
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "versions": _versions(),
        "stages": [stages[k] for k in sorted(stages)],
        "usage": usage,
        "plan": plan,
        "plan_vs_actual": vs_actual,
        "concurrency": _concurrency(paths),
        "params": shared_values(json.loads(params.model_dump_json()))[0],
    }
    paths.manifest.write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False, default=str), encoding="utf-8"
    )
    return paths.manifest


_VERSIONED = (
    "cube",
    "pandas",
    "numpy",
    "scipy",
    "openai",
    "papermill",
    "nbconvert",
    "bm25s",
    "jieba",
    "sacrebleu",
    "rouge-score",
    "ragflow-sdk",
)  # the packages whose versions the manifest records


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, str | None] = {}
    for pkg in _VERSIONED:
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    return versions


def _merged_stages(paths: RunPaths, summary: RunSummary) -> dict[str, dict[str, Any]]:
    """The previous manifest's stage entries, each replaced by this run's when it executed the
    stage (or the previous manifest has none)."""
    previous = (
        json.loads(paths.manifest.read_text(encoding="utf-8")) if paths.manifest.exists() else {}
    )
    stages = {
        s["notebook"]: s
        for s in previous.get("stages", [])
        if isinstance(s, dict) and "notebook" in s
    }
    for s in summary.stages:
        if s.status != "up to date" or s.notebook not in stages:
            stages[s.notebook] = dict(s.__dict__)
    return stages


def _start_plan(
    params: Params, paths: RunPaths, root: Path, planned: Child[Any] | None = None
) -> Child[tuple[Any, str]]:
    """`cube plan` of the run, computed in a forked child while the runner goes on (the kernel
    starts, the fingerprints): its memory (268k calls at the paper's scale) leaves with it.
    `planned`: the input checks' child computing it already (`check_inputs`)."""
    from cube.config.forked import start_child

    if planned is not None:
        return planned
    return start_child(lambda: _plan_rows(params, paths, root))


def _record_plan(plan: Child[tuple[Any, str]], paths: RunPaths, log) -> None:
    """`cube plan` before any call of the run, into results.json (`plan`): the manifest sets it
    beside the usage the run reports. A plan that cannot be made (an input the stages will reject
    anyway) is recorded as its reason and never stops the run."""
    from cube.config.forked import ChildFailed

    try:
        rows, line = plan.result()
    except ChildFailed as exc:
        rows, line = {"error": _short(exc)}, ""
    if line:
        log(line)
    write_part(paths, PlanRecord(plan=rows))


def _plan_rows(params: Params, paths: RunPaths, root: Path) -> tuple[Any, str]:
    """The plan's rows (or why it could not be made) and its line in the run's log."""
    from cube.run.plan import build_plan, plan_line

    try:
        plan = build_plan(params, base_dir=root, cache_path=paths.cache)
    except Exception as exc:  # noqa: BLE001  the stages report the input's problem themselves
        return {"error": _short(exc)}, ""
    line = f"[cube] plan: {plan_line(plan)}; `cube plan` shows them per role and model"
    return json.loads(plan.to_json(orient="records")), line


def _plan_vs_actual(
    paths: RunPaths, usage: list[dict[str, Any]]
) -> tuple[Any, list[dict[str, Any]]]:
    from cube.run.plan import plan_vs_actual

    plan = read_record(paths.results).plan.plan
    return plan, plan_vs_actual(plan, usage) if isinstance(plan, list) else []


def _usage(paths: RunPaths) -> list[dict[str, Any]]:
    """The usage of every table holding calls (`cube.run.decide.call_usage`: the decision's cost
    card reads the same)."""
    # imported here, before the fork: the runner has threads then (the pages' pool), and a child
    # importing a module could wait forever on an import lock one of them held at the fork
    import pyarrow.parquet  # noqa: F401

    import cube.llm.usage  # noqa: F401
    import cube.run.decide  # noqa: F401
    from cube.config.forked import in_child

    # in a child process: every table of calls read (293k judgments at the paper's scale, +220 MB)
    return in_child(lambda: _usage_rows(paths))


def _usage_rows(paths: RunPaths) -> list[dict[str, Any]]:
    from cube.run.decide import call_usage

    usage = call_usage(paths)
    return [] if usage is None else json.loads(usage.to_json(orient="records"))


def _concurrency(paths: RunPaths) -> dict[str, Any]:
    """The adaptive concurrency each LLM judge reached, per judge (its model and endpoints): start,
    peak in flight, final and lowest limit, cuts, 429s and timeouts (`cube.llm.concurrency`) and
    `calls_sent`. Written by every run of the judging stage (in results.json): a judge whose calls
    were all cached has `calls_sent: 0` and a note, never the figures of an earlier run."""
    return read_record(paths.results).scores.judge_concurrency or {}


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parents[2],
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
