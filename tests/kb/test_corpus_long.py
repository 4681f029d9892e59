"""Long-format knowledge bases: the synthetic example spreadsheet, grouping, placeholders, extras,
sampling."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cube.config.params import ParamsError, parse_params
from cube.kb.corpus import build_corpus, load_corpus_file, load_corpus_report
from cube.kb.document import CorpusError, parse_document
from cube.kb.example import EXAMPLE_COLUMNS, example_kb, write_example_kb
from cube.kb.mapping import sample_items

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}]
COLUMNS = {
    "region": "区划名称",
    "parent_region": "上级区划名称",
    "family_id": "主项名称",
    "item_name": "业务办理项名称",
    "committed_time_limit": "承诺办结时限",
    "fee_standard": "是否收费",
    "requirements": "受理条件",
    "processing_location": "办理地点",
    "processing_time": "办理时间",
    "consultation_method": "咨询方式",
    "variant": "情形",
    "application_materials": "材料名称",
}
GROUP = ["区划名称", "业务办理项名称", "情形"]


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory) -> Path:
    return write_example_kb(tmp_path_factory.mktemp("kb") / "guides.xlsx")


def test_example_kb_is_shaped_like_a_real_export():
    df = example_kb()
    assert tuple(df.columns) == EXAMPLE_COLUMNS and "doc_id" not in df.columns
    assert (
        len(EXAMPLE_COLUMNS) == 13 and df["synthetic"].eq("true").all()
    )  # 12 columns of a real export + the flag
    assert df.equals(example_kb())  # deterministic
    keys = df[GROUP].apply(tuple, axis=1)
    assert keys.duplicated().sum() > len(df) / 2  # one row per material: items span several rows
    for placeholder in ("无", "无情形", "暂无", "/"):
        assert df.eq(placeholder).any().any(), placeholder
    assert (
        df["业务办理项名称"].str.contains("（[^（）]*（[^（）]*）[^（）]*）").any()
    )  # nested brackets
    assert set(df["上级区划名称"]) == {"明川省", "青石市"}
    first = df["业务办理项名称"].head(40)
    assert first.nunique() <= 2  # sorted item by item: the first rows cover one or two services


def test_write_example_kb_csv_and_unknown_suffix(tmp_path: Path):
    p = write_example_kb(tmp_path / "kb.csv")
    assert pd.read_csv(p, dtype=str, keep_default_na=False).equals(example_kb())
    with pytest.raises(ValueError, match=r"kb\.txt.*\.xlsx or \.csv"):
        write_example_kb(tmp_path / "kb.txt")


def test_group_by_makes_one_document_per_item(kb_path: Path):
    raw = example_kb()
    df, notes = load_corpus_report(kb_path, columns=COLUMNS, group_by=GROUP)
    assert (
        len(df) == raw.groupby(GROUP).ngroups and df["doc_id"].is_unique and df["synthetic"].all()
    )
    assert any(f"{len(raw)} rows grouped by" in n for n in notes)
    # materials of one item: every row's material, in order, as a numbered list
    key = ("云岗区", "残疾人证换领（残损换新（户籍地））", "委托代办")
    rows = raw[(raw[GROUP] == list(key)).all(axis=1)]
    doc = df[(df["region"] == key[0]) & (df["item_name"] == key[1]) & (df["variant"] == key[2])]
    assert len(doc) == 1
    expected = "\n".join(f"{i}. {m}" for i, m in enumerate(rows["材料名称"], 1))
    assert doc["application_materials"].iloc[0] == expected and len(rows) >= 3
    text = doc["text"].iloc[0]
    assert (
        "情形：委托代办" in text and "上级区划：青石市" in text and expected in text
    )  # variant rendered
    assert parse_document(text, strict=False)["application_materials"] == expected


def test_auto_ids_are_stable_and_reported(kb_path: Path, tmp_path: Path):
    a, notes = load_corpus_report(kb_path, columns=COLUMNS, group_by=GROUP)
    assert any("doc_id not mapped: ids derived from the group key" in n for n in notes)
    shuffled = tmp_path / "shuffled.csv"
    example_kb().sample(frac=1, random_state=1).to_csv(shuffled, index=False)
    b = load_corpus_file(shuffled, columns=COLUMNS, group_by=GROUP)

    def ids(d):
        return dict(
            zip(
                d["doc_id"], d[["region", "item_name", "variant"]].apply(tuple, axis=1), strict=True
            )
        )

    assert ids(a) == ids(b)  # same item, same id, whatever the row order
    rows, notes = load_corpus_report(kb_path, columns=COLUMNS)  # no group_by: ids from row content
    assert rows["doc_id"].is_unique and any("each row's content" in n for n in notes)


def test_placeholders_are_missing_everywhere(kb_path: Path):
    df, notes = load_corpus_report(kb_path, columns=COLUMNS, group_by=GROUP)
    values = df[list(COLUMNS)].astype(str)
    for placeholder in ("无", "无情形", "暂无", "/"):
        assert not values.eq(placeholder).any().any(), placeholder
        assert not df["text"].str.contains(f"：{placeholder}\n", regex=False).any()
    assert any("placeholders read as missing" in n and "'无情形'" in n for n in notes)
    kept = load_corpus_file(kb_path, columns=COLUMNS, group_by=GROUP, empty_values=["暂无"])
    assert kept["variant"].eq("无情形").any()  # the list is configurable


def test_extra_columns_render_or_drop(kb_path: Path):
    cols = {k: v for k, v in COLUMNS.items() if k not in ("parent_region", "processing_time")}
    df, notes = load_corpus_report(kb_path, columns=cols, group_by=GROUP)
    assert any("'上级区划名称'" in n and "'办理时间'" in n and "rendered" in n for n in notes)
    assert df["text"].str.contains("上级区划名称：青石市").any()
    assert parse_document(df["text"].iloc[0], strict=False)["item_name"] == df["item_name"].iloc[0]
    dropped, notes = load_corpus_report(kb_path, columns=cols, group_by=GROUP, extra_columns="drop")
    assert (
        any("dropped" in n for n in notes)
        and not dropped["text"].str.contains("上级区划名称").any()
    )


def test_every_mapping_problem_at_once(kb_path: Path):
    cols = {**COLUMNS, "fee_standard": "收费", "department": "部门"}
    with pytest.raises(CorpusError) as err:
        load_corpus_file(kb_path, columns=cols, group_by=[*GROUP, "事项编码"])
    msg = str(err.value)
    assert "3 problem(s)" in msg
    assert (
        "maps 'fee_standard' to column '收费'" in msg
        and "maps 'department' to column '部门'" in msg
    )
    assert "group_by names column '事项编码'" in msg and "guides.xlsx" in msg


def test_doc_id_must_be_one_per_group(tmp_path: Path):
    p = tmp_path / "kb.csv"
    pd.DataFrame({"id": ["a", "b", "c"], "name": ["x", "x", "y"], "m": ["1", "2", "3"]}).to_csv(
        p, index=False
    )
    with pytest.raises(
        CorpusError,
        match=r"column 'id' \(doc_id\) has several values \['a', 'b'\].*row 1 \(line 2\)",
    ):
        load_corpus_file(
            p,
            columns={"doc_id": "id", "item_name": "name", "application_materials": "m"},
            group_by=["name"],
        )


def test_sample_is_stratified_and_deterministic(kb_path: Path):
    corpus = load_corpus_file(kb_path, columns=COLUMNS, group_by=GROUP)
    s = sample_items(corpus, 30, seed=1)
    assert len(s) == 30 and s.equals(sample_items(corpus, 30, seed=1))
    share = corpus["region"].value_counts(normalize=True)
    got = s["region"].value_counts()
    assert all(
        abs(got.get(r, 0) - 30 * share[r]) < 1 for r in share.index
    )  # proportional per region
    assert s["item_name"].nunique() > corpus.head(30)["item_name"].nunique()  # covers more services
    p = parse_params(
        {
            "run": "t",
            "judges": JUDGES,
            "corpus": {
                "source": "file",
                "path": str(kb_path),
                "columns": COLUMNS,
                "group_by": GROUP,
                "sample": 30,
                "seed": 1,
            },
        }
    )
    built = build_corpus(p)
    assert built["doc_id"].tolist() == s["doc_id"].tolist()
    assert any("corpus.sample: 30 of" in n for n in built.attrs["load_notes"])


def test_params_reject_sample_with_limit():
    with pytest.raises(ParamsError, match="not both"):
        parse_params({"run": "t", "judges": JUDGES, "corpus": {"sample": 3, "limit": 3}})


def test_corpus_structure_counts_duplicates_and_families(kb_path: Path):
    from cube.kb.corpus import corpus_structure, duplicate_table

    grouped = load_corpus_file(kb_path, columns=COLUMNS, group_by=GROUP)
    s = corpus_structure(grouped)
    raw = example_kb()
    assert (
        s["documents"] == len(grouped)
        and s["duplicate_texts"] == 0
        and duplicate_table(grouped).empty
    )
    assert s["families"] == raw["主项名称"].nunique() and s["documents_in_families"] == len(grouped)
    assert (
        s["families_across_regions"] == s["families"]
    )  # every service is offered by several regions
    multi = raw.groupby(["主项名称", "区划名称"])[["业务办理项名称", "情形"]].apply(
        lambda d: len(d.drop_duplicates()) > 1
    )
    assert s["families_with_variants"] == multi.groupby(level=0).any().sum()
    naive = load_corpus_file(
        kb_path,
        columns={"item_name": "业务办理项名称", "region": "区划名称"},
        extra_columns="drop",
        empty_values=[],
    )  # rows as documents, other columns dropped
    s = corpus_structure(naive)
    dup = int(raw[["区划名称", "业务办理项名称"]].duplicated().sum())
    table = duplicate_table(naive)
    assert s["duplicate_texts"] == dup and s["duplicate_groups"] == len(table)
    assert (
        table["documents"].sum() == dup + len(table)
        and s["families"] == 0
        and s["family_size_max"] is None
    )


def test_render_variant_parent_region_and_extras():
    from cube.kb.document import render_document

    rec = {
        "region": "云岗区",
        "parent_region": "青石市",
        "item_name": "残疾人证换领（残损换新（户籍地））",
        "variant": "委托代办",
        "fee_standard": "否",
    }
    text = render_document(rec, "zh", extras=[("上级区划名称", "青石市")])
    assert text.splitlines() == [
        "上级区划名称：青石市",
        "行政区划：云岗区",
        "上级区划：青石市",
        "事项名称：残疾人证换领（残损换新（户籍地））",
        "情形：委托代办",
        "收费标准：否",
    ]
    assert "情形" not in render_document(
        {"item_name": "食品经营许可（变更）", "variant": "变更"}, "zh"
    )  # no doubling
    en = render_document({**rec, "item_name": "Disability card", "variant": "By an agent"}, "en")
    assert "Variant: By an agent" in en and "Parent Region: 青石市" in en
    back = parse_document(text, extra_labels=["上级区划名称"])
    assert (
        back["variant"] == "委托代办"
        and back["parent_region"] == "青石市"
        and back["上级区划名称"] == "青石市"
    )


def test_a_saved_corpus_reloads_without_its_text_column_rendered(tmp_path: Path):
    from cube.kb.demo import generate_demo_corpus

    demo = generate_demo_corpus(20, "zh", 0.4, seed=2)
    demo.to_csv(tmp_path / "kb.csv", index=False)
    back, notes = load_corpus_report(tmp_path / "kb.csv")
    assert back["text"].tolist() == demo["text"].tolist() and back["synthetic"].all()
    assert "column 'text' ignored: each document is rendered from its fields" in notes


_names = st.sampled_from(["甲", "乙", "丙（一（二））", "丁"])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A区", "B区"]),
            _names,
            st.sampled_from(["无情形", "本人", "代办"]),
            st.sampled_from(["申请书", "身份证", "照片", "无", "合同"]),
        ),
        min_size=1,
        max_size=25,
    ),
    st.randoms(use_true_random=False),
)
def test_grouping_properties(rows, rnd):
    from cube.kb.mapping import map_table

    raw = pd.DataFrame(rows, columns=["区", "名", "情形", "材料"])
    cols = {"region": "区", "item_name": "名", "variant": "情形", "application_materials": "材料"}
    where = [f"row {i + 1}" for i in range(len(raw))]
    out, problems, _ = map_table(raw, where, cols, "kb", group_by=["区", "名", "情形"])
    assert not problems
    keys = raw.replace({"无情形": ""})[["区", "名", "情形"]].apply(tuple, axis=1)
    assert len(out) == keys.nunique() and out["doc_id"].is_unique
    for rec in out.to_dict(
        "records"
    ):  # each item: its rows' distinct materials, in order, placeholders gone
        mine = raw[keys == (rec["region"], rec["item_name"], rec["variant"])]["材料"]
        assert rec["application_materials"] == [m for m in dict.fromkeys(mine) if m != "无"] or (
            len(mine) == 1
            and rec["application_materials"] == ("" if mine.iloc[0] == "无" else mine.iloc[0])
        )
    order = list(range(len(raw)))
    rnd.shuffle(order)
    shuffled, _, _ = map_table(
        raw.iloc[order], [where[i] for i in order], cols, "kb", group_by=["区", "名", "情形"]
    )

    def ident(d):
        return set(zip(d["doc_id"], d["region"], d["item_name"], d["variant"], strict=True))

    assert ident(shuffled) == ident(out)


def test_numbered_cells_of_a_long_format_item_are_numbered_once():
    # Review finding 11: rows "1. 身份证", "2. 户口本" of one item rendered as "1. 1. 身份证".
    from cube.kb.document import field_text, render_document
    from cube.kb.mapping import map_table

    raw = pd.DataFrame(
        {
            "事项名称": ["户口迁移", "户口迁移", "户口迁移", "户口迁移", "护照"],
            "材料": [
                "1. 身份证",
                "2. 户口本",
                "（3）照片\n4、体检表 1.5 页",
                "身份证",
                "身份证\n户口本",
            ],
        }
    )
    recs, problems, _ = map_table(
        raw,
        [f"row {i}" for i in range(5)],
        {"item_name": "事项名称", "application_materials": "材料"},
        "kb.csv",
        group_by=["事项名称"],
    )
    assert problems == []
    docs = {r["item_name"]: render_document(r.to_dict(), "zh") for _, r in recs.iterrows()}
    assert docs["户口迁移"].endswith("申请材料：\n1. 身份证\n2. 户口本\n3. 照片\n4. 体检表 1.5 页")
    assert docs["护照"].endswith("申请材料：\n1. 身份证\n2. 户口本")
    assert (
        field_text("procedure", ["1. 申请", "2、受理", "3.5 小时内审核"])
        == "1. 申请\n2. 受理\n3. 3.5 小时内审核"
    )
