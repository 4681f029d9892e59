"""A stage's fingerprint hashes the package files its notebook can run or read, not the whole package."""

from __future__ import annotations

from pathlib import Path

from cube.stages import PACKAGE, modules_read, notebook_code

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _read(source: str) -> set[str]:
    return {f.relative_to(PACKAGE).as_posix() for f in modules_read(source)}


def test_the_package_init_counts_alone_not_the_whole_package():
    files = _read("from cube.config import Params")
    assert "__init__.py" in files and "config.py" in files
    assert "paper.py" not in files and "lexical.py" not in files and "judges/rubric.py" not in files
    assert not any(f.startswith(("prompts/", "templates/", "data/")) for f in files)


def test_data_folders_count_only_for_the_modules_that_read_them():
    paper = _read("from cube.paper import published_table4")
    assert {"data/paper_table4_published.csv", "data/paper_table2_trimmed_means.csv"} <= paper  # resources.files
    assert "prompts/en/question_generation.txt" in _read("import cube.questions")  # .joinpath("prompts", ...)
    assert "templates/compare.html.j2" in _read("import cube.compare_report")  # PackageLoader("cube", "templates")
    assert "templates/judgments.html" in _read("import cube.browser")  # Path(__file__).parent / "templates"
    assert not any(f.startswith("templates/") for f in _read("import cube.questions"))


def test_modules_imported_by_name_and_parent_packages_are_followed():
    llm = _read("import cube.llm")  # importlib.import_module("cube.judges.rubric") registers the offline judge
    assert {"judges/rubric.py", "judges/__init__.py", "systems/extractive.py", "systems/__init__.py"} <= llm
    scoring = _read("from cube.judges.scoring import make_judges")
    assert "judges/__init__.py" in scoring


def test_stages_hash_different_module_sets_and_none_hashes_everything():
    every = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    sets = {nb.name[:2]: _read(notebook_code(nb)) for nb in sorted(NOTEBOOKS.glob("*.ipynb"))}
    assert {"00", "01", "03", "08"} <= set(sets)
    assert all(s < every for s in sets.values())
    assert "paper.py" in sets["00"] and "paper.py" not in sets["03"]
    assert {"lexical.py", "questions.py", "pipeline.py"}.isdisjoint(sets["00"])
    assert "lexical.py" in sets["08"] and "data/demo_vocab.json" in sets["01"]  # the demo corpus aliases
