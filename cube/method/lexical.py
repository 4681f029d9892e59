"""Lexical overlap metrics (BLEU, ROUGE) beside judge scores: the paper's section 5.7.

BLEU is sacrebleu's sentence BLEU (its defaults: exponential smoothing, effective order),
reported on a 0-1 scale like the paper's 0.0711. ROUGE-1/2/L are rouge-score F-measures.
The reference of an answer is its gold document (the paper's choice) or a reference-answer
column of the question set.

Both metrics count *words*, so every text goes through the same steps before either metric
sees it (what sacrebleu with `tokenize="none"` and rouge-score with a whitespace tokenizer would
see, so their metric definitions are unchanged). A text's 1- to 4-gram counts are made once and
serve both: sacrebleu's sentence statistics (matched and total n-grams of each order, scored by
its own `BLEU._compute_score_from_stats`: smoothing, effective order and brevity penalty are
sacrebleu's) and rouge-score's ROUGE-1/2 (the unigram and bigram matches with its
`_score_ngrams` formula and `scoring.fmeasure`); ROUGE-L's longest common subsequence is
rapidfuzz's compiled `LCSseq` on the same words, with rouge-score's precision/recall/F formula.
Each gives the libraries' value exactly (tests/method/test_fast_paths.py), and rouge-score's
scorer module (which imports nltk, ~1 s) is not loaded. Each reference is segmented once per
call, however many answers share it:

1. Unicode NFKC normalisation (full-width letters, digits and punctuation become their
   ordinary forms);
2. segmentation by the `tokenizer` parameter (a column of the output):

   - `"jieba"` (default): jieba words, for BLEU and ROUGE;
   - `"zh"`: sacrebleu's `zh` tokenizer for BLEU, single characters for ROUGE;
   - `"char"`: single characters for both;
   - `"13a"`: English: sacrebleu's `13a` for BLEU and ROUGE (rouge-score's own tokenizer
     drops every non-ASCII character; 13a keeps accented words). It cannot segment Chinese
     (a whole clause becomes one token), so `lang: zh` with `tokenizer: 13a` is refused when
     the params are validated (`cube.config.params.LEXICAL_INCOMPATIBLE`);

3. punctuation and symbols (Unicode categories P* and S*, e.g. "：", "，", "。", "%", "$")
   become spaces, so "state-of-the-art" gives four words and a token of punctuation only
   disappears (two sentences sharing only "，" and "。" no longer overlap);
4. case folding (`str.casefold`; Chinese is unaffected).

An answer or reference that is missing, or has no word left after these steps (empty, only
punctuation), gives NaN metrics, never 0, and the `excluded` column says why; `summary`
counts them.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import sacrebleu
from rapidfuzz.distance import LCSseq
from rouge_score.scoring import fmeasure
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh
from scipy import stats

from cube.config.schema import HUMAN, require_columns
from cube.config.sections import LEXICAL_INCOMPATIBLE
from cube.method.agreement import POOLED, judge_means, with_human_consensus

TOKENIZERS = ("jieba", "zh", "char", "13a")
METRICS = ("bleu", "rouge1", "rouge2", "rougeL")
METRIC_LABELS = {"bleu": "BLEU", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}


def _chars(text: str) -> list[str]:
    return [c for c in text if not c.isspace()]


_SACRE = {"zh": TokenizerZh(), "13a": Tokenizer13a()}
_SEGMENT: dict[str, dict[str, Callable[[str], list[str]]]] = {
    "bleu": {
        "jieba": None,  # the caller's segmenter (`segment=`: jieba, `cube.kb.text.segment`)
        "char": _chars,
        "zh": lambda t: _SACRE["zh"](t).split(),
        "13a": lambda t: _SACRE["13a"](t).split(),
    },
    "rouge": {
        "jieba": None,
        "char": _chars,
        "zh": _chars,
        "13a": lambda t: _SACRE["13a"](t).split(),
    },
}


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


class _Words(NamedTuple):
    """How a tokenizer cuts a text for each metric."""

    tokenizer: str
    bleu: Callable[[str], Sequence[str]]
    rouge: Callable[[str], Sequence[str]]


def _words_of(tokenizer: str, segment: Callable[[str], Sequence[str]] | None) -> _Words:
    """The cutting functions of `tokenizer`; `"jieba"` cuts with the caller's `segment` (this module
    computes and reads no dictionary: the run passes `cube.kb.text.segment`)."""
    _check_tokenizer(tokenizer)
    if tokenizer == "jieba":
        if segment is None:
            raise ValueError(
                "tokenizer 'jieba' needs the segmenter: pass segment=cube.kb.text.segment "
                "(or choose tokenizer 'zh', 'char' or '13a')"
            )
        return _Words(tokenizer, segment, segment)
    return _Words(tokenizer, _SEGMENT["bleu"][tokenizer], _SEGMENT["rouge"][tokenizer])  # type: ignore[arg-type]


def words(
    text: str,
    tokenizer: str = "jieba",
    metric: str = "rouge",
    segment: Callable[[str], Sequence[str]] | None = None,
) -> list[str]:
    """The words BLEU (`metric="bleu"`) or ROUGE (`"rouge"`) count in `text` (module steps 1-4);
    `segment`: the word segmenter of the `"jieba"` tokenizer."""
    return _cut(text, getattr(_words_of(tokenizer, segment), metric))


def _cut(text: str, cut: Callable[[str], Sequence[str]]) -> list[str]:
    # each token's words, chained in C (a loop of `extend` calls was ~1/3 of the cutting)
    return list(chain.from_iterable(map(_clean, cut(unicodedata.normalize("NFKC", text)))))


@lru_cache(maxsize=200_000)
def _clean(token: str) -> tuple[str, ...]:
    """A token's words: marks (punctuation, symbols) become spaces, casefolded (tokens repeat
    a lot)."""
    return tuple("".join(" " if _is_mark(c) else c for c in token).casefold().split())


def _check_tokenizer(tokenizer: str) -> None:
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer: expected one of {list(TOKENIZERS)}, got {tokenizer!r}")


def _rouge_l(
    target: list[str], prediction: list[str], target_ids: tuple[dict, list[int]] | None = None
) -> float:
    """rouge-score's ROUGE-L F-measure (`rouge_scorer._score_lcs`), the LCS length from rapidfuzz.

    Tokens are mapped to integers first, so equal tokens (and only those) compare equal: the
    target's as `_token_ids` gives them (pass `target_ids` to map a reference once for all its
    answers), a prediction's word absent from the target to -1, which matches nothing in it (the
    LCS only compares a prediction's words with the target's)."""
    if not target or not prediction:
        return 0.0
    ids, codes = target_ids or _token_ids(target)
    lcs = LCSseq.similarity(codes, [ids.get(t, -1) for t in prediction])
    precision = lcs / len(prediction)
    recall = lcs / len(target)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _token_ids(words: list[str]) -> tuple[dict[str, int], list[int]]:
    """Each distinct word's integer (0, 1, ... in order of appearance) and the words as those."""
    ids: dict[str, int] = {}
    return ids, [ids.setdefault(t, len(ids)) for t in words]


