"""The package modules' facts kept between processes (`cube.run.facts_store`): a stage's modules
read with the store are those read by parsing; a changed file, a new folder or a damaged store
is parsed again."""

from __future__ import annotations

import ast
import json
import os
import time
from types import ModuleType

import pytest

from cube.run import stages
from cube.run.facts_store import FACTS_ENV
from cube.run.stages import PACKAGE, facts_stored_in, modules_read, notebook_code
from tests import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture
def fresh(monkeypatch):
    """A process that has parsed nothing yet (and opened no store)."""

    def clear():
        monkeypatch.setattr(stages, "_FACTS", {})
        monkeypatch.setattr(stages, "_DIGESTS", {})
        monkeypatch.setattr(stages, "_STORE", [])

    clear()
    return clear


def _no_parse(monkeypatch, *sources):
    """From now on the stages module parses only `sources` (the notebooks' code), no file."""

    def parse(source, *args, **kwargs):
        if source not in sources:
            raise AssertionError("a stored file was parsed again")
        return ast.parse(source, *args, **kwargs)

    # the stages module's `ast` only: pytest parses sources with its own
    proxy = ModuleType("ast")
    proxy.__dict__.update(vars(ast))
    proxy.parse = parse
    monkeypatch.setattr(stages, "ast", proxy)


def test_the_package_read_through_the_store_is_the_package_parsed(tmp_path, fresh, monkeypatch):
    sources = [notebook_code(nb) for nb in NOTEBOOKS]
    parsed = [modules_read(s) for s in sources]
    fresh()
    store = tmp_path / "module_facts.json"
    with facts_stored_in(store):
        assert [modules_read(s) for s in sources] == parsed
    assert store.is_file()
    fresh()
    _no_parse(monkeypatch, *sources)  # a later process reads every file's facts from the store
    with facts_stored_in(store):
        assert [modules_read(s) for s in sources] == parsed


def _package(root):
    pkg = root / "cube"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import cube.b\n")
    (pkg / "b.py").write_text("X = 1\n")
    (pkg / "c.py").write_text("Y = 1\n")
    return pkg


def _names(source):
    return {f.relative_to(stages.PACKAGE).as_posix() for f in modules_read(source)}


def test_a_file_whose_bytes_changed_is_parsed_again(tmp_path, fresh, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    store = tmp_path / "facts.json"
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "b.py"}
    (pkg / "a.py").write_text("import cube.c\n")  # same size, other bytes
    fresh()
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "c.py"}


def test_an_edit_between_the_digest_and_the_parse_stores_the_digested_bytes_facts(
    tmp_path, fresh, monkeypatch
):
    # the facts stored under a digest are those of the very bytes digested: an edit landing right
    # after the file's first read must not file the new bytes' facts under the old bytes' digest
    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    target, edited = pkg / "a.py", []
    real = {m: getattr(type(target), m) for m in ("read_bytes", "read_text")}

    def racing(method):
        def read(self, *args, **kwargs):
            out = real[method](self, *args, **kwargs)
            if self == target and not edited:
                edited.append(True)
                stat = target.stat()
                target.write_text("import cube.c\n")  # the edit lands now, within the stat's tick
                os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            return out

        return read

    for method in real:
        monkeypatch.setattr(type(target), method, racing(method))
    store = tmp_path / "facts.json"
    with facts_stored_in(store):
        _names("import cube.a")
        stages._STORE[0].flush()
    for method, fn in real.items():
        monkeypatch.setattr(type(target), method, fn)
    target.write_text("import cube.b\n")  # back as it was (a checkout): the stored digest's bytes
    fresh()
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "b.py"}


def test_a_new_package_folder_makes_every_entry_stale(tmp_path, fresh, monkeypatch):
    # a string names a data folder only when the folder exists: its facts depend on the folders
    pkg = _package(tmp_path)
    (pkg / "a.py").write_text("from importlib.resources import files\nfiles('cube.tables')\n")
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    store = tmp_path / "facts.json"
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py"}
    (pkg / "tables").mkdir()
    (pkg / "tables" / "t.csv").write_text("x\n")
    fresh()
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "tables/t.csv"}


@pytest.mark.parametrize("foreign", ["..", "../..", "tables/../..", "/etc", "."])
def test_an_entry_naming_a_folder_outside_the_package_is_parsed_again(
    tmp_path, fresh, monkeypatch, foreign
):
    # a stage's fingerprint digests only the package's own files: an entry (valid digest and
    # header) whose data folder leaves the package is no entry of this store's making
    pkg = _package(tmp_path)
    (pkg / "tables").mkdir()
    (pkg / "tables" / "t.csv").write_text("x\n")  # a data file no module reads
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    store = tmp_path / "facts.json"
    with facts_stored_in(store):
        _names("import cube.a")
    body = json.loads(store.read_text())
    body["files"]["a.py"][2] = [foreign]
    store.write_text(json.dumps(body))
    fresh()
    with facts_stored_in(store):
        files = modules_read("import cube.a")
    assert {f.relative_to(pkg).as_posix() for f in files} == {"__init__.py", "a.py", "b.py"}


@pytest.mark.parametrize(
    "damaged",
    [
        "{not json",
        "[]",
        json.dumps({"format": 0, "header": "", "files": {}}),
        "",
    ],
)
def test_a_damaged_or_foreign_store_is_parsed_again_and_written_over(
    tmp_path, fresh, monkeypatch, damaged
):
    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    store = tmp_path / "facts.json"
    store.write_text(damaged)
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "b.py"}
    fresh()
    _no_parse(monkeypatch, "import cube.a")
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "b.py"}


def test_a_damaged_entry_is_parsed_again(tmp_path, fresh, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    store = tmp_path / "facts.json"
    with facts_stored_in(store):
        _names("import cube.a")
    body = json.loads(store.read_text())
    body["files"]["a.py"] = [body["files"]["a.py"][0], "cube.b", 3]  # not lists of names
    body["files"]["b.py"] = ["0" * 32, ["cube.c"], []]  # another file's digest
    store.write_text(json.dumps(body))
    fresh()
    with facts_stored_in(store):
        assert _names("import cube.a") == {"__init__.py", "a.py", "b.py"}


def test_a_kernel_opens_the_store_its_run_names(tmp_path, fresh, monkeypatch):
    store = tmp_path / "facts.json"
    monkeypatch.setenv(FACTS_ENV, str(store))
    source = notebook_code(NOTEBOOKS[0])
    read = modules_read(source)
    assert store.is_file()
    fresh()
    _no_parse(monkeypatch, source)
    assert modules_read(source) == read
    fresh()
    monkeypatch.delenv(FACTS_ENV)
    assert stages._facts_store() is None and PACKAGE.is_dir()


def test_a_killed_writer_s_old_temporary_files_are_removed(tmp_path, fresh, monkeypatch):
    # the store's folder is the run's outputs: only its own old temporary files go
    from cube.run import facts_store

    pkg = _package(tmp_path)
    monkeypatch.setattr(stages, "PACKAGE", pkg)
    out = tmp_path / "outputs"
    out.mkdir()
    stale, recent, other = out / ".facts-dead.tmp", out / ".facts-busy.tmp", out / "x.tmp"
    old = time.time() - 2 * facts_store.STALE_TMP_S
    for p in (stale, recent, other):
        p.write_text("{")
    for p in (stale, other):
        os.utime(p, (old, old))
    with facts_stored_in(out / "module_facts.json"):
        _names("import cube.a")
    assert not stale.exists() and recent.exists() and other.exists()
