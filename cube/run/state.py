"""What keeps a run folder sound around `cube run`: its lock, its staging copy, interrupts and
the page that tells how the last attempt went.

- **Lock.** `outputs/<run>/.lock` (JSON: pid, host, start time, command) is created exclusively
  at the start of `cube run` and removed at its end. A second `cube run` on the same folder gets
  `RunLocked` naming who holds it (the CLI exits 2). A lock left by a process that is gone
  (same host, dead pid) is taken over with a note; the check and the takeover hold a flock on
  the run folder, so two runs finding the same stale lock never both take it over.
- **Staging.** Stages never write into the published run: they run in `outputs/<run>/.staging/`,
  a copy of the published state (params.yaml, results.json, manifest.json, data/, tables/,
  figures/, notebooks/ with their fingerprints). The annotation sheet is not staged: it is
  written in the published `annotation/` (only when absent) and raters fill it in place, so a
  commit never replaces their work. Only when every selected stage succeeds is the
  staging copy committed (each entry moved over the published one), so a failing re-run leaves
  the last good params, results, tables and index byte-identical. A failed or interrupted
  attempt keeps its staging folder: the next run with the same params resumes from it (stages it
  completed are up to date), a run with other params starts again from the published state.
  A staging copy is complete only once its `.staged` marker is written (last), so a copy cut
  short by an interrupt is made again, never resumed.
- **Interrupts.** SIGINT/SIGTERM raise `RunInterrupted`; before that, every child process group
  (the notebook kernel runs in its own session) is killed, so no kernel keeps sending requests.
  During the commit they are held back until it is done.
- **Last attempt.** `report/last_run.html` (linked from every index) says how the last attempt
  ended: committed, failed (stage and error) or interrupted, and how to resume.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cube.config.runpaths import LAST_RUN  # the run layout owns the name
from cube.pages.escape import escape_text as escape

STAGING = ".staging"
STAGED_MARKER = ".staged"  # written last by prepare_staging: only a complete copy is ever resumed
LOCK = ".lock"
# Published entries that a run replaces when it commits (report/ is re-rendered from them).
# Not annotation/: raters fill its sheet in place, so it is written in the published folder
# (`RunPaths.annotation`) and never replaced by a commit.
STAGED = (
    "params.yaml",
    "results.json",
    "manifest.json",
    "data",
    "tables",
    "figures",
    "notebooks",
    "compare",
)


class RunLocked(RuntimeError):
    """Another `cube run` holds the run folder."""


class RunInterrupted(BaseException):  # noqa: N818 (like KeyboardInterrupt: not an error of the run)
    """SIGINT or SIGTERM arrived during `cube run`."""

    def __init__(self, signame: str = "SIGINT"):
        super().__init__(signame)
        self.signame = signame


# --------------------------------------------------------------------------------------- lock
def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def run_lock(root: Path, log=print) -> Iterator[Path]:
    """Hold `<root>/.lock` for the block; raise `RunLocked` naming the holder if it is taken."""
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK
    mine = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
    }
    with _guard(
        root
    ):  # check, take over and create under one mutex: two runs never both take it over
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except OSError as err:
                if err.errno != errno.EEXIST:
                    raise
                try:
                    held = json.loads(lock.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    held = {}
                pid, host = held.get("pid"), held.get("host")
                if isinstance(pid, int) and host == mine["host"] and not _pid_alive(pid):
                    log(
                        f"[cube] {lock}: taking over a stale lock of pid {pid} (started "
                        f"{held.get('started')}), which is no longer running"
                    )
                    lock.unlink(missing_ok=True)
                    continue
                raise RunLocked(
                    f"{root}: another `cube run` holds this run folder (pid {pid} on {host}, "
                    f"started {held.get('started')}: {held.get('command', '?')}). Wait for it to "
                    f"finish, or remove {lock} if that process is gone."
                ) from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(mine, f)
            break
    try:
        yield lock
    finally:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(lock.read_text(encoding="utf-8")).get("pid") == os.getpid():
                lock.unlink()


@contextlib.contextmanager
def _guard(root: Path) -> Iterator[None]:
    """An exclusive flock on the run folder itself for the block: taking over a stale lock is
    read, unlink, create, and two runs doing that at once would both get it. The kernel drops
    the flock when its process dies, so the guard itself never goes stale (and adds no file)."""
    from cube.config.jsonfile import folder_lock

    with folder_lock(root):
        yield


# ------------------------------------------------------------------------------------ staging
def prepare_staging(root: Path, params_yaml: str, log=print) -> Path:
    """The staging folder for this attempt: the one a failed or interrupted attempt with the same
    resolved params left (to resume it), else a fresh copy of the published state."""
    staging = root / STAGING
    previous = staging / "params.yaml"
    if (
        staging.is_dir()
        and (staging / STAGED_MARKER).is_file()
        and previous.is_file()
        and previous.read_text(encoding="utf-8") == params_yaml
    ):
        log(f"[cube] resuming the unfinished attempt in {staging}")
        return staging
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for name in STAGED:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, staging / name, copy_function=_link_or_copy)
        elif src.is_file():
            shutil.copy2(src, staging / name)
    (staging / STAGED_MARKER).touch()  # last: a copy cut short by an interrupt is never resumed
    return staging


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link a parquet table into staging instead of copying it: `Run.save` replaces a table
    by writing `<name>.parquet.tmp` and renaming it, never in place, so the published file is never
    modified through the link, and a paper-scale `data/` (hundreds of MB) costs nothing to stage.
    Everything else (CSV, PNG, notebooks, written in place) is copied."""
    if src.endswith(".parquet"):
        with contextlib.suppress(OSError):
            os.link(src, dst)
            return
    shutil.copy2(src, dst)


