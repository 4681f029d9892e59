"""Executing the notebook sequence (papermill) and publishing it as HTML (nbconvert, in-process).

`execute_run` runs `notebooks/[0-9][0-9]_*.ipynb` in order into `outputs/<run>/notebooks/`,
skipping a notebook whose inputs are unchanged since its last successful execution (its
fingerprint: the notebook file, the resolved params, the package's source and the
fingerprints of the notebooks before it; `force=True` re-executes). Re-executing a stage
makes every later stage stale: they re-execute in this run when selected, else in the next
run that selects them (make-like; LLM calls are served from the cache either way). A stage whose
data hold failed calls is never up to date. Stages run in the run's staging copy, published only
when every selected stage succeeded (`cube.runstate`: lock, staging, interrupts). Each executed notebook is
exported twice: `report/<name>.html` without code (for readers) and `report/code/<name>.html`
with code. `index.html` opens on the decision page (`cube.lta`), then links every page, table
and figure. Everything that came from a system or a judge is escaped (jinja2 autoescape;
pandas escapes DataFrame cells).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cube.config import Params, RunPaths, load_params, params_to_yaml, write_resolved_params
from cube.runstate import (
    LAST_RUN,
    RunInterrupted,
    commit_staging,
    finish_interrupted_commit,
    kill_child_kernels,
    prepare_staging,
    run_lock,
    write_last_run,
)

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"


def default_notebooks_dir() -> Path:
    """`./notebooks` when present, else the repository's `notebooks/` beside the package."""
    here = Path("notebooks")
    return here if here.is_dir() else Path(__file__).resolve().parents[1] / "notebooks"


def list_notebooks(notebooks_dir: Path) -> list[Path]:
    found = sorted(Path(notebooks_dir).glob(NOTEBOOK_GLOB))
    if not found:
        raise FileNotFoundError(f"{notebooks_dir}: no notebooks matching {NOTEBOOK_GLOB}")
    return found


def select_notebooks(notebooks: list[Path], only: str | None) -> list[Path]:
    """Pick notebooks by number: `03`, `03..06`, `..04`, `05..`, or a comma list `01,03..04`."""
    if not only:
        return notebooks
    numbers = {p: int(p.name[:2]) for p in notebooks}
    wanted: set[int] = set()
    for part in only.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)?\s*\.\.\s*(\d+)?", part)
        if m:
            lo = int(m.group(1)) if m.group(1) else 0
            hi = int(m.group(2)) if m.group(2) else 99
            wanted |= set(range(lo, hi + 1))
        elif part.isdigit():
            wanted.add(int(part))
        else:
            raise ValueError(f"--only: cannot read {part!r}; use e.g. 03, 03..06, ..04, 05.. or 01,03")
    chosen = [p for p in notebooks if numbers[p] in wanted]
    if not chosen:
        raise ValueError(f"--only {only}: matches none of {[p.name for p in notebooks]}")
    return chosen


DECISION_STAGE = 6  # notebook 06 writes the decision; any earlier stage re-executing makes it stale
HEADLINE_KEYS = ("decision", "cube_score", "recall_at_k", "weighted_score", "verdict")


def _forget_decision(paths: RunPaths) -> None:
    if paths.results.exists():
        results = json.loads(paths.results.read_text(encoding="utf-8"))
        for key in HEADLINE_KEYS:
            results.pop(key, None)
        paths.results.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")


def _input_files_digest(params: Params) -> str:
    """Contents of the user's files the params name (corpus, questions, imported answers, ratings,
    prompt files): replacing one at the same path makes the stages that read it out of date."""
    named = [params.corpus.path if params.corpus.source == "file" else None,
             params.questions.path if params.questions.generator == "file" else None,
             params.human.ratings, *[getattr(s, "path", None) for s in params.systems],
             *[d.prompt_file for d in params.dimension_list()]]
    h = hashlib.sha256()
    for name in filter(None, named):
        path = Path(name)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            h.update(str(f).encode())
            h.update(f.read_bytes() if f.is_file() else b"<missing>")
    return h.hexdigest()


