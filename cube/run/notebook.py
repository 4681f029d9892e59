"""What a notebook needs from a run: its params, its paths, and saving what it shows.

Each notebook opens with the parameters cell `PARAMETERS_CELL` (papermill: `-p params_path ...`,
`-p overrides '["corpus.seed=3"]'`), then `run = open_run(params_path, run_dir, overrides)`. Every
table it displays goes through `run.table(name, df)` (written to `tables/<name>.csv`, shown
formatted for people by `cube.pages.display`) and every figure through `run.figure(name, fig)`
(written to `figures/<name>.png`), so the published files and the rendered report never disagree.
`run.require(...)` stops a notebook run before the stages producing its inputs, naming every
stage to run first, in order. `run.load(...)` stops when the data were produced under other params
(`cube.run.stages.ParamsMismatchError`, naming the differing keys).

Paths resolve against the project root (`cube.config.project`), so a notebook runs the same from the
repository root, from `notebooks/` (JupyterLab, nbconvert) and under papermill or `cube run`. A
notebook run alone writes into the run folder exactly as under `cube run`; `cube report` then
publishes it when its executed copy is saved as `outputs/<run>/notebooks/<name>.ipynb` (see
docs/how-to/papermill.md).
A failed attempt on a new run name leaves nothing: in a kernel, when a cell fails while the run
folder `open_run` created holds only its `params.yaml`, the folder is removed (and made again by the
next write). Outputs show no local path: `params.yaml` shows path keys relative to the project root,
or by name when outside it; `cube run` gives notebooks such paths by name (`LOCAL_PATHS_ENV`).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params, ParamsError
from cube.config.project import (
    display_path,
    find_marked_root,
    paths_relative_to,
    project_root,
    resolve,
    shared_values,
)
from cube.config.runpaths import RunPaths
from cube.config.sheets import write_csv
from cube.pages.display import table as shown_table
from cube.run.record import Part, RunRecord, read_record, write_part
from cube.run.stages import STAGES, check_provenance, record_provenance
from cube.run.state import STAGING
from cube.systems import retrieval_store

# Which notebook writes which data file: used to tell a reader what to run first.
PRODUCED_BY = {
    name: stage
    for stage, spec in STAGES.items()
    for name in spec.writes
    if name != "questions_failed"
}
STAGING_ENV = "CUBE_STAGING_DIR"  # set by `cube run`: the staging folder its kernels write into
# set by `cube run`: {path as given to the notebook: local path}, so that a params file or run
# folder outside the project reaches the kernel while the executed notebook shows only its name
LOCAL_PATHS_ENV = "CUBE_LOCAL_PATHS"

# The one parameters cell of every notebook (`apply_parameters_cell` writes it into each of them).
# Written in pieces: some of its lines, as the notebooks hold them, are over 100 characters.
PARAMETERS_CELL = (
    "# Parameters (papermill: -p NAME VALUE; `papermill --help-notebook NOTEBOOK` lists them).\n"
    "# Relative paths are read from the project root (the folder with pyproject.toml), "
    "wherever this runs.\n"
    "# Example: papermill NB OUT -p overrides "
    """'["corpus.seed=3", "analysis.trim_proportion=0.2"]'\n"""
    'params_path: str = "params/default.yaml"  # params YAML file of the run\n'
    'run_dir: "Optional[str]" = None  # run folder; None means outputs/<run> of the params\n'
    'overrides: "Union[list, dict, None]" = None  # params changes: key.path strings or a '
    "mapping, validated like the file\n"
)
PARAMETER_NAMES = ("params_path", "run_dir", "overrides")


def _own_parameters(source: str) -> list[str]:
    """The lines of a parameters cell that assign a notebook's own parameters (not the common
    ones of `PARAMETERS_CELL`, not comments)."""
    out = []
    for line in source.splitlines():
        name = line.split("=")[0].split(":")[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and name not in PARAMETER_NAMES:
            out.append(line)
    return out


class MissingStageError(RuntimeError):
    """A notebook's input file is missing: the message names every stage to run first, in order."""


