"""Lexical overlap metrics (BLEU, ROUGE) beside judge scores: the paper's section 5.7.

BLEU is sacrebleu's sentence BLEU (its defaults: exponential smoothing, effective order),
reported on a 0-1 scale like the paper's 0.0711. ROUGE-1/2/L are rouge-score F-measures.
The reference of an answer is its gold document (the paper's choice) or a reference-answer
column of the question set.

Chinese has no spaces, and both libraries' default tokenizers would see one "word" per
sentence (rouge-score even drops every non-ASCII character, so identical Chinese texts score
0). The `tokenizer` parameter therefore chooses the segmentation, and is a column of the
output:

- `"jieba"` (default): jieba words, joined with spaces for BLEU (`tokenize="none"`), the
  same word list for ROUGE;
- `"zh"`: sacrebleu's `zh` tokenizer for BLEU, single characters for ROUGE;
- `"char"`: single characters (whitespace dropped) for both;
- `"13a"`: English: sacrebleu's `13a` for BLEU, rouge-score's default tokenizer for ROUGE.

A missing answer or reference (NaN) gives NaN metrics: an unscored row, not a zero.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import sacrebleu
from rouge_score import rouge_scorer, tokenizers
from scipy import stats

from cube.agreement import HUMAN, judge_means, with_human_consensus
from cube.schema import require_columns
from cube.text import segment

TOKENIZERS = ("jieba", "zh", "char", "13a")
METRICS = ("bleu", "rouge1", "rouge2", "rougeL")
METRIC_LABELS = {"bleu": "BLEU", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}


def _chars(text: str) -> list[str]:
    return [c for c in text if not c.isspace()]


class _ListTokenizer(tokenizers.Tokenizer):
    """rouge-score tokenizer object around a text -> tokens function."""

    def __init__(self, kind: str):
        self.kind = kind

    def tokenize(self, text: str) -> list[str]:
        return list(segment(text)) if self.kind == "jieba" else _chars(text)


def _check_tokenizer(tokenizer: str) -> None:
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer: expected one of {list(TOKENIZERS)}, got {tokenizer!r}")


def _scorer(tokenizer: str) -> rouge_scorer.RougeScorer:
    token_obj = None if tokenizer == "13a" else _ListTokenizer(tokenizer)
    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=token_obj)


def _bleu(hypothesis: str, reference: str, tokenizer: str) -> float:
    if tokenizer == "jieba":
        hyp, ref, tok = " ".join(segment(hypothesis)), " ".join(segment(reference)), "none"
    elif tokenizer == "char":
        hyp, ref, tok = " ".join(_chars(hypothesis)), " ".join(_chars(reference)), "none"
    else:
        hyp, ref, tok = hypothesis, reference, tokenizer
    # min: sacrebleu returns 100.00000000000004 for identical texts (float rounding)
    return min(sacrebleu.sentence_bleu(hyp, [ref], tokenize=tok).score / 100.0, 1.0)


def text_scores(hypothesis: str, reference: str, tokenizer: str = "jieba") -> dict[str, float]:
    """BLEU (0-1) and ROUGE-1/2/L F-measures of one text against one reference."""
    _check_tokenizer(tokenizer)
    return _text_scores(hypothesis, reference, tokenizer, _scorer(tokenizer))


def _text_scores(hypothesis: object, reference: object, tokenizer: str, scorer) -> dict[str, float]:
    if not isinstance(hypothesis, str) or not isinstance(reference, str):
        return dict.fromkeys(METRICS, float("nan"))
    rouge = scorer.score(reference, hypothesis)  # rouge-score's order: (target, prediction)
    return {
        "bleu": _bleu(hypothesis, reference, tokenizer),
        **{k: float(rouge[k].fmeasure) for k in ("rouge1", "rouge2", "rougeL")},
    }


def lexical_scores(
    answers: pd.DataFrame,
    corpus: pd.DataFrame,
    *,
    tokenizer: str = "jieba",
    reference: str = "gold_document",
    questions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """BLEU and ROUGE of every answer against its reference.

    Args:
        answers: answers table.
        corpus: corpus table (`doc_id`, `text`).
        tokenizer: `"jieba"`, `"zh"`, `"char"` or `"13a"` (see module docstring).
        reference: `"gold_document"` (corpus `text` of the answer's `doc_id`), or the name
            of a column of `questions` holding a reference answer.
        questions: question set; needed when `reference` is a question column.

    Returns:
        Columns `question_id, system, set, bleu, rouge1, rouge2, rougeL, tokenizer`.
    """
    _check_tokenizer(tokenizer)
    require_columns(answers, ("question_id", "doc_id", "system", "set", "answer"), "answers")
    if reference == "gold_document":
        require_columns(corpus, ("doc_id", "text"), "corpus")
        lookup = dict(zip(corpus["doc_id"].astype(str), corpus["text"], strict=False))
        keys = answers["doc_id"].astype(str)
        source = "corpus doc_id"
    else:
        if questions is None:
            raise ValueError(f"reference={reference!r} is a question column: pass `questions`")
        require_columns(questions, ("question_id", reference), "questions")
        lookup = dict(zip(questions["question_id"].astype(str), questions[reference], strict=False))
        keys = answers["question_id"].astype(str)
        source = "questions question_id"
    unknown = sorted(set(keys) - set(lookup))
    if unknown:
        raise ValueError(f"{source}: no row for {unknown[:10]} referenced by the answers")
    scorer = _scorer(tokenizer)
    rows = [
        _text_scores(a, lookup[k], tokenizer, scorer) for a, k in zip(answers["answer"], keys, strict=True)
    ]
    out = pd.DataFrame(rows, columns=list(METRICS), dtype=float)
    out.insert(0, "set", answers["set"].astype(str).to_numpy())
    out.insert(0, "system", answers["system"].astype(str).to_numpy())
    out.insert(0, "question_id", answers["question_id"].astype(str).to_numpy())
    out["tokenizer"] = tokenizer
    return out


def _judge_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per-judge means per unit (samples averaged) and the human consensus as `"human"`."""
    return with_human_consensus(judge_means(scores))


def _corr(x: np.ndarray, y: np.ndarray, func) -> float:
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")  # undefined for a constant side; scipy would warn
    return float(func(x, y)[0])


def lexical_correlations(
    lexical: pd.DataFrame, scores: pd.DataFrame, *, dimensions: list[str] | None = None
) -> pd.DataFrame:
    """Correlation of each lexical metric with each judge's scores (and the humans'), per dimension.

    Pairs are matched on (question_id, system, set); NaN pairs are dropped.

    Returns:
        Columns `metric, judge, dimension, n, pearson, spearman`.
    """
    require_columns(lexical, ("question_id", "system", "set", *METRICS), "lexical")
    means = _judge_table(scores)
    if dimensions is not None:
        means = means[means["dimension"].isin(dimensions)]
    lex = lexical.loc[:, ["question_id", "system", "set", *METRICS]].astype(
        {"question_id": str, "system": str, "set": str}
    )
    merged = means.merge(lex, on=["question_id", "system", "set"])
    rows = []
    for (judge, dim), g in merged.groupby(["judge", "dimension"], sort=True):
        for metric in METRICS:
            ok = g["score"].notna() & g[metric].notna()
            x, y = g.loc[ok, metric].to_numpy(float), g.loc[ok, "score"].to_numpy(float)
            rows.append(
                {
                    "metric": metric,
                    "judge": judge,
                    "dimension": dim,
                    "n": int(ok.sum()),
                    "pearson": _corr(x, y, stats.pearsonr),
                    "spearman": _corr(x, y, stats.spearmanr),
                }
            )
    return pd.DataFrame(rows, columns=["metric", "judge", "dimension", "n", "pearson", "spearman"])


def _select(df: pd.DataFrame, question_id: str, system: str, set_name: str) -> pd.DataFrame:
    return df[
        (df["question_id"].astype(str) == str(question_id))
        & (df["system"].astype(str) == str(system))
        & (df["set"].astype(str) == str(set_name))
    ]


def table6_example(
    lexical: pd.DataFrame,
    scores: pd.DataFrame,
    question_id: str,
    system: str,
    set: str,  # noqa: A002 - the paper's and the tables' name
    dimension: str = "completeness",
) -> pd.DataFrame:
    """The paper's Table 6 for one answer: every judge's score (human first), then BLEU/ROUGE.

    Returns:
        Columns `name, kind, value`; `kind` is `human`, `judge` or `lexical`. Judge scores
        are on their 0-10 scale (samples averaged), lexical metrics on 0-1.
    """
    means = _judge_table(scores)
    means = _select(means[means["dimension"] == dimension], question_id, system, set)
    lex = _select(lexical, question_id, system, set)
    if means.empty and lex.empty:
        raise KeyError(
            f"no score and no lexical row for ({question_id!r}, {system!r}, {set!r}, {dimension!r})"
        )
    means = means[~means["judge"].str.startswith(HUMAN + ":")]  # the consensus stands for the raters
    means = means.assign(_order=(means["judge"] != HUMAN).astype(int)).sort_values(["_order", "judge"])
    rows = [
        {"name": j, "kind": "human" if j == HUMAN else "judge", "value": s}
        for j, s in zip(means["judge"], means["score"], strict=True)
    ]
    if not lex.empty:
        first = lex.iloc[0]
        rows += [{"name": METRIC_LABELS[m], "kind": "lexical", "value": float(first[m])} for m in METRICS]
    return pd.DataFrame(rows, columns=["name", "kind", "value"])


def table7_criteria(
    human_scores: pd.DataFrame,
    question_id: str,
    system: str,
    set: str,  # noqa: A002 - the paper's and the tables' name
    dimension: str = "completeness",
    lang: str = "en",
    *,
    judge: str = HUMAN,
) -> pd.DataFrame:
    """The paper's Table 7: a human rating's criterion points with their wording, and the total.

    Reads the `detail` JSON written by `cube.human.import_ratings` (`criteria` c1..c5). With
    `judge="human"` and only per-rater rows, the criterion points are averaged over raters.

    Returns:
        Columns `criterion, wording, points`; the last row is `total` ("Overall Score").
    """
    from cube.judges import dimension_criteria

    rows = _select(human_scores[human_scores["dimension"] == dimension], question_id, system, set)
    picked = rows[rows["judge"] == judge]
    if picked.empty and judge == HUMAN:
        picked = rows[rows["judge"].astype(str).str.startswith(HUMAN + ":")]
    if picked.empty:
        raise KeyError(f"no {judge!r} rating for ({question_id!r}, {system!r}, {set!r}, {dimension!r})")
    details = [json.loads(d) if isinstance(d, str) and d else {} for d in picked["detail"]]
    wording = dimension_criteria(dimension, lang)
    keys = [f"c{i + 1}" for i in range(len(wording))]
    points = []
    for k in keys:
        values = [d.get("criteria", {}).get(k) for d in details]
        values = [float(v) for v in values if v is not None]
        points.append(float(np.mean(values)) if values else math.nan)
    total = float(pd.to_numeric(picked["score"], errors="coerce").mean())
    overall = {"en": "Overall Score", "zh": "总分"}.get(lang, "Overall Score")
    return pd.DataFrame(
        {"criterion": [*keys, "total"], "wording": [*wording, overall], "points": [*points, total]}
    )


def summary(lexical: pd.DataFrame) -> pd.DataFrame:
    """Mean BLEU and ROUGE per system and set (the zero, rag and full answers side by side)."""
    out = lexical.groupby(["system", "set", "tokenizer"], sort=True)[list(METRICS)].mean().reset_index()
    out["answers"] = lexical.groupby(["system", "set", "tokenizer"], sort=True).size().to_numpy()
    return out


def reading(correlations: pd.DataFrame, offline_judges: list[str] | None = None) -> str:
    """What the correlations of BLEU/ROUGE with the judges say, stated from the data."""
    if correlations.empty or correlations["spearman"].isna().all():
        return "The correlations are undefined for this run (too few or constant scores)."
    mean = correlations.groupby("metric")["spearman"].mean()
    best, worst = mean.idxmax(), mean.idxmin()
    text = (f"Mean Spearman correlation with the judges' scores: {', '.join(f'{METRIC_LABELS.get(m, m)} {v:.2f}' for m, v in mean.items())}"
            f" (highest {METRIC_LABELS.get(best, best)}, lowest {METRIC_LABELS.get(worst, worst)}). ")
    offline = sorted(set(offline_judges or []) & set(correlations["judge"]))
    if offline:
        text += (f"Caution: {', '.join(offline)} are offline rubric judges that themselves score surface overlap with "
                 "the source, so agreement with BLEU/ROUGE is built in here; the paper's point (lexical overlap misses "
                 "what judges and humans see) can only be tested with LLM judges or human ratings.")
    return text
