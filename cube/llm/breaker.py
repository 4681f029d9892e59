"""The circuit breaker of one model's endpoints: which of them still get requests, and when.

An endpoint that answers 401, 403 or 404 (bad key, no access, unknown model or wrong base_url), or
where `breaker_threshold` calls in a row used up all their attempts on connection errors, timeouts
or unusable answers (e.g. it always answers with empty choices), is stopped. Only a call that
exhausted its retries counts: calls refused at the same moment by a server that is restarting retry
with backoff and go through once it is back. Replicas that still work take the calls of a stopped
one; when none is left, the remaining calls fail at once without a request, with the reason the
endpoint was stopped ("not sent: endpoint stopped after HTTP 401 ..."). A stop is not forever:
`BREAKER_COOLDOWN_S` after it (or after its last failed trial) one call is let through as a trial
(half-open); its success resumes the endpoint, its failure re-arms the cool-down.

Suspicion: while every endpoint still sending has failed `breaker_threshold` attempts in a row
without an answer, calls that have not sent anything yet wait (`holds_back`, `wait`) until the calls
already retrying show whether it is a brief outage (one answers: go on) or a dead endpoint (they use
up their attempts: stop). A dead endpoint then costs the attempts of the calls already started, not
`max_attempts` attempts of every pending call.

Death: a server on this machine (a loopback URL: `localhost`, 127.0.0.0/8, ::1) that answered in
this batch and then refuses the connection may have died (a local llama-cpp-python server that
crashed, issue 38), not become busy. Its first refusal starts one death check (`DEATH_CHECK_S`
later, a bare TCP connect, as `cube.llm.preflight` confirms a crash); meanwhile no new attempt goes
to it (`checked`, `settle`). Still refused: it is stopped, with how many calls were in flight when
it died (their answers are lost; each is recorded as failed), instead of every call retrying it
`max_attempts` times. Listening again (a restart): nothing is stopped and the calls retry as usual.
A server elsewhere is never stopped on a refusal alone: a remote service in a rolling restart
refuses for a while and then answers, which the retries, the streak rule and the suspicion above
ride out. A stopped server's cool-down trial still resumes it once it is back.

In flight, process-wide: `calls_in_flight(urls)` counts the calls started and not returned to
these endpoints in this process, so a tokenize request (`cube.llm.tokens`) never runs beside them.
Another process's calls are not seen: inside `cube run` the tokenize route is not used at all.

`stopped` and `stopped_at` may be shared by the batches of one model (`OpenAIModel` passes its
own), so a later batch does not send to an endpoint an earlier one stopped.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

log = logging.getLogger("cube.llm")
BREAKER_COOLDOWN_S = 30.0  # a stopped endpoint gets one trial call this long after its stop
REFUSED = "connection refused"  # `cube.llm.retry.connection_reason`'s name for a refusal
DEATH_CHECK_S = 1.0  # after a refusal, how long a loopback server gets before the death check
PROBE_TIMEOUT_S = 2.0  # the death check's TCP connect

_IN_FLIGHT: Counter[str] = Counter()  # endpoint URL -> calls started and not returned
_IN_FLIGHT_LOCK = threading.Lock()  # batches run in several threads' event loops


def calls_in_flight(urls: Iterable[str]) -> int:
    """Calls this process has in flight to any of `urls` (trailing slashes ignored)."""
    keys = {u.rstrip("/") for u in urls if u}
    with _IN_FLIGHT_LOCK:
        return sum(n for ep, n in _IN_FLIGHT.items() if ep in keys)


def _count_in_flight(endpoints: Iterable[str], step: int) -> None:
    with _IN_FLIGHT_LOCK:
        for ep in endpoints:
            _IN_FLIGHT[ep.rstrip("/")] += step
            if _IN_FLIGHT[ep.rstrip("/")] <= 0:
                del _IN_FLIGHT[ep.rstrip("/")]


def on_this_machine(url: str) -> bool:
    """`url`'s host is this machine: `localhost` or a loopback address (not a LAN host: a
    service there may be restarting behind its name)."""
    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def refuses(url: str) -> bool:
    """Nothing listens at `url`'s host and port now (a TCP connect is refused)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, port), PROBE_TIMEOUT_S
        )
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError, TimeoutError):
        return False
    writer.close()
    return False


