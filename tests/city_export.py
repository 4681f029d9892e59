"""A generated spreadsheet with the shape of a real city's service-guide export (issue 23).

Shape (from one city's real export; every value here is made up): the twelve columns of
`cube.kb.example`, one row per required material, 24 regions, 33 services (主项名称), the sub-item
column 业务办理项名称 holding the placeholder 无 for a service without sub-items (about a quarter of
the rows), 情形 = 无情形 in every row. Deterministic for a seed.
"""

from __future__ import annotations

import random

import pandas as pd

from cube.kb.example import EXAMPLE_COLUMNS

REGIONS = tuple(f"第{i + 1}区" for i in range(23)) + ("示例市",)
COLUMNS = [c for c in EXAMPLE_COLUMNS if c != "synthetic"]
N_SERVICES = 33
PLACEHOLDER = "无"


def city_export(seed: int = 0, n_services: int = N_SERVICES, regions: tuple[str, ...] = REGIONS) -> pd.DataFrame:
    """The export: services 1, 3, 5, ... (the even indexes) have no sub-items (业务办理项名称 = 无), the others 2-3 sub-items,
    some with nested brackets; each (region, service, sub-item) lists 2-4 materials, one per row."""
    rng = random.Random(seed)
    rows = []
    for s in range(n_services):
        service = f"示例服务{s + 1:02d}登记"
        subs = [PLACEHOLDER] if s % 2 == 0 else [f"{service}（情况{k + 1}（本人申请））" if k == 0 else
                                                 f"{service}（情况{k + 1}）" for k in range(2 + s % 2)]
        for region in regions:
            if region != regions[-1] and rng.random() < 0.1:
                continue  # not every region offers every service
            parent = "示例省" if region == regions[-1] else regions[-1]
            for sub in subs:
                for m in range(2 + rng.randrange(3)):
                    rows.append({
                        "区划名称": region, "上级区划名称": parent, "主项名称": service, "业务办理项名称": sub,
                        "承诺办结时限": str(1 + s % 20), "是否收费": "否" if s % 4 else "是",
                        "受理条件": f"符合{service}条件的申请人", "办理地点": f"{region}政务服务中心{s + 1}号窗口",
                        "办理时间": "工作日9:00-17:00", "咨询方式": f"0000-{8000000 + 100 * s + regions.index(region):07d}",
                        "情形": "无情形", "材料名称": f"材料{m + 1}（{service}）",
                    })
    return pd.DataFrame(rows, columns=COLUMNS)
