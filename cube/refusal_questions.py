"""Refusal questions: questions the knowledge base cannot answer, and how the systems handle them.

Three deterministic templates (`KINDS`), from the corpus itself (the default,
`diagnostics.refusal_generator: template`; `llm` has a model role-play a citizen asking about
services the knowledge base does not cover instead, `cube.refusal_llm`):

- `absent_item`: a plausible government service that no document names (`ABSENT_ITEMS`, the
  ones whose name occurs in no item name of the corpus), asked in the named style;
- `other_province`: a real item of the corpus asked for a province the corpus does not cover
  (`PROVINCES`, the first one no document mentions);
- `absent_field`: a real item asked about a field no document has (last year's case count,
  the satisfaction rating, the window's queue length).

The questions have no gold document (`doc_id` ""), so they are answered by each system's `rag`
path only, never enter CuBE's bounds, and are reported beside CuBE: refusal accuracy (share of
these questions the system declined, by `cube.refusal.is_refusal`) and, on the ordinary rag
answers, the false-refusal rate (share of answerable questions declined).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cube.refusal import answer_outcome, is_refusal, refusal_accuracy

KINDS: tuple[str, ...] = ("absent_item", "other_province", "absent_field")
COLUMNS = ["question_id", "doc_id", "question", "kind", "style", "generator", "item"]
ABSENT_ITEMS = {
    "zh": ["游艇驾驶证核发", "宠物医院执业许可", "无人机飞行作业备案", "民宿经营许可", "网约车驾驶员证核发",
           "潜水教练资格认定", "滑翔伞飞行场地审批", "古董拍卖经营许可", "太空旅游备案", "私人动物园设立审批"],
    "en": ["Yacht pilot licence issuance", "Pet hospital practice permit", "Drone flight operation filing",
           "Homestay operation permit", "Ride-hailing driver certificate issuance", "Diving instructor qualification",
           "Paragliding site approval", "Antique auction business permit", "Space tourism filing",
           "Private zoo establishment approval"],
}
PROVINCES = {"zh": ["海南省", "青海省", "贵州省", "吉林省", "甘肃省", "福建省"],
             "en": ["Hainan Province", "Qinghai Province", "Guizhou Province", "Jilin Province"]}
TEMPLATES = {
    "zh": {"absent_item": "{item}需要什么材料？",
           "other_province": "我在{province}，{item}在哪里办理？",
           "absent_field": "{item}去年一共办理了多少件，群众满意度评分是多少？"},
    "en": {"absent_item": "What materials are needed for {item}?",
           "other_province": "I live in {province}. Where do I apply for {item}?",
           "absent_field": "How many {item} cases were handled last year, and what is its satisfaction rating?"},
}


def build_refusal_questions(corpus: pd.DataFrame, lang: str = "zh", n: int = 30, seed: int = 0) -> pd.DataFrame:
    """`n` refusal questions (kinds in turn): `question_id` (R00001...), `doc_id` "", `question`,
    `kind`, `style` "refusal", `generator` "template", `item` (the service asked about). Fewer
    when the corpus leaves no absent item."""
    if n <= 0:
        return pd.DataFrame(columns=COLUMNS)
    names = corpus["item_name"].fillna("").astype(str)
    text = corpus["text"].fillna("").astype(str) if "text" in corpus else names
    absent = [i for i in ABSENT_ITEMS[lang] if not names.str.contains(i, regex=False).any()]
    province = next((p for p in PROVINCES[lang] if not text.str.contains(p, regex=False).any()), None)
    rng = np.random.default_rng(seed)
    real = names[names != ""].drop_duplicates().tolist()
    rows = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        if kind == "absent_item" and absent:
            item = absent[(i // len(KINDS)) % len(absent)]
        elif kind == "other_province" and province and real:
            item = real[int(rng.integers(len(real)))]
        elif kind == "absent_field" and real:
            item = real[int(rng.integers(len(real)))]
        else:
            continue
        q = TEMPLATES[lang][kind].format(item=item, province=province or "")
        rows.append({"question_id": f"R{len(rows) + 1:05d}", "doc_id": "", "question": q, "kind": kind,
                     "style": "refusal", "generator": "template", "item": item})
    return pd.DataFrame(rows, columns=COLUMNS)


def build_refusal_set(params, corpus: pd.DataFrame, cache_path=None) -> tuple[pd.DataFrame, dict]:
    """The run's refusal questions by `diagnostics.refusal_generator` (`template`: the kinds above;
    `llm`: role-play questions, `cube.refusal_llm`) and a record of how they were made."""
    d = params.diagnostics
    if d.refusal_generator == "llm":
        from cube.refusal_llm import build_llm_refusal_questions

        return build_llm_refusal_questions(params, corpus, d.refusal_questions, cache_path)
    q = build_refusal_questions(corpus, params.lang, d.refusal_questions, seed=params.questions.seed)
    return q, {"generator": "template", "requested": d.refusal_questions, "questions": len(q)}


def refusal_answers(params, corpus: pd.DataFrame, questions: pd.DataFrame, cache_path) -> pd.DataFrame:
    """Every system's `rag` answers to the refusal questions, with `kind` and `declined`."""
    from cube.config import BuiltinSystem
    from cube.systems import make_system

    parts = []
    for sp in params.systems:
        if not isinstance(sp, BuiltinSystem):
            continue  # an imported file holds no answers to these questions; a RAGFlow call is left to the user
        df = make_system(sp, params, cache_path).answer(questions, corpus, progress=False)
        keep = [c for c in ("question_id", "question", "kind", "style", "item", "generator") if c in questions]
        parts.append(df.merge(questions[keep], on="question_id", how="left"))
    if not parts:
        return pd.DataFrame(columns=["question_id", "system", "answer", "kind", "outcome", "declined"])
    return mark_declined(pd.concat(parts, ignore_index=True))


