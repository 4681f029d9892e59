"""The run record (`cube.run.record.RunRecord`): results.json as one typed, versioned model.

Each sub-record round-trips through the file; an older file (no `version`) is read and its
driver's `replayed` flag mapped into stage 03's own record; another version, an unknown key or a
malformed value is refused naming the file, the version and every key; the driver's outcome is
taken by stage 03 once per drive (`driver_outcome`), so a later run of stage 03 alone asks the
driver's failed calls again by construction.
"""

from __future__ import annotations

import json
import math

import pytest

from cube.config.runpaths import RunPaths
from cube.diagnose.decision_record import Decision
from cube.run.record import (
    RECORD_VERSION,
    AnswersRecord,
    ComparisonsRecord,
    CorpusRecord,
    DecisionRecord,
    DiagnosticsRecord,
    DriverRecord,
    DriverTaken,
    HumanRecord,
    PaperRecord,
    PlanRecord,
    QuestionsRecord,
    RecordError,
    RefusalRecord,
    RunRecord,
    ScoresRecord,
    SequentialRecord,
    SimulationRecord,
    forget,
    key_owners,
    keys_of,
    read_record,
    results_reference,
    write_part,
)
from cube.run.sequential import driver_outcome, driver_taken, with_driver_pilots


def _sequential(drive_id: str = "d1") -> SequentialRecord:
    return SequentialRecord(
        stop="width",
        batch=10,
        min_questions=20,
        alpha=0.05,
        questions_available=100,
        questions_used=30,
        question_ids=["q1", "q2"],
        stopped_early=True,
        reason="stopped at 30: settled",
        thresholds={"excellent": 85.0},
        path=[{"system": "s", "quantity": "CuBE", "questions": 10, "estimate": None}],
        final={"s": {"estimate": 70.0, "lower": 60.0, "upper": 80.0, "settled": True}},
        judge_pilot={"deaf": {"decision": "stopped", "calls": ["k9"]}},
        failed_calls={"k1": "HTTP 400: refused", "k2": "HTTP 400: refused"},
        drive_id=drive_id,
    )


# one part of every kind, with values of the shapes the stages write (NaN where a figure may be)
PARTS = [
    PlanRecord(plan=[{"role": "judging", "model": "m", "calls": 3, "cost": None}]),
    PaperRecord(paper_table4_max_abs_difference=0.005, paper_table4_reproduced=True),
    CorpusRecord(corpus_items=300, corpus_synthetic=True, corpus_structure={"families": 35}),
    QuestionsRecord(question_screen={"screened": False, "why": "x"}, questions=3),
    DriverRecord(sequential=_sequential()),
    AnswersRecord(
        answers=12,
        answers_failed=0,
        answers_dropped={"a": 0},
        region_filter={},
        # stage 02's shape (`cube.systems.retrieved.unmeasured_reasons`: sentences per system)
        answers_unmeasured={"echo": ["8 of 8 retrieved ids are not knowledge-base doc ids"]},
    ),
    RefusalRecord(refusal={"a": {"refusal_accuracy": 0.5}}, refusal_generation={"questions": 2}),
    ScoresRecord(
        audit_sample={"requested": 40},
        scores=10,
        judge_pilot={"llm": {"decision": "go on"}},
        audit_share_of_judge_calls=0.1444,
        driver_taken=DriverTaken(drive_id="d1", failed_calls=2, pilots=["deaf"]),
    ),
    DecisionRecord(
        decision=Decision(system="a", cube_score=float("nan"), verdict="withheld"),
        cube_score=None,
        verdict="withheld",
        withheld_reasons=["no judge"],
        judging_failed=True,
        audit={"ran": False},
    ),
    HumanRecord(human_calibrated={"a": {"cube_score": None, "n_ratings": 4}}),
    ComparisonsRecord(comparisons=[{"a": "x", "b": "y", "p_value": 0.001}]),
    DiagnosticsRecord(categories={"style": [{"style": "plain", "W": math.nan}]}),
    SimulationRecord(simulation={"pvalue_ks": {"40": 0.1}}),
]


