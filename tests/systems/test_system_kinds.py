"""A system kind is one file: the kind of docs/how-to/system-kind.md (its code block, read from the
page, written as a module of a temporary folder) is seen by `cube validate`, `cube plan`, the params
reference and a `cube run`, with a stand-in query engine whose replies have LlamaIndex's shape
(`Response.__str__`, `source_nodes[i].node.metadata` / `.get_content()`): llama_index itself is not
installed, and the kind never imports it.

The registry is process-wide: each test restores it (and forgets the module) so that the kind does
not leak into the params reference other tests compare with docs/reference/params.md."""

from __future__ import annotations

import json
import os
import re
import sys

import pandas as pd
import pytest
import yaml

from cube.config import system_kinds as config_kinds
from cube.config.params import ParamsError, load_params
from cube.systems import kinds as systems_kinds
from tests import ROOT

PAGE = ROOT / "docs" / "how-to" / "system-kind.md"
JUDGES = [
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
]

# A stand-in for a LlamaIndex query engine over the run's knowledge base: a document ranks first
# when the question names its item, and the answer is the start of its text.
FAKE_ENGINE = """
import json, os
from dataclasses import dataclass, field


@dataclass
class Node:
    text: str
    metadata: dict = field(default_factory=dict)

    def get_content(self):
        return self.text


@dataclass
class NodeWithScore:
    node: Node
    score: float


class Response:
    def __init__(self, response, source_nodes):
        self.response, self.source_nodes = response, source_nodes

    def __str__(self):
        return self.response


ASKED = []  # the questions the engine was asked (its retriever alone is not asking)


class Retriever:
    def __init__(self, docs):
        self.docs = docs

    def retrieve(self, text):
        if "FAIL" in text:
            raise RuntimeError("the index is down")
        ranked = sorted(self.docs, key=lambda d: (d["name"] not in text, d["doc_id"]))[:3]
        return [NodeWithScore(Node(d["text"], {"doc_id": d["doc_id"]}), 1.0) for d in ranked]


class Engine:
    def __init__(self, docs):
        self.retriever = Retriever(docs)

    def query(self, text):
        ASKED.append(text)
        nodes = self.retriever.retrieve(text)
        return Response(nodes[0].node.text[:80], nodes)


def query_engine():
    with open(os.environ["FAKE_ENGINE_DOCS"], encoding="utf-8") as f:
        return Engine(json.load(f))
"""


