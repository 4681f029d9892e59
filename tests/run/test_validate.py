"""`cube validate` loads and checks the data: every problem at once, a summary line, exit code 2 on
errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.cli import main
from cube.config.params import load_params, parse_params
from cube.kb.example import example_kb, write_example_kb
from cube.run.validate import validate_data
from tests import ROOT

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}]


def _params(tmp_path: Path, corpus: dict, **extra) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(
        yaml.safe_dump(
            {"run": "v", "judges": JUDGES, "corpus": corpus, **extra}, allow_unicode=True
        ),
        encoding="utf-8",
    )
    return p


def test_own_kb_params_and_committed_spreadsheet_validate(monkeypatch, capsys):
    committed = pd.read_excel(
        ROOT / "data" / "example_guides.xlsx", dtype=str, keep_default_na=False
    )
    assert committed.equals(
        example_kb()
    )  # the committed file is the generator's output, cell for cell
    monkeypatch.chdir(ROOT)
    assert main(["validate", "params/own_kb.yaml"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == (
        f"validate: OK: {example_kb().groupby(['区划名称', '业务办理项名称', '情形']).ngroups}"
        f" items from {len(example_kb())} rows, 12 fields mapped,"
        " 0 duplicate texts, 0 warning(s), 0 error(s)"
    )
    assert any("ids derived from the group key" in line for line in out)


def test_every_problem_at_once_exit_2(tmp_path: Path, capsys, monkeypatch):
    kb = write_example_kb(tmp_path / "kb.xlsx")
    monkeypatch.chdir(tmp_path)
    questions = tmp_path / "q.csv"
    pd.DataFrame({"question": ["x"]}).to_csv(questions, index=False)
    qa = tmp_path / "qa.csv"
    pd.DataFrame({"question": ["x"], "answer": ["y"]}).to_csv(qa, index=False)
    p = _params(
        tmp_path,
        {
            "source": "file",
            "path": kb.name,
            "columns": {
                "item_name": "业务办理项名称",
                "fees": "是否收费",
                "region": "区划",
                "department": "部门",
            },
            "group_by": ["区划名称", "事项编码"],
        },
        questions={"generator": "file", "path": "q.csv"},
        systems=[{"kind": "imported", "name": "mine", "path": "qa.csv"}],
        answerer={"provider": "offline", "model": "extractive"},
    )
    assert main(["validate", str(p)]) == 2
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 6, errors
    assert (
        "unknown field key(s) ['fees']; valid keys: doc_id (编号 / ID),"
        " region (行政区划 / Administrative Region)" in out
    )
    assert "maps 'region' to column '区划'" in out and "maps 'department' to column '部门'" in out
    assert "group_by names column '事项编码'" in out
    assert "q.csv" in out and "qa.csv: missing column(s)" in out and "systems[mine].path" in out
    assert out.strip().splitlines()[-1].startswith("validate: FAILED: knowledge base not loaded")


def test_missing_path_and_unknown_sheet(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = _params(tmp_path, {"source": "file", "path": "nope.xlsx", "columns": {"item_name": "x"}})
    assert main(["validate", str(p)]) == 2
    out = capsys.readouterr().out  # the key, the path as written, the params file, the path read
    expected = (
        "corpus.path: knowledge-base file or folder 'nope.xlsx' not found: a relative path is "
        f"read from the folder of the params file {p}, so it names {tmp_path / 'nope.xlsx'}"
    )
    assert expected in out, out
    write_example_kb(tmp_path / "kb.xlsx")
    p = _params(
        tmp_path,
        {"source": "file", "path": "kb.xlsx", "sheet": "Sheet9", "columns": {"item_name": "x"}},
    )
    assert main(["validate", str(p)]) == 2
    out = capsys.readouterr().out  # the sheets the file has, and the key to change
    assert (
        "no sheet 'Sheet9' (corpus.sheet); the file has 1 sheet(s): '事项清单'" in out
        and "corpus.path" not in out
    )


def test_naive_rows_warn_about_long_format_and_duplicates(tmp_path: Path):
    kb = write_example_kb(tmp_path / "kb.csv")
    params = parse_params(
        {
            "run": "v",
            "judges": JUDGES,
            "corpus": {
                "source": "file",
                "path": str(kb),
                "columns": {"item_name": "业务办理项名称", "region": "区划名称", "variant": "情形"},
                "extra_columns": "drop",
            },
        }
    )
    report = validate_data(params, tmp_path)
    assert report.ok  # a run would work...
    dup = example_kb()[["区划名称", "业务办理项名称", "情形"]].duplicated().sum()
    assert report.figures["duplicate_texts"] == dup  # ...on documents that are copies of each other
    text = "\n".join(report.warnings)
    assert f"{dup} of {len(example_kb())} rows repeat the region/item_name/variant" in text
    assert "corpus.group_by: ['区划名称', '业务办理项名称', '情形']" in text
    assert f"{dup} document(s) are exact text duplicates" in text
    assert report.lines()[-1] == report.summary() and f"{dup} duplicate texts" in report.summary()


def test_empty_documents_and_duplicate_ids(tmp_path: Path):
    p = tmp_path / "kb.csv"
    pd.DataFrame(
        {
            "doc_id": ["a", "b", "a"],
            "item_name": ["x", "y", "z"],
            "fee_standard": ["免费", "", "1元"],
        }
    ).to_csv(p, index=False)
    report = validate_data(
        parse_params({"run": "v", "judges": JUDGES, "corpus": {"source": "file", "path": str(p)}})
    )
    assert report.errors == [f"{p}: duplicate doc_id(s): 'a' at row 1 (line 2), row 3 (line 4)"]
    pd.DataFrame(
        {"doc_id": ["a", "b"], "item_name": ["x", "y"], "fee_standard": ["免费", "无"]}
    ).to_csv(p, index=False)
    report = validate_data(
        parse_params({"run": "v", "judges": JUDGES, "corpus": {"source": "file", "path": str(p)}})
    )
    assert report.ok and report.warnings == [
        f"{p}: 1 document(s) hold nothing but a name (no field beyond region, "
        "item name and variant): b (row 2 (line 3))"
    ]


@pytest.mark.parametrize("name", ["default.yaml", "own_kb.yaml"])
def test_shipped_params_validate_clean(name: str, monkeypatch):
    monkeypatch.chdir(ROOT)
    report = validate_data(load_params(ROOT / "params" / name), ROOT)
    assert report.ok and not report.warnings, report.lines()


def test_imported_answers_naming_unknown_documents(tmp_path: Path):
    kb = write_example_kb(tmp_path / "kb.csv")
    qa = tmp_path / "qa.csv"
    pd.DataFrame(
        {"question": ["a", "b"], "answer": ["x", "y"], "retrieved_doc_ids": ['["K1"]', "[oops"]}
    ).to_csv(qa, index=False)
    data = {
        "run": "v",
        "judges": JUDGES,
        "answerer": {"provider": "offline", "model": "extractive"},
        "systems": [{"kind": "imported", "name": "mine", "path": str(qa)}],
        "corpus": {
            "source": "file",
            "path": str(kb),
            "group_by": ["区划名称", "业务办理项名称", "情形"],
            "columns": {"item_name": "业务办理项名称", "region": "区划名称"},
        },
    }
    params = parse_params(data)
    report = validate_data(params, tmp_path)
    assert [
        e for e in report.errors if "qa.csv: row 2, column 'retrieved_doc_ids'" in e and "mine" in e
    ]
    # the run's own import, against the run's question set, refuses the file, with the fix
    assert [
        e
        for e in report.errors
        if "question text not in the question set" in e and "on_invalid: drop" in e
    ]
    # without the question set (written by an LLM during the run) the unknown ids are a warning
    llm = {"generator": "llm", "model": {"provider": "offline", "model": "extractive"}}
    report = validate_data(parse_params({**data, "questions": llm}), tmp_path)
    assert [
        w
        for w in report.warnings
        if "1 retrieved doc id(s) not in the knowledge base" in w and "row 1: K1" in w
    ]
    assert any("no families" in n for n in report.notes)