def _paths(tmp_path) -> RunPaths:
    return RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")


@pytest.mark.parametrize("part", PARTS, ids=lambda p: type(p).__name__)
def test_each_sub_record_round_trips_through_results_json(tmp_path, part):
    paths = _paths(tmp_path)
    written = write_part(paths, part)
    raw = json.loads(paths.results.read_text(encoding="utf-8"))
    assert raw["version"] == RECORD_VERSION and list(raw)[0] == "version"
    read = read_record(paths.results)
    assert read == written
    name = next(n for n, cls in RunRecord.parts().items() if cls is type(part))
    again = getattr(read, name)
    assert json.dumps(again.as_json(), default=float) == json.dumps(part.as_json(), default=float)
    # only the fields the part set are in the file: a stage that did not write leaves no key
    assert set(raw) == {"version", *part.model_fields_set}


def test_a_part_written_twice_keeps_the_fields_of_the_first_write(tmp_path):
    paths = _paths(tmp_path)
    write_part(paths, CorpusRecord(corpus_items=3, corpus_synthetic=False))
    write_part(paths, CorpusRecord(corpus_structure={"documents": 3}))
    corpus = read_record(paths.results).corpus
    assert (corpus.corpus_items, corpus.corpus_synthetic) == (3, False)
    assert corpus.corpus_structure == {"documents": 3}
    assert forget(paths, ("corpus_structure",))
    assert read_record(paths.results).corpus.corpus_structure is None
    assert read_record(paths.results).corpus.corpus_items == 3


def test_the_decision_is_written_as_its_json_form_nan_as_null(tmp_path):
    paths = _paths(tmp_path)
    write_part(paths, DecisionRecord(decision=Decision(cube_score=float("nan"), verdict="fair")))
    raw = json.loads(paths.results.read_text(encoding="utf-8"))
    assert raw["decision"]["cube_score"] is None and raw["decision"]["verdict"] == "fair"
    assert read_record(paths.results).decision.decision.verdict == "fair"


def test_every_key_belongs_to_one_part_and_is_documented():
    owners = key_owners()
    total = sum(len(cls.model_fields) for cls in RunRecord.parts().values())
    assert len(owners) == total  # no key in two parts
    page = results_reference()
    for key in owners:
        assert f"| `{key}` |" in page, key


def test_an_unversioned_file_is_read_and_its_replayed_flag_moves_to_stage_03(tmp_path):
    seq = _sequential().model_dump()
    seq.pop("drive_id")
    old = {"questions": 3, "cube_score": 71.3, "sequential": {**seq, "replayed": True}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    record = read_record(path)
    assert record.questions.questions == 3 and record.decision.cube_score == 71.3
    assert record.scores.driver_taken == DriverTaken(failed_calls=2, pilots=["deaf"])
    # the old file's outcome was taken: a stage 03 run now does not take it again
    assert driver_outcome(record) is None


@pytest.mark.parametrize("version", [2, 99, "1"])
def test_another_version_is_refused_naming_the_file_and_its_version(tmp_path, version):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"version": version, "questions": 3}), encoding="utf-8")
    with pytest.raises(RecordError) as err:
        read_record(path)
    text = str(err.value)
    assert str(path) in text and f"version {version!r}" in text and "0 (no version)" not in text


def test_unknown_keys_are_named_and_kept_and_bad_values_named_all_at_once(tmp_path):
    """A key no part owns (a user's notebook wrote it) is named in a warning and survives the
    next write of a part: the run folder stays writable and nothing is lost."""
    paths = _paths(tmp_path)
    path = paths.results
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "zz": 1, "aa": {"b": 2}}), encoding="utf-8")
    with pytest.warns(UserWarning, match=r"key\(s\) aa, zz are not part of the run record"):
        read_record(path)
    with pytest.warns(UserWarning):
        write_part(paths, PlanRecord(plan=[]))
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["zz"] == 1 and written["aa"] == {"b": 2} and written["plan"] == []
    path.write_text(json.dumps({"questions": "many", "scores": [1]}), encoding="utf-8")
    with pytest.raises(RecordError) as err:
        read_record(path)
    assert "questions: " in str(err.value) and "scores: " in str(err.value)
    assert "version 0" in str(err.value)


