"""The question set: one (or `per_doc`) citizen question per document, with its gold doc_id.

Three generators (`questions.generator`):

- `llm` (the paper, 3.4): a model plays a citizen and writes one question per service
  guide (role-play prompt `cube/prompts/<lang>/question_generation.txt`; the guide is
  delimited as untrusted content). Calls go through `cube.llm` (cached, concurrent, costed)
  and every row carries the call's accounting columns. A failed call, or a reply that is
  empty once cleaned, keeps its row with an empty `question` and the reason in `error`;
  such rows are dropped downstream with a count (`usable_questions`), never filled in.
- `template`: an offline, deterministic algorithm, NOT an LLM: question templates per
  field (materials, procedure, time limits, fees, location, ...), several phrasings each,
  picked by seed, in three styles mixed by `questions.styles` (column `style`):
  - `named`: the exact item, including a family member's variant ("...（新建）"), so
    retrieval must pick the right near-duplicate;
  - `colloquial`: what a citizen says instead of the official name, built from the corpus
    column `aliases` ("我想开小饭馆，需要准备哪些材料？") or, without one (Chinese), from the name's
    keyword form, its closing verb said first ("机动车驾驶证补领" -> "我想补办机动车驾驶证，…",
    `KEYWORD_FORMS`); the official name does not appear (but for a 许可, asked for by its name),
    so a keyword retriever has to get by on the words a citizen uses (the paper's system
    found the gold guide for 80.41 % of its LLM-written questions). A family member's
    situation is often said in the citizen's words ("证快到期了，想续办");
  - `ambiguous`: a family member asked about by its base service, without the variant
    ("抽水蓄能电站项目核准要什么材料" when the gold guide is the (变更) variant): nothing in
    the question separates the near-duplicates.
  A service offered by several regions is asked together with its region. Styles are dealt by quota
  over the full plan (`assign_styles`): only family variants can be ambiguous and only items with
  aliases or a keyword form colloquial, the rest falling back to named with a warning. Every name is
  said at one bracket level ("换领（残损换新（户籍地））" -> "换领（残损换新、户籍地）") and
  doubled particles ("的的") are removed (`tidy_question`).
- `file`: a user's question set (CSV/JSONL/Parquet/Excel with `question` and `doc_id`
  columns, `question_id`, `asked_field` and `style` optional), validated against the corpus.

Question ids ("Q00001"...) number the full plan (documents x per_doc, corpus order) before
`questions.limit` samples it, so a question keeps its id in a smaller run.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.fence import fill_fenced
from cube.config.params import Params
from cube.config.phrasing import base_name, clean, is_flag, is_missing, short_variant, strip_variant
from cube.config.schema import ACCOUNTING_COLUMNS, CORPUS_FIELDS, FIELD_LABELS, QUESTION_COLUMNS
from cube.kb.corpus import read_table
from cube.kb.document import CorpusError
from cube.kb.naming import flatten_brackets, keyword_form, qualifier_of, tidy_question
from cube.llm import Request, make_model, response_accounting
from cube.llm.usage import no_call_accounting

# `style`: how a template question names its item (`STYLES`); "" for LLM questions and files without
# one.
QUESTION_TABLE_COLUMNS: tuple[str, ...] = (
    *QUESTION_COLUMNS,
    "style",
    *ACCOUNTING_COLUMNS,
    "error",
    "raw",
)
ROLE = "question_generation"
dRecord = dict[str, Any]


def _no_call(model: str) -> dict[str, Any]:
    """Accounting columns of a row that no model call produced (template or file questions):
    call_id "", no tokens, cost 0.0, so `usage_summary` counts it as skipped, not as a call."""
    return no_call_accounting(model, ROLE)


class QuestionError(ValueError):
    """A question set that cannot be used: the message names the file, the rows and the problem."""


# Field -> (weight, zh phrasings, en phrasings). "" is a general question. {name} is the item.
# Weights follow the paper (3.2): requirements, procedure and materials are asked most.
TEMPLATES: dict[str, tuple[float, tuple[str, ...], tuple[str, ...]]] = {
    "application_materials": (
        3.0,
        (
            "办理{name}需要准备哪些材料？",
            "我想申请{name}，要带什么资料过去？",
            "{name}要交哪些申请材料？",
            "请问{name}的申请材料清单有哪些？",
        ),
        (
            "What documents do I need to prepare for {name}?",
            "I want to apply for {name}. What paperwork should I bring?",
            "Which application materials are required for {name}?",
            "Could you list the materials for {name}?",
        ),
    ),
    "procedure": (
        3.0,
        (
            "{name}的办理流程是怎样的？",
            "想办{name}，具体要走哪些步骤？",
            "请问{name}怎么办，流程是什么？",
        ),
        (
            "What is the procedure for {name}?",
            "What steps do I go through to get {name} done?",
            "How does the process for {name} work, step by step?",
        ),
    ),
    "requirements": (
        3.0,
        ("申请{name}需要满足什么条件？", "什么情况下才能办理{name}？", "{name}的受理条件有哪些？"),
        (
            "What conditions must I meet to apply for {name}?",
            "Who is eligible for {name}, and under what conditions?",
            "What are the requirements for {name}?",
        ),
    ),
    "committed_time_limit": (
        1.5,
        (
            "{name}承诺多少个工作日办结？",
            "申请{name}以后大概多久能拿到结果？",
            "{name}一般要等几天？",
        ),
        (
            "How many working days does {name} take in practice?",
            "After I apply for {name}, how soon will I get a result?",
            "What is the committed processing time for {name}?",
        ),
    ),
    "statutory_time_limit": (
        1.0,
        ("{name}的法定办结时限是多久？", "按规定，{name}最长多少个工作日要办完？"),
        (
            "What is the statutory time limit for {name}?",
            "By law, what is the longest {name} can take?",
        ),
    ),
    "fee_standard": (
        1.5,
        ("办理{name}要收费吗？", "{name}需要交多少钱？", "申请{name}有没有什么费用？"),
        (
            "Is there a fee for {name}?",
            "How much does {name} cost?",
            "Do I have to pay anything for {name}?",
        ),
    ),
    "processing_location": (
        1.5,
        ("{name}在哪里办理？", "去哪个窗口办{name}？", "{name}的办理地点在哪儿？"),
        (
            "Where do I go for {name}?",
            "Which office and window handles {name}?",
            "Where is {name} processed?",
        ),
    ),
    "online_handling": (
        1.0,
        ("{name}可以在网上办理吗？", "{name}能不能网上申请，不用跑窗口？"),
        (
            "Can I apply for {name} online?",
            "Is it possible to do {name} online instead of going to a window?",
        ),
    ),
    "consultation_method": (
        1.0,
        ("关于{name}，咨询电话是多少？", "{name}有问题可以打哪个电话咨询？"),
        ("What number can I call about {name}?", "Who do I contact with questions about {name}?"),
    ),
    "processing_time": (
        1.0,
        ("{name}的窗口办理时间是几点到几点？", "什么时间可以去办{name}？"),
        ("What are the opening hours for {name}?", "When can I go to the window for {name}?"),
    ),
    "legal_basis": (
        1.0,
        ("{name}的设定依据是哪些法律法规？", "办理{name}是依据哪部法规？"),
        ("What is the legal basis for {name}?", "Which laws and regulations govern {name}?"),
    ),
    "service_object": (0.7, ("哪些人或单位可以申请{name}？",), ("Who can apply for {name}?",)),
    "handling_agency": (
        0.7,
        ("{name}由哪个部门负责办理？",),
        ("Which agency is responsible for {name}?",),
    ),
    "": (
        1.5,
        ("我想办理{name}，需要做些什么？", "请介绍一下{name}怎么办理。"),
        ("I need {name}. What do I have to do?", "Can you explain how to get {name}?"),
    ),
}
_FOCUS = {
    "zh": "这一次请重点询问“{label}”方面的内容。",
    "en": "This time, ask about the item's {label}.",
}

# Colloquial questions: field -> (zh, en) phrasings; {s} is the citizen's situation built from an
# alias ("我想开小饭馆" / "I want to open a small restaurant"), never the item's official name.
COLLOQUIAL: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "application_materials": (
        ("{s}，需要准备哪些材料？", "{s}，得带什么资料去办？", "{s}，要交哪些申请材料？"),
        (
            "{s}. What documents do I need to prepare?",
            "{s}. What paperwork should I bring?",
            "{s}. Which materials do I have to submit?",
        ),
    ),
    "procedure": (
        ("{s}，要走哪些步骤？", "{s}，具体该怎么申请，流程是怎样的？", "{s}，手续怎么办？"),
        (
            "{s}. What steps do I have to go through?",
            "{s}. How do I apply, step by step?",
            "{s}. What is the procedure?",
        ),
    ),
    "requirements": (
        ("{s}，需要满足什么条件？", "{s}，有什么条件要求吗？", "{s}，什么情况下才能办？"),
        (
            "{s}. What conditions do I have to meet?",
            "{s}. Am I eligible, and what are the requirements?",
            "{s}. What criteria must I satisfy?",
        ),
    ),
    "committed_time_limit": (
        ("{s}，办下来大概要多久？", "{s}，一般几天能办好？", "{s}，交了材料以后多久能有结果？"),
        (
            "{s}. How long will it take to get a result?",
            "{s}. How soon can it be done?",
            "{s}. How many working days does it usually take?",
        ),
    ),
    "statutory_time_limit": (
        ("{s}，按规定最长多少个工作日要办完？", "{s}，法定期限是多久？"),
        ("{s}. What is the longest it can take by law?", "{s}. What is the statutory time limit?"),
    ),
    "fee_standard": (
        ("{s}，办这个要交钱吗？", "{s}，要花多少钱？", "{s}，收不收费？"),
        (
            "{s}. Is there a fee?",
            "{s}. How much will it cost me?",
            "{s}. Do I have to pay anything?",
        ),
    ),
    "processing_location": (
        ("{s}，要去哪里办？", "{s}，该去哪个窗口？", "{s}，办理地点在哪儿？"),
        (
            "{s}. Where do I go to apply?",
            "{s}. Which office handles this?",
            "{s}. What is the address I go to?",
        ),
    ),
    "online_handling": (
        ("{s}，能不能在网上办？", "{s}，可以线上申请吗？"),
        ("{s}. Can I do it online?", "{s}. Can I apply on the website instead of queuing?"),
    ),
    "consultation_method": (
        ("{s}，有问题可以打哪个电话咨询？", "{s}，找谁咨询，电话多少？"),
        ("{s}. What number can I call with questions?", "{s}. Who can I contact for advice?"),
    ),
    "processing_time": (
        ("{s}，什么时间可以去窗口办？", "{s}，窗口几点上班？"),
        ("{s}. What are the opening hours?", "{s}. When can I go to the window?"),
    ),
    "legal_basis": (
        ("{s}，办这个是依据哪些法律法规？", "{s}，有什么政策规定作依据？"),
        ("{s}. Which laws and regulations apply?", "{s}. What is the legal basis for this?"),
    ),
    "service_object": (("{s}，哪些人或单位可以申请？",), ("{s}. Who can apply for this?",)),
    "handling_agency": (
        ("{s}，应该找哪个部门办？",),
        ("{s}. Which agency is responsible for this?",),
    ),
    "": (
        ("{s}，需要做些什么？", "{s}，该从哪儿着手？"),
        ("{s}. What do I have to do?", "{s}. Where do I start?"),
    ),
}
_SITUATION = {
    "zh": ("我想{a}", "打算{a}", "准备{a}", "要是想{a}"),
    "en": ("I want to {a}", "I'm planning to {a}", "We would like to {a}"),
}
# A family member's situation in a citizen's words (said in 3 of 4 colloquial questions about a
# variant).
_VARIANT_SITUATION = {
    "新建": "我想{a}，是全新的项目",
    "New Construction": "I want to {a}; it is a brand-new project",
    "变更": "之前为{a}办过手续，现在有些内容要变更",
    "Modification": "I already went through this to {a}, but some of the details have changed",
    "改扩建": "之前为{a}已经批过，现在要改扩建",
    "Renovation and Expansion": "We were approved to {a} before and now want to expand",
    "首次申请": "我想{a}，以前从没办过",
    "First Application": "I want to {a} and have never applied before",
    "延续": "之前为{a}办的证快到期了，想续办",
    "Renewal": "The permit I got to {a} is about to expire and I want to keep it",
    "注销": "之前为{a}办过证，现在不做了想注销",
    "Cancellation": "I got permission to {a}, but I've stopped and want to cancel it",
    "新办": "我想{a}，以前没办过",
    "New Application": "I want to {a} for the first time",
}
_REGION = {"zh": "我在{r}，", "en": "I live in {r}. "}
_SAY_REGION = 0.5  # share of colloquial questions about a multi-region service that say the region
STYLES = ("named", "colloquial", "ambiguous")


# --------------------------------------------------------------------------- planning
def plan_questions(
    corpus: pd.DataFrame, per_doc: int, limit: int | None, seed: int
) -> pd.DataFrame:
    """The (question_id, doc_id, k) slots: `per_doc` per document, then a seeded sample of
    `limit`."""
    slots = pd.DataFrame(
        {
            "doc_id": [d for d in corpus["doc_id"].astype(str) for _ in range(per_doc)],
            "k": [k for _ in range(len(corpus)) for k in range(per_doc)],
        }
    )
    slots.insert(0, "question_id", [f"Q{i + 1:05d}" for i in range(len(slots))])
    if limit is not None and limit < len(slots):
        slots = slots.sample(n=limit, random_state=seed).sort_index()
    return slots.reset_index(drop=True)


def _field_order(record: dRecord, seed: int) -> list[str]:
    """The fields to ask about for one document, in a seeded weighted order (non-empty fields
    only)."""
    rng = random.Random(f"{seed}|{record['doc_id']}")
    present = [f for f in TEMPLATES if f == "" or not is_missing(record.get(f))]
    # Weighted sampling without replacement (Efraimidis-Spirakis keys).
    return sorted(present, key=lambda f: -(rng.random() ** (1.0 / TEMPLATES[f][0])))


# --------------------------------------------------------------------------- template generator
def aliases_of(record: dRecord) -> list[str]:
    """The record's colloquial descriptions (corpus column `aliases`, newline-joined; may be
    absent)."""
    return [a.strip() for a in str(clean(record.get("aliases"))).splitlines() if not is_missing(a)]


def situations_of(record: dRecord, lang: str) -> list[str]:
    """What a citizen wants, to build a colloquial question from: the `aliases`, else (zh) the
    keyword form of the official name (`keyword_form`) with its qualifier said plainly; [] when
    neither exists."""
    aliases = aliases_of(record)
    if aliases or lang != "zh":
        return aliases
    name = clean(record.get("item_name"))
    form = keyword_form(base_name(name))
    if not form:
        return []
    qualifier = qualifier_of(name, clean(record.get("variant")))
    return [f"{form}，属于{qualifier}的情况" if qualifier else form]


def assign_styles(
    corpus: pd.DataFrame, slots: pd.DataFrame, shares: dict[str, float], seed: int, lang: str = "zh"
) -> list[str]:
    """One style per slot: quotas from `shares` (largest remainder), slots drawn in a seeded order.

    Only a family variant can get an `ambiguous` question and only an item a citizen can be made to
    describe (`situations_of`: its `aliases`, or in Chinese the keyword form of its name) a
    `colloquial` one; a quota that finds too few such slots falls back to `named` with a warning.
    """
    n = len(slots)
    quota = _style_quotas(n, shares)
    capable = _capable_documents(corpus, lang)
    order = list(range(n))
    random.Random(f"{seed}|styles").shuffle(order)
    styles = ["named"] * n
    slot_docs = slots["doc_id"].astype(str).tolist()  # not `.iloc[i]` per slot: 2 x n lookups
    for style in ("ambiguous", "colloquial"):
        picked = [i for i in order if styles[i] == "named" and capable[style][slot_docs[i]]]
        picked = picked[: quota[style]]
        for i in picked:
            styles[i] = style
        if len(picked) < quota[style]:
            _warn_too_few_slots(style, quota[style], len(picked))
    return styles


def _style_quotas(n: int, shares: dict[str, float]) -> dict[str, int]:
    """How many of `n` slots each style gets: `shares` normalised, largest remainder."""
    total = sum(shares.get(s, 0.0) for s in STYLES) or 1.0
    raw = {s: n * shares.get(s, 0.0) / total for s in STYLES}
    quota = {s: int(raw[s]) for s in STYLES}
    for s in sorted(STYLES, key=lambda s: -(raw[s] - quota[s]))[: n - sum(quota.values())]:
        quota[s] += 1
    return quota


def _capable_documents(corpus: pd.DataFrame, lang: str) -> dict[str, dict[str, bool]]:
    """Style -> doc_id -> whether the document can get a question of that style: `ambiguous` a
    family variant, `colloquial` an item a citizen can be made to describe. A placeholder variant
    (无) is no variant; aliases that are all placeholders are none."""
    ids = corpus["doc_id"].astype(str)
    if "variant" in corpus:
        variants = [not is_missing(v) for v in corpus["variant"]]
    else:
        variants = [False] * len(ids)
    has = {
        "ambiguous": variants,
        "colloquial": [bool(situations_of(r, lang)) for r in corpus.to_dict("records")],
    }
    return {s: dict(zip(ids, flags, strict=True)) for s, flags in has.items()}


def _warn_too_few_slots(style: str, quota: int, picked: int) -> None:
    why = "family variants" if style == "ambiguous" else "items with aliases or a keyword form"
    warnings.warn(
        f"questions.styles: {quota} {style} questions asked for, but only "
        f"{picked} slots are {why}; the other {quota - picked} are named",
        stacklevel=4,
    )


def _with_variant(base: str, variant: str, lang: str) -> str:
    return f"{base}（{variant}）" if lang == "zh" else f"{base} ({variant})"


def _named_variant(name: str, variant: str, style: str, lang: str, rng: random.Random) -> str:
    """The item's name with its variant as a question says it (before the region)."""
    if style == "ambiguous":  # the family's base service: the citizen does not say which variant
        return strip_variant(name, variant)
    if variant and rng.random() < 0.4:  # the colloquial form of a family member: "注销食品经营许可"
        base = strip_variant(name, variant)
        if not short_variant(variant, lang):
            return _with_variant(base, variant, lang)
        return f"{variant}{base}" if lang == "zh" else f"{base} for {variant.lower()}"
    if variant and variant not in name:  # the exact item: a variant kept in its own column is said
        return _with_variant(name, variant, lang)
    return name


