#!/usr/bin/env python3
"""House rules that ruff and import-linter cannot express, checked by `make lint`.

1. Complexity, per function (rule "complexity"): ruff's mccabe (C901) at the threshold of
   `[tool.ruff.lint.mccabe] max-complexity`, with `[tool.cube.house] complexity-allowlist` as the
   only exception: "path:qualname" entries (`cube/method/compare.py:compare_pair`,
   `cube/systems/imported.py:ImportedAnswers.answer`). A block over the threshold that is not
   listed fails; so does a listed entry whose block no longer exceeds it or no longer exists (remove
   it from the list): the list can only shrink. ruff's own per-file-ignores would be per file, so
   a new complex block could slip into a listed file; that is why C901 is not in ruff's `select`
   and runs here (with `# noqa` and per-file-ignores disabled), keyed by function.
2. Complexity as radon counts it (rule "radon", .ci/radon_ratchet.py): the mean cyclomatic
   complexity of cube/'s blocks and the share at 11 or more may not exceed the ratchet file
   (`[tool.cube.house] radon-ratchet`, .ci/complexity_ratchet.toml), whose figures only go down.
   mccabe per function (rule 1) and radon over the package (rule 2) see different things: rule 1
   bounds the worst block, rule 2 the branches hidden in expressions everywhere.
3. Public faces (rule "public"): every layer folder (the layers contract of
   `[tool.importlinter]`) declares `__all__` in its `__init__.py`, a literal list of strings, and
   the notebooks (notebooks/*.ipynb, every code cell) import from the package only names a
   folder's `__all__` declares: `from cube.run import pipeline`, `import cube.kb.corpus`, never
   `from cube.run.notebook import open_run`.

Every problem is reported at once (file, line, what is expected); exit 1 if any, else 0.

    python .ci/house_rules.py [--root DIR] [--ruff PATH] [--rules complexity,radon,public]

Standard library (Python 3.11+: tomllib), the ruff executable for rule 1 and radon (a dev
dependency) for rule 2.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

RULES = ("complexity", "radon", "public")
PACKAGE = "cube"
COMPLEXITY = re.compile(r"is too complex \((\d+) > \d+\)")


@dataclass(frozen=True)
class Problem:
    where: str  # "path:line" (or "path: cell N ..." for notebooks)
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


# --------------------------------------------------------------------------- configuration


def _pyproject(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))


def _line_of(path: Path, text: str) -> int:
    """The first line of `path` containing `text` (1 if none): where a message points."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text in line:
            return number
    return 1


def max_complexity(config: dict) -> int:
    return int(config["tool"]["ruff"]["lint"]["mccabe"]["max-complexity"])


def allowlist(config: dict) -> list[str]:
    return list(
        config.get("tool", {}).get("cube", {}).get("house", {}).get("complexity-allowlist", [])
    )


def ratchet_file(config: dict) -> str:
    house = config.get("tool", {}).get("cube", {}).get("house", {})
    return str(house.get("radon-ratchet", ".ci/complexity_ratchet.toml"))


def layer_folders(config: dict) -> list[str]:
    """The folders of the import-linter layers contract (`cube.kb : cube.judges` is two)."""
    names: list[str] = []
    for contract in config.get("tool", {}).get("importlinter", {}).get("contracts", []):
        if contract.get("type") != "layers":
            continue
        for layer in contract.get("layers", []):
            for part in re.split(r"[:|]", layer):
                name = part.strip()
                if name.startswith(PACKAGE + ".") and name.count(".") == 1:
                    names.append(name.split(".", 1)[1])
    return names


def folders_of(root: Path, layers: list[str]) -> list[str]:
    """The layers that are folders (`cube.cli` is one module: it has no face to declare)."""
    return [name for name in layers if not (root / PACKAGE / f"{name}.py").is_file()]


# --------------------------------------------------------------------------- rule 1: complexity


