"""A stage's fingerprint hashes the package files its notebook can run or read, not the whole
package."""

from __future__ import annotations

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
