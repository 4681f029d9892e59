"""Work done in a forked child of `cube run`, so that the memory it takes leaves with the child.

The runner (`cube.run.execute`) lives for the whole run and publishes the report at its end; what
it computed in its own process before and after the stages stayed with it, and publishing's own
peak came on top: the run's largest process (732-751 MB at the paper's scale, 6,111 items and
293k judgments). Before the stages, the input checks (`cube.run.validate.validate_data`, which
builds the demo corpus the way a run does) took it from 215 to 370 MB and `cube plan`'s count of
the run's calls (`cube.run.plan.build_plan`: every system's BM25 retrieval run, every judge's
requests built) to 500 MB: jieba's dictionary, the BM25 index and its token caches (105 MB still
referenced after the plan), and freed memory the allocator keeps (CPython's arenas and glibc's
heap are not returned while a few objects remain in them). After them, the manifest's usage table
(`cube.run.decide.call_usage`, every table of calls read) added 220 MB.

`start_child(fn)` forks the child and returns at once (the runner's plan is computed while its
kernel starts; it is forked before the runner has any thread, so the child holds no lock another
thread held); `in_child(fn)` waits for it. Either runs `fn()` in a child forked from the runner,
which costs no new imports (the child has the runner's modules) and a few milliseconds, and returns
its result (pickled through a pipe); the child's memory goes back to the system when it exits.
`start_steps(first, then)` sends `first()`'s value back, then waits for the caller's go-ahead
(`Child.go`, a byte on a second pipe) before `then`: a caller that stops first plans nothing. An
exception `fn` raises is raised here, with the child's traceback as a note (and so is pickle's
error on a result it cannot carry); an exception pickle cannot carry, or does not bring back as it
was (a custom `__init__`), raises `ChildFailed` with its type and message, and so does a child that
dies (a signal) with how it ended. Elsewhere than on Linux (Windows has no `fork`; on macOS a
forked process must not use the system frameworks its parent did, and Python's own
`multiprocessing` no longer forks there), and when the fork itself fails (no memory or process
left: ENOMEM, EAGAIN), `fn()` runs in this process.

The child writes nothing the runner has buffered (the runner's standard streams are flushed before
the fork, the child flushes only what it printed itself and ends with `os._exit`, running no
`atexit` handler and closing none of the runner's files, kernels or locks). An interrupt of the
runner (SIGINT, SIGTERM) while it waits kills the child and propagates.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")
# macOS: a forked process must not use the system frameworks its parent did; Windows: no fork
_FORKS = sys.platform.startswith("linux")


class ChildFailed(RuntimeError):
    """The forked child ended without a result (killed, or a result pickle cannot carry)."""


def in_child(fn: Callable[[], T]) -> T:
    """`fn()` computed in a forked child process; its result. See the module's docstring."""
    return start_child(fn).result()