_SAME_WORDS = ("jieba", "char", "13a")  # BLEU and ROUGE see the same words with these tokenizers


def _both_words(text: str, cut: _Words) -> tuple[list[str], list[str]]:
    """(BLEU words, ROUGE words) of a text, segmenting it once when the two agree."""
    rouge = _cut(text, cut.rouge)
    return (rouge if cut.tokenizer in _SAME_WORDS else _cut(text, cut.bleu)), rouge


def _bleu(hyp: list[str], ref: list[str]) -> float:
    # min: sacrebleu returns 100.00000000000004 for identical texts (float rounding)
    return min(
        sacrebleu.sentence_bleu(" ".join(hyp), [" ".join(ref)], tokenize="none").score / 100.0, 1.0
    )


@lru_cache(maxsize=1)
def _bleu_metric() -> sacrebleu.BLEU:
    """The metric `sacrebleu.sentence_bleu(..., tokenize="none")` builds on every call."""
    return sacrebleu.BLEU(
        lowercase=False,
        tokenize="none",
        force=False,
        smooth_method="exp",
        smooth_value=None,
        effective_order=True,
    )


_ORDERS = 4  # sacrebleu's BLEU max n-gram order (`BLEU.max_ngram_order`)


def _ngrams(words: list[str]) -> tuple[Counter, ...]:
    """The 1- to 4-gram counts of a text's words, one Counter per order, keys n-tuples of
    consecutive words: what sacrebleu's `extract_all_word_ngrams` counts in one Counter (its
    tokens are these words: they hold no space), and rouge-score's `_create_ngrams(words, n)` for
    n = 1, 2 (equal Counters, tested); counted from `zip` in C, not from slices."""
    return tuple(
        Counter(zip(*(words[i:] for i in range(n)), strict=False)) for n in range(1, _ORDERS + 1)
    )


