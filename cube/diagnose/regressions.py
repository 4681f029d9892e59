"""Per-question regressions and improvements between two sides A and B (issue 13 item 3).

For every question both sides answered: the retrieval change on the rag set (gold document
`lost` / `found` / `rank up` / `rank down` / `same`, with both ranks) and each judge's rag-set
score change (the mean over the dimensions it scored, B − A), plus the jury's (the mean of the
jury judges' changes). A **regression** is a question whose gold document was lost or whose jury
score fell by more than the judges' noise allows; an **improvement** the reverse (found, or a rise
beyond the noise). Counting every fall was counting noise: the same system drawn twice on the same
100 questions gave 47 regressions and 49 improvements.

- **The judges' noise** (`judge_noise`): on each side, the jury judges' per-question scores (the
  mean over dimensions and samples) are fitted by question + judge (two-way, additive); the
  residual variance s² is what a judge's score varies by around the other judges' on the same
  answer, so a jury mean of J judges varies by s² / J and the change B − A by
  sd = √(s²_A / J + s²_B / J). With one jury judge, the spread between its samples of the same
  answer (`samples` > 1) stands in; with neither, the noise is unknown and only retrieval lost /
  found counts. A score change counts beyond |Δ| > z · sd, z the two-sided normal quantile at the
  comparison's confidence (1.96 at 95 %): a question whose answer and retrieval did not change
  crosses it by noise alone in about 2.5 % of cases each way.
- **Expected under no difference** (`expected_counts`): if A and B do not differ, each question's
  two sides are exchangeable (the permutation test's null), so a counted question is a regression
  or an improvement with probability 1/2: each count is about (regressions + improvements) / 2,
  with the binomial range at the same confidence. Counts inside the range are what chance gives.

They are ranked by the size of the score change (retrieval changes break ties), and each comes
with its details: question, gold item,
both answers and a readable line diff (`difflib`), both retrieved lists, and every judge's
scores per dimension with the raw reply and any failure reason.
"""

from __future__ import annotations

import difflib
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd
from scipy import stats

from cube.config.schema import SchemaError, known_retrieval, parse_doc_list, require_columns

_NEEDED = ("question_id", "set", "rank")


def check_answers(answers: pd.DataFrame, table: str = "answers") -> None:
    """Raise `SchemaError` naming `table` (the file) and every row whose `rank` is not an integer
    >= 0 (0 = gold not retrieved), with its question and set; missing columns are named first."""
    require_columns(answers, _NEEDED, table)
    ranks = pd.to_numeric(answers["rank"], errors="coerce")
    bad = ranks.isna() | (ranks < 0) | (ranks != ranks.round())
    if bad.any():
        rows = [
            f"row {i} (question_id {q}, set {s}): {v!r}"
            for i, q, s, v in zip(
                answers.index[bad],
                answers.loc[bad, "question_id"],
                answers.loc[bad, "set"],
                answers.loc[bad, "rank"],
                strict=True,
            )
        ]
        raise SchemaError(
            f"{table}: column 'rank' must be an integer >= 0 (0 = gold document not retrieved); "
            f"{len(rows)} bad row(s): " + "; ".join(rows)
        )


def _rag(answers: pd.DataFrame) -> pd.DataFrame:
    rag = answers[answers["set"] == "rag"].drop_duplicates("question_id").set_index("question_id")
    if "retrieval_ok" in rag:
        rag = rag[known_retrieval(rag)]
    return rag


def _judge_means(scores: pd.DataFrame) -> pd.DataFrame:
    s = scores[scores["set"] == "rag"].assign(
        score=lambda d: pd.to_numeric(d["score"], errors="coerce")
    )
    return s.groupby(["question_id", "judge"])["score"].mean().unstack("judge")


def _retrieval_change(ra: int, rb: int) -> str:
    """lost, found, rank up, rank down or same, from the gold's ranks on A and B (0: missed)."""
    if bool(ra) != bool(rb):
        return "lost" if ra else "found"
    if ra and rb != ra:  # retrieved on both sides, at another rank
        return "rank up" if rb < ra else "rank down"
    return "same"


