"""The persistent LLM call cache: SQLite, one committed row per successful call.

The key of a call (`cache_key`) is the sha256 of the canonical JSON of what identifies it:
model, endpoints, messages, sampling settings, prompt-template version and sample index.
Timeouts, retry and concurrency settings and the API key are left out (they do not change the
answer). Rows never expire, so a paper run can be re-executed offline from its cache.

In-flight claims (`claims` table): a process claims a call key before sending it; another
process sharing the cache that finds a live claim waits for the answer instead of paying for
the same call again, and takes the call over when the claim's lease runs out (renewed while
its owner is working) or its owner process on this host is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cube.config.model_spec import ModelSpec
from cube.llm.calls import Request, Response

_HOST = socket.gethostname()


def _alive(pid: int) -> bool:
    """Whether process `pid` of this host still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _live_claim(row: Any, owner: str, now: float) -> bool:
    """A claim (owner, host, pid, expires) of someone else that still counts: its lease runs and
    its process, when on this host, exists."""
    other, host, pid, expires = row
    return other != owner and expires > now and not (host == _HOST and not _alive(pid))


class CacheError(ValueError):
    """A cache file that SQLite cannot use."""


def endpoint_id(url: str) -> str:
    return url.rstrip("/")


# `json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))`, the encoder built
# once: json.dumps builds a new one per call with these options (an offline judge's call id is one
# canonical JSON text: 293k of them at the paper's scale). The same text, so the same cache keys.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_json(obj: Any) -> str:
    """The canonical JSON text of `obj`: sorted keys, no blanks, non-ASCII kept (what call ids and
    cache keys hash)."""
    return _CANONICAL.encode(obj)


def key_payload(spec: ModelSpec, request: Request) -> dict[str, Any]:
    """What identifies a call: model, endpoints, messages, sampling settings, template, sample.

    Timeouts, retry and concurrency settings and the API key are deliberately left out (they do
    not change the answer); the endpoint list is sorted so replicas of one model share a cache.
    """
    return {
        "model": spec.model,
        "endpoints": sorted(endpoint_id(u) for u in spec.endpoints()),
        "messages": list(request.messages),
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "seed": spec.seed,
        "max_tokens": spec.max_tokens,
        **(
            {"extra_body": spec.extra_body} if spec.extra_body else {}
        ),  # absent when empty: old keys stay valid
        "template_version": request.template_version,
        "sample": request.sample,
        # absent unless a schema is asked for and may be sent: old keys stay valid
        **(
            {"structured_output": spec.structured_output, "schema": request.schema}
            if request.schema is not None and spec.structured_output != "off"
            else {}
        ),
    }


def cache_key(spec: ModelSpec, request: Request) -> str:
    """sha256 of the canonical JSON of `key_payload`."""
    return hashlib.sha256(canonical_json(key_payload(spec, request)).encode()).hexdigest()


_CLAIMS = (
    "CREATE TABLE IF NOT EXISTS claims (\n"
    "    key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, "
    "expires REAL NOT NULL)"
)
CLAIM_LEASE_S = 30.0  # a claim not renewed for this long is taken over (its owner is gone or stuck)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS calls (\n"
    "    key TEXT PRIMARY KEY, model TEXT NOT NULL, endpoint TEXT NOT NULL, text TEXT NOT NULL,\n"
    "    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost REAL, "
    "latency_s REAL NOT NULL,\n"
    "    attempts INTEGER NOT NULL, finish_reason TEXT, request TEXT NOT NULL, "
    "created_at TEXT NOT NULL,\n"
    "    cached_input_tokens INTEGER NOT NULL DEFAULT 0)"
)


