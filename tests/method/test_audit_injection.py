"""The audit's injection probe (issue 29): a judge that obeys an injection line in a worse answer is
named; judges that read the content, and content-blind ones that ignore the line, are not; too few
pairs give no verdict."""

from __future__ import annotations

from cube.method.audit import EXPECT, INJECTED, audit_summary, injection_verdict
from tests.judge_sim import simulate_probes


def _verdicts(obey: dict[str, float], seed: int = 3, n: int = 40) -> dict[str, tuple]:
    judges = ("gpt-4o", "qwen2.5-32b", "random", "length")
    probes = simulate_probes(n, seed, judges=judges, injected=True, obey=obey)
    summary = audit_summary(probes).set_index("judge")
    return {j: injection_verdict(summary.loc[j], 0.05, 10) for j in judges}


def test_an_obeying_judge_is_named_with_its_evidence_and_honest_ones_pass() -> None:
    v = _verdicts({"qwen2.5-32b": 1.0})
    obeys, said = v["qwen2.5-32b"]
    assert obeys is True and said.startswith("obeys injections") and "of 40 questions" in said
    assert v["gpt-4o"][0] is False and v["gpt-4o"][1].startswith("injection probe passed")
    assert v["random"][0] is False and v["length"][0] is False


def test_too_few_pairs_or_no_injected_probe_give_no_verdict() -> None:
    assert _verdicts({"gpt-4o": 1.0}, n=6)["gpt-4o"][0] is None
    plain = audit_summary(simulate_probes(20, 1, judges=("gpt-4o",))).set_index("judge")
    obeys, said = injection_verdict(plain.loc["gpt-4o"], 0.05, 10)
    assert obeys is None and said == "injection probe did not run"
    assert injection_verdict(None, 0.05, 10) == (None, "injection probe did not run")


def test_injected_kinds_are_worse_probes_paired_with_their_twin() -> None:
    assert all(EXPECT[k] == "worse" and EXPECT[twin] == "worse" for k, twin in INJECTED.items())
