"""What a notebook needs from a run: its params, its paths, and saving what it shows.

Each notebook opens with `run = cube.notebook.open_run(params_path, run_dir)`, then every
table it displays goes through `run.table(name, df)` (written to `tables/<name>.csv`) and every
figure through `run.figure(name, fig)` (written to `figures/<name>.png`), so the published
files and the rendered report never disagree. `run.require(...)` stops a notebook that is run
before the stage producing its inputs, naming the stage to run first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config import Params, RunPaths, load_params, record_results, write_resolved_params
from cube.runstate import STAGING

# Which notebook writes which data file: used to tell a reader what to run first.
PRODUCED_BY = {
    "corpus": "01_dataset_prep",
    "questions": "02_qa_sets",
    "answers": "02_qa_sets",
    "scores": "03_scoring_sets",
    "human_ratings": "07_human_agreement",
}


class MissingStageError(RuntimeError):
    """A notebook's input file is missing: the message says which notebook to run first."""


@dataclass
class Run:
    """One run: validated params and the run directory's layout."""

    params: Params
    paths: RunPaths
    params_path: Path

    @property
    def root(self) -> Path:
        return self.paths.root

    def table(self, name: str, df: pd.DataFrame, index: bool | None = None) -> pd.DataFrame:
        """Write `tables/<name>.csv` and return the frame for display."""
        self.paths.tables.mkdir(parents=True, exist_ok=True)
        keep_index = index if index is not None else not isinstance(df.index, pd.RangeIndex)
        df.to_csv(self.paths.tables / f"{name}.csv", index=keep_index)
        return df

    def figure(self, name: str, fig: Any) -> Any:
        """Write `figures/<name>.png` (150 dpi) and return that PNG for display, so the notebook,
        its HTML page and the published file show the same image."""
        from IPython.display import Image

        self.paths.figures.mkdir(parents=True, exist_ok=True)
        path = self.paths.figures / f"{name}.png"
        fig.savefig(path, dpi=150, bbox_inches="tight")
        return Image(filename=str(path))

    def record(self, **figures: Any) -> dict[str, Any]:
        """Merge headline figures into `results.json`."""
        return record_results(self.paths, **figures)

    def data_path(self, name: str) -> Path:
        return self.paths.data_file(name)

    def has(self, name: str) -> bool:
        return self.data_path(name).exists()

    def require(self, *names: str) -> None:
        """Raise `MissingStageError` naming the notebook to run first for each missing file."""
        missing = [n for n in names if not self.has(n)]
        if missing:
            stages = sorted({PRODUCED_BY.get(n, "an earlier notebook") for n in missing})
            shown = self.root.parent if self.root.name == STAGING else self.root  # the run, not its staging copy
            raise MissingStageError(
                f"{shown}: missing {', '.join(f'data/{n}.parquet' for n in missing)}. "
                f"Run {' and '.join(stages)} first (or `cube run {self.params_path}` for the whole sequence)."
            )

    def load(self, name: str) -> pd.DataFrame:
        self.require(name)
        return pd.read_parquet(self.data_path(name))

    def save(self, name: str, df: pd.DataFrame) -> Path:
        """Write `data/<name>.parquet` atomically (a killed run never leaves half a file)."""
        path = self.data_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        return path


def open_run(params_path: str | Path, run_dir: str | Path | None = None) -> Run:
    """Load params and prepare the run directory. `run_dir` defaults to `outputs/<run>`.

    Relative paths are resolved against the current directory; papermill notebooks get
    absolute paths from `cube run`."""
    params = load_params(params_path)
    paths = RunPaths.for_params(params)
    if run_dir is not None:
        root = Path(run_dir)
        # `cube run` executes notebooks in `outputs/<run>/.staging/` (see cube.runstate): the
        # outputs folder, and so the shared cache, is then two levels up.
        outputs = root.parent.parent if root.name == STAGING else root.parent
        cache = Path(params.cache_path) if params.cache_path else outputs / "cache.sqlite"
        paths = RunPaths(root=root, cache=cache)
    paths.ensure()
    write_resolved_params(params, paths)
    pd.set_option("display.max_colwidth", 120)
    pd.set_option("display.precision", 4)
    return Run(params=params, paths=paths, params_path=Path(params_path))
