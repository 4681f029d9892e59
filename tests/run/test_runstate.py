"""The run folder's staging copy, its commit, its lock and signal handling (no notebooks run)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from cube.run.state import (
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


def test_staging_copies_the_published_run_and_resumes_only_an_attempt_with_the_same_params(
    tmp_path,
):
    _published(tmp_path)
    staging = prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    assert staging == tmp_path / STAGING
    assert (staging / "tables" / "t.csv").read_text() == "a\n1\n" and not (
        staging / "report"
    ).exists()
    (staging / "params.yaml").write_text("run: new\n")
    (staging / "tables" / "u.csv").write_text("b\n")  # work of an attempt that then failed
    logs: list[str] = []
    assert prepare_staging(tmp_path, "run: new\n", log=logs.append) == staging and logs  # resumed
    assert (staging / "tables" / "u.csv").exists()
    prepare_staging(tmp_path, "run: other\n", log=lambda _: None)  # other params: fresh copy
    assert (
        not (staging / "tables" / "u.csv").exists()
        and (staging / "params.yaml").read_text() == "run: old\n"
    )


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
        with (
            pytest.raises(RunLocked, match=f"pid {os.getpid()}"),
            run_lock(tmp_path, log=lambda _: None),
        ):
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


def test_staged_tables_are_linked_and_a_re_save_in_staging_leaves_the_published_table_alone(
    tmp_path,
):
    import pandas as pd

    from cube.config.params import parse_params
    from cube.config.runpaths import RunPaths
    from cube.run.notebook import Run

    _published(tmp_path)
    (tmp_path / "data").mkdir()
    pd.DataFrame({"x": [1, 2]}).to_parquet(tmp_path / "data" / "scores.parquet")
    staging = prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    published, staged = tmp_path / "data" / "scores.parquet", staging / "data" / "scores.parquet"
    assert os.stat(published).st_ino == os.stat(staged).st_ino  # linked, not copied
    assert (
        os.stat(tmp_path / "tables" / "t.csv").st_ino
        != os.stat(staging / "tables" / "t.csv").st_ino
    )
    run = Run.__new__(
        Run
    )  # Run.save needs the paths, and the params it records as the data's provenance
    run.paths = RunPaths(root=staging, cache=tmp_path / "cache.sqlite")
    run.params = parse_params(
        {
            "run": "new",
            "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}],
        }
    )
    run.params_path = tmp_path / "p.yaml"
    run.save("scores", pd.DataFrame({"x": [9]}))  # the way every stage writes a table
    assert pd.read_parquet(published)["x"].tolist() == [1, 2]
    assert pd.read_parquet(staged)["x"].tolist() == [9]


def test_publishing_never_replaces_the_annotation_sheet_a_rater_fills_in_place(tmp_path):
    # Review finding 2: annotation/ was staged, so a commit moved the sheet copied at the start
    # of the run over the one a rater had filled during it (an afternoon of ratings lost).
    from cube.config.runpaths import RunPaths
    from cube.run.human import annotation_dir
    from cube.run.state import commit_staging

    _published(tmp_path)
    sheet = tmp_path / "annotation" / "annotation_sheet.csv"
    sheet.parent.mkdir()
    sheet.write_text("q1,\n")
    staging = prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    assert not (staging / "annotation").exists()
    # stages running in staging write the sheet to the published folder, never into staging
    assert (
        annotation_dir(RunPaths(root=staging, cache=tmp_path / "c.sqlite"))
        == tmp_path / "annotation"
    )
    assert (
        annotation_dir(RunPaths(root=tmp_path, cache=tmp_path / "c.sqlite"))
        == tmp_path / "annotation"
    )
    sheet.write_text("q1,8\nq2,7\n")  # the rater's work during the run
    (staging / "params.yaml").write_text("run: new\n")
    commit_staging(tmp_path)
    assert (
        sheet.read_text() == "q1,8\nq2,7\n"
        and (tmp_path / "params.yaml").read_text() == "run: new\n"
    )


def _take_stale_lock(root, out, go):
    import socket as _socket  # noqa: F401

    def slow_log(_line):  # between reading the stale lock and removing it: where two runs raced
        time.sleep(0.5)

    while not os.path.exists(go):
        time.sleep(0.01)
    try:
        with run_lock(root, log=slow_log):
            time.sleep(1.0)
            result = "held"
    except RunLocked:
        result = "refused"
    with open(out, "w") as f:
        f.write(result)


def test_two_runs_finding_the_same_stale_lock_never_both_take_it_over(tmp_path):
    # Review S3: each read the stale lock, removed "it" (the other's fresh lock) and created its
    # own.
    import multiprocessing
    import socket
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    go = tmp_path / "go"
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_take_stale_lock, args=(tmp_path, tmp_path / f"r{i}", go))
        for i in range(2)
    ]
    for p in procs:
        p.start()
    go.write_text("")
    for p in procs:
        p.join(30)
    assert sorted((tmp_path / f"r{i}").read_text() for i in range(2)) == ["held", "refused"]
    assert not (tmp_path / ".lock").exists()


def test_a_staging_copy_cut_short_is_made_again_not_resumed(tmp_path, monkeypatch):
    # Review S2: params.yaml is copied first, so a copy interrupted after it looked resumable.
    import shutil

    import cube.run.state as rs

    _published(tmp_path)
    (tmp_path / "params.yaml").write_text("run: new\n")  # the same params as the next run
    real = shutil.copytree

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(rs.shutil, "copytree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    assert (tmp_path / STAGING / "params.yaml").exists() and not (
        tmp_path / STAGING / "tables"
    ).exists()
    monkeypatch.setattr(rs.shutil, "copytree", real)
    logs: list[str] = []
    staging = prepare_staging(tmp_path, "run: new\n", log=logs.append)
    assert (
        not logs and (staging / "tables" / "t.csv").read_text() == "a\n1\n"
    )  # a fresh, complete copy
    assert (
        prepare_staging(tmp_path, "run: new\n", log=logs.append) == staging and logs
    )  # that one resumes


def test_an_interrupt_during_the_commit_waits_until_it_is_done(tmp_path, monkeypatch):
    # Review S2: SIGINT during commit_staging left some entries replaced and others not.
    from pathlib import Path

    from cube.run.state import commit_staging

    _published(tmp_path)
    staging = prepare_staging(tmp_path, "run: new\n", log=lambda _: None)
    (staging / "params.yaml").write_text("run: new\n")
    (staging / "results.json").write_text('{"cube_score": 80}')
    real_rename, sent = Path.rename, []

    def rename(self, target):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C after the first entry was moved
            time.sleep(0.05)
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(RunInterrupted), interrupts_raise():
        commit_staging(tmp_path)
    assert sent and not (tmp_path / STAGING).exists()
    assert (tmp_path / "params.yaml").read_text() == "run: new\n"
    assert (tmp_path / "results.json").read_text() == '{"cube_score": 80}'
    assert (tmp_path / "tables" / "t.csv").read_text() == "a\n1\n"