def _kind_file() -> str:
    """The kind's file as the how-to page shows it (its first python block)."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    return blocks[0]


@pytest.fixture
def kind_folder(tmp_path, monkeypatch):
    """A folder holding the kind's module and the stand-in engine, on `sys.path` (and on the
    PYTHONPATH of the run's notebook kernels); the registry restored afterwards."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "llamaindex_kind.py").write_text(_kind_file(), encoding="utf-8")
    (folder / "fake_engine.py").write_text(FAKE_ENGINE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    path = os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    systems_kinds.all_kinds()  # the package's kinds registered in the registry kept
    monkeypatch.setattr(config_kinds, "_REGISTERED", dict(config_kinds._REGISTERED))
    monkeypatch.setattr(systems_kinds, "_KINDS", dict(systems_kinds._KINDS))
    yield folder
    for name in ("llamaindex_kind", "fake_engine"):
        sys.modules.pop(name, None)


def _params_file(tmp_path, monkeypatch, engine: str = "fake_engine:query_engine", **entry: object):
    from cube.config.params import parse_params
    from cube.kb.corpus import build_corpus

    data = {
        "run": "kind",
        "outputs_dir": str(tmp_path / "out"),
        "corpus": {"n_items": 12, "seed": 1},
        "questions": {"limit": 6},
        "system_kinds": ["llamaindex_kind"],
        "systems": [
            {"kind": "llamaindex", "name": "my-index", "engine": engine, "top_n": 3, **entry}
        ],
        "answerer": {"provider": "offline", "model": "extractive"},
        "judges": JUDGES,
        "analysis": {"bootstrap": 0},
    }
    corpus = build_corpus(parse_params({**data, "systems": [], "system_kinds": []}))
    docs = tmp_path / "docs.json"
    rows = corpus[["doc_id", "item_name", "text"]].astype(str).to_dict("records")
    docs.write_text(
        json.dumps(
            [{"doc_id": r["doc_id"], "name": r["item_name"], "text": r["text"]} for r in rows]
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("FAKE_ENGINE_DOCS", str(docs))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_the_kind_is_read_checked_planned_and_documented(kind_folder, tmp_path, monkeypatch):
    from cube.config.reference import params_reference, system_kinds
    from cube.run.plan import build_plan
    from cube.run.validate import validate_data

    path = _params_file(tmp_path, monkeypatch)
    params = load_params(path)
    (entry,) = params.systems
    assert type(entry).__name__ == "LlamaIndexParams" and entry.engine == "fake_engine:query_engine"
    # the entry round-trips through the resolved params a run records
    assert yaml.safe_load(params.model_dump_json())["systems"][0]["id_key"] == "doc_id"
    assert validate_data(params, tmp_path).errors == []
    plan = build_plan(params, base_dir=tmp_path)
    row = plan.set_index("model").loc["llamaindex:my-index"]
    assert row["role"] == "answering" and row["calls"] == 6
    assert "llamaindex" in dict(system_kinds())
    reference = params_reference()
    assert "#### `systems[] (kind: llamaindex)`" in reference
    assert "| `engine` |" in reference and "| `id_key` |" in reference

    # an engine that does not load is named by `cube validate`, before any question is asked
    bad = load_params(_params_file(tmp_path, monkeypatch, engine="fake_engine:nowhere"))
    assert any(
        e.startswith("systems[my-index].engine:") for e in validate_data(bad, tmp_path).errors
    )


def test_a_failed_ask_is_that_questions_failure_and_a_rerun_asks_nothing(
    kind_folder, tmp_path, monkeypatch
):
    from cube.kb.corpus import build_corpus
    from cube.systems import make_system

    params = load_params(_params_file(tmp_path, monkeypatch))
    corpus = build_corpus(params)
    names = corpus["item_name"].astype(str).tolist()
    questions = pd.DataFrame(
        {
            "question_id": ["Q1", "Q2"],
            "doc_id": corpus["doc_id"].astype(str).tolist()[:2],
            "question": [f"{names[0]}需要哪些材料？", "FAIL please"],
        }
    )
    cache = tmp_path / "cache.sqlite"
    system = make_system(params.systems[0], params, cache)
    first = system.answer(questions, corpus, progress=False).set_index("question_id")
    assert first.loc["Q1", "rank"] == 1 and first.loc["Q1", "error"] == ""
    assert first.loc["Q2", "error"] == "RuntimeError: the index is down"
    assert pd.isna(first.loc["Q2", "answer"]) and not first.loc["Q2", "retrieval_ok"]
    again = make_system(params.systems[0], params, cache)
    again.answer(questions, corpus, progress=False)
    assert again.caller.calls == 1  # the failure is asked again, the answer is read back


def test_a_kind_that_registers_free_outcomes_is_read_by_plan_and_driver(
    kind_folder, tmp_path, monkeypatch
):
    """The page's `free_outcomes` (`local_retrieval: true`): `known_outcomes` gives each question's
    rank from the retriever alone (the engine asked nothing), a failed retrieval unknown; the
    sequential driver's free hits are the answers' own (the unknown question left out), and `cube
    plan` counts the bound sets from it instead of its upper bound. Off: neither reads it."""
    from cube.kb.corpus import build_corpus
    from cube.run.plan import build_plan
    from cube.run.sequential_design import free_hits
    from cube.systems import known_outcomes, make_system

    params = load_params(_params_file(tmp_path, monkeypatch, local_retrieval=True))
    corpus = build_corpus(params)
    names, ids = corpus["item_name"].astype(str).tolist(), corpus["doc_id"].astype(str).tolist()
    questions = pd.DataFrame(
        {
            "question_id": ["Q1", "Q2", "Q3"],
            "doc_id": [ids[0], ids[1], max(ids)],
            "question": [f"{names[0]}需要哪些材料？", "FAIL please", "什么都不提"],
        }
    )
    engine = sys.modules.get("fake_engine") or __import__("fake_engine")
    engine.ASKED.clear()
    (entry,) = params.systems
    outcomes = known_outcomes(entry, params, corpus, questions)
    assert outcomes["rank"].tolist() == [1, 0, 0]
    assert outcomes["retrieval_ok"].tolist() == [True, False, True]
    hits = free_hits(params, corpus, questions)
    assert hits == {"my-index": {"Q1": True, "Q3": False}}
    assert engine.ASKED == []  # neither asked the engine a question
    answers = make_system(entry, params, None).answer(questions, corpus, progress=False)
    known = answers[answers["retrieval_ok"]]
    assert hits["my-index"] == dict(zip(known["question_id"], known["rank"] > 0, strict=True))

    upper = "bound sets: an upper bound"
    notes = " ".join(build_plan(params, base_dir=tmp_path)["note"].astype(str))
    assert upper not in notes
    off = load_params(_params_file(tmp_path, monkeypatch))
    assert known_outcomes(off.systems[0], off, corpus, questions) is None
    assert free_hits(off, corpus, questions) == {}
    assert upper in " ".join(build_plan(off, base_dir=tmp_path)["note"].astype(str))


def test_an_installed_packages_entry_point_brings_its_kind(kind_folder, tmp_path, monkeypatch):
    """Without `system_kinds:`, the entry point named as the kind (group cube.system_kinds) is
    loaded the first time a params file names it (an installed package's metadata, stood in for
    here: the test cannot install one)."""
    from importlib.metadata import EntryPoint

    point = EntryPoint(name="llamaindex", value="llamaindex_kind", group="cube.system_kinds")
    monkeypatch.setattr(
        config_kinds,
        "entry_points",
        lambda group, name: [point] if (group, name) == ("cube.system_kinds", "llamaindex") else [],
    )
    path = _params_file(tmp_path, monkeypatch)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**data, "system_kinds": []}), encoding="utf-8")
    (entry,) = load_params(path).systems
    assert type(entry).__name__ == "LlamaIndexParams"