def mark_declined(answers: pd.DataFrame) -> pd.DataFrame:
    """`outcome` ("answered", "failed", "empty": `cube.refusal.answer_outcome`) and `declined`
    (nullable boolean: NA when there is no answer to judge, never False)."""
    out = answers.copy()
    errors = out["error"] if "error" in out else pd.Series(None, index=out.index, dtype=object)
    out["outcome"] = [answer_outcome(a, e) for a, e in zip(out["answer"], errors, strict=True)]
    declined = [is_refusal(a) if o == "answered" else pd.NA for a, o in zip(out["answer"], out["outcome"], strict=True)]
    out["declined"] = pd.array(declined, dtype="boolean")
    return out


def refusal_report(refusals: pd.DataFrame, answers: pd.DataFrame, confidence: float = 0.95) -> dict[str, dict]:
    """Per system: refusal accuracy on the refusal questions (and by kind), false-refusal rate
    on its ordinary rag answers, each with its Wilson interval (`refusal_ci`, `false_refusal_ci`);
    NaN (null) over no questions. Failed and empty answers are in neither rate: they are counted
    and flagged (`cube.refusal.refusal_accuracy`)."""
    from cube.retrieval_metrics import wilson

    out = {}
    rag = answers[answers["set"] == "rag"]
    for system, r in refusals.groupby("system", sort=True):
        r = r if "outcome" in r else mark_declined(r)
        ordinary = mark_declined(rag[rag["system"] == system])
        both = pd.concat([r[["declined", "outcome"]], ordinary[["declined", "outcome"]]], ignore_index=True)
        figures = refusal_accuracy(both["declined"].fillna(False).astype(bool).tolist(),
                                   [False] * len(r) + [True] * len(ordinary), both["outcome"].tolist())
        for rate, n, key in (("refusal_accuracy", "n_unanswerable", "refusal_ci"),
                             ("false_refusal_rate", "n_answerable", "false_refusal_ci")):
            hits = round(figures[rate] * figures[n]) if figures[n] else 0
            figures[key] = list(wilson(hits, figures[n], confidence))
        answered = r[r["outcome"] == "answered"]
        figures["by_kind"] = {k: float(g["declined"].astype(bool).mean())
                              for k, g in answered.groupby("kind", sort=True)}
        out[str(system)] = figures
    return out


def _ci(figures: dict, key: str, digits: int) -> str:
    lo, hi = ([*(figures.get(key) or []), None, None])[:2]
    ok = all(v is not None and np.isfinite(v) for v in (lo, hi))
    return f" [{lo:.{digits}%}, {hi:.{digits}%}]" if ok else ""


def refusal_sentence(system: str, figures: dict) -> str:
    """The refusal figures in one sentence (with their Wilson intervals and the no-answer caution)."""
    acc, fr = figures.get("refusal_accuracy"), figures.get("false_refusal_rate")
    if acc is None or not np.isfinite(acc):
        return f"{system}: no refusal question was answered, so refusal accuracy is undefined."
    kinds = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in figures.get("by_kind", {}).items())
    wrong = (f"wrongly declined {fr:.1%}{_ci(figures, 'false_refusal_ci', 1)} of {figures['n_answerable']} answerable "
             "ones" if fr is not None and np.isfinite(fr) else "has no answered answerable question, so no "
             "false-refusal rate")
    caution = f" Caution: {figures['flag']}." if figures.get("flag") else ""
    return (f"Refusal: {system} declined {acc:.0%}{_ci(figures, 'refusal_ci', 0)} of {figures['n_unanswerable']} "
            f"questions the knowledge base cannot answer ({kinds}) and {wrong} (reported beside CuBE, not in it; "
            f"Wilson intervals).{caution}")
