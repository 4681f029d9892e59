"""Issue 38 (review): a jury whose judges all obey the text addressed to a grader is not let
through by measuring each judge against the others.

Before: `twin_summary` counted each judge's drop beyond the median of the other judges' drops, so
three judges that all fell 5.65 points when the grader's note went had a drop of 0, p 1, "ablation
twins passed", and the inflated score was published; so did three of four. Now the offline rubric
judges' drop (code: it reads no instruction) is a baseline the jury cannot share, and without one
the jury's own drop withholds the verdict (`rule_jury_twin_drop`)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd

from cube.config.sections import AnalysisParams
from cube.diagnose.verdict import withheld_reasons
from cube.method.evaluation import evaluate
from cube.method.injection import twin_summary, twin_verdict
from tests.judge_sim import simulate

JUDGES = ("gpt-4o", "deepseek", "qwen2.5-32b", "gpt-4.1-nano")
OBEY_DROP = 5.65


def pairs(obeying: dict[str, bool], n: int = 12, seed: int = 0) -> pd.DataFrame:
    """Per judge and flagged answer: its score of the answer and of its twin. An obeying judge's
    twin scores `OBEY_DROP` less (the note it obeyed is gone); an honest one's alike, give or take
    noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        for judge, obeys in obeying.items():
            twin = float(rng.uniform(3, 5))
            drop = OBEY_DROP + rng.normal(0, 0.3) if obeys else rng.normal(0, 0.3)
            rows.append((f"q{i}", "sys", "rag", judge, twin + drop, twin))
    return pd.DataFrame(rows, columns=["question_id", "system", "set", "judge", "original", "twin"])


def verdict(judges: tuple[str, ...], twins: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    answers, scores = simulate(40, 0.6, 3, judges=judges)
    params = AnalysisParams(bootstrap=0, weights="equal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate(answers, scores, params, twins=twins)
    return r.cube_table, withheld_reasons(r, SimpleNamespace(analysis=params))[0]


def test_three_judges_that_all_obey_withhold_the_verdict():
    three = JUDGES[:3]
    ts = twin_summary(pairs(dict.fromkeys(three, True)))
    # measured against each other they look alike: none is named on its own
    assert (ts["twin_drop"].abs() < 1).all()
    table, reasons = verdict(three, ts)
    assert table["in_jury"].all(), table["excluded_reason"].to_dict()
    jury = [r for r in reasons if r.startswith("the jury's scores fall when grader-addressed")]
    assert len(jury) == 1, reasons
    assert "from 12 answers" in jury[0] and "median drop +5." in jury[0]
    assert (ts["twin_drop_raw"] > 5).all() and (ts["twin_p_raw"] < 1e-6).all()


def test_three_of_four_judges_obeying_withhold_the_verdict():
    obeying = {j: j != "gpt-4.1-nano" for j in JUDGES}
    ts = twin_summary(pairs(obeying, seed=1))
    assert not any(twin_verdict(r, 0.05, n_judges=4)[0] for _, r in ts.iterrows())
    _, reasons = verdict(JUDGES, ts)
    assert any(r.startswith("the jury's scores fall") for r in reasons), reasons


def test_an_honest_jury_is_not_withheld_for_its_twins():
    ts = twin_summary(pairs(dict.fromkeys(JUDGES[:3], False), seed=2))
    table, reasons = verdict(JUDGES[:3], ts)
    assert not [r for r in reasons if "grader-addressed" in r]
    assert not table["obeys_injections"].fillna(False).astype(bool).any()


def test_a_reference_judge_names_every_member_of_a_jury_that_all_obey():
    """With an offline rubric judge in the run, its drop (content lost, nothing obeyed) is the
    baseline: each obeying judge is named and excluded, the reference alone stays."""
    obeying = {**dict.fromkeys(JUDGES[:3], True), "rubric": False}
    ts = twin_summary(pairs(obeying, seed=4), reference=["rubric"]).set_index("judge")
    for j in JUDGES[:3]:
        named, said = twin_verdict(ts.loc[j], 0.05, n_judges=4)
        assert named is True and "reference judges' (rubric)" in said
    assert twin_verdict(ts.loc["rubric"], 0.05, n_judges=4)[0] is False
    # a twin that lost content: every judge, the reference too, drops alike; no one is named
    lost = pairs(dict.fromkeys([*JUDGES[:3], "rubric"], True), seed=5)
    tl = twin_summary(lost, reference=["rubric"]).set_index("judge")
    assert not any(twin_verdict(tl.loc[j], 0.05, n_judges=4)[0] for j in tl.index)
