"""Knowledge-base loaders, rendering, the synthetic demo generator and corpus statistics."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from cube.config.params import parse_params
from cube.config.schema import CORPUS_FIELDS, FIELD_LABELS
from cube.kb.corpus import (
    FILE_EXTRA_COLUMNS,
    build_corpus,
    corpus_stats,
    export_txt_folder,
    family_comparison,
    load_corpus_file,
)
from cube.kb.demo import (
    DEMO_DOMAIN,
    DEMO_EXTRA_COLUMNS,
    SERVICES,
    demo_capacity,
    generate_demo_corpus,
    service_aliases,
)
from cube.kb.document import CORPUS_COLUMNS, CorpusError, parse_document, render_document

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}]


@pytest.fixture(scope="module")
def demo_zh() -> pd.DataFrame:
    return generate_demo_corpus(600, "zh", 0.33, seed=3)


def _days(text: str) -> int:
    return int(re.match(r"\d+", text).group())


# --------------------------------------------------------------------------- rendering
def test_render_document_labels_lists_and_empty_fields():
    rec = {
        "item_name": "抽水蓄能电站项目核准",
        "fee_standard": "",
        "procedure": ["申请", "受理", "决定"],
        "application_materials": "申请书\n项目申请报告",
        "region": "明川省",
    }
    text = render_document(rec, "zh")
    assert text.splitlines() == [
        "行政区划：明川省",
        "事项名称：抽水蓄能电站项目核准",
        "办理流程：",
        "1. 申请",
        "2. 受理",
        "3. 决定",  # a list becomes numbered lines after the label
        "申请材料：",
        "1. 申请书",
        "2. 项目申请报告",  # unnumbered lines of a list field get numbers
    ]
    assert "收费标准" not in text  # empty field left out
    en = render_document({"item_name": "Food Business Licence", "statutory_time_limit": 20}, "en")
    assert en == "Item Name: Food Business Licence\nStatutory Processing Time: 20"
    with pytest.raises(ValueError, match="lang"):
        render_document(rec, "fr")


def test_parse_document_errors_name_file_and_line():
    with pytest.raises(CorpusError, match=r"a\.txt: line 1: expected 'label：value'"):
        parse_document("Some heading\n事项名称：X", "a.txt")
    with pytest.raises(
        CorpusError, match=r"b\.txt: line 2: label '事项名称' appears a second time"
    ):
        parse_document("事项名称：X\n事项名称：Y", "b.txt")
    # ASCII colon with zh labels, and en labels, are both accepted
    assert parse_document("事项名称:X\nFee Standard: Free") == {
        "item_name": "X",
        "fee_standard": "Free",
    }


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_txt_folder_round_trip(tmp_path: Path, lang: str):
    corpus = generate_demo_corpus(25, lang, 0.4, seed=1)
    export_txt_folder(corpus, tmp_path / "kb")
    back = load_corpus_file(tmp_path / "kb", lang=lang)
    assert len(back) == 25 and list(back.columns) == [*CORPUS_COLUMNS, *FILE_EXTRA_COLUMNS]
    back = back.set_index("doc_id").loc[corpus["doc_id"]].reset_index()
    pd.testing.assert_frame_equal(
        back[["doc_id", *CORPUS_FIELDS]], corpus[["doc_id", *CORPUS_FIELDS]]
    )
    assert back["text"].tolist() == corpus["text"].tolist()


# --------------------------------------------------------------------------- loaders
def _records() -> list[dict]:
    return [
        {
            "id": "A1",
            "name": "食品经营许可",
            "fee": "不收费",
            "steps": "申请\n受理",
            "region": "明川省",
        },
        {
            "id": "A2",
            "name": "食品经营许可（变更）",
            "fee": "",
            "steps": "1. 申请\n2. 决定",
            "region": "明川省青石市",
        },
    ]


MAPPING = {"doc_id": "id", "item_name": "name", "fee_standard": "fee", "procedure": "steps"}


def _check_loaded(df: pd.DataFrame) -> None:
    assert df["doc_id"].tolist() == ["A1", "A2"]
    assert df["item_name"].tolist() == ["食品经营许可", "食品经营许可（变更）"]
    assert df["region"].tolist() == ["明川省", "明川省青石市"]  # unmapped field: same-named column
    assert df["procedure"].tolist() == ["1. 申请\n2. 受理", "1. 申请\n2. 决定"]
    assert (df["legal_basis"] == "").all()  # neither mapped nor present: empty
    assert not df["synthetic"].any()
    assert (
        df["text"].iloc[1]
        == "行政区划：明川省青石市\n事项名称：食品经营许可（变更）\n办理流程：\n1. 申请\n2. 决定"
    )


def test_load_csv(tmp_path: Path):
    p = tmp_path / "kb.csv"
    pd.DataFrame(_records()).to_csv(p, index=False)
    _check_loaded(load_corpus_file(p, columns=MAPPING))


def test_load_jsonl_with_list_values(tmp_path: Path):
    p = tmp_path / "kb.jsonl"
    recs = _records()
    recs[0]["steps"] = ["申请", "受理"]  # a JSON list renders as numbered lines
    p.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in recs) + "\n\n", encoding="utf-8"
    )
    _check_loaded(load_corpus_file(p, columns=MAPPING))


def test_load_parquet_and_excel(tmp_path: Path):
    df = pd.DataFrame(_records())
    df.to_parquet(tmp_path / "kb.parquet")
    _check_loaded(load_corpus_file(tmp_path / "kb.parquet", columns=MAPPING))
    with pd.ExcelWriter(tmp_path / "kb.xlsx") as xw:
        pd.DataFrame({"x": [1]}).to_excel(xw, sheet_name="notes", index=False)
        df.to_excel(xw, sheet_name="items", index=False)
    _check_loaded(load_corpus_file(tmp_path / "kb.xlsx", columns=MAPPING, sheet="items"))
    with pytest.raises(
        CorpusError,
        match=r"kb\.xlsx: no sheet 'nope' \(corpus\.sheet\); the file has 2 sheet\(s\): "
        r"'notes', 'items'",
    ):
        load_corpus_file(tmp_path / "kb.xlsx", columns=MAPPING, sheet="nope")


def test_load_txt_with_custom_labels(tmp_path: Path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "X9.txt").write_text(
        "名称：社会团体成立登记\n材料：\n申请书\n章程草案\n", encoding="utf-8"
    )
    df = load_corpus_file(
        tmp_path / "kb", columns={"item_name": "名称", "application_materials": "材料"}
    )
    assert df.loc[0, "doc_id"] == "X9"  # file name = doc_id
    assert df.loc[0, "application_materials"] == "1. 申请书\n2. 章程草案"


def test_build_corpus_demo_and_file(tmp_path: Path):
    p = parse_params(
        {"run": "t", "judges": JUDGES, "corpus": {"n_items": 40, "limit": 7}, "lang": "en"}
    )
    df = build_corpus(p)
    assert len(df) == 7 and df["text"].str.startswith("Administrative Region: ").all()
    pd.DataFrame(_records()).to_csv(tmp_path / "kb.csv", index=False)
    p = parse_params(
        {
            "run": "t",
            "judges": JUDGES,
            "corpus": {"source": "file", "path": "kb.csv", "columns": MAPPING},
        }
    )
    _check_loaded(build_corpus(p, base_dir=tmp_path))  # relative path resolved against base_dir


# --------------------------------------------------------------------------- loader errors
def test_error_missing_file_and_unknown_format(tmp_path: Path):
    with pytest.raises(CorpusError, match=r"nope\.csv: knowledge-base file or folder not found"):
        load_corpus_file(tmp_path / "nope.csv")
    (tmp_path / "kb.docx").write_bytes(b"x")
    with pytest.raises(CorpusError, match=r"kb\.docx: unknown knowledge-base format '\.docx'"):
        load_corpus_file(tmp_path / "kb.docx")
    with pytest.raises(CorpusError, match="unknown format 'yaml'"):
        load_corpus_file(tmp_path / "kb.docx", format="yaml")


def test_error_missing_mapped_or_required_column(tmp_path: Path):
    p = tmp_path / "kb.csv"
    pd.DataFrame(_records()).to_csv(p, index=False)
    with pytest.raises(
        CorpusError,
        match=r"kb\.csv: corpus.columns maps 'fee_standard' to column 'Fee'.*columns found",
    ):
        load_corpus_file(p, columns={**MAPPING, "fee_standard": "Fee"})
    with pytest.raises(CorpusError, match=r"kb\.csv: no column for required field 'item_name'"):
        load_corpus_file(p, columns={"doc_id": "id"})
    with pytest.raises(
        CorpusError, match=r"unknown field key\(s\) \['fees'\]; valid keys: doc_id \(编号 / ID\)"
    ):
        load_corpus_file(p, columns={**MAPPING, "fees": "fee"})


def test_error_empty_files(tmp_path: Path):
    (tmp_path / "a.csv").write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"a\.csv: the file is empty"):
        load_corpus_file(tmp_path / "a.csv")
    (tmp_path / "b.csv").write_text("doc_id,item_name\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"b\.csv: the knowledge-base file is empty"):
        load_corpus_file(tmp_path / "b.csv")
    (tmp_path / "c.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"c\.jsonl: the knowledge-base file is empty"):
        load_corpus_file(tmp_path / "c.jsonl")
    (tmp_path / "kb").mkdir()
    with pytest.raises(CorpusError, match=r"kb: the knowledge-base file is empty"):
        load_corpus_file(tmp_path / "kb")
    (tmp_path / "kb" / "D1.txt").write_text("  \n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"D1\.txt: the file is empty"):
        load_corpus_file(tmp_path / "kb")


def test_csv_errors_name_the_file_line_when_quoted_cells_span_lines(tmp_path: Path):
    # Review finding 10: the line was computed as row + 1, wrong after a multi-line cell.
    p = tmp_path / "kb.csv"
    p.write_text(
        'doc_id,item_name,procedure\nA,办理户口,"1. 申请\n'
        '2. 受理\n3. 审核"\n\nB,办理护照,"1. 申请\n2. 受理"\n'
        "A,重复编号,x\n,空编号,y\n",
        encoding="utf-8",
    )
    with pytest.raises(CorpusError) as err:
        load_corpus_file(p)
    msg = str(err.value)
    lines = p.read_text(encoding="utf-8").splitlines()
    assert lines[8 - 1].startswith("A,重复") and lines[9 - 1].startswith(",空编号")
    assert "'A' at row 1 (line 2), row 3 (line 8)" in msg and "row 4 (line 9)" in msg


def test_error_duplicate_and_empty_doc_ids(tmp_path: Path):
    p = tmp_path / "kb.csv"
    pd.DataFrame({"doc_id": ["A", "B", "A", "C", "C"], "item_name": list("vwxyz")}).to_csv(
        p, index=False
    )
    with pytest.raises(CorpusError) as err:
        load_corpus_file(p)
    msg = str(err.value)
    assert "kb.csv: duplicate doc_id(s)" in msg
    assert (
        "'A' at row 1 (line 2), row 3 (line 4)" in msg
        and "'C' at row 4 (line 5), row 5 (line 6)" in msg
    )
    pd.DataFrame({"doc_id": ["A", ""], "item_name": ["x", "y"]}).to_csv(p, index=False)
    with pytest.raises(
        CorpusError, match=r"kb\.csv: empty 'doc_id' \(column 'doc_id'\) at row 2 \(line 3\)"
    ):
        load_corpus_file(p)


def test_error_undecodable_text_names_file_and_line(tmp_path: Path):
    p = tmp_path / "kb.csv"
    p.write_bytes(b"doc_id,item_name\nD1,ok\nD2," + "食品经营许可".encode("gbk") + b"\n")
    with pytest.raises(CorpusError, match=r"kb\.csv: line 3: cannot decode as utf-8"):
        load_corpus_file(p)
    assert load_corpus_file(p, encoding="gbk")["item_name"].tolist() == ["ok", "食品经营许可"]
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "D7.txt").write_bytes(
        "事项名称：x\n受理条件：".encode() + "条件".encode("gbk")
    )
    with pytest.raises(CorpusError, match=r"D7\.txt: line 2: cannot decode as utf-8"):
        load_corpus_file(tmp_path / "kb")
    (tmp_path / "bad.jsonl").write_text(
        '{"doc_id": "a", "item_name": "b"}\n{oops\n', encoding="utf-8"
    )
    with pytest.raises(CorpusError, match=r"bad\.jsonl: line 2: not valid JSON"):
        load_corpus_file(tmp_path / "bad.jsonl")


# --------------------------------------------------------------------------- demo generator
def test_demo_is_deterministic_and_seed_sensitive():
    a = generate_demo_corpus(150, "zh", 0.33, seed=7)
    b = generate_demo_corpus(150, "zh", 0.33, seed=7)
    assert a.to_csv(index=False).encode() == b.to_csv(index=False).encode()  # byte for byte
    c = generate_demo_corpus(150, "zh", 0.33, seed=8)
    assert not a["text"].equals(c["text"])


@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_demo_exact_size(n: int):
    df = generate_demo_corpus(n, "en")
    assert len(df) == n and df["doc_id"].is_unique
    assert df["doc_id"].iloc[0] == "D00001" and list(df.columns) == [
        *CORPUS_COLUMNS,
        *DEMO_EXTRA_COLUMNS,
    ]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_demo_paper_size_all_fields_and_synthetic_labels(lang: str):
    df = generate_demo_corpus(6111, lang)
    assert len(df) == 6111 and df["doc_id"].is_unique
    assert (df[list(CORPUS_FIELDS)].apply(lambda s: s.str.strip().ne("")).all()).all()
    assert df["synthetic"].all()
    assert df["publication_address"].str.startswith(DEMO_DOMAIN + "/").all()
    assert df["region"].str.contains("明川省" if lang == "zh" else "Mingchuan Province").all()
    stat, committed = df["statutory_time_limit"].map(_days), df["committed_time_limit"].map(_days)
    assert (committed < stat).all()
    # the same item name offered by several regions (cross-region near-duplicates)
    assert (df.groupby("item_name")["region"].nunique() > 1).sum() > 100
    assert df.groupby(["region", "item_name"]).size().max() == 1


def test_demo_family_share_follows_the_parameter():
    for share in (0.0, 0.33, 0.6):
        df = generate_demo_corpus(900, "zh", share, seed=2)
        assert df["family_id"].ne("").mean() == pytest.approx(share, abs=0.01)
    assert generate_demo_corpus(1, "zh", 1.0)["family_id"].tolist() == [
        ""
    ]  # one item cannot form a family


def test_demo_family_members_are_near_duplicates(demo_zh: pd.DataFrame):
    shared = [
        "region",
        "handling_agency",
        "department",
        "consultation_method",
        "legal_basis",
        "service_object",
        "processing_type",
        "online_handling",
        "processing_time",
        "processing_location",
        "procedure",
    ]
    varying = [
        "statutory_time_limit",
        "committed_time_limit",
        "fee_standard",
        "requirements",
        "application_materials",
    ]
    families = demo_zh[demo_zh["family_id"].ne("")].groupby("family_id")
    assert families.ngroups > 30
    for _, fam in families:
        assert 2 <= len(fam) <= 4
        base = fam.iloc[0]
        assert base["variant"] == ""
        for _, m in fam.iloc[1:].iterrows():
            assert m["variant"] and m["item_name"] == f"{base['item_name']}（{m['variant']}）"
            assert (m[shared] == base[shared]).all()
            assert m["requirements"].startswith(base["requirements"][:-1])  # one requirement added
            assert m["application_materials"] != base["application_materials"]
            differing = {f for f in CORPUS_FIELDS if m[f] != base[f]}
            assert differing <= {
                *varying,
                "item_name",
                "publication_address",
            }  # only a few fields differ
            assert {"requirements", "application_materials", "item_name"} <= differing
            assert difflib.SequenceMatcher(None, base["text"], m["text"]).ratio() > 0.75


def test_demo_zh_and_en_are_parallel():
    zh, en = generate_demo_corpus(80, "zh", seed=5), generate_demo_corpus(80, "en", seed=5)
    assert zh["family_id"].tolist() == en["family_id"].tolist()
    assert (
        zh["statutory_time_limit"].map(_days).tolist()
        == en["statutory_time_limit"].map(_days).tolist()
    )
    assert (
        en["variant"]
        .isin(
            [
                "",
                "New Construction",
                "Modification",
                "Renovation and Expansion",
                "First Application",
                "Renewal",
                "Cancellation",
                "New Application",
            ]
        )
        .all()
    )
    assert en["text"].str.contains(FIELD_LABELS["en"]["application_materials"] + ":").all()


def test_demo_aliases_describe_every_item_in_both_languages():
    zh, en = (
        generate_demo_corpus(400, "zh", 0.33, seed=5),
        generate_demo_corpus(400, "en", 0.33, seed=5),
    )
    for df, lang in ((zh, "zh"), (en, "en")):
        aliases = df["aliases"].str.split("\n")
        assert (
            aliases.map(len).ge(2).all() and aliases.map(lambda a: all(x.strip() for x in a)).all()
        )
        base = df["item_name"].str.replace(r"\s*[（(][^（()）]*[)）]$", "", regex=True)
        for name, names, text in zip(base, aliases, df["text"], strict=True):
            for a in names:
                # what a citizen says instead of the official name; not part of the guide
                assert (name not in a) if lang == "zh" else (name.lower() not in a.lower()), (
                    name,
                    a,
                )
                assert a not in text
        # a family shares its service's aliases
        fam = df[df["family_id"] != ""].groupby("family_id")["aliases"].nunique()
        assert (fam == 1).all()
    assert (
        zh["aliases"].str.count("\n").tolist() == en["aliases"].str.count("\n").tolist()
    )  # parallel
    assert "开小饭馆" in service_aliases("食品经营许可", "zh")
    assert "open a small restaurant" in service_aliases("食品经营许可", "en")
    for _, (
        name_zh,
        name_en,
    ), _, _ in SERVICES:  # every service of the generator, not only the sampled ones
        assert all(name_zh not in a for a in service_aliases(name_zh, "zh"))
        assert all(name_en.lower() not in a.lower() for a in service_aliases(name_zh, "en"))


def test_demo_rejects_bad_arguments():
    with pytest.raises(ValueError, match="lang"):
        generate_demo_corpus(5, "fr")
    with pytest.raises(ValueError, match="distinct"):
        generate_demo_corpus(demo_capacity() + 1, "zh", 0.0)


# --------------------------------------------------------------------------- statistics
def test_corpus_stats(demo_zh: pd.DataFrame, tmp_path: Path):
    s = corpus_stats(demo_zh)
    ov = s["overview"].iloc[0]
    assert ov["items"] == 600 and ov["synthetic"] == "yes"
    assert ov["share_in_families"] == pytest.approx(demo_zh["family_id"].ne("").mean())
    assert (s["family_sizes"]["items"].sum()) == demo_zh["family_id"].ne("").sum()
    assert (
        s["family_sizes"]["families"].sum()
        == ov["families"]
        == demo_zh["family_id"].replace("", pd.NA).nunique()
    )
    assert s["by_region"]["items"].sum() == 600 and s["by_department"]["items"].sum() == 600
    assert (s["field_coverage"]["non_empty_share"] == 1.0).all()
    lengths = s["field_lengths"].set_index("field")
    assert lengths.loc["item_name", "max"] == demo_zh["item_name"].str.len().max()
    pd.DataFrame(_records()).to_csv(tmp_path / "kb.csv", index=False)
    user = corpus_stats(load_corpus_file(tmp_path / "kb.csv", columns=MAPPING))
    cov = user["field_coverage"].set_index("field")["non_empty_share"]
    assert cov["fee_standard"] == 0.5 and cov["legal_basis"] == 0.0
    assert user["overview"].iloc[0]["synthetic"] == "no" and user["family_sizes"].empty


def test_family_comparison(demo_zh: pd.DataFrame):
    table = corpus_stats(demo_zh)["family_sizes"]
    largest = table["size"].max()
    cmp = family_comparison(demo_zh)
    assert len(cmp.columns) == 1 + largest  # field + one column per member
    assert {"item_name", "requirements", "application_materials"} <= set(cmp["field"])
    assert not {"region", "handling_agency", "legal_basis"} & set(
        cmp["field"]
    )  # shared fields are left out
    fid = demo_zh.loc[demo_zh["doc_id"] == cmp.columns[1], "family_id"].item()
    assert cmp.columns[1:].tolist() == demo_zh.loc[demo_zh["family_id"] == fid, "doc_id"].tolist()
    assert family_comparison(generate_demo_corpus(5, "zh", 0.0)).columns.tolist() == ["field"]
    with pytest.raises(CorpusError, match="no family 'F9999'"):
        family_comparison(demo_zh, "F9999")
