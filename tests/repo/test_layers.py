"""The package's layers (DESIGN.md "The package: layers as folders"), checked as behaviour.

`make lint` runs `lint-imports` on the contracts of pyproject.toml (imports point down, no circle,
method/ and diagnose/ pure, llm/ knows no judge, pages/ never imports run/, kb/ never judges).
These tests show that those contracts bite (a wrong import in a scratch copy of the package fails
them, naming the line) and check the rules import-linter cannot see: every module sits in a layer
folder, no module reaches into another's private names, and no module is an alias of another.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

PACKAGE = ROOT / "cube"
LAYERS = ("config", "llm", "kb", "judges", "systems", "method", "diagnose", "pages", "run", "cli")
LINT = Path(sys.executable).with_name("lint-imports")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_every_module_lives_in_a_layer_folder():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"modules loose in cube/: {loose} (DESIGN.md puts each in its layer folder)"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - {"data"} == set(LAYERS), folders
    for layer in LAYERS:
        doc = ast.get_docstring(
            ast.parse((PACKAGE / layer / "__init__.py").read_text(encoding="utf-8"))
        )
        assert doc, f"cube/{layer}/__init__.py names no public face"


def test_no_module_reaches_into_another_modules_private_names():
    """A helper another module needs is public in one module; a private one (`_name`) stays home."""
    found = []
    for path in _modules():
        tree, me = ast.parse(path.read_text(encoding="utf-8")), _name(path)
        modules: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cube":
                for a in node.names:
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
                    if a.name.startswith("_") and not a.name.startswith("__") and node.module != me:
                        found.append(
                            f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}"
                        )
            elif isinstance(node, ast.Import):
                modules |= {
                    a.asname or a.name: a.name for a in node.names if a.name.split(".")[0] == "cube"
                }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} reaches "
                    f"{modules[node.value.id]}.{node.attr}"
                )
    assert found == []


# Modules that write `sys.modules` for another reason than an alias, with the reason
LOADERS = {
    # a python system's .py file is registered under a name of its own before it runs (importlib's
    # recipe for importing a source file: a dataclass in it looks its module up there)
    "cube/systems/python_loader.py",
}


def test_no_module_is_an_alias_of_another():
    """No compatibility shim: nothing rebinds `sys.modules` entries or re-exports a module
    wholesale."""
    shims = [
        str(p.relative_to(ROOT))
        for p in _modules()
        if (
            "sys.modules[" in p.read_text(encoding="utf-8")
            and p.relative_to(ROOT).as_posix() not in LOADERS
        )
        or "import *" in p.read_text(encoding="utf-8")
    ]
    assert shims == []


@pytest.mark.skipif(not LINT.exists(), reason="lint-imports is installed with the dev extras")
def test_the_import_contracts_hold_and_a_wrong_import_breaks_them(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    shutil.copytree(PACKAGE, tmp_path / "cube", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    ok = subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "0 broken" in ok.stdout
    # the decision's mathematics importing the stage runner: an upward import and a circle
    wrong = tmp_path / "cube" / "method" / "paper.py"
    lines = wrong.read_text(encoding="utf-8").splitlines()
    wrong.write_text(
        "\n".join([*lines, "from cube.run import pipeline  # noqa: E402,F401"]) + "\n",
        encoding="utf-8",
    )
    bad = subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0
    assert f"cube.method.paper -> cube.run.pipeline (l.{len(lines) + 1})" in bad.stdout
    assert "Imports point down" in bad.stdout and "BROKEN" in bad.stdout
    # a figure helper pulled into the pure diagnostics: matplotlib where no figure library may be
    wrong.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "cube" / "diagnose" / "failures.py").write_text(
        (PACKAGE / "diagnose" / "failures.py").read_text(encoding="utf-8")
        + "\nimport matplotlib  # noqa: E402,F401\n",
        encoding="utf-8",
    )
    bad = subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "cube.diagnose is not allowed to import matplotlib" in bad.stdout
