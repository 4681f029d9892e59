"""Where relative paths are read from: the project root, or the params file's folder.

A notebook opened in JupyterLab runs in `notebooks/`, nbconvert and papermill run where they are
started, `cube run` may be started from any folder: all of them resolve a params file given by a
relative path (`params/default.yaml`) and `outputs/<run>` against the same folder, the project root:

1. `$CUBE_PROJECT_ROOT` when set;
2. else the nearest folder, from the working directory upwards (or from `start`), holding the
   markers `pyproject.toml` and `cube/` (a checkout of this repository);
3. else the working directory (a project of one's own, with cube installed as a package).

The relative paths INSIDE a params file (`corpus.path`, `questions.path`, ...) are read from that
file's folder (`paths_from_file`, applied when a params file is loaded), so a params file beside
its data works from anywhere; a file a run records (`outputs/<run>/params.yaml`, a sweep's
combinations) writes them relative to its own folder (`paths_relative_to`). Params built from a
mapping (`parse_params`) keep their relative paths, read from the project root by the stages.

Paths written into outputs are shown relative to the root (`display_path`), so a report folder
can be sent to someone else without the local folder layout in it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# The params keys holding a local path: by their last name (outputs_dir, cache_path, corpus.path,
# questions.path, systems[].path, dimensions[].prompt_file, human.ratings) or, for a name other
# sections use for values, by their dotted key (human.key); other strings are values, never
# rewritten.
PATH_KEYS = (
    "outputs_dir",
    "cache_path",
    "path",
    "prompt_file",
    "ratings",
    "human.key",
    "baseline.run",
)


def _is_local_path(value: str) -> bool:
    return value.startswith("/") or bool(re.match(r"[A-Za-z]:[\\/]", value))


def is_path_key(where: str) -> bool:
    """Whether the dotted key `where` (`systems[0].path`, `human.key`) names a local path
    (`PATH_KEYS`)."""
    plain = re.sub(r"\[[^\]]*\]", "", where)
    return any(
        plain.rsplit(".", 1)[-1] == k if "." not in k else plain == k or plain.endswith("." + k)
        for k in PATH_KEYS
    )


# Where a params file holds a local path, by dotted key (list items as []): read from the params
# file's folder (`paths_from_file`). Named one by one, not by last name as `PATH_KEYS`: a user's own
# mapping (an HTTP system's `body`, `headers`) may hold a key `path` whose value is no file.
LOCAL_PATH_KEYS = (
    "outputs_dir",
    "cache_path",
    "corpus.path",
    "questions.path",
    "systems.path",
    "dimensions.path",
    "dimensions.prompt_file",
    "human.ratings",
    "human.key",
    "baseline.run",
)
# A system's Python function given as a file, `path/to/file.py:function` (kind python): the file
# part is a local path too; `package.module:function` is a module name, never rewritten.
CALLABLE_KEYS = ("callable", "bounds")


def callable_file(target: str) -> tuple[str, str] | None:
    """(file, ':function') of a `path/to/file.py:function` target, None for
    `package.module:function` (a module name)."""
    file, sep, name = target.rpartition(":")
    is_file = file.endswith(".py") or "/" in file or "\\" in file
    return (file, sep + name) if sep and file and is_file else None


def _callable_file(where: str, value: str) -> tuple[str, str] | None:
    """`callable_file` of a `systems[].callable` / `systems[].bounds` value, else None."""
    plain = re.sub(r"\[[^\]]*\]", "", where)
    return callable_file(value) if plain in tuple(f"systems.{k}" for k in CALLABLE_KEYS) else None


def map_local_paths(value: Any, change: Any, where: str = "") -> Any:
    """A copy of a JSON-like params value with `change(path, where)` applied to every local path it
    holds (at `LOCAL_PATH_KEYS`, and the file part of a Python system's `callable` / `bounds`),
    `where` its dotted key with list items by name when they have one
    (`systems[mine].path`)."""
    if isinstance(value, dict):
        return {
            k: map_local_paths(v, change, f"{where}.{k}" if where else str(k))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [map_local_paths(v, change, f"{where}[{_label(v, i)}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or not value:
        return value
    if re.sub(r"\[[^\]]*\]", "", where) in LOCAL_PATH_KEYS:
        return change(value, where)
    split = _callable_file(where, value)
    return change(split[0], where) + split[1] if split else value


def _label(item: Any, index: int) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) and name and "]" not in name else str(index)


def local_paths(value: Any) -> dict[str, str]:
    """Every local path of a JSON-like params value, by its dotted key (`map_local_paths`)."""
    found: dict[str, str] = {}

    def keep(path: str, where: str) -> str:
        found[where] = path
        return path

    map_local_paths(value, keep)
    return found


def is_relative_local(path: str) -> bool:
    """A path read relative to some folder: neither absolute nor `~/...`."""
    return not (_is_local_path(path) or path.startswith("~"))


def paths_from_file(data: Any, params_file: str | Path, root: Path | None = None) -> Any:
    """The raw params of a file with every relative local path read from the file's folder (made
    absolute), and `outputs_dir`, when not given, set to its default: `outputs/` in the project
    root when the file lies inside the project, else `outputs/` beside the file
    (docs/reference/params.md, its "Paths" paragraph). A mapping only; anything else is returned
    as it is (the params check names it)."""
    if not isinstance(data, dict):
        return data
    folder = Path(params_file).expanduser().resolve().parent
    out = map_local_paths(
        data, lambda p, _: os.path.normpath(folder / p) if is_relative_local(p) else p
    )
    if out.get("outputs_dir") is None:
        base = (root or project_root()).resolve()
        out["outputs_dir"] = str((base if folder.is_relative_to(base) else folder) / "outputs")
    return out


def paths_relative_to(data: Any, folder: Path, root: Path | None = None) -> Any:
    """Dumped params as a file in `folder` (a run folder, `<outputs>/<run>/`) records them, so that
    read back by `paths_from_file` they name the same files: a local path relative to `folder` when
    the path and `folder` lie in one of the project root or the folder holding the outputs folder
    (relative paths of the dump are the project root's); every other value as it is, for
    `shared_values` to show (no local folder layout above those folders is written)."""
    base = (root or project_root()).resolve()
    folder = Path(folder).resolve()
    home = Path.home().resolve()
    anchors = [
        a
        for a in (base, folder.parent.parent)
        if folder.is_relative_to(a) and (a == home or not home.is_relative_to(a))
    ]  # never a folder above the home folder: a path from there would name the user

    def rebase(path: str, where: str) -> str:
        if path.startswith("~"):
            return path
        full = Path(os.path.normpath(Path(path) if _is_local_path(path) else base / path))
        if not any(full.is_relative_to(a) for a in anchors):
            return path
        return Path(os.path.relpath(full, folder)).as_posix()

    return map_local_paths(data, rebase)


def path_identity(path: str) -> str:
    """An absolute path outside the project as records compare it without publishing it: its name
    and a short hash of the whole path (two files of one name in other folders differ)."""
    return (
        f"{Path(path).name}#{hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:12]}"
    )


def shared_values(
    value: Any, root: Path | None = None, where: str = "", identify: bool = False
) -> tuple[Any, list[str]]:
    """A copy of a JSON-like value (the dumped params) with every absolute local path (`PATH_KEYS`)
    shown by `display_path` (relative to the project root), else in the home folder as `~/...`
    (`home_path`), else by its last name (or with `identify` its `path_identity`), and the dotted
    keys of the paths outside the project that were cut (for a note beside them)."""
    if isinstance(value, dict):
        return _shared_mapping(value, root, where, identify)
    if isinstance(value, list):
        items = [shared_values(v, root, f"{where}[{i}]", identify) for i, v in enumerate(value)]
        return [v for v, _ in items], [c for _, more in items for c in more]
    if isinstance(value, str) and _is_local_path(value) and is_path_key(where):
        return _shared_path(value, root, where, identify)
    return value, []


def _shared_mapping(
    value: dict[str, Any], root: Path | None, where: str, identify: bool
) -> tuple[dict[str, Any], list[str]]:
    """`shared_values` of a mapping, key by key."""
    out, cut = {}, []
    for k, v in value.items():
        out[k], more = shared_values(v, root, f"{where}.{k}" if where else str(k), identify)
        cut += more
    return out, cut


def _shared_path(
    value: str, root: Path | None, where: str, identify: bool
) -> tuple[str, list[str]]:
    """One absolute local path as `shared_values` shows it, and its key when it was cut."""
    if Path(value).resolve().is_relative_to((root or project_root()).resolve()):
        return display_path(value, root), []
    if (home := home_path(value)) is not None:  # re-runnable here, and no user name published
        return home, []
    return (path_identity(value) if identify else display_path(value, root)), [where]


def home_path(path: str | Path) -> str | None:
    """A path inside the home folder as `~/...` (every loader expands `~`), else None. The recorded
    params of a run (`outputs/<run>/params.yaml`) keep a file outside the project but in the home
    folder this way, so the recorded file runs again as recorded without publishing the user
    name."""
    home = Path.home().resolve()
    p = Path(path).resolve()
    if len(home.parts) < 2 or not p.is_relative_to(home) or p == home:
        return None
    return "~/" + p.relative_to(home).as_posix()


def scrub_local_paths(text: str, root: Path | None = None) -> str:
    """A message with the project root's absolute path removed (paths become relative to it) and the
    home folder shown as `~`, for a published page (e.g. an error naming a missing file)."""
    base = str((root or project_root()).resolve())
    text = text.replace(base + os.sep, "").replace(base, ".")
    home = str(Path.home())
    return text.replace(home, "~") if len(home) > 1 else text


# ---------------------------------------------------------------------- the notebooks folder
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"


def default_notebooks_dir() -> Path:
    """`notebooks/` of the project root when present, else the repository's beside the package."""
    here = project_root() / "notebooks"
    return here if here.is_dir() else Path(__file__).resolve().parents[2] / "notebooks"


def list_notebooks(notebooks_dir: Path) -> list[Path]:
    found = sorted(Path(notebooks_dir).glob(NOTEBOOK_GLOB))
    if not found:
        raise FileNotFoundError(f"{notebooks_dir}: no notebooks matching {NOTEBOOK_GLOB}")
    return found