def _package_digest() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for f in sorted(root.rglob("*")):
        if f.is_file() and f.suffix in {".py", ".txt", ".csv", ".j2", ".json"} and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@dataclass
class StageOutcome:
    notebook: str
    status: str  # executed | up to date | failed
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
    """Rows with `error_kind == "call"` in the data files the stage writes (answers, scores...):
    a stage holding failed calls is never up to date, so a plain re-run retries exactly those
    calls (successful ones are served from the cache; failures are never cached)."""
    import pandas as pd

    from cube.notebook import PRODUCED_BY

    failed = 0
    for name, producer in PRODUCED_BY.items():
        path = paths.data_file(name)
        if producer == stage and path.exists():
            import pyarrow.parquet as pq

            if "error_kind" in pq.read_schema(path).names:
                kinds = pd.read_parquet(path, columns=["error_kind"])["error_kind"]
                failed += int(kinds.fillna("").astype(str).eq("call").sum())
    return failed


def execute_run(params_path: str | Path, *, notebooks_dir: Path | None = None, only: str | None = None,
                force: bool = False, outputs_dir: str | Path | None = None, log=print) -> RunSummary:
    """Execute the notebook sequence for a params file and publish the report.

    The run folder is locked for the duration (`RunLocked` if another run holds it); stages run
    in its staging copy, committed over the published run only when every selected stage
    succeeded (see `cube.runstate`). SIGINT/SIGTERM (`RunInterrupted`, `KeyboardInterrupt`) kill
    the kernel, record the attempt and propagate."""
    params_path = Path(params_path).resolve()
    params = load_params(params_path)
    published = RunPaths.for_params(params, outputs_dir)
    notebooks = list_notebooks(notebooks_dir or default_notebooks_dir())
    chosen = set(select_notebooks(notebooks, only))
    with run_lock(published.root, log=log):
        finish_interrupted_commit(published.root, log=log)
        staging = prepare_staging(published.root, params_to_yaml(params), log=log)
        paths = RunPaths(root=staging, cache=published.cache).ensure()
        write_resolved_params(params, paths)
        summary = RunSummary(published)
        started = dt.datetime.now(dt.UTC)
        try:
            _run_stages(params, params_path, paths, notebooks, chosen, force, summary, log)
        except (RunInterrupted, KeyboardInterrupt) as exc:
            kill_child_kernels()
            summary.interrupted = getattr(exc, "signame", "SIGINT")
            _record_attempt(params, params_path, paths, summary, started, "interrupted")
            raise
        if not summary.ok:
            _record_attempt(params, params_path, paths, summary, started, "failed")
            return summary
        write_manifest(params, paths, summary, started, status="committed", params_file=params_path)
        commit_staging(published.root)
        summary.committed = True
        write_last_run(published.report, status="committed", params_path=params_path, stages=_stage_dicts(summary),
                       message="Every selected stage succeeded; the report shows this run.")
        publish(params, published)
        log(f"[cube] report: {summary.index}")
        return summary


