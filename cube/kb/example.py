"""A SYNTHETIC long-format knowledge-base spreadsheet, shaped like a real government-service export.

Nothing here is real data: the city (青石市) and its districts belong to the fictional province
of `cube.kb.demo`, the phone numbers use the fictional area code 0000. The file exists so a
new user (and the tests) can try the workbench on a file that has every difficulty of a real
export of one city's service items:

- twelve Chinese columns (区划名称, 上级区划名称, 主项名称, 业务办理项名称, 承诺办结时限, 是否收费,
  受理条件, 办理地点, 办理时间, 咨询方式, 情形, 材料名称) and NO id column;
- long format: ONE ROW PER REQUIRED MATERIAL, so an item (region, 业务办理项名称, 情形) spans
  several rows that repeat every other column;
- placeholders for "nothing": 无, 无情形, 暂无, '/';
- variants in brackets, nested ("残疾人证换领（残损换新（户籍地））");
- a parent-region column (a district's city; the city's own items name the province);
- the same item offered by several districts (near-duplicates differing by region only);
- rows sorted item by item (all regions of one item, then the next item), so the first N rows
  cover only a few services;
- a yes/no fee column (是/否) and a unitless time limit ("10": working days, unsaid).

One more column, `synthetic` ("true" on every row), is not part of a real export: the loader
reads it (it is never rendered) so every table and report of a run on this file says the data
are synthetic.

`write_example_kb(path)` writes it as .xlsx or .csv (by suffix); the content is identical for a
given seed (cell for cell). `cube example-kb PATH` calls it; `params/own_kb.yaml` reads it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd

from cube.config.sheets import write_csv, write_xlsx_sheet

EXAMPLE_COLUMNS: tuple[str, ...] = (
    "区划名称",
    "上级区划名称",
    "主项名称",
    "业务办理项名称",
    "承诺办结时限",
    "是否收费",
    "受理条件",
    "办理地点",
    "办理时间",
    "咨询方式",
    "情形",
    "材料名称",
    "synthetic",
)
PROVINCE = "明川省"
CITY = "青石市"
DISTRICTS = ("临江区", "云岗区", "松林县", "东坪县", "茶园县")
STREETS = ("人民路", "解放路", "新华路", "世纪大道", "滨江路", "文化路")
HOURS = ("工作日上午9:00-12:00，下午13:30-17:00", "周一至周五 8:30-17:30（法定节假日除外）")

# (主项名称, [(业务办理项名称, [情形...]), ...], 受理条件, base materials, fee 是/否, time limit,
# 办理部门)
SERVICES: list[tuple[str, list[tuple[str, list[str]]], str, list[str], str, str, str]] = [
    (
        "残疾人证核发",
        [
            ("残疾人证新办", ["无情形"]),
            ("残疾人证换领（残损换新（户籍地））", ["本人申请", "委托代办"]),
            ("残疾人证换领（残损换新（非户籍地））", ["本人申请"]),
            ("残疾人证迁移", ["无情形"]),
        ],
        "持有本地户籍或居住证的残疾人",
        ["居民身份证", "户口簿", "近期二寸免冠彩色照片"],
        "否",
        "10",
        "残疾人联合会",
    ),
    (
        "残疾人基本型辅助器具适配",
        [
            ("残疾人基本型辅助器具适配", ["无"]),
            ("残疾人基本型辅助器具适配（视力残疾）", ["无情形"]),
        ],
        "持有第二代残疾人证",
        ["残疾人证", "辅助器具适配申请表"],
        "否",
        "15",
        "残疾人联合会",
    ),
    (
        "城乡居民基本医疗保险参保登记",
        [
            ("城乡居民基本医疗保险参保登记（新生儿）", ["无情形"]),
            ("城乡居民基本医疗保险参保登记（在校学生）", ["无情形"]),
            ("城乡居民基本医疗保险参保登记（其他居民）", ["本人办理", "委托办理"]),
        ],
        "无",
        ["居民身份证或户口簿", "城乡居民医保参保登记表"],
        "否",
        "1",
        "医疗保障局",
    ),
    (
        "食品经营许可",
        [
            ("食品经营许可（新办）", ["无情形"]),
            ("食品经营许可（变更（经营场所））", ["无情形"]),
            ("食品经营许可（注销）", ["无情形"]),
        ],
        "具有与经营的食品品种、数量相适应的经营场所",
        ["食品经营许可申请书", "营业执照", "法定代表人身份证明"],
        "否",
        "10",
        "市场监督管理局",
    ),
    (
        "个体工商户登记",
        [
            ("个体工商户设立登记", ["无情形"]),
            ("个体工商户变更登记（经营者变更）", ["无情形"]),
            ("个体工商户注销登记", ["简易注销", "普通注销"]),
        ],
        "暂无",
        ["个体工商户登记申请书", "经营者身份证明"],
        "否",
        "3",
        "市场监督管理局",
    ),
    (
        "机动车驾驶证补领",
        [
            ("机动车驾驶证补领（遗失）", ["无情形"]),
            ("机动车驾驶证补领（损毁（无法辨认））", ["无情形"]),
        ],
        "驾驶证在有效期内",
        ["机动车驾驶人身份证明", "近期一寸白底证件照"],
        "是",
        "1",
        "公安局交通警察支队",
    ),
    (
        "不动产登记资料查询",
        [
            ("不动产登记资料查询（权利人）", ["本人查询", "委托查询"]),
            ("不动产登记资料查询（利害关系人）", ["无情形"]),
        ],
        "/",
        ["不动产登记资料查询申请书", "查询人身份证明"],
        "是",
        "/",
        "自然资源局",
    ),
    (
        "最低生活保障审核确认",
        [("最低生活保障审核确认", ["无情形"])],
        "共同生活的家庭成员人均收入低于当地最低生活保障标准",
        ["最低生活保障申请书", "家庭成员身份证明", "家庭收入声明"],
        "否",
        "30",
        "民政局",
    ),
]
EXTRA_MATERIALS = {
    "委托代办": "授权委托书及代办人身份证",
    "委托办理": "授权委托书及代办人身份证",
    "委托查询": "授权委托书",
    "普通注销": "清税证明",
    "简易注销": "全体投资人承诺书",
    "新生儿": "出生医学证明",
    "在校学生": "学籍证明",
    "非户籍地": "居住证",
    "遗失": "遗失声明",
    "损毁": "损毁的驾驶证",
    "变更": "变更后的经营场所证明",
    "视力残疾": "视力残疾评定结论",
}


def _materials(item: str, situation: str, base: list[str]) -> list[str]:
    extra = [m for key, m in EXTRA_MATERIALS.items() if key in item or key == situation]
    return [*base, *dict.fromkeys(extra)]


def example_kb(seed: int = 0) -> pd.DataFrame:
    """The synthetic long-format table: one row per (region, item, situation, material), sorted item
    by item."""
    rng = random.Random(seed)
    regions = [(CITY, PROVINCE)] + [(d, CITY) for d in DISTRICTS]
    rows: list[dict[str, str]] = []
    for main, items, condition, base, fee, limit, dept in SERVICES:
        # not every district offers it
        offered = [r for r in regions if r[0] == CITY or rng.random() < 0.8]
        for item, situations in items:
            for region, parent in offered:
                ri = regions.index((region, parent))
                phone = _phone(rng, ri)
                common = {
                    "区划名称": region,
                    "上级区划名称": parent,
                    "主项名称": main,
                    "业务办理项名称": item,
                    "承诺办结时限": limit,
                    "是否收费": fee,
                    "受理条件": condition,
                    "办理地点": f"{region}政务服务中心{rng.choice(STREETS)}"
                    f"{rng.randrange(1, 300)}号{dept}窗口",
                    "办理时间": "暂无" if rng.random() < 0.1 else HOURS[ri % 2],
                    "咨询方式": phone,
                }
                rows += _material_rows(common, item, situations, base)
    return pd.DataFrame(rows, columns=list(EXAMPLE_COLUMNS))


def _phone(rng: random.Random, ri: int) -> str:
    """A region's consultation phone; a placeholder "/" one time in ten."""
    if rng.random() < 0.1:
        return "/"
    return f"0000-{8100000 + 1000 * ri + rng.randrange(1000):07d}"


def _material_rows(
    common: dict[str, str], item: str, situations: list[str], base: list[str]
) -> list[dict[str, str]]:
    """One row per situation and material of an item in a region."""
    return [
        {**common, "情形": situation, "材料名称": material, "synthetic": "true"}
        for situation in situations
        for material in _materials(item, situation, base)
    ]


def write_example_kb(path: str | Path, seed: int = 0) -> Path:
    """Write the synthetic long-format spreadsheet to `path` (.xlsx or .csv); returns the path.

    Raises:
        ValueError: `path` has another suffix.
    """
    path = Path(path)
    df = example_kb(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".xlsx":
        with pd.ExcelWriter(path, engine="openpyxl") as writer:
            write_xlsx_sheet(writer, df, "事项清单")
    elif path.suffix.lower() == ".csv":
        write_csv(df, path, index=False, encoding="utf-8")
    else:
        raise ValueError(
            f"{path}: example knowledge base is written as .xlsx or .csv, got suffix "
            f"{path.suffix!r}"
        )
    return path
