"""Refusal questions: questions the knowledge base cannot answer, and how the systems handle them.

Three deterministic templates (`KINDS`), from the corpus itself (the default,
`diagnostics.refusal_generator: template`; `llm` has a model role-play a citizen asking about
services the knowledge base does not cover instead, `cube.kb.refusal_llm`):

- `absent_item`: a plausible government service that no document names (`ABSENT_ITEMS`, the
  ones whose name occurs in no item name of the corpus), asked in the named style;
- `other_province`: a real item of the corpus asked for a province the corpus does not cover
  (`PROVINCES`, the first one no document mentions);
- `absent_field`: a real item asked about a field no document has (last year's case count,
  the satisfaction rating, the window's queue length).

The questions have no gold document (`doc_id` ""), so they are answered by each system's `rag`
path only (`cube.systems.refusal_answers`), never enter CuBE's bounds, and are reported beside
CuBE (`cube.diagnose.refusal`): refusal accuracy (share of these questions the system declined)
and, on the ordinary rag answers, the false-refusal rate (share of answerable questions declined).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cube.config.schema import REFUSAL_QUESTION_COLUMNS

KINDS: tuple[str, ...] = ("absent_item", "other_province", "absent_field")
COLUMNS = list(REFUSAL_QUESTION_COLUMNS)
ABSENT_ITEMS = {
    "zh": [
        "游艇驾驶证核发",
        "宠物医院执业许可",
        "无人机飞行作业备案",
        "民宿经营许可",
        "网约车驾驶员证核发",
        "潜水教练资格认定",
        "滑翔伞飞行场地审批",
        "古董拍卖经营许可",
        "太空旅游备案",
        "私人动物园设立审批",
    ],
    "en": [
        "Yacht pilot licence issuance",
        "Pet hospital practice permit",
        "Drone flight operation filing",
        "Homestay operation permit",
        "Ride-hailing driver certificate issuance",
        "Diving instructor qualification",
        "Paragliding site approval",
        "Antique auction business permit",
        "Space tourism filing",
        "Private zoo establishment approval",
    ],
}
PROVINCES = {
    "zh": ["海南省", "青海省", "贵州省", "吉林省", "甘肃省", "福建省"],
    "en": ["Hainan Province", "Qinghai Province", "Guizhou Province", "Jilin Province"],
}
TEMPLATES = {
    "zh": {
        "absent_item": "{item}需要什么材料？",
        "other_province": "我在{province}，{item}在哪里办理？",
        "absent_field": "{item}去年一共办理了多少件，群众满意度评分是多少？",
    },
    "en": {
        "absent_item": "What materials are needed for {item}?",
        "other_province": "I live in {province}. Where do I apply for {item}?",
        "absent_field": "How many {item} cases were handled last year, and what is its "
        "satisfaction rating?",
    },
}


def build_refusal_questions(
    corpus: pd.DataFrame, lang: str = "zh", n: int = 30, seed: int = 0
) -> pd.DataFrame:
    """`n` refusal questions (kinds in turn): `question_id` (R00001...), `doc_id` "", `question`,
    `kind`, `style` "refusal", `generator` "template", `item` (the service asked about). Fewer
    when the corpus leaves no absent item."""
    if n <= 0:
        return pd.DataFrame(columns=COLUMNS)
    names = corpus["item_name"].fillna("").astype(str)
    text = corpus["text"].fillna("").astype(str) if "text" in corpus else names
    absent = [i for i in ABSENT_ITEMS[lang] if not _named_in(names, i)]
    province = next((p for p in PROVINCES[lang] if not _named_in(text, p)), None)
    rng = np.random.default_rng(seed)
    real = names[names != ""].drop_duplicates().tolist()
    rows = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        item = _item_asked(kind, i, absent, province, real, rng)
        if item is None:
            continue
        q = TEMPLATES[lang][kind].format(item=item, province=province or "")
        rows.append(
            {
                "question_id": f"R{len(rows) + 1:05d}",
                "doc_id": "",
                "question": q,
                "kind": kind,
                "style": "refusal",
                "generator": "template",
                "item": item,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _named_in(texts: pd.Series, word: str) -> bool:
    return bool(texts.str.contains(word, regex=False).any())


def _item_asked(
    kind: str,
    i: int,
    absent: list[str],
    province: str | None,
    real: list[str],
    rng: np.random.Generator,
) -> str | None:
    """The service the i-th question (of `kind`) asks about: an absent item in turn, else a real
    one drawn (another province's needs a province the corpus does not name); None when the
    corpus leaves none."""
    if kind == "absent_item":
        return absent[(i // len(KINDS)) % len(absent)] if absent else None
    if kind == "other_province" and not province:
        return None
    if kind in ("other_province", "absent_field") and real:
        return real[int(rng.integers(len(real)))]
    return None


def build_refusal_set(
    params, corpus: pd.DataFrame, cache_path=None, reject=None
) -> tuple[pd.DataFrame, dict]:
    """The run's refusal questions by `diagnostics.refusal_generator` (`template`: the kinds above;
    `llm`: role-play questions, `cube.kb.refusal_llm`) and a record of how they were made.

    `reject` (the `llm` generator only): a line of the model's reply for which it returns True is
    not a question (the caller passes the refusal detector, `cube.diagnose.refusal.is_refusal`, so
    a reply that declines to write questions yields none)."""
    d = params.diagnostics
    if d.refusal_generator == "llm":
        from cube.kb.refusal_llm import build_llm_refusal_questions

        return build_llm_refusal_questions(
            params, corpus, d.refusal_questions, cache_path, reject=reject
        )
    q = build_refusal_questions(
        corpus, params.lang, d.refusal_questions, seed=params.questions.seed
    )
    return q, {"generator": "template", "requested": d.refusal_questions, "questions": len(q)}
