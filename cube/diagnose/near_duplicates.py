"""Retrieval diagnostics on near-duplicates: how often the top-1 document is the gold's sibling.

A government knowledge base is full of near-duplicates: the same service offered by many
regions (same name, another district) and families of variants (新建 / 变更 / 注销). R@1
counts every miss alike; the near-duplicate confusion rate isolates the misses where the
retriever found the right service but not the right document:

    near-duplicate confusion = top-1 document is in the gold's family but is not the gold

over the `rag` rows whose retrieval outcome is known (`retrieval_ok`). Family: two documents
share a family when they have the same non-empty `family_id`, or the same base item name
(`cube.config.phrasing.base_name`: the name without a trailing variant in brackets, nested
brackets included), i.e. the same item across regions and variants. Each confusion is put
down to one cause:

- `region`: the top-1 document is another region's (its region differs from the gold's);
- `variant`: same region, another variant or family member;
- `duplicate`: same region, same name and variant: two documents of one item (a data problem).

A rate over no rows is NaN, never 0.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from cube.config.phrasing import base_name
from cube.config.schema import known_retrieval

CAUSES: tuple[str, ...] = ("region", "variant", "duplicate")
HIGH_CONFUSION = 0.10  # a share of questions above which the decision page suggests a remedy


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def doc_info(corpus: pd.DataFrame) -> dict[str, tuple[set[tuple[str, str]], str, str, str]]:
    """doc_id -> (family keys, region, item name, variant)."""
    cols = {
        c: corpus[c].tolist() if c in corpus.columns else [""] * len(corpus)
        for c in ("family_id", "item_name", "region", "variant")
    }
    out = {}
    for i, doc_id in enumerate(corpus["doc_id"].astype(str)):
        fam, name = _text(cols["family_id"][i]), _text(cols["item_name"][i])
        keys = {("base", base_name(name))} if name else set()
        if fam:
            keys.add(("family", fam))
        out[doc_id] = (keys, _text(cols["region"][i]), name, _text(cols["variant"][i]))
    return out


def _rag_rows(answers: pd.DataFrame, system: str | None) -> pd.DataFrame:
    rows = answers[answers["set"] == "rag"] if "set" in answers.columns else answers
    if system is not None:
        rows = rows[rows["system"] == system]
    if "retrieval_ok" in rows.columns:
        rows = rows[known_retrieval(rows)]  # NaN is unknown, as in the analysis
    return rows


def confusion_causes(
    answers: pd.DataFrame, corpus: pd.DataFrame, system: str | None = None
) -> pd.DataFrame:
    """Per `rag` row with a known retrieval outcome: the gold `doc_id`, its base `item`, its
    `region` and the `cause` of a near-duplicate confusion ("" when the top-1 document is the
    gold, is outside its family, or nothing was retrieved)."""
    rows = _rag_rows(answers, system)
    info = doc_info(corpus)
    out = []
    for gold, docs in zip(rows["doc_id"].astype(str), rows["retrieved_doc_ids"], strict=True):
        top = str(docs[0]) if docs is not None and len(docs) else None
        _, g_region, g_name, _ = info.get(gold, (set(), "", "", ""))
        out.append((gold, base_name(g_name), g_region, _cause(info, gold, top)))
    return pd.DataFrame(out, columns=["doc_id", "item", "region", "cause"])


def _cause(info: dict[str, Any], gold: str, top: str | None) -> str:
    """Why the top-1 document `top` is a sibling of `gold` (`doc_info` of both): another region,
    another variant, or the same item ("duplicate"); "" when it is the gold, outside its family,
    unknown or nothing was retrieved."""
    if top is None or top == gold or top not in info or gold not in info:
        return ""
    g_keys, g_region, g_name, g_variant = info[gold]
    t_keys, t_region, t_name, t_variant = info[top]
    if not g_keys & t_keys:
        return ""
    if t_region != g_region:
        return "region"
    return "variant" if (t_name, t_variant) != (g_name, g_variant) else "duplicate"


def near_duplicate_confusion(
    answers: pd.DataFrame, corpus: pd.DataFrame, system: str | None = None
) -> dict[str, Any]:
    """The near-duplicate confusion rate of the `rag` answers (one system, or all rows).

    Args:
        answers: the answers table (`set`, `doc_id`, `retrieved_doc_ids`, `retrieval_ok`, `system`).
        corpus: the corpus table (`doc_id`, `item_name`; `family_id`, `region`, `variant`
            when present).
        system: keep only this system's rows (None: every row given).

    Returns:
        `{"rate", "count", "n", "region", "variant", "duplicate"}`: `count` of `n` questions
        whose top-1 document is a sibling of the gold, `rate` = count / n (NaN when n is 0), and
        the count per cause.
    """
    causes = confusion_causes(answers, corpus, system)["cause"]
    per = {c: int((causes == c).sum()) for c in CAUSES}
    n, count = len(causes), sum(per.values())
    return {"rate": count / n if n else math.nan, "count": count, "n": n, **per}


def confusion_by_item(
    answers: pd.DataFrame, corpus: pd.DataFrame, system: str, top: int = 12
) -> pd.DataFrame:
    """The base items (real names) most often confused with a sibling: one row per item with
    its `questions`, the confusions per cause and `confused`, most confused first (ties by name)."""
    rows = confusion_causes(answers, corpus, system)
    table = pd.crosstab(rows["item"], rows["cause"]).reindex(columns=["", *CAUSES], fill_value=0)
    table = table.rename(columns={"": "other"})
    table.insert(0, "questions", table.sum(axis=1))
    table["confused"] = table[list(CAUSES)].sum(axis=1)
    table = table[table["confused"] > 0].drop(columns="other")
    table = table.reset_index().sort_values(
        ["confused", "item"], ascending=[False, True], kind="stable"
    )
    return table.head(top).reset_index(drop=True)


def confusion_by_system(answers: pd.DataFrame, corpus: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """`near_duplicate_confusion` of every system in `answers`, by system name."""
    return {
        str(s): near_duplicate_confusion(answers, corpus, system=s)
        for s in answers.loc[answers["set"] == "rag", "system"].drop_duplicates()
    }


def confusion_table(by_system: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per system: questions, confused, rate and the count per cause."""
    cols = ["system", "questions", "confused", "rate", *CAUSES]
    rows = [
        [name, d["n"], d["count"], d["rate"], *(d[c] for c in CAUSES)]
        for name, d in by_system.items()
    ]
    return pd.DataFrame(rows, columns=cols)


def confusion_note(result: dict[str, Any], lang: str = "en") -> str:
    """A suggestion when the confusion rate is high ("" otherwise, or when it is NaN)."""
    rate = result.get("rate", math.nan)
    if not isinstance(rate, int | float) or math.isnan(rate) or rate <= HIGH_CONFUSION:
        return ""
    main = max(CAUSES, key=lambda c: result.get(c, 0))
    remedy = {
        "region": "restrict retrieval to the region the question names (systems[].region_filter: "
        "question) or give each region its own knowledge base (systems[].region)",
        "variant": "render the variant into the documents and ask questions that name it; "
        "near-duplicate variants differ in few words, so a keyword retriever cannot separate them",
        "duplicate": "remove duplicate documents of one item (cube validate lists them)",
    }[main]
    return (
        f"{rate:.0%} of the questions retrieved a near-duplicate of the gold document first "
        f"(mostly: wrong {main}); consider: {remedy}."
    )


def for_results(by_system: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`confusion_by_system` for `results.json`: a NaN rate becomes null (strict JSON)."""
    return {
        s: {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}
        for s, d in by_system.items()
    }