def _name_phrase(
    record: dRecord, lang: str, rng: random.Random, style: str, name_region: bool
) -> str:
    """How a question names the item; placeholders (无, /, ...) are never said, a variant never
    twice."""
    name, variant = clean(record["item_name"]), clean(record.get("variant"))
    name = _named_variant(name, variant, style, lang, rng)
    name = flatten_brackets(name)  # "换领（残损换新（户籍地））" is said "换领（残损换新、户籍地）"
    region = clean(record.get("region"))
    if name_region and region:  # the same service offered by several regions: say which one
        return f"{region}的{name}" if lang == "zh" else f"{name} in {region}"
    return name


def _situation(record: dRecord, lang: str, rng: random.Random) -> str:
    alias = rng.choice(situations_of(record, lang))
    variant = clean(record.get("variant"))
    if variant in _VARIANT_SITUATION and rng.random() < 0.75:
        return _VARIANT_SITUATION[variant].replace("{a}", alias)
    return rng.choice(_SITUATION[lang]).replace("{a}", alias)


def template_question(
    record: dRecord,
    field: str,
    lang: str,
    seed: int,
    k: int,
    style: str = "named",
    name_region: bool = False,
) -> str:
    """One template question about `field` ("" = general) of one item; deterministic in (seed,
    doc_id, k).

    Args:
        record: the corpus row (`doc_id`, `item_name`, `variant`, `region`, `aliases`).
        field: the asked field, a key of `TEMPLATES`.
        lang: `zh` or `en`.
        seed: question seed.
        k: the question's number for this document (0 .. per_doc - 1).
        style: `named` (the exact item), `colloquial` (an alias, no official name; needs
            `aliases`) or `ambiguous` (the base service without the variant).
        name_region: say the region (the service is offered by several regions).
    """
    rng = random.Random(f"{seed}|{record['doc_id']}|{k}")
    zh = lang == "zh"
    yes_no_fee = field == "fee_standard" and is_flag(record.get(field))
    if style == "colloquial":
        text = rng.choice(_phrasings(COLLOQUIAL[field][0 if zh else 1], yes_no_fee))
        text = text.replace("{s}", _situation(record, lang, rng))
        # A citizen says where they live only sometimes, the official name of the service never.
        region = clean(record.get("region"))
        say_region = name_region and rng.random() < _SAY_REGION and bool(region)
        return tidy_question((_REGION[lang].replace("{r}", region) if say_region else "") + text)
    phrasings = _phrasings(TEMPLATES[field][1 if zh else 2], yes_no_fee)
    return tidy_question(
        rng.choice(phrasings).replace("{name}", _name_phrase(record, lang, rng, style, name_region))
    )


