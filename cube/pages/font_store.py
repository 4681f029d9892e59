"""The report's web-font subsets kept on disk between runs (`cube.pages.webfont`).

Publishing subsets the bundled 19 MB CJK collection to the characters the report's pages use,
then each page's own characters from that subset (fontTools: every glyph's charstring decompiled,
its hints dropped, its bounds computed and the CFF table compiled again): ~2.8 s of the runner's
CPU at the paper's scale (6,111 items, 9 subsets), paid again by every run and `cube report`
although the same characters give the same bytes (the font's timestamp is kept,
`webfont.subset`). The store keeps each subset made under a key of everything its bytes depend on:
the source font's bytes (hashed; the 19 MB file ~40 ms), its face number, the characters, whether
the source's hints are looked for, fontTools' and zlib's versions (the WOFF's tables are zlib's
output), the bytes of `cube/pages/webfont.py` (the subsetter's options) and `FORMAT`. Changed
characters, another font, fontTools or zlib is a different key, so a stale entry is never found.

An entry is `<key>.woff`: a digest of the font's bytes, then the bytes. An entry whose digest does
not match (truncated, damaged, written by something else) or that cannot be read is made again and
written over (never an error: the store only saves time); entries are written atomically
(a temporary file renamed; one a killed writer left is removed after `STALE_TMP_S`), and the
folder keeps the `KEEP` most recently used. The store is a
folder beside the run's call cache (`store_folder`), like the BM25 store
(`cube.systems.retrieval_store`); without a folder nothing is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
import zlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

FORMAT = 1
KEEP = 64
# a temporary file older than this is a killed writer's (a write takes milliseconds): removed
STALE_TMP_S = 3600
_DIGEST = 32  # bytes of the blake2b digest heading an entry


def store_folder(cache_path: Path | str) -> Path:
    """The store of a run whose call cache is `cache_path` (a folder beside it)."""
    return Path(cache_path).parent / "fonts"


def font_key(font: Path | bytes, font_number: int, characters: str, hinted: bool) -> str:
    """The key of a subset: everything its bytes depend on (see the module docstring)."""
    h = hashlib.blake2b(digest_size=32)
    h.update(f"format={FORMAT}\0fonttools={_version('fonttools')}\0".encode())
    # the WOFF's tables are compressed by the zlib Python runs with: another may give other bytes
    h.update(f"zlib={zlib.ZLIB_RUNTIME_VERSION}\0".encode())
    h.update(Path(__file__).with_name("webfont.py").read_bytes())
    h.update(f"\0face={int(font_number)}\0hinted={bool(hinted)}\0".encode())
    h.update(_file_digest(font) if isinstance(font, Path) else hashlib.blake2b(font).digest())
    h.update(characters.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def cached_subset(folder: Path | None, key: str, make: Callable[[], bytes]) -> bytes:
    """`make()`, read from the entry `key` of `folder` when a sound one exists (else made and
    written there); `folder` None: made, nothing kept."""
    if folder is None:
        return make()
    path = folder / f"{key}.woff"
    found = _read(path)
    if found is not None:
        with contextlib.suppress(OSError):  # most recently used: kept longest
            os.utime(path)
        return found
    data = make()
    _write(folder, path, data)
    return data


def _read(path: Path) -> bytes | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    head, data = raw[:_DIGEST], raw[_DIGEST:]
    if len(head) != _DIGEST or hashlib.blake2b(data, digest_size=_DIGEST).digest() != head:
        return None  # damaged or foreign: made again
    return data


def _write(folder: Path, path: Path, data: bytes) -> None:
    """Write the entry atomically and keep the `KEEP` most recent; a failure only costs time."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".font-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.blake2b(data, digest_size=_DIGEST).digest())
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _prune(folder)
    except OSError:
        pass


def _prune(folder: Path) -> None:
    """Keep the `KEEP` most recent entries; remove a killed writer's old temporary files."""
    stale = time.time() - STALE_TMP_S
    for p in folder.glob(".font-*.tmp"):
        with contextlib.suppress(OSError):
            if p.stat().st_mtime < stale:
                p.unlink()
    entries = []
    for p in folder.glob("*.woff"):
        with contextlib.suppress(OSError):
            entries.append((p.stat().st_mtime_ns, p))
    for _, p in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            p.unlink()


def _file_digest(path: Path) -> bytes:
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"
