"""A deterministic generator of SYNTHETIC government service guides (the demo knowledge base).

Nothing here is real data. The guides belong to a fictional province (明川省, "Mingchuan
Province"), are published on a fictional domain (`https://zwfw.demo-province.example/...`),
list consultation numbers with the fictional area code 0000, and every row carries
`synthetic = True`. The generator exists so the workbench runs end to end offline with a
knowledge base shaped like the paper's (section 3.2: one record of 18 fields per service item;
6,111 province-level items), including what makes that corpus hard for retrieval:

- families of near-duplicate items (the paper's "Approval for Pumped Storage Power Station
  Projects" / "... (New Construction)" / "... (Modification)"): a base item and variants that
  share most of their text and differ in time limits, materials, fee and one requirement;
- the same item offered by several cities or counties (same name, different region, agency,
  address and phone number).

All random choices are drawn before the language is applied, so the zh and en corpora for
one seed are translations of each other, and the output is identical byte for byte for a
given (n_items, lang, family_share, seed).

The sector vocabulary (agencies, service templates and their fillers, laws, materials) and
the aliases are package data (`cube/data/demo_vocab.json`, read once at import); the generic
pools (requirements, variants, procedure steps, ...) stay below.

Beyond the corpus columns, each row carries `aliases`: a few colloquial descriptions of the
item's service, newline-joined, in the corpus language: what a citizen says instead of the
official name ("开小饭馆" for 食品经营许可; "build a wind farm" for "Approval for Wind Farm
Projects"). They are hand-written and fixed per service (no randomness, so the corpus stays
byte-identical for a seed), shared by all members of a family, never contain the official
name, and are NOT rendered into `text`: a real guide does not contain them. The template
question generator uses them for its colloquial questions.
"""

from __future__ import annotations

import json
import random
from importlib import resources
from typing import Any, TypedDict

import pandas as pd

from cube.kb.document import CORPUS_COLUMNS, render_document

DEMO_DOMAIN = "https://zwfw.demo-province.example"
_L = {"zh": 0, "en": 1}


Pair = tuple[str, str]  # (Chinese, English)


class Sector(TypedDict):
    """A sector of the vocabulary: its agency (province level, city/county level), laws, materials
    and service templates ("中文模板|English template", kind, for persons, fillers)."""

    agency: list[Pair]
    laws: list[Pair]
    materials: list[Pair]
    services: list[tuple[str, str, bool, list[Pair]]]


class Region(TypedDict):
    """A region: its names, the prefix of its agencies, its level (0 province, 1 city, 2 district)
    and its service centre."""

    region: Pair
    prefix: Pair
    level: int
    centre: Pair


class ItemChoices(TypedDict):
    """The language-neutral choices of one item (`_unit`), localised by `_localise`."""

    si: int
    ri: int
    name: Pair
    service: Pair
    kind: str
    variant: Pair
    stat: int
    immediate: bool
    committed: int
    requirements: list[Pair]
    laws: list[tuple[Pair, list[int]]]
    objects: list[Pair]
    online: Pair
    fee: int | None
    steps: list[tuple]
    materials: list[tuple[Pair, Pair]]


def _p(*pairs: str) -> list[tuple[str, str]]:
    """'中文|English' strings -> [(zh, en)] (keeps the bilingual vocabulary compact)."""
    return [tuple(s.split("|", 1)) for s in pairs]  # type: ignore[misc]