COMMITTING = ".committing"


def commit_staging(root: Path) -> None:
    """Replace the published entries by the staged ones (each a rename), then drop staging.

    SIGINT and SIGTERM are held back until it is done (a Ctrl-C then interrupts right after),
    so an interrupt never leaves half the entries replaced. A marker makes it restartable
    anyway: if the process is killed half-way, `finish_interrupted_commit` (called at the start
    of the next run) moves the remaining staged entries over."""
    with signals_deferred():
        _commit(root)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block; one that arrived meanwhile is raised after it.

    Python-level handlers, not a signal mask: a mask is per thread, and a signal sent to the
    process would reach another thread (a client's I/O thread), whose handler runs anyway."""
    if (
        threading.current_thread() is not threading.main_thread()
    ):  # only the main thread handles signals
        yield
        return
    pending: list[int] = []
    old = {
        s: signal.signal(s, lambda signum, _frame: pending.append(signum))
        for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if pending:
            signal.raise_signal(pending[0])  # now handled as usual (e.g. RunInterrupted)


def _commit(root: Path) -> None:
    staging = root / STAGING
    (staging / COMMITTING).touch()
    old = root / ".replaced"
    old.mkdir(exist_ok=True)
    for name in STAGED:
        src = staging / name
        if not src.exists():
            continue
        if (root / name).exists():
            if (old / name).exists():
                _remove(old / name)
            (root / name).rename(old / name)
        src.rename(root / name)
    shutil.rmtree(old)
    shutil.rmtree(staging)


def finish_interrupted_commit(root: Path, log=print) -> None:
    """Complete a commit that a killed process left half-done (every entry is either moved or
    not)."""
    if (root / STAGING / COMMITTING).exists():
        log(f"[cube] {root}: completing the publication that an earlier run left unfinished")
        commit_staging(root)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


# --------------------------------------------------------------------------------- interrupts
def kill_child_kernels() -> int:
    """Kill every child process of this one with its process group (a notebook kernel runs in a
    session of its own, and anything it started is in that group). Returns how many were found."""
    import psutil

    children = psutil.Process().children(recursive=True)
    own_group = os.getpgid(0)
    for child in children:
        with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
            group = os.getpgid(child.pid)
            if group != own_group:
                os.killpg(group, signal.SIGKILL)
            else:
                child.kill()
    psutil.wait_procs(children, timeout=5)
    return len(children)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM kill the kernels, then raise `RunInterrupted`."""

    def handler(signum: int, _frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not break the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_child_kernels()
        raise RunInterrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# ------------------------------------------------------------------------------- last attempt
def write_last_run(
    report_dir: Path, *, status: str, params_path: Path, stages: list[dict[str, Any]], message: str
) -> Path:
    """`report/last_run.html`: how the last attempt ended (committed | failed | interrupted)."""
    from cube.config.project import scrub_local_paths

    report_dir.mkdir(parents=True, exist_ok=True)
    message = scrub_local_paths(message)
    stages = [{**s, "error": scrub_local_paths(str(s.get("error") or ""))} for s in stages]
    rows = "".join(
        f"<tr><td>{escape(s['notebook'])}</td><td>{escape(s['status'])}</td>"
        f"<td>{float(s.get('seconds') or 0):.1f}</td>"
        f"<td>{escape(str(s.get('error') or ''))}</td></tr>"
        for s in stages
    )
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    html = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Last run</title></head><body>'
        f'<h1>Last run: {escape(status)}</h1><p id="status" '
        f'data-status="{escape(status)}">{escape(message)}</p>'
        f"<p>Params file: <code>{escape(str(params_path))}</code> · ended {when}</p>"
        '<table border="1"><tr><th>Stage</th><th>Status</th><th>Seconds</th><th>Error</th></tr>'
        f'{rows}</table><p><a href="index.html">Back to the report</a></p></body></html>'
    )
    target = report_dir / LAST_RUN
    target.write_text(html, encoding="utf-8")
    return target
