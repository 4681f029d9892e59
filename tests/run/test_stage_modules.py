"""A stage's fingerprint hashes the package files its notebook can run or read, not the whole
package."""

from __future__ import annotations

import os

from cube.run import stages
from cube.run.stages import PACKAGE, modules_read, notebook_code
from tests import ROOT

NOTEBOOKS = ROOT / "notebooks"


def _read(source: str) -> set[str]:
    return {f.relative_to(PACKAGE).as_posix() for f in modules_read(source)}


def test_the_package_init_counts_alone_not_the_whole_package():
    files = _read("from cube.config.params import Params")
    assert {"__init__.py", "config/__init__.py", "config/params.py"} <= files
    assert (
        "method/paper.py" not in files
        and "method/lexical.py" not in files
        and "judges/rubric.py" not in files
    )
    assert not any(f.startswith(("prompts/", "templates/", "data/")) for f in files)


def test_data_folders_count_only_for_the_modules_that_read_them():
    paper = _read("from cube.method.paper import published_table4")
    assert {
        "data/paper_table4_published.csv",
        "data/paper_table2_trimmed_means.csv",
    } <= paper  # resources.files
    assert "prompts/en/question_generation.txt" in _read(
        "import cube.kb.questions"
    )  # .joinpath("prompts", ...)
    assert "pages/templates/compare.html.j2" in _read(
        "import cube.run.compare"
    )  # PackageLoader("cube.pages", ...)
    assert "pages/templates/judgments.html" in _read(
        "import cube.pages.browser"
    )  # Path(__file__).parent / "templates"
    assert not any(f.startswith("pages/templates/") for f in _read("import cube.kb.questions"))


def test_modules_imported_by_name_and_parent_packages_are_followed():
    by_name = _read(
        'import importlib\nimportlib.import_module("cube.judges.rubric")'
    )  # a module named by a string
    assert {"judges/rubric.py", "judges/__init__.py"} <= by_name
    scoring = _read(
        "from cube.judges.scoring import make_judges"
    )  # importing it registers the rubric judges
    assert {"judges/__init__.py", "judges/rubric.py"} <= scoring
    assert "systems/extractive.py" in _read("import cube.systems")  # and the extractive answerer
    assert not any(
        f.startswith(("judges/", "systems/")) and f.endswith(".py")
        for f in _read("import cube.llm")
    )  # llm/ knows neither (cube.config reads the dimension files, data, not code)


def test_stages_hash_different_module_sets_and_none_hashes_everything():
    every = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    sets = {nb.name[:2]: _read(notebook_code(nb)) for nb in sorted(NOTEBOOKS.glob("*.ipynb"))}
    assert {"00", "01", "03", "08"} <= set(sets)
    assert all(s < every for s in sets.values())
    assert "method/paper.py" in sets["00"] and "method/paper.py" not in sets["03"]
    assert {"method/lexical.py", "kb/questions.py", "run/pipeline.py"}.isdisjoint(sets["00"])
    assert (
        "method/lexical.py" in sets["08"] and "data/demo_vocab.json" in sets["01"]
    )  # the demo corpus aliases


def _package(root):
    pkg = root / "cube"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import cube.b\n")
    (pkg / "b.py").write_text("X = 1\n")
    return pkg


def _touch_later(path, text):
    """Rewrite a file and move its mtime on, as an editor saving it a moment later does."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_module_digest_is_kept_while_the_files_are_unchanged_and_follows_an_edit(
    tmp_path, monkeypatch
):
    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    monkeypatch.setattr(stages, "_FACTS", {})
    monkeypatch.setattr(stages, "_DIGESTS", {})
    first = stages.modules_digest("import cube.a")
    reads = []
    real = stages.modules_read
    monkeypatch.setattr(stages, "modules_read", lambda s: reads.append(s) or real(s))
    assert stages.modules_digest("import cube.a") == first and reads == []  # kept, not re-read

    _touch_later(pkg / "b.py", "X = 2\n")  # an imported module edited, same size
    second = stages.modules_digest("import cube.a")
    assert second != first and len(reads) == 1

    # a module now importing a new one: the new module's bytes count
    (pkg / "c.py").write_text("Y = 1\n")
    _touch_later(pkg / "a.py", "import cube.b\nimport cube.c\n")
    third = stages.modules_digest("import cube.a")
    _touch_later(pkg / "c.py", "Y = 3\n")
    assert len({first, second, third, stages.modules_digest("import cube.a")}) == 4


def test_module_digest_after_an_edit_equals_a_fresh_process_digest(tmp_path, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    monkeypatch.setattr(stages, "_FACTS", {})
    monkeypatch.setattr(stages, "_DIGESTS", {})
    stages.modules_digest("import cube.a")
    _touch_later(pkg / "b.py", "X = 5\n")
    kept = stages.modules_digest("import cube.a")
    monkeypatch.setattr(stages, "_FACTS", {})
    monkeypatch.setattr(stages, "_DIGESTS", {})
    assert stages.modules_digest("import cube.a") == kept
