"""The optional stages of `cube run` (params `stages`, issue 31): when they are skipped, and
forgetting what a skipped stage published before.

00_paper_tables (the paper's published tables) and 12_validation (the simulation study) read no
data of the run: on an 8-question run they were a third of its time (46 of 143 s). `on` runs the
stage, `off` skips it, `auto` skips it when the run's question set is known (its questions table)
and has fewer than `SMALL_RUN_QUESTIONS` questions; with `auto`, 00 runs right after the stage
writing the question set (02) when the run executes it, so that the count is known by then (a
run without 02 knows it from its data, or runs 00). A skipped stage leaves no page of an earlier
run behind: its executed notebook, report pages, tables, figures and `results.json` figures are
removed, and `notebooks/.skipped.json` gives the report the reason it shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from cube.config.params import Params
from cube.config.runpaths import RunPaths
from cube.config.sections import SMALL_RUN_QUESTIONS
from cube.pages.publish import SKIPPED_FILE
from cube.run.record import forget
from cube.run.stages import written_keys

# stage -> its switch in params `stages`
SWITCHES = {"00_paper_tables": "paper_tables", "12_validation": "validation"}
QUESTION_STAGE = "02_qa_sets"  # writes the question set (data/questions)
# the `results.json` keys each optional stage records (its `Stage.record_writes`)
RESULT_KEYS = {stage: written_keys(stage) for stage in SWITCHES}


def switch(params: Params, stage: str) -> str:
    """`on`, `off` or `auto` for an optional stage; `on` for every other stage."""
    key = SWITCHES.get(stage)
    return getattr(params.stages, key) if key else "on"


def question_count(paths: RunPaths) -> int | None:
    """The number of questions of the run's question set (None before it exists)."""
    path = paths.data_file("questions")
    if not path.exists():
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["question_id"])
    return len(set(table.column("question_id").to_pylist()))


def skip_reason(params: Params, stage: str, paths: RunPaths) -> str:
    """Why the stage is skipped in this run ('' when it runs)."""
    choice = switch(params, stage)
    key = f"stages.{SWITCHES.get(stage, '')}"
    if choice == "off":
        return f"skipped: `{key}: off` in the params"
    if choice == "auto":
        n = question_count(paths)
        if n is not None and n < SMALL_RUN_QUESTIONS:
            return (
                f"skipped: the run has {n} questions, fewer than {SMALL_RUN_QUESTIONS} "
                f"(`{key}: auto`; `on` runs it)"
            )
    return ""


def run_order(params: Params, notebooks: list[Path], chosen: set[Path] | None = None) -> list[Path]:
    """The notebooks in execution order. With `stages.paper_tables: auto`, 00_paper_tables (which
    reads nothing of the run) runs right after `QUESTION_STAGE` when that stage is part of this
    run, so that the question set deciding it is known; otherwise in its place, first."""
    by_stem = {nb.stem: nb for nb in notebooks}
    paper, questions = by_stem.get("00_paper_tables"), by_stem.get(QUESTION_STAGE)
    if (
        paper is None
        or questions is None
        or switch(params, paper.stem) != "auto"
        or (chosen is not None and questions not in chosen)
    ):
        return list(notebooks)
    order = [nb for nb in notebooks if nb != paper]
    order.insert(order.index(questions) + 1, paper)
    return order


def forget_skipped(paths: RunPaths, notebook: Path, reason: str) -> None:
    """Remove what the stage published in an earlier run (its executed notebook, report pages,
    tables, figures and results) and record why it was skipped."""
    from cube.pages.publish import page_outputs

    executed = paths.notebooks / notebook.name
    if executed.exists():
        for out in page_outputs(executed):
            folder, suffix = (
                (paths.tables, ".csv") if out["kind"] == "table" else (paths.figures, ".png")
            )
            (folder / f"{out['name']}{suffix}").unlink(missing_ok=True)
        executed.unlink()
    for page in (
        paths.report / f"{notebook.stem}.html",
        paths.report / "code" / f"{notebook.stem}.html",
    ):
        page.unlink(missing_ok=True)
    forget(paths, RESULT_KEYS.get(notebook.stem, ()))
    note_skipped(paths.notebooks, notebook.stem, reason)


def note_skipped(folder: Path, stage: str, reason: str) -> None:
    """Record (reason) or clear ('' ) that a stage was skipped, in `notebooks/.skipped.json`."""
    path = folder / SKIPPED_FILE
    skipped = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if reason:
        skipped[stage] = reason
    elif stage not in skipped:
        return
    else:
        skipped.pop(stage)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(skipped, indent=1, ensure_ascii=False), encoding="utf-8")


def skipped_stages(folder: Path) -> dict[str, str]:
    """Stage -> why it was skipped, as the last run recorded it."""
    path = folder / SKIPPED_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