def _qualnames(path: Path) -> dict[int, str]:
    """Line of each `def` -> its dotted qualified name (`Class.method`, `outer.inner`)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return {}
    found: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.setdefault(child.lineno, name)
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def complexities(root: Path, ruff: str) -> dict[str, int]:
    """Each "path:qualname" -> mccabe complexity of every function ruff lints under `root`.

    ruff reports C901 with the threshold at 0, so every function comes back with its complexity
    (stale allowlist entries can then say what they are now); `# noqa` and per-file-ignores are
    disabled, so neither can hide a block from this rule."""
    command = [
        ruff,
        "check",
        "--select",
        "C901",
        "--output-format",
        "json",
        "--exit-zero",
        "--no-cache",
        "--ignore-noqa",
        "--config",
        "lint.mccabe.max-complexity = 0",
        "--config",
        "lint.per-file-ignores = {}",
        ".",
    ]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, int] = {}
    names: dict[Path, dict[int, str]] = {}
    for item in json.loads(done.stdout or "[]"):
        if item.get("code") != "C901":
            continue
        match = COMPLEXITY.search(item.get("message", ""))
        if not match:  # a ruff whose message reads otherwise: fail, never pass unmeasured
            raise RuntimeError(f"cannot read the complexity in ruff's message {item['message']!r}")
        path = Path(item["filename"])
        path = path if path.is_absolute() else root / path
        if path not in names:
            names[path] = _qualnames(path)
        row = item["location"]["row"]
        qualname = names[path].get(row) or item["message"].split("`")[1]
        key = f"{path.resolve().relative_to(root.resolve()).as_posix()}:{qualname}"
        result[key] = max(result.get(key, 0), int(match.group(1)))
    return result


def check_complexity(root: Path, config: dict, ruff: str) -> list[Problem]:
    limit = max_complexity(config)
    listed = allowlist(config)
    measured = complexities(root, ruff)
    pyproject = root / "pyproject.toml"
    problems: list[Problem] = []
    for key, value in sorted(measured.items()):
        if value > limit and key not in listed:
            path, qualname = key.rsplit(":", 1)
            line = _def_line(root / path, qualname)
            problems.append(
                Problem(
                    f"{path}:{line}",
                    f"`{qualname}` has complexity {value} > {limit} (mccabe, C901): split it into "
                    f"functions of at most {limit} (the [tool.cube.house] complexity-allowlist of "
                    "pyproject.toml only shrinks: no new entries)",
                )
            )
    seen: set[str] = set()
    for entry in listed:
        where = f"pyproject.toml:{_line_of(pyproject, json.dumps(entry))}"
        if entry in seen:
            problems.append(Problem(where, f'"{entry}" is listed twice: remove one'))
            continue
        seen.add(entry)
        if ":" not in entry:
            problems.append(
                Problem(where, f'"{entry}" is not "path:qualname" (e.g. "cube/cli.py:main")')
            )
            continue
        path, qualname = entry.rsplit(":", 1)
        if entry in measured and measured[entry] > limit:
            continue
        if entry in measured:
            why = f"`{qualname}` now has complexity {measured[entry]} <= {limit}"
        elif not (root / path).is_file():
            why = f"{path} no longer exists"
        else:
            why = f"{path} has no function `{qualname}` any more"
        problems.append(
            Problem(
                where,
                f'complexity-allowlist entry "{entry}" is stale: {why}; remove it from the list',
            )
        )
    return problems


def _def_line(path: Path, qualname: str) -> int:
    return next((line for line, name in _qualnames(path).items() if name == qualname), 1)


# --------------------------------------------------------------------------- rule 2: radon


def check_radon(root: Path, config: dict) -> tuple[list[Problem], list[str]]:
    """Problems and notes (the figures; "lower the ratchet to ...") of .ci/radon_ratchet.py."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # sys.path[0] when run as a script; not when imported
        sys.path.insert(0, here)
    try:
        import radon_ratchet
    except ModuleNotFoundError as err:  # radon itself is imported on first measurement
        return [Problem(".ci/radon_ratchet.py:1", f"cannot import the radon rule: {err}")], []
    try:
        problems, notes = radon_ratchet.check(root, ratchet_file(config))
    except ModuleNotFoundError as err:
        what = f"{err}: radon is a dev dependency (`pip install -e '.[dev]'`)"
        return [Problem(f"{ratchet_file(config)}:1", what)], []
    return [Problem(where, what) for where, what in problems], notes


# --------------------------------------------------------------------------- rule 3: public faces


@dataclass
class Face:
    """What one layer folder's `__init__.py` declares."""

    folder: str
    init: Path
    names: list[str] | None  # None: no literal __all__
    line: int
    problems: list[Problem]


