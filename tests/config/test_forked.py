"""`cube.config.forked.in_child`: work done in a forked child (the runner's plan, input checks and
usage), its result or its exception handed back, the child's memory gone with it."""

from __future__ import annotations

import os
import pickle
import signal

import pytest

from cube.config.forked import ChildFailed, in_child, start_child


class _Odd(ValueError):
    """An exception of the caller's own type, with a message naming what was wrong."""


def test_the_result_comes_back_from_another_process():
    pid, rows = in_child(lambda: (os.getpid(), [{"role": "judging", "calls": 293_328}]))
    assert pid != os.getpid()
    assert rows == [{"role": "judging", "calls": 293_328}]


def test_what_the_child_allocates_is_not_left_in_the_caller():
    held: list[bytes] = []

    def grow() -> int:
        held.append(b"x" * 1_000_000)
        return len(held)

    assert in_child(grow) == 1
    assert held == []  # appended in the child's copy of the list only


def test_an_exception_is_raised_here_with_its_type_message_and_the_childs_traceback():
    def fail() -> None:
        raise _Odd("corpus.path: no such file (row 3)")

    with pytest.raises(_Odd, match=r"corpus\.path: no such file \(row 3\)") as info:
        in_child(fail)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "in a child process of the runner" in notes and "fail" in notes


def test_an_exception_pickle_cannot_carry_comes_back_as_child_failed_with_its_message():
    import threading

    class Locked(Exception):
        def __init__(self) -> None:
            super().__init__("held a lock")
            self.lock = threading.Lock()

    def fail() -> None:
        raise Locked()

    with pytest.raises(ChildFailed, match="Locked: held a lock"):
        in_child(fail)


def test_a_child_that_dies_raises_child_failed_with_the_signal():
    with pytest.raises(ChildFailed, match=f"killed by signal {int(signal.SIGKILL)}"):
        in_child(lambda: os.kill(os.getpid(), signal.SIGKILL))


def test_a_result_pickle_cannot_carry_raises_pickles_error_here():
    with pytest.raises((AttributeError, TypeError, pickle.PicklingError), match="pickle"):
        in_child(lambda: lambda: None)


def test_a_started_child_computes_while_the_caller_goes_on(tmp_path):
    """`start_child` returns at once: the runner starts its kernel while the plan is computed."""
    gate = tmp_path / "go"

    def wait_for_the_caller() -> str:
        import time

        while not gate.exists():  # the caller must run on for the child to finish
            time.sleep(0.01)
        return "plan"

    child = start_child(wait_for_the_caller)
    gate.write_text("go")  # done by the caller after start_child returned
    assert child.result() == "plan"


def test_a_started_child_killed_by_an_interrupted_run_is_gone():
    import time

    child = start_child(lambda: time.sleep(60))
    pid = child._pid
    child.kill()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped: no such process


