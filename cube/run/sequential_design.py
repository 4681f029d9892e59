"""The sequential driver's design (issue 40, item 2): the order questions are judged in, where R@k
comes from, and the boundary a look is drawn with (`analysis.sequential.order`, `recall`,
`boundary`). The driver itself is `cube.run.sequential`.

**Order.** `spread` (the default) is systematic sampling within each family
(`cube.method.group_sequential.spread_order`): each family gets a seeded random start in [0, 1)
and its questions a seeded random order j, question j of a family of size s the key (j + start)
/ s, and the questions are judged in increasing key, in batches of exactly `batch` questions.
Every question is in a look's sample with the same probability (the share of the set judged),
whatever its family's size, so a look's W estimates the set's W without a family-size bias; and
each family has its share of questions judged +-1, so its questions are spread over the run: with
families of five sharing their answers' correctness, five questions of one family tell little more
than one, the first fifth of the order holds one question of every family, and the 20-family guard
of a look (`cube.method.sequential.MIN_GROUPS`) is met after about 20 questions instead of 100.
(A round robin, the r-th question of every family in round r, spreads as well but over-represents
small families at every look before its last round: a set of singletons scoring 90 and families of
five scoring 60, mean 65, read 75 at 60 questions.) `families` is the order before it: whole
families per batch, families in a seeded random order.

The jackknife over families stays valid with partial families: its unit is still the family (a
left-out group leaves out every judged question of its families), families are independent of one
another, and which of a family's questions are judged by a given look is decided by the seeded
order alone, never by a score; so each family's contribution (its judged questions' scores and its
retrieval) is an independent unit, not identically distributed when some families have one more
question judged than others, which the delete-a-group jackknife of a smooth statistic allows (its
variance estimate is that of independent, non-identical units, as the sandwich's).

**R@k from every question** (`recall: all`). A builtin system's retrieval is bm25s over the corpus:
it costs no LLM call, so every question is retrieved before the first batch and R@k is known on
the whole set; an imported system's file holds its retrieval, and a user kind may say its own
(the kind registry's `free_outcomes`, `cube.systems.known_outcomes`; a question of unknown
retrieval, an imported error row, is left out of R@k as in the analysis). A look's CuBE is then
W of the questions judged x R@k of the whole set, and its jackknife leaves a group's judged
questions out of W and all its questions out of R@k (R@k's own sampling error, over the set,
stays in the SE).
An http, python or RAGFlow system returns its retrieval only with its answer: retrieving every
question first would ask the system every question (its whole-set calls, and an LLM-backed
system's LLM calls) before the first look, so for those R@k comes from the questions judged, and
their order is the same `spread`.

**Boundary.** `spending` (the default) is the Lan-DeMets Pocock-type alpha-spending boundary of
`cube.method.group_sequential` over the looks at which the run may stop (from the effective
minimum on), with the set's size as the horizon: the set is known and the driver ends at its last
question, so the anytime-valid sequence's price for sample sizes past it (+-3.0-3.1 SE against
+-2.5-2.7) buys nothing. The looks are every batch end from the effective minimum on, which is
raised after the first batch from the judge calls per question, never from a score: the schedule
does not depend on the estimates, so both spending and Pocock's constant (computed for the planned
looks with the raised minimum) stay valid. Spending is the default because it depends only on the
looks made so far (a run may end early at the set's end, or a batch be short); Pocock's constant
needs the whole schedule in advance. Every look from the minimum on spends its share of alpha,
also one a guard holds (`cube.method.sequential.not_yet`: too few families or retrieved questions)
and one shared by a system already settled: one boundary for every system, drawn before any
system's guards are read. That spends more than needed (conservative), never less. `pocock` is the
constant for the planned looks; `anytime` the sequence, for a run that may be extended past its
question set (it then needs no horizon).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.method.group_sequential import critical_value, spread_order

ORDERS = ("spread", "families")
RECALLS = ("all", "judged")


def design_of(params: Params) -> dict[str, str]:
    """`order`, `recall` and `boundary` of `analysis.sequential` (its defaults without it)."""
    from cube.config.sections import SequentialParams

    sp = params.analysis.sequential or SequentialParams()
    return {"order": sp.order, "recall": sp.recall, "boundary": sp.boundary}


def design_problems(params: Params) -> list[str]:
    """Every problem of the design's keys, each naming its key and what was expected."""
    sp = params.analysis.sequential
    if sp is None:
        return []
    out = []
    for key, allowed in (("order", ORDERS), ("recall", RECALLS)):  # boundary: rule_problems
        value = getattr(sp, key)
        if value not in allowed:
            out.append(
                f"analysis.sequential.{key} is {value!r}, expected one of {', '.join(allowed)}"
            )
    return out