def _phrasings(options: tuple[str, ...], yes_no_fee: bool) -> tuple[str, ...]:
    """A fee field holding only a yes/no flag (是否收费: 是) cannot say how much: ask whether, not
    how much."""
    if not yes_no_fee:
        return options
    return tuple(p for p in options if "多少钱" not in p and "how much" not in p.lower()) or options


def _template_rows(
    corpus: pd.DataFrame, slots: pd.DataFrame, styles: dict[str, str], lang: str, seed: int
) -> list[dRecord]:
    records = {str(r["doc_id"]): r for r in corpus.to_dict("records")}
    names = corpus["item_name"].astype(str)
    shared_name = names.map(names.value_counts()) > 1
    # A base service offered by several regions (its items or families exist in more than one).
    bases = names.map(base_name)
    shared_base = bases.map(corpus.groupby(bases)["region"].nunique()) > 1
    shared = {
        "named": dict(zip(corpus["doc_id"].astype(str), shared_name, strict=True)),
        "base": dict(zip(corpus["doc_id"].astype(str), shared_base, strict=True)),
    }
    rows = []
    for qid, doc_id, k in slots.itertuples(index=False):
        rec, style = records[doc_id], styles[qid]
        order = _field_order(rec, seed)
        field = order[k % len(order)]
        region = shared["named" if style == "named" else "base"][doc_id]
        q = template_question(rec, field, lang, seed, k, style=style, name_region=region)
        rows.append(
            dict(
                question_id=qid,
                doc_id=doc_id,
                question=q,
                asked_field=field,
                generator="template",
                style=style,
                **_no_call("template"),
                error="",
                raw="",
            )
        )
    return rows


