"""Every path of one run (cookiecutter-data-science: one module owns the layout; results.json is
written through the typed run record, `cube.run.record`). Split out of `cube.config.params`, which
re-exports these names; the layout itself is described in `cube.config.params`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cube.config.params import Params

LAST_RUN = "last_run.html"  # report/last_run.html: how the last attempt of `cube run` ended


@dataclass(frozen=True)
class RunPaths:
    """Every path of one run. Create with `RunPaths.for_params` or `RunPaths(run_dir)`."""

    root: Path
    cache: Path

    @classmethod
    def for_params(cls, params: Params, base: str | Path | None = None) -> RunPaths:
        outputs = Path(base) if base is not None else Path(params.outputs_dir)
        cache = Path(params.cache_path) if params.cache_path else outputs / "cache.sqlite"
        return cls(root=outputs / params.run, cache=cache)

    @property
    def params(self) -> Path:
        return self.root / "params.yaml"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    @property
    def annotation(self) -> Path:
        """The published `annotation/` also when running in the staging copy: raters fill its
        sheet in place, so it is never staged nor replaced by a commit."""
        root = self.root.parent if self.root.name == ".staging" else self.root
        return root / "annotation"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def data_file(self, name: str) -> Path:
        """`data/<name>.parquet` (name without extension: corpus, questions, answers, scores...)."""
        return self.data / f"{name}.parquet"

    def ensure(self) -> RunPaths:
        for d in (self.data, self.tables, self.figures, self.notebooks, self.report):
            d.mkdir(parents=True, exist_ok=True)
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        return self


def write_resolved_params(params: Params, paths: RunPaths) -> Path:
    paths.root.mkdir(parents=True, exist_ok=True)
    from cube.config.params import params_to_yaml

    paths.params.write_text(params_to_yaml(params), encoding="utf-8")
    return paths.params