PROVINCE = ("明川省", "Mingchuan Province")
# City -> its districts/counties. All names are invented for the fictional province.
CITIES = {
    "青石市|Qingshi City": _p(
        "临江区|Linjiang District",
        "云岗区|Yungang District",
        "松林县|Songlin County",
        "东坪县|Dongping County",
        "茶园县|Chayuan County",
    ),
    "白沙市|Baisha City": _p(
        "望湖区|Wanghu District",
        "清河县|Qinghe County",
        "石桥县|Shiqiao County",
        "沙洲区|Shazhou District",
        "横岭县|Hengling County",
    ),
    "东陵市|Dongling City": _p(
        "石门区|Shimen District",
        "柳溪县|Liuxi County",
        "梅岭县|Meiling County",
        "陵西区|Lingxi District",
        "杉木县|Shanmu County",
    ),
    "南浦市|Nanpu City": _p(
        "滨江区|Binjiang District",
        "红岩县|Hongyan County",
        "金沙县|Jinsha County",
        "浦西区|Puxi District",
        "砚池县|Yanchi County",
    ),
    "北岭市|Beiling City": _p(
        "岭北区|Lingbei District",
        "鹤鸣县|Heming County",
        "桂溪县|Guixi County",
        "岭南区|Lingnan District",
        "石城县|Shicheng County",
    ),
    "雾山市|Wushan City": _p(
        "龙潭区|Longtan District",
        "新桥县|Xinqiao County",
        "雁湖县|Yanhu County",
        "雾峰区|Wufeng District",
        "兰亭县|Lanting County",
    ),
    "安和市|Anhe City": _p(
        "安平区|Anping District",
        "竹园县|Zhuyuan County",
        "枫林县|Fenglin County",
        "和丰区|Hefeng District",
        "云台县|Yuntai County",
    ),
    "瑶台市|Yaotai City": _p(
        "瑶北区|Yaobei District",
        "青松县|Qingsong County",
        "白鹭县|Bailu County",
        "瑶南区|Yaonan District",
        "苍梧县|Cangwu County",
    ),
    "丹江市|Danjiang City": _p(
        "丹北区|Danbei District",
        "黎平区|Liping District",
        "长坡县|Changpo County",
        "江口区|Jiangkou District",
        "桐木县|Tongmu County",
    ),
}
STREETS = _p(
    "人民路|Renmin Road",
    "解放路|Jiefang Road",
    "新华路|Xinhua Road",
    "世纪大道|Century Avenue",
    "滨江路|Binjiang Road",
    "文化路|Wenhua Road",
    "建设路|Jianshe Road",
    "环城北路|North Ring Road",
)

_VOCAB_FILE = "cube/data/demo_vocab.json"


def _load_vocab() -> dict[str, Any]:
    """The package-data vocabulary (sectors and aliases), read once at import."""
    return json.loads(
        resources.files("cube").joinpath("data", "demo_vocab.json").read_text(encoding="utf-8")
    )


_VOCAB = _load_vocab()
# Sector: agency (province level, city/county level), service templates, laws, sector materials. A
# service template: ("中文模板|English template", kind, for_persons, fillers); "{x}" takes a filler.
SECTORS: list[Sector] = [
    Sector(
        agency=_p(*sec["agency"]),
        laws=_p(*sec["laws"]),
        materials=_p(*sec["materials"]),
        services=[
            (s["template"], s["kind"], s["for_persons"], _p(*s["fillers"])) for s in sec["services"]
        ],
    )
    for sec in _VOCAB["sectors"]
]

