"""The Makefile's `install`: uv where pip has no configuration of its own, pip otherwise and
whenever uv fails. A stand-in `python` in a fake venv logs every call; no package is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import ROOT

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in
  "-m uv --version") exit 0 ;;
  "-m uv pip install"*) exit "$FAKE_UV_EXIT" ;;
  "-m pip config list") printf '%s' "$FAKE_PIP_CONFIG"; exit 0 ;;
esac
exit 0
"""
PIP_VARS = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_CONSTRAINT",
    "PIP_CONFIG_FILE",
)

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _install(
    tmp_path: Path, uv_exit: int = 0, pip_config: str = "", **env: str
) -> tuple[int, list[str]]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    base = {k: v for k, v in os.environ.items() if k not in PIP_VARS and not k.startswith("MAKE")}
    proc = subprocess.run(
        ["make", "-s", f"VENV={venv}", "INSTALLER=uv", f"{venv}/.installed"],
        cwd=ROOT,
        env={
            **base,
            "FAKE_LOG": str(log),
            "FAKE_UV_EXIT": str(uv_exit),
            "FAKE_PIP_CONFIG": pip_config,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, [line for line in log.read_text().splitlines() if "install" in line]


def test_uv_installs_when_pip_has_no_configuration(tmp_path: Path):
    rc, calls = _install(tmp_path)
    assert rc == 0 and len(calls) == 1 and calls[0].startswith("-m uv pip install")


def test_a_failing_uv_install_falls_back_to_pip(tmp_path: Path):
    rc, calls = _install(tmp_path, uv_exit=1)
    assert rc == 0, calls
    assert [c.split(" install")[0] for c in calls] == ["-m uv pip", "-m pip"] and calls[1].endswith(
        "--no-compile -e ."
    )


@pytest.mark.parametrize(
    "setting",
    [
        {"pip_config": "global.find-links='file:///opt/wheels'"},
        {"PIP_INDEX_URL": "http://127.0.0.1:1/simple"},
        {"PIP_EXTRA_INDEX_URL": "http://127.0.0.1:1/simple"},
        {"PIP_FIND_LINKS": "/opt/wheels"},
        {"PIP_CONSTRAINT": "/tmp/c.txt"},
    ],
)
def test_pip_installs_where_pip_is_configured_with_its_own_index(
    tmp_path: Path, setting: dict[str, str]
):
    rc, calls = _install(tmp_path, **setting)
    # --no-compile: byte-compiling every dependency was about half of pip's CPU time on a first
    # install
    assert rc == 0 and calls == ["-m pip install -q --no-compile -e ."], calls
