"""One warm Jupyter kernel for the stages of a run (issue 15: `make run`'s stage time).

Starting a kernel and importing `cube`, pandas, scipy and matplotlib in it cost ~4-6 s per
notebook, most of the default run's stage time. `WarmKernel` starts ONE kernel for a run (lazily,
when the first stage executes) and papermill executes every stage in it through the `cube-warm`
engine, which first resets the kernel as a fresh one would be: the user namespace and output
history are cleared (`InteractiveShell.reset(new_session=True)`, so execution counts restart at 1),
open matplotlib figures are closed, cube's memoised functions are emptied, the working directory
is restored, and garbage is collected and freed memory returned (glibc, Arrow's pool); what
survives is frozen (`gc.freeze`: no later collection walks the imports again). Imported
modules stay imported (that is the saving), so no notebook sees another's variables; the notebooks
themselves are unchanged and still run alone in a fresh kernel (Jupyter, papermill). Memory: a
kernel still holding > `RESTART_RSS` after a stage is replaced, and once a stage has grown it by
> `LARGE_STAGE_GROWTH`, or peaked > `LARGE_OVER_BASE` above what it held after its first stage
(large data, e.g. the paper's scale) every later stage gets a fresh kernel, except after a light
stage (`LIGHT_STAGE_DATA`) or one whose kernel holds little after its reset (`REUSE_RSS`), whose
kernel the next stage takes, so the run's peak is its largest stage's, not that plus what the
shared kernel holds (`history` records each stage's memory and its kernel's CPU). Each stage
keeps its own executed notebook, papermill metadata, failure (a failed stage stops the stages
reading it: `cube.run.execute`) and interrupt handling (the kernel is a child process:
`cube.run.state.kill_child_kernels` kills it). A run of a small knowledge base executes the stages
that do not read each other side by side in a second `WarmKernel` (`cube.run.lanes`). Issue 41
(an 8-question run in seconds): `cube run` starts the kernel early and has it import what the
stages share (`WarmKernel.warm_up`) while the runner makes the fingerprints and the plan on the
other core, and papermill writes a stage's notebook when it ends rather than at every cell's start
and end (`SAVE_EVERY_S`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from pathlib import Path
from typing import Any

ENGINE = "cube-warm"
KERNEL_NAME = "python3"
# A kernel still holding more than this after a stage and its reset is replaced by a fresh one
# (a fresh kernel with cube's imports holds ~200-250 MB); keeps the run's peak memory that of
# its largest stage.
RESTART_RSS = 600 * 2**20
# A stage that grew the kernel by more than this (its peak over its starting memory) says the run's
# data are large: each later stage then gets a fresh kernel, so that no stage's peak adds to what
# the shared kernel holds (imports, allocator pools). Then a kernel start costs a few seconds
# against stages of tens; the default run's stages grow it by < 300 MB and all share one kernel.
LARGE_STAGE_GROWTH = 350 * 2**20
# The same, measured from what the kernel held after its first stage (cube's imports): a run whose
# stages each grow the kernel a little but together keep it large is large too (the paper's scale:
# 02 peaks ~410 MB above that, then 03 started warm and peaked at 0.9-1.15 GB). The default run
# (300 items) peaks at most ~280 MB above it (04, after 02 loaded jieba); tripping it costs only
# kernel start-ups.
LARGE_OVER_BASE = 350 * 2**20
# In a large run, a stage whose peak stayed within this of what the kernel holds after the stage's
# reset (its imports) hands its kernel to the next stage instead of closing it: a light stage
# leaves no fragmented heap behind, and the next stage saves a kernel start and the imports the
# two share (~5-7 s of CPU each at the paper's scale: 05, 09 and 11 peak < 100 MB above that).
LIGHT_STAGE_DATA = 150 * 2**20
# A kernel holding at most this after a stage's reset is handed on, however much the stage held at
# its peak (above it, after a stage that was not light, the next stage gets a fresh kernel, large
# run or not): it holds hardly more than a fresh kernel does once a stage has
# imported cube's modules (~250-300 MB at the paper's scale: 05's fresh kernel 256 MB after its
# reset, 06 and 07 after theirs 288 and 299 MB), so the next stage peaks at most ~50 MB above
# what it would in a fresh kernel, and saves the kernel's start and imports (~2-3 s of CPU).
REUSE_RSS = 320 * 2**20


# Python's cyclic collector in the kernels and the runner (`cube.cli.run`): a young collection every
# 50,000 container allocations, not Python's 700, the older ones every 20 of the one below. A
# stage's or the plan's Python objects (the rubric's records, ~270k planned requests) are freed by
# refcounting as they go; only cyclic garbage waits longer, while every collection walked the
# objects still alive again (stage 03's scoring alone: 13.6 -> 10.2 s with collection paused).
GC_THRESHOLDS = (50_000, 20, 20)

# Run once in a fresh kernel before its first stage: the process state a fresh kernel starts with,
# restored by every reset (`reset_code`). matplotlib and cube's font set-up are imported here so
# that their rcParams are those of a fresh kernel that imported them, not what a stage left behind.
SNAPSHOT_CODE = "\n".join(
    [
        "import sys as _s",
        "_s._cube_fresh_state = {}",
        "try:",
        "    import matplotlib.pyplot as _p, cube.pages.fonts",
        "    _s._cube_fresh_state['rc'] = dict(_p.rcParams.copy())",
        "except Exception:",  # no matplotlib or cube here: nothing of theirs to restore
        "    pass",
        "del _s",
        # the kernel's own objects and these imports live as long as the kernel: frozen, no garbage
        # collection walks them again (see `reset_code`)
        "__import__('gc').collect()",
        "__import__('gc').freeze()",
        f"__import__('gc').set_threshold{GC_THRESHOLDS}",  # see GC_THRESHOLDS
    ]
)


# What every stage imports (pandas, scipy, cube's run and figure modules: ~2-3 s of CPU), imported
# by `WarmKernel.warm_up` while the runner makes the plan and the fingerprints on the other core. No
# module here changes process state a stage reads at import (matplotlib's rcParams are set by
# `cube.pages.fonts`, which every kernel's `SNAPSHOT_CODE` imports anyway); a stage imports what
# it needs itself, so a module missing here costs time only.
WARM_UP_CODE = "\n".join(
    [
        "try:",
        "    import numpy, pandas, scipy.stats",
        "    import cube.run.evaluate, cube.run.pipeline, cube.run.record, cube.pages.plots",
        "except Exception:",  # the stage that needs it says why
        "    pass",
    ]
)
WARM_UP_TIMEOUT_S = 300
POLL_S = 0.1  # how often a stage waiting for the warm-up checks for an interrupt (s)


class KernelKilled(RuntimeError):
    """A stage asked a kernel the run's interrupt killed to start or execute."""


