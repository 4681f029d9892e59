"""Loading a python system's functions: `package.module:function` or `path/to/file.py:function`.

A module is imported with the project root (or the given folder) first on `sys.path`; a .py file is
loaded once under a name of its own (`_file_module`), its folder first on `sys.path` as for a
script. `source_digest` hashes the file defining a function (the call cache's key: an edit calls it
again), `source_files` finds those files without running them (the stage fingerprints), and
`load_problems` says why a function cannot be loaded (`cube validate`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cube.config.project import project_root, resolve
from cube.config.sections import PythonSystem, split_target


class PythonSystemError(ValueError):
    """A python system's function that cannot be loaded (the message names it and why)."""


def _on_path(folder: Path) -> None:
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def _file_module(path: Path) -> Any:
    """The module of a .py file, loaded once under a name of its own (a hash of its path), so that
    two files of one name (`v1/rag.py`, `v2/rag.py`: two versions in one run) stay apart;
    importlib's recipe for importing a source file."""
    name = "cube_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # registered before it runs: a dataclass in it looks its module up there (not an alias)
    sys.modules[name] = module
    _on_path(path.parent)  # its sibling modules import as they would from a script
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@functools.lru_cache(maxsize=64)
def _load(target: str, root: str) -> Callable[..., Any]:
    where, name, is_file = split_target(target)
    try:
        if is_file:
            path = resolve(where, Path(root))
            if not path.is_file():
                raise PythonSystemError(
                    f"{target!r}: file {path} not found"
                    + ("" if Path(where).is_absolute() else f" (read relative to {root})")
                )
            obj: Any = _file_module(path)
        else:
            _on_path(Path(root))
            obj = importlib.import_module(where)
    except PythonSystemError:
        raise
    except Exception as exc:  # the user's module failed to import: its own error, named
        raise PythonSystemError(
            f"{target!r}: importing {where!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for part in name.split("."):
        if not hasattr(obj, part):
            raise PythonSystemError(f"{target!r}: {where!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise PythonSystemError(f"{target!r}: {name!r} is a {type(obj).__name__}, not a function")
    return obj


def load_callable(target: str, base_dir: str | Path | None = None) -> Callable[..., Any]:
    """The function `target` names (`package.module:function` or `path/to/file.py:function`),
    relative paths and modules found from `base_dir` (default: the project root).

    Raises:
        PythonSystemError: the file, module or attribute is missing, or importing it failed.
    """
    root = Path(base_dir).resolve() if base_dir is not None else project_root()
    return _load(target, str(root))


def _unwrapped(fn: Any) -> Any:
    """The function whose source identifies `fn`: through decorators and partials; the class of a
    callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = inspect.unwrap(fn)
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isclass(fn):
        return fn
    return type(fn)


def source_digest(fn: Any) -> str:
    """sha256 of the file defining `fn` (its helpers in that file count too), else of its own
    source, else of its qualified name (no source: only `version` tells an edit)."""
    target = _unwrapped(fn)
    try:
        file = inspect.getsourcefile(target)
    except TypeError:
        file = None
    if file and Path(file).is_file():
        return hashlib.sha256(Path(file).read_bytes()).hexdigest()
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):
        text = f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', target)}"
    return hashlib.sha256(text.encode()).hexdigest()


def source_files(spec: PythonSystem, base_dir: str | Path | None = None) -> list[str]:
    """The files defining a python system's functions, found without running them (for the stage
    fingerprints: an edit re-runs the answers' stage); one not found is left to the run to
    report."""
    return target_files(spec.callable, spec.bounds, base_dir=base_dir)


def target_files(*targets: str | None, base_dir: str | Path | None = None) -> list[str]:
    """The files of `module:function` / `path.py:function` targets, found without importing
    the module (a user kind's `sources`, docs/how-to/system-kind.md); None and one not found
    are skipped."""
    root = Path(base_dir).resolve() if base_dir is not None else project_root()
    out = []
    for target in targets:
        if target is None:
            continue
        where, _, is_file = split_target(target)
        if is_file:
            out.append(str(resolve(where, root)))
            continue
        _on_path(root)
        try:  # imports the parent packages only, not the module
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin and Path(found.origin).is_file():
            out.append(found.origin)
    return out


def load_problems(spec: PythonSystem, base_dir: str | Path | None = None) -> list[str]:
    """Why a python system's functions cannot be loaded, one line each (`cube validate`)."""
    problems = []
    for key in ("callable", "bounds"):
        target = getattr(spec, key)
        if target is None:
            continue
        try:
            load_callable(target, base_dir)
        except PythonSystemError as err:
            problems.append(f"systems[{spec.name}].{key}: {err}")
    return problems