class Child(Generic[T]):
    """A forked child computing a result (`start_child`); `result()` waits for it. A child of
    `start_steps` sends its first step's value first (`first()`), then waits for `go()` (or
    `result()`) before its second step."""

    def __init__(
        self,
        pid: int = 0,
        read: int = -1,
        value: Any = None,
        later: Callable[[], T] | None = None,
        go: int = -1,
    ) -> None:
        self._pid, self._read, self._value, self._later = pid, read, value, later
        self._go = go

    def go(self) -> None:
        """Let a `start_steps` child begin its second step (once; a no-op after that, for a child
        of `start_child` or without a fork). A child killed or dead meanwhile says so in
        `result()`."""
        go, self._go = self._go, -1
        if go >= 0:
            with contextlib.suppress(OSError):  # dead already (EPIPE): `result()` says how
                os.write(go, b"1")
            os.close(go)

    def first(self) -> Any:
        """The first step's value of a `start_steps` child (raises what it raised, the child then
        reaped; or `ChildFailed`); the child goes on with its second step. Called once, before
        `result()`."""
        if self._pid == 0:  # no fork here: computed in this process by `start_steps`
            return self._value
        try:
            head = _read_exactly(self._read, 8)
            size = int.from_bytes(head, "big") if len(head) == 8 else 0
            data = _read_exactly(self._read, size) if size else b""
        except BaseException:
            self.kill()
            raise
        # the pipe ended first: the child died (e.g. OOM-killed while writing a report over the
        # pipe's 64 KB); a truncated frame is no pickle to read, the status says how it ended
        if not size or len(data) < size:
            pid, self._pid = self._pid, 0
            os.close(self._read)
            self._close_go()
            _, status = os.waitpid(pid, 0)
            raise ChildFailed(f"the child process ended without a result ({_status(status)})")
        try:
            kind, value = _loads(data)
        except Exception as exc:  # a whole frame that does not unpickle: the child goes too
            self.kill()
            raise ChildFailed(f"the child's first result could not be read: {exc!r}") from exc
        if kind == "raised":
            self.kill()
            raise value
        return value

    def result(self) -> T:
        """The child's result (raises what it raised, or `ChildFailed`); see the module's
        docstring. Called once."""
        if self._pid == 0:  # no fork here: computed in this process by `start_child`
            return self._later() if self._later is not None else self._value
        self.go()
        pid, self._pid = self._pid, 0
        try:
            with os.fdopen(self._read, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
        except BaseException:  # an interrupt: the child goes with the runner
            _kill(pid)
            raise
        if status != 0 or not data:
            raise ChildFailed(f"the child process ended without a result ({_status(status)})")
        kind, value = _loads(data)
        if kind == "raised":
            raise value
        return value

    def kill(self) -> None:
        """Stop the child without its result (an interrupted run)."""
        pid, self._pid = self._pid, 0
        self._close_go()
        if pid:
            os.close(self._read)
            _kill(pid)

    def _close_go(self) -> None:
        go, self._go = self._go, -1
        if go >= 0:
            os.close(go)


def start_child(fn: Callable[[], T]) -> Child[T]:
    """Fork a child computing `fn()` now and go on; its `result()` is read later. Fork before
    the process starts threads (a kernel's client, a pool): the child then holds no lock another
    thread held at the fork. Where `os.fork` does not exist, `fn()` is computed here and now."""
    if not _FORKS:
        return Child(value=fn())
    return _fork(fn)


def start_steps(first: Callable[[], S], then: Callable[[S], T]) -> Child[T]:
    """Fork a child computing `first()`, then `then(<its value>)`, and go on: `first()` of the
    returned child waits for the first value, `result()` for the second. The child begins `then`
    only on the caller's `go()` (or `result()`): `cube run` lets its plan start once it holds the
    run folder's lock, not on a folder another run holds. One child for two steps sharing what the
    first built (`cube run`: the input checks' demo corpus is the plan's). A first step that
    raises ends the child, and so does a caller that closes the go-ahead unsent (`kill()`). Where
    `os.fork` does not exist, `first()` is computed here and now, `then` when the result is asked
    for."""
    if not _FORKS:
        value = first()
        return Child(value=value, later=lambda: then(value))
    return _fork(lambda: first(), then)


def _fork(fn: Callable[[], Any], then: Callable[[Any], Any] | None = None) -> Child[Any]:
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    # the second step's go-ahead: one byte from the runner (none, and the pipe closed: never)
    wait, go = os.pipe() if then is not None else (-1, -1)
    try:
        pid = os.fork()
    except OSError:  # no memory or process left for a child (ENOMEM, EAGAIN): computed here
        for fd in (read, write, wait, go):
            if fd >= 0:
                os.close(fd)
        if then is None:
            return Child(value=fn())
        value = fn()
        return Child(value=value, later=lambda: then(value))
    if pid == 0:  # the child: compute, send, leave without running the runner's exit handlers
        if go >= 0:
            os.close(go)
        _child(fn, read, write, then, wait)
    os.close(write)
    if wait >= 0:
        os.close(wait)
    return Child(pid, read, go=go)


def _computed(fn: Callable[[], object]) -> tuple[bytes, bool]:
    """`fn()` as the message the runner reads, and whether it returned."""
    try:
        return _dumps(("returned", fn())), True
    except Exception as exc:  # noqa: BLE001  raised again in the runner
        import traceback

        exc.add_note("in a child process of the runner:\n" + traceback.format_exc().rstrip())
        return _dumps(("raised", _raised(exc))), False


def _child(
    fn: Callable[[], object],
    read: int,
    write: int,
    then: Callable[[Any], object] | None = None,
    wait: int = -1,
) -> None:
    code = 1
    try:
        os.close(read)
        with os.fdopen(write, "wb") as pipe:
            if then is None:
                pipe.write(_computed(fn)[0])
            else:  # two steps: the first value framed by its length, sent before the second
                value: list[object] = []
                data, ok = _computed(lambda: value.append(fn()) or value[0])
                pipe.write(len(data).to_bytes(8, "big") + data)
                pipe.flush()
                if ok and os.read(wait, 1):  # the runner's go-ahead (none: it stopped)
                    pipe.write(_computed(lambda: then(value[0]))[0])
        code = 0
    except BaseException:  # noqa: BLE001  an interrupt: the runner says it ended without a result
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _dumps(result: tuple[str, object]) -> bytes:
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def _raised(exc: BaseException) -> tuple[bytes | None, str, tuple[str, ...]]:
    """An exception for the runner: its own pickle (None when pickle cannot carry it, e.g. it holds
    a lock), and its type, message and notes, the fallback the runner raises as `ChildFailed` when
    the exception does not come back as it was (`_loads`)."""
    try:
        own: bytes | None = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001
        own = None
    return own, f"{type(exc).__name__}: {exc}", tuple(getattr(exc, "__notes__", ()))


def _loads(data: bytes) -> tuple[str, Any]:
    """The child's (kind, value); a raised exception that does not unpickle as it was (a custom
    `__init__` pickle calls with its message: a TypeError, or a list argument rebuilt from the
    message's characters) comes back as `ChildFailed` with its type and message."""
    kind, value = pickle.loads(data)  # noqa: S301  our own child's result, through our own pipe
    if kind != "raised":
        return kind, value
    own, message, notes = value
    try:
        exc = pickle.loads(own) if own is not None else None  # noqa: S301  as above
    except Exception:  # noqa: BLE001
        exc = None
    if not isinstance(exc, BaseException) or f"{type(exc).__name__}: {exc}" != message:
        exc = ChildFailed(message)
        for note in notes:
            exc.add_note(note)
    return kind, exc


def _read_exactly(fd: int, n: int) -> bytes:
    """`n` bytes from `fd`, or fewer when it ends first (the child died)."""
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