# Generic pools shared by all sectors, keyed by the kind of service.
REQUIREMENTS = {
    "approval": _p(
        "项目符合国家产业政策和行业准入标准|The project complies with national industrial policy "
        "and entry standards",
        "项目符合国土空间规划及相关专项规划|The project complies with territorial spatial planning "
        "and sector plans",
        "项目单位具有相应的资金筹措能力|The project entity can raise the required funds",
        "已依法履行环境影响评价等前置手续|Prerequisites such as the environmental impact "
        "assessment are completed",
        "申请材料真实、完整，符合法定形式|The application materials are true, complete and in the "
        "statutory form",
    ),
    "licence": _p(
        "申请人为依法设立的企业或其他组织|The applicant is a lawfully established enterprise "
        "or organisation",
        "具有与经营规模相适应的场所、设施和设备|The applicant has premises, facilities and "
        "equipment suited to its scale",
        "配备符合要求的专业技术人员和管理人员|The applicant employs qualified technical and "
        "management staff",
        "具有健全的质量安全管理制度|The applicant has sound quality and safety management rules",
        "近三年内无重大违法违规记录|The applicant has no serious violation on record in the "
        "past three years",
    ),
    "registration": _p(
        "申请人具有完全民事行为能力或为依法设立的组织|The applicant has full civil capacity or is "
        "a lawful organisation",
        "申请登记事项符合法律法规规定|The matters to be registered comply with laws "
        "and regulations",
        "提交的申请材料齐全、符合法定形式|The application materials are complete and in the "
        "statutory form",
        "不存在权属争议或限制登记的情形|There is no ownership dispute or restriction "
        "on registration",
    ),
}
ORG_MATERIALS = _p(
    "申请书|Application form",
    "营业执照或统一社会信用代码证书|Business licence or unified social credit code certificate",
    "法定代表人身份证明|Identity document of the legal representative",
    "授权委托书及经办人身份证（委托办理时提供）|Power of attorney and the agent's ID card (when an "
    "agent applies)",
    "信用承诺书|Credit commitment letter",
)
PERSON_MATERIALS = _p(
    "申请表|Application form",
    "居民身份证|Resident identity card",
    "近期一寸免冠照片|Recent one-inch photograph",
    "户口簿或居住证|Household register or residence permit",
)
FORMS = _p(
    "（原件1份）| (1 original)",
    "（复印件1份）| (1 copy)",
    "（原件及复印件各1份）| (1 original and 1 copy)",
    "（电子版）| (electronic)",
)
# Variants of a family: name, an extra material, an extra requirement, statutory-time factor, free
# of charge.
VARIANTS: dict[str, list[tuple[tuple[str, str], tuple[str, str], tuple[str, str], float, bool]]] = {
    "approval": [
        (
            ("新建", "New Construction"),
            ("项目可行性研究报告", "Project feasibility study report"),
            (
                "项目为新建项目，此前未取得同类核准文件",
                "The project is new and holds no earlier approval of this kind",
            ),
            1.0,
            False,
        ),
        (
            ("变更", "Modification"),
            ("变更事项说明及相关证明材料", "Statement of the changes with supporting documents"),
            (
                "在原核准文件有效期内申请变更",
                "The change is requested while the original approval is valid",
            ),
            0.5,
            True,
        ),
        (
            ("改扩建", "Renovation and Expansion"),
            (
                "原核准文件及现有设施情况说明",
                "Original approval and a description of existing facilities",
            ),
            (
                "原项目已依法取得核准且正常运行",
                "The original project was lawfully approved and operates normally",
            ),
            1.0,
            False,
        ),
    ],
    "licence": [
        (
            ("首次申请", "First Application"),
            ("场所及设施设备照片", "Photographs of premises, facilities and equipment"),
            ("申请人此前未取得该许可", "The applicant has not held this licence before"),
            1.0,
            False,
        ),
        (
            ("变更", "Modification"),
            ("原许可证正副本", "Original and duplicate of the current licence"),
            (
                "许可事项发生变化之日起30日内提出申请",
                "The application is made within 30 days of the change",
            ),
            0.5,
            True,
        ),
        (
            ("延续", "Renewal"),
            ("许可有效期内经营情况报告", "Report on operations during the licence period"),
            (
                "在许可有效期届满30个工作日前提出申请",
                "The application is made 30 working days before the licence expires",
            ),
            1.0,
            False,
        ),
        (
            ("注销", "Cancellation"),
            ("注销申请书", "Cancellation request"),
            (
                "已停止相关经营活动并结清相关事项",
                "The activity has ceased and obligations are settled",
            ),
            0.5,
            True,
        ),
    ],
    "registration": [
        (
            ("新办", "New Application"),
            ("相关资格或权属证明", "Proof of the relevant qualification or title"),
            (
                "申请人此前未办理同类登记",
                "The applicant has not completed this registration before",
            ),
            1.0,
            False,
        ),
        (
            ("变更", "Modification"),
            ("变更前后对照说明", "Comparison of the particulars before and after the change"),
            (
                "登记事项发生变化之日起30日内申请",
                "The application is made within 30 days of the change",
            ),
            0.5,
            True,
        ),
        (
            ("注销", "Cancellation"),
            (
                "注销申请书及原登记证明",
                "Cancellation request and the original registration certificate",
            ),
            (
                "已完成清算或不再具备登记条件",
                "Liquidation is complete or the registration conditions no longer hold",
            ),
            0.5,
            True,
        ),
    ],
}
STATUTORY_DAYS = {
    "approval": (20, 20, 30, 45, 60),
    "licence": (15, 20, 20, 30),
    "registration": (5, 10, 15, 20),
}
# Procedure steps: (name, text, kinds it applies to, probability).
STEPS = [
    (
        "申请|Application",
        "申请人通过明川省政务服务网或到政务服务中心窗口提交申请材料|The applicant submits the "
        "materials on the Mingchuan Government Service Portal or at the service centre window",
        "*",
        1.0,
    ),
    (
        "受理|Acceptance",
        "窗口对材料进行审查，齐全且符合法定形式的予以受理，不全的一次性告知需补正内容|The window "
        "checks the materials; complete ones are accepted, otherwise everything to be supplemented "
        "is notified at once",
        "*",
        1.0,
    ),
    (
        "审查|Review",
        "承办处室对申请材料进行实质审查并提出审查意见|The responsible division examines the "
        "substance and gives an opinion",
        "*",
        1.0,
    ),
    (
        "现场核查|On-site inspection",
        "组织对申请人的场所、设施进行现场核查|The premises and facilities are inspected on site",
        "licence",
        0.6,
    ),
    (
        "专家评审|Expert review",
        "组织专家进行技术评审，评审时间不计入办理时限|Experts review the application; review time "
        "is not counted in the time limit",
        "approval",
        0.6,
    ),
    (
        "公示|Public notice",
        "对拟作出的决定进行公示，公示期5个工作日|The proposed decision is published for 5 "
        "working days",
        "approval registration",
        0.3,
    ),
    (
        "决定|Decision",
        "作出准予或不予办理的决定，不予办理的书面说明理由|A decision is made; a refusal states its "
        "reasons in writing",
        "*",
        1.0,
    ),
    (
        "送达|Delivery",
        "通过窗口领取、邮寄或电子证照方式送达办理结果|The result is collected at the window, "
        "posted, or issued as an electronic certificate",
        "*",
        1.0,
    ),
]
ORG_OBJECTS = _p(
    "企业法人|Enterprise legal persons",
    "事业单位法人|Public institution legal persons",
    "社会组织法人|Social organisation legal persons",
    "其他组织|Other organisations",
)
HOURS = _p(
    "工作日上午9:00-12:00，下午13:00-17:00（法定节假日除外）|Working days 9:00-12:00 and "
    "13:00-17:00 (except public holidays)",
    "周一至周五8:30-12:00，14:00-17:30（夏季14:30-18:00）|Monday to Friday 8:30-12:00 and "
    "14:00-17:30 (summer 14:30-18:00)",
    "工作日9:00-17:00（中午不休息），周六上午提供预约服务|Working days 9:00-17:00 (open at noon); "
    "Saturday mornings by appointment",
)
PORTAL = ("明川省政务服务网", "Mingchuan Government Service Portal")
ONLINE = _p(
    f"是（全程网办：{PORTAL[0]} {DEMO_DOMAIN}）|Yes (fully online: {PORTAL[1]}, {DEMO_DOMAIN})",
    f"是（{PORTAL[0]}网上申报，窗口领取结果）|Yes (apply online at the {PORTAL[1]}; collect the "
    "result at the window)",
    "否（需到窗口现场办理）|No (in person at the service window)",
)
_ZH_DIGITS = "零一二三四五六七八九"


