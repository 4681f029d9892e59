"""The package as pip installs it: the build backend (flit_core, pyproject.toml) packs every file
the package reads at run time (prompts, data tables, page templates) into the wheel, and the default
install leaves JupyterLab to the `lab` extra (`make lab`)."""

from __future__ import annotations

import importlib
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests import ROOT


def _package_files() -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "cube").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_the_wheel_holds_every_file_of_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["build-backend"]
    monkeypatch.chdir(
        ROOT
    )  # the backend reads pyproject.toml from the working directory, as pip runs it
    wheel = tmp_path / importlib.import_module(backend).build_wheel(str(tmp_path))
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {f for f in _package_files() if not f.endswith(".py")}
    assert data, "the package has data files (prompts, templates): the check would be empty"
    assert {"cube/judges/dimensions/relevance.yaml", "cube/pages/templates/index.html.j2"} <= data
    assert not _package_files() - names, sorted(_package_files() - names)[:10]
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "cube=cube.cli:main" in zipfile.ZipFile(wheel).read(entry).decode().replace(" ", "")


def test_the_default_install_needs_no_jupyterlab():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {
        d.split(">")[0].split("=")[0].split(";")[0].strip().lower() for d in project["dependencies"]
    }
    assert {
        "papermill",
        "nbconvert",
        "ipykernel",
    } <= names  # what `make run` executes the notebooks with
    assert not names & {"jupyterlab", "ipywidgets", "notebook"}
    assert {"jupyterlab", "ipywidgets"} <= {
        d.split(">")[0].strip().lower() for d in project["optional-dependencies"]["lab"]
    }