class Breaker:
    """The breaker's state for `endpoints`: stops, their times, streaks and trials.

    Args:
        name: the model's name (for the log).
        endpoints: the endpoint ids.
        threshold: `breaker_threshold` (0: never stop on a streak, never stop at all).
        max_attempts: attempts per call (named in a streak's stop reason).
        scrub: removes secrets from a stop reason.
        stopped, stopped_at: shared state of earlier batches (None: fresh).
    """

    def __init__(
        self,
        name: str,
        endpoints: list[str],
        threshold: int,
        max_attempts: int,
        scrub: Callable[[str], str],
        stopped: dict[str, str] | None = None,
        stopped_at: dict[str, float] | None = None,
    ):
        self.name, self.endpoints, self.threshold = name, endpoints, threshold
        self.max_attempts, self._scrub = max_attempts, scrub
        # endpoint -> why no more requests go to it (shared by the batches of one model)
        self.stopped: dict[str, str] = stopped if stopped is not None else {}
        # endpoint -> time.monotonic() of its stop or last failed trial (shared like `stopped`)
        self.stopped_at: dict[str, float] = stopped_at if stopped_at is not None else {}
        self.unsent: dict[str, int] = dict.fromkeys(endpoints, 0)  # calls refused after the stop
        self._streak = dict.fromkeys(endpoints, 0)  # consecutive calls that used up their attempts
        # consecutive failed attempts (no answer) since a success
        self._fails = dict.fromkeys(endpoints, 0)
        self._active = 0  # calls that made their first attempt and have not returned
        self._wake = asyncio.Event()  # set when suspicion ends, a stop happens or no call is active
        self._trial: set[str] = set()  # stopped endpoints with their one trial request in flight
        self._answered: set[str] = set()  # endpoints that answered in this batch (death: above)
        self._checks: dict[str, asyncio.Task] = {}  # endpoint -> its death check in progress

    # -- which endpoint may get the next request --------------------------------------------
    def live(self, order: list[str]) -> list[str]:
        """The endpoints of `order` that are not stopped."""
        return [e for e in order if e not in self.stopped]

    def ready(self, order: list[str]) -> list[str]:
        """The endpoints of `order` that are not stopped and have no death check in progress (the
        live ones when every one has: `checking` holds the attempts back then)."""
        live = self.live(order)
        return [e for e in live if e not in self._checks] or live

    def trial(self, order: list[str]) -> str | None:
        """The first stopped endpoint of `order` whose cool-down is over and that has no trial in
        flight (it gets this call as its trial); None when there is none."""
        now = time.monotonic()
        for ep in order:
            if ep not in self._trial and now - self.stopped_at.get(ep, now) >= BREAKER_COOLDOWN_S:
                self._trial.add(ep)
                log.debug("%s: trial call to stopped %s after its cool-down", self.name, ep)
                return ep
        return None

    # -- what an attempt or call tells it ----------------------------------------------------
    def stop(self, ep: str, reason: str) -> None:
        if ep not in self.stopped and self.threshold:
            self.stopped[ep] = self._scrub(reason)[:300]
            self.stopped_at[ep] = time.monotonic()
            self._wake.set()
            log.debug("%s: stopped sending to %s: %s", self.name, ep, self.stopped[ep])

    def no_answer(self, ep: str, detail: str = "") -> None:
        """An attempt got no usable answer (connection error, timeout, malformed reply); a refused
        connection to a server on this machine that had answered starts its death check."""
        self._fails[ep] += 1
        if (
            detail == REFUSED
            and ep in self._answered
            and ep not in self.stopped
            and ep not in self._checks
            and self.threshold
            and on_this_machine(ep)
        ):
            n = max(self._active, 1)
            self._checks[ep] = asyncio.get_running_loop().create_task(self._check_death(ep, n))

    async def _check_death(self, ep: str, n: int) -> None:
        """Stop `ep` as dead when it still refuses `DEATH_CHECK_S` after its first refusal (`n`
        calls were in flight then)."""
        try:
            await asyncio.sleep(DEATH_CHECK_S)
            if await refuses(ep):
                self.stop(
                    ep,
                    f"server dead: connection refused after it had answered, and still "
                    f"{DEATH_CHECK_S:g} s later ({n} call{'s' * (n > 1)} of {self.name} in flight "
                    "when it died, each recorded as failed; is the server still running? see its "
                    "log)",
                )
            else:
                log.info("%s: %s listens again after a refusal; retrying", self.name, ep)
        finally:
            self._checks.pop(ep, None)
            self._wake.set()

    async def settle(self, ep: str) -> None:
        """Until `ep`'s death check, if one is in progress, has decided."""
        task = self._checks.get(ep)
        if task is not None:
            await asyncio.wait({task})

    def _pending(self) -> set[asyncio.Task] | None:
        """The death checks in progress when every endpoint still sending has one, else None."""
        live = self.live(self.endpoints)
        pending = {self._checks[e] for e in live if e in self._checks}
        return pending if live and len(pending) == len(live) else None

    def checking(self) -> bool:
        """Every endpoint still sending has a death check in progress (no attempt should go)."""
        return self._pending() is not None

    async def checked(self) -> None:
        """Until some endpoint still sending has no death check in progress (a new attempt waits
        rather than meet a server that may be dead)."""
        while (pending := self._pending()) is not None:
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)

    def attempt_failed(self, ep: str) -> None:
        """Any failed attempt: a failed trial re-arms the cool-down of its stopped endpoint."""
        if ep in self._trial:
            self._trial.discard(ep)
            self.stopped_at[ep] = time.monotonic()

    def healthy(self, ep: str) -> None:
        """`ep` answered: its streaks end, and a stopped endpoint whose trial this was resumes."""
        self._streak[ep] = 0
        self._answered.add(ep)
        if self._fails[ep]:
            self._fails[ep] = 0
            self._wake.set()
        if ep in self._trial:  # the trial after the cool-down went through: resume the endpoint
            self._trial.discard(ep)
            self.stopped.pop(ep, None)
            self.stopped_at.pop(ep, None)
            log.info("%s: %s answers again; resumed sending to it", self.name, ep)

    def exhausted(self, ep: str, label: str, detail: str) -> None:
        """A call used up all its attempts on connection errors, timeouts or unusable answers:
        `threshold` such calls in a row stop the endpoint (scattered or brief faults, which retries
        get through, never do)."""
        self._streak[ep] += 1
        if self.threshold and self._streak[ep] >= self.threshold:
            n, a = self._streak[ep], self.max_attempts
            self.stop(
                ep,
                f"{n} call{'s' * (n > 1)} in a row failed all {a} attempt{'s' * (a > 1)}: "
                f"{label}: {detail}",
            )

    def unsent_reason(self, attempts: int, ep: str) -> tuple[str, str]:
        """(reason, stopped endpoint) of a call refused because every endpoint is stopped, after
        `attempts` attempts (0: not sent at all, counted in `unsent`)."""
        stopped = ep if ep in self.stopped else next(iter(self.stopped))
        self.unsent[stopped] += attempts == 0
        verb = (
            "not sent"
            if attempts == 0
            else f"not retried after {attempts} attempt{'s' * (attempts > 1)}"
        )
        return f"{verb}: endpoint stopped after {self.stopped[stopped]}", stopped

    # -- suspicion: hold new calls back while every live endpoint fails ----------------------
    def suspect(self) -> bool:
        """Every endpoint still sending has failed `threshold` attempts in a row without an
        answer."""
        live = self.live(self.endpoints)
        return bool(self.threshold and live) and all(self._fails[e] >= self.threshold for e in live)

    def holds_back(self, started: bool) -> bool:
        """A call that has sent nothing yet waits while the endpoints are suspect and calls
        already started may still tell."""
        return not started and self.suspect() and self._active > 0

    async def wait(self) -> None:
        """Until suspicion may have ended (an answer, a stop, or no call left in progress)."""
        self._wake.clear()
        await self._wake.wait()

    def started(self) -> None:
        """A call made its first attempt."""
        self._active += 1
        _count_in_flight(self.endpoints, 1)

    def finished(self) -> None:
        """A call that had started returned."""
        self._active -= 1
        _count_in_flight(self.endpoints, -1)
        if self._active == 0:
            self._wake.set()