class _Problems(ValueError):
    """An exception built from a list (as `RatingsError`): pickle would call it with its message."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__(f"{len(problems)} problem(s):\n" + "\n".join(problems))


class _Needs(ValueError):
    def __init__(self, path: str, row: int) -> None:
        super().__init__(f"{path} row {row}: bad")


@pytest.mark.parametrize(
    "exc",
    [
        _Problems(["kb.csv row 3: no text", "kb.csv row 9: duplicate id"]),
        _Needs("kb.csv", 3),
    ],
)
def test_an_exception_with_its_own_init_comes_back_with_its_type_and_message(exc):
    message = f"{type(exc).__name__}: {exc}"

    def fail():
        raise exc

    with pytest.raises(Exception) as raised:
        in_child(fail)
    assert f"{type(raised.value).__name__}: {raised.value}" == message or (
        isinstance(raised.value, ChildFailed) and str(raised.value) == message
    )
    assert "kb.csv row 3" in str(raised.value)
    assert any("child process" in n for n in getattr(raised.value, "__notes__", []))


def test_validate_s_ratings_error_comes_back_whole():
    from cube.judges.annotation import RatingsError

    def fail():
        raise RatingsError(["r.csv row 2: score 7 above 5", "r.csv row 4: no item id"])

    with pytest.raises(Exception) as raised:
        in_child(fail)
    assert "r.csv row 2: score 7 above 5\nr.csv row 4: no item id" in str(raised.value)
    assert "RatingsError" in str(raised.value) or isinstance(raised.value, RatingsError)


def test_a_failed_fork_computes_in_this_process(monkeypatch):
    def no_fork() -> int:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", no_fork)
    assert in_child(os.getpid) == os.getpid()
    assert start_child(lambda: 42).result() == 42


def test_two_steps_in_one_child_share_what_the_first_built(tmp_path):
    # `start_steps`: the first value comes back while the child goes on with the second, which
    # sees what the first step left in the child (the checks' corpus, for the plan)
    from cube.config.forked import start_steps

    built: list[int] = []
    gate = tmp_path / "go"

    def first() -> int:
        built.append(os.getpid())
        return os.getpid()

    def then(pid: int) -> tuple[int, list[int]]:
        import time

        while not gate.exists():  # the second step waits for the caller: it runs after `first()`
            time.sleep(0.01)
        return pid, list(built)

    child = start_steps(first, then)
    pid = child.first()
    assert pid != os.getpid() and built == []
    gate.touch()
    assert child.result() == (pid, [pid])


def test_a_first_step_that_raises_ends_the_child_and_raises_here():
    from cube.config.forked import start_steps

    def then(_: object) -> int:
        raise AssertionError("the second step ran after the first one raised")

    child = start_steps(lambda: int("x"), then)
    with pytest.raises(ValueError, match="invalid literal") as raised:
        child.first()
    assert "in a child process of the runner" in "".join(raised.value.__notes__)


def test_the_second_step_s_exception_comes_back_with_its_result():
    from cube.config.forked import start_steps

    child = start_steps(lambda: 1, lambda v: [][v])
    assert child.first() == 1
    with pytest.raises(IndexError):
        child.result()


def test_a_child_killed_between_its_steps_raises_child_failed():
    from cube.config.forked import start_steps

    def then(_: object) -> int:
        os.kill(os.getpid(), signal.SIGKILL)
        return 0

    child = start_steps(lambda: "checked", then)
    assert child.first() == "checked"
    with pytest.raises(ChildFailed, match="signal 9"):
        child.result()
    dead = start_steps(lambda: os.kill(os.getpid(), signal.SIGKILL), then)
    with pytest.raises(ChildFailed, match="signal 9"):
        dead.first()


def test_without_fork_the_steps_run_here_the_second_when_asked(monkeypatch):
    from cube.config import forked

    monkeypatch.setattr(forked, "_FORKS", False)
    ran: list[str] = []
    child = forked.start_steps(
        lambda: ran.append("first") or 1, lambda v: ran.append("then") or v + 1
    )
    assert child.first() == 1 and ran == ["first"]
    assert child.result() == 2 and ran == ["first", "then"]


def test_a_child_killed_while_writing_a_large_first_value_raises_child_failed_and_is_reaped():
    # a first report over the pipe's 64 KB (many input errors): the child blocks writing it, and an
    # OOM kill then leaves a truncated frame, which is the child's death, not a pickle error
    import select

    from cube.config.forked import start_steps

    child = start_steps(lambda: [f"error {i} " * 10 for i in range(40000)], lambda v: 1)
    pid, read = child._pid, child._read
    assert select.select([read], [], [], 30)[0]  # the child has begun writing
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ChildFailed, match="signal 9"):
        child.first()
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(pid, os.WNOHANG)
    with pytest.raises(OSError):  # the pipe is closed
        os.fstat(read)


def test_the_second_step_waits_for_the_go_ahead_and_a_killed_child_never_runs_it(tmp_path):
    import time

    from cube.config.forked import start_steps

    ran = tmp_path / "ran"
    child = start_steps(lambda: 1, lambda v: ran.touch() or v + 1)
    assert child.first() == 1
    time.sleep(0.3)
    assert not ran.exists()  # no go-ahead yet
    child.go()
    assert child.result() == 2 and ran.exists()
    ran.unlink()
    stopped = start_steps(lambda: 1, lambda v: ran.touch())
    assert stopped.first() == 1
    stopped.kill()  # e.g. the run folder is locked
    time.sleep(0.3)
    assert not ran.exists()