def _zh_number(n: int) -> str:
    """1..99 in Chinese numerals (article numbers: 第十二条)."""
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else _ZH_DIGITS[tens] + "十")
    return head + (_ZH_DIGITS[ones] if ones else "") if n >= 10 else _ZH_DIGITS[n]


def _regions() -> list[Region]:
    """Every region with its names and service centre, in a fixed order (province, cities,
    districts)."""
    out = [
        Region(
            region=PROVINCE,
            prefix=("明川省", "Mingchuan Provincial"),
            level=0,
            centre=(
                "明川省政务服务中心（青石市临江区世纪大道88号）",
                "Mingchuan Provincial Government Service Centre (88 Century Avenue, Linjiang "
                "District, Qingshi City)",
            ),
        )
    ]
    cities = [(tuple(c.split("|")), d) for c, d in CITIES.items()]
    for ci, (city, _) in enumerate(cities):
        st = STREETS[ci % len(STREETS)]
        out.append(
            Region(
                region=(PROVINCE[0] + city[0], f"{city[1]}, {PROVINCE[1]}"),
                prefix=(city[0], city[1].replace(" City", " Municipal")),
                level=1,
                centre=(
                    f"{city[0]}政务服务中心（{city[0]}{st[0]}{20 + 7 * ci}号）",
                    f"{city[1]} Government Service Centre ({20 + 7 * ci} {st[1]}, {city[1]})",
                ),
            )
        )
    for ci, (city, districts) in enumerate(cities):
        for di, dist in enumerate(districts):
            st = STREETS[(ci + di + 3) % len(STREETS)]
            out.append(
                Region(
                    region=(
                        PROVINCE[0] + city[0] + dist[0],
                        f"{dist[1]}, {city[1]}, {PROVINCE[1]}",
                    ),
                    prefix=(city[0] + dist[0], dist[1]),
                    level=2,
                    centre=(
                        f"{city[0]}{dist[0]}政务服务中心（{dist[0]}{st[0]}{5 + 11 * di}号）",
                        f"{dist[1]} Government Service Centre ({5 + 11 * di} {st[1]}, {dist[1]})",
                    ),
                )
            )
    return out


