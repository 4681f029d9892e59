"""Adaptive concurrency: additive increase, multiplicative decrease (AIMD) of the calls in flight.

`AdaptiveLimit` replaces a fixed semaphore in `cube.llm.endpoints.Endpoints` (one per model; the
model's replicas share it). An endpoint that never pushes back
reaches `max_concurrency` within a few windows of calls (slow start from 4, doubling per window, as
TCP does). When the endpoint says it is overloaded (HTTP 429, or a timeout) the limit is cut to 70 %,
never below `min_concurrency`. Every slot taken gets a sequence number (`acquire` returns it) and a
cut records the last number handed out: congestion reported by a call that started before the cut
is ignored (the calls already in flight when it was cut return their own 429s and must not cut it
again), while a call started after it that is still refused cuts again. Each successful
call then adds 1/limit (about +1 per window of calls), up to `max_concurrency`. The retry delay
after a 429 honours the server's Retry-After (`Endpoints._delay`). `peak` is the most calls that
were in flight at once, `limit` the current limit; the pipeline records them per judge.

A released slot is handed straight to the first waiter (FIFO; a future per waiter, set by the
releaser), O(1) per slot. The `asyncio.Condition` this replaced re-checked every waiter already
woken but not yet run on each notify and made each woken waiter re-take its lock: a burst of k
answers cost O(k^2), most of the client's CPU per call at 256 in flight (issue 15).
"""

from __future__ import annotations

import asyncio
from collections import deque

SLOW_START = 4  # the first limit (or min_concurrency if larger); it doubles per window until a 429
DECREASE = 0.7  # the cut: gentler than halving, so the limit oscillates closer to what the endpoint allows


class AdaptiveLimit:
    def __init__(self, min_limit: int, max_limit: int):
        if not 1 <= min_limit <= max_limit:
            raise ValueError(f"concurrency: expected 1 <= min_concurrency <= max_concurrency, got {min_limit}, {max_limit}")
        self.lo, self.hi = min_limit, max_limit
        self.limit = float(min(max_limit, max(min_limit, SLOW_START)))
        self.start = int(self.limit)
        self.pushback = {"http_429": 0, "timeouts": 0}  # congestion signals seen (each, cut or not)
        self.in_flight = 0
        self.peak = 0
        self.lowest = float(max_limit)
        self.cuts = 0
        self._seq = 0  # sequence number of the last slot taken
        self._cut_seq = -1  # `_seq` when the limit was last cut: congestion from calls up to it is ignored
        self._waiters: deque[asyncio.Future[int]] = deque()  # FIFO; each gets its slot's sequence number

    def _take(self) -> int:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self._seq += 1
        return self._seq

    def _wake(self) -> None:
        """Hand free slots to the waiters, first come first served."""
        while self._waiters and self.in_flight < int(self.limit):
            fut = self._waiters.popleft()
            if not fut.done():  # a cancelled waiter is skipped
                fut.set_result(self._take())

    async def acquire(self) -> int:
        """Take a slot (as `async with`), for callers that may give it back before using it.
        Returns the slot's sequence number, to pass to `congested`."""
        if not self._waiters and self.in_flight < int(self.limit):
            return self._take()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # a slot was handed over as we were cancelled: give it back
                self.in_flight -= 1
                self._wake()
            raise

    async def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    async def __aenter__(self) -> AdaptiveLimit:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def success(self) -> None:
        """A call the endpoint answered: +1 per call until the first cut (slow start: the limit
        doubles every window of calls), then additive increase (+1/limit, about +1 per window)."""
        if self.limit < self.hi:
            self.limit = min(float(self.hi), self.limit + (1.0 if not self.cuts else 1.0 / self.limit))
            self._wake()  # a slot more: a waiter need not wait for the next release

    def congested(self, seq: int | None = None, why: str = "http_429") -> None:
        """A 429 (`why="http_429"`) or a timeout (`why="timeouts"`) for the call whose slot had
        sequence number `seq` (default: the last slot taken): counted, and the limit is cut to 70 %,
        unless that call started before the last cut."""
        self.pushback[why] += 1
        seq = self._seq if seq is None else seq
        if seq > self._cut_seq and self.limit > self.lo:
            self.limit = max(float(self.lo), self.limit * DECREASE)
            self.lowest = min(self.lowest, self.limit)
            self.cuts += 1
            self._cut_seq = self._seq

    def summary(self) -> dict[str, float | int]:
        """The limit's course: bounds, start, calls in flight reached, final and lowest limit, cuts,
        and the 429s and timeouts that pushed back."""
        return {"min": self.lo, "max": self.hi, "start": self.start, "peak_in_flight": self.peak,
                "final_limit": int(self.limit), "lowest_limit": int(self.lowest), "cuts": self.cuts, **self.pushback}


def merge_summaries(before: dict[str, float | int], after: dict[str, float | int]) -> dict[str, float | int]:
    """Two batches' `summary()` of one model as one: the first start, the highest peak, the lowest
    limit, the last final limit, cuts and pushback added up."""
    if not before:
        return dict(after)
    out = dict(after)
    out["start"] = before["start"]
    out["peak_in_flight"] = max(before["peak_in_flight"], after["peak_in_flight"])
    out["lowest_limit"] = min(before["lowest_limit"], after["lowest_limit"])
    for k in ("cuts", "http_429", "timeouts"):
        out[k] = before.get(k, 0) + after.get(k, 0)
    return out
