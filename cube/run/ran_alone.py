"""Which params each notebook run alone (papermill, nbconvert, Jupyter) last wrote a run folder
with.

A notebook run outside `cube run` writes into the published run folder: its tables, figures and
`results.json` (stages 04-06, 09 and 10 write no data file, so no provenance records them), and
`params.yaml`, which the next notebook run alone rewrites. So at its first write, a `Run` opened
outside `cube run` records in `notebooks/.ran_alone.json`, under the notebook's stage, the params
sections it ran with (`cube.run.stages.comparable_values`: no local path). `cube run` compares every
stage's record with its own params, over the sections the stage reads (`stages_ran_alone`): a
stage run alone with other values is out of date, and so is every stage reading its data. Once
`cube run` has taken the records into its fingerprints, it drops the file from its staging copy.

The stage is the notebook's name: from the kernel's `__session__` (JupyterLab) or
`__vsc_ipynb_file__` (VS Code) when it names a notebook of the project, else recognised from the
cells the kernel executed (papermill and nbconvert do not tell a kernel which notebook it runs): the
project notebook holding the most of them, if exactly one does. A notebook not recognised is
recorded as unknown, and compared with every stage.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from cube.config.jsonfile import read_json_dict, update_json
from cube.config.params import Params

RAN_ALONE = ".ran_alone.json"
UNKNOWN = "?"  # prefix of the record of a notebook not recognised


def _code_cells(path: Path) -> set[str]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {
        "".join(c.get("source", "")).strip()
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code"
    } - {""}


def identify_notebook(executed: list[str], folder: Path) -> str | None:
    """The stem of the notebook of `folder` holding the most of the `executed` cells (at least one
    not common to every notebook), or None when none or several do."""
    cells = {nb.stem: _code_cells(nb) for nb in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}
    common = set.intersection(*cells.values()) if len(cells) > 1 else set()  # the parameters cell
    ran = {c.strip() for c in executed} - {""} - common
    counts = {stem: len(ran & own) for stem, own in cells.items()}
    best = max(counts.values(), default=0)
    winners = [stem for stem, n in counts.items() if n == best]
    return winners[0] if best and len(winners) == 1 else None


def _shell() -> Any | None:
    """The IPython shell this code runs in, or None outside one."""
    ipython = sys.modules.get("IPython")
    if ipython is None or not hasattr(ipython, "get_ipython"):
        return None
    return ipython.get_ipython()


def _project_notebook(named: Any, folder: Path) -> bool:
    """Whether a kernel variable names a notebook of the project's `folder`."""
    return (
        isinstance(named, str)
        and named.endswith(".ipynb")
        and (folder / Path(named).name).is_file()
    )


def _executed_cells(shell: Any) -> list[str]:
    """The cells the kernel has executed (its input history)."""
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    return [c for c in history if isinstance(c, str)]


def running_notebook(folder: Path) -> str | None:
    """The stem of the project notebook this kernel runs (see the module docstring), else None."""
    shell = _shell()
    if shell is None:
        return None
    for var in ("__session__", "__vsc_ipynb_file__"):
        named = shell.user_ns.get(var)
        if _project_notebook(named, folder):
            return Path(named).stem
    return identify_notebook(_executed_cells(shell), folder)


def every_section() -> list[str]:
    from cube.config.params import Params
    from cube.run.stages import NOT_STAGE_INPUTS

    return [k for k in Params.model_fields if k not in NOT_STAGE_INPUTS]


def note_ran_alone(notebooks_dir: Path, stage: str | None, params: Any, params_file: str) -> None:
    """Record that notebook `stage` (None: not recognised) wrote this run folder with `params`."""
    from cube.run.stages import comparable_values

    values = comparable_values(json.loads(params.model_dump_json()), every_section())
    key = (
        stage
        or UNKNOWN + hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]
    )
    # notebooks run alone in parallel (a papermill batch) each add their record: locked update
    update_json(
        notebooks_dir / RAN_ALONE,
        lambda records: {**records, key: {"params_file": params_file, "params": values}},
    )


def read_ran_alone(notebooks_dir: Path) -> dict[str, Any]:
    return read_json_dict(notebooks_dir / RAN_ALONE)


def _stage_sections(stem: str, stems: list[str]) -> list[str] | tuple[str, ...]:
    """The params sections stage `stem` reads, in the sequence `stems`."""
    from cube.run.stages import stage_spec

    return stage_spec(stem, [s for s in stems if s < stem]).sections


def _targets(key: str, stems: list[str]) -> list[str]:
    """The stages a record compares with: a stage of this sequence, itself; a known stage this
    sequence leaves out, none; else (not recognised, or a notebook of another name, e.g. a copy)
    every stage."""
    from cube.run.stages import STAGES

    if key in stems:
        return [key]
    return [] if key in STAGES else stems


def _recorder(key: str) -> str:
    return "a notebook not recognised" if key.startswith(UNKNOWN) else f"notebook {key}"


def _first_keys(keys: list[str]) -> str:
    """The first four keys, "..." after them when there are more."""
    return ", ".join(keys[:4]) + (", ..." if len(keys) > 4 else "")


def stages_ran_alone(notebooks_dir: Path, params: Any, stems: list[str]) -> dict[str, str]:
    """Stages whose notebook, run alone, last wrote the run folder with values other than `params`
    in a section the stage reads (an unrecognised notebook counts for every stage), with the
    reason."""
    from cube.run.stages import comparable_values, diff_keys

    current = json.loads(params.model_dump_json())
    found: dict[str, str] = {}
    for key, entry in sorted(read_ran_alone(notebooks_dir).items()):
        recorded = entry.get("params") if isinstance(entry, dict) else None
        if not isinstance(recorded, dict):
            continue
        for stem in _targets(key, stems):
            sections = _stage_sections(stem, stems)
            differing = diff_keys(
                comparable_values(recorded, sections), comparable_values(current, sections)
            )
            if differing and stem not in found:
                found[stem] = (
                    f"{_recorder(key)} ran alone into this run folder with other params: "
                    f"{_first_keys(differing)}"
                )
    return found


