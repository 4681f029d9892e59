"""Headless Chromium for the tests that must see a page as a browser runs it (the judgment
browser's filters, the report's table widths, scripts injected through names): one way to find it,
skip without it, and dump a page's live DOM."""

from __future__ import annotations

import shutil
import subprocess

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def require() -> str:
    """Chromium's path, or skip the test with how to get it."""
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed (apt-get install -y chromium; .ci/run installs it when "
            "missing)"
        )
    return CHROMIUM


def dump_dom(url: str, budget_ms: int, timeout: int, *flags: str) -> str:
    """The DOM of `url` after `budget_ms` of virtual time (scripts run, timers fire), as
    `--dump-dom` prints it; `flags` are added to the usual headless ones."""
    return subprocess.run(
        [
            require(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            *flags,
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout
