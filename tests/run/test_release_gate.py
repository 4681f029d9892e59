"""The release gate (issue 42): a baseline run and versions of it, through `cube run --baseline`.

Three tiny runs of the offline default (40 demo items, 40 questions; stages called directly, no
papermill): the baseline v1, v1 again under another name (the same version twice), and v2 whose
answers to 12 questions were replaced by an unrelated sentence before judging (a version worse
on those questions; the rubric judges score them down). A fourth, v3, is v1 restricted to 10
questions (too few for a decision). `cube run` itself is exercised with the notebook sequence
replaced by a stub returning the published run (the gate runs after publishing), so each case
costs the gate only.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from cube.cli import main
from cube.config.params import load_params
from cube.config.runpaths import RunPaths
from cube.run import pipeline
from cube.run.notebook import open_run
from tests import ROOT

# outside text that must stay text: HTML, a Markdown table cell's bar, a mention, a code fence,
# a line break starting a heading, a terminal escape sequence
HOSTILE = "<script>alert(1)</script> | @octocat ``` \n# heading \x1b[31mred"
SABOTAGED = 12
SCHEMA = ROOT / "tests" / "fixtures" / "junit.xsd"


def _params(tmp: Path, name: str, **extra) -> Path:
    params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    params.update(
        {
            "run": name,
            "outputs_dir": str(tmp / "outputs"),
            "corpus": {"source": "demo", "n_items": 40, "seed": 3},
            "questions": {"generator": "template", "seed": 3},
            "systems": [{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
            "analysis": {**params["analysis"], "bootstrap": 200},
            **extra,
        }
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    return path


def _tiny_run(tmp: Path, name: str, sabotage: int = 0) -> Path:
    path = _params(tmp, name)
    run = open_run(path)
    for stage in (pipeline.corpus_stage, pipeline.questions_stage):
        stage(run)
    qfile = run.paths.data_file("questions")
    q = pd.read_parquet(qfile)
    q.loc[0, "question"] = HOSTILE + q.loc[0, "question"]  # the first question's text
    q.to_parquet(qfile)
    pipeline.answers_stage(run)
    if sabotage:
        f = run.paths.data_file("answers")
        answers = pd.read_parquet(f)
        worse = (answers["set"] == "rag") & answers["question_id"].isin(q["question_id"][:sabotage])
        answers.loc[worse, "answer"] = "无关内容。"
        answers.to_parquet(f)
    pipeline.scores_stage(run)
    return path


def _subset_run(tmp: Path, source: Path, name: str, n: int) -> Path:
    """A copy of a run folder holding only its first `n` questions."""
    path = _params(tmp, name)
    folder = tmp / "outputs" / name
    shutil.copytree(source, folder)
    keep = pd.read_parquet(folder / "data" / "questions.parquet")["question_id"][:n]
    for table in ("answers", "scores"):
        f = folder / "data" / f"{table}.parquet"
        t = pd.read_parquet(f)
        t[t["question_id"].isin(keep)].to_parquet(f)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    made = {
        "v1": _tiny_run(tmp, "v1"),
        "v1-again": _tiny_run(tmp, "v1-again"),
        "v2": _tiny_run(tmp, "v2", sabotage=SABOTAGED),
    }
    made["v3"] = _subset_run(tmp, tmp / "outputs" / "v1", "v3", 10)
    yield tmp, made
    mp.undo()


def _cube_run(monkeypatch, params: Path, *extra: str) -> int:
    """`cube run PARAMS ...` with the notebook sequence replaced by the published run."""
    import cube.run.execute as execute

    def published(params_path, **_):
        p = load_params(params_path)
        return SimpleNamespace(ok=True, paths=RunPaths.for_params(p, Path(p.outputs_dir)))

    monkeypatch.setattr(execute, "execute_run", published)
    return main(["run", str(params), "--no-preflight", *extra])


def _report(tmp: Path, name: str) -> tuple[dict, str, str]:
    report = tmp / "outputs" / name / "report"
    return (
        json.loads((report / "decision.json").read_text(encoding="utf-8")),
        (report / "summary.md").read_text(encoding="utf-8"),
        (report / "junit.xml").read_text(encoding="utf-8"),
    )


def test_a_worse_version_is_held_and_its_regressions_named(runs, monkeypatch, capsys):
    tmp, made = runs
    code = _cube_run(monkeypatch, made["v2"], "--baseline", str(tmp / "outputs" / "v1"))
    out = capsys.readouterr().out
    assert code == 4
    decision, summary, junit = _report(tmp, "v2")
    assert decision["decision"] == "hold: regression"
    assert decision["delta_cube"] < -decision["margin"]
    assert decision["delta_ci"][1] < 0
    lower, upper = decision["delta_bounds"]  # the rule's bounds: at least as wide as the interval
    assert lower <= decision["delta_ci"][0] and upper >= decision["delta_ci"][1]
    assert {"decision", "reasons", "margin", "delta_cube", "delta_ci", "regressed"} <= set(decision)
    ids = pd.read_parquet(tmp / "outputs" / "v2" / "data" / "questions.parquet")["question_id"]
    sabotaged = set(ids[:SABOTAGED].astype(str))
    regressed = {q["question_id"] for q in decision["regressed"]}
    assert sabotaged <= regressed  # every sabotaged question is named
    for q in decision["regressed"]:
        assert {"question_id", "text", "baseline_score", "score"} <= set(q)
        if q["question_id"] in sabotaged:
            assert q["score"] < q["baseline_score"]
    for qid in sabotaged:  # named in the terminal, summary.md and junit.xml
        assert qid in out and qid in summary and f'name="{qid}"' in junit
    assert "HOLD: REGRESSION" in out and "HOLD: REGRESSION" in summary
    assert "\x1b" not in out  # the hostile question's escape sequence never reaches the terminal
    cases = ET.fromstring(junit).findall(".//testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert {c.get("name") for c in failed} >= sabotaged | {"cube_non_inferior"}


def test_the_same_version_twice_is_released(runs, monkeypatch, capsys):
    tmp, made = runs
    code = _cube_run(monkeypatch, made["v1-again"], "--baseline", str(tmp / "outputs" / "v1"))
    out = capsys.readouterr().out
    decision, summary, junit = _report(tmp, "v1-again")
    assert code == 0, out
    assert decision["decision"] == "release"
    assert decision["delta_cube"] == pytest.approx(0.0, abs=1e-9)
    assert decision["regressed"] == []
    assert "RELEASE" in summary and "RELEASE" in out
    assert ET.fromstring(junit).find(".//failure") is None


def test_too_few_questions_is_undecided(runs, monkeypatch, capsys):
    tmp, made = runs
    code = _cube_run(monkeypatch, made["v3"], "--baseline", str(tmp / "outputs" / "v1"))
    decision, summary, junit = _report(tmp, "v3")
    assert code == 3
    assert decision["decision"] == "undecided"
    assert "too few common questions" in decision["reasons"][0]
    assert "this run lacks 30 of the baseline's questions" in decision["reasons"][1]
    assert "10 common questions" in summary
    assert ET.fromstring(junit).find(".//skipped") is not None


def test_the_baseline_block_of_the_params_is_read_from_the_file_folder(runs, monkeypatch):
    tmp, made = runs
    params = yaml.safe_load(made["v1-again"].read_text(encoding="utf-8"))
    params["baseline"] = {"run": "outputs/v1", "margin": 2.5}  # relative: the params file's folder
    path = tmp / "with_baseline.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    p = load_params(path)
    assert Path(p.baseline.run) == tmp / "outputs" / "v1" and p.baseline.margin == 2.5
    assert _cube_run(monkeypatch, path) == 0
    decision, _, _ = _report(tmp, "v1-again")
    assert decision["margin"] == 2.5


def test_a_baseline_that_is_no_completed_run_is_refused_before_any_stage(runs, monkeypatch, capsys):
    tmp, made = runs
    missing = tmp / "outputs" / "nowhere"
    called = []
    import cube.run.execute as execute

    monkeypatch.setattr(execute, "execute_run", lambda *a, **k: called.append(1))
    code = main(["run", str(made["v2"]), "--no-preflight", "--baseline", str(missing)])
    err = capsys.readouterr().err
    assert code == 2 and not called
    assert str(missing) in err and "completed run" in err
    empty = tmp / "outputs" / "empty"
    empty.mkdir()
    assert main(["run", str(made["v2"]), "--no-preflight", "--baseline", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "data/answers.parquet" in err and "data/scores.parquet" in err  # every problem at once


def test_an_incompatible_baseline_is_undecided_saying_why(runs, monkeypatch, capsys):
    tmp, made = runs
    other = tmp / "outputs" / "other-def"
    if not other.exists():
        shutil.copytree(tmp / "outputs" / "v1", other)
        p = yaml.safe_load((other / "params.yaml").read_text(encoding="utf-8"))
        p["analysis"]["trim_proportion"] = 0.2  # another definition of CuBE: no paired Δ
        (other / "params.yaml").write_text(yaml.safe_dump(p, allow_unicode=True), encoding="utf-8")
    code = _cube_run(monkeypatch, made["v1-again"], "--baseline", str(other))
    decision, _, _ = _report(tmp, "v1-again")
    assert code == 3 and decision["decision"] == "undecided"
    assert "cannot be compared" in decision["reasons"][0]
    assert "trim_proportion" in decision["reasons"][0]


def test_outside_text_is_inert_in_summary_and_junit(runs, monkeypatch):
    markdown_it = pytest.importorskip("markdown_it")
    tmp, made = runs
    _cube_run(monkeypatch, made["v2"], "--baseline", str(tmp / "outputs" / "v1"))
    _, summary, junit = _report(tmp, "v2")
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(summary)
    assert "<script" not in html  # the question's HTML is shown, never run
    assert "<h1" not in html  # its line break started no heading
    assert "alert(1)" in html  # ... and it is still there, as text
    row = next(line for line in summary.splitlines() if "alert(1)" in line)
    assert row.count(" | ") == 5 or row.count("|") - row.count("\\|") == 7  # one row, 6 cells
    assert "\x1b" not in summary
    root = ET.fromstring(junit)  # well-formed despite the escape character
    assert any("alert(1)" in (f.get("message") or "") for f in root.iter("failure"))


def test_junit_xml_is_valid_against_the_junit_schema(runs, monkeypatch):
    xmlschema = pytest.importorskip("xmlschema", reason="dev extra: pip install -e '.[dev]'")
    tmp, made = runs
    schema = xmlschema.XMLSchema(str(SCHEMA))
    for name, baseline in (("v2", "v1"), ("v1-again", "v1"), ("v3", "v1")):
        _cube_run(monkeypatch, made[name], "--baseline", str(tmp / "outputs" / baseline))
        junit = tmp / "outputs" / name / "report" / "junit.xml"
        schema.validate(str(junit))  # raises with the offending element when invalid
        root = ET.parse(junit).getroot()
        suites = root.findall("testsuite")
        assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
        for s in suites:
            assert int(s.get("tests")) == len(s.findall("testcase"))
            assert int(s.get("failures")) == len(s.findall("testcase/failure"))


def test_a_run_without_baseline_leaves_no_earlier_decision(runs, monkeypatch):
    tmp, made = runs
    assert _cube_run(monkeypatch, made["v1-again"], "--baseline", str(tmp / "outputs" / "v1")) == 0
    report = tmp / "outputs" / "v1-again" / "report"
    assert (report / "decision.json").exists()
    assert _cube_run(monkeypatch, made["v1-again"]) == 0  # no baseline: no decision to read
    assert not any((report / n).exists() for n in ("decision.json", "summary.md", "junit.xml"))


def test_cube_compare_with_a_margin_decides_and_exits_with_its_code(runs, capsys):
    tmp, _ = runs
    v1, v2 = (str(tmp / "outputs" / n) for n in ("v1", "v2"))
    assert main(["compare", v1, v2, "--permutations", "99", "--margin", "5"]) == 4
    assert "release decision (margin 5): hold: regression" in capsys.readouterr().out
    assert main(["compare", v1, str(tmp / "outputs" / "v1-again"), "--margin", "5"]) == 0
    assert main(["compare", v1, v2, "--permutations", "99"]) == 0  # no margin: no decision


def test_exit_codes_a_hold_wins_then_a_withheld_verdict_or_undecided():
    from cube.run.outcome import with_release

    # (verdict's code: 0 given, 3 withheld) x (gate's: 0 release, 3 undecided, 4 hold)
    assert [with_release(v, g) for v in (0, 3) for g in (0, 3, 4)] == [0, 3, 4, 3, 3, 4]


def test_a_regressed_question_with_equal_scores_is_a_lost_gold_document():
    from cube.pages.release import junit_xml, summary_markdown, terminal_lines

    lost = {
        "question_id": "Q00007",
        "text": "how long?",
        "baseline_score": 7.5,
        "score": 7.5,
        "retrieval_change": "lost",
        "cause": "gold document no longer retrieved",
    }
    dropped = lost | {"question_id": "Q00008", "score": 3.25, "retrieval_change": "same"}
    dropped["cause"] = "jury score dropped beyond the judges' noise"
    report = {
        "decision": "undecided",
        "reasons": ["r"],
        "conditions": [],
        "margin": 5.0,
        "baseline": {"run": "v1"},
        "n_questions": 40,
        "overall": {"delta": -1.0, "lo": -3.0, "hi": 1.0},
        "regressed": [lost, dropped],
    }
    out = "\n".join(terminal_lines(report))
    summary, junit = summary_markdown(report), junit_xml(report)
    assert "7.50 -> 7.50" not in out and "Q00007: how long? (gold document no longer" in out
    assert "(7.50 -> 3.25)" in out  # a score drop is still shown as both scores
    row7 = next(line for line in summary.splitlines() if "Q00007" in line)
    assert "gold document no longer retrieved" in row7 and row7.count("7.50") == 1
    messages = {
        c.get("name"): c.find("failure").get("message")
        for c in ET.fromstring(junit).iter("testcase")
    }
    assert "gold document no longer retrieved" in messages["Q00007"]
    assert "7.50 -> this version 7.50" not in messages["Q00007"]
    assert "baseline 7.50 -> this version 3.25" in messages["Q00008"]


def test_the_report_says_which_bounds_came_from_the_baseline(runs, monkeypatch):
    tmp, made = runs
    _cube_run(monkeypatch, made["v1-again"], "--baseline", str(tmp / "outputs" / "v1"))
    decision, summary, _ = _report(tmp, "v1-again")
    reuse = decision["bounds_reuse"]
    assert reuse["baseline"] == "v1"  # outside the project: by name, no absolute path
    assert str(tmp) not in json.dumps(decision) and str(tmp) not in summary
    assert {"answering", "judging", "total", "from_baseline"} <= set(reuse)
    # the offline default computes its bounds locally: counted as offline, none sent
    assert reuse["answering"]["offline"] > 0 and reuse["total"]["sent"] == 0
    assert "### Bounds reused" in summary and "| answering |" in summary


def _changed_texts_run(tmp: Path, source: Path, name: str, n: int) -> Path:
    """A copy of a run folder whose first `n` questions' texts were edited, ids kept."""
    path = _params(tmp, name)
    folder = tmp / "outputs" / name
    shutil.copytree(source, folder)
    f = folder / "data" / "questions.parquet"
    q = pd.read_parquet(f)
    q.loc[: n - 1, "question"] = q.loc[: n - 1, "question"] + " (reworded)"
    q.to_parquet(f)
    return path


