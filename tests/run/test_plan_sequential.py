"""`cube plan` under `analysis.sequential`: the full set is the most a sequential run sends, and
the least is what the driver sends when it stops at its first possible look (`with_least`),
checked against the driver itself."""

import json

from cube.run import pipeline
from cube.run.notebook import open_run
from cube.run.plan import build_plan, plan_text
from cube.run.sequential import with_least
from tests import ROOT
from tests.run.test_sequential_run import write_params


def test_plan_says_the_most_and_the_least_a_sequential_run_sends(tmp_path):
    # stop: width with a width any interval meets: the driver stops at its first possible look
    rule = {"stop": "width", "batch": 10, "min_questions": 20}
    path = write_params(tmp_path, "plan", analysis={"sequential": rule, "max_interval_width": 100})
    run = open_run(path, tmp_path / "plan")
    full = build_plan(run.params, base_dir=ROOT)
    plan = with_least(full, run.params, base_dir=ROOT)
    facts = plan.attrs["sequential"]
    assert plan[list(full.columns)].equals(full)  # the full set's counts are kept: the most
    assert (plan["calls_least"] <= plan["calls"]).all()
    assert 0 < plan["calls_least"].sum() < plan["calls"].sum()
    assert facts["min_questions"] >= 20
    assert facts["min_questions"] <= facts["questions_least"] < facts["questions_full"]
    text = plan_text(plan)
    assert f"the least, if it stops at its first possible look ({facts['questions_least']} " in text
    assert f"calls {int(plan['calls_least'].sum())}, to send " in text
    assert f"on all {facts['questions_full']} questions" in text
    assert f"least {plan['calls_least'].iloc[0]})" in text.splitlines()[0]
    # the driver on the same params (offline systems: the plan counts the first batch's judge
    # calls as the driver does) stops there, its minimum and calls those the plan said
    assert facts["min_questions_from"] == "the driver's count on its first batch"
    pipeline.corpus_stage(run)
    pipeline.questions_stage(run)
    rec = json.loads(run.paths.results.read_text(encoding="utf-8"))["sequential"]
    assert rec["stopped_early"] is True
    assert rec["min_questions"] == facts["min_questions"]
    assert rec["questions_used"] == facts["questions_least"]
    roles = plan["role"].isin(("answering", "judging", "audit"))
    assert rec["calls"]["used"] == int(plan.loc[roles, "calls_least"].sum())


def test_plan_of_a_fixed_n_run_has_no_least(tmp_path):
    run = open_run(write_params(tmp_path, "fixed"), tmp_path / "fixed")
    plan = with_least(build_plan(run.params, base_dir=ROOT), run.params, base_dir=ROOT)
    assert "calls_least" not in plan and "sequential" not in plan.attrs
    assert "least" not in plan_text(plan)


SYSTEM = """
from pathlib import Path

LOG = Path(__file__).with_name("calls.log")


def answer(question):
    with LOG.open("a") as f:
        f.write("answer\\n")
    return {"answer": "an answer", "retrieved_ids": []}
"""


def test_plan_runs_none_of_a_python_systems_code(tmp_path):
    """A Python (or HTTP, RAGFlow) system may pay for calls: `cube plan` never runs it to count the
    driver's first batch (it sends nothing without `--pilot`); the plan's judge calls raise the
    minimum instead, and the plan says so."""
    (tmp_path / "mysys.py").write_text(SYSTEM, encoding="utf-8")
    rule = {"stop": "width", "batch": 10, "min_questions": 20}
    systems = [{"kind": "python", "name": "mine", "callable": f"{tmp_path / 'mysys.py'}:answer"}]
    path = write_params(
        tmp_path, "plan", systems=systems, analysis={"sequential": rule, "max_interval_width": 100}
    )
    run = open_run(path, tmp_path / "plan")
    plan = with_least(build_plan(run.params, base_dir=ROOT), run.params, base_dir=ROOT)
    assert not (tmp_path / "calls.log").exists()
    assert plan.attrs["sequential"]["min_questions_from"].startswith("the plan's judge calls")