def _overlap(a: Counter, b: Counter) -> int:
    """Sum over the n-grams of both of the smaller count: sacrebleu's matched n-grams of one
    order and rouge-score's `_score_ngrams` intersection count alike."""
    if len(b) < len(a):
        a, b = b, a
    return sum([min(c, b[g]) for g, c in a.items() if g in b])


def _bleu_counted(hyp: _Text, ref: _Text, matched: list[int]) -> float:
    """sacrebleu's sentence BLEU of `hyp` against `ref` from their n-gram counts (`_ngrams`) and
    the matches of each order: `BLEU._compute_segment_statistics`'s list (lengths, matches,
    totals; a single reference is the closest length) scored by its own
    `_compute_score_from_stats`, so smoothing, effective order and brevity are sacrebleu's."""
    n_hyp, n_ref = len(hyp.bleu), len(ref.bleu)
    totals = [max(n_hyp - n, 0) for n in range(_ORDERS)]
    stats = [n_hyp, n_ref, *matched, *totals]
    # min: sacrebleu returns 100.00000000000004 for identical texts (float rounding)
    return min(_bleu_metric()._compute_score_from_stats(stats).score / 100.0, 1.0)


class _Text(NamedTuple):
    """A text's words for each metric and their n-gram counts (BLEU's 1-4, ROUGE's 1-2), the
    same Counters when both metrics see the same words."""

    bleu: list[str]
    rouge: list[str]
    bleu_grams: tuple[Counter, ...]
    rouge_grams: tuple[Counter, ...]


def _text(text: str, cut: _Words) -> _Text:
    bleu, rouge = _both_words(text, cut)
    grams = _ngrams(rouge)
    return _Text(bleu, rouge, grams if bleu is rouge else _ngrams(bleu), grams[:2])


def text_scores(
    hypothesis: str,
    reference: str,
    tokenizer: str = "jieba",
    segment: Callable[[str], Sequence[str]] | None = None,
) -> dict[str, float]:
    """BLEU (0-1) and ROUGE-1/2/L F-measures of one text against one reference (NaN if either
    has no word); `segment`: the word segmenter of the `"jieba"` tokenizer."""
    cut = _words_of(tokenizer, segment)
    return _text_scores(hypothesis, reference, cut)[0]


def _text_scores(
    hypothesis: object,
    reference: object,
    cut: _Words,
    cache: dict[str, tuple] | None = None,
    answers: dict[str, _Text | None] | None = None,
) -> tuple[dict[str, float], str]:
    """The metrics and, when they are NaN, why (`""` when scored). `cache` keeps the references'
    words and n-grams between calls (a gold document is the reference of all its answers);
    `answers` those of the answers it holds as keys (cut on first use: an answer given to
    several references, such as a refusal)."""
    nan = dict.fromkeys(METRICS, float("nan"))
    for name, text in (("answer", hypothesis), ("reference", reference)):
        if not isinstance(text, str):
            return nan, f"missing {name}"
    ref, ref_ids = _reference(reference, cut, cache)
    # an answer that is its reference (a quoted document) is not cut again
    if hypothesis == reference:
        hyp = ref
    elif answers is not None and hypothesis in answers:
        if (known := answers[hypothesis]) is None:
            known = answers[hypothesis] = _text(hypothesis, cut)
        hyp = known
    else:
        hyp = _text(hypothesis, cut)
    for name, text in (("answer", hyp), ("reference", ref)):
        if not text.rouge or not text.bleu:
            return nan, f"empty {name}"
    bleu_matched, rouge_matched = _matches(hyp, ref)
    return {
        "bleu": _bleu_counted(hyp, ref, bleu_matched),
        "rouge1": _rouge_n(rouge_matched[0], len(ref.rouge), len(hyp.rouge)),
        "rouge2": _rouge_n(rouge_matched[1], len(ref.rouge) - 1, len(hyp.rouge) - 1),
        "rougeL": _rouge_l(ref.rouge, hyp.rouge, ref_ids),
    }, ""


def _reference(
    reference: str, cut: _Words, cache: dict[str, tuple] | None
) -> tuple[_Text, tuple[dict[str, int], list[int]]]:
    """A reference's words and n-grams, and its words' integers for ROUGE-L, from `cache` when
    there (kept there when it is given)."""
    if cache is not None and (known := cache.get(reference)) is not None:
        return known
    ref = (text := _text(reference, cut), _token_ids(text.rouge))
    if cache is not None:
        cache[reference] = ref
    return ref


