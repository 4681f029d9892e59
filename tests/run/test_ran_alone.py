"""What notebooks run alone record (`cube.run.ran_alone`, review 4's findings): parallel writers
into one run folder neither crash nor lose records (ran-alone records and data provenance), and
`cube run --force` of every stage drops the record of a notebook not recognised."""

from __future__ import annotations

import multiprocessing as mp
import shutil
from pathlib import Path

import yaml

from tests import ROOT

STAGES = ["04_rank_correlation", "05_bounds_and_weights", "06_cube_score", "07_human_agreement"]
NAMES = ["answers.parquet", "judgements.parquet", "x_a.parquet", "x_b.parquet"]


def _note(args: tuple[str, str]) -> str | None:
    from cube.config.params import load_params
    from cube.run.ran_alone import note_ran_alone

    folder, stage = args
    params = load_params(ROOT / "params" / "default.yaml")
    try:
        for _ in range(25):
            note_ran_alone(Path(folder), stage, params, "params/default.yaml")
    except Exception as exc:  # reported to the test, which fails naming it
        return f"{stage}: {type(exc).__name__}: {exc}"
    return None


def _provenance(args: tuple[str, str]) -> str | None:
    from cube.config.params import load_params
    from cube.run.stages import record_provenance

    folder, name = args
    params = load_params(ROOT / "params" / "default.yaml")
    try:
        for _ in range(25):
            record_provenance(Path(folder), name, params, "params/default.yaml")
    except Exception as exc:
        return f"{name}: {type(exc).__name__}: {exc}"
    return None


def _parallel(worker, folder: Path, keys: list[str]) -> list[str]:
    # spawn, not fork: a fork copies whatever lock a thread of this pytest process holds (a test
    # server, a logging handler), and a child that needs it waits forever (CI hung here 600 s)
    with mp.get_context("spawn").Pool(len(keys)) as pool:
        return [r for r in pool.map(worker, [(str(folder), k) for k in keys]) if r]


def test_notebooks_run_alone_in_parallel_keep_every_record(tmp_path):
    from cube.run.ran_alone import read_ran_alone

    for trial in range(3):
        folder = tmp_path / f"t{trial}" / "notebooks"
        assert _parallel(_note, folder, STAGES) == []
        assert set(read_ran_alone(folder)) == set(STAGES)
        assert [p.name for p in folder.iterdir()] == [
            ".ran_alone.json"
        ]  # no temp or lock file left


def test_data_files_written_in_parallel_keep_every_provenance_entry(tmp_path):
    from cube.run.stages import read_provenance

    for trial in range(3):
        folder = tmp_path / f"t{trial}" / "data"
        folder.mkdir(parents=True)
        assert _parallel(_provenance, folder, NAMES) == []
        assert set(read_provenance(folder)) == set(NAMES)
        assert [p.name for p in folder.iterdir()] == [".provenance.json"]


def test_a_forced_run_of_every_stage_drops_the_record_of_a_notebook_not_recognised(
    tmp_path, monkeypatch
):
    import os

    from cube.config.params import parse_params
    from cube.config.runpaths import RunPaths
    from cube.run.execute import execute_run
    from cube.run.notebook import Run
    from cube.run.ran_alone import RAN_ALONE, UNKNOWN, read_ran_alone

    monkeypatch.delenv("CUBE_PROJECT_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(ROOT)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))[:2]:  # 00 and 01
        shutil.copy(nb, notebooks / nb.name)
    judges = [
        {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
        {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
    ]
    raw = {
        "run": "forced",
        "outputs_dir": str(tmp_path / "out"),
        "judges": judges,
        "corpus": {"n_items": 12, "seed": 1},
        "questions": {"limit": 6},
    }
    params_file = tmp_path / "p.yaml"
    params_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
    run = tmp_path / "out" / "forced"
    assert execute_run(params_file, notebooks_dir=notebooks, log=lambda _: None).ok
    other = parse_params({**raw, "corpus": {"n_items": 12, "seed": 2}})
    paths = RunPaths(root=run, cache=tmp_path / "out" / "cache.sqlite")
    from cube.run.record import CorpusRecord

    Run(params=other, paths=paths, params_path=params_file, alone=True).write_record(
        CorpusRecord(corpus_items=1)
    )  # stage not recognised
    unknown = [k for k in read_ran_alone(run / "notebooks") if k.startswith(UNKNOWN)]
    assert len(unknown) == 1
    # forcing some stages only: the unrecognised notebook may still have changed the others
    assert execute_run(
        params_file, notebooks_dir=notebooks, only="00", force=True, log=lambda _: None
    ).ok
    assert unknown[0] in read_ran_alone(run / "notebooks")
    # forcing every stage: every stage now holds what this run wrote
    assert execute_run(params_file, notebooks_dir=notebooks, force=True, log=lambda _: None).ok
    assert not (run / "notebooks" / RAN_ALONE).exists()