def test_stage_03_takes_the_drivers_outcome_once_per_drive():
    """The bug class of a later run of stage 03 alone replaying old failures for ever: the
    outcome is an argument stage 03 takes from stage 02's record, and its own record says which
    drive it took; a second run of stage 03 gets no outcome (it asks the calls again), a new drive
    gives a new outcome."""
    seq = _sequential("d1")
    record = RunRecord().with_part(DriverRecord(sequential=seq))
    outcome = driver_outcome(record)
    assert outcome is not None and outcome.failed_calls == seq.failed_calls
    record = record.with_part(ScoresRecord(driver_taken=driver_taken(outcome)))
    assert driver_outcome(record) is None  # stage 03 alone, again: nothing replayed
    renewed = record.with_part(DriverRecord(sequential=_sequential("d2")))
    assert driver_outcome(renewed).drive_id == "d2"  # stage 02 ran again: a new outcome
    assert driver_outcome(RunRecord()) is None  # no driver


def test_the_drivers_pilots_reach_the_judges_as_arguments():
    from types import SimpleNamespace

    from cube.judges.scoring import Judge

    online = SimpleNamespace(offline=False)
    judges = [Judge(name="deaf", model=online, pilot=10), Judge(name="other", model=online)]
    out = with_driver_pilots(judges, _sequential())
    assert out[0].pilot_calls == frozenset({"k9"}) and out[0].pilot_report == {
        "decision": "stopped"
    }
    assert out[1] is judges[1]
    assert with_driver_pilots(judges, None) == judges


# ------------------------------------------------------------ the stages' record declarations
def test_every_part_a_stage_reads_or_writes_is_a_part_with_one_writer():
    from cube.run.stages import STAGES, record_writer

    parts = set(RunRecord.parts())
    for name, spec in STAGES.items():
        assert set(spec.record_reads) | set(spec.record_writes) <= parts, name
        for part in spec.record_reads:
            assert record_writer(part) is not None and record_writer(part) < name, (name, part)
    writers = [p for spec in STAGES.values() for p in spec.record_writes]
    assert len(writers) == len(set(writers))  # one writer per part
    assert parts - set(writers) == {"plan"}  # `cube run` itself writes the plan


def test_the_stage_graph_follows_the_declarations_and_keeps_the_hand_written_inputs():
    """The inputs derived from the data and record parts each stage reads are the ones the table
    declared by hand before (so every run folder's fingerprints stay as they were); a part read
    from a stage that is not upstream adds that stage (10 reads 06's decision)."""
    from cube.run.stages import STAGES, stage_inputs, upstream, written_keys

    before = {
        "02_qa_sets": ("01_dataset_prep",),
        "03_scoring_sets": ("02_qa_sets",),
        "10_diagnostics": ("03_scoring_sets", "06_cube_score"),
        # added since, on purpose: 08 reads 07's human ratings (`pipeline.scores_with_human`), which
        # stages side by side made a race; existing run folders re-run 08 once
        "08_bleu_rouge": ("03_scoring_sets", "07_human_agreement"),
        "12_validation": (),
        "00_paper_tables": (),
        "01_dataset_prep": (),
    }
    stems = list(STAGES)
    for stem in stems:
        assert stage_inputs(stem, stems) == before.get(stem, ("03_scoring_sets",)), stem
    assert STAGES["10_diagnostics"].inputs == ("03_scoring_sets",)  # 06 comes from the record
    assert upstream("10_diagnostics", stems) == [
        "01_dataset_prep",
        "02_qa_sets",
        "03_scoring_sets",
        "06_cube_score",
    ]
    assert written_keys("06_cube_score") == keys_of(DecisionRecord)
    assert written_keys("12_validation") == ("simulation",)
    assert written_keys("04_rank_correlation") == ()