# --------------------------------------------------------------------------- LLM generator
def question_prompt_template(lang: str) -> str:
    """The packaged role-play prompt (`cube/prompts/<lang>/question_generation.txt`)."""
    if lang not in FIELD_LABELS:
        raise QuestionError(
            f"no question-generation prompt for lang {lang!r}; expected one of "
            f"{sorted(FIELD_LABELS)}"
        )
    return (
        resources.files("cube")
        .joinpath("prompts", lang, "question_generation.txt")
        .read_text(encoding="utf-8")
    )


def render_question_prompt(template: str, document: str, lang: str, asked_field: str = "") -> str:
    """Fill `{document}` (a fenced `<document-NONCE>` block) and `{focus}` in one pass
    (a document containing "{focus}" stays literal)."""
    focus = _FOCUS[lang].replace("{label}", FIELD_LABELS[lang][asked_field]) if asked_field else ""
    # the guide goes in a fenced block it cannot close (`cube.config.fence`)
    return fill_fenced(template, {"document": document}, {"focus": focus})


_PREFIX = re.compile(
    r"^(?:[*#>\s]*)(?:用户问题|问题|提问|咨询|question|q)\s*\d*\s*[*]*\s*[:：]\s*", re.IGNORECASE
)
_QUOTES = " \t\"'“”‘’「」『』`*"


