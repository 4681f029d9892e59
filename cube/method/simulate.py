"""A generative model of a CuBE run, for the simulation study (`cube simulate`, notebook 12).

The model (all scores on the 0-10 scale, rounded and clipped as a judge's integer scores are):

- **questions** i = 1..n with a difficulty u_i ~ N(0, question_sd), optionally shared in clusters
  of `cluster_size` questions (a family of near-duplicate items: the same difficulty c_k ~ N(0,
  cluster_sd) for the whole cluster), so the question bootstrap's independence assumption can be
  tested against a model that breaks it: a shared difficulty shifts the zero, rag and full answers
  alike and cancels in the bounds, so it does not;
- **families** of `family_size` near-duplicate questions (the corpus `family_id`): a member takes
  its family's retrieval outcome (the family's rank, drawn once per system) with probability
  `family_retrieval_share`, else its own, and its family's answer correctness (below) with
  probability `family_correctness_share`: what does not cancel, and why the bootstrap resamples
  families (`analysis.cluster`). Every marginal is unchanged, so the truth is too;
- **the system** retrieves the gold document with probability `recall`, at rank r in 1..top_n with
  P(r) proportional to exp(-rank_decay (r - 1)); its rag answer closes a share
  g = answer_quality - rank_effect (r - 1) + e of the zero-to-full gap (`miss_quality` + e when
  the gold document is missed), times the dimension's `retrieval_gain`; e ~ N(0, answer_sd) is the
  answer's correctness beyond what retrieval explains (0 by default);
- the **true level** of an answer: zero_level + u_i (zero set), full_level + u_i (full set),
  zero_level + u_i + g (full_level - zero_level) gain_d (rag), plus the dimension's offset;
- a **judge** scores round(leniency + scale * level + bias_rag [rag set only] + noise * e), clipped
  to [0, 10]; leniency and scale are what the zero/full bounds remove, `bias_rag` is what they do
  not (a judge that favours the system's answers);
- **human raters** score round(level + rater_noise * e) on a sample of questions (no leniency).

The truth of a judge's W and CuBE is the estimand of the estimator (the trimmed means, correlation
weights and ratios of an infinite question set), computed as the point estimate on `TRUTH_QUESTIONS`
questions drawn from the model (its own Monte Carlo error is about 0.1 point); the truth of R@k is
`recall`. Pure: numpy and pandas only; the estimator itself is `cube.method.evaluation.evaluate`
and `cube.method.compare.compare_pair`, run by `cube.method.simulate_study`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cube.config.sections import PAPER_DIMENSIONS
from cube.method import analysis as A
from cube.method.bootstrap import Prepared, cube_from_counts

DIMENSIONS = PAPER_DIMENSIONS  # the dimension files with `paper:` (cube.config.dimension_files)
TRUTH_QUESTIONS = 200_000


@dataclass(frozen=True)
class JudgeModel:
    """One simulated judge: score = round(leniency + scale * level + bias_rag [rag] + noise * e)."""

    name: str
    leniency: float = 0.0
    scale: float = 1.0
    noise: float = 1.0
    bias_rag: float = 0.0


@dataclass(frozen=True)
class SystemModel:
    """One simulated system under test (see the module docstring)."""

    name: str = "sys"
    recall: float = (
        0.8041  # the paper's R@k; off the k/n lattice of 40, 100 and 300 questions (see truth)
    )
    top_n: int = 8
    rank_decay: float = 0.3
    answer_quality: float = 0.8
    rank_effect: float = 0.04
    miss_quality: float = 0.15


@dataclass(frozen=True)
class RunModel:
    """A whole simulated run: judges, the system, the questions and the human raters."""

    judges: tuple[JudgeModel, ...] = (
        JudgeModel("judge-a", 0.0, 1.0, 1.0),
        JudgeModel("judge-b", 1.5, 0.8, 1.3),
    )
    system: SystemModel = field(default_factory=SystemModel)
    dimensions: tuple[str, ...] = DIMENSIONS
    dimension_offset: tuple[float, ...] = (0.5, 0.2, -0.4, -0.6)
    retrieval_gain: tuple[float, ...] = (1.0, 1.0, 0.85, 0.6)
    zero_level: float = 3.0
    full_level: float = 8.0
    question_sd: float = 0.8
    cluster_size: int = 1
    cluster_sd: float = 0.0
    family_size: int = 1
    family_retrieval_share: float = 0.0
    family_correctness_share: float = 0.0
    answer_sd: float = 0.0
    raters: int = 2
    rater_noise: float = 1.0

    def __post_init__(self) -> None:
        problems = self._judge_problems() + self._dimension_problems()
        if not 0 <= self.system.recall <= 1:
            problems.append(f"system.recall: a share in [0, 1], got {self.system.recall}")
        if self.system.top_n < 1 or self.cluster_size < 1 or self.family_size < 1:
            problems.append("system.top_n, cluster_size and family_size: at least 1")
        for key in ("family_retrieval_share", "family_correctness_share"):
            if not 0 <= getattr(self, key) <= 1:
                problems.append(f"{key}: a share in [0, 1], got {getattr(self, key)}")
        if self.answer_sd < 0:
            problems.append(f"answer_sd: at least 0, got {self.answer_sd}")
        if problems:
            raise ValueError("simulation model: " + "; ".join(problems))

    def _judge_problems(self) -> list[str]:
        """At least one judge, with distinct names."""
        problems = []
        if not self.judges:
            problems.append("judges: at least one judge is needed")
        if len({j.name for j in self.judges}) != len(self.judges):
            problems.append(f"judges: names must be distinct, got {[j.name for j in self.judges]}")
        return problems

    def _dimension_problems(self) -> list[str]:
        """One offset and one retrieval gain per dimension."""
        return [
            f"{key}: one value per dimension ({len(self.dimensions)}), got "
            f"{len(getattr(self, key))}"
            for key in ("dimension_offset", "retrieval_gain")
            if len(getattr(self, key)) != len(self.dimensions)
        ]

    def with_system(self, **changes: float | str) -> RunModel:
        return dataclasses.replace(self, system=dataclasses.replace(self.system, **changes))


@dataclass(frozen=True)
class Questions:
    """The question side of a draw (shared by two systems compared on the same questions)."""

    difficulty: np.ndarray  # (n,) u_i, clusters included
    noise_seed: int
    family: np.ndarray | None = None  # (n,) family code 0..G-1; None: every question its own
    shares_rank: np.ndarray | None = None  # (n,) bool: takes its family's retrieval outcome
    shares_correctness: np.ndarray | None = None  # (n,) bool: takes its family's correctness

    def families(self) -> np.ndarray:
        return np.arange(len(self.difficulty)) if self.family is None else self.family


def draw_questions(model: RunModel, n: int, rng: np.random.Generator) -> Questions:
    """The questions of one run; the families' draws come after the independent model's, so a
    model without families draws exactly what it did before they existed."""
    n_clusters = -(-n // model.cluster_size)
    cluster = np.repeat(rng.normal(0.0, model.cluster_sd, n_clusters), model.cluster_size)[:n]
    q = Questions(rng.normal(0.0, model.question_sd, n) + cluster, int(rng.integers(2**31)))
    if model.family_size == 1:
        return q
    family = np.arange(n) // model.family_size
    return dataclasses.replace(
        q,
        family=family,
        shares_rank=rng.random(n) < model.family_retrieval_share,
        shares_correctness=rng.random(n) < model.family_correctness_share,
    )


def draw_system(
    model: RunModel, system: SystemModel, q: Questions, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One system's rank of the gold document and answer correctness e on the questions `q`, each
    member of a family taking its family's where `q` says so (drawn after the independent ones:
    without families and with `answer_sd` 0 the draws are the independent model's)."""
    n = len(q.difficulty)
    rank = draw_ranks(system, n, rng)
    fam = q.families()
    n_fam = int(fam.max()) + 1 if n else 0
    if q.shares_rank is not None and q.shares_rank.any():
        rank = np.where(q.shares_rank, draw_ranks(system, n_fam, rng)[fam], rank)
    correctness = np.zeros(n)
    if model.answer_sd > 0:
        correctness = rng.normal(0.0, model.answer_sd, n)
        if q.shares_correctness is not None and q.shares_correctness.any():
            shared = rng.normal(0.0, model.answer_sd, n_fam)[fam]
            correctness = np.where(q.shares_correctness, shared, correctness)
    return rank, correctness


