"""Retrieval metrics from ranks: R@k, P@k, MRR, nDCG@k, hit rate and the R@k curve.

`correlation_reading` states the paper's 5.3 reading for notebook 04: does the gold document's
rank still matter once it is retrieved?

Every figure comes from one retrieval per question: the 1-based rank of the gold document in
the system's list (0 = not retrieved), as `cube.method.analysis.retrieval_outcomes` gives it
(questions whose system call failed are left out, never counted as misses). Each question has
exactly one relevant document (its gold), so, over the n questions of known outcome:

    R@k      = share of questions with 1 <= rank <= k
    P@k      = R@k / k                        (relevant documents in the top k, divided by k)
    MRR      = mean of 1 / rank               (0 for a miss)
    nDCG@k   = mean of 1 / log2(rank + 1)     for 1 <= rank <= k, else 0 (the ideal DCG is 1)
    hit rate = R@TOP-N                        (the gold anywhere in the list)
    curve    = [R@1, R@2, ..., R@TOP-N]       (non-decreasing; its last point is the hit rate)

A metric over no questions is NaN, never 0. Breakdowns (`by_group`) give the same figures per
question style, department, region or near-duplicate family size, with a Wilson interval on R@k.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cube.method.analysis import retrieval_outcomes

DEFAULT_KS: tuple[int, ...] = (1, 3, 5)


def _ranks(ranks: Sequence[int] | pd.Series) -> np.ndarray:
    r = np.asarray(pd.to_numeric(pd.Series(list(ranks), dtype=object)), dtype=float)
    if len(r) and (np.isnan(r).any() or (r < 0).any() or (r != np.floor(r)).any()):
        raise ValueError("ranks must be whole numbers >= 0 (0 = gold document not retrieved)")
    return r.astype(int)


def recall_curve(ranks: Sequence[int] | pd.Series, top_n: int) -> list[float]:
    """[R@1, ..., R@top_n] from the gold ranks (NaN everywhere when there are no questions)."""
    r = _ranks(ranks)
    if top_n < 1:
        raise ValueError(f"top_n must be >= 1, got {top_n}")
    if len(r) and r.max() > top_n:
        raise ValueError(
            f"rank {int(r.max())} exceeds top_n {top_n}: set the system's top_n to its list length"
        )
    if not len(r):
        return [math.nan] * top_n
    hits = np.bincount(r[r > 0], minlength=top_n + 1)[1 : top_n + 1]
    return (np.cumsum(hits) / len(r)).tolist()


def metrics_from_ranks(
    ranks: Sequence[int] | pd.Series, top_n: int, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, Any]:
    """The retrieval metrics of a list of gold ranks (0 = miss) for a system returning `top_n`.

    Returns `{"n", "top_n", "r_at_k", "p_at_k", "ndcg_at_k", "mrr", "hit_rate", "curve"}`; the
    `*_at_k` entries map k (every k of `ks` up to top_n, and top_n itself) to the value."""
    r = _ranks(ranks)
    curve = recall_curve(r, top_n)
    k_list = sorted({*(k for k in ks if 1 <= k <= top_n), top_n})
    n = len(r)
    hit = r > 0
    gain = np.where(hit, 1.0 / np.log2(np.where(hit, r, 1) + 1.0), 0.0)
    return {
        "n": n,
        "top_n": top_n,
        "r_at_k": {k: curve[k - 1] for k in k_list},
        "p_at_k": {k: curve[k - 1] / k for k in k_list},
        "ndcg_at_k": {
            k: float(np.mean(np.where(r <= k, gain, 0.0))) if n else math.nan for k in k_list
        },
        "mrr": float(np.mean(np.where(hit, 1.0 / np.where(hit, r, 1), 0.0))) if n else math.nan,
        "hit_rate": curve[-1],
        "curve": curve,
    }


def system_metrics(
    answers: pd.DataFrame, top_n: int, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, Any]:
    """`metrics_from_ranks` of one system's answers (via `retrieval_outcomes`), with `unknown`:
    the number of questions left out because the system call failed."""
    out = retrieval_outcomes(answers, top_n)
    return {**metrics_from_ranks(out.ranks["rank"], top_n, ks), "unknown": out.n_unknown}


def run_metrics(
    answers: pd.DataFrame, top_n: Mapping[str, int], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, dict]:
    """`system_metrics` of every system in `answers`, by name."""
    return {
        str(s): system_metrics(a, top_n.get(s, 8), ks)
        for s, a in answers.groupby("system", sort=True)
    }


def for_results(metrics: dict[str, Any]) -> dict[str, Any]:
    """Strict-JSON form: NaN -> null, integer k keys as strings."""

    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, float) and math.isnan(v):
            return None
        return v

    return clean(metrics)


def wilson(
    hits: int,
    n: int,
    confidence: float = 0.95,
    design_effect: float = 1.0,
    units: int | None = None,
) -> tuple[float, float]:
    """Wilson score interval of a proportion (NaN, NaN when n is 0).

    `design_effect` > 1 (questions in correlated families, `cube.method.design`): the interval of
    the effective sample n / deff at the same proportion (Kish's effective sample size, the usual
    cluster adjustment of a proportion's score interval), with Student's t at `units` - 1 degrees
    of freedom for z when `units` (the number of families) is given. scipy's `binomtest` takes
    whole counts, so this case evaluates Wilson's closed form at the fractional effective n."""
    if n == 0:
        return (math.nan, math.nan)
    if design_effect > 1.0:
        from cube.method.design import wilson_effective

        return wilson_effective(hits / n, n / design_effect, confidence, units)
    from scipy.stats import binomtest

    ci = binomtest(int(hits), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def family_sizes(corpus: pd.DataFrame) -> pd.Series:
    """doc_id -> number of documents in its near-duplicate family (itself included; 1 = no sibling),
    families as `cube.diagnose.near_duplicates` defines them (same family_id, or same base
    item name)."""
    from cube.diagnose.near_duplicates import doc_info

    info = doc_info(corpus)
    members: dict[tuple[str, str], set[str]] = {}
    for doc, (keys, *_rest) in info.items():
        for key in keys:
            members.setdefault(key, set()).add(doc)
    sizes = {
        doc: len(set().union(*(members[k] for k in keys)) | {doc})
        for doc, (keys, *_r) in info.items()
    }
    return pd.Series(sizes, name="family_size")


def size_band(size: int) -> str:
    return "1 (unique)" if size <= 1 else "2-3" if size <= 3 else "4-9" if size <= 9 else "10+"


def question_groups(questions: pd.DataFrame, corpus: pd.DataFrame) -> pd.DataFrame:
    """Per question: `style`, the gold's `department` and `region` and its `family_size` band."""
    q = questions[["question_id", "doc_id"]].copy()
    q["style"] = (
        questions["style"].fillna("").replace("", "(llm or file)")
        if "style" in questions
        else "(none)"
    )
    c = corpus.set_index(corpus["doc_id"].astype(str))
    gold = q["doc_id"].astype(str)
    for col in ("department", "region"):
        q[col] = gold.map(c[col]).fillna("").replace("", "(none)") if col in c else "(none)"
    q["family_size"] = gold.map(family_sizes(corpus)).fillna(1).astype(int).map(size_band)
    # the resampling family (`cube.run.evaluate.question_families`' rule): the corpus family_id of
    # the gold, else the gold itself, else the question alone; the groups' intervals allow for it
    fam = c["family_id"].fillna("").astype(str) if "family_id" in c else pd.Series(dtype=str)
    fam = gold.map(fam[fam.str.strip() != ""]).astype(object)
    q["family"] = np.where(
        fam.notna(), "family:" + fam.fillna(""), np.where(gold != "", "doc:" + gold, "question:")
    )
    q.loc[gold == "", "family"] = "question:" + q["question_id"].astype(str)
    return q


def family_wilson(
    hit: np.ndarray,
    family: np.ndarray | None,
    rho: float,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """R@N's Wilson interval over a group of questions that come in families (issue 30): Kish's
    design effect of the group's family sizes at the intraclass correlation `rho` of retrieval
    (estimated over all the system's questions, `cube.method.design.icc_oneway`: a group's few
    families would give a noisy one), and t at the group's families (`wilson`). Plain Wilson when
    `family` is None or every question is its own family."""
    from cube.method.design import design_effect

    hit = np.asarray(hit, bool)
    if family is None or not len(hit):
        return wilson(int(hit.sum()), len(hit), confidence)
    codes = np.unique(np.asarray(family, str), return_inverse=True)[1]
    units = int(codes.max()) + 1
    deff = design_effect(rho, codes)
    return wilson(int(hit.sum()), len(hit), confidence, deff, units if units < len(hit) else None)


def retrieval_icc(ranks: pd.DataFrame, top_n: int) -> float:
    """The intraclass correlation of retrieval (gold within the first `top_n`) within the
    `family` column of `ranks` (NaN without it)."""
    from cube.method.design import icc_oneway

    if "family" not in ranks:
        return float("nan")
    hit = ((ranks["rank"] > 0) & (ranks["rank"] <= top_n)).to_numpy(float)
    codes = np.unique(ranks["family"].astype(str).to_numpy(), return_inverse=True)[1]
    return icc_oneway(hit, codes)


def _group_row(
    g: pd.DataFrame, n_top: int, k: int | None, interval: tuple[float | None, float]
) -> dict[str, Any]:
    """One group's row of `by_group`: questions, R@1 (R@k), R@N with its Wilson interval, MRR,
    nDCG@N. `interval`: the families' intraclass correlation (None: questions independent) and
    the confidence."""
    rho, confidence = interval
    m = metrics_from_ranks(g["rank"], n_top, (1, k or 1))
    hit = ((g["rank"] > 0) & (g["rank"] <= n_top)).to_numpy()
    fam = g["family"].fillna("").astype(str).to_numpy() if rho is not None else None
    lo, hi = family_wilson(hit, fam, float("nan") if rho is None else rho, confidence)
    return {
        "questions": len(g),
        "R@1": m["r_at_k"][1],
        **({f"R@{k}": m["r_at_k"][k]} if k and k < n_top else {}),
        "R@N": m["hit_rate"],
        "R@N_lo": lo,
        "R@N_hi": hi,
        "MRR": m["mrr"],
        "nDCG@N": m["ndcg_at_k"][n_top],
        "top_n": n_top,
    }


def by_group(
    answers: pd.DataFrame,
    groups: pd.DataFrame,
    by: str,
    top_n: Mapping[str, int],
    k: int | None = None,
    confidence: float = 0.95,
    cluster: str = "family",
) -> pd.DataFrame:
    """R@k (k = 1 and the system's TOP-N), MRR and nDCG@TOP-N per system and value of `by`
    (a column of `question_groups`), with the Wilson interval of R@TOP-N (allowing for the
    families of near-duplicates, `family_wilson`, unless `cluster` is "question"). Rows with more
    questions first; the groups of a system sum to its questions."""
    rows = []
    for system, a in answers.groupby("system", sort=True):
        n_top = top_n.get(system, 8)
        keep = ["question_id", by] + ["family"] * ("family" in groups and by != "family")
        ranks = retrieval_outcomes(a, n_top).ranks.merge(groups[keep], on="question_id", how="left")
        ranks[by] = ranks[by].fillna("(unknown)")
        families = cluster == "family" and "family" in ranks
        fam_rho = retrieval_icc(ranks, n_top) if families else None
        rows += [
            {"system": system, by: value, **_group_row(g, n_top, k, (fam_rho, confidence))}
            for value, g in ranks.groupby(by, sort=True)
        ]
    out = pd.DataFrame(rows)
    return (
        out.sort_values(
            ["system", "questions", by], ascending=[True, False, True], kind="stable"
        ).reset_index(drop=True)
        if len(out)
        else pd.DataFrame(columns=["system", by, "questions", "R@1", "R@N", "MRR", "top_n"])
    )  # no question of known retrieval (every system call failed): an empty table, its columns


def metrics_table(metrics: Mapping[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per system: questions, R@k, P@k, nDCG@k, MRR and the hit rate."""
    rows = []
    for system, m in metrics.items():
        row: dict[str, Any] = {
            "system": system,
            "questions": m["n"],
            "unknown": m.get("unknown", 0),
            "top_n": m["top_n"],
        }
        row.update({f"R@{k}": v for k, v in m["r_at_k"].items()})
        row.update({f"P@{k}": v for k, v in m["p_at_k"].items()})
        row.update({f"nDCG@{k}": v for k, v in m["ndcg_at_k"].items()})
        row.update({"MRR": m["mrr"], "hit_rate": m["hit_rate"]})
        rows.append(row)
    return pd.DataFrame(rows)


def share_word(part: int, whole: int) -> str:
    """The word for `part` of `whole` a sentence may use: "all", "most" (more than half), "half",
    "fewer than half" or "none" (from the counts, never a guess)."""
    if whole <= 0 or part <= 0:
        return "none"
    if part >= whole:
        return "all"
    if 2 * part > whole:
        return "most"
    return "half" if 2 * part == whole else "fewer than half"


def curve_sentence(system: str, m: Mapping[str, Any]) -> str:
    """The R@k curve in one sentence for the decision page: R@1, R@3 and R@TOP-N (each k once) and
    how many of the gold documents found are first in the list, with the word ("all", "most",
    "half", "fewer than half") that those counts support."""
    curve = m["curve"]
    if not curve or not np.isfinite(curve[-1]):
        return (
            f"{system}: no question has a known retrieval outcome, so the R@k curve is undefined."
        )
    n = m["top_n"]
    ks = sorted({1, min(3, n), n})
    shown = ", ".join(f"R@{k} = {curve[k - 1]:.1%}" for k in ks)
    questions = int(m["n"])
    found, first = round(curve[-1] * questions), round(curve[0] * questions)
    head = f"R@k curve of {system}: {shown} (MRR {m['mrr']:.2f}); "
    if found == 0:
        return head + "no gold document is in any list."
    word = share_word(first, found)
    if word == "all":
        return head + f"all {found} gold documents found are first in the list."
    half = next((k for k, v in enumerate(curve, 1) if v >= curve[-1] / 2), n)
    return (
        head
        + f"{first} of the {found} gold documents found ({word}) are first in the list"
        + (f"; half are within the top {half}." if 2 * first < found else ".")
    )


def correlation_reading(result: Any) -> str:
    """The paper's 5.3 reading, stated from this run's data whatever it shows."""
    ca, cr = result.correlations_all, result.correlations_retrieved
    r_all, r_ret = ca["r"].mean(), cr["r"].mean()
    if not (np.isfinite(r_all) and np.isfinite(r_ret)):
        return (
            "The correlation with rank is undefined for this run (a constant score or rank, or too "
            "few questions), so the paper's reading cannot be checked here."
        )
    per_judge = ca.groupby("judge")["r"].mean() - cr.groupby("judge")["r"].mean()
    dropped = int((per_judge > 0.1).sum())
    text = (
        f"Mean Pearson r between rank_score and the dimension scores: {r_all:.2f} over all "
        f"{result.n_questions} questions, {r_ret:.2f} over the {result.n_retrieved} retrieved "
        f"ones; the correlation falls by more than 0.1 for {dropped} of {len(per_judge)} judges. "
    )
    if r_ret < r_all - 0.1:
        text += (
            "As in the paper, the correlation collapses once the gold document is retrieved: "
            "whether the document is found matters far more than its position in the top N."
        )
    else:
        text += (
            "Unlike the paper, the correlation does not collapse on retrieved questions: in this "
            "run the rank of the gold document still matters once it is retrieved."
        )
    return text
