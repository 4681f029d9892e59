"""Every data file a stage reads is written by a stage it waits for (`waits_for`): with two kernels
a stage starts as soon as those ended, so a read not declared in `cube.run.stages.STAGES` races
its producer (08 read 07's human ratings through `pipeline.scores_with_human` while declaring only
03: its tables depended on which kernel finished first).

The reads are found statically: the names given as strings in the functions that call `.load` or
`.has` (a run's data files), starting from the functions a notebook calls on the `cube` modules it
imports and following the calls those functions make (same module, or a `cube` module they
import). A read the scan cannot see (a name built at run time) is not checked; the known
cross-stage reads are listed below too, so that the scan missing them fails."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from cube.run.execute import waits_for
from cube.run.stages import STAGES, notebook_code, producer
from tests import ROOT

DATA = {w for s in STAGES.values() for w in s.writes}
STEMS = sorted(STAGES)


@cache
def _module_tree(name: str) -> ast.Module | None:
    rel = Path(*name.split(".")[1:])
    for path in (ROOT / "cube" / rel.with_suffix(".py"), ROOT / "cube" / rel / "__init__.py"):
        if path.is_file():
            return ast.parse(path.read_text(encoding="utf-8"))
    return None


@cache
def _aliases(tree: ast.AST) -> dict[str, tuple[str, str | None]]:
    """Local name -> (cube module, function or None for the module itself)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cube"):
            for a in node.names:
                local = a.asname or a.name
                full = f"{node.module}.{a.name}"
                out[local] = (full, None) if _module_tree(full) else (node.module, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("cube") and a.asname:
                    out[a.asname] = (a.name, None)
    return out


def _calls(node: ast.AST, module: str, aliases: dict) -> set[tuple[str, str]]:
    """The (module, function) pairs a piece of code calls."""
    out = set()
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            target = aliases.get(f.value.id)
            if target and target[1] is None:
                out.add((target[0], f.attr))
        elif isinstance(f, ast.Name):
            target = aliases.get(f.id)
            if target and target[1] is not None:
                out.add((target[0], target[1]))
            else:
                out.add((module, f.id))
    return out


def _names_read(node: ast.AST) -> set[str]:
    """Data names in code that loads or asks for a run's data (`run.load`, `run.has`)."""
    reads = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in {"load", "has"}
        for n in ast.walk(node)
    )
    if not reads:
        return set()
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in DATA}


@cache
def _functions(module: str) -> dict[str, ast.AST]:
    tree = _module_tree(module)
    if tree is None:
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def stage_reads(stem: str) -> set[str]:
    """The data names a stage's notebook reads, directly or through the functions it calls."""
    code = ast.parse(notebook_code(ROOT / "notebooks" / f"{stem}.ipynb"))
    found = _names_read(code)
    todo, seen = _calls(code, "", _aliases(code)), set()
    while todo:
        module, fn = todo.pop()
        if (module, fn) in seen or not module:
            continue
        seen.add((module, fn))
        func = _functions(module).get(fn)
        if func is None:
            continue
        found |= _names_read(func)
        todo |= _calls(func, module, _aliases(_module_tree(module)))
    return found


def test_the_scan_finds_the_known_cross_stage_reads():
    assert "human_ratings" in stage_reads("08_bleu_rouge")
    assert "scores" in stage_reads("08_bleu_rouge")
    assert {"corpus"} <= stage_reads("02_qa_sets")


def test_every_data_file_a_stage_reads_is_written_by_a_stage_it_waits_for():
    undeclared = {}
    for stem in STEMS:
        waited = set(waits_for(stem, STEMS))
        for name in stage_reads(stem):
            source = producer(name)
            # a later stage's data (02 asks whether a previous run's scores are there) cannot be
            # waited for: the graph is in the sequence's order
            if source is not None and source < stem and source not in waited:
                undeclared.setdefault(stem, []).append(f"{name} (from {source})")
    assert undeclared == {}


def test_08_waits_for_07_human_ratings():
    assert "07_human_agreement" in waits_for("08_bleu_rouge", STEMS)