def draw_ranks(system: SystemModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """1-based rank of the gold document per question, 0 when not retrieved."""
    p = np.exp(-system.rank_decay * np.arange(system.top_n))
    r = rng.choice(np.arange(1, system.top_n + 1), size=n, p=p / p.sum())
    return np.where(rng.random(n) < system.recall, r, 0)


def true_levels(
    model: RunModel,
    system: SystemModel,
    q: Questions,
    rank: np.ndarray,
    correctness: np.ndarray | None = None,
) -> np.ndarray:
    """The true level of every answer, (sets zero/rag/full, dimensions, n), before any judge."""
    share = np.where(
        rank > 0,
        system.answer_quality - system.rank_effect * (np.maximum(rank, 1) - 1),
        system.miss_quality,
    )
    if correctness is not None:
        share = share + correctness
    gap = model.full_level - model.zero_level
    off = np.asarray(model.dimension_offset)[:, None]
    gain = np.asarray(model.retrieval_gain)[:, None]
    zero = model.zero_level + q.difficulty[None, :] + off
    rag = zero + share[None, :] * gap * gain
    full = model.full_level + q.difficulty[None, :] + off
    by_set = {"zero": zero, "rag": rag, "full": full}
    return np.stack([by_set[s] for s in A.SETS])


def judge_scores(model: RunModel, levels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every judge's integer scores, (judges, sets, dimensions, n)."""
    rag = A.SETS.index("rag")
    out = np.empty((len(model.judges), *levels.shape))
    for j, jm in enumerate(model.judges):
        s = jm.leniency + jm.scale * levels + jm.noise * rng.standard_normal(levels.shape)
        s[rag] += jm.bias_rag
        out[j] = np.clip(np.round(s), 0, 10)
    return out


@dataclass
class SimulatedRun:
    """One draw of the model as the tables a real run has (`answers`, `scores`, `human`)
    and arrays."""

    answers: pd.DataFrame
    scores: pd.DataFrame
    human: pd.DataFrame
    rank: np.ndarray
    levels: np.ndarray
    families: dict[str, int] = field(default_factory=dict)  # question id -> family code


def simulate_run(
    model: RunModel,
    n: int,
    seed: int,
    *,
    questions: Questions | None = None,
    human_questions: int = 0,
) -> SimulatedRun:
    """One simulated run of `n` questions: the answers and scores tables `evaluate` reads (and, with
    `human_questions` > 0, ratings by `model.raters` raters of that many questions in all three
    sets, judge `human:<rater>`). Pass the same `questions` to draw a second system on the
    same questions."""
    rng = np.random.default_rng(seed)
    q = questions or draw_questions(model, n, rng)
    system = model.system
    rank, correctness = draw_system(model, system, q, rng)
    levels = true_levels(model, system, q, rank, correctness)
    scores = judge_scores(model, levels, rng)
    qids = np.array([f"q{i:05d}" for i in range(n)])
    answers = pd.DataFrame(
        {
            "question_id": np.tile(qids, 3),
            "doc_id": np.tile(qids, 3),
            "system": system.name,
            "set": np.repeat(A.SETS, n),
            "rank": np.tile(rank, 3),
            "n_retrieved": system.top_n,
            "retrieval_ok": True,
        }
    )
    table = _long(scores, [j.name for j in model.judges], model.dimensions, qids, system.name)
    human = _long(
        np.empty((0, 3, len(model.dimensions), n)), [], model.dimensions, qids, system.name
    )
    if human_questions > 0:
        pick = np.sort(rng.choice(n, size=min(human_questions, n), replace=False))
        noisy = levels[None, :, :, pick] + model.rater_noise * rng.standard_normal(
            (model.raters, *levels[..., pick].shape)
        )
        human = _long(
            np.clip(np.round(noisy), 0, 10),
            [f"human:rater-{k + 1}" for k in range(model.raters)],
            model.dimensions,
            qids[pick],
            system.name,
        )
    families = dict(zip(qids.tolist(), q.families().tolist(), strict=True))
    return SimulatedRun(answers, table, human, rank, levels, families)


def _long(
    scores: np.ndarray, judges: list[str], dims: tuple[str, ...], qids: np.ndarray, system: str
) -> pd.DataFrame:
    J, S, D, n = scores.shape
    idx = np.indices((J, S, D, n)).reshape(4, -1)
    return pd.DataFrame(
        {
            "question_id": qids[idx[3]],
            "system": system,
            "set": np.asarray(A.SETS)[idx[1]],
            "judge": np.asarray(judges, dtype=object)[idx[0]] if J else np.array([], dtype=object),
            "dimension": np.asarray(dims)[idx[2]],
            "score": scores.ravel(),
            "sample": 0,
        }
    )


def prepared_run(
    model: RunModel,
    n: int,
    seed: int,
    *,
    by_family: bool = True,
    questions: Questions | None = None,
) -> Prepared:
    """One simulated run as the estimator's arrays (`cube.method.bootstrap.Prepared`, what
    `evaluate` bootstraps, every judge in the jury), its resampling units the model's families
    (`by_family`) or the questions: the fast path of coverage tests and benchmarks. Pass the same
    `questions` to draw a second system on the same questions (each with its own `seed`)."""
    rng = np.random.default_rng(seed)
    q = questions or draw_questions(model, n, rng)
    rank, correctness = draw_system(model, model.system, q, rng)
    scores = judge_scores(model, true_levels(model, model.system, q, rank, correctness), rng)
    rank_score = np.where(rank > 0, model.system.top_n + 2 - rank, 0).astype(float)
    return Prepared(
        [j.name for j in model.judges],
        list(model.dimensions),
        rank_score,
        rank > 0,
        scores,
        0.1,
        "retrieved",
        "rank_correlation",
        None,
        True,
        units=q.families() if by_family else None,
    )


@functools.lru_cache(
    maxsize=64
)  # the model is frozen (hashable); the study asks for the same truth again
def truth(
    model: RunModel,
    *,
    n: int = TRUTH_QUESTIONS,
    seed: int = 12345,
    proportion: float = 0.1,
    weights: str = "rank_correlation",
) -> pd.DataFrame:
    """The estimand of each judge's W and CuBE and of R@k: the point estimate of the estimator's own
    arithmetic (`cube.method.bootstrap.cube_from_counts`, which reproduces `evaluate`) on `n`
    questions drawn from the model. Columns `judge, weighted_score, cube_score, recall_at_k`; R@k is
    the model's. Cached: do not modify the returned frame."""
    rng = np.random.default_rng(seed)
    q = draw_questions(model, n, rng)
    rank, correctness = draw_system(model, model.system, q, rng)
    scores = judge_scores(model, true_levels(model, model.system, q, rank, correctness), rng)
    top = model.system.top_n
    rank_score = np.where(rank > 0, top + 2 - rank, 0).astype(float)
    p = Prepared(
        [j.name for j in model.judges],
        list(model.dimensions),
        rank_score,
        rank > 0,
        scores,
        proportion,
        "retrieved",
        weights,
        None,
        True,
    )
    res = cube_from_counts(p, np.ones((1, n)))
    W = res["weighted_score"][:, 0]
    return pd.DataFrame(
        {
            "judge": p.judges,
            "weighted_score": W,
            "cube_score": W * model.system.recall,
            "recall_at_k": model.system.recall,
        }
    )