def forget_ran_alone(notebooks_dir: Path, stems: set[str] | None = None) -> None:
    """Drop the records of `stems` (None: every record) once `cube run` has taken them into account;
    an unrecognised notebook's record goes only with every record."""
    if stems is None:
        (notebooks_dir / RAN_ALONE).unlink(missing_ok=True)
        return
    update_json(
        notebooks_dir / RAN_ALONE,
        lambda records: {k: v for k, v in records.items() if k not in stems},
    )


def stages_run_outside(
    run_root: Path, params: Params, shared_yaml: str, injected: dict[str, str], stems: list[str]
) -> dict[str, str]:
    """Stages of a published run that a notebook run alone (papermill, nbconvert, Jupyter) changed
    since `cube run` recorded their fingerprints, with the reason, plus every stage reading their
    data: `cube run` must not take them as up to date. Seen four ways: the params a notebook run
    alone recorded at its first write (`cube.run.ran_alone`, for every stage, also those writing no
    data) differing from these in a section the stage reads; a data file whose provenance
    differs from these params; an executed notebook in `notebooks/` whose papermill parameters are
    not the ones `cube run` gives (`injected`); the run's `params.yaml` (written by the last
    notebook run) differing from these params in a section the stage reads."""
    found: dict[str, str] = {}
    _data_written_otherwise(run_root, params, found)
    _notebooks_run_otherwise(run_root, injected, found)
    _params_yaml_otherwise(run_root, shared_yaml, stems, found)
    for stem, why in stages_ran_alone(run_root / "notebooks", params, stems).items():
        found.setdefault(stem, why)
    return _with_readers(found, stems)


def _data_written_otherwise(run_root: Path, params: Params, found: dict[str, str]) -> None:
    """The stages whose data file's provenance differs from `params`, into `found`."""
    from cube.run.stages import params_differ, read_provenance

    for name, entry in sorted(read_provenance(run_root / "data").items()):
        if entry.get("stage") and params_differ(entry, params):
            found.setdefault(entry["stage"], f"data/{name}.parquet was written with other params")


def _papermill_parameters(nb: Path) -> Any:
    """The parameters papermill recorded in an executed notebook (None when it has none)."""
    try:
        meta = json.loads(nb.read_text(encoding="utf-8")).get("metadata", {}).get("papermill")
    except (OSError, ValueError):
        return None
    return (meta or {}).get("parameters")


def _notebooks_run_otherwise(
    run_root: Path, injected: dict[str, str], found: dict[str, str]
) -> None:
    """The executed notebooks whose papermill parameters are not `cube run`'s, into `found`."""
    for nb in sorted((run_root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if _papermill_parameters(nb) != injected:
            found.setdefault(
                nb.stem, f"notebooks/{nb.name} was not executed by `cube run` with these params"
            )


def _params_yaml_otherwise(
    run_root: Path, shared_yaml: str, stems: list[str], found: dict[str, str]
) -> None:
    """The stages reading a section in which the run's `params.yaml` (the last notebook run's)
    differs from `shared_yaml`, into `found`."""
    import yaml

    from cube.run.stages import dumped_section_values

    try:
        published = yaml.safe_load((run_root / "params.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return
    if not isinstance(published, dict):
        return
    current = yaml.safe_load(shared_yaml)
    for stem in stems:
        sections = _stage_sections(stem, stems)
        if dumped_section_values(published, sections) != dumped_section_values(current, sections):
            found.setdefault(stem, "params.yaml shows a notebook ran with other params")


def _with_readers(found: dict[str, str], stems: list[str]) -> dict[str, str]:
    """`found` and every stage reading the data of one of them, in order, with the reason."""
    from cube.run.stages import stage_inputs

    for stem in stems:
        inputs = stage_inputs(stem, stems)
        if stem not in found and (inp := next((i for i in inputs if i in found), None)):
            found[stem] = f"it reads the data of {inp}"
    return found


def stages_mixed(run_root: Path, params: Params, stems: list[str]) -> dict[str, str]:
    """What `cube report` marks out of date beside `cube run`'s fingerprints: the stages a notebook
    run alone (papermill, nbconvert, Jupyter) changed since the last `cube run` with params other
    than `params` in a section the stage reads (its record in `.ran_alone.json`, which `cube run`
    drops once it has re-executed them), the stages whose data file was written with other params,
    and every stage reading their data, with the reason. Their pages and the index (the decision
    in results.json is the last writer's) may then show numbers of different runs: a papermill
    re-run of notebook 06 with other params showed 71.9 on the index and 71.3 on page 06, unmarked.
    Unlike `stages_run_outside` it does not compare the executed notebooks' papermill parameters
    with `cube run`'s (a report is also published from a run folder without its params file)."""
    from cube.run.stages import params_differ, read_provenance

    found: dict[str, str] = {}
    for name, entry in sorted(read_provenance(run_root / "data").items()):
        if entry.get("stage") in stems and params_differ(entry, params):
            found.setdefault(entry["stage"], f"data/{name}.parquet was written with other params")
    for stem, why in stages_ran_alone(run_root / "notebooks", params, stems).items():
        found.setdefault(stem, why)
    return _with_readers(found, stems)