def _run_stages(params: Params, params_path: Path, paths: RunPaths, notebooks: list[Path], chosen: set[Path],
                force: bool, summary: RunSummary, log) -> None:
    import papermill as pm

    prints_file = paths.notebooks / ".fingerprints.json"
    prints = json.loads(prints_file.read_text()) if prints_file.exists() else {}
    upstream = hashlib.sha256((params_to_yaml(params) + _package_digest() + _input_files_digest(params))
                              .encode()).hexdigest()
    executed_before = False  # once a stage re-executes, every later stage's inputs may have changed
    try:
        for nb in notebooks:
            upstream = hashlib.sha256((upstream + nb.read_text(encoding="utf-8")).encode()).hexdigest()
            if nb not in chosen:
                if executed_before:
                    prints.pop(nb.name, None)  # stale: re-executed by the next run that selects it
                continue
            out = paths.notebooks / nb.name
            if (not force and not executed_before and prints.get(nb.name) == upstream and out.exists()
                    and not call_failures(paths, nb.stem)):
                summary.stages.append(StageOutcome(nb.stem, "up to date", 0.0))
                log(f"[cube] {nb.stem}: up to date")
                continue
            t0 = time.perf_counter()
            prints.pop(nb.name, None)
            executed_before = True
            if int(nb.name[:2]) <= DECISION_STAGE:  # the decision is stale until 06 runs again
                _forget_decision(paths)
            try:
                # Progress bars go to the terminal of `cube run`, not into the published pages: the
                # kernel writes them to its inherited stderr, which it is told not to capture. Its
                # own log (transport warnings, shutdown noise) is silenced: errors reach the notebook.
                with _kernel_env(CUBE_PROGRESS="terminal", PYTHONWARNINGS="ignore:IProgress not found"):
                    pm.execute_notebook(
                        str(nb), str(out),
                        parameters={"params_path": str(params_path), "run_dir": str(paths.root.resolve())},
                        cwd=str(Path.cwd()),
                        progress_bar=False, log_output=False, kernel_name="python3",
                        extra_arguments=["--IPKernelApp.capture_fd_output=False",
                                         "--IPKernelApp.log_level=CRITICAL"],
                    )
            except Exception as exc:  # keep what earlier stages computed; publish the failure
                summary.stages.append(StageOutcome(nb.stem, "failed", time.perf_counter() - t0, _short(exc)))
                log(f"[cube] {nb.stem}: FAILED after {time.perf_counter() - t0:.1f} s: {_short(exc)}")
                break
            failed = call_failures(paths, nb.stem)
            note = ""
            if failed:  # not fingerprinted: a plain re-run retries exactly the failed calls
                note = f" ({failed} rows hold a failed call; a plain `cube run` retries those calls)"
            else:
                prints[nb.name] = upstream
            prints_file.write_text(json.dumps(prints, indent=1))
            summary.stages.append(StageOutcome(nb.stem, "executed", time.perf_counter() - t0, failed_calls=failed))
            log(f"[cube] {nb.stem}: done in {time.perf_counter() - t0:.1f} s{note}")
    finally:
        prints_file.write_text(json.dumps(prints, indent=1))


def _stage_dicts(summary: RunSummary) -> list[dict[str, Any]]:
    return [s.__dict__ for s in summary.stages]


def _record_attempt(params: Params, params_path: Path, paths: RunPaths, summary: RunSummary,
                    started: dt.datetime, status: str) -> None:
    """A failed or interrupted attempt: its manifest in the staging folder, `report/last_run.html`
    in the published run; the published params, results, tables and index stay as they were
    (an index is written only when nothing was published yet)."""
    write_manifest(params, paths, summary, started, status=status, params_file=params_path)
    failed = next((s for s in summary.stages if s.status == "failed"), None)
    if status == "interrupted":
        message = (f"Interrupted ({summary.interrupted}). Nothing was published by this attempt; its "
                   f"completed stages are kept in {paths.root} and `cube run {params_path}` resumes them "
                   "(LLM calls already made are served from the cache).")
    else:
        message = (f"Stage {failed.notebook if failed else '?'} failed: {failed.error if failed else ''}. "
                   f"Nothing was published by this attempt; the report still shows the last successful run. "
                   f"Fix the cause and run `cube run {params_path}` again: completed stages are kept.")
    published = summary.paths
    write_last_run(published.report, status=status, params_path=params_path, stages=_stage_dicts(summary),
                   message=message)
    if not (published.report / "index.html").exists():
        publish(params, published, attempt={"status": status, "message": message})


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


