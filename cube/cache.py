"""The persistent LLM call cache: SQLite, one committed row per successful call.

The key of a call (`cache_key`) is the sha256 of the canonical JSON of what identifies it:
model, endpoints, messages, sampling settings, prompt-template version and sample index.
Timeouts, retry and concurrency settings and the API key are left out (they do not change the
answer). Rows never expire, so a paper run can be re-executed offline from its cache.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cube.calls import Request, Response
from cube.config import ModelSpec


class CacheError(ValueError):
    """A cache file that SQLite cannot use."""


def _endpoint_id(url: str) -> str:
    return url.rstrip("/")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def key_payload(spec: ModelSpec, request: Request) -> dict[str, Any]:
    """What identifies a call: model, endpoints, messages, sampling settings, template, sample.

    Timeouts, retry and concurrency settings and the API key are deliberately left out (they do
    not change the answer); the endpoint list is sorted so replicas of one model share a cache.
    """
    return {
        "model": spec.model,
        "endpoints": sorted(_endpoint_id(u) for u in spec.endpoints()),
        "messages": list(request.messages),
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "seed": spec.seed,
        "max_tokens": spec.max_tokens,
        **({"extra_body": spec.extra_body} if spec.extra_body else {}),  # absent when empty: old keys stay valid
        "template_version": request.template_version,
        "sample": request.sample,
    }


def cache_key(spec: ModelSpec, request: Request) -> str:
    """sha256 of the canonical JSON of `key_payload`."""
    return hashlib.sha256(_canonical(key_payload(spec, request)).encode()).hexdigest()


_SCHEMA = """CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, endpoint TEXT NOT NULL, text TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost REAL, latency_s REAL NOT NULL,
    attempts INTEGER NOT NULL, finish_reason TEXT, request TEXT NOT NULL, created_at TEXT NOT NULL)"""


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
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"{self.path}: cannot use as the LLM call cache (SQLite): {exc}") from None

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        cols = "key, model, endpoint, text, input_tokens, output_tokens, cost, latency_s, finish_reason, created_at"
        for i in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
            chunk = keys[i : i + 500]
            cur = self.conn.execute(f"SELECT {cols} FROM calls WHERE key IN ({','.join('?' * len(chunk))})", chunk)
            names = [d[0] for d in cur.description]
            found.update({row[0]: dict(zip(names, row, strict=True)) for row in cur})
        return found

    def put(self, key: str, resp: Response, request_json: str) -> None:
        finish = (resp.detail or {}).get("finish_reason")
        self.conn.execute(
            "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (key, resp.model, resp.endpoint, resp.text, resp.input_tokens, resp.output_tokens, resp.cost,
             resp.latency_s, resp.attempts, finish, request_json, datetime.now(UTC).isoformat(timespec="seconds")),
        )

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


def _cached_response(row: dict[str, Any], key: str) -> Response:
    return Response(
        text=row["text"], input_tokens=row["input_tokens"], output_tokens=row["output_tokens"], cost=row["cost"],
        latency_s=row["latency_s"], cached=True, attempts=0, model=row["model"], endpoint=row["endpoint"],
        detail={"finish_reason": row["finish_reason"], "created_at": row["created_at"], "cache_key": key},
        call_id=key,
    )
