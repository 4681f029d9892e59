"""Which stages hold failed calls, so that a plain re-run retries them (review finding 4)."""

from __future__ import annotations

import pandas as pd

from cube.config.runpaths import RunPaths
from cube.run.execute import call_failures


def test_failed_answer_and_question_calls_make_their_stage_out_of_date(tmp_path):
    # answers/questions tables carry `error` but no `error_kind`: their failed calls were counted as
    # 0, so `cube run` thought notebook 02 was up to date and never retried them.
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "set": ["rag"] * 3,
            "answer": [None, "ok", "ok"],
            "error": ["HTTP 500 after 5 attempts: boom", "", None],
        }
    ).to_parquet(paths.data_file("answers"))
    pd.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "question": [None, "x"],
            "error": ["connection error after 5 attempts", ""],
        }
    ).to_parquet(paths.data_file("questions"))
    pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "error": ["bad reply", "timeout", ""],
            "error_kind": ["parse", "call", None],
        }
    ).to_parquet(paths.data_file("scores"))
    assert call_failures(paths, "02_qa_sets") == 2  # one answer, one question
    assert (
        call_failures(paths, "03_scoring_sets") == 1
    )  # error_kind decides where present: parse is no call failure
    assert call_failures(paths, "01_dataset_prep") == 0  # no corpus file


def test_a_stage_without_failures_is_clean(tmp_path):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    pd.DataFrame({"question_id": ["q1"], "answer": ["ok"], "error": [""]}).to_parquet(
        paths.data_file("answers")
    )
    pd.DataFrame({"question_id": ["q1"], "answer": ["ok"]}).to_parquet(paths.data_file("questions"))
    assert call_failures(paths, "02_qa_sets") == 0


def test_a_stale_decision_is_forgotten_whole_when_an_earlier_stage_re_executes(
    tmp_path, monkeypatch
):
    # Review finding 12: withheld_reasons and judging_failed survived, so a re-run whose judging
    # then worked could still read "judging failed" (exit 3) from the previous decision.
    import json

    import cube.diagnose.assessment
    import cube.run.decide as decide
    from cube.diagnose.decision_record import HEADLINE_FIELDS, Decision, DecisionInputs
    from cube.run.execute import _forget_decision

    recorded: dict = {}

    class FakeRun:  # captures what the decision records
        params = None

        def write_record(self, *parts):
            for part in parts:
                recorded.update(part.as_json())

    out = Decision(
        cube_score=1.0,
        recall_at_k=0.5,
        weighted_score=2.0,
        verdict="withheld",
        verdict_label="withheld",
        withheld_reasons=["judging failed"],
        judging_failed=True,
    )
    monkeypatch.setattr(cube.diagnose.assessment, "assess", lambda *a, **k: out)
    monkeypatch.setattr(decide, "decision_inputs", lambda *a, **k: DecisionInputs())
    monkeypatch.setattr(decide, "audit_record", lambda *a, **k: {"ran": False})
    decide.decision(FakeRun(), {})
    assert set(recorded) == {"decision", "audit", *HEADLINE_FIELDS}
    assert recorded["decision"] == out.as_json() and recorded["judging_failed"] is True
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    paths.results.write_text(json.dumps({**recorded, "answers": 3}, default=str), encoding="utf-8")
    _forget_decision(paths)
    assert json.loads(paths.results.read_text(encoding="utf-8")) == {"version": 1, "answers": 3}


def test_the_human_calibrated_line_is_forgotten_when_its_stage_or_the_decision_re_runs(tmp_path):
    # Review finding (issue 29): with the decision no longer rewritten by 07, a failed or
    # rating-less re-run of 07 (or a re-run of a stage feeding the decision) left the old
    # human-calibrated figure beside a new decision on the index page.
    import json

    from cube.run.execute import HUMAN_KEYS, _forget_decision

    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    from cube.run.record import read_record

    head = {
        "decision": {"cube_score": 50.0},
        "human_calibrated": {"s": {"n_rated": 3}},
        "questions": 1,
    }
    paths.results.write_text(json.dumps(head), encoding="utf-8")
    _forget_decision(paths, HUMAN_KEYS)  # 07 itself re-executes: only its own key goes
    assert set(json.loads(paths.results.read_text(encoding="utf-8"))) == {
        "version",
        "decision",
        "questions",
    }
    assert read_record(paths.results).decision.decision.cube_score == 50.0
    paths.results.write_text(json.dumps(head), encoding="utf-8")
    _forget_decision(paths)  # a stage feeding the decision: both go
    assert json.loads(paths.results.read_text(encoding="utf-8")) == {"version": 1, "questions": 1}


def test_the_refusal_writer_s_calls_count_in_the_cost(tmp_path):
    # Review finding (issue 29): an LLM refusal writer's calls went only to results.json, so the
    # decision's cost card and the manifest's usage both left them out.
    from cube.config.schema import ACCOUNTING_COLUMNS
    from cube.run.decide import call_usage

    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    row = dict.fromkeys(ACCOUNTING_COLUMNS, 0)
    calls = [
        row
        | {
            "model": "m",
            "role": "question_generation",
            "call_id": f"c{i}",
            "cost": 0.5,
            "cached": False,
        }
        for i in range(3)
    ]
    columns = ["sample", "ok", "error", "questions", *ACCOUNTING_COLUMNS]
    frame = pd.DataFrame(
        [c | {"sample": i, "ok": True, "error": "", "questions": 5} for i, c in enumerate(calls)],
        columns=columns,
    )
    paths.data.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(paths.data_file("refusal_generation"), index=False)
    usage = call_usage(paths)
    assert usage is not None
    got = usage[usage["role"] == "question_generation"]
    assert int(got["calls"].sum()) == 3 and float(got["cost_this_run"].sum()) == 1.5
