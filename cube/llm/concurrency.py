"""Adaptive concurrency: additive increase, multiplicative decrease (AIMD) of the calls in flight.

`AdaptiveLimit` replaces a fixed semaphore in `cube.llm.endpoints.Endpoints` (one per model; the
model's replicas share it). An endpoint that never pushes back reaches `max_concurrency` within a
few windows of calls (slow start from 4, doubling per window, as TCP does). When the endpoint says
it is overloaded (HTTP 429, or a timeout) the limit is cut to 70 %, never below `min_concurrency`.
Every slot taken gets a sequence number (`acquire` returns it) and a cut records the last number
handed out: congestion reported by a call that started before the cut is ignored (the calls already
in flight when it was cut return their own 429s and must not cut it again), while a call started
after it that is still refused cuts again. Each successful call then adds 1/limit (about +1 per
window of calls), up to `max_concurrency`. The retry delay after a 429 honours the server's
Retry-After (`cube.llm.retry.backoff_delay`). `peak` is the most calls that were in flight at
once, `limit` the current limit; the pipeline records them per judge.

A server that serves one request at a time (llama-cpp-python's, issue 22) never pushes back: it
queues, so latency grows with the calls in flight while throughput stays flat. The limit therefore
also watches throughput (Little's law): each window of `max(WINDOW, limit)` answered calls gives the
time-weighted mean of the calls in flight (its level) and the answered calls per second (its rate).
Between two windows whose levels differ by a ratio of at least `LEVEL_STEP`, the elasticity g =
ln(rate ratio) / ln(level ratio) is ~1 on a server that runs calls in parallel and ~0 on one that
queues them. One window rising with g < `FLAT` may be noise (it was in 29-51 % of batches on a
parallel server with log-normal service times): slow start doubles once more, and only a second flat
judgement in a row steps back. Then the limit drops straight to `min_concurrency` for one window
(the widest level ratio, the least noisy comparison): if the rate there is as high (g < `FLAT`) the
server queues and the limit settles at the floor, else the flat steps were noise and slow start goes
on from the limit before the drop (also what `settled_limit` hands a next batch while that window is
unfinished). Settled, its windows pool into one baseline, and every `HOLD` windows it probes twice
the limit for a window twice as long, kept (settled there) only if the rate rose with it (g >=
`FLAT`). The detector's error rate on known truth: `benchmarks/adaptive_concurrency.py --trials`. A
window opens once the calls in flight fit under the limit (after a step down they drain first). A
429 or timeout cuts as above in every mode, and from the first cut on the congestion signals alone
drive the limit (additive increase, cuts; no flat steps, no probes): a rate limiter also keeps the
rate flat, and probing twice the limit there only runs into it (share of the rate limit 0.78 against
0.95 with them).

An earlier run's limit (`learned`, read by `cube.llm.learned_limit` from the store beside the call
cache, keyed by the endpoints and the model) is a start, not a cap. One that settled for a flat rate
starts settled there, as `settled` does. Any other starts slow start at half of it: the first
window at half (opened with the batch, not at its first answer) and the second at the learned limit
give the first comparison of two levels, so a server that now queues is still found (two flat
judgements, then the floor), and a 429 or timeout cuts as above. Starting at the learned limit
itself would leave no lower level to compare with when it is `max_concurrency` (the usual case:
nothing pushed back); the half costs about one latency at half the calls in flight
(`benchmarks/judge_throughput.py`: 0.95-0.98 of the bare loop at 32-64 in flight against 0.85-0.93
for slow start from 4).
`learned()` is what a batch hands the store at its end. An endpoint never seen starts slow start
from 4 as before (the reasons: `cube.llm.learned_limit`).

A released slot is handed straight to the first waiter (FIFO; a future per waiter, set by the
releaser), O(1) per slot. The `asyncio.Condition` this replaced re-checked every waiter already
woken but not yet run on each notify and made each woken waiter re-take its lock: a burst of k
answers cost O(k^2), most of the client's CPU per call at 256 in flight (issue 15).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

SLOW_START = 4  # the first limit (or min_concurrency if larger); it doubles per window until a 429
DECREASE = (
    0.7  # the cut: gentler than halving, so the limit oscillates closer to what the endpoint allows
)
WINDOW = (
    8  # fewest answered calls per throughput window (fewer are too noisy with calls of 0.4-15 s)
)
LEVEL_STEP = 1.3  # two windows' levels must differ by this ratio for their rates to be compared
FLAT = 0.5  # elasticity of the rate to the level below which the server counts as saturated
HOLD = 4  # windows spent at a settled level before probing twice that level


@dataclass(frozen=True)
class Learned:
    """What a batch learned of an endpoint (`AdaptiveLimit.learned`), the start of a later run's
    limit: `limit` (its `settled_limit`), `peak` (most calls in flight at once), `congested` (429s
    or timeouts cut the limit) and `flat` (it settled for a flat rate: a server that queues)."""

    limit: int
    peak: int
    congested: bool
    flat: bool


# (level, rate, limit, answered calls, seconds) of a judged window (settled: of them all)
_Window = tuple[float, float, float, int, float]


def _elasticity(prev: _Window | None, level: float, rate: float) -> tuple[float, float | None]:
    """(level ratio, elasticity g of the rate to the level) against the last judged window; g is
    None without one, or when the levels differ by less than `LEVEL_STEP` (too noisy to compare)."""
    if prev is None:
        return 1.0, None
    step = level / prev[0]
    if abs(math.log(step)) < math.log(LEVEL_STEP):
        return step, None
    return step, math.log(rate / prev[1]) / math.log(step)


def _flat(step: float, g: float | None) -> bool:
    """More in flight, no more answered per second."""
    return g is not None and step > 1 and g < FLAT


def _pooled(prev: _Window, level: float, n: int, elapsed: float) -> _Window:
    """A settled window pooled into the baseline of the windows before it (less noise)."""
    t = prev[4] + elapsed
    return ((prev[0] * prev[4] + level * elapsed) / t, (prev[3] + n) / t, prev[2], prev[3] + n, t)


def _first(settled: int | None, learned: Learned | None) -> int:
    """The first limit (before the bounds): `settled`, else half the learned limit (slow start
    from there: the module's docstring), else `SLOW_START`."""
    if settled is not None:
        return settled
    return SLOW_START if learned is None else max(SLOW_START, learned.limit // 2)


class AdaptiveLimit:
    def __init__(
        self,
        min_limit: int,
        max_limit: int,
        clock: Callable[[], float] = time.monotonic,
        settled: int | None = None,
        learned: Learned | None = None,
    ):
        """`settled`: the limit an earlier batch of the same model settled at for a flat rate; this
        batch starts there, settled (it probes twice that every `HOLD` windows), not at
        `SLOW_START`. `learned`: what an earlier run learned of the endpoint (the module's
        docstring), used when `settled` is None."""
        if not 1 <= min_limit <= max_limit:
            raise ValueError(
                "concurrency: expected 1 <= min_concurrency <= max_concurrency, got "
                f"{min_limit}, {max_limit}"
            )
        self.lo, self.hi = min_limit, max_limit
        self.learned_start = settled is None and learned is not None
        if settled is None and learned is not None and learned.flat:
            settled = learned.limit  # settled there for a flat rate: starts settled, as `settled`
        self.limit = float(min(max_limit, max(min_limit, _first(settled, learned))))
        self.start = int(self.limit)
        self.windows = 0  # throughput windows closed: the evidence `learned()` hands on
        self.pushback = {"http_429": 0, "timeouts": 0}  # congestion signals seen (each, cut or not)
        self.in_flight = 0
        self.peak = 0
        self.lowest = float(max_limit)
        self.cuts = 0
        self._seq = 0  # sequence number of the last slot taken
        self._cut_seq = (
            -1
        )  # `_seq` when the limit was last cut: congestion from calls up to it is ignored
        self._waiters: deque[asyncio.Future[int]] = (
            deque()
        )  # FIFO; each gets its slot's sequence number
        # throughput windows (the module's docstring)
        # "up": growing; "down": the one window at the floor after two flat judgements; "hold":
        # settled; "probe": a window at twice the settled limit
        self.mode = "up" if settled is None else "hold"
        self.flat_steps = 0  # steps back taken because the rate stayed flat as the level rose
        self._clock = clock
        self._t = clock()  # time of the last change of `in_flight`
        self._area = 0.0  # integral of `in_flight` over time
        self._w: tuple[float, float, int] | None = (
            None  # (start time, `_area` then, size) of the open window
        )
        self._w_done = 0  # answered calls in the open window
        self._prev: _Window | None = None  # the last window judged
        self._held = 0  # windows spent settled
        self._settled = (
            self.limit
        )  # the limit a probe goes back to; while "down", the one before the drop
        self._flat_once = (
            False  # the last judgement in slow start found the rate flat (a second confirms)
        )
        if self.learned_start and self.mode == "up":
            # the window at half the learned limit opens with the batch, not at its first answer:
            # one latency less at half the calls in flight (its idle start lowers its level and
            # rate alike, so the comparison with the next window holds)
            self._w = (self._t, 0.0, max(WINDOW, int(self.limit)))

    def _tick(self) -> None:
        now = self._clock()
        self._area += self.in_flight * (now - self._t)
        self._t = now

    def _take(self) -> int:
        self._tick()
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
            if (
                fut.done() and not fut.cancelled()
            ):  # a slot was handed over as we were cancelled: give it back
                self._tick()
                self.in_flight -= 1
                self._wake()
            raise

    async def release(self) -> None:
        self._tick()
        self.in_flight -= 1
        self._wake()

    async def __aenter__(self) -> AdaptiveLimit:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def success(self) -> None:
        """A call the endpoint answered (its slot still held). Before the first cut the limit
        doubles at the end of each window whose rate rose with its level (slow start); after a cut
        it grows by 1/limit per answered call (additive increase, about +1 per window); neither
        while probing down or settled. Every `max(WINDOW, limit)` answered calls close a window."""
        if self.mode == "up" and self.cuts and self.limit < self.hi:
            self.limit = min(float(self.hi), self.limit + 1.0 / self.limit)
            self._wake()  # a slot more: a waiter need not wait for the next release
        if self.lo < self.hi:
            self._count()

    def _set(self, limit: float) -> None:
        self.limit = min(float(self.hi), max(float(self.lo), limit))
        if self.mode != "up":  # a step back (slow start's doublings are no low point)
            self.lowest = min(self.lowest, self.limit)
        self._w = None  # the next window opens once the calls in flight fit under the new limit
        self._wake()

    def _count(self) -> None:
        """One answered call: it opens a window (once the calls in flight fit under the limit),
        counts in the open one, or closes it and judges it."""
        self._tick()
        if self._w is None:
            self._open_window()
            return
        self._w_done += 1
        t0, a0, size = self._w
        if self._w_done < size:
            return
        elapsed, n = self._t - t0, self._w_done
        self.windows += 1
        self._w, self._w_done = (self._t, self._area, max(WINDOW, int(self.limit))), 0
        level = (self._area - a0) / elapsed if elapsed > 0 else 0.0
        if level >= 0.5:  # else nothing measurably in flight: no evidence
            self._judge(level, n, elapsed)
        elif self.mode == "up" and not self.cuts:
            self._set(2 * self.limit)

    def _open_window(self) -> None:
        """Open a window of `max(WINDOW, limit)` calls (a probe's twice as long) once the calls in
        flight fit under the limit (drained after a step down)."""
        if self.in_flight > int(self.limit):
            return
        size = max(WINDOW, int(self.limit)) * (2 if self.mode == "probe" else 1)
        self._w, self._w_done = (self._t, self._area, size), 0

    def _judge(self, level: float, n: int, elapsed: float) -> None:
        """One window's level and rate against the last judged window's (the module's docstring)."""
        if (
            self.cuts
        ):  # 429s or timeouts have cut the limit: they are the signal (AIMD), not the rate
            return
        rate = n / elapsed
        prev, self._prev = self._prev, (level, rate, self.limit, n, elapsed)
        if self.mode == "hold":
            self._judge_settled(prev, level, n, elapsed)
            return
        step, g = _elasticity(prev, level, rate)
        if self.mode in ("up", "probe"):
            self._judge_rising(prev, step, g)
        elif self.mode == "down":
            self._judge_floor(prev, step, g)

    def _judge_settled(self, prev: _Window | None, level: float, n: int, elapsed: float) -> None:
        """A settled window: pooled into the baseline; every `HOLD` of them, a probe."""
        if prev is not None and prev[2] == self.limit:
            self._prev = _pooled(prev, level, n, elapsed)
        self._held += 1
        if self._held >= HOLD and self.limit < self.hi:  # probe twice the level
            self.mode, self._held, self._settled = "probe", 0, self.limit
            self._set(2 * self.limit)

    def _judge_rising(self, prev: _Window | None, step: float, g: float | None) -> None:
        """A window of slow start or of a probe: a flat rate judged again once, then a step back;
        a rising rate goes on growing (slow start) or settles at the probe."""
        flat = _flat(step, g)
        if flat and self._first_flat():  # once may be noise: judge another window
            self._judge_again(prev)
        elif flat:
            self._step_back()
        else:
            self._rose(step, g)

    def _first_flat(self) -> bool:
        """Whether a flat window in slow start is the first in a row."""
        return self.mode == "up" and not self._flat_once

    def _judge_again(self, prev: _Window | None) -> None:
        self._flat_once = True
        if self.limit < self.hi:
            self._set(2 * self.limit)  # against this one
        else:
            self._prev = prev  # at the ceiling: against the same earlier window

    def _step_back(self) -> None:
        """A confirmed flat rate: a probe back to the settled limit, slow start to the floor."""
        self.flat_steps += 1
        if self.mode == "probe":  # the probe bought nothing: back to the settled limit
            self.mode = "hold"
            self._set(self._settled)
        else:
            # straight down to the floor: the widest level ratio, the least noisy comparison
            self.mode, self._settled = "down", self.limit
            self._set(self.lo)

    def _rose(self, step: float, g: float | None) -> None:
        """A window whose rate was not flat."""
        if self.mode == "probe":  # the rate rose with the probe: settled there; no rise in level
            self.mode = "hold"  # (too few calls waiting to tell): back to the settled limit
            if g is None:
                self._set(self._settled)
        elif g is None or step > 1:
            self._flat_once = False
            self._set(2 * self.limit)  # slow start

    def _judge_floor(self, prev: _Window | None, step: float, g: float | None) -> None:
        """The floor's rate against the rate where it stayed flat: if it fell with the level the
        server does run calls in parallel (the flat steps were noise: back to that limit, growing
        again), else settle at the floor."""
        if g is not None and step < 1 and g >= FLAT:
            self.mode, self._flat_once = "up", False
            self._set(prev[2])
        else:
            self.mode = "hold"

    def settled_limit(self) -> int | None:
        """The limit to start the model's next batch at (`settled`), or None while it is growing."""
        if self.mode == "up":
            return None
        return int(self._settled if self.mode in ("probe", "down") else self.limit)

    def learned(self) -> Learned | None:
        """What this batch learned of the endpoint, for a later run's start: the limit it settled
        or grew to (a grown one no higher than the calls in flight it reached: a short batch's
        windows may double the limit past what it ever sent at once), whether 429s or timeouts
        pushed back and whether the rate was flat. None when it answered too few calls to close a
        throughput window and nothing pushed back: no evidence."""
        congested = bool(self.cuts)
        if not congested and not self.windows:
            return None
        # settled for a flat rate; a batch that ended in its one window at the floor ("down") has
        # no verdict yet: it hands on the limit before the drop as grown, so the next run compares
        # levels again rather than holding there
        flat = not congested and self.mode in ("hold", "probe")
        if congested:
            limit = int(self.limit)
        elif flat:
            limit = int(self._settled if self.mode == "probe" else self.limit)
        else:
            grown = self._settled if self.mode == "down" else self.limit
            limit = min(int(grown), max(self.peak, self.lo))
        return Learned(limit=limit, peak=self.peak, congested=congested, flat=flat)

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
            # from now on additive increase, cut on congestion only (no flat steps, no probes)
            self.mode = "up"
            self._w = None

    def summary(self) -> dict[str, float | int]:
        """The limit's course: bounds, start, calls in flight reached, final and lowest limit, cuts,
        the 429s and timeouts that pushed back, and the steps back for a flat rate."""
        return {
            "min": self.lo,
            "max": self.hi,
            "start": self.start,
            "peak_in_flight": self.peak,
            "final_limit": int(self.limit),
            "lowest_limit": int(self.lowest),
            "cuts": self.cuts,
            **self.pushback,
            "flat_steps": self.flat_steps,
            "learned_start": self.learned_start,
        }


def merge_summaries(
    before: dict[str, float | int], after: dict[str, float | int]
) -> dict[str, float | int]:
    """Two batches' `summary()` of one model as one: the first start, the highest peak, the lowest
    limit, the last final limit, cuts and pushback added up."""
    if not before:
        return dict(after)
    out = dict(after)
    out["start"] = before["start"]
    out["learned_start"] = before.get("learned_start", False)
    out["peak_in_flight"] = max(before["peak_in_flight"], after["peak_in_flight"])
    out["lowest_limit"] = min(before["lowest_limit"], after["lowest_limit"])
    for k in ("cuts", "http_429", "timeouts", "flat_steps"):
        out[k] = before.get(k, 0) + after.get(k, 0)
    return out