def read_face(root: Path, folder: str) -> Face:
    """`__all__` of cube/<folder>/__init__.py, read statically (ast: nothing is imported)."""
    rel = f"{PACKAGE}/{folder}/__init__.py"
    init = root / rel
    face = Face(folder, init, None, 1, [])
    if not init.is_file():
        face.problems.append(
            Problem(
                f"{rel}:1",
                f"layer folder {PACKAGE}/{folder}/ has no __init__.py declaring `__all__`",
            )
        )
        return face
    try:
        tree = ast.parse(init.read_text(encoding="utf-8"))
    except SyntaxError as err:
        face.problems.append(Problem(f"{rel}:{err.lineno}", f"cannot parse: {err.msg}"))
        return face
    names: list[str] = []
    declared = False
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        value = node.value
        if not isinstance(value, ast.List | ast.Tuple) or not all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            face.problems.append(
                Problem(
                    f"{rel}:{node.lineno}",
                    "`__all__` must be a literal list of strings (it is read without importing)",
                )
            )
            continue
        if not declared:
            face.line = node.lineno
        declared = True
        names += [e.value for e in value.elts]  # type: ignore[union-attr]
    if not declared:
        if not face.problems:
            face.problems.append(
                Problem(
                    f"{rel}:1",
                    f"{PACKAGE}/{folder}/ declares no `__all__`: list its public face (the "
                    "modules and names other layers and the notebooks may import) as "
                    "`__all__ = [...]`",
                )
            )
        return face
    face.names = names
    bound = _top_level_names(tree)
    lazy = "__getattr__" in bound  # PEP 562: names re-exported on first use
    for name in names:
        if names.count(name) > 1:
            face.problems.append(Problem(f"{rel}:{face.line}", f"`{name}` is in `__all__` twice"))
        if name in bound or lazy or _is_submodule(init.parent, name):
            continue
        face.problems.append(
            Problem(
                f"{rel}:{face.line}",
                f"`__all__` names `{name}`, which is neither a module of {PACKAGE}/{folder}/ nor "
                "defined or imported in __init__.py (nor served by a module `__getattr__`)",
            )
        )
    return face


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _is_submodule(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def _cells(path: Path) -> list[tuple[int, str, str]]:
    """(1-based cell number, cell id, source) of each code cell; IPython magics blanked."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        lines = [
            "" if line.lstrip().startswith(("%", "!", "?")) else line
            for line in source.splitlines()
        ]
        cells.append((number, str(cell.get("id", "")), "\n".join(lines)))
    return cells


def _imports(tree: ast.Module) -> list[tuple[int, str, list[str], str]]:
    """(line, module, names, statement) of each import of the package; names [] = `import m`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == PACKAGE:
                names = [a.name for a in node.names]
                found.append((node.lineno, node.module, names, ast.unparse(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    found.append((node.lineno, alias.name, [], f"import {alias.name}"))
    return found


def _notebook_import_problems(module: str, names: list[str], faces: dict[str, Face]) -> list[str]:
    """What is wrong with one import of a notebook (messages without the location)."""
    parts = module.split(".")
    if not names:  # import cube / cube.X / cube.X.y
        parts, names = parts[:-1], [parts[-1]]
        if not parts:
            return []
    if len(parts) == 1:  # from cube import X
        return [
            f"`{PACKAGE}.{name}` is not a layer folder: expected one of {', '.join(sorted(faces))}"
            for name in names
            if name not in faces
        ]
    folder = parts[1]
    if folder not in faces:
        return [
            f"`{module}` is not a layer folder's face: expected an import from one of "
            f"{', '.join(f'{PACKAGE}.{f}' for f in sorted(faces))}"
        ]
    face = faces[folder]
    public = set(face.names or [])
    rel = f"{PACKAGE}/{folder}/__init__.py"
    if len(parts) > 2:
        inner = parts[2]
        if names and all(name in public for name in names):
            hint = f"`from {PACKAGE}.{folder} import {', '.join(names)}`"
        elif inner in public and len(parts) == 3:
            hint = f"`from {PACKAGE}.{folder} import {inner}`"
        else:
            hint = f"a name {rel} declares in `__all__`: re-export it there if it is public"
        return [
            f"imports from `{module}`, inside the face of {PACKAGE}.{folder}: expected an import "
            f"from `{PACKAGE}.{folder}` of a name its `__all__` declares ({hint})"
        ]
    problems = []
    for name in names:
        if name == "*":
            problems.append(f"`from {module} import *`: expected the names, one by one")
        elif name not in public:
            problems.append(
                f"`{name}` is not public in {PACKAGE}.{folder}: expected a name of {rel}'s "
                f"`__all__` (add it there if it is meant to be public)"
            )
    return problems


def check_public(root: Path, config: dict) -> list[Problem]:
    folders = folders_of(root, layer_folders(config))
    if not folders:
        return [Problem("pyproject.toml:1", "no [tool.importlinter] layers contract: no folders")]
    faces = {folder: read_face(root, folder) for folder in folders}
    problems = [p for face in faces.values() for p in face.problems]
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        rel = path.relative_to(root).as_posix()
        for number, cell_id, source in _cells(path):
            where = f"{rel}: cell {number}" + (f" (id {cell_id})" if cell_id else "")
            try:
                tree = ast.parse(source)
            except SyntaxError as err:
                problems.append(Problem(f"{where}, line {err.lineno}", f"cannot parse: {err.msg}"))
                continue
            for line, module, names, statement in _imports(tree):
                for what in _notebook_import_problems(module, names, faces):
                    problems.append(Problem(f"{where}, line {line}", f"`{statement}`: {what}"))
    return problems


# --------------------------------------------------------------------------- command


def _default_ruff() -> str:
    beside = Path(sys.executable).with_name("ruff")
    return str(beside) if beside.exists() else (shutil.which("ruff") or "ruff")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--ruff", default=None, help="ruff executable (default: beside python)")
    parser.add_argument(
        "--rules", default=",".join(RULES), help=f"comma-separated, of {', '.join(RULES)}"
    )
    args = parser.parse_args(argv)
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        parser.error(f"unknown rule(s) {', '.join(unknown)}; known: {', '.join(RULES)}")
    root = args.root.resolve()
    config = _pyproject(root)
    problems: list[Problem] = []
    notes: list[str] = []
    if "complexity" in rules:
        problems += check_complexity(root, config, args.ruff or _default_ruff())
    if "radon" in rules:
        found, notes = check_radon(root, config)
        problems += found
    if "public" in rules:
        problems += check_public(root, config)
    for problem in problems:
        print(problem)
    for note in notes:
        print(note)
    if problems:
        print(f"house rules: {len(problems)} problem(s) ({', '.join(rules)})", file=sys.stderr)
        return 1
    print(f"house rules: OK ({', '.join(rules)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