def test_questions_of_one_id_with_other_texts_leave_the_release_undecided(
    runs, monkeypatch, capsys
):
    from cube.run.release import differing_questions

    tmp, made = runs
    path = _changed_texts_run(tmp, tmp / "outputs" / "v1", "v4", 3)
    code = _cube_run(monkeypatch, path, "--baseline", str(tmp / "outputs" / "v1"))
    decision, summary, _ = _report(tmp, "v4")
    assert code == 3 and decision["decision"] == "undecided"
    assert decision["reasons"][0].startswith("3 question ids of both runs have another text")
    assert decision["delta_cube"] is None  # no comparison of different questions
    assert not (tmp / "outputs" / "v4" / "compare" / "baseline" / "comparison.json").exists()
    v1, v4 = (str(tmp / "outputs" / n) for n in ("v1", "v4"))
    capsys.readouterr()
    assert main(["compare", v1, v4, "--permutations", "9", "--margin", "5"]) == 3
    assert "3 question ids of both runs have another text" in capsys.readouterr().out
    qa = pd.DataFrame({"question_id": ["a", "b", "c"], "question": ["x", "y ", "z"]})
    qb = pd.DataFrame({"question_id": ["b", "c", "d"], "question": ["y", "Z", "w"]})
    assert differing_questions(qa, qb) == ["c"]  # whitespace at an end aside; only shared ids


