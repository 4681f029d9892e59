"""The runner's input checks and plan in one forked child (`cube.run.before_stages`): the plan is
the one computed alone, and the demo corpus the checks built is the one the plan reads."""

from __future__ import annotations

import os
from pathlib import Path

from cube.config.params import parse_params
from cube.run import before_stages, execute

PARAMS = {
    "run": "t",
    "lang": "zh",
    "corpus": {"source": "demo", "n_items": 60, "seed": 3},
    "questions": {"generator": "template", "seed": 3},
    "answerer": {"provider": "offline", "model": "extractive"},
    "systems": [{"kind": "builtin", "name": "bm25", "top_n": 5}],
    "dimensions": ["relevance", "quality"],
    "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric-lenient"}}],
}


def _counted(monkeypatch):
    """`build_corpus` counting its builds, in whichever process it runs (a file per build)."""
    import cube.kb.corpus as corpus_module

    real = corpus_module.build_corpus
    folder = Path(os.environ["CUBE_TEST_BUILDS"])

    def build(params, base_dir=Path(".")):
        (folder / f"{os.getpid()}-{len(list(folder.iterdir()))}").touch()
        return real(params, base_dir)

    monkeypatch.setattr(corpus_module, "build_corpus", build)
    return folder


def test_the_plan_after_the_checks_is_the_plan_alone_with_one_corpus(tmp_path, monkeypatch):
    builds = tmp_path / "builds"
    builds.mkdir()
    monkeypatch.setenv("CUBE_TEST_BUILDS", str(builds))
    _counted(monkeypatch)
    params = parse_params(PARAMS)
    cache = tmp_path / "alone" / "cache.sqlite"
    cache.parent.mkdir()
    alone = execute._plan_rows(params, _Paths(cache), tmp_path)
    assert len(list(builds.iterdir())) == 1
    for f in builds.iterdir():
        f.unlink()

    shared_cache = tmp_path / "shared" / "cache.sqlite"
    shared_cache.parent.mkdir()
    child = before_stages.checks_then(
        params, tmp_path, None, lambda: execute._plan_rows(params, _Paths(shared_cache), tmp_path)
    )
    report = child.first()
    assert report.ok and report.figures["items"] == 60
    assert child.result() == alone
    assert len(list(builds.iterdir())) == 1  # built by the checks, read by the plan


def test_a_failed_check_plans_nothing(tmp_path):
    params = parse_params({**PARAMS, "corpus": {"source": "file", "path": "absent.csv"}})
    planned: list[int] = []
    child = before_stages.checks_then(params, tmp_path, None, lambda: planned.append(1))
    report = child.first()
    assert not report.ok and "absent.csv" in " ".join(report.errors)
    assert child.result() is None


def test_check_inputs_raises_and_kills_the_child_on_an_error(tmp_path):
    # the error and the warnings logged are the single-child path's (the checks alone), whole
    import pytest

    (tmp_path / "qs.csv").write_text("question_id,question\nq1,\nq1,what?\n")
    params = parse_params(
        {
            **PARAMS,
            "corpus": {"source": "file", "path": "absent.csv", "columns": {"bogus": "x"}},
            "questions": {"generator": "file", "path": "qs.csv"},
        }
    )
    said = []
    for then in (None, lambda: 1):
        logs: list[str] = []
        with pytest.raises(execute.InputError, match="absent.csv") as raised:
            execute.check_inputs(params, tmp_path, log=logs.append, then=then)
        said.append((str(raised.value), logs))
    assert said[0] == said[1]
    assert "nothing was run" in said[0][0] and said[0][0].count("  - ") >= 2


class _Paths:
    def __init__(self, cache: Path) -> None:
        self.cache = cache


def test_a_locked_run_folder_starts_no_plan(tmp_path, monkeypatch):
    # the plan (BM25 runs, retrieval-store writes) goes on only once the run holds its folder: a
    # second `cube run` on a locked folder (or a refused params file) plans nothing
    import contextlib
    import time

    import pytest
    import yaml

    from cube.run.state import RunLocked

    planned = tmp_path / "planned"

    @contextlib.contextmanager
    def locked(root, log=print):
        time.sleep(0.5)  # what the child could do meanwhile
        raise RunLocked(f"{root} is held by another run")
        yield  # pragma: no cover

    monkeypatch.setattr(execute, "_plan_rows", lambda *a: planned.touch())
    monkeypatch.setattr(execute, "run_lock", locked)
    params_file = tmp_path / "p.yaml"
    params_file.write_text(yaml.safe_dump(PARAMS))
    with pytest.raises(RunLocked):
        execute.execute_run(params_file, outputs_dir=tmp_path / "out", log=lambda _: None)
    time.sleep(0.2)
    assert not planned.exists()
