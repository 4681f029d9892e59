"""Simulated judges with known truth, for the gate's tests and benchmarks/gate_operating.py (seeded,
no I/O).

Decent judges are built from the CuBE paper's Table 2 bounds (`cube.method.paper.table2`): on a
question, a dimension's score is `round(mean + N(0, noise))` clipped to 0-10, with mean the judge's
zero-set trimmed mean for the zero answer, its full-set one for the full answer, and for the rag
answer the zero mean when the gold document was missed and `zero + rag_share * (full - zero)`
when it was retrieved (the rank does not matter: a perfect retriever gives no rank signal).
Content-blind judges ignore the answer: `random` (uniform integers 0-10), `constant` (full = 10,
zero = 0, rag = 7 whatever the answer), `length` (scores the answer's length; lengths are drawn
from one distribution for every set, the zero answers of the paper's models being as long as
the others), `question` (a score per question, the same in every set), `form` (8 when the text
ends a sentence, else 6, plus N(0, 1): every answer of a set ends one) and `position` (scores the
length of the answer's first sentence, drawn like the answer's length; issue 30). The last two
draw from their own generator, so adding them changed no other judge's scores.

`simulate_probes` gives the audit's probe scores for the same judges: per audit question the
original (full) answer, two length-matched worse probes (two of corrupted facts, sibling's answer
and another question's answer, in turn) and one not-worse probe (padded, authority line, reordered,
in turn). A decent judge scores a not-worse probe like the original and a worse probe somewhat
below it, each score with the judge's noise (issue 20: scoring every worse probe at the zero bound
made the audit look stronger than it is):
- `corrupted_facts` (one fact wrong): on the correctness-type dimensions (`CORRECTNESS`: relevance,
  completeness) a share u ~ U(0.25, 0.75) of the way from the judge's full bound down to its zero
  bound (GPT-4o-like: 1.2-3.5 points on relevance, 0.4-1.1 on completeness); specificity and quality
  unchanged. A judge cannot be expected to see one wrong fact more sharply than the absence of the
  whole document, so a judge whose bounds barely differ (Qwen-like) barely sees it either;
- `sibling_answer` (the near-duplicate item's answer): u ~ U(0.5, 1.0) of the way down on
  relevance, specificity and completeness (the right form of answer to the wrong item);
- `other_question` (an answer to another question): at the zero bound on every dimension.
Content-blind judges stay what they are: random scores at random, the set-aware constant judge gives
every probe its full-set 10, the length judge scores each probe by its length (the corrupted and
sibling answers are length-matched to the original, the padded one longer, the other question's
answer of its own length) and the question-only judge gives every answer to a question one score.

With `injected=True` each question also gets the injection probe (issue 29): `injected_<kind>`, the
twin of its first worse probe with an injection line in place of its end (the same length). A judge
scores it as a fresh draw of its twin's kind, except that a judge named in `obey` with rate r gives
it 10 on every dimension in a share r of the questions (drawn per question). Those rows come from a
random stream of their own, so the other probes' scores are those of `injected=False`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cube.method.paper import DIMENSIONS, table2

DECENT = {
    "gpt-4o": "GPT-4o",
    "deepseek": "Deepseek-V3",
    "gpt-4.1-nano": "GPT-4.1-nano",
    "qwen2.5-32b": "Qwen2.5-32B",
}
BLIND = ("random", "constant", "length", "question", "form", "position")
OWN_GENERATOR = ("form", "position")  # issue 30's judges: drawn apart, so no other score moved
# The share of texts that end a sentence, per kind (issue 30, measured on a run's answers): with
# the probes cut at exactly the original's length (`probe_form="cut"`, before issue 30) and with
# the length-matched ones at whole sentences ending as the original ends (`"sentence"`, today).
ENDS_SENTENCE = {
    "cut": {"corrupted_facts": 0.63, "sibling_answer": 0.08, "other_question": 0.07},
    "sentence": {"corrupted_facts": 1.0, "sibling_answer": 1.0, "other_question": 1.0},
}
WORSE = ("corrupted_facts", "sibling_answer", "other_question")
NOT_WORSE = ("padded", "authority", "reordered")
CORRECTNESS = ("relevance", "completeness")  # the dimensions one wrong fact lowers
# per worse probe: (dimensions it lowers, range of the share u of the way from the full to the zero
# bound)
WORSE_DROP = {
    "corrupted_facts": (CORRECTNESS, (0.25, 0.75)),
    "sibling_answer": (("relevance", "specificity", "completeness"), (0.5, 1.0)),
    "other_question": (tuple(DIMENSIONS), (1.0, 1.0)),
}


def bounds() -> dict[str, pd.DataFrame]:
    """Per paper judge: a frame indexed by set (zero, full, rag) with the four dimensions' means."""
    t2 = table2()
    return {
        name: t2[t2["judge"] == paper].set_index("set")[list(DIMENSIONS)]
        for name, paper in DECENT.items()
    }


