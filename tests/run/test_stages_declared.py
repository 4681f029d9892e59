"""Every data file a stage saves is declared in `cube.run.stages.STAGES`, so its provenance records
only what produced it (an undeclared file records every params section, and then any params edit
makes a later stage refuse it as produced by other params)."""

import re

from cube.run.stages import STAGES, producer
from tests import ROOT


def test_every_saved_data_file_has_a_producing_stage():
    sources = [*ROOT.joinpath("cube").rglob("*.py"), *ROOT.joinpath("notebooks").glob("*.ipynb")]
    saved = {
        m
        for p in sources
        for m in re.findall(r'run\.save\(\\?"(\w+)', p.read_text(encoding="utf-8"))
    }
    assert {"corpus", "questions", "answers", "scores", "refusal_answers"} <= saved
    assert {name: producer(name) for name in saved if producer(name) is None} == {}


def test_every_notebook_is_a_declared_stage():
    names = {p.stem for p in ROOT.joinpath("notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert names == set(STAGES)
