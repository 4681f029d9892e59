"""Stages executing side by side (`cube.run.lanes`: 04 and 05) ask for the run's evaluation at
once: one computes it, the other waits for it and reads it (`cube.run.evaluate.evaluate_run`)."""

from __future__ import annotations

import threading
import time


def test_two_stages_asking_for_the_evaluation_at_once_compute_it_once(tmp_path, monkeypatch):
    from cube.run import evaluate, pipeline
    from cube.run.notebook import open_run

    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(
        f"""run: e
outputs_dir: {tmp_path / "out"}
corpus: {{source: demo, n_items: 8, seed: 2}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
judges:
  - {{name: s, model: {{provider: offline, model: rubric-strict}}}}
analysis: {{bootstrap: 20}}
""",
        encoding="utf-8",
    )
    run = open_run(params)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    calls = []
    real = evaluate.evaluate_systems

    def slow(*a, **k):  # long enough for the other stage to ask meanwhile
        calls.append(1)
        time.sleep(0.5)
        return real(*a, **k)

    monkeypatch.setattr(evaluate, "evaluate_systems", slow)
    results: list[list[str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(list(evaluate.evaluate_run(run))))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 1 and results == [["bm25"], ["bm25"]]
