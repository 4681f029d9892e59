"""The mapping warnings of `cube validate` on known-truth mappings: false positives and false
negatives.

`cube.kb.mapping` warns (or, for an empty required field, errs) when a mapping runs but is wrong.
Each of its deciders is a heuristic; here each meets mappings whose truth is known:

- sources: `N_EXPORTS` seeded exports of the city shape (`tests/city_export.py`: 1-30 regions, 4-40
  services, 0-60 % of services without sub-items, the placeholder 无 or /, 0-4 extra columns,
  Chinese or English column names, family_id mapped or not), the example spreadsheet
  (`cube.kb.example`, `params/own_kb.yaml`'s mapping) and the two demo corpora (zh, en; one row per
  item, and one row per material grouped by doc_id);
- CORRECT mappings (truth: no warning and no error): one document per service and sub-item;
- BROKEN mappings (truth: a warning or an error naming the mistake):
  - `placeholder_name`: the sub-item column (holding the placeholder) as item_name, the placeholder
    removed from empty_values (the "plausible wrong fix" of issue 23);
  - `region_only`: grouped by the region column alone;
  - `wrong_name_kept`: another column as item_name (address, conditions, phone, material, time
    limit, fee, region), still mapped to its own field too;
  - `wrong_name_moved`: the same, with its own field left unmapped;
- ORDINARY correct mappings of corpora that are no city export (`ordinary_cases`, `N_ORDINARY`
  seeded draws each): English and Chinese FAQs named by question titles, "<city> <service>" names in
  several cities (English, Chinese, with office words inside a name: "Recreation Center
  Membership"), regions coded by digits, tax forms named by their numbers (1040, 941, W-4), and a
  long-format English KB grouped by district and service; truth: no warning (written with the fix
  in view: in-sample);
- and the suggestion of the placeholder error (placeholder kept in empty_values): does it name the
  column that truly names the service (`service_column`)?

The heuristics were fixed with the city seeds 0-59, the example and the demos in view (in-sample);
the city seeds 1000-1059 were drawn after the last change (held-out): both are printed.

Printed: per kind, cases, warned, false negatives (broken, no warning) or false positives (correct,
some warning), with the warnings' first words for the misses. Last line: the overall error rate
(false positives + false negatives over all cases).

    .venv/bin/python benchmarks/mapping_warnings.py     (about a minute)
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cube.config.params import parse_params  # noqa: E402
from cube.kb.corpus import build_corpus  # noqa: E402
from cube.kb.example import example_kb  # noqa: E402
from cube.kb.mapping import DEFAULT_EMPTY_VALUES, WARNING, map_table  # noqa: E402
from tests.city_export import ENGLISH, EXTRA_COLUMNS, city_export  # noqa: E402

N_EXPORTS = 60
N_ORDINARY = 10  # seeded draws of each ordinary correct shape (`ordinary_cases`)
HELD_OUT = (
    1000  # seeds 0-59 were in view while the heuristics were fixed; seeds 1000-1059 never were
)
# field key -> the city export's column (Chinese); ENGLISH renames them
CITY = {
    "region": "区划名称",
    "parent_region": "上级区划名称",
    "committed_time_limit": "承诺办结时限",
    "fee_standard": "是否收费",
    "requirements": "受理条件",
    "processing_location": "办理地点",
    "processing_time": "办理时间",
    "consultation_method": "咨询方式",
    "application_materials": "材料名称",
}
WRONG_NAMES = (
    "processing_location",
    "requirements",
    "consultation_method",
    "application_materials",
    "committed_time_limit",
    "fee_standard",
    "region",
)


def judged(
    raw: pd.DataFrame,
    columns: dict[str, str],
    group_by: list[str],
    empty: tuple[str, ...] = DEFAULT_EMPTY_VALUES,
) -> list[str]:
    """Every warning and error validate would print for this mapping."""
    where = [f"row {i + 1}" for i in range(len(raw))]
    _, problems, notes = map_table(
        raw, where, columns, "bench", group_by=group_by, empty_values=empty
    )
    return problems + [n.removeprefix(WARNING) for n in notes if n.startswith(WARNING)]


def wrong_names(columns: dict[str, str], rng: random.Random) -> list[tuple[str, dict[str, str]]]:
    key = rng.choice([k for k in WRONG_NAMES if k in columns])
    kept = dict(columns, item_name=columns[key])
    moved = {k: v for k, v in kept.items() if k != key}
    return [("wrong_name_kept", kept), ("wrong_name_moved", moved)]


def city_cases(
    seed: int,
) -> list[tuple[str, pd.DataFrame, dict[str, str], list[str], tuple[str, ...]]]:
    rng = random.Random(seed)
    regions = tuple(f"第{i + 1}区" for i in range(rng.randint(0, 29))) + ("示例市",)
    english = rng.random() < 0.5
    placeholder = rng.choice(("无", "/"))
    raw = city_export(
        seed,
        n_services=rng.randint(4, 40),
        regions=regions,
        placeholder_share=rng.uniform(0, 0.6),
        placeholder=placeholder,
        extra=rng.sample(EXTRA_COLUMNS, rng.randint(0, 4)),
        english=english,
    )
    name = (lambda c: ENGLISH[c]) if english else (lambda c: c)
    service, sub, situation = name("主项名称"), name("业务办理项名称"), name("情形")
    base = {k: name(c) for k, c in CITY.items()}
    family = {"family_id": service} if rng.random() < 0.5 else {}
    right = {**base, **family, "item_name": service, "variant": sub}
    group = [base["region"], service, sub]
    cases = [
        ("correct", raw, right, group, DEFAULT_EMPTY_VALUES),
        ("region_only", raw, right, [base["region"]], DEFAULT_EMPTY_VALUES),
    ]
    cases += [
        (kind, raw, cols, group, DEFAULT_EMPTY_VALUES) for kind, cols in wrong_names(right, rng)
    ]
    if raw[sub].eq(placeholder).any():
        as_copied = {**base, **family, "item_name": sub, "variant": situation}
        kept = tuple(v for v in DEFAULT_EMPTY_VALUES if v != placeholder)
        cases.append(("placeholder_name", raw, as_copied, [base["region"], sub, situation], kept))
        cases.append(
            (
                "service_column",
                raw,
                as_copied,
                [base["region"], sub, situation],
                DEFAULT_EMPTY_VALUES,
            )
        )
    return cases


def example_cases() -> list[tuple[str, pd.DataFrame, dict[str, str], list[str], tuple[str, ...]]]:
    raw = example_kb()
    right = {
        **CITY,
        "parent_region": "上级区划名称",
        "family_id": "主项名称",
        "item_name": "业务办理项名称",
        "variant": "情形",
    }
    group = ["区划名称", "业务办理项名称", "情形"]
    cases = [
        ("correct", raw, right, group, DEFAULT_EMPTY_VALUES),
        ("region_only", raw, right, ["区划名称"], DEFAULT_EMPTY_VALUES),
    ]
    for key in WRONG_NAMES:
        kept = dict(right, item_name=right[key])
        cases += [
            ("wrong_name_kept", raw, kept, group, DEFAULT_EMPTY_VALUES),
            (
                "wrong_name_moved",
                raw,
                {k: v for k, v in kept.items() if k != key},
                group,
                DEFAULT_EMPTY_VALUES,
            ),
        ]
    return cases


def demo_cases(
    lang: str,
) -> list[tuple[str, pd.DataFrame, dict[str, str], list[str], tuple[str, ...]]]:
    params = parse_params(
        {
            "run": "b",
            "lang": lang,
            "corpus": {"n_items": 300, "seed": 5},
            "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
        }
    )
    wide = build_corpus(params).drop(columns=["text"])
    long = wide.explode("application_materials").reset_index(drop=True)  # one row per material
    right = {k: k for k in wide.columns if k not in ("synthetic",)}
    cases = [
        ("correct", wide, right, [], DEFAULT_EMPTY_VALUES),
        ("correct", long, right, ["doc_id"], DEFAULT_EMPTY_VALUES),
        (
            "region_only",
            long,
            {k: v for k, v in right.items() if k != "doc_id"},
            ["region"],
            DEFAULT_EMPTY_VALUES,
        ),
    ]
    for key in (
        "processing_location",
        "requirements",
        "consultation_method",
        "committed_time_limit",
        "fee_standard",
        "region",
        "handling_agency",
    ):
        kept = dict(right, item_name=key)
        cases += [
            ("wrong_name_kept", wide, kept, [], DEFAULT_EMPTY_VALUES),
            (
                "wrong_name_moved",
                wide,
                {k: v for k, v in kept.items() if k != key},
                [],
                DEFAULT_EMPTY_VALUES,
            ),
        ]
    return cases


SERVICES_EN = (
    "Resident Parking Permit",
    "Dog Licence",
    "Building Permit",
    "Marriage Licence",
    "Business Registration",
    "Council Tax Payment",
    "Pothole Report",
    "Bulky Waste Collection",
    "Senior Bus Pass (65+)",
    "2024 Property Tax Return",
    "Recreation Center Membership",
    "Town Hall Room Hire",
    "Street Trading Licence",
    "Birth Certificate Copy",
    "Noise Complaint",
)
SERVICES_ZH = (
    "居民身份证办理",
    "犬只登记",
    "建筑工程施工许可",
    "婚姻登记",
    "个体工商户设立登记",
    "居民临时停车许可",
    "城乡居民养老保险参保登记",
    "残疾人证办理",
    "社区服务中心场地预约",
    "2024年度房产税申报",
    "道路挖掘许可",
    "出生医学证明补发",
    "噪声投诉",
    "老年人乘车卡办理",
    "户口迁移",
)
CITIES_EN = (
    "Springfield",
    "Shelbyville",
    "Ogdenville",
    "North Haverbrook",
    "Capital City",
    "Brockway",
    "Cypress Creek",
)
CITIES_ZH = ("东陵市", "白沙市", "丹江市", "梅岭县", "沙洲区", "瑶南区", "青石镇")
FORMS = (
    "1040",
    "1040-SR",
    "W-4",
    "W-2",
    "1099-MISC",
    "941",
    "940",
    "8821",
    "2848",
    "SS-4",
    "4868",
    "9465",
    "1065",
    "1120",
    "W-9",
)


def ordinary_cases(seed: int) -> list[tuple[str, str, pd.DataFrame, dict[str, str], list[str]]]:
    """Correct mappings of ordinary corpora that are not city exports (the reviewer's false alarms
    and more): (shape, ...) each with its truth, no warning."""
    rng = random.Random(seed)
    services_en = rng.sample(SERVICES_EN, rng.randint(5, len(SERVICES_EN)))
    services_zh = rng.sample(SERVICES_ZH, rng.randint(5, len(SERVICES_ZH)))
    cities_en = rng.sample(CITIES_EN, rng.randint(2, 5))
    cities_zh = rng.sample(CITIES_ZH, rng.randint(2, 5))
    ask = (
        "How do I apply for a {}?",
        "Where can I get a {}?",
        "What documents do I need for a {}?",
        "How long does a {} take?",
    )
    faq_en = pd.DataFrame(
        {
            "title": [rng.choice(ask).format(s.lower()) for s in services_en],
            "answer": [
                f"Apply online or at the service desk ({i})." for i in range(len(services_en))
            ],
        }
    )
    ask_zh = ("如何办理{}？", "{}需要哪些材料？", "{}在哪里办？", "{}多久能办好？")
    faq_zh = pd.DataFrame(
        {
            "问题": [rng.choice(ask_zh).format(s) for s in services_zh],
            "答复": [f"请携带身份证到政务服务中心办理（{i}）。" for i in range(len(services_zh))],
        }
    )
    city_en = pd.DataFrame(
        [
            {
                "city": c,
                "service": f"{c} {s}",
                "fee": rng.choice(("10 USD", "Free of charge", "25 USD")),
            }
            for c in cities_en
            for s in services_en
        ]
    )
    city_zh = pd.DataFrame(
        [
            {"区划": c, "事项": f"{c}{s}", "收费": rng.choice(("否", "是"))}
            for c in cities_zh
            for s in services_zh
        ]
    )
    n_codes = rng.randint(2, 6)
    coded = pd.DataFrame(
        [
            {
                "district": str(d),
                "service": rng.choice(("Form {}0{} filing", "Zone {} permit {}")).format(d, k),
                "fee": "none",
            }
            for d in range(1, n_codes + 1)
            for k in range(1, rng.randint(3, 6))
        ]
    )
    forms = rng.sample(FORMS, rng.randint(5, len(FORMS)))
    form_kb = pd.DataFrame(
        {"form": forms, "description": [f"Instructions for form {f}" for f in forms]}
    )
    long = pd.DataFrame(
        [
            {
                "district": f"{c} District",
                "service": s,
                "material": f"Document {m + 1}",
                "hours": "9:00-17:00",
            }
            for c in cities_en
            for s in services_en
            for m in range(rng.randint(1, 4))
        ]
    )
    return [
        ("faq_en", faq_en, {"item_name": "title", "requirements": "answer"}, []),
        ("faq_zh", faq_zh, {"item_name": "问题", "requirements": "答复"}, []),
        (
            "city_service_en",
            city_en,
            {"item_name": "service", "region": "city", "fee_standard": "fee"},
            [],
        ),
        (
            "city_service_zh",
            city_zh,
            {"item_name": "事项", "region": "区划", "fee_standard": "收费"},
            [],
        ),
        (
            "coded_regions",
            coded,
            {"item_name": "service", "region": "district", "fee_standard": "fee"},
            [],
        ),
        ("form_numbers", form_kb, {"item_name": "form", "requirements": "description"}, []),
        (
            "long_format_en",
            long,
            {
                "item_name": "service",
                "region": "district",
                "application_materials": "material",
                "processing_time": "hours",
            },
            ["district", "service"],
        ),
    ]


def main() -> float:
    sources = [(f"city (seed {s})", city_cases(s)) for s in range(N_EXPORTS)]
    sources += [
        (f"city held-out (seed {s})", city_cases(s)) for s in range(HELD_OUT, HELD_OUT + N_EXPORTS)
    ]
    sources += [
        ("example spreadsheet", example_cases()),
        ("demo zh", demo_cases("zh")),
        ("demo en", demo_cases("en")),
    ]
    ordinary = [
        (f"ordinary {shape}", [("correct", raw, cols, group, DEFAULT_EMPTY_VALUES)])
        for s in range(N_ORDINARY)
        for shape, raw, cols, group in ordinary_cases(s)
    ]
    sources += ordinary
    tally: dict[tuple[str, str], list[int]] = defaultdict(
        lambda: [0, 0]
    )  # (family, kind) -> [cases, errors]
    misses: dict[str, list[str]] = defaultdict(list)
    for source, cases in sources:
        family = source.split(" (")[0]
        for kind, raw, columns, group, empty in cases:
            said = judged(raw, columns, group, empty)
            if kind == "service_column":
                service = columns.get("family_id") or next(
                    c for c in raw.columns if c in ("主项名称", "service_name")
                )
                wrong = not any(f"item_name: {service}," in s for s in said)
            else:
                wrong = bool(said) if kind == "correct" else not said
            tally[(family, kind)][0] += 1
            tally[(family, kind)][1] += wrong
            if wrong:
                detail = (
                    said[0][:140]
                    if said
                    else f"item_name={columns.get('item_name')} group_by={group}"
                )
                misses[kind].append(f"{source}: {detail}")
    rows = [
        {
            "source": f,
            "mapping": k,
            "truth": "no warning"
            if k == "correct"
            else "right suggestion"
            if k == "service_column"
            else "warning",
            "cases": n,
            "false positives" if k == "correct" else "errors": e,
        }
        for (f, k), (n, e) in sorted(tally.items())
    ]
    table = pd.DataFrame(rows).fillna(0)
    table[["false positives", "errors"]] = table[["false positives", "errors"]].astype(int)
    print(table.to_string(index=False))
    for kind, lines in sorted(misses.items()):
        print(f"-- {kind}: {len(lines)} wrong, e.g.")
        for line in lines[:4]:
            print("   ", line)
    per_kind = pd.DataFrame(
        [(k, n, e) for (f, k), (n, e) in tally.items() if f == "city held-out"],
        columns=["kind", "n", "e"],
    )
    print("held-out city exports (seeds never seen while fixing):")
    per_kind = per_kind.groupby("kind").sum()
    for kind, r in per_kind.iterrows():
        label = "false_positive_rate" if kind == "correct" else "error_rate"
        print(f"{kind} {label}: {r.e / r.n:.3f} ({r.e} of {r.n})")
    plain = (
        pd.DataFrame(
            [
                (f.removeprefix("ordinary "), n, e)
                for (f, k), (n, e) in tally.items()
                if f.startswith("ordinary ")
            ],
            columns=["shape", "n", "e"],
        )
        .groupby("shape")
        .sum()
    )
    print("ordinary correct corpora (not city exports):")
    for shape, r in plain.iterrows():
        print(f"{shape} false_positive_rate: {r.e / r.n:.3f} ({r.e} of {r.n})")
    total = per_kind["e"].sum() / per_kind["n"].sum()
    print(f"mapping_warnings_error_rate_held_out: {total:.3f}")
    return float(total)


if __name__ == "__main__":
    main()