REGIONS = _regions()
REGION_WEIGHTS = [8.0 if r["level"] == 0 else 2.0 if r["level"] == 1 else 0.6 for r in REGIONS]
SERVICES = [
    (
        si,
        (tpl.split("|")[0].replace("{x}", x[0]), tpl.split("|")[1].replace("{x}", x[1])),
        kind,
        person,
    )
    for si, sec in enumerate(SECTORS)
    for tpl, kind, person, fillers in sec["services"]
    for x in fillers
]


DEMO_EXTRA_COLUMNS: tuple[str, ...] = (
    "aliases",
)  # after the corpus columns (cube.kb.corpus.CORPUS_COLUMNS)


def _alias_table() -> dict[str, dict[str, tuple[str, ...]]]:
    """Official zh base name -> {"zh": aliases, "en": aliases}; every demo service must have both
    lists."""
    table = {
        name: {lang: tuple(entry.get(lang) or ()) for lang in _L}
        for name, entry in _VOCAB["aliases"].items()
    }
    for _, (zh, _en), _, _ in SERVICES:
        if zh not in table or not all(table[zh].values()):
            raise ValueError(
                f"{_VOCAB_FILE}: aliases.{zh!r} is missing or lacks a zh/en list; every demo "
                "service needs both"
            )
    return table


ALIASES = _alias_table()


def service_aliases(service_name_zh: str, lang: str) -> tuple[str, ...]:
    """The colloquial descriptions of one demo service (keyed by its official zh base name) in
    `lang`."""
    return ALIASES[service_name_zh][lang]


def demo_capacity() -> int:
    """How many items (and families) the generator can place: distinct (region, service) pairs."""
    return len(REGIONS) * len(SERVICES)


def _unit_sizes(n_items: int, family_share: float, rng: random.Random) -> list[int]:
    """Sizes of the units (1 = a singleton, >= 2 = a family) summing to n_items, in shuffled
    order."""
    remaining = round(n_items * family_share)
    sizes: list[int] = []
    while remaining >= 2:
        s = min(rng.choice((2, 3, 3, 3, 4)), remaining)
        if remaining - s == 1:  # never leave a lone family slot: grow or shrink this family
            s = s + 1 if s < 4 else s - 1
        sizes.append(s)
        remaining -= s
    sizes += [1] * (n_items - sum(sizes))
    rng.shuffle(sizes)
    return sizes