def retrieval(n: int, recall: float, rng: np.random.Generator, top_n: int = 8) -> np.ndarray:
    """Ranks of n questions: round(recall * n) retrieved at ranks spread uniformly over 1..top_n, 0
    = missed."""
    hit = np.zeros(n, bool)
    hit[rng.permutation(n)[: int(round(recall * n))]] = True
    return np.where(hit, rng.integers(1, top_n + 1, n), 0)


def simulate(
    n: int,
    recall: float,
    seed: int,
    judges: tuple[str, ...] = (*DECENT, *BLIND),
    noise: float = 1.0,
    rag_share: float = 0.8,
    top_n: int = 8,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(answers, scores) of one system, in the shapes `cube.method.evaluation.evaluate` reads."""
    rng = np.random.default_rng(seed)
    qids = np.array([f"q{i:04d}" for i in range(n)])
    rank = retrieval(n, recall, rng, top_n)
    answers = pd.DataFrame(
        {
            "question_id": np.repeat(qids, 3),
            "system": "sys",
            "set": np.tile(["zero", "rag", "full"], n),
            "rank": np.repeat(rank, 3),
            "n_retrieved": top_n,
        }
    )
    b = bounds()
    length = rng.lognormal(0, 0.4, (n, 3))  # one length distribution for every set
    per_question = rng.integers(3, 11, n).astype(float)
    own = np.random.default_rng(seed + 104_729)  # the form and position judges' generator
    parts = []
    for judge in judges:
        for dim in DIMENSIONS:
            for s, set_ in enumerate(("zero", "rag", "full")):
                if judge in b:
                    z, f = b[judge].at["zero", dim], b[judge].at["full", dim]
                    mean = {
                        "zero": np.full(n, z),
                        "full": np.full(n, f),
                        "rag": np.where(rank > 0, z + rag_share * (f - z), z),
                    }[set_]
                    score = np.clip(np.round(mean + rng.normal(0, noise, n)), 0, 10)
                elif judge == "random":
                    score = rng.integers(0, 11, n).astype(float)
                elif judge == "constant":
                    score = np.full(n, {"zero": 0.0, "rag": 7.0, "full": 10.0}[set_])
                elif judge == "length":
                    score = np.clip(np.round(2.5 * length[:, s] + 2), 0, 10)
                elif judge == "question":
                    score = per_question.copy()
                elif judge in ("form", "position"):
                    score = _form_or_position(judge, own, n)
                else:
                    raise ValueError(f"unknown simulated judge {judge!r}")
                parts.append(
                    pd.DataFrame(
                        {
                            "question_id": qids,
                            "system": "sys",
                            "set": set_,
                            "judge": judge,
                            "dimension": dim,
                            "score": score,
                        }
                    )
                )
    scores = pd.concat(parts, ignore_index=True)
    scores["error_kind"] = ""
    return answers, scores


def simulate_probes(
    n_audit: int,
    seed: int,
    judges: tuple[str, ...] = (*DECENT, *BLIND),
    noise: float = 1.0,
    worse_at_zero: bool = False,
    injected: bool = False,
    obey: dict[str, float] | None = None,
    probe_form: str = "sentence",
) -> pd.DataFrame:
    """Probe scores (`question_id, judge, probe, expect, dimension, score`) of n_audit questions.
    `worse_at_zero`: the earlier, optimistic assumption (every worse probe at the zero bound on
    every dimension), kept to measure what it overstated (benchmarks/audit_probe_power.py).
    `probe_form`: how the length-matched probes end (`ENDS_SENTENCE`; "cut" = before issue 30),
    which only the form-only judge sees."""
    rng = np.random.default_rng(seed + 7919)
    own = np.random.default_rng(seed + 104_729)  # the form and position judges' generator
    b = bounds()
    rows = []
    length = rng.lognormal(0, 0.4, n_audit)
    for i in range(n_audit):
        q = f"q{i:04d}"
        kinds = (
            ("original", "same"),
            (WORSE[i % 3], "worse"),
            (WORSE[(i + 1) % 3], "worse"),
            (NOT_WORSE[i % 3], "not_worse"),
        )
        other_len = rng.lognormal(0, 0.4)
        form = _probe_forms(own, ENDS_SENTENCE[probe_form])
        for judge in judges:
            if (
                judge in OWN_GENERATOR
            ):  # no draw from `rng`: the other judges' draws stay as they were
                const = 0
            else:
                const = rng.integers(3, 11)
            for probe, expect in kinds:
                lowered, (u_lo, u_hi) = (
                    WORSE_DROP["other_question" if worse_at_zero and expect == "worse" else probe]
                    if expect == "worse"
                    else ((), (0.0, 0.0))
                )
                # how much worse this probe is, the same for its dimensions
                u = 0.0 if judge in OWN_GENERATOR else rng.uniform(u_lo, u_hi)
                for dim in DIMENSIONS:
                    if judge in b:
                        z, f = b[judge].at["zero", dim], b[judge].at["full", dim]
                        mean = f - u * (f - z) if dim in lowered else f
                        score = float(np.clip(np.round(mean + rng.normal(0, noise)), 0, 10))
                    elif judge == "random":
                        score = float(rng.integers(0, 11))
                    elif judge == "form":
                        ends = form["ends"][probe]
                        score = float(np.clip(np.round((8 if ends else 6) + own.normal()), 0, 10))
                    elif judge == "position":
                        score = float(np.clip(np.round(2.5 * form["first"][probe] + 2), 0, 10))
                    elif judge == "constant":
                        score = 10.0
                    elif judge == "length":
                        ln = {
                            "padded": 1.5 * length[i],
                            "other_question": other_len,
                            "sibling_answer": other_len,
                        }.get(probe, length[i])
                        score = float(np.clip(np.round(2.5 * ln + 2), 0, 10))
                    else:  # question-only: the same score for every answer to the question
                        score = float(const)
                    rows.append(
                        {
                            "question_id": q,
                            "judge": judge,
                            "probe": probe,
                            "expect": expect,
                            "dimension": dim,
                            "score": score,
                        }
                    )
    if injected:
        rows += _injected_rows(n_audit, seed, judges, noise, obey or {}, length)
    return pd.DataFrame(rows)


def _injected_rows(
    n_audit: int,
    seed: int,
    judges: tuple[str, ...],
    noise: float,
    obey: dict[str, float],
    length: np.ndarray,
) -> list[dict]:
    """The injection probe's rows (`simulate_probes(injected=True)`), from their own stream."""
    rng = np.random.default_rng(seed + 104729)
    b = bounds()
    rows = []
    for i in range(n_audit):
        twin = WORSE[i % 3]
        lowered, (u_lo, u_hi) = WORSE_DROP[twin]
        for judge in judges:
            obeys = rng.random() < obey.get(judge, 0.0)
            u = rng.uniform(u_lo, u_hi)
            const = rng.integers(3, 11)
            for dim in DIMENSIONS:
                if obeys or judge == "constant":
                    score = 10.0
                elif judge in b:
                    z, f = b[judge].at["zero", dim], b[judge].at["full", dim]
                    mean = f - u * (f - z) if dim in lowered else f
                    score = float(np.clip(np.round(mean + rng.normal(0, noise)), 0, 10))
                elif judge == "random":
                    score = float(rng.integers(0, 11))
                elif judge == "length":
                    score = float(np.clip(np.round(2.5 * length[i] + 2), 0, 10))
                else:
                    score = float(const)
                rows.append(
                    {
                        "question_id": f"q{i:04d}",
                        "judge": judge,
                        "probe": f"injected_{twin}",
                        "expect": "worse",
                        "dimension": dim,
                        "score": score,
                    }
                )
    return rows


def _form_or_position(judge: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """A set's scores of the form-only judge (every answer ends a sentence: 8 plus noise) or the
    position-only one (the first sentence's length, drawn like an answer's length)."""
    if judge == "form":
        return np.clip(np.round(8 + rng.normal(0, 1, n)), 0, 10)
    return np.clip(np.round(2.5 * rng.lognormal(0, 0.4, n) + 2), 0, 10)


def _probe_forms(rng: np.random.Generator, ends: dict[str, float]) -> dict[str, dict[str, float]]:
    """What the form-only and position-only judges see of one audit question's texts: whether each
    ends a sentence (the original and the not-worse probes do; a length-matched probe with the
    share `ends` of its kind), and its first sentence's length (the original's for the corrupted
    and authority probes, a courtesy sentence's for the padded one, another answer's for the
    sibling's, the other question's and the reordered one)."""
    first = rng.lognormal(0, 0.4)
    return {
        "ends": {
            "original": True,
            **{k: bool(rng.random() < ends[k]) for k in WORSE},
            **{k: True for k in NOT_WORSE},
        },
        "first": {
            "original": first,
            "corrupted_facts": first,
            "authority": first + 0.3,
            "padded": 0.5,
            "sibling_answer": rng.lognormal(0, 0.4),
            "other_question": rng.lognormal(0, 0.4),
            "reordered": rng.lognormal(0, 0.4),
        },
    }
