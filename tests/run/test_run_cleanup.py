"""A run the runner itself fails (not a stage: e.g. the page worker, a bug) is cleaned up as an
interrupted one is: the plan's child reaped, the pages' worker stopped, the kernels killed, and
the attempt recorded, as failed with its reason (`cube.run.execute.execute_run`)."""

from __future__ import annotations

import json

import pytest
import yaml

from cube.kb.demo import generate_demo_corpus
from cube.pages.publish import PreparedPages
from cube.run.execute import execute_run
from tests import ROOT


@pytest.mark.timeout(120)
def test_a_runner_error_records_the_attempt_as_failed_and_cleans_up(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("cube.run.execute.check_inputs", lambda *a, **k: None)
    corpus = tmp_path / "kb.csv"
    generate_demo_corpus(4, "en", seed=1).drop(columns=["text"]).to_csv(corpus, index=False)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "broken",
                "outputs_dir": str(tmp_path / "out"),
                "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
                "corpus": {"source": "file", "path": str(corpus)},
            }
        ),
        encoding="utf-8",
    )
    closed, killed = [], []
    real_close = PreparedPages.close
    monkeypatch.setattr(PreparedPages, "close", lambda self: closed.append(real_close(self)))

    class Plan:
        def kill(self) -> None:
            killed.append(1)

    monkeypatch.setattr("cube.run.execute._calls_models", lambda chosen: True)
    monkeypatch.setattr("cube.run.execute._start_plan", lambda *a: Plan())
    monkeypatch.setattr("cube.run.execute._fingerprints_warming", lambda *a: {})

    def broken(*a, **k):
        raise RuntimeError("the page worker died (BrokenProcessPool)")

    monkeypatch.setattr("cube.run.execute._record_plan", lambda *a: None)
    monkeypatch.setattr("cube.run.execute._run_stages", broken)
    with pytest.raises(RuntimeError, match="page worker died"):
        execute_run(params, log=lambda *_: None)
    root = tmp_path / "out" / "broken"
    manifest = json.loads((root / ".staging" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"].startswith("failed")
    last = (root / "report" / "last_run.html").read_text(encoding="utf-8")
    assert "page worker died" in last
    assert closed and killed == [1]
    assert not (root / ".lock").exists()