class CallCache:
    """The persistent call cache: one SQLite row per successful call, committed on arrival.

    WAL journal with synchronous=NORMAL: a commit is cheap (no fsync per row) yet survives a
    killed process, so a run killed at any point loses only the calls in flight. Rows never
    expire; errors are never stored; neither is any key or header.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # isolation_level=None: autocommit, i.e. one committed transaction per row.
            self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute(_SCHEMA)
            self.conn.execute(_CLAIMS)
            if "cached_input_tokens" not in {
                r[1] for r in self.conn.execute("PRAGMA table_info(calls)")
            }:
                # a cache written before the provider's cached-token counts were kept: its calls
                # count 0
                try:
                    self.conn.execute(
                        "ALTER TABLE calls ADD COLUMN cached_input_tokens INTEGER NOT NULL "
                        "DEFAULT 0"
                    )
                except (
                    sqlite3.OperationalError
                ) as exc:  # another process opening it upgraded it first: done
                    if "duplicate column name" not in str(exc):
                        raise
        except sqlite3.DatabaseError as exc:
            raise CacheError(
                f"{self.path}: cannot use as the LLM call cache (SQLite): {exc}"
            ) from None

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        cols = (
            "key, model, endpoint, text, input_tokens, output_tokens, cost, latency_s, "
            "finish_reason, created_at, cached_input_tokens"
        )
        for i in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
            chunk = keys[i : i + 500]
            cur = self.conn.execute(
                f"SELECT {cols} FROM calls WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )
            names = [d[0] for d in cur.description]
            found.update({row[0]: dict(zip(names, row, strict=True)) for row in cur})
        return found

    def put(self, key: str, resp: Response, request_json: str) -> None:
        """Store a successful call (one committed row; a stored answer outranks any claim)."""
        finish = (resp.detail or {}).get("finish_reason")
        self.conn.execute(
            "INSERT OR REPLACE INTO calls (key, model, endpoint, text, input_tokens, "
            "output_tokens, cost, latency_s, attempts, finish_reason, request, created_at, "
            "cached_input_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                key,
                resp.model,
                resp.endpoint,
                resp.text,
                resp.input_tokens,
                resp.output_tokens,
                resp.cost,
                resp.latency_s,
                resp.attempts,
                finish,
                request_json,
                datetime.now(UTC).isoformat(timespec="seconds"),
                resp.cached_input_tokens,
            ),
        )

    # -- in-flight claims: processes sharing this cache send each call once ----------------
    def claim(self, key: str, owner: str, lease_s: float = CLAIM_LEASE_S) -> str:
        """Claim `key` before sending it: 'done' (its answer is stored), 'mine' (send it), or
        'theirs' (another live process is sending it: wait and ask again).

        A claim whose lease ran out, or whose process on this host is gone (killed), is taken
        over. One SQLite write transaction, so two processes never both get 'mine'.
        """
        now = time.time()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if self.conn.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone():
                return "done"
            row = self.conn.execute(
                "SELECT owner, host, pid, expires FROM claims WHERE key = ?", (key,)
            ).fetchone()
            if row is not None and _live_claim(row, owner, now):
                return "theirs"
            self.conn.execute(
                "INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?)",
                (key, owner, _HOST, os.getpid(), now + lease_s),
            )
            return "mine"
        finally:
            self.conn.execute("COMMIT")

    def claim_many(
        self, keys: list[str], owner: str, lease_s: float = CLAIM_LEASE_S
    ) -> dict[str, str]:
        """`claim` for many keys in one transaction: key -> 'done' | 'mine' | 'theirs'."""
        now, out = time.time(), {}
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                done = {
                    k
                    for (k,) in self.conn.execute(
                        f"SELECT key FROM calls WHERE key IN ({marks})", chunk
                    )
                }
                held = {
                    k: row
                    for k, *row in self.conn.execute(
                        f"SELECT key, owner, host, pid, expires FROM claims WHERE key IN ({marks})",
                        chunk,
                    )
                }
                for k in chunk:
                    if k in done:
                        out[k] = "done"
                    elif k in held and _live_claim(held[k], owner, now):
                        out[k] = "theirs"
                    else:
                        out[k] = "mine"
                mine = [
                    (k, owner, _HOST, os.getpid(), now + lease_s) for k in chunk if out[k] == "mine"
                ]
                self.conn.executemany("INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?)", mine)
            return out
        finally:
            self.conn.execute("COMMIT")

    def peek(self, key: str, owner: str) -> str:
        """What `claim` would say, without writing: 'done', 'theirs' or 'free' (a cheap poll)."""
        if self.conn.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone():
            return "done"
        row = self.conn.execute(
            "SELECT owner, host, pid, expires FROM claims WHERE key = ?", (key,)
        ).fetchone()
        if row is not None and _live_claim(row, owner, time.time()):
            return "theirs"
        return "free"

    def renew(self, owner: str, lease_s: float = CLAIM_LEASE_S) -> None:
        """Extend the lease of every claim of `owner` (called while its calls are in flight)."""
        self.conn.execute(
            "UPDATE claims SET expires = ? WHERE owner = ?", (time.time() + lease_s, owner)
        )

    def release(self, owner: str, keys: Iterable[str] | None = None) -> None:
        """Drop `owner`'s claims on `keys` (all of them when None): answered, failed or
        abandoned calls that others may now send."""
        if keys is None:
            self.conn.execute("DELETE FROM claims WHERE owner = ?", (owner,))
            return
        keys = list(keys)
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            self.conn.execute(
                f"DELETE FROM claims WHERE owner = ? AND key IN ({','.join('?' * len(chunk))})",
                [owner, *chunk],
            )

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


def cached_response(row: dict[str, Any], key: str) -> Response:
    return Response(
        text=row["text"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cost=row["cost"],
        cached_input_tokens=int(row.get("cached_input_tokens") or 0),
        latency_s=row["latency_s"],
        cached=True,
        attempts=0,
        model=row["model"],
        endpoint=row["endpoint"],
        detail={
            "finish_reason": row["finish_reason"],
            "created_at": row["created_at"],
            "cache_key": key,
        },
        call_id=key,
    )