_CUT_JSON = re.compile(r'^\s*\{\s*"question"\s*:\s*"((?:[^"\\]|\\.)*)', re.S)
QUESTION_SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string", "minLength": 1}},
    "required": ["question"],
    "additionalProperties": False,
}  # sent where structured_output allows


def clean_question(reply: str) -> str:
    """The question in a model's reply: its `{"question": ...}` JSON (structured output), else the
    first non-empty line, without "问题：" prefixes, numbering or quotes."""
    try:
        data = json.loads(reply)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("question"), str):
        reply = data["question"]
    elif cut := _CUT_JSON.match(
        reply
    ):  # constrained JSON cut off by max_tokens: the question so far
        reply = cut.group(1)
    for line in reply.splitlines():
        q = line.strip()
        for _ in range(2):  # '"问题：..."' and '问题："..."' both occur
            q = _PREFIX.sub("", q)
            q = re.sub(r"^\d+\s*[.、)）]\s*", "", q).strip(_QUOTES)
        if q:
            return q
    return ""


def question_requests(
    params: Params, corpus: pd.DataFrame, slots: pd.DataFrame
) -> tuple[list[Request], list[str]]:
    """The LLM generator's calls for the question slots (`plan_questions`), and each one's asked
    field: what `build_questions` sends, and what `cube plan` counts."""
    if params.questions.model is None:
        raise QuestionError(
            "questions.generator 'llm' needs questions.model (a name under `models:` or an "
            "inline spec)"
        )
    lang, seed = params.lang, params.questions.seed
    template = question_prompt_template(lang)
    version = "question_generation/" + hashlib.sha256(template.encode()).hexdigest()[:12]
    records = {str(r["doc_id"]): r for r in corpus.to_dict("records")}
    requests, fields = [], []
    for _qid, doc_id, k in slots.itertuples(index=False):
        rec = records[doc_id]
        # The first question per document is the model's free choice; further ones get a field to
        # ask about.
        focus = [f for f in _field_order(rec, seed) if f]
        field = "" if k == 0 or not focus else focus[(k - 1) % len(focus)]
        prompt = render_question_prompt(template, str(rec["text"]), lang, field)
        requests.append(
            Request(
                messages=({"role": "user", "content": prompt},),
                template_version=version,
                sample=k,
                schema=QUESTION_SCHEMA,
                context={
                    "task": ROLE,
                    "doc_id": doc_id,
                    "item_name": rec["item_name"],
                    "document": rec["text"],
                    "lang": lang,
                    "asked_field": field,
                    "record": rec,
                },
            )
        )
        fields.append(field)
    return requests, fields