def reset_code(cwd: Path) -> str:
    """What runs (silently, outside the history) in the kernel before each stage. Besides the
    namespace, figures, cwd and caches, the state a fresh kernel would start with is restored:
    every module's 'warned once' registry is emptied (a warning a stage raises shows on its own
    page even if an earlier stage raised it from the same line), matplotlib's rcParams are those
    after its and cube's font set-up imports (`SNAPSHOT_CODE`), pandas' options their defaults,
    and the global `random` / `numpy.random` generators are reseeded from the OS as a fresh
    process's are. Not restored (libraries change them when imported, which a restore would undo):
    warnings filters, `os.environ`, `sys.path`; nor attributes set on imported modules or words
    added to jieba's dictionary (`cube.kb.text.segment` caches jieba's cuts). No notebook of the
    sequence changes any of these; a notebook of your own added to the sequence should not
    either."""
    return "\n".join(
        [
            "import sys as _s, os as _o",
            "if 'matplotlib.pyplot' in _s.modules: _s.modules['matplotlib.pyplot'].close('all')",
            "_st = getattr(_s, '_cube_fresh_state', None)",
            "for _m in list(_s.modules.values()):",
            "    _r = getattr(_m, '__warningregistry__', None)",
            "    if isinstance(_r, dict):",
            "        _r.clear()",
            # as matplotlib's rc_context restores them
            "if _st and 'rc' in _st and 'matplotlib' in _s.modules:",
            "    dict.update(_s.modules['matplotlib'].rcParams, _st['rc'])",
            "if 'pandas' in _s.modules:",
            "    with _s.modules['warnings'].catch_warnings():",
            "        _s.modules['warnings'].simplefilter('ignore')",
            "        _s.modules['pandas'].reset_option('all')",
            "__import__('random').seed()",
            "if 'numpy' in _s.modules: _s.modules['numpy'].random.seed()",
            f"_o.chdir({str(cwd)!r})",
            # cube's own memoised functions (e.g. the rubric's tokenisations, ~0.3 GB at the paper's
            # scale) are emptied as a fresh kernel's would be: no stage sees what another computed
            "_f = __import__('functools')._lru_cache_wrapper",
            "for _m in [m for n, m in list(_s.modules.items()) if n == 'cube' or "
            "n.startswith('cube.')]:",
            "    for _c in [v for v in vars(_m).values() if isinstance(v, _f)]:",
            "        _c.cache_clear()",
            "get_ipython().reset(new_session=True)",  # drops the names above too
            "__import__('gc').collect()",
            # What survived the collection (modules a stage imported, their tables) lives as long
            # as the kernel: frozen (`gc.freeze`), so that no later collection walks it again. A
            # full collection over a kernel holding pandas, scipy and matplotlib cost ~0.15 s of
            # CPU, twice per reset (IPython's reset collects too) and in every stage's own
            # collections: ~6 s of an 8-question run's 21 s of kernel CPU. Garbage is still freed:
            # a stage's own objects are not frozen until it has ended and been collected.
            "__import__('gc').freeze()",
            # the collector as a fresh kernel has it, whatever the stage set (`GC_THRESHOLDS`)
            f"__import__('gc').set_threshold{GC_THRESHOLDS}",
            "__import__('gc').enable()",
            "_s = __import__('sys')",
            "if 'pyarrow' in _s.modules: "
            "_s.modules['pyarrow'].default_memory_pool().release_unused()",
            "try:",  # glibc keeps freed heap pages; give them back so the next stage starts small
            "    __import__('ctypes').CDLL('libc.so.6').malloc_trim(0)",
            "except (OSError, AttributeError):",
            "    pass",
            "del _s",
        ]
    )


