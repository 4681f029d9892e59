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
