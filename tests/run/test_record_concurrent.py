"""results.json written by stages executing side by side (`cube.run.lanes`): each stage's part is
kept, and a reader never sees half a file (`cube.run.record.write_part`: the run folder's lock and
an atomic replace)."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

from cube.config.runpaths import RunPaths
from cube.run.record import read_record, write_part
from cube.run.record_parts import PaperRecord, PlanRecord

ROUNDS = 300


def _paths(root: Path) -> RunPaths:
    return RunPaths(root=root, cache=root / "cache.sqlite")


def _write_plans(root: str) -> None:
    paths = _paths(Path(root))
    (paths.root / "ready").touch()
    while not (paths.root / "go").exists():
        time.sleep(0.01)
    for i in range(ROUNDS):
        write_part(paths, PlanRecord(plan=[{"round": i}]))


def test_parts_written_at_once_by_two_processes_are_all_kept(tmp_path):
    paths = _paths(tmp_path)
    other = multiprocessing.get_context("spawn").Process(target=_write_plans, args=(str(tmp_path),))
    other.start()
    while not (tmp_path / "ready").exists():
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for i in range(ROUNDS):
        write_part(paths, PaperRecord(paper_table4_max_abs_difference=float(i)))
        # every read while the other process writes is a whole file
        json.loads(paths.results.read_text(encoding="utf-8"))
    other.join(60)
    assert other.exitcode == 0
    record = read_record(paths.results)
    assert record.paper.paper_table4_max_abs_difference == ROUNDS - 1
    assert record.plan.plan == [{"round": ROUNDS - 1}]
    assert not list(tmp_path.glob("*.tmp"))  # no temp file left behind