# papermill writes the whole executed notebook (nbformat, validated) when every cell starts and
# ends: ~400 writes for a run's stages, ~1.5 s of the runner's CPU. In the warm kernel's engine a
# cell's start or end writes it only when the last write is this old; the notebook is written
# whole when it ends (completed, failed or interrupted), as papermill's own engine writes it.
SAVE_EVERY_S = 10.0


def _now_and_then(nb_man: Any, save: Any) -> Any:
    """`save`, skipped while the notebook's last write is younger than `SAVE_EVERY_S`."""

    def save_now_and_then(**kwargs: Any) -> None:
        last = getattr(nb_man, "last_save_time", None)
        if last is None or (nb_man.now() - last).total_seconds() >= SAVE_EVERY_S:
            save(**kwargs)

    return save_now_and_then


def _register_engine() -> None:
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines

    class _ResetClient(PapermillNotebookClient):
        """papermill's client, resetting the shared kernel before the notebook's first cell."""

        def __init__(self, nb_man: Any, reset: str = "", fresh: bool = True, **kw: Any) -> None:
            super().__init__(nb_man, **kw)
            self._reset, self._fresh = reset, fresh

        def _run_reset(self) -> str:
            return self._run_silently(self._reset)

        def _run_silently(self, code: str) -> str:
            """Run `code` outside the history; '' when it succeeded, else why it did not."""
            assert self.kc is not None
            msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
            reply = self.wait_for_reply(msg_id)
            content = (reply or {}).get("content", {})
            return (
                ""
                if content.get("status") == "ok"
                else f"{content.get('ename')}: {content.get('evalue')}"
            )

        def papermill_execute_cells(self) -> None:
            why = self._run_silently(SNAPSHOT_CODE) if self._fresh else self._run_reset()
            if why:  # a previous notebook ran here; its reset at the end is checked again
                raise RuntimeError(f"preparing the run's kernel failed: {why}")
            super().papermill_execute_cells()
            with contextlib.suppress(
                Exception
            ):  # frees the notebook's memory now; never fails the stage
                self._run_reset()

    class WarmEngine(NBClientEngine):
        """papermill's nbclient engine on a kernel it does not own (`km=`): the kernel stays up;
        the notebook's kernel client is closed when the notebook ends."""

        @classmethod
        def execute_managed_notebook(
            cls,
            nb_man: Any,
            kernel_name: str,
            log_output: bool = False,
            stdout_file: Any = None,
            stderr_file: Any = None,
            start_timeout: int = 60,
            execution_timeout: int | None = None,
            **kwargs: Any,
        ) -> Any:
            kwargs = {
                k: v
                for k, v in kwargs.items()
                if k not in ("input_path", "timeout", "startup_timeout")
            }
            real_save = nb_man.save
            nb_man.save = _now_and_then(nb_man, real_save)
            client = _ResetClient(
                nb_man,
                timeout=execution_timeout,
                startup_timeout=start_timeout,
                kernel_name=kernel_name,
                log_output=log_output,
                stdout_file=stdout_file,
                stderr_file=stderr_file,
                **kwargs,
            )
            try:
                return client.execute()
            finally:
                nb_man.save = real_save  # papermill's `notebook_complete` saves it, whatever ended
                if client.kc is not None:
                    client.kc.stop_channels()

    papermill_engines.register(ENGINE, WarmEngine)