# ------------------------------------------------------------------------------------- HTML
def export_html(executed: Path, target: Path, *, with_code: bool) -> Path:
    """One executed notebook as a standalone HTML page (nbconvert, in-process)."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", exclude_input=not with_code, exclude_input_prompt=not with_code,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target


def publish(params: Params, paths: RunPaths, attempt: dict[str, str] | None = None) -> Path:
    """Export every executed notebook and write `report/index.html`. A page whose stage is out
    of date (an earlier stage re-executed or failed since) is listed as such. `attempt` (status,
    message) is shown when an attempt ended without anything published yet."""
    prints_file = paths.notebooks / ".fingerprints.json"
    current = json.loads(prints_file.read_text()) if prints_file.exists() else {}
    pages = []
    for executed in sorted(paths.notebooks.glob(NOTEBOOK_GLOB)):
        html = paths.report / f"{executed.stem}.html"
        code = paths.report / "code" / f"{executed.stem}.html"
        if not html.exists() or html.stat().st_mtime < executed.stat().st_mtime:
            export_html(executed, html, with_code=False)
            export_html(executed, code, with_code=True)
        pages.append({"name": executed.stem, "title": _notebook_title(executed),
                      "href": html.name, "code_href": f"code/{code.name}", "stale": executed.name not in current})
    from cube.browser import write_browser  # issue 13: report/judgments.html, every judgment
    write_browser(paths)
    return write_index(params, paths, pages, attempt)


def _notebook_title(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return path.stem


def write_index(params: Params, paths: RunPaths, pages: list[dict[str, str]],
                attempt: dict[str, str] | None = None) -> Path:
    import jinja2

    results = json.loads(paths.results.read_text(encoding="utf-8")) if paths.results.exists() else {}
    manifest = json.loads(paths.manifest.read_text(encoding="utf-8")) if paths.manifest.exists() else {}
    env = jinja2.Environment(autoescape=True, undefined=jinja2.ChainableUndefined)
    env.filters["num"] = _num
    template = env.from_string(resources.files("cube.templates").joinpath("index.html.j2").read_text("utf-8"))
    rel = lambda p: Path("..") / p.relative_to(paths.root)  # noqa: E731
    html = template.render(
        params=params, results=results, decision=results.get("decision"), manifest=manifest, pages=pages,
        attempt=attempt, last_run=LAST_RUN,
        tables=[{"name": p.name, "href": rel(p).as_posix()} for p in sorted(paths.tables.glob("*.csv"))],
        figures=[{"name": p.name, "href": rel(p).as_posix()} for p in sorted(paths.figures.glob("*.png"))],
    )
    index = paths.report / "index.html"
    index.write_text(html, encoding="utf-8")
    return index


def _num(value: Any, digits: int = 2) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if v != v else f"{v:.{digits}f}"


# --------------------------------------------------------------------------------- manifest
def write_manifest(params: Params, paths: RunPaths, summary: RunSummary, started: dt.datetime,
                   status: str = "committed", params_file: Path | None = None) -> Path:
    """`manifest.json`: what produced this report (params, commit, versions, usage, timing).

    Stage timings are merged with the previous manifest's: a stage that was not executed this
    time (not selected, or up to date) keeps the entry of the run that executed it."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("cube", "pandas", "numpy", "scipy", "openai", "papermill", "nbconvert", "bm25s", "jieba",
                "sacrebleu", "rouge-score", "ragflow-sdk"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    previous = json.loads(paths.manifest.read_text(encoding="utf-8")) if paths.manifest.exists() else {}
    stages = {s["notebook"]: s for s in previous.get("stages", []) if isinstance(s, dict) and "notebook" in s}
    for s in summary.stages:
        if s.status != "up to date" or s.notebook not in stages:
            stages[s.notebook] = dict(s.__dict__)
    manifest = {
        "run": params.run,
        "status": status if not summary.interrupted else f"interrupted ({summary.interrupted})",
        "params_file": str(params_file) if params_file else None,
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "versions": versions,
        "stages": [stages[k] for k in sorted(stages)],
        "usage": _usage(paths),
        "params": json.loads(params.model_dump_json()),
    }
    paths.manifest.write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    return paths.manifest


def _usage(paths: RunPaths) -> list[dict[str, Any]]:
    import pandas as pd

    from cube.llm import usage_summary

    tables = [pd.read_parquet(p) for n in ("questions", "answers", "scores")
              if (p := paths.data_file(n)).exists()]
    if not tables:
        return []
    return json.loads(usage_summary(tables).to_json(orient="records"))


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parents[1])
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
