"""Two warm kernels for the stages that do not read each other (issue 41: an 8-question run in
seconds).

A small run is mostly serial: one kernel executes the stages one after another while the other
core idles. After stage 03 every analysis stage (04-11) reads only 03's data (10 reads 06's
decision too, `cube.run.stages`), so they may execute side by side. `Lanes` is the run's kernels:
the first (`cube.run.kernel.WarmKernel`, started and warmed up by `cube run` as before) and, in a
run of a small knowledge base (`SECOND_KERNEL_ITEMS`), a second one that starts and imports on the
other core while the stage before the fan-out runs (`warm_second`). Each stage executes on a
thread of the runner in whichever kernel is free (papermill, in that kernel, exactly as before:
the reset makes a stage's kernel that of a fresh one whichever stages ran in it before).

Memory: a second kernel doubles the kernels' memory, so it is started only for a small knowledge
base, used only while no kernel has found the run's data large (`WarmKernel.large`), and closed as
soon as one has: a large run's peak stays that of its largest stage.

What `Lanes` does not decide: which stage may start (the runner waits for the stages a stage
reads) and in what order results are reported (the runner reports them in the sequence's order,
so logs and summaries do not depend on which kernel finished first).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from cube.run.kernel import WarmKernel

# Only a run whose knowledge base has at most this many items starts a second kernel (while the
# stage before the fan-out, 02, executes, so that it is warm when the fan-out begins): the default
# run has 300. A larger run's stages execute one at a time, whatever its first stages showed: at
# the paper's scale (6,111 items) 02 stays under the `large` thresholds and only 03 and 04 cross
# them, so a second kernel started for 03 ran it beside 00 and handed 04 a kernel still holding
# 02's heap (04 peaked at 632 MB, 470 in a fresh one). Its CPU is what counts there, and side by
# side saves none.
SECOND_KERNEL_ITEMS = 2_000

# How long `Lanes.kill` waits for the stage threads to end after their kernels were killed (s)
JOIN_S = 10.0

# How often a waiting runner wakes (s): signals (Ctrl-C) are handled by the main thread between
# waits, never blocked behind a stage.
POLL_S = 0.1


class StageJob:
    """One stage executing on a runner thread: `done` once `fn` returned or raised."""

    def __init__(self, fn: Callable[[WarmKernel], Any], kernel: WarmKernel, lanes: Lanes) -> None:
        self.kernel = kernel
        self.result: Any = None
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._fn, self._lanes = fn, lanes
        self._thread = threading.Thread(target=self._run, daemon=True, name="cube-stage")

    def _run(self) -> None:
        try:
            self.result = self._fn(self.kernel)
        except BaseException as exc:  # noqa: BLE001  handed to the runner, which re-raises
            self.error = exc
        finally:  # released first: a runner seeing the stage done finds its kernel free
            try:
                self._lanes.release(self.kernel)
            finally:
                self._event.set()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self) -> Any:
        """The stage's result (re-raising what it raised), waiting in short steps."""
        while not self._event.wait(POLL_S):
            pass
        if self.error is not None:
            raise self.error
        return self.result


class Lanes:
    """The run's one or two kernels and which of them is executing a stage."""

    def __init__(self, first: WarmKernel) -> None:
        self.kernels = [first]
        self._busy: set[int] = set()
        self._cond = threading.Condition()
        self.jobs: list[StageJob] = []

    @property
    def large(self) -> bool:
        return any(k.large for k in self.kernels)

    def warm_second(self) -> None:
        """Start the second kernel now (its imports on the other core), unless there is one or the
        run's data are large, or a kernel's memory is not measured here (off Linux `large` never
        trips: one kernel, as before). The caller's environment is the kernel's (as for
        `warm_up`)."""
        if len(self.kernels) > 1 or self.large or not WarmKernel.measured():
            return
        first = self.kernels[0]
        second = WarmKernel(first.cwd, first.extra_arguments)
        self.kernels.append(second)
        second.warm_up()

    def _free(self) -> WarmKernel | None:
        usable = self.kernels[:1] if self.large else self.kernels
        return next((k for k in usable if id(k) not in self._busy), None)

    def submit(self, fn: Callable[[WarmKernel], Any]) -> StageJob:
        """Run `fn(kernel)` on a thread in the first free kernel (waiting for one)."""
        with self._cond:
            while (kernel := self._free()) is None:
                self._cond.wait(POLL_S)
            self._busy.add(id(kernel))
        job = StageJob(fn, kernel, self)
        self.jobs.append(job)
        job._thread.start()
        return job

    def release(self, kernel: WarmKernel) -> None:
        with self._cond:
            self._busy.discard(id(kernel))
            if self.large:  # large data: one stage at a time from now on, in the first kernel
                for k in self.kernels[1:]:
                    if id(k) not in self._busy:
                        k.close()
            self._cond.notify_all()

    def close(self) -> None:
        for k in self.kernels:
            with contextlib.suppress(Exception):
                k.close()

    def kill(self) -> None:
        """Kill every kernel (none starts again: `WarmKernel.kill`) and wait, bounded, for the
        stage threads to end, so that none is left running after the runner returns."""
        for k in self.kernels:
            with contextlib.suppress(Exception):
                k.kill()
        deadline = time.monotonic() + JOIN_S
        for job in self.jobs:
            job._thread.join(max(0.0, deadline - time.monotonic()))