def batches(units: dict[str, str], size: int, seed: int, order: str = "spread") -> list[list[str]]:
    """The question ids in batches (`order`: module docstring). `spread`: systematic sampling
    within each family (`group_sequential.spread_order`), batches of exactly `size` (the last may
    be shorter); `families`: the units in a seeded random order, each unit's questions together
    (sorted), a batch closed as soon as it holds at least `size` questions."""
    rng = np.random.default_rng(seed)
    if order == "spread":
        qids = sorted(units)
        at = spread_order(np.array([units[q] for q in qids]), rng)
        flat = [qids[i] for i in at]
        return [flat[i : i + size] for i in range(0, len(flat), size)]
    members: dict[str, list[str]] = {}
    for q in sorted(units):
        members.setdefault(units[q], []).append(q)
    names = sorted(members)
    ranked = [names[i] for i in rng.permutation(len(names))]
    return _whole_families(members, ranked, size)


def _whole_families(members: dict[str, list[str]], ranked: list[str], size: int) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for u in ranked:
        if len(out[-1]) >= size:
            out.append([])
        out[-1].extend(members[u])
    return [b for b in out if b]


def planned_looks(order: list[list[str]], minimum: int) -> list[int]:
    """The sizes of the looks at which the run may stop: every batch end from `minimum` on (the
    last at the set's end)."""
    ends = np.cumsum([len(b) for b in order]).tolist()
    return [int(m) for m in ends if m >= minimum] or ends[-1:]


def look_critical(
    boundary: str, looks: list[int], planned: list[int], horizon: int, alpha: float
) -> float | None:
    """The critical value of the last of `looks` (`group_sequential.critical_value`)."""
    return critical_value(boundary, looks, planned, horizon, alpha)


def free_hits(
    params: Params, corpus: pd.DataFrame, questions: pd.DataFrame
) -> dict[str, dict[str, bool]]:
    """Per system whose retrieval costs no call (its kind's `free_outcomes`, read through
    `cube.systems.known_outcomes` as `cube plan` reads it), under `recall: all`: whether each
    question's gold document was retrieved (question id -> hit). A question of unknown retrieval
    (an imported file's error row, an undetermined rank) is absent, as the analysis leaves it out
    of R@k. Systems absent: R@k from the questions judged."""
    from cube.systems import known_outcomes

    if design_of(params)["recall"] != "all":
        return {}
    out: dict[str, dict[str, bool]] = {}
    for sp in params.systems:
        rag = known_outcomes(sp, params, corpus, questions)
        if rag is not None:
            out[sp.name] = _hits_of(rag)
    return out


def _hits_of(rag: pd.DataFrame) -> dict[str, bool]:
    """Question id -> whether the retrieval holds its gold document, for the questions whose
    retrieval is known (`retrieval_ok`): the others are neither hits nor misses."""
    known = rag[rag["retrieval_ok"].astype(bool)]
    ranks = known["rank"].fillna(0).astype(int)
    return {str(q): bool(r > 0) for q, r in zip(known["question_id"], ranks, strict=True)}


__all__ = [
    "ORDERS",
    "RECALLS",
    "batches",
    "design_of",
    "design_problems",
    "free_hits",
    "look_critical",
    "planned_looks",
]
