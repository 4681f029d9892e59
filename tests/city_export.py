"""A generated spreadsheet with the shape of a real city's service-guide export (issue 23).

Shape (from one city's real export; every value here is made up): the twelve columns of
`cube.kb.example`, one row per required material, 24 regions, 33 services (主项名称), the sub-item
column 业务办理项名称 holding the placeholder 无 for a service without sub-items (about a quarter of
the rows), 情形 = 无情形 in every row. Deterministic for a seed.

`city_export`'s keywords vary the shape for `benchmarks/mapping_warnings.py`: the number of regions
and services, the share of services without sub-items, the placeholder, columns a real export adds
(a service code, a department, a material type, remarks) and English column names (`ENGLISH`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pandas as pd

from cube.kb.example import EXAMPLE_COLUMNS

REGIONS = tuple(f"第{i + 1}区" for i in range(23)) + ("示例市",)
COLUMNS = [c for c in EXAMPLE_COLUMNS if c != "synthetic"]
N_SERVICES = 33
PLACEHOLDER = "无"
EXTRA_COLUMNS = (
    "事项编码",
    "所属部门",
    "材料类型",
    "备注",
)  # what other exports carry besides the twelve
ENGLISH = {
    "区划名称": "region_name",
    "上级区划名称": "parent_region_name",
    "主项名称": "service_name",
    "业务办理项名称": "sub_item_name",
    "承诺办结时限": "time_limit_days",
    "是否收费": "fee_charged",
    "受理条件": "conditions",
    "办理地点": "office_address",
    "办理时间": "office_hours",
    "咨询方式": "hotline",
    "情形": "situation",
    "材料名称": "material_name",
    "事项编码": "service_code",
    "所属部门": "department",
    "材料类型": "material_type",
    "备注": "remarks",
}
_DEPARTMENTS = ("民政局", "人社局", "公安局", "卫健委", "住建局", "市场监管局")


def city_export(
    seed: int = 0,
    n_services: int = N_SERVICES,
    regions: tuple[str, ...] = REGIONS,
    *,
    placeholder_share: float | None = None,
    placeholder: str = PLACEHOLDER,
    extra: Sequence[str] = (),
    english: bool = False,
) -> pd.DataFrame:
    """The export: by default services 1, 3, 5, ... (the even indexes) have no sub-items
    (业务办理项名称 = `placeholder`), the others 2-3 sub-items, some with nested brackets; each
    (region, service, sub-item) lists 2-4 materials, one per row. `placeholder_share` draws the
    services without sub-items at random instead; `extra` adds columns of `EXTRA_COLUMNS`; `english`
    renames every column (`ENGLISH`)."""
    rng = random.Random(seed)
    shape = random.Random(
        f"{seed}-shape"
    )  # the keywords' draws: the default export stays as it was
    rows = []
    for s in range(n_services):
        service = f"示例服务{s + 1:02d}登记"
        bare = s % 2 == 0 if placeholder_share is None else shape.random() < placeholder_share
        subs = (
            [placeholder]
            if bare
            else [
                f"{service}（情况{k + 1}（本人申请））" if k == 0 else f"{service}（情况{k + 1}）"
                for k in range(2 + s % 2)
            ]
        )
        for region in regions:
            if region != regions[-1] and rng.random() < 0.1:
                continue  # not every region offers every service
            parent = "示例省" if region == regions[-1] else regions[-1]
            for sub in subs:
                for m in range(2 + rng.randrange(3)):
                    row = {
                        "区划名称": region,
                        "上级区划名称": parent,
                        "主项名称": service,
                        "业务办理项名称": sub,
                        "承诺办结时限": str(1 + s % 20),
                        "是否收费": "否" if s % 4 else "是",
                        "受理条件": f"符合{service}条件的申请人",
                        "办理地点": f"{region}政务服务中心{s + 1}号窗口",
                        "办理时间": "工作日9:00-17:00",
                        "咨询方式": f"0000-{8000000 + 100 * s + regions.index(region):07d}",
                        "情形": "无情形",
                        "材料名称": f"材料{m + 1}（{service}）",
                    }
                    row.update(
                        {
                            "事项编码": f"11{s + 1:04d}000",
                            "所属部门": _DEPARTMENTS[s % len(_DEPARTMENTS)],
                            "材料类型": shape.choice(("原件", "复印件", "原件及复印件")),
                            "备注": shape.choice(("暂无", "", "需本人到场", "可网上预约")),
                        }
                    )
                    rows.append(row)
    out = pd.DataFrame(rows, columns=[*COLUMNS, *(c for c in EXTRA_COLUMNS if c in extra)])
    return out.rename(columns=ENGLISH) if english else out