def _llm_rows(
    params: Params, corpus: pd.DataFrame, slots: pd.DataFrame, cache_path: Path | None
) -> list[dRecord]:
    requests, fields = question_requests(params, corpus, slots)
    model = make_model(params.model(params.questions.model), cache_path)  # type: ignore[arg-type]
    responses = model.complete(requests, role=ROLE, desc="questions")
    rows = []
    for (qid, doc_id, _k), field, resp in zip(
        slots.itertuples(index=False), fields, responses, strict=True
    ):
        question = clean_question(resp.text or "") if resp.ok else ""
        error = "" if resp.ok else (resp.error or "no reply")
        if resp.ok and not question:
            error = "empty question after cleaning the reply"
        rows.append(
            dict(
                question_id=qid,
                doc_id=doc_id,
                question=question,
                asked_field=field,
                generator=f"llm:{model.name}",
                style="",
                **response_accounting(resp, ROLE),
                error=error,
                raw=resp.text or "",
            )
        )
    return rows


# --------------------------------------------------------------------------- file generator
def load_questions_file(
    path: str | Path, corpus: pd.DataFrame, encoding: str = "utf-8"
) -> pd.DataFrame:
    """A user's question set, validated against the corpus (every doc_id must be a document);
    a CSV or JSONL file is decoded with `encoding` (`questions.encoding`).

    Raises:
        QuestionError: missing file, unknown format, missing columns, empty questions, unknown
            doc_ids, duplicate question_ids or an unknown asked_field (naming the rows).
    """
    path = Path(path)
    raw, where = _read_question_table(path, encoding)
    df = pd.DataFrame(
        {c: raw[c].fillna("").astype(str).str.strip() for c in ("question", "doc_id")}
    )
    df["question_id"] = _question_ids(raw)
    df["asked_field"] = _optional_column(raw, "asked_field")
    df["style"] = _optional_column(raw, "style")
    _check_questions(path, df, where, corpus)
    df["generator"] = "file"
    for col, value in _no_call("file").items():
        df[col] = value
    df["error"], df["raw"] = "", ""
    return df[list(QUESTION_TABLE_COLUMNS)]


