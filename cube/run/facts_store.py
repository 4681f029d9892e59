"""What each of the package's Python files imports and reads, kept on disk between processes.

A stage's fingerprint covers the `cube` modules its notebook imports, followed through their own
imports, and the data folders they read (`cube.run.stages.modules_read`): every file of the
package is parsed (`ast`) to find them, ~1.1 s of the runner's CPU at each `cube run`, and again
in each fresh kernel of a stage that digests the evaluation's modules (`cube.run.evaluate`:
04-06, ~0.2 s each). A file's facts depend only on its bytes, its name in the package, the
package's folders (a string names a data folder only if that folder exists), the Python that
parses it and the code finding them (`cube/run/stages.py`). The store keeps them in one JSON
file beside the run's call cache (`store_file`): each file's facts under its path in the package
with a digest of its bytes, the whole under a header digesting the rest. `cube run` opens it
(`cube.run.stages.open_facts_store`) and hands it to its kernels (`FACTS_ENV`), so a run's second
and later processes, and later runs, read the facts instead of parsing.

An entry is used only when its file's bytes have the digest it was stored with, under the same
header, and names no data folder outside the package (a fingerprint would digest foreign files);
a store that cannot be read or is not of this format is ignored, and whatever was parsed is
written over it (atomically: a temporary file renamed; one a killed writer left is removed after
`STALE_TMP_S`). Never an error: the store only saves time; without a file (a notebook run alone)
nothing is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

FORMAT = 1
# the environment variable naming the store's file in the run's kernels (`cube run` sets it)
FACTS_ENV = "CUBE_MODULE_FACTS"
# a temporary file older than this is a killed writer's (a write takes milliseconds): removed
STALE_TMP_S = 3600

Facts = tuple[frozenset[str], frozenset[str]]  # (cube modules imported, data folders read)


def store_file(cache_path: Path | str) -> Path:
    """The store of a run whose call cache is `cache_path` (a file beside it)."""
    return Path(cache_path).parent / "module_facts.json"


def digest(data: bytes) -> str:
    """The digest of a file's bytes an entry is stored with."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class FactsStore:
    """The store's entries (read on first use) and the ones parsed since (`flush` writes them)."""

    def __init__(self, file: Path, package: Path) -> None:
        self.file, self._package = Path(file), Path(package)
        self._files: dict[str, list] | None = None
        self._header = ""
        self._dirty = False

    def get(self, name: str, file_digest: str) -> Facts | None:
        """The facts stored for `name` (a path in the package) with this digest; None else."""
        entry = self._entries().get(name)
        if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == file_digest):
            return None
        imports, data = entry[1], entry[2]
        if not all(
            isinstance(x, list) and all(isinstance(s, str) for s in x) for x in (imports, data)
        ):
            return None
        if not all(self._inside(folder) for folder in data):
            return None  # no parse names a folder outside the package: a fingerprint hashes them
        return frozenset(imports), frozenset(data)

    def _inside(self, folder: str) -> bool:
        """A folder below the package's root (what `cube.run.stages` finds a module reading)."""
        if Path(folder).is_absolute():
            return False
        root = self._package.resolve()
        path = (root / folder).resolve()
        return path != root and path.is_relative_to(root)

    def put(self, name: str, file_digest: str, facts: Facts) -> None:
        self._entries()[name] = [file_digest, sorted(facts[0]), sorted(facts[1])]
        self._dirty = True

    def flush(self) -> None:
        """Write the store if an entry was added (atomically; a failure only costs time)."""
        if not self._dirty or self._files is None:
            return
        self._dirty = False
        body = {"format": FORMAT, "header": self._header, "files": self._files}
        with contextlib.suppress(OSError):
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".facts-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(body, f, sort_keys=True)
                os.replace(tmp, self.file)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            _remove_stale_temporaries(self.file.parent)

    def _entries(self) -> dict[str, list]:
        if self._files is None:
            self._header = _header(self._package)
            self._files = {}
            try:
                body = json.loads(self.file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                body = None
            if (
                isinstance(body, dict)
                and body.get("format") == FORMAT
                and body.get("header") == self._header
                and isinstance(body.get("files"), dict)
            ):
                self._files = body["files"]
        return self._files


def _header(package: Path) -> str:
    """What every entry's facts depend on besides its file: the Python parsing it, the code
    finding them and the package's folders."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"format={FORMAT}\0python={sys.version_info[:2]}\0".encode())
    h.update(Path(__file__).with_name("stages.py").read_bytes())
    folders = sorted(
        Path(d).relative_to(package).as_posix()
        for d, _, _ in os.walk(package)
        if "__pycache__" not in Path(d).parts
    )
    h.update("\0".join(folders).encode())
    return h.hexdigest()


def _remove_stale_temporaries(folder: Path) -> None:
    """A killed writer's temporary files (its own prefix only: the folder is the run's outputs)."""
    stale = time.time() - STALE_TMP_S
    for p in folder.glob(".facts-*.tmp"):
        with contextlib.suppress(OSError):
            if p.stat().st_mtime < stale:
                p.unlink()