def _matches(hyp: _Text, ref: _Text) -> tuple[list[int], list[int]]:
    """The n-grams the two texts share, per order: BLEU's 1-4 and ROUGE's 1-2 (BLEU's first two
    when both metrics see the same words: counted once)."""
    bleu = [_overlap(h, r) for h, r in zip(hyp.bleu_grams, ref.bleu_grams, strict=True)]
    if hyp.rouge_grams[0] is hyp.bleu_grams[0] and ref.rouge_grams[0] is ref.bleu_grams[0]:
        return bleu, bleu[:2]
    return bleu, [_overlap(h, r) for h, r in zip(hyp.rouge_grams, ref.rouge_grams, strict=True)]


def _rouge_n(matched: int, target: int, prediction: int) -> float:
    """rouge-score's ROUGE-N F-measure (`rouge_scorer._score_ngrams(target, prediction)`) from
    its three counts: the n-grams both texts share (`_overlap`), the target's and the
    prediction's n-grams (a text of k words has k - n + 1); its own `fmeasure`. Which text is the
    target does not matter: swapping them swaps precision and recall, and 2 p r / (p + r) is the
    same float either way (tested)."""
    precision = matched / max(prediction, 1)
    recall = matched / max(target, 1)
    return float(fmeasure(precision, recall))


def lexical_scores(
    answers: pd.DataFrame,
    corpus: pd.DataFrame,
    *,
    tokenizer: str = "jieba",
    reference: str = "gold_document",
    questions: pd.DataFrame | None = None,
    lang: str | None = None,
    segment: Callable[[str], Sequence[str]] | None = None,
) -> pd.DataFrame:
    """BLEU and ROUGE of every answer against its reference.

    Args:
        answers: answers table.
        corpus: corpus table (`doc_id`, `text`).
        tokenizer: `"jieba"`, `"zh"`, `"char"` or `"13a"` (see module docstring).
        reference: `"gold_document"` (corpus `text` of the answer's `doc_id`), or the name
            of a column of `questions` holding a reference answer.
        questions: question set; needed when `reference` is a question column.
        lang: the texts' language (`"zh"`, `"en"`); when given, a tokenizer that cannot segment
            it is refused (`LEXICAL_INCOMPATIBLE`, the same rule as params validation).
        segment: the word segmenter of the `"jieba"` tokenizer (`cube.kb.text.segment`; this
            pure module cuts no Chinese itself).

    Returns:
        Columns `question_id, system, set, bleu, rouge1, rouge2, rougeL, tokenizer, excluded`;
        `excluded` is `""` for a scored answer, else why its metrics are NaN (`missing answer`,
        `empty answer`, `missing reference`, `empty reference`).
    """
    cut = _words_of(tokenizer, segment)
    if (lang, tokenizer) in LEXICAL_INCOMPATIBLE:
        raise ValueError(
            f"lexical.tokenizer: {tokenizer!r} cannot be used with lang: {lang!r}: "
            f"{LEXICAL_INCOMPATIBLE[lang, tokenizer]}"
        )
    require_columns(answers, ("question_id", "doc_id", "system", "set", "answer"), "answers")
    lookup, keys = _references(answers, corpus, reference, questions)
    # The answers of one reference together: its words and n-grams are computed once and dropped
    # before the next reference (a cache of every gold document's n-grams was ~0.5 GB at the
    # paper's scale).
    texts, refs = answers["answer"].tolist(), keys.tolist()
    by_reference: dict[str, list[int]] = {}
    for i, k in enumerate(refs):
        by_reference.setdefault(k, []).append(i)
    scored: list[tuple[dict[str, float], str]] = [({}, "")] * len(refs)
    # an answer given under several references (a refusal: 4,175 of the paper's 14,227) is cut
    # once, its words kept until the end (the others are dropped with their reference)
    shared = _shared_answers(texts, refs)
    for k, rows in by_reference.items():
        for i, result in _reference_scores(rows, texts, lookup[k], cut, shared):
            scored[i] = result
    out = pd.DataFrame([m for m, _ in scored], columns=list(METRICS), dtype=float)
    out.insert(0, "set", answers["set"].astype(str).to_numpy())
    out.insert(0, "system", answers["system"].astype(str).to_numpy())
    out.insert(0, "question_id", answers["question_id"].astype(str).to_numpy())
    out["tokenizer"] = tokenizer
    out["excluded"] = [why for _, why in scored]
    return out