def _read_question_table(path: Path, encoding: str) -> tuple[pd.DataFrame, list[str]]:
    """The raw question table and its rows' locators; a folder, a .txt file or a table without
    `question` and `doc_id` is refused."""
    if path.is_dir() or path.suffix.lower() == ".txt":
        raise QuestionError(f"{path}: a question set is a CSV, JSONL, Parquet or Excel file")
    try:
        raw, where = read_table(
            path, what="question-set", encoding=encoding, encoding_key="questions.encoding"
        )
    except CorpusError as err:
        raise QuestionError(str(err)) from None
    missing = [c for c in ("question", "doc_id") if c not in raw.columns]
    if missing:
        raise QuestionError(
            f"{path}: missing column(s) {missing}; expected 'question' and 'doc_id' "
            "('question_id', 'asked_field', 'style' optional); columns found: "
            f"{[str(c) for c in raw.columns]}"
        )
    return raw, where


def _question_ids(raw: pd.DataFrame) -> pd.Series | list[str]:
    """The file's question ids, else Q00001, Q00002, ... by row."""
    if "question_id" in raw.columns:
        return _optional_column(raw, "question_id")
    return [f"Q{i + 1:05d}" for i in range(len(raw))]


def _optional_column(raw: pd.DataFrame, col: str) -> pd.Series | str:
    """An optional column's stripped text, "" when the file has no such column."""
    if col not in raw.columns:
        return ""
    return raw[col].fillna("").astype(str).str.strip()


