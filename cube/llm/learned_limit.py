"""The concurrency limit learned per endpoint, kept beside the call cache for the next run.

Each stage of a run is its own kernel, and each `Endpoints` (one per batch of a model) used to start
its `AdaptiveLimit` at 4 in flight and double per window: 3-10 % of a judging batch's time at 32-64
in flight (issue 41). `LimitStore` keeps what a batch learned (`cube.llm.concurrency.Learned`: the
limit it settled or grew to, the most calls in flight, whether 429s or timeouts pushed back, whether
the rate was flat) in `concurrency_limits.json` in the call cache's folder, keyed by the model and
its endpoints' base URLs (`redact_url`: no user-info, query or fragment, and never the API key or a
header: no secret is stored). A batch reads it before its first call and writes it at its end;
`AdaptiveLimit` turns it into a start (its module docstring: a start, not a cap).

An endpoint never seen starts as before, slow start from 4, not at `max_concurrency`: a server that
queues (llama-cpp-python's) would get every call at once (latency x 64, the later calls timing out
and retried), and a hosted API a burst of 429s at its rate limit (16 by default). That start is
paid once per endpoint and model and cache folder: the next stage of the same run already starts
from what the first learned.

A batch that closed no throughput window and saw no pushback writes nothing (no evidence). A grown
limit (no pushback, no flat rate) does not lower a grown one already stored (a short batch never
reached the ceiling); a congested or flat one replaces it (the endpoint pushed back).

The file is read-changed-written under the folder's lock and replaced atomically
(`cube.config.jsonfile.update_json`): runs sharing a cache never corrupt it nor lose each other's
records. A file that is not the expected JSON, a record of another shape, and a record older than
`MAX_AGE_DAYS` (an endpoint's capacity or rate limit changes) are ignored with one warning each per
process, never an error: the batch starts as for a new endpoint. A store that cannot be written
(a read-only folder) is a warning too.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

from cube.config.jsonfile import update_json
from cube.config.model_spec import redact_url
from cube.llm.concurrency import Learned

log = logging.getLogger("cube.llm")

FILE_NAME = "concurrency_limits.json"
VERSION = 1
MAX_AGE_DAYS = 30

_warned: set[str] = set()  # warnings said once per process (every batch reads the store)


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        log.warning("%s", text)


def store_key(model: str, endpoints: list[str]) -> str:
    """The record's key: the model and its sorted base URLs without user-info, query or
    fragment."""
    return " ".join([model, *sorted(redact_url(e.rstrip("/")) for e in endpoints)])


def _int_problem(record: dict[str, Any], key: str, least: int) -> str | None:
    v = record.get(key)
    if isinstance(v, int) and not isinstance(v, bool) and v >= least:
        return None
    return f"{key}: expected an integer >= {least}, got {v!r}"


def _time_problem(value: Any) -> str | None:
    try:
        updated = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return f"updated: expected an ISO date-time, got {value!r}"
    return None if updated.tzinfo is not None else f"updated: expected a time zone, got {value!r}"


def _check(record: Any) -> str | None:
    """What is wrong with a record (None: nothing)."""
    if not isinstance(record, dict):
        return "expected an object"
    problems = [_int_problem(record, "settled_limit", 1), _int_problem(record, "peak", 0)]
    problems += [
        f"{k}: expected true or false, got {record.get(k)!r}"
        for k in ("congested", "flat")
        if not isinstance(record.get(k), bool)
    ]
    problems.append(_time_problem(record.get("updated")))
    return next((p for p in problems if p is not None), None)


def _age(record: dict[str, Any], now: dt.datetime | None = None) -> dt.timedelta:
    return (now or dt.datetime.now(dt.UTC)) - dt.datetime.fromisoformat(record["updated"])


def _usable(record: Any) -> Learned | None:
    """A stored record as `Learned`; None when malformed or stale (no warning: for merging)."""
    if _check(record) is not None or _age(record) > dt.timedelta(days=MAX_AGE_DAYS):
        return None
    return Learned(record["settled_limit"], record["peak"], record["congested"], record["flat"])


def merged(old: Learned | None, new: Learned) -> Learned:
    """`new` over the stored `old`: a grown limit does not lower a grown one (module docstring)."""
    if old is None or new.congested or new.flat or old.congested or old.flat:
        return new
    return (
        new if new.limit >= old.limit else Learned(old.limit, max(old.peak, new.peak), False, False)
    )


class LimitStore:
    """The learned limits in `path` (`concurrency_limits.json` beside the call cache)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def beside(cls, cache_path: Path | None) -> LimitStore | None:
        """The store in the call cache's folder; None without a cache (nothing persists)."""
        return None if cache_path is None else cls(Path(cache_path).parent / FILE_NAME)

    def _records(self) -> dict[str, Any]:
        """The records in the file; {} (with a warning) when it is missing or not the expected
        JSON."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            _warn_once(
                f"{self.path}: learned concurrency limits unreadable ({type(exc).__name__}: "
                f"{str(exc)[:200]}); ignored, every endpoint starts slow start (the file is "
                "replaced at the end of the next batch)"
            )
            return {}
        if (
            not isinstance(data, dict)
            or data.get("version") != VERSION
            or not isinstance(data.get("limits"), dict)
        ):
            _warn_once(
                f"{self.path}: learned concurrency limits: expected an object with version "
                f'{VERSION} and "limits"; ignored, every endpoint starts slow start'
            )
            return {}
        return data["limits"]

    def read(
        self, model: str, endpoints: list[str], now: dt.datetime | None = None
    ) -> Learned | None:
        """What an earlier batch learned of `model` at `endpoints`; None when nothing usable is
        stored (missing, malformed or older than `MAX_AGE_DAYS`: a warning says which)."""
        key = store_key(model, endpoints)
        record = self._records().get(key)
        if record is None:
            return None
        problem = _check(record)
        if problem is not None:
            _warn_once(
                f"{self.path}: learned concurrency limit of {key!r}: {problem}; ignored, the "
                "endpoint starts slow start"
            )
            return None
        age = _age(record, now)
        if age > dt.timedelta(days=MAX_AGE_DAYS):
            _warn_once(
                f"{self.path}: learned concurrency limit of {key!r} is {age.days} days old (more "
                f"than {MAX_AGE_DAYS}); ignored, the endpoint starts slow start"
            )
            return None
        return Learned(
            limit=record["settled_limit"],
            peak=record["peak"],
            congested=record["congested"],
            flat=record["flat"],
        )

    def write(self, model: str, endpoints: list[str], learned: Learned | None) -> None:
        """Store what a batch learned (nothing when `learned` is None); a failure to write is a
        warning, never an error (the calls are done and cached)."""
        if learned is None:
            return
        key = store_key(model, endpoints)

        def change(data: dict[str, Any]) -> dict[str, Any]:
            limits = data.get("limits") if data.get("version") == VERSION else None
            limits = dict(limits) if isinstance(limits, dict) else {}
            old = _usable(limits.get(key))
            new = merged(old, learned)
            # a limit kept from an earlier batch keeps its date: a shorter batch is no evidence
            # for it, so it still ages out after MAX_AGE_DAYS (review of issue 41)
            kept = old is not None and learned.limit < old.limit and new.limit == old.limit
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            limits[key] = {
                "model": model,
                "endpoints": sorted(redact_url(e.rstrip("/")) for e in endpoints),
                "settled_limit": new.limit,
                "peak": new.peak,
                "congested": new.congested,
                "flat": new.flat,
                "updated": limits[key]["updated"] if kept else now,
            }
            return {"version": VERSION, "limits": limits}

        try:
            update_json(self.path, change)
        except OSError as exc:
            _warn_once(
                f"{self.path}: learned concurrency limit not written ({type(exc).__name__}: "
                f"{str(exc)[:200]}); the next run starts slow start"
            )
