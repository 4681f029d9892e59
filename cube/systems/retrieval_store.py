"""BM25 work kept on disk between the processes of one run (the plan, then stage 02).

`cube run` computes its plan (`cube.run.plan.build_plan`) in a forked child, and the plan runs
every builtin system's BM25 retrieval to know the judges' requests; stage 02 then built the same
index and retrieved the same questions again in its kernel. At the paper's scale (6,111 items)
that is ~3 s of jieba segmentation and ~2 s of indexing and searching, paid twice. The plan
writes here the token lists (`cached_tokens`) and the search results (`cached_lists` under
`results_key`) it computed; stage 02 reads them back, and builds no index when every search it
makes was stored (`BM25Index` builds its index on first use).

A token entry is keyed by a fingerprint of everything the token lists depend on: every text (in
order), the language, the code that segments them (this package's `retrieval.py` and
`cube/kb/text.py`, whose bytes are hashed), jieba's and bm25s's versions and `FORMAT`. A results
entry adds the doc ids, k1, b, the `k` searched, every query and the region plan (the region each
query names and each region's documents) and numpy's version. A changed text, question, top-n or
setting is a different key, so a stale entry is never found; an entry is also checked on reading
(the full key stored inside it, the number of lists), and anything that does not match or cannot
be read is recomputed (never an error: the store only saves time).

Entries are `.npz` files (no pickle: a vocabulary and int32 ids with offsets), written
atomically; the folder keeps the `KEEP` most recent. Small sets are stored too (the refusal
questions): reading them back spares stage 02 starting jieba (~1.5 s of CPU) at all. The store
is off unless a caller names a folder (`stored_in`, `open_store`): tests and `cube.systems`
used alone write nothing.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 1
KEEP = 16
_folder: Path | None = None


@contextmanager
def stored_in(folder: Path | None) -> Iterator[None]:
    """Within the block, large segmentations are read from and written to `folder` (None: off)."""
    global _folder
    before = _folder
    _folder = Path(folder) if folder is not None else None
    try:
        yield
    finally:
        _folder = before


def open_store(folder: Path | None) -> None:
    """From now on in this process, large segmentations are read from and written to `folder`
    (None: off). A stage's kernel opens its run's store (`cube.run.notebook.open_run`)."""
    global _folder
    _folder = Path(folder) if folder is not None else None


def store_folder(cache_path: Path | str) -> Path:
    """The store of a run whose call cache is `cache_path` (a folder beside it)."""
    return Path(cache_path).parent / "retrieval"


def cached_tokens(
    texts: Sequence[str], lang: str, compute: Callable[[Sequence[str]], list[list[str]]]
) -> list[list[str]]:
    """`compute(texts)`, read from the store when an entry of exactly these texts exists."""
    if _folder is None or not len(texts):
        return compute(texts)
    return cached_lists("tokens", fingerprint(texts, lang), len(texts), lambda: compute(texts))


def cached_lists(
    kind: str, key: str, n: int, compute: Callable[[], list[list[str]]]
) -> list[list[str]]:
    """`compute()` (`n` lists of strings), read from the entry `kind`/`key` when it exists."""
    folder = _folder
    if folder is None or not n:
        return compute()
    path = folder / f"{kind}-{key[:32]}.npz"
    found = _read(path, key, n)
    if found is not None:
        return found
    out = compute()
    _write(folder, path, key, out)
    return out


def results_key(source: tuple, queries: Sequence[str], k: int, plan: Any) -> str:
    """The key of a BM25 search's results: the index's documents (`BM25Index._source`: doc ids,
    texts, language, k1, b), the queries, the `k` searched and the region plan (the region each
    query names and each region's documents), with the segmenting code and library versions."""
    if _folder is None:
        return ""
    doc_ids, texts, lang, k1, b = source
    h = hashlib.blake2b(digest_size=32)
    h.update(f"results\0format={FORMAT}\0k1={k1!r}\0b={b!r}\0k={int(k)}\0".encode())
    h.update(f"numpy={_version('numpy')}\0".encode())
    h.update(fingerprint(texts, lang).encode())
    h.update(fingerprint(doc_ids, "ids").encode())
    h.update(fingerprint(queries, lang).encode())
    if plan is not None:
        h.update(fingerprint(["" if r is None else f"={r}" for r in plan.named], "named").encode())
        for region in sorted(plan.masks):
            h.update(fingerprint([region], "region").encode())
            h.update(np.asarray(plan.masks[region], dtype=bool).tobytes())
    return h.hexdigest()


def fingerprint(texts: Sequence[str], lang: str) -> str:
    """The key of `texts`' token lists: texts, language, segmenting code and library versions."""
    h = hashlib.blake2b(digest_size=32)
    h.update(f"format={FORMAT}\0lang={lang}\0n={len(texts)}\0".encode())
    for name in ("jieba", "bm25s"):
        h.update(f"{name}={_version(name)}\0".encode())
    here = Path(__file__).resolve().parent
    for source in (here / "retrieval.py", here.parent / "kb" / "text.py"):
        h.update(source.read_bytes())
    for text in texts:
        b = str(text).encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


def _read(path: Path, key: str, n: int) -> list[list[str]] | None:
    """The entry's token lists, or None when it is missing, foreign or unreadable."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return None
            vocab = z["vocab"].tolist()
            ids, offsets = z["ids"], z["offsets"]
    except (OSError, KeyError, ValueError):
        return None
    if len(offsets) != n + 1 or int(offsets[-1]) != len(ids):
        return None
    words = [vocab[i] for i in ids.tolist()]
    bounds = offsets.tolist()
    return [words[bounds[i] : bounds[i + 1]] for i in range(n)]


def _write(folder: Path, path: Path, key: str, token_lists: list[list[str]]) -> None:
    """Write the entry atomically (a failure to write only loses the saving)."""
    index: dict[str, int] = {}
    ids = [index.setdefault(t, len(index)) for toks in token_lists for t in toks]
    if any(t.endswith("\0") for t in index):  # numpy's fixed-width strings drop trailing NULs
        return
    offsets = np.cumsum([0] + [len(toks) for toks in token_lists], dtype=np.int64)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                key=np.array(key),
                vocab=np.array(list(index), dtype=str),
                ids=np.asarray(ids, dtype=np.int32),
                offsets=offsets,
            )
        os.replace(tmp, path)
        _prune(folder)
    except OSError:
        return


def _prune(folder: Path) -> None:
    """Keep the `KEEP` most recent entries."""
    entries = sorted(folder.glob("*-*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)
