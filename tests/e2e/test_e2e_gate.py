"""End to end (issue 9): a third judge that scores at random, on the local OpenAI-compatible
test server, added to the default params' offline jury. Notebooks 01, 02, 03 and 06 run under
papermill on a small synthetic run; the decision page and results.json show the judge excluded with
its reason, and the jury, its interval and the verdict rest on the two rubric judges."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
import yaml

from cube.run.execute import execute_run
from tests import ROOT
from tests.openai_server import OpenAIServer, body_digest

pytestmark = pytest.mark.e2e


def random_judge(body: dict) -> str:
    """Ignores the answer: an integer 0-10 seeded by the request body's digest."""
    return f"Score: {random.Random(body_digest(body)).randint(0, 10)}"


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    with OpenAIServer(reply=random_judge) as server:
        params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
        params.update(
            {
                "run": "gate",
                "outputs_dir": str(tmp / "outputs"),
                "corpus": {"source": "demo", "n_items": 40, "seed": 3},
                "questions": {"generator": "template", "seed": 3},
                "systems": [{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
                "models": {
                    "random": {
                        "provider": "openai",
                        "model": "random",
                        "base_url": server.url,
                        "api_key_env": "CUBE_GATE_KEY",
                        "max_concurrency": 8,
                    }
                },
                "judges": params["judges"] + [{"name": "random-llm", "model": "random"}],
                "analysis": {**params["analysis"], "bootstrap": 200},
                # an audit that can decide: at the default share a 40-item run audits too few
                # questions for a verdict, and the random judge then rests on the bounds test
                # alone, which a random judge passes in 5 % of prompt sets (the fenced prompts of
                # issue 29 drew such a set)
                "audit": {"questions": 40, "max_share": 1.0},
            }
        )
        path = tmp / "gate.yaml"
        path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
        mp = pytest.MonkeyPatch()
        mp.setenv("CUBE_GATE_KEY", "sk-gate-local")
        mp.chdir(ROOT)
        logs: list[str] = []
        try:
            summary = execute_run(path, only="01,02,03,06", log=logs.append)
        finally:
            mp.undo()
    return {"summary": summary, "root": tmp / "outputs" / "gate", "logs": logs}


def test_the_random_judge_is_excluded_with_its_reason_on_the_decision_page(gated):
    root = gated["root"]
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    decision = results["decision"]
    assert (
        decision["judges_used"] == ["rubric-lenient", "rubric-strict"] and decision["n_judges"] == 2
    )
    reason = decision["judges_excluded"]["random-llm"]
    # the gate's evidence (issue 20): the audit finds it content-blind and the bounds test finds no
    # separation
    assert (
        "does not separate the bounds" in reason
        or "does not follow retrieval" in reason
        or "content-blind" in reason
    )
    assert results["judging_failed"] is False and "withheld_reasons" in results
    lo, hi = decision["cube_ci"]
    assert (
        0 <= lo <= decision["cube_score"] <= hi <= 100
    )  # the verdict rests on an interval inside [0, 100]
    page = (root / "report" / "06_cube_score.html").read_text(encoding="utf-8")
    assert (
        "excluded: random-llm" in page
        and "Judges in the jury (2): rubric-lenient, rubric-strict." in page
    )
    gate = pd.read_csv(root / "tables" / "jury_gate.csv").set_index("judge")
    assert (
        not gate.at["random-llm", "in_jury"]
        and gate.loc[["rubric-lenient", "rubric-strict"], "in_jury"].all()
    )
    t4 = pd.read_csv(root / "tables" / "table4_cube_scores.csv").set_index("judge")
    assert (
        "random-llm" in t4.index and t4.at["Jury mean", "n_judges"] == 2
    )  # excluded, never dropped
    assert t4.at["Jury mean", "cube_score"] == pytest.approx(
        t4.loc[["rubric-lenient", "rubric-strict"], "cube_score"].mean()
    )