def test_a_kind_nobody_registered_is_a_params_error_naming_the_known_kinds(tmp_path):
    path = tmp_path / "params.yaml"
    data = {
        "run": "x",
        "systems": [{"kind": "llamaindex", "name": "a", "engine": "m:f"}],
        "answerer": {"provider": "offline", "model": "extractive"},
        "judges": JUDGES,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ParamsError, match="llamaindex.*builtin|builtin.*llamaindex"):
        load_params(path)


def test_a_module_that_does_not_import_is_named(tmp_path):
    path = tmp_path / "params.yaml"
    data = {"run": "x", "system_kinds": ["no_such_kind_module"], "judges": JUDGES}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ParamsError, match="system_kinds.*no_such_kind_module"):
        load_params(path)


@pytest.mark.e2e
def test_a_run_answers_with_the_kind(kind_folder, tmp_path, monkeypatch):
    from cube.run.execute import execute_run

    path = _params_file(tmp_path, monkeypatch)
    monkeypatch.chdir(ROOT)
    done = execute_run(path, log=lambda _: None)
    assert done.ok, [(s.name, s.status) for s in done.stages]
    answers = pd.read_parquet(tmp_path / "out" / "kind" / "data" / "answers.parquet")
    rag = answers[answers["set"] == "rag"]
    assert set(rag["system"]) == {"my-index"} and len(rag) == 6
    assert (rag["answerer"] == "extractive").all()
    # the stand-in ranks the gold document first for a question naming its item
    assert (rag["rank"] == 1).mean() >= 0.5
    assert rag["error"].eq("").all() and rag["retrieval_ok"].all()


def test_editing_the_kind_or_its_engine_makes_the_answers_out_of_date(
    kind_folder, tmp_path, monkeypatch
):
    """Stage 02's fingerprint follows a user kind's own file and the files its `sources` names
    (the engine): an edit re-runs the answers instead of keeping the old ones."""
    from cube.config.project import list_notebooks
    from cube.run.stages import stage_fingerprints

    params = load_params(_params_file(tmp_path, monkeypatch))
    notebooks = list_notebooks(ROOT / "notebooks")
    before = stage_fingerprints(params, notebooks, ROOT)
    for name in ("llamaindex_kind.py", "fake_engine.py"):
        with (kind_folder / name).open("a", encoding="utf-8") as f:
            f.write("\n# edited\n")
        after = stage_fingerprints(params, notebooks, ROOT)
        changed = [n for n in before if before[n] != after[n]]
        assert changed and changed[0].startswith("02_") and not any(n < "02" for n in changed), name
        before = after


def test_a_secret_pasted_into_a_kinds_key_is_refused_unechoed(kind_folder, tmp_path, monkeypatch):
    path = _params_file(tmp_path, monkeypatch)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    secret = "sk-proj-" + "Q7x9" * 12
    data["systems"][0]["id_key"] = secret
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert "systems[my-index]" in str(err.value) and secret not in str(err.value)


def test_a_user_kind_cannot_take_a_package_kinds_name(kind_folder):
    from typing import Literal

    from cube.config.system_kinds import KindParams

    class Mine(KindParams):
        kind: Literal["http"] = "http"

    with pytest.raises(ValueError, match="'http' is the package's"):
        systems_kinds.system_kind(Mine, summary="mine")(lambda entry, params, cache_path: None)
    assert systems_kinds.all_kinds()["http"].summary != "mine"