@dataclass
class Run:
    """One run: validated params and the run directory's layout."""

    params: Params
    paths: RunPaths
    params_path: Path
    # a notebook run outside `cube run`: its stage (None when not recognised) is recorded with its
    # params at its first write (`cube.run.ran_alone`), so that `cube run` sees what it changed
    alone: bool = False
    stage: str | None = None
    _noted: bool = False

    @property
    def root(self) -> Path:
        return self.paths.root

    @property
    def base_dir(self) -> Path:
        """Where relative paths inside the params are read from (the project root)."""
        return project_root()

    @property
    def label(self) -> str:
        """The run folder as shown in messages: relative to the project root, never a staging
        copy."""
        shown = self.root.parent if self.root.name == STAGING else self.root
        return display_path(shown)

    @property
    def params_label(self) -> str:
        return display_path(self.params_path)

    def shown_path(self, path: str | Path) -> str:
        """A path as outputs show it: relative to the project root, never the local folder
        layout."""
        return display_path(path)

    def table(
        self, name: str, df: pd.DataFrame, index: bool | None = None, digits: int = 2
    ) -> pd.DataFrame:
        """Write `tables/<name>.csv` (raw values) and return the frame, displayed for people."""
        self._folder()
        self.paths.tables.mkdir(parents=True, exist_ok=True)
        keep_index = index if index is not None else not isinstance(df.index, pd.RangeIndex)
        write_csv(df, self.paths.tables / f"{name}.csv", index=keep_index)  # no cell a formula
        return shown_table(df, digits)

    def figure(self, name: str, fig: Any) -> Any:
        """Write `figures/<name>.png` (150 dpi) and return that PNG for display, so the notebook,
        its HTML page and the published file show the same image; its caption
        (`cube.pages.captions`) is the image's alt text."""
        from IPython.display import Image

        from cube.pages.captions import figure_caption

        self._folder()
        self.paths.figures.mkdir(parents=True, exist_ok=True)
        path = self.paths.figures / f"{name}.png"
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata={"Software": None})
        return Image(data=path.read_bytes(), format="png", alt=figure_caption(name) or None)

    def write_record(self, *parts: Part) -> RunRecord:
        """Store sub-records of the run record (`results.json`, `cube.run.record`): each part's
        fields it sets are written over those of its kind; the record written is returned."""
        self._folder()
        return write_part(self.paths, *parts)

    def read_record(self) -> RunRecord:
        """The run record (`results.json`) as stored so far (empty before the first write)."""
        return read_record(self.paths.results)

    def _folder(self) -> None:
        """The run folder with its resolved params, made again if a failed cell removed it as empty;
        run alone, the first write records the stage's params (`cube.run.ran_alone`)."""
        if not self.paths.params.exists():
            self.paths.ensure()
            write_shared_params(self.params, self.paths)
        if self.alone and not self._noted:
            from cube.run.ran_alone import note_ran_alone

            note_ran_alone(self.paths.notebooks, self.stage, self.params, self.params_label)
            self._noted = True

    def data_path(self, name: str) -> Path:
        return self.paths.data_file(name)

    def has(self, name: str) -> bool:
        return self.data_path(name).exists()

    def require(self, *names: str) -> None:
        """Raise `MissingStageError` naming every stage to run first, in order: the producers of
        the missing files and, transitively, the producers of their own missing inputs."""
        missing = [n for n in names if not self.has(n)]
        if not missing:
            return
        ordered = self._stages_to_run(missing)
        raise MissingStageError(
            f"{self.label}: missing {', '.join(f'data/{n}.parquet' for n in missing)}. Run "
            + _in_order(ordered)
            + " first, in this order "
            f"(or `cube run {self.params_label}` for the whole sequence)."
        )

    def _stages_to_run(self, missing: list[str]) -> list[str]:
        """The producers of the missing files and, transitively, of their own missing inputs."""
        stages: set[str] = set()
        todo = [PRODUCED_BY.get(n, "an earlier notebook") for n in missing]
        while todo:
            stage = todo.pop()
            if stage not in stages:
                stages.add(stage)
                todo += self._inputs_missing(stage)
        return sorted(stages)

    def _inputs_missing(self, stage: str) -> list[str]:
        """The stages feeding `stage` whose data files are not all here."""
        if stage not in STAGES:
            return []
        return [
            inp
            for inp in STAGES[stage].inputs
            if any(not self.has(w) for w in STAGES[inp].writes if w != "questions_failed")
        ]

    def load(self, name: str, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
        """`data/<name>.parquet` (checked: present, produced by these params), whole or only the
        `columns` the file has (a paper-scale scores table is ~0.5 GB whole)."""
        self.require(name)
        check_provenance(self.paths.data, name, self.params, self.params_label, self.label)
        path = self.data_path(name)
        if columns is None:
            return pd.read_parquet(path)
        import pyarrow.parquet as pq

        present = set(pq.read_schema(path).names)
        return pd.read_parquet(path, columns=[c for c in columns if c in present])

    def save(self, name: str, df: pd.DataFrame) -> Path:
        """Write `data/<name>.parquet` atomically (a killed run never leaves half a file), recording
        which params produced it (`data/.provenance.json`)."""
        self._folder()
        path = self.data_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        record_provenance(self.paths.data, name, self.params, self.params_label)
        return path


def _in_order(stages: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return ", ".join(stages[:-1]) + " and " + stages[-1] if len(stages) > 1 else stages[0]


def _kernel_namespace() -> dict[str, Any] | None:
    ipython = sys.modules.get("IPython")
    shell = (
        ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    )
    return getattr(shell, "user_ns", None) if shell is not None else None


def _refuse_injected_params_keys() -> None:
    """`papermill NB OUT -f params.yaml` injects the YAML's keys as variables and would silently
    run on the default params: refuse it, naming the keys and the right way."""
    ns = _kernel_namespace()
    if not ns:
        return
    plain = (
        str,
        int,
        float,
        bool,
        list,
        dict,
        type(None),
    )  # what papermill injects (modules etc. are not)
    injected = [k for k in Params.model_fields if k in ns and isinstance(ns[k], plain)]
    if injected:
        raise ParamsError(
            "this notebook received params keys as papermill parameters "
            f"({', '.join(sorted(injected))}), probably from `papermill -f PARAMS.yaml`; they "
            "would be ignored. Pass the params file with `-p params_path PARAMS.yaml` and changes "
            "with `-p overrides '[\"corpus.seed=3\"]'`."
        )


def open_run(
    params_path: str | Path = "params/default.yaml",
    run_dir: str | Path | None = None,
    overrides: Any = None,
) -> Run:
    """Load params (plus `overrides`, validated like the file) and prepare the run folder, by
    default `outputs/<run>`. Relative paths resolve against the project root; in a notebook
    kernel the working directory becomes that root, so the params' own relative paths do too."""
    from cube.config.overrides import load_params_with_overrides

    _refuse_injected_params_keys()
    params_path, run_dir = local_path(params_path), local_path(run_dir)
    root = project_root()
    _work_in_root(root)
    params_file = resolve(params_path, root)
    params = load_params_with_overrides(params_file, overrides)
    if run_dir is None:
        paths, alone = _default_paths(params, root), True
    else:
        paths, alone = _given_paths(params, resolve(run_dir, root), root)
    _prepare_folder(paths, params, params_file)
    # the BM25 segmentations the plan made are read back (`cube.systems.retrieval_store`)
    retrieval_store.open_store(retrieval_store.store_folder(paths.cache))
    pd.set_option("display.max_colwidth", 120)
    pd.set_option("display.precision", 4)
    stage = None
    if alone:
        from cube.run.ran_alone import running_notebook

        stage = running_notebook(root / "notebooks")
    return Run(params=params, paths=paths, params_path=params_file, alone=alone, stage=stage)


def _work_in_root(root: Path) -> None:
    """In a notebook kernel of the project, work in its root (JupyterLab / nbconvert start
    kernels in notebooks/)."""
    if (
        _kernel_namespace() is not None
        and find_marked_root() is not None
        and Path.cwd().resolve() != root
    ):
        os.chdir(root)


def _default_paths(params: Params, root: Path) -> RunPaths:
    """`outputs/<run>` under the params' outputs folder, with the params' cache if named."""
    paths = RunPaths.for_params(params, resolve(params.outputs_dir, root))
    if params.cache_path:
        paths = RunPaths(root=paths.root, cache=resolve(params.cache_path, root))
    return paths


def _given_paths(params: Params, target: Path, root: Path) -> tuple[RunPaths, bool]:
    """The run folder a notebook was given, and whether the notebook runs alone: under `cube run`
    it writes into the run's staging copy."""
    alone = True
    staging = os.environ.get(STAGING_ENV)
    if staging and Path(staging).parent.resolve() == target.resolve():
        target = Path(staging)  # under `cube run`: write into its staging copy
        alone = False
    # The outputs folder (and the shared cache) is the run folder's parent (two levels up from
    # staging).
    outputs = target.parent.parent if target.name == STAGING else target.parent
    cache = resolve(params.cache_path, root) if params.cache_path else outputs / "cache.sqlite"
    return RunPaths(root=target, cache=cache), alone


def _prepare_folder(paths: RunPaths, params: Params, params_file: Path) -> None:
    """Create the run folder (removed again if the first cell fails while it is empty) and copy
    the params there, never over the params file being used."""
    created = [d for d in (paths.root, paths.cache.parent) if not d.exists()]
    paths.ensure()
    if paths.params.resolve() != params_file.resolve():
        write_shared_params(params, paths)
    if created:
        _forget_on_failure(paths, created)


def local_path(shown: str | Path | None) -> str | Path | None:
    """The local path behind a path `cube run` gave a notebook by its shown form
    (`LOCAL_PATHS_ENV`)."""
    if shown is None:
        return None
    try:
        mapping = json.loads(os.environ.get(LOCAL_PATHS_ENV) or "{}")
    except ValueError:
        mapping = {}
    return mapping.get(str(shown), shown)


def shared_params_yaml(params: Params, folder: Path | None = None) -> str:
    """The resolved params as published in `<folder>/params.yaml` (`folder`: the run folder): local
    paths relative to `folder` (read back from there, like any params file's: the recorded file
    runs again as recorded) when they lie in the project or beside the outputs folder, else
    relative to the project root, in the home folder as `~/...`, or by name only with a note naming
    the keys."""
    import yaml

    data = json.loads(params.model_dump_json())
    if folder is not None:
        data = paths_relative_to(data, folder.parent if folder.name == STAGING else folder)
    data, cut = shared_values(data, project_root())
    note = (
        "# Outside the project, shown by name only (the local path is not published): "
        f"{', '.join(cut)}\n"
        if cut
        else ""
    )
    return note + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def write_shared_params(params: Params, paths: RunPaths) -> Path:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.params.write_text(shared_params_yaml(params, paths.root), encoding="utf-8")
    return paths.params


# ------------------------------------------------------------------ a failed attempt leaves nothing
_WATCHED: dict[
    Path, tuple[RunPaths, list[Path]]
] = {}  # run folder -> (paths, folders open_run created)


def holds_nothing(paths: RunPaths) -> bool:
    """The run folder holds only what `open_run` wrote before any stage output: the resolved
    params and empty folders."""
    if not paths.root.is_dir():
        return False
    return all(f == paths.params for f in paths.root.rglob("*") if not f.is_dir())


def remove_if_empty(paths: RunPaths, created: list[Path]) -> bool:
    """Remove a run folder that `open_run` created (it is in `created`) and that still holds
    nothing, and the other folders it created (outputs, cache folder) that are empty now. A run
    folder that existed before is never removed, whatever it holds (e.g. the user's own params file
    kept in it). Returns whether the run folder was removed."""
    import shutil

    removed = paths.root in created and holds_nothing(paths)
    if removed:
        shutil.rmtree(paths.root)
    for folder in created:  # deepest first: a created cache folder inside a created outputs folder
        if folder != paths.root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return removed


def _forget_on_failure(paths: RunPaths, created: list[Path]) -> None:
    """In a kernel (papermill, nbconvert, Jupyter): when a cell fails while the run folder this
    `open_run` created holds nothing yet (a missing predecessor stage, a bad input), remove it, so a
    failed attempt on a new run name leaves no empty `outputs/<run>/`. A folder that existed before
    is never touched, nor one holding anything a stage wrote."""
    ipython = sys.modules.get("IPython")
    shell = (
        ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    )
    if shell is None or not hasattr(shell, "events"):
        return
    if not _WATCHED:
        shell.events.register("post_run_cell", _after_cell)
    _WATCHED[paths.root] = (paths, created)


def _after_cell(result: Any) -> None:
    if (
        getattr(result, "error_in_exec", None) is None
        and getattr(result, "error_before_exec", None) is None
    ):
        return
    for root, (paths, created) in list(_WATCHED.items()):
        if remove_if_empty(paths, created):
            del _WATCHED[root]


# ------------------------------------------------------------------------- parameters cell
def apply_parameters_cell(notebooks: list[Path]) -> list[Path]:
    """Write `PARAMETERS_CELL` into each notebook's cell tagged `parameters` (the cell after the
    imports gets the tag when none has it) and make the `open_run` call pass `overrides`. Returns
    the notebooks changed."""
    import nbformat

    changed = []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        _set_parameters_cell(nb)
        _pass_overrides(nb)
        if nbformat.writes(nb) != before:
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def _set_parameters_cell(nb: Any) -> None:
    """`PARAMETERS_CELL` in the cell tagged `parameters`, a new one after the imports when none
    is tagged; a notebook's own parameters (e.g. 09's two sides) follow the common ones, kept as
    they are."""
    import nbformat

    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if cells:
        cells[0].source = PARAMETERS_CELL + "\n".join(_own_parameters(cells[0].source))
        cells[0].source = cells[0].source.rstrip("\n")
        return
    code = [c for c in nb.cells if c.cell_type == "code"]
    cell = nbformat.v4.new_code_cell(
        PARAMETERS_CELL.rstrip("\n"), metadata={"tags": ["parameters"]}
    )
    nb.cells.insert(nb.cells.index(code[0]) + 1 if code else 0, cell)


def _pass_overrides(nb: Any) -> None:
    """The notebook's `open_run` call passes `overrides`."""
    for c in nb.cells:
        if c.cell_type == "code" and "open_run(params_path, run_dir)" in c.source:
            c.source = c.source.replace(
                "open_run(params_path, run_dir)", "open_run(params_path, run_dir, overrides)"
            )


if (
    __name__ == "__main__"
):  # python -m cube.run.notebook [NOTEBOOK_DIR]: re-apply the parameters cell
    from cube.config.project import list_notebooks

    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else project_root() / "notebooks"
    for p in apply_parameters_cell(list_notebooks(folder)):
        print(f"updated {p}")
    print(json.dumps({"parameters": list(PARAMETER_NAMES)}))
