"""The paper's tables, laid out as in the paper, from `CubeResult`s (one per system).

Every table carries a `system` column so several systems (or versions of one) share a file.
Numbers stay numbers (CSV-friendly); the notebooks display these frames as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cube.method.analysis import retrieval_outcomes
from cube.method.evaluation import CubeResult

NOT_MADE = (
    "(not made: the system missed the gold document and no estimator reads a missed question's "
    "bounds outside the judge gate's sample; analysis.bounds_of_missed: all makes them)"
)
NOT_MADE_UNKNOWN = (
    "(not made: the system's retrieval of this question is unknown, its call failed or its rank "
    "is undetermined, so the question is left out of every estimator and the gate)"
)
SET_LABELS = {"zero": "zero (no documents)", "full": "full (gold document)", "rag": "rag (system)"}


def _stack(results: Mapping[str, CubeResult], frame: str) -> pd.DataFrame:
    parts = [getattr(r, frame).assign(system=name) for name, r in results.items()]
    out = pd.concat(parts, ignore_index=True)
    return out[["system", *[c for c in out.columns if c != "system"]]]


def table1_judge_summary(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Paper Table 1: mean and SD (ddof = 1) of each judge's scores per dimension on the rag set."""
    return _stack(results, "judge_summary")


def retrieved_summary_table(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Paper 5.3: mean and SD on the questions whose gold document was retrieved."""
    return _stack(results, "retrieved_summary")


def correlation_table(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Pearson r of rank_score with each dimension: all questions beside retrieved-only."""
    rows = []
    for name, r in results.items():
        m = r.correlations_all.merge(
            r.correlations_retrieved, on=["judge", "dimension"], suffixes=("_all", "_retrieved")
        )
        rows.append(m.assign(system=name))
    out = pd.concat(rows, ignore_index=True)
    out["drop"] = out["r_all"] - out["r_retrieved"]
    return out[
        [
            "system",
            "judge",
            "dimension",
            "r_all",
            "p_value_all",
            "n_all",
            "r_retrieved",
            "p_value_retrieved",
            "n_retrieved",
            "drop",
        ]
    ]


def table2_trimmed_means(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Paper Table 2: trimmed means per judge and set (zero, full, rag) and the weighted total."""
    parts = []
    for name, r in results.items():
        wide = r.trimmed_means.pivot_table(
            index=["judge", "set"],
            columns="dimension",
            values="trimmed_mean",
            aggfunc="first",
            dropna=False,
        )  # a judge without scores keeps its rows
        dims = list(dict.fromkeys(r.trimmed_means["dimension"]))
        wide = wide.reindex(columns=dims).join(
            r.weighted_totals.set_index(["judge", "set"])["weighted_total"]
        )
        wide = wide.reset_index()
        wide["set"] = pd.Categorical(wide["set"], ["zero", "full", "rag"])
        parts.append(
            wide.sort_values(["judge", "set"]).assign(
                system=name, set=lambda d: d["set"].astype(str)
            )
        )
    out = pd.concat(parts, ignore_index=True)
    out.columns.name = None
    return out[["system", *[c for c in out.columns if c != "system"]]]


def table3_weights(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Paper Table 3: dimension weights per judge (summing to 1)."""
    parts = []
    for name, r in results.items():
        dims = list(dict.fromkeys(r.weights["dimension"]))
        wide = r.weights.pivot(index="judge", columns="dimension", values="weight")[
            dims
        ].reset_index()
        parts.append(wide.assign(system=name))
    out = pd.concat(parts, ignore_index=True)
    out.columns.name = None
    return out[["system", *[c for c in out.columns if c != "system"]]]


def table4_cube_scores(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Paper Table 4: normalised dimensions, weighted score, R@k and CuBE per judge, then the jury's
    mean and SD (ddof = 1), with the bootstrap interval of CuBE (`cube_lo`, `cube_hi`).

    Every judge keeps its row; `in_jury` / `excluded_reason` say whether the validity gate let it
    into the jury, and the jury rows' `n_judges` how many judges the mean averages."""
    parts = []
    for name, r in results.items():
        t = r.cube_table.drop(
            columns=[c for c in r.cube_table if c.startswith("flag_")] + ["judging_failed"],
            errors="ignore",
        ).reset_index()
        jury = r.jury.reset_index().rename(columns={"index": "judge"})
        jury["judge"] = jury["judge"].map({"mean": "Jury mean", "sd": "Jury SD"})
        t = pd.concat([t, jury], ignore_index=True)
        if r.bootstrap is not None:
            ci = r.bootstrap[r.bootstrap["metric"] == "cube_score"].set_index("judge")
            key = t["judge"].replace({"Jury mean": "jury"})
            t["cube_lo"] = key.map(ci["lo"])
            t["cube_hi"] = key.map(ci["hi"])
        parts.append(t.assign(system=name))
    out = pd.concat(parts, ignore_index=True)
    return out[["system", *[c for c in out.columns if c != "system"]]]


OUT_OF_BOUNDS_NOTE = (
    "outside 0-100: the rag answers' trimmed mean lies beyond the judge's bounds, below the "
    "zero bound (negative: worse than answering without documents) or above the full bound (over "
    "100: better than answering with the gold document). The bounds are not a cap; a value far "
    "outside them usually means the zero and full bounds are close together, so the ratio is "
    "unstable: read that judge's bounds (notebook 05) before its score."
)


def normalised_columns(results: Mapping[str, CubeResult]) -> list[str]:
    """The columns of Table 4 on the normalised 0-100 scale (every dimension, W, CuBE and its
    interval): the ones `OUT_OF_BOUNDS_NOTE` marks when a value falls outside 0-100."""
    dims = dict.fromkeys(d for r in results.values() for d in r.weights["dimension"])
    return [*dims, "weighted_score", "cube_score", "cube_lo", "cube_hi"]


def retrieval_table(
    answers: pd.DataFrame, top_n: Mapping[str, int], ks: Sequence[int] = (1, 3)
) -> pd.DataFrame:
    """R@1, R@3 and R@N per system, with the mean rank of retrieved gold documents, from
    `cube.method.analysis.retrieval_outcomes` (questions whose system call failed are left out and
    counted in `retrieval_unknown`, never counted as misses)."""
    rows = []
    for system, a in answers.groupby("system", sort=True):
        n = top_n.get(system, 8)
        out = retrieval_outcomes(a, n)
        row = {
            "system": system,
            "questions": len(out.ranks),
            "retrieval_unknown": out.n_unknown,
            "top_n": n,
        }
        for k in sorted({*[k for k in ks if k < n], n}):
            row[f"R@{k}"] = out.recall(k)
        hit = out.ranks["rank"][out.ranks["rank"] > 0]
        row["mean_rank_when_retrieved"] = float(hit.mean()) if len(hit) else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def flags_table(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Every flag of the run: `system, judge, dimension, code, message` (empty when none)."""
    parts = [r.flags.assign(system=name) for name, r in results.items() if len(r.flags)]
    if not parts:
        return pd.DataFrame(columns=["system", "judge", "dimension", "code", "message"])
    out = pd.concat(parts, ignore_index=True)
    return out[["system", "judge", "dimension", "code", "message"]]


def jury_gate_table(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """The judge validity gate per system and judge: in the jury or excluded, and why."""
    cols = [
        "in_jury",
        "excluded_reason",
        "gate_separation",
        "gate_p_value",
        "gate_questions",
        "gate_rank_r",
        "gate_rank_p_value",
        "failure_rate",
        "weighted_score",
        "gate_withhold",
    ]
    parts = [
        r.cube_table[[c for c in cols if c in r.cube_table]].reset_index().assign(system=name)
        for name, r in results.items()
    ]
    out = pd.concat(parts, ignore_index=True)
    return out[["system", *[c for c in out.columns if c != "system"]]]


def _example_question(a: pd.DataFrame) -> str:
    """`qa_example`'s default question: retrieved but not at rank 1, else with its three answers
    made, else the first."""
    rag = a[a["set"] == "rag"].sort_values("question_id")
    whole = a.groupby("question_id")["set"].nunique().eq(len(SET_LABELS))
    pick = rag[rag["rank"] > 1]
    pick = pick if len(pick) else rag[rag["question_id"].map(whole).fillna(False).astype(bool)]
    return str((pick if len(pick) else rag)["question_id"].iloc[0])


def qa_example(
    answers: pd.DataFrame,
    questions: pd.DataFrame,
    question_id: str | None = None,
    system: str | None = None,
) -> pd.DataFrame:
    """One question answered three ways (zero, rag, full), side by side; default: the first
    question whose gold document the system retrieved but not at rank 1, else the first with its
    three answers made, else the first. A bound not made (a missed question's,
    `cube.systems.bounds`) reads `NOT_MADE` in place of its answer, one of a question of unknown
    retrieval (`retrieval_ok` False on its rag row) `NOT_MADE_UNKNOWN`."""
    a = answers if system is None else answers[answers["system"] == system]
    system = system or str(a["system"].iloc[0])
    a = a[a["system"] == system]
    if question_id is None:
        question_id = _example_question(a)
    rows = a[a["question_id"] == question_id].set_index("set")
    q = questions.set_index("question_id").loc[question_id]
    sets = ("zero", "rag", "full")
    not_made = _not_made_text(rows)
    out = pd.DataFrame(
        {
            "set": [SET_LABELS[s] for s in sets],
            "answer": [rows.at[s, "answer"] if s in rows.index else not_made for s in sets],
            "documents seen": [
                list(rows.at[s, "retrieved_doc_ids"]) if s in rows.index else [] for s in sets
            ],
        }
    )
    out.attrs.update(
        question_id=question_id,
        question=q["question"],
        gold_doc_id=q["doc_id"],
        system=system,
        rank=int(rows.at["rag", "rank"]),
    )
    return out


def question_mix(questions: pd.DataFrame) -> pd.DataFrame:
    """How many questions ask about each field, by generator."""
    field = questions["asked_field"].fillna("").replace("", "(general)")
    out = questions.assign(asked_field=field).groupby(["generator", "asked_field"]).size()
    return (
        out.rename("questions")
        .reset_index()
        .sort_values("questions", ascending=False, ignore_index=True)
    )


def rank_transform_table(top_n: int = 8) -> pd.DataFrame:
    """The paper's rank transform for a list of N: rank -> rank_score."""
    from cube.method.analysis import rank_score

    rows = [
        {"retrieval outcome": "not retrieved", "rank": 0, "rank_score": rank_score(0, top_n, top_n)}
    ]
    rows.append(
        {"retrieval outcome": "retrieved alone", "rank": 1, "rank_score": rank_score(1, 1, top_n)}
    )
    rows += [
        {
            "retrieval outcome": f"position {r} of {top_n}",
            "rank": r,
            "rank_score": rank_score(r, top_n, top_n),
        }
        for r in range(1, top_n + 1)
    ]
    return pd.DataFrame(rows)


def table5_human_vs_cube(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    human: pd.DataFrame,
    analysis_params,
    top_n: Mapping[str, int],
    full_recall: Mapping[str, float],
    jury: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Paper Table 5: the same CuBE computation on the rated sample for the LLM jury and for the
    human raters (mean ± SD across the members of each group), with the run's full-sample R@k.

    Human judges are `human` or `human:<rater>`; the "CuBE (judges)" row averages the judges of
    the run's jury (`jury`: per system, the judges the validity gate let in on the whole run, as
    the decision's CuBE does); the judges it left out are named in `left_out` and not averaged (a
    random judge beside a decent one made the row -8.67 ± 66.31 while the jury's CuBE was 41.55).
    Without `jury`, every judge counts."""
    from cube.method.evaluation import evaluate

    rows = []
    ap = analysis_params.model_copy(update={"bootstrap": 0})
    for system, h in human.groupby("system"):
        q = set(h["question_id"])
        a = answers[(answers["system"] == system) & answers["question_id"].isin(q)]
        s = scores[(scores["system"] == system) & scores["question_id"].isin(q)]
        cols = [c for c in s.columns if c in h.columns]
        res = evaluate(a, pd.concat([s[cols], h[cols]], ignore_index=True), ap, top_n.get(system))
        t = res.cube_table.copy()
        t["recall_at_k"] = full_recall[system]
        t["cube_score"] = t["weighted_score"] * full_recall[system]
        dims = [c for c in t.columns if c in set(res.weights["dimension"])]
        num = [*dims, "weighted_score", "recall_at_k", "cube_score"]
        names = t.index.to_series().astype(str)
        is_h = names.str.startswith("human")
        keep = ~is_h if jury is None else names.isin([str(j) for j in jury.get(system, ())])
        left_out = sorted(names[~is_h & ~keep])
        for label, part, out in (
            ("CuBE (judges)", t[keep], left_out),
            ("Human rating", t[is_h], []),
        ):
            head = {"system": system, "group": label, "members": len(part)}
            row = {**head, "left_out": ", ".join(out), "questions": len(q)}
            rows.append({**row, **_mean_sd(part, num)})
    return pd.DataFrame(rows)


def _mean_sd(part: pd.DataFrame, columns: list[str]) -> dict[str, float]:
    """`<column>_mean` and `<column>_sd` (across the group's members; NaN for fewer than 2)."""
    out: dict[str, float] = {}
    for c in columns:
        out[f"{c}_mean"] = float(part[c].mean())
        out[f"{c}_sd"] = float(part[c].std(ddof=1)) if len(part) > 1 else float("nan")
    return out


TABLE5_NOTE = (
    "The judges' row averages the run's jury only: judges the validity gate excluded on the whole "
    "run (named under Left out) are not averaged, as the decision's CuBE leaves them out."
)


def retrieval_by_style(
    answers: pd.DataFrame, questions: pd.DataFrame, top_n: Mapping[str, int]
) -> pd.DataFrame:
    """R@1 and R@N per system and question style (named, colloquial, ambiguous): where retrieval
    fails. Retrieval outcomes come from `cube.method.analysis.retrieval_outcomes` (failed system
    calls left out)."""
    if "style" not in questions:
        return pd.DataFrame(columns=["system", "style", "questions", "R@1", "R@N"])
    style = questions.set_index("question_id")["style"].fillna("").replace("", "(llm or file)")
    rows = []
    for system, a in answers.groupby("system", sort=True):
        n = top_n.get(system, 8)
        ranks = retrieval_outcomes(a, n).ranks.assign(style=lambda d: d["question_id"].map(style))
        for st, g in ranks.groupby("style", sort=True):
            rows.append(
                {
                    "system": system,
                    "style": st,
                    "questions": len(g),
                    "R@1": float((g["rank"] == 1).mean()),
                    "R@N": float(((g["rank"] > 0) & (g["rank"] <= n)).mean()),
                    "top_n": n,
                }
            )
    return pd.DataFrame(rows)


def not_made_reason(retrieval_ok: Any) -> str:
    """Why a question's bounds were not made, from its rag row's `retrieval_ok`
    (`cube.systems.bounds.bound_questions`): `missed` (the system retrieved, but not the gold
    document: no estimator reads them outside the gate's sample) or `retrieval unknown` (its call
    failed or its rank is undetermined: the question is left out of every estimator)."""
    return "missed" if not pd.isna(retrieval_ok) and bool(retrieval_ok) else "retrieval unknown"


def _not_made_text(rows: pd.DataFrame) -> str:
    """`NOT_MADE` or `NOT_MADE_UNKNOWN` for a question's answers indexed by set."""
    ok = rows.loc["rag"].get("retrieval_ok", True) if "rag" in rows.index else True
    return NOT_MADE if not_made_reason(ok) == "missed" else NOT_MADE_UNKNOWN


def answers_per_set(answers: pd.DataFrame) -> pd.DataFrame:
    """Answers and failed answering calls per system and set, and `not_made`: the system's
    questions (its rag answers) without an answer in this set, i.e. the zero and full answers of
    missed questions outside the judge gate's sample, not made because no estimator reads them
    (`analysis.bounds_of_missed: sample`, `cube.systems.bounds`), and those of questions of unknown
    retrieval (no bound is made for them): not failures."""
    failed = answers["error"].fillna("").astype(str).ne("")
    out = answers.assign(failed=failed).groupby(["system", "set"], sort=True)
    out = out.agg(answers=("question_id", "size"), failed=("failed", "sum")).reset_index()
    asked = answers[answers["set"] == "rag"].groupby("system")["question_id"].nunique()
    out["not_made"] = (out["system"].map(asked).fillna(out["answers"]) - out["answers"]).clip(
        lower=0
    )
    out["not_made"] = out["not_made"].astype(int)
    return out


def bootstrap_intervals(results: Mapping[str, CubeResult]) -> pd.DataFrame:
    """Every system's bootstrap intervals (`system, judge, metric, estimate, lo, hi, n_valid`);
    a system evaluated without a bootstrap (`analysis.bootstrap: 0`) gets one row saying so
    instead of an interval."""
    frames = []
    for name, r in results.items():
        if r.bootstrap is None:
            frames.append(
                pd.DataFrame(
                    [
                        {
                            "system": name,
                            "judge": "jury",
                            "metric": "cube_score",
                            "note": "not computed: analysis.bootstrap is 0",
                        }
                    ]
                )
            )
        else:
            frames.append(r.bootstrap.assign(system=name))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out[["system", *[c for c in out.columns if c != "system"]]] if len(out) else out