def question_changes(
    a_answers: pd.DataFrame,
    a_scores: pd.DataFrame,
    b_answers: pd.DataFrame,
    b_scores: pd.DataFrame,
    jury_judges: list[str],
    *,
    tables: tuple[str, str] = ("answers (A)", "answers (B)"),
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per common question: `question_id, doc_id, rank_a, rank_b, retrieval_change`,
    `score_a:<judge>`, `score_b:<judge>`, `delta:<judge>` per judge, `jury_a, jury_b, delta`, and
    the judges' noise: `noise_sd` and `threshold` (z · noise_sd at `confidence`), the same on
    every row (see the module docstring).
    `tables` name the two answers tables (their files) in a `SchemaError` (`check_answers`)."""
    check_answers(a_answers, tables[0])
    check_answers(b_answers, tables[1])
    ra, rb = _rag(a_answers), _rag(b_answers)
    qids = sorted(set(ra.index) & set(rb.index), key=str)
    out = _retrieval_columns(ra, rb, qids)
    jury = _score_columns(out, qids, (a_scores, b_scores), jury_judges)
    sd = judge_noise(a_scores, b_scores, jury, qids)
    out["noise_sd"] = sd
    out["threshold"] = float(stats.norm.ppf(0.5 + confidence / 2)) * sd
    return out


def _retrieval_columns(ra: pd.DataFrame, rb: pd.DataFrame, qids: list[Any]) -> pd.DataFrame:
    """`question_id, doc_id, rank_a, rank_b, retrieval_change` of the common questions."""
    out = pd.DataFrame({"question_id": qids})
    out["doc_id"] = [ra.at[q, "doc_id"] if "doc_id" in ra else None for q in qids]
    out["rank_a"] = [int(ra.at[q, "rank"]) for q in qids]
    out["rank_b"] = [int(rb.at[q, "rank"]) for q in qids]
    out["retrieval_change"] = [
        _retrieval_change(x, y) for x, y in zip(out["rank_a"], out["rank_b"], strict=True)
    ]
    return out


def _score_columns(
    out: pd.DataFrame,
    qids: list[Any],
    scores: tuple[pd.DataFrame, pd.DataFrame],
    jury_judges: list[str],
) -> list[str]:
    """Add `score_a:<judge>`, `score_b:<judge>`, `delta:<judge>` per judge scoring both sides and
    `jury_a, jury_b, delta` (the jury's means; NaN without a jury) to `out` (A's and B's
    `scores`); the jury's judges that scored both sides."""
    ma, mb = (_judge_means(s).reindex(qids) for s in scores)
    judges = sorted(set(ma.columns) & set(mb.columns), key=str)
    for j in judges:
        out[f"score_a:{j}"] = ma[j].to_numpy()
        out[f"score_b:{j}"] = mb[j].to_numpy()
        out[f"delta:{j}"] = out[f"score_b:{j}"] - out[f"score_a:{j}"]
    jury = [j for j in jury_judges if j in judges]
    with np.errstate(all="ignore"):
        out["jury_a"] = out[[f"score_a:{j}" for j in jury]].mean(axis=1) if jury else np.nan
        out["jury_b"] = out[[f"score_b:{j}" for j in jury]].mean(axis=1) if jury else np.nan
    out["delta"] = out["jury_b"] - out["jury_a"]
    return jury


def _residual_variance(m: pd.DataFrame) -> tuple[float, int]:
    """(s², df) of the question + judge additive fit of a questions x judges matrix (complete
    rows only); (NaN, 0) with fewer than 2 judges or 2 questions."""
    m = m.dropna()
    q, j = m.shape
    if q < 2 or j < 2:
        return float("nan"), 0
    r = m.sub(m.mean(axis=1), axis=0).sub(m.mean(axis=0), axis=1) + float(m.to_numpy().mean())
    df = (q - 1) * (j - 1)
    return float((r.to_numpy() ** 2).sum() / df), df


def _sample_variance(scores: pd.DataFrame, judge: str) -> float:
    """One judge's noise on its per-question mean from the spread between its samples of the
    same answer and dimension: the mean within-sample variance / (dimensions x samples)."""
    s = scores[(scores["set"] == "rag") & (scores["judge"] == judge)]
    if "sample" not in s or s["sample"].nunique() < 2:
        return float("nan")
    score = pd.to_numeric(s["score"], errors="coerce")
    g = s.assign(score=score).groupby(["question_id", "dimension"])["score"]
    within = g.var(ddof=1).dropna()
    if within.empty:
        return float("nan")
    return float(within.mean() / (s["dimension"].nunique() * s["sample"].nunique()))


def judge_noise(
    a_scores: pd.DataFrame, b_scores: pd.DataFrame, jury: list[str], qids: list[Any]
) -> float:
    """The standard deviation of the jury's per-question change B − A that the judges' noise
    alone gives (see the module docstring); NaN when it cannot be estimated."""
    if not jury:
        return float("nan")
    var = []
    for scores in (a_scores, b_scores):
        m = _judge_means(scores).reindex(qids)
        m = m[[j for j in jury if j in m.columns]]
        s2, _ = _residual_variance(m)
        if s2 != s2 and len(jury) == 1:
            s2 = _sample_variance(scores, jury[0])
        var.append(s2 / len(jury))
    return float(np.sqrt(sum(var)))


def _counted(changes: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(regression, improvement) per question: retrieval lost / found, or a jury score change
    beyond `threshold` (a table written before there was one: any change)."""
    d = changes["delta"]
    t = changes["threshold"] if "threshold" in changes else pd.Series(0.0, index=changes.index)
    known = t.notna()
    down = known & (d < -t.fillna(0.0))
    up = known & (d > t.fillna(0.0))
    return (
        down | (changes["retrieval_change"] == "lost"),
        up | (changes["retrieval_change"] == "found"),
    )


class ExpectedCounts(TypedDict):
    """The counts of a comparison and what they would be if A and B did not differ
    (`expected_counts`)."""

    regressions: int
    improvements: int
    expected: float
    range: list[int]
    confidence: float
    noise_sd: float | None
    threshold: float | None
    questions: int


class QuestionContext(TypedDict):
    """The question's text and its gold document's item name, each when its table is given
    (None when the question or document is not in it)."""

    question: NotRequired[str | None]
    gold_item: NotRequired[str | None]


class BothAnswers(TypedDict):
    """Both sides' rag answers, their diff and their retrieved lists."""

    answer_a: str
    answer_b: str
    diff: list[dict[str, str]]
    retrieved_a: list[str]
    retrieved_b: list[str]


class SideJudgment(TypedDict):
    """One judgment of one side's rag answer (`score` None when not a number)."""

    side: str
    judge: str
    dimension: str
    score: float | None
    raw: str
    error: str


def expected_counts(changes: pd.DataFrame, confidence: float = 0.95) -> ExpectedCounts:
    """What the counts would be if A and B did not differ: each about (regressions +
    improvements) / 2, within the binomial range at `confidence` (a question counted both ways
    counts in both). Also the noise's sd and threshold and how many questions were compared."""
    reg, imp = _counted(changes)
    both = int((reg & imp).sum())
    one = int((reg ^ imp).sum())
    a = 1 - confidence
    lo, hi = (both + int(stats.binom.ppf(q, one, 0.5)) for q in (a / 2, 1 - a / 2))
    sd = float(changes["noise_sd"].iloc[0]) if "noise_sd" in changes and len(changes) else np.nan
    t = float(changes["threshold"].iloc[0]) if "threshold" in changes and len(changes) else np.nan
    return {
        "regressions": int(reg.sum()),
        "improvements": int(imp.sum()),
        "expected": both + one / 2,
        "range": [lo, hi] if one else [both, both],
        "confidence": confidence,
        "noise_sd": None if sd != sd else sd,
        "threshold": None if t != t else t,
        "questions": int(len(changes)),
    }


_TIE = {"lost": 0, "rank down": 1, "same": 2, "rank up": 3, "found": 4}


def ranked(changes: pd.DataFrame, kind: str = "regressions", k: int | None = 20) -> pd.DataFrame:
    """The largest regressions (gold lost, or the jury score fell beyond the judges' noise) or
    improvements (the reverse), largest first."""
    reg, imp = _counted(changes)
    tie = changes["retrieval_change"].astype(object).map(_TIE).astype(float) * 1e-6
    if kind == "regressions":
        sel, key = reg, changes["delta"].fillna(0.0) + tie
    elif kind == "improvements":
        sel, key = imp, -(changes["delta"].fillna(0.0) + tie)
    else:
        raise ValueError(f"kind must be 'regressions' or 'improvements', got {kind!r}")
    out = (
        changes[sel]
        .assign(_k=key[sel])
        .sort_values(["_k", "question_id"], kind="stable")
        .drop(columns="_k")
    )
    return out.head(k) if k is not None else out


def answer_diff(a: str, b: str) -> list[dict[str, str]]:
    """A readable diff of two answers: `[{op: ' '|'-'|'+', text}]` by line (by sentence when an
    answer is one line, on the Chinese and Latin full stops)."""

    def split(s: str) -> list[str]:
        s = "" if s is None else str(s)
        lines = s.splitlines()
        if len(lines) <= 1:
            lines = [p for p in _sentences(s) if p]
        return lines

    out = []
    for line in difflib.ndiff(split(a), split(b)):
        if line[:1] in (" ", "-", "+"):
            out.append({"op": line[0], "text": line[2:]})
    return out


def _sentences(s: str) -> list[str]:
    parts, cur = [], ""
    for ch in s:
        cur += ch
        if ch in "。！？!?；;" or (ch == "." and len(cur) > 1):
            parts.append(cur)
            cur = ""
    return [*parts, cur] if cur else parts


def details(
    row: pd.Series,
    a_answers: pd.DataFrame,
    a_scores: pd.DataFrame,
    b_answers: pd.DataFrame,
    b_scores: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    corpus: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Everything a reader needs to judge one question's change (plain data; escape
    when rendering): the row's values, the question and its gold item, both answers with their
    diff and retrieved lists, and every judgment of both sides."""
    q = row["question_id"]
    return {
        **_plain_values(row),
        **_question_context(q, row, questions, corpus),
        **_both_answers(q, _rag(a_answers), _rag(b_answers)),
        "judgments": [
            *_judgments("a", a_scores[a_scores["question_id"] == q]),
            *_judgments("b", b_scores[b_scores["question_id"] == q]),
        ],
    }


def _plain_values(row: pd.Series) -> dict[str, Any]:
    """The row's scalars as plain Python values, NaN as None (lists and dicts left out)."""
    info = {
        k: (None if isinstance(v, float) and np.isnan(v) else v)
        for k, v in row.items()
        if not isinstance(v, (list, dict))
    }
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in info.items()}


def _question_context(
    q: Any, row: pd.Series, questions: pd.DataFrame | None, corpus: pd.DataFrame | None
) -> QuestionContext:
    """`question` (its text) and `gold_item` (the gold document's item name), when the tables are
    given (None when the question or document is not in them)."""
    out: QuestionContext = {}
    if questions is not None and "question" in questions:
        m = questions[questions["question_id"] == q]
        out["question"] = str(m["question"].iloc[0]) if len(m) else None
    if corpus is not None and "doc_id" in corpus:
        m = corpus[corpus["doc_id"] == row.get("doc_id")]
        out["gold_item"] = str(m["item_name"].iloc[0]) if len(m) and "item_name" in m else None
    return out


def _both_answers(q: Any, ra: pd.DataFrame, rb: pd.DataFrame) -> BothAnswers:
    """`answer_a`, `answer_b`, their `diff` and the retrieved lists `retrieved_a`, `retrieved_b`."""
    answer_a, answer_b = (str(r.at[q, "answer"]) if "answer" in r else "" for r in (ra, rb))
    retrieved_a, retrieved_b = (
        parse_doc_list(r.at[q, "retrieved_doc_ids"]) if "retrieved_doc_ids" in r else []
        for r in (ra, rb)
    )
    return {
        "answer_a": answer_a,
        "answer_b": answer_b,
        "diff": answer_diff(answer_a, answer_b),
        "retrieved_a": retrieved_a,
        "retrieved_b": retrieved_b,
    }


def _judgments(side: str, scores: pd.DataFrame) -> list[SideJudgment]:
    """One side's rag judgments of the question, by judge and dimension: the score (None when it
    is not a number), the raw reply and the error."""
    out: list[SideJudgment] = []
    rag = scores[scores["set"] == "rag"]
    for _, r in rag.sort_values(["judge", "dimension"]).iterrows():
        score = pd.to_numeric(r["score"], errors="coerce")
        out.append(
            {
                "side": side,
                "judge": str(r["judge"]),
                "dimension": str(r["dimension"]),
                "score": None if pd.isna(score) else float(score),
                "raw": "" if pd.isna(r.get("raw")) else str(r.get("raw", "")),
                "error": "" if pd.isna(r.get("error")) else str(r.get("error", "")),
            }
        )
    return out