class WarmKernel:
    """A kernel started on first use and shut down by `close` (or the `with` block's end)."""

    def __init__(self, cwd: Path, extra_arguments: list[str]) -> None:
        self.cwd = Path(cwd)
        self.extra_arguments = list(extra_arguments)
        self.km: Any = None
        self.used = 0
        self.large = False  # set by a stage that grew the kernel by > LARGE_STAGE_GROWTH
        self.base = 0  # the kernel's memory after its first stage (imports), 0 before
        self._warming: Any = None  # the client of `warm_up`'s request, until its reply
        # set by `kill` (an interrupt): no kernel starts again, a waiting stage thread gives up
        self.killed = threading.Event()
        # per executed stage: its notebook, whether its kernel was fresh, the kernel's memory when
        # it began, its peak, after its reset (bytes), whether the kernel was then closed, and the
        # kernel's CPU seconds (a fresh kernel's start and imports included)
        self.history: list[dict[str, Any]] = []

    def __enter__(self) -> WarmKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        """Start the kernel with the current environment (the caller sets the kernel's
        variables)."""
        import nbformat
        from nbclient import NotebookClient

        if self.killed.is_set():
            raise KernelKilled("the run was interrupted: no kernel starts again")
        _register_engine()
        starter = NotebookClient(
            nbformat.v4.new_notebook(),
            kernel_name=KERNEL_NAME,
            extra_arguments=self.extra_arguments,
        )
        self.km = starter.create_kernel_manager()
        # Memory (results are unchanged; a value the user set is kept): Arrow allocates from glibc's
        # heap, not its own mimalloc pool, so that the memory a stage's tables free is reused by its
        # Python objects and returned by the reset's malloc_trim (stage 06 at the paper's scale:
        # 874 -> 770 MB); and glibc's mmap threshold stays at its 128 KiB default instead of
        # growing after each freed large array, so that freed tables and arrays go back to the
        # system rather than fragmenting the heap (06: 770 -> 685 MB, 03: 729 -> 680 MB).
        env = {**os.environ}
        env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        env.setdefault("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
        starter.start_new_kernel(cwd=str(self.cwd), env=env)

    def warm_up(self, code: str = WARM_UP_CODE) -> None:
        """Start the kernel now and have it import what the stages share (`WARM_UP_CODE`) without
        waiting: the runner goes on (its plan, the stages' fingerprints) while the kernel imports,
        and the first stage waits for the imports to end. The kernel's environment is the caller's
        now (as for `_start`)."""
        if self.km is None:
            self._start()
        kc = self.km.blocking_client()
        kc.start_channels()
        kc.execute(f"{SNAPSHOT_CODE}\n{code}", silent=True, store_history=False, allow_stdin=False)
        self._warming = kc

    def _warmed(self) -> None:
        """Wait for `warm_up`'s imports to end (its reply; a failure is the stage's to say)."""
        kc, self._warming = self._warming, None
        if kc is None:
            return
        # in short steps, so that `kill` (an interrupt) ends the wait at once
        deadline = time.monotonic() + WARM_UP_TIMEOUT_S
        while not self.killed.is_set() and time.monotonic() < deadline:
            try:
                kc.get_shell_msg(timeout=POLL_S)
                break
            except queue.Empty:
                continue
            except Exception:  # noqa: BLE001  the channels stopped: the stage says what failed
                break
        with contextlib.suppress(Exception):
            kc.stop_channels()
        if self.killed.is_set():
            raise KernelKilled("the run was interrupted while the kernel warmed up")

    def execute(self, notebook: Path, output: Path, parameters: dict[str, Any]) -> None:
        """papermill `execute_notebook` of one stage in the warm kernel (raises as papermill
        does)."""
        import papermill as pm

        if self.killed.is_set():
            raise KernelKilled("the run was interrupted: no stage executes again")
        self._warmed()
        if self.km is None or not self.alive():
            self.close()
            self._start()
        fresh = not self.used
        self.used += 1
        self._reset_peak()
        before, cpu0 = self.rss(), 0.0 if fresh else self.cpu()
        pm.execute_notebook(
            str(notebook),
            str(output),
            parameters=parameters,
            cwd=str(self.cwd),
            progress_bar=False,
            log_output=False,
            kernel_name=KERNEL_NAME,
            engine_name=ENGINE,
            km=self.km,
            reset=reset_code(self.cwd),
            fresh=fresh,
        )
        stage = {"stage": Path(notebook).stem, "fresh": fresh, "before": before}
        self.history.append(stage)
        if self._measured(stage, cpu0):
            self.close()

    def _measured(self, stage: dict[str, Any], cpu0: float) -> bool:
        """After a stage: its peak, what the kernel holds after the reset and its CPU (into
        `stage`), whether the run is large, and whether the kernel is to be closed (returned)."""
        peak, before = self.peak_rss(), stage["before"]
        if peak - before > LARGE_STAGE_GROWTH or (self.base and peak - self.base > LARGE_OVER_BASE):
            self.large = True
        after = self.rss()
        if stage["fresh"]:
            self.base = after
        # a light stage (its data never above LIGHT_STAGE_DATA over what the kernel holds after its
        # reset: its imports) leaves no heap behind, so it hands its kernel on even in a large run
        light = peak - after <= LIGHT_STAGE_DATA
        # large data (unless the stage was light or its kernel holds little after its reset), or
        # what the stage left behind: the next stage starts afresh
        # whatever the run's size: in a run not (yet) found large, a stage that held data and left
        # its kernel above REUSE_RSS would otherwise hand the next stage that heap (the paper's
        # scale once 03's growth fell under LARGE_STAGE_GROWTH: 03 left 389 MB, 04 peaked 648)
        closed = (not light and after > REUSE_RSS) or after > RESTART_RSS
        stage.update(peak=peak, after=after, closed=closed, cpu_s=self.cpu() - cpu0)
        return closed

    def _reset_peak(self) -> None:
        """Reset the kernel's peak memory (VmHWM) to its current size, so that `peak_rss` after a
        stage is that stage's, not an earlier stage's (Linux: clear_refs 5; elsewhere a no-op)."""
        proc = self._process()
        with contextlib.suppress(AttributeError, OSError):
            with open(f"/proc/{proc.pid}/clear_refs", "w", encoding="ascii") as f:
                f.write("5")

    @staticmethod
    def measured() -> bool:
        """Whether a kernel's peak memory is measured here (Linux's /proc): elsewhere `large` never
        trips, so the run keeps to one kernel (`cube.run.lanes`)."""
        import sys

        return sys.platform.startswith("linux")

    def peak_rss(self) -> int:
        """The kernel process's peak resident memory since the stage began (bytes; 0 when
        unknown)."""
        proc = self._process()
        try:
            with open(f"/proc/{proc.pid}/status", encoding="ascii") as f:
                return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
        except (AttributeError, OSError, StopIteration, ValueError):
            return 0

    def rss(self) -> int:
        """Resident memory of the kernel process (bytes; 0 when it is not running)."""
        import psutil

        proc = self._process()
        try:
            return psutil.Process(proc.pid).memory_info().rss if proc is not None else 0
        except psutil.Error:
            return 0

    def cpu(self) -> float:
        """CPU seconds the kernel process has used since it started (0 when it is not running):
        a fresh kernel's first stage counts its start and imports."""
        import psutil

        proc = self._process()
        try:
            times = psutil.Process(proc.pid).cpu_times() if proc is not None else None
        except psutil.Error:
            return 0.0
        return times.user + times.system if times is not None else 0.0

    def _process(self) -> Any:
        return getattr(getattr(self.km, "provisioner", None), "process", None)

    def alive(self) -> bool:
        proc = self._process()
        return proc is not None and proc.poll() is None

    def close(self) -> None:
        """Shut the kernel down (graceful: the event loop of the last notebook has finished)."""
        if self.km is None:
            return
        from jupyter_core.utils import run_sync

        km = self.km
        with contextlib.suppress(Exception):  # already dead (crashed, killed)
            run_sync(km.shutdown_kernel)(now=True)
        self._end()

    def kill(self) -> None:
        """Kill the kernel without running the event loop: after an interrupt, the interrupted
        notebook's cell task is still pending on it and would report the dead kernel on stderr.
        No kernel starts again (`execute` raises `KernelKilled`)."""
        self.killed.set()
        self._end()

    def _end(self) -> None:
        if self._warming is not None:
            with contextlib.suppress(Exception):
                self._warming.stop_channels()
            self._warming = None
        if self.km is None:
            return
        km, self.km, self.used, self.base = self.km, None, 0, 0
        proc = getattr(getattr(km, "provisioner", None), "process", None)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                group = os.getpgid(proc.pid)
                if group != os.getpgid(
                    0
                ):  # the kernel has a session of its own: end what it started
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=5)
        with contextlib.suppress(Exception):
            km.cleanup_connection_file()
            km.cleanup_ipc_files()