def _pick_materials(
    rng: random.Random, pool: list[tuple[str, str]], k: int
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    return [(m, rng.choice(FORMS)) for m in rng.sample(pool, k)]


def _unit(rng: random.Random, ri: int, svc: int, size: int) -> list[ItemChoices]:
    """The language-neutral choices of one item (size 1) or one family (base item + variants).

    Every draw is made in a fixed order (the steps below are called in it), so one seed gives one
    corpus."""
    si, name, kind, person = SERVICES[svc]
    sec = SECTORS[si]
    stat = rng.choice(STATUTORY_DAYS[kind])
    immediate = stat <= 10 and rng.random() < 0.3
    pool = PERSON_MATERIALS if person else ORG_MATERIALS
    laws = _laws(rng, sec, kind)
    base = ItemChoices(
        si=si,
        ri=ri,
        name=name,
        service=name,
        kind=kind,
        variant=("", ""),
        stat=stat,
        immediate=immediate,
        committed=_committed(rng, immediate, stat),
        requirements=rng.sample(REQUIREMENTS[kind], rng.choice((2, 3))),
        laws=laws,
        objects=_objects(rng, person),
        online=rng.choices(ONLINE, weights=(65, 20, 15))[0],
        fee=_fee(rng),
        steps=_steps(rng, kind),
        materials=_materials(rng, pool, sec),
    )
    members = [base]
    for vi in sorted(rng.sample(range(len(VARIANTS[kind])), size - 1)):
        members.append(_variant_of(rng, base, VARIANTS[kind][vi]))
    return members


def _laws(rng: random.Random, sec: Sector, kind: str) -> list[tuple[Pair, list[int]]]:
    """One or two of the sector's laws with one or two articles each, and for a licence half
    of the time an article of the Administrative Licensing Law."""
    laws = [
        (law, sorted(rng.sample(range(2, 61), rng.choice((1, 1, 2)))))
        for law in rng.sample(sec["laws"], rng.choice((1, 2)))
    ]
    if kind != "registration" and rng.random() < 0.5:
        licensing = ("中华人民共和国行政许可法", "Administrative Licensing Law of the PRC")
        laws.append((licensing, [rng.randint(12, 57)]))
    return laws


def _committed(rng: random.Random, immediate: bool, stat: int) -> int:
    """The committed time limit: 1 day for an immediate item, else 1/5 to 3/5 of the statutory."""
    if immediate:
        return 1
    return rng.randint(max(1, stat // 5), max(1, stat * 3 // 5))


def _objects(rng: random.Random, person: bool) -> list[tuple[str, str]]:
    if person:
        return [("自然人", "Natural persons")]
    return rng.sample(ORG_OBJECTS, rng.choice((1, 1, 2)))


def _fee(rng: random.Random) -> int | None:
    """No fee 80 % of the time."""
    return None if rng.random() < 0.8 else rng.choice((10, 20, 50, 100, 200))


def _steps(rng: random.Random, kind: str) -> list[tuple]:
    """Every common step, and each step of the kind with its probability."""
    return [s for s in STEPS if s[2] == "*" or (kind in s[2].split() and rng.random() < s[3])]


def _materials(rng: random.Random, pool: list[Pair], sec: Sector) -> list[tuple[Pair, Pair]]:
    """The identity document, one to three of the pool's and one to three of the sector's."""
    return (
        [(pool[0], rng.choice(FORMS))]
        + _pick_materials(rng, pool[1:], rng.randint(1, 3))
        + _pick_materials(rng, sec["materials"], rng.randint(1, 3))
    )


def _variant_of(rng: random.Random, base: ItemChoices, spec: tuple) -> ItemChoices:
    """A family member: the base item with a variant's name, time factor, extra requirement and
    material (and fewer of the base documents), free when the variant is."""
    vname, material, requirement, factor, free = spec
    stat_v = max(2, round(base["stat"] * factor))
    mats = list(base["materials"])
    if len(mats) > 3:  # a variant needs fewer of the base documents
        del mats[rng.randrange(1, len(mats))]
    name = base["name"]
    return {
        **base,
        "name": (f"{name[0]}（{vname[0]}）", f"{name[1]} ({vname[1]})"),
        "variant": vname,
        "stat": stat_v,
        "committed": _committed(rng, base["immediate"], stat_v),
        "requirements": base["requirements"] + [requirement],
        "fee": None if free else base["fee"],
        "materials": mats + [(material, rng.choice(FORMS))],
    }


def _days(n: int, zh: bool) -> str:
    return f"{n}个工作日" if zh else f"{n} working day{'s' if n > 1 else ''}"


def _cite(law: tuple[str, str], arts: list[int], zh: bool) -> str:
    if zh:
        return f"《{law[0]}》" + "、".join(f"第{_zh_number(a)}条" for a in arts)
    if len(arts) == 1:
        return f"{law[1]}, Article {arts[0]}"
    return f"{law[1]}, Articles {arts[0]} and {arts[1]}"


def _consultation(phone: str, zh: bool) -> str:
    if zh:
        return f"咨询电话：{phone}（工作日）；网上咨询：{PORTAL[0]}“我要咨询”栏目"
    return f"Phone: {phone} (working days); online: the 'Ask Us' section of the {PORTAL[1]}"


def _location(centre: tuple[str, str], si: int, ri: int, zh: bool) -> str:
    """The window of the region's service centre that handles the sector."""
    floor, zone, window = 1 + si % 4, "ABCD"[(si // 4) % 4], 1 + (si * 7 + ri) % 30
    if zh:
        return f"{centre[0]}{floor}楼{zone}区{window}号窗口"
    return f"{centre[1]}, Floor {floor}, Zone {zone}, Window {window}"


def _fee_text(fee: int | None, li: int) -> str:
    if fee is None:
        return ("不收费", "Free of charge")[li]
    if li == 0:
        return f"{fee}元/件（按明川省发展和改革委员会、明川省财政厅核定的标准收取）"
    return (
        f"CNY {fee} per application (schedule approved by the Mingchuan Provincial "
        "Development and Reform Commission and Department of Finance)"
    )


def _procedure(steps: list[tuple], li: int) -> str:
    zh = li == 0
    end = "。" if zh else "."
    return "\n".join(
        f"{i}. {s[0].split('|')[li]}{'：' if zh else ': '}{s[1].split('|')[li]}{end}"
        for i, s in enumerate(steps, 1)
    )


def _localise(m: ItemChoices, li: int, doc_id: str) -> dict[str, str]:
    """One item's 18 fields in one language (li: 0 zh, 1 en)."""
    zh = li == 0
    si, ri = m["si"], m["ri"]
    region, agency = REGIONS[ri], SECTORS[si]["agency"][0 if REGIONS[ri]["level"] == 0 else 1]
    phone = f"0000-{6_000_000 + ((ri * 31 + si) * 7919) % 3_999_999:07d}"
    sep, end = ("；", "。") if zh else ("; ", ".")
    return {
        "region": region["region"][li],
        "publication_address": f"{DEMO_DOMAIN}/bszn/{doc_id}.html",
        "item_name": m["name"][li],
        "handling_agency": region["prefix"][li] + ("" if zh else " ") + agency[li],
        "department": agency[li],
        "consultation_method": _consultation(phone, zh),
        "requirements": sep.join(r[li] for r in m["requirements"]) + end,
        "legal_basis": sep.join(_cite(law, arts, zh) for law, arts in m["laws"]),
        "statutory_time_limit": _days(m["stat"], zh),
        "committed_time_limit": _days(m["committed"], zh),
        "service_object": ("、" if zh else ", ").join(o[li] for o in m["objects"]),
        "processing_type": (
            ("即办件", "Immediate item") if m["immediate"] else ("承诺件", "Commitment item")
        )[li],
        "online_handling": m["online"][li],
        "processing_time": HOURS[ri % len(HOURS)][li],
        "processing_location": _location(region["centre"], si, ri, zh),
        "fee_standard": _fee_text(m["fee"], li),
        "procedure": _procedure(m["steps"], li),
        "application_materials": "\n".join(
            f"{i}. {name[li]}{form[li]}" for i, (name, form) in enumerate(m["materials"], 1)
        ),
    }


def _next_region_service(
    rng: random.Random, available: list[int], queues: dict[int, list[int]]
) -> tuple[int, int]:
    """A region drawn by weight among those with services left, and its next service: each region
    offers each service once, in a shuffled order (`available` and `queues` updated in place)."""
    ri = rng.choices(available, weights=[REGION_WEIGHTS[i] for i in available])[0]
    if ri not in queues:
        queues[ri] = list(range(len(SERVICES)))
        rng.shuffle(queues[ri])
    svc = queues[ri].pop()
    if not queues[ri]:
        available.remove(ri)
    return ri, svc


def generate_demo_corpus(
    n_items: int = 300, lang: str = "zh", family_share: float = 0.33, seed: int = 0
) -> pd.DataFrame:
    """Generate a SYNTHETIC knowledge base of government service guides (fictional province).

    Args:
        n_items: number of items (documents); the paper's province-level corpus has 6,111.
            At most `demo_capacity()` when no item is in a family.
        lang: "zh" or "en"; one seed gives the same corpus in both languages.
        family_share: target share of items that belong to a near-duplicate family.
        seed: random seed; the output is identical for identical arguments.

    Returns:
        One row per item: `doc_id` ("D00001"...), the 18 `CORPUS_FIELDS`, `family_id` ("F0001",
        "" outside families), `variant` ("" for singletons and family bases), `synthetic` (True),
        `text` (the rendered document) and `aliases` (the service's colloquial descriptions,
        newline-joined; not part of `text`).

    Raises:
        ValueError: an unknown language, a share outside [0, 1], or more items than the
            fictional province's (region, service) pairs can hold.
    """
    if lang not in _L:
        raise ValueError(f"demo corpus: lang must be one of {sorted(_L)}, got {lang!r}")
    if n_items < 1 or not 0.0 <= family_share <= 1.0:
        raise ValueError(
            f"demo corpus: need n_items >= 1 and 0 <= family_share <= 1, got {n_items}, "
            f"{family_share}"
        )
    rng = random.Random(seed)
    sizes = _unit_sizes(n_items, family_share, rng)
    if len(sizes) > demo_capacity():
        raise ValueError(
            f"demo corpus: {n_items} items with family_share={family_share} need {len(sizes)} "
            f"distinct (region, service) pairs; the generator has {demo_capacity()} (raise "
            "family_share or lower n_items)"
        )
    li = _L[lang]
    queues: dict[int, list[int]] = {}
    available = list(range(len(REGIONS)))
    rows: list[dict[str, str | bool]] = []  # the corpus's columns: text, `synthetic` True
    n_families = 0
    for size in sizes:
        ri, svc = _next_region_service(rng, available, queues)
        n_families += size > 1
        family_id = f"F{n_families:04d}" if size > 1 else ""
        for m in _unit(rng, ri, svc, size):
            doc_id = f"D{len(rows) + 1:05d}"
            row = {"doc_id": doc_id, **_localise(m, li, doc_id)}
            row.update(family_id=family_id, variant=m["variant"][li], synthetic=True)
            row["text"] = render_document(row, lang)
            row["aliases"] = "\n".join(
                service_aliases(m["service"][0], lang)
            )  # after rendering: not in the guide
            rows.append(row)
    return pd.DataFrame(rows, columns=[*CORPUS_COLUMNS, *DEMO_EXTRA_COLUMNS])
