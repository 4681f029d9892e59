"""The run's kernels after an interrupt and once the run turns large (`cube.run.lanes`,
`cube.run.kernel.WarmKernel`), with stand-in kernels: no kernel starts again after `kill`, a stage
waiting for the warm-up gives up at once, `Lanes.kill` waits for the stage threads, the second
kernel closes as soon as the run is large, and off Linux (memory not measured) one kernel."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from cube.run import lanes as lanes_mod
from cube.run.kernel import KernelKilled, WarmKernel
from cube.run.lanes import Lanes
from tests import ROOT


class FakeKernel:
    def __init__(self) -> None:
        self.large = False
        self.closed = 0
        self.killed = threading.Event()
        self.km = object()

    def close(self) -> None:
        self.closed += 1
        self.km = None

    def kill(self) -> None:
        self.killed.set()
        self.km = None


def test_after_kill_a_kernel_never_starts_again(monkeypatch):
    kernel = WarmKernel(ROOT, [])
    started = []
    monkeypatch.setattr(
        "nbclient.NotebookClient.create_kernel_manager", lambda s: started.append(1)
    )
    kernel.kill()
    with pytest.raises(KernelKilled):
        kernel.execute(ROOT / "x.ipynb", ROOT / "y.ipynb", {})
    with pytest.raises(KernelKilled):
        kernel._start()
    assert started == []


class SilentClient:
    """A warm-up whose reply never comes."""

    def get_shell_msg(self, timeout: float) -> None:
        time.sleep(timeout)
        raise queue.Empty

    def stop_channels(self) -> None:
        pass


@pytest.mark.timeout(30)
def test_a_stage_waiting_for_the_warm_up_gives_up_when_the_run_is_killed():
    kernel = WarmKernel(ROOT, [])
    kernel._warming = SilentClient()
    threading.Timer(0.3, kernel.kill).start()
    t0 = time.monotonic()
    with pytest.raises(KernelKilled):
        kernel._warmed()
    assert time.monotonic() - t0 < 5  # not WARM_UP_TIMEOUT_S


@pytest.mark.timeout(30)
def test_lanes_kill_waits_for_the_stage_threads():
    first = FakeKernel()
    lanes = Lanes(first)  # type: ignore[arg-type]
    ended = threading.Event()

    def stage(kernel):
        kernel.killed.wait(20)
        time.sleep(0.3)  # the stage's own unwinding after its kernel died
        ended.set()

    job = lanes.submit(stage)
    lanes.kill()
    assert ended.is_set() and not job._thread.is_alive()


@pytest.mark.timeout(30)
def test_when_the_run_turns_large_every_idle_kernel_but_the_first_closes():
    first, second = FakeKernel(), FakeKernel()
    lanes = Lanes(first)  # type: ignore[arg-type]
    lanes.kernels.append(second)  # type: ignore[arg-type]

    def large_stage(kernel):
        kernel.large = True

    lanes.submit(large_stage).wait()  # in the first kernel, while the second idles
    assert second.closed and not first.closed
    # from now on one kernel: a stage waits for the first
    assert lanes._free() is first


def test_off_linux_the_run_keeps_to_one_kernel(monkeypatch):
    warmed = []
    monkeypatch.setattr(WarmKernel, "warm_up", lambda self: warmed.append(self))
    monkeypatch.setattr(WarmKernel, "measured", staticmethod(lambda: False))
    lanes = Lanes(WarmKernel(ROOT, []))
    lanes.warm_second()
    assert len(lanes.kernels) == 1 and warmed == []
    monkeypatch.setattr(WarmKernel, "measured", staticmethod(lambda: True))
    lanes.warm_second()
    assert len(lanes.kernels) == 2 and len(warmed) == 1


def test_a_kernels_memory_is_measured_only_on_linux(monkeypatch):
    monkeypatch.setattr("sys.platform", "darwin")
    assert not WarmKernel.measured()
    monkeypatch.setattr("sys.platform", "linux")
    assert WarmKernel.measured()
    assert lanes_mod.JOIN_S > 0