def _check_questions(path: Path, df: pd.DataFrame, where: list[str], corpus: pd.DataFrame) -> None:
    """Raise on the first failed check (empty question or id, a doc_id not in the corpus, an
    unknown asked_field, duplicate ids), naming the rows (and the values)."""

    def rows(mask: pd.Series) -> str:
        hits = [w for w, m in zip(where, mask, strict=True) if m]
        return ", ".join(hits[:10]) + (f" and {len(hits) - 10} more" if len(hits) > 10 else "")

    checks = [
        (df["question"].eq(""), "empty question", None),
        (df["question_id"].eq(""), "empty question_id", None),
        (
            ~df["doc_id"].isin(set(corpus["doc_id"].astype(str))),
            "doc_id not in the corpus",
            "doc_id",
        ),
        (
            ~df["asked_field"].isin(set(CORPUS_FIELDS) | {""}),
            f"asked_field not one of {list(CORPUS_FIELDS)} or empty",
            "asked_field",
        ),
    ]
    for mask, what, col in checks:
        if mask.any():
            values = f" (values: {sorted(set(df.loc[mask, col]))[:10]})" if col else ""
            raise QuestionError(f"{path}: {what} at {rows(mask)}{values}")
    dup = df["question_id"].duplicated(keep=False)
    if dup.any():
        raise QuestionError(
            f"{path}: duplicate question_id(s) {sorted(set(df.loc[dup, 'question_id']))[:10]} "
            f"at {rows(dup)}"
        )


# --------------------------------------------------------------------------- entry points
def build_questions(
    params: Params, corpus: pd.DataFrame, cache_path: Path | None = None, base_dir: Path = Path(".")
) -> pd.DataFrame:
    """The run's question set (`QUESTION_TABLE_COLUMNS`), by `questions.generator`.

    Args:
        params: run params (`questions.*`, `lang`, `models`).
        corpus: the corpus table (`doc_id`, fields, `text`).
        cache_path: the LLM call cache (generator `llm`).
        base_dir: folder a relative `questions.path` is resolved against (generator `file`).

    Rows of the `llm` generator whose call failed keep an empty `question` and say why in
    `error`; downstream steps drop them with a count (`usable_questions`).
    """
    qp = params.questions
    if qp.generator == "file":
        if not qp.path:
            raise QuestionError("questions.generator 'file' needs questions.path")
        path = Path(qp.path).expanduser()
        df = load_questions_file(
            path if path.is_absolute() else Path(base_dir) / path, corpus, qp.encoding
        )
        if qp.limit is not None and qp.limit < len(df):
            df = df.sample(n=qp.limit, random_state=qp.seed).sort_index()
        return df.reset_index(drop=True)
    slots = plan_questions(corpus, qp.per_doc, qp.limit, qp.seed)
    if qp.generator == "template":
        # Styles are dealt over the full plan, so a question keeps its style (and text) under
        # `limit`.
        full = plan_questions(corpus, qp.per_doc, None, qp.seed)
        styles = dict(
            zip(
                full["question_id"],
                assign_styles(corpus, full, qp.styles, qp.seed, params.lang),
                strict=True,
            )
        )
        rows = _template_rows(corpus, slots, styles, params.lang, qp.seed)
    else:
        rows = _llm_rows(params, corpus, slots, cache_path)
    return pd.DataFrame(rows, columns=list(QUESTION_TABLE_COLUMNS))


def usable_questions(questions: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The questions that can be asked (non-empty, no error) and how many were dropped."""
    err = (
        questions["error"].fillna("").astype(str)
        if "error" in questions.columns
        else pd.Series("", index=questions.index)
    )
    ok = questions["question"].fillna("").astype(str).str.strip().ne("") & err.eq("")
    return questions[ok].reset_index(drop=True), int((~ok).sum())
