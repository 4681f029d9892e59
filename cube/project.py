"""Where a run's relative paths are read from: the project root, never the working directory.

A notebook opened in JupyterLab runs in `notebooks/`, nbconvert and papermill run where they are
started, `cube run` may be started from any folder: all of them resolve `params/default.yaml`,
`outputs/<run>` and the relative paths inside params (`corpus.path`, `questions.path`, ...)
against the same folder, the project root:

1. `$CUBE_PROJECT_ROOT` when set;
2. else the nearest folder, from the working directory upwards (or from `start`), holding the
   markers `pyproject.toml` and `cube/` (a checkout of this repository);
3. else the working directory (a project of one's own, with cube installed as a package).

Paths written into outputs are shown relative to the root (`display_path`), so a report folder
can be sent to someone else without the local folder layout in it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

ROOT_ENV = "CUBE_PROJECT_ROOT"


def is_project_root(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "cube").is_dir()


def find_marked_root(start: str | Path | None = None) -> Path | None:
    """The nearest folder from `start` (default: the working directory) upwards with the markers."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_project_root(folder):
            return folder
    return None


def project_root(start: str | Path | None = None) -> Path:
    """The folder relative paths are resolved against (see the module docstring)."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return Path(env).resolve()
    return find_marked_root(start) or Path.cwd().resolve()


def resolve(path: str | Path, root: Path | None = None) -> Path:
    """An absolute path: `path` itself when absolute, else under the project root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else (root or project_root()) / p


def display_path(path: str | Path, root: Path | None = None) -> str:
    """`path` relative to the project root when it lies inside it, else its file name only
    (outputs never carry the local folder layout)."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    base = root or project_root()
    try:
        return p.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return p.name


@contextlib.contextmanager
def working_dir(folder: Path) -> Iterator[Path]:
    """Run the block with `folder` as working directory (restored afterwards)."""
    old = Path.cwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(old)