def _shared_answers(texts: list[Any], refs: list[str]) -> dict[str, _Text | None]:
    """The answer texts given under more than one reference, each mapped to None (its words,
    `_text`, once cut)."""
    refs_of = Counter(t for t, _ in set(zip(texts, refs, strict=True)) if isinstance(t, str))
    return {t: None for t, n in refs_of.items() if n > 1}


def _references(
    answers: pd.DataFrame, corpus: pd.DataFrame, reference: str, questions: pd.DataFrame | None
) -> tuple[dict[str, Any], pd.Series]:
    """Reference text by key, and each answer's key: its gold document's `doc_id`, or its
    `question_id` in the questions' `reference` column; a key without a row raises."""
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
    return lookup, keys


def _reference_scores(
    rows: list[int],
    texts: list[Any],
    reference: Any,
    cut: Any,
    shared: dict[str, _Text | None] | None = None,
) -> list[tuple[int, tuple[dict[str, float], str]]]:
    """(row, (metrics, why excluded)) of the answers of one reference; the reference's words are
    cut once, and the same answer to it is scored once (a rag answer that quotes the gold
    document as the full answer does; ~16 % of the answers at the paper's scale). `shared`: the
    words of answers given under several references (`_text_scores`'s `answers`)."""
    cache: dict[str, tuple] = {}
    done: dict[str, tuple[dict[str, float], str]] = {}
    out = []
    for i in rows:
        text = texts[i]
        if not isinstance(text, str):  # a missing answer: NaN with its reason
            out.append((i, _text_scores(text, reference, cut, cache, shared)))
        elif text in done:
            out.append((i, done[text]))
        else:
            done[text] = _text_scores(text, reference, cut, cache, shared)
            out.append((i, done[text]))
    return out


