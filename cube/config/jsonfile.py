"""Locked read-change-write of a small JSON record file that several processes update at once.

Notebooks run alone in parallel into one run folder (a papermill batch of 04, 05 and 06) each add
their record to `notebooks/.ran_alone.json` and their data files' entries to
`data/.provenance.json`. Each update holds an exclusive flock on the file's folder for the read,
change and write (the kernel drops it when the process dies, and it adds no file to the run folder),
and writes through a temp file of its own, so no writer replaces another's temp file or loses
another's record.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock on `folder` itself for the block."""
    with _exclusive(os.open(folder, os.O_RDONLY)):
        yield


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (created empty if missing) for the block: what one process
    computes for a key (`path` named after it), another waits for instead of computing it too."""
    with _exclusive(os.open(path, os.O_RDWR | os.O_CREAT, 0o666)):
        yield


@contextlib.contextmanager
def _exclusive(fd: int) -> Iterator[None]:
    """An exclusive flock on the open file `fd` for the block; `fd` is closed after it."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def read_json_dict(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; {} when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` to `path` through a temp file of this writer's own in the same folder."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666
    )  # the umask applies, as for write_text
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, ensure_ascii=False, default=str)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def update_json(path: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Replace the JSON object in `path` by `change(current)` under the folder's lock (current: {}
    when the file is missing or unreadable); an empty result removes the file, an unchanged one
    writes nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(path.parent):
        current = read_json_dict(path)
        new = change(dict(current))
        if new == current and path.exists():
            return
        if new:
            write_json_atomic(path, new)
        else:
            path.unlink(missing_ok=True)
