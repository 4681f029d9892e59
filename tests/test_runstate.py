"""The run folder's staging copy, its commit, its lock and signal handling (no notebooks run)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from cube.runstate import (
    STAGING,
    RunInterrupted,
    RunLocked,
    finish_interrupted_commit,
    interrupts_raise,
    prepare_staging,
    run_lock,
)


def _published(root):
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "t.csv").write_text("a\n1\n")
    (root / "params.yaml").write_text("run: old\n")
    (root / "results.json").write_text('{"cube_score": 70}')
    (root / "report").mkdir()
    (root / "report" / "index.html").write_text("<p>old</p>")


def test_staging_copies_the_published_run_and_resumes_only_an_attempt_with_the_same_params(tmp_path):
    _published(tmp_path)
    staging = prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    assert staging == tmp_path / STAGING
    assert (staging / "tables" / "t.csv").read_text() == "a\n1\n" and not (staging / "report").exists()
    (staging / "params.yaml").write_text("run: new\n")
    (staging / "tables" / "u.csv").write_text("b\n")  # work of an attempt that then failed
    logs: list[str] = []
    assert prepare_staging(tmp_path, "run: new\n", log=logs.append) == staging and logs  # resumed
    assert (staging / "tables" / "u.csv").exists()
    prepare_staging(tmp_path, "run: other\n", log=lambda _: None)  # other params: fresh copy
    assert not (staging / "tables" / "u.csv").exists() and (staging / "params.yaml").read_text() == "run: old\n"


def test_commit_replaces_published_entries_and_a_half_done_commit_is_completed(tmp_path):
    _published(tmp_path)
    staging = prepare_staging(tmp_path, "x", log=lambda _: None)
    (staging / "params.yaml").write_text("run: new\n")
    (staging / "results.json").write_text('{"cube_score": 80}')
    (staging / "tables" / "t.csv").write_text("a\n2\n")
    # a process killed half-way through the commit: marker set, params moved, the rest not yet
    (staging / ".committing").touch()
    (tmp_path / ".replaced").mkdir()
    (tmp_path / "params.yaml").rename(tmp_path / ".replaced" / "params.yaml")
    (staging / "params.yaml").rename(tmp_path / "params.yaml")
    finish_interrupted_commit(tmp_path, log=lambda _: None)
    assert (tmp_path / "params.yaml").read_text() == "run: new\n"
    assert json.loads((tmp_path / "results.json").read_text()) == {"cube_score": 80}
    assert (tmp_path / "tables" / "t.csv").read_text() == "a\n2\n"
    assert (tmp_path / "report" / "index.html").read_text() == "<p>old</p>"
    assert not (tmp_path / STAGING).exists() and not (tmp_path / ".replaced").exists()


def test_the_lock_names_its_holder_and_is_released(tmp_path):
    with run_lock(tmp_path, log=lambda _: None) as lock:
        held = json.loads(lock.read_text())
        assert held["pid"] == os.getpid()
        with pytest.raises(RunLocked, match=f"pid {os.getpid()}"), run_lock(tmp_path, log=lambda _: None):
            pass
        assert lock.exists()  # the refused second holder did not remove the first one's lock
    assert not lock.exists()


def test_sigterm_inside_a_run_raises_run_interrupted_and_restores_the_handlers(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted) as caught, interrupts_raise():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs before this returns
    assert caught.value.signame == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_staged_tables_are_linked_and_a_re_save_in_staging_leaves_the_published_table_alone(tmp_path):
    import pandas as pd

    from cube.config import RunPaths, parse_params
    from cube.notebook import Run

    _published(tmp_path)
    (tmp_path / "data").mkdir()
    pd.DataFrame({"x": [1, 2]}).to_parquet(tmp_path / "data" / "scores.parquet")
    staging = prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    published, staged = tmp_path / "data" / "scores.parquet", staging / "data" / "scores.parquet"
    assert os.stat(published).st_ino == os.stat(staged).st_ino  # linked, not copied
    assert os.stat(tmp_path / "tables" / "t.csv").st_ino != os.stat(staging / "tables" / "t.csv").st_ino
    run = Run.__new__(Run)  # Run.save needs the paths, and the params it records as the data's provenance
    run.paths = RunPaths(root=staging, cache=tmp_path / "cache.sqlite")
    run.params = parse_params({"run": "new", "judges": [{"name": "r", "model": {"provider": "offline",
                                                                               "model": "rubric-strict"}}]})
    run.params_path = tmp_path / "p.yaml"
    run.save("scores", pd.DataFrame({"x": [9]}))  # the way every stage writes a table
    assert pd.read_parquet(published)["x"].tolist() == [1, 2]
    assert pd.read_parquet(staged)["x"].tolist() == [9]