def _judge_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per-judge means per unit (samples averaged) and the human consensus as `"human"`."""
    return with_human_consensus(judge_means(scores))


def _corr(x: np.ndarray, y: np.ndarray, func) -> float:
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")  # undefined for a constant side; scipy would warn
    return float(func(x, y)[0])


def lexical_correlations(
    lexical: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    dimensions: list[str] | None = None,
    sets: Sequence[str] | str = ("rag",),
) -> pd.DataFrame:
    """Correlation of each lexical metric with each judge's scores (and the humans'), per answer
    set and dimension.

    Pairs are matched on (question_id, system, set); NaN pairs are dropped. Sets are not pooled
    unless asked (`"pooled"`), for the reason `cube.method.agreement` gives: zero-set answers are
    short and low-scored, full-set ones long and high-scored, so pooling them manufactures a
    correlation between overlap and score that no set shows.

    Returns:
        Columns `metric, judge, set, dimension, n, pearson, spearman`.
    """
    require_columns(lexical, ("question_id", "system", "set", *METRICS), "lexical")
    lex = lexical.loc[:, ["question_id", "system", "set", *METRICS]].astype(
        {"question_id": str, "system": str, "set": str}
    )
    labels = _checked_sets(sets, lex, scores)
    score_sets = scores["set"].astype(str)
    if POOLED not in labels:  # a unit's mean is its own rows': the other sets' rows are not read
        scores = scores[score_sets.isin(labels).to_numpy()]
    means = _judge_table(scores)
    if dimensions is not None:
        means = means[means["dimension"].isin(dimensions)]
    merged = means.merge(lex, on=["question_id", "system", "set"])
    rows = []
    for label in labels:
        part = merged if label == POOLED else merged[merged["set"] == label]
        for (judge, dim), g in part.groupby(["judge", "dimension"], sort=True):
            head = {"judge": judge, "set": label, "dimension": dim}
            rows += [{"metric": m, **head, **_correlation(g, m)} for m in METRICS]
    return pd.DataFrame(
        rows, columns=["metric", "judge", "set", "dimension", "n", "pearson", "spearman"]
    )


def _checked_sets(sets: Sequence[str] | str, lex: pd.DataFrame, scores: pd.DataFrame) -> list[str]:
    """The set labels asked for, each a set of the tables or `pooled`; else an error naming them."""
    labels = [sets] if isinstance(sets, str) else list(sets)
    present = sorted(set(lex["set"]) | set(scores["set"].astype(str).unique()))
    unknown = [x for x in labels if x != POOLED and x not in present]
    if not labels or unknown:
        raise ValueError(f"sets: expected one or more of {present + [POOLED]}; got {labels!r}")
    return labels


def _correlation(g: pd.DataFrame, metric: str) -> dict[str, Any]:
    """n, Pearson and Spearman of a metric with the score over the pairs where both are known."""
    ok = g["score"].notna() & g[metric].notna()
    x, y = g.loc[ok, metric].to_numpy(float), g.loc[ok, "score"].to_numpy(float)
    return {
        "n": int(ok.sum()),
        "pearson": _corr(x, y, stats.pearsonr),
        "spearman": _corr(x, y, stats.spearmanr),
    }


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
    # the answer's rows only: a unit's mean (and human consensus) is made of its own rows
    means = _judge_table(_select(scores, question_id, system, set))
    means = means[means["dimension"] == dimension]
    lex = _select(lexical, question_id, system, set)
    if means.empty and lex.empty:
        raise KeyError(
            f"no score and no lexical row for ({question_id!r}, {system!r}, {set!r}, {dimension!r})"
        )
    means = means[
        ~means["judge"].str.startswith(HUMAN + ":")
    ]  # the consensus stands for the raters
    means = means.assign(_order=(means["judge"] != HUMAN).astype(int)).sort_values(
        ["_order", "judge"]
    )
    rows = [
        {"name": j, "kind": "human" if j == HUMAN else "judge", "value": s}
        for j, s in zip(means["judge"], means["score"], strict=True)
    ]
    if not lex.empty:
        first = lex.iloc[0]
        rows += [
            {"name": METRIC_LABELS[m], "kind": "lexical", "value": float(first[m])} for m in METRICS
        ]
    return pd.DataFrame(rows, columns=["name", "kind", "value"])


def summary(lexical: pd.DataFrame) -> pd.DataFrame:
    """Mean BLEU and ROUGE per system and set (the zero, rag and full answers side by side), over
    the scored answers; `answers` counts all, `excluded` those with NaN metrics
    (see `excluded_note`)."""
    keys = ["system", "set", "tokenizer"]
    out = lexical.groupby(keys, sort=True)[list(METRICS)].mean().reset_index()
    grouped = lexical.groupby(keys, sort=True)
    out["answers"] = grouped.size().to_numpy()
    excluded = (
        lexical["excluded"].fillna("").ne("") if "excluded" in lexical else lexical["bleu"].isna()
    )
    out["excluded"] = (
        excluded.groupby([lexical[k] for k in keys], sort=True).sum().to_numpy().astype(int)
    )
    return out


def excluded_note(lexical: pd.DataFrame) -> str:
    """One sentence counting the answers without BLEU/ROUGE, by cause."""
    reasons = (
        lexical["excluded"].fillna("")
        if "excluded" in lexical
        else pd.Series("", index=lexical.index)
    )
    counts = reasons[reasons != ""].value_counts()
    if counts.empty:
        return f"All {len(lexical)} answers have BLEU/ROUGE."
    causes = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))
    return (
        f"{int(counts.sum())} of {len(lexical)} answers have no BLEU/ROUGE (NaN, left out of the "
        f"means and correlations): {causes}. Punctuation and symbols are not words, so a text of "
        "only those is empty."
    )


def reading(correlations: pd.DataFrame, offline_judges: list[str] | None = None) -> str:
    """What the correlations of BLEU/ROUGE with the judges say (on the first set of the table),
    stated from the data."""
    where = ""
    if "set" in correlations and len(correlations):
        first = str(correlations["set"].iloc[0])
        correlations = correlations[correlations["set"] == first]
        where = " on all sets pooled" if first == POOLED else f" on the {first} set"
    if correlations.empty or correlations["spearman"].isna().all():
        return f"The correlations are undefined for this run{where} (too few or constant scores)."
    mean = correlations.groupby("metric")["spearman"].mean()
    best, worst = mean.idxmax(), mean.idxmin()
    text = (
        f"Mean Spearman correlation with the judges' scores{where}: "
        f"{', '.join(f'{METRIC_LABELS.get(m, m)} {v:.2f}' for m, v in mean.items())}"
        f" (highest {METRIC_LABELS.get(best, best)}, lowest {METRIC_LABELS.get(worst, worst)}). "
    )
    offline = sorted(set(offline_judges or []) & set(correlations["judge"]))
    if offline:
        text += (
            f"Caution: {', '.join(offline)} are offline rubric judges that themselves score "
            "surface overlap with the source, so agreement with BLEU/ROUGE is built in here; the "
            "paper's point (lexical overlap misses what judges and humans see) can only be tested "
            "with LLM judges or human ratings."
        )
    return text