def test_cube_validate_checks_the_baseline_block(runs, tmp_path, capsys):
    tmp, made = runs
    params = yaml.safe_load(made["v1-again"].read_text(encoding="utf-8"))
    params["baseline"] = {"run": str(tmp / "outputs" / "nowhere")}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    assert main(["validate", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "baseline.run" in out and "completed run" in out
    params["baseline"] = {"run": str(tmp / "outputs" / "v1")}
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    assert main(["validate", str(good)]) == 0, capsys.readouterr().out


def _stale_gate(tmp: Path, monkeypatch, made: dict) -> Path:
    """v1-again released against v1: an earlier build's reports a later failure must not leave."""
    assert _cube_run(monkeypatch, made["v1-again"], "--baseline", str(tmp / "outputs" / "v1")) == 0
    report = tmp / "outputs" / "v1-again" / "report"
    assert (report / "decision.json").exists()
    return report


GATE_FILES = ("decision.json", "summary.md", "junit.xml")


def test_a_refused_baseline_or_a_failed_stage_leaves_no_earlier_decision(runs, monkeypatch):
    import cube.run.execute as execute

    tmp, made = runs
    report = _stale_gate(tmp, monkeypatch, made)
    missing = str(tmp / "outputs" / "nowhere")
    assert main(["run", str(made["v1-again"]), "--no-preflight", "--baseline", missing]) == 2
    assert not any((report / n).exists() for n in GATE_FILES)
    assert not (tmp / "outputs" / "v1-again" / "compare" / "baseline").exists()
    report = _stale_gate(tmp, monkeypatch, made)
    failed = SimpleNamespace(
        ok=False,
        stages=[],
        paths=RunPaths.for_params(load_params(made["v1-again"]), tmp / "outputs"),
    )
    monkeypatch.setattr(execute, "execute_run", lambda *a, **k: failed)
    assert main(["run", str(made["v1-again"]), "--no-preflight"]) == 1
    assert not any((report / n).exists() for n in GATE_FILES)


def test_a_gate_that_raises_writes_an_undecided_record_without_paths(runs, monkeypatch):
    import cube.run.release as release

    tmp, made = runs
    _stale_gate(tmp, monkeypatch, made)

    def broken(*_a, **_k):
        raise RuntimeError(f"cannot read {tmp / 'outputs' / 'v1' / 'data' / 'scores.parquet'}")

    monkeypatch.setattr(release, "_report", broken)
    code = _cube_run(monkeypatch, made["v1-again"], "--baseline", str(tmp / "outputs" / "v1"))
    decision, summary, junit = _report(tmp, "v1-again")
    assert code == 3 and decision["decision"] == "undecided"
    assert (
        "release gate failed (RuntimeError: cannot read scores.parquet)" in decision["reasons"][0]
    )
    assert str(tmp) not in json.dumps(decision) and str(tmp) not in summary
    assert "Traceback" not in summary and "UNDECIDED" in summary
    ET.fromstring(junit)


def test_the_cube_row_shows_the_rules_bounds_and_labels_compares_interval():
    from cube.pages.release import summary_markdown, terminal_lines

    report = {
        "decision": "undecided",
        "reasons": ["r"],
        "conditions": [],
        "margin": 5.0,
        "n_questions": 40,
        "overall": {"a": 70.0, "b": 68.0, "delta": -2.0, "lo": -4.5, "hi": 0.5},
        "delta_bounds": [-5.4, 1.4],
    }
    summary = summary_markdown(report)
    row = next(line for line in summary.splitlines() if line.startswith("| CuBE (jury)"))
    assert "[-5.40, 1.40] (the rule's bounds)" in row and "-4.50" not in row
    ref = next(line for line in summary.splitlines() if "compare's interval" in line)
    assert "[-4.50, 0.50] (percentile)" in ref
    out = "\n".join(terminal_lines(report))
    assert "[-5.40, 1.40] (the rule's bounds; compare's interval [-4.50, 0.50])" in out


def test_bidi_format_characters_surrogates_and_dollars_are_inert(tmp_path):
    from cube.pages.release import md_text, plain, summary_markdown, write_reports

    hostile = "a\u202eb\u2066c\u200bd\ud800e $x$"
    assert plain(hostile) == "abcde $x$"
    assert "$" not in md_text(hostile) and "&#36;x&#36;" in md_text(hostile)
    report = {
        "decision": "undecided",
        "reasons": [hostile],
        "conditions": [{"name": hostile, "status": "unknown", "text": hostile}],
        "margin": 5.0,
        "baseline": {"run": hostile},
        "run": hostile,
    }
    write_reports(report, tmp_path, dict(report))  # a lone surrogate once crashed this write
    for name in ("summary.md", "junit.xml", "decision.json"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert not any(ch in text for ch in "\u202e\u2066\u200b"), name
    assert "\u202e" not in summary_markdown(report)
    assert json.loads((tmp_path / "decision.json").read_text(encoding="utf-8"))["run"] == (
        "abcde $x$"
    )


def test_without_paths_shows_absolute_paths_by_name_and_leaves_ratios_alone():
    from cube.run.release import without_paths

    text = without_paths("cannot read /srv/ci/work/outputs/v1/data/scores.parquet: 3/4 and a/b")
    assert text == "cannot read scores.parquet: 3/4 and a/b"
