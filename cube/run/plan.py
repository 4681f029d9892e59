"""`cube plan PARAMS`: what a run will send, before it sends anything.

Per role and model: calls, prompt and completion tokens, cost at the params' prices (and at the
batch prices for judges, which `cube batch` can send), and time at the model's concurrency.

- **Calls** are counted from the same inputs the stages use: the corpus is built, template or file
  questions are built, and the requests of the question writer
  (`cube.kb.questions.question_requests`), of every builtin system (its BM25 retrieval is run:
  offline, no call), of the bound sets and of every judge (`cube.judges.scoring.judge_requests`) are
  built as the stages build them. The count is exact for what the stages send when every call
  answers: LLM-written questions the screen rejects are neither answered nor judged, an answer whose
  call failed is not judged, `retry_unscored` re-asks add calls, a judge's pilot may stop it, an LLM
  refusal-question writer's calls depend on its replies (not planned: the row says so), and two
  systems that happen to give the same answer to different requests have it judged once (an answer
  the plan knows to be shared is counted once: a bound answer of the systems of one answering model,
  a rag answer to the same request by two LLM systems; an offline answerer's identical answers are
  not foreseen: an offline algorithm's count is an upper bound, e.g. 7,200 planned and 2,964
  computed per rubric judge on params/default.yaml, whose TOP-N sweep gives many equal extractive
  answers; it costs nothing either way). Identical requests are one call, as in the stages. Calls
  already in the cache are counted in `cached_calls` (they cost nothing now) wherever the request is
  known before the run; `to_send` is what is left to send: the calls not in the cache, and none of
  an offline algorithm's (computed here, never sent; a default run planned "17600 calls, 17600 to
  send" with nothing to send).
- **The judge audit** (role `audit`): `audit.questions` capped by `audit.max_share` of the judge
  calls counted here, as stage 03 caps them with the judge calls it made
  (`cube.run.pipeline.audit_sample`): equal where the judging count is exact (an offline judge's is
  an upper bound, and so is its audit's).
- **Prompt tokens**: the built requests' texts through the model's tokenizer (`cube.llm.tokens`: a
  local server's tokenize route, tiktoken, or a stated estimate; `tokens_by` says which), plus the
  chat template's tokens per call (a local server's measured without any new call: reported prompt
  tokens minus the contents as tokenized, the median of up to 5 calls already answered per role
  sequence, the cache's or `--pilot`'s, `cube.llm.tokens.template_tokens`; with none, not counted
  and `tokens_by` says so; tiktoken's documented 3 per message and 3 per call). Where a text is not
  known before the run (an LLM-written question, an LLM's answer a judge will read), a stand-in is
  used: the gold item's name for a question, `ANSWER_TOKENS` tokens for an answer; `exact` says
  whether every prompt of the row was the real one. Answers that cost no call (an offline
  answerer's, an imported file's, to questions known before the run) are computed when an LLM judge
  will read them.
- **Completion tokens** are an estimate per call (`COMPLETION_ESTIMATE`, at most the model's
  `max_tokens`); `completion_tokens_max` is `max_tokens` x calls, the ceiling of the cost.
- **Bounds from an earlier run** (`bounds_cached`, issue 42): the cached calls that are the bound
  sets' (zero/full answers and their judgments). An LLM answerer's bound answers already in the
  cache are known before the run (`cube.run.bounds_reuse.cached_bound_answers`), so a judge's
  prompts on them are the real ones and counted as cached where an earlier run sharing the cache
  judged them (a new version's run with its baseline's answerer, questions and judges);
  `cube plan` says how many calls the cache saves and how many of them are bounds
  (`cube.run.bounds_reuse.bounds_line`). A stand-in is never counted as cached.
- **To send**: a model's calls not already in the cache; an offline algorithm's calls are
  computed locally and never sent (`to_send` 0, `plan_line` counts them apart).
- **Time**: the calls to send x the median latency of this model's calls in the cache (or of the
  `--pilot` calls just sent, which the run then reuses from the cache) / its `max_concurrency`.

- **Sequential runs** (`analysis.sequential`): the plan of the full set is the most the run will
  send; `cube.run.sequential.with_least` adds the least (`calls_least`, `to_send_least`,
  `cost_least`): the plan of the questions of the driver's first batches up to its minimum
  (`min_questions` raised as the driver raises it, `cube.run.sequential.effective_minimum`, from
  the first batch's judge calls per question as the driver counts them when every system is
  builtin and answers offline, else from the plan's), where the earliest stop can come. `cube
  plan` shows both.

The plan is written into the run's manifest beside the usage actually reported (`plan_vs_actual`).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.systems.kinds import kind_of

if TYPE_CHECKING:
    from cube.llm import CallCache

COMPLETION_ESTIMATE = {"question_generation": 40, "answering": 200, "judging": 6, "audit": 6}
ANSWER_TOKENS = COMPLETION_ESTIMATE["answering"]
PLAN_COLUMNS = (
    "role",
    "model",
    "calls",
    "cached_calls",
    "to_send",
    "prompt_tokens",
    "prefix_share",
    "completion_tokens",
    "completion_tokens_max",
    "tokens_by",
    "exact",
    "cost",
    "batch_cost",
    "currency",
    "concurrency",
    "latency_s",
    "latency_from",
    "time_s",
    "note",
    "bounds_cached",
)


@dataclass
class _Group:
    role: str
    spec: ModelSpec
    calls: int = 0
    requests: list[Any] = field(default_factory=list)  # built requests (LLM models only)
    exact: bool = True  # every request is the real one (no stand-in question or answer)
    extra_prompt_tokens: int = 0  # the stand-in answers' tokens, added to the counted prompts
    completion_per_call: int = 0
    notes: list[str] = field(default_factory=list)
    # per request: whether it is the real one (a stand-in is never in the cache) and whether it
    # is a bound set's call (a zero/full answer or its judgment: `cube.run.bounds_reuse`)
    real: list[bool] = field(default_factory=list)
    bound: list[bool] = field(default_factory=list)


class _Plan:
    def __init__(self, params: Params) -> None:
        self.params = params
        self.groups: dict[tuple[str, str], _Group] = {}

    def add(
        self,
        role: str,
        spec: ModelSpec,
        requests: list[Any],
        *,
        calls: int | None = None,
        exact: bool = True,
        extra_tokens: int = 0,
        per_call: int | None = None,
        real: list[bool] | None = None,
        bound: list[bool] | None = None,
    ) -> _Group:
        g = self.groups.setdefault((role, spec.model), _Group(role, spec))
        n = len(requests) if calls is None else calls
        g.calls += n
        if spec.provider != "offline":
            g.requests += requests
            g.real += real or [exact] * len(requests)
            g.bound += bound or [False] * len(requests)
            g.exact = g.exact and exact
            g.extra_prompt_tokens += extra_tokens
            estimate = COMPLETION_ESTIMATE[role] if per_call is None else per_call
            g.completion_per_call = min(estimate, spec.max_tokens or estimate)
        return g


def _stand_in_questions(corpus: pd.DataFrame, slots: pd.DataFrame) -> pd.DataFrame:
    names = corpus.set_index(corpus["doc_id"].astype(str))[
        "item_name" if "item_name" in corpus else "text"
    ]
    q = slots[["question_id", "doc_id"]].copy()
    # the item's name, and the question id so that two items of one name do not pass for one request
    q["question"] = (
        q["doc_id"].astype(str).map(names).fillna("").astype(str).str.slice(0, 200)
        + " "
        + q["question_id"].astype(str)
    )
    return q


def build_plan(
    params: Params,
    *,
    base_dir: Path,
    cache_path: Path | None = None,
    pilot: int = 0,
    question_ids: list[str] | None = None,
) -> pd.DataFrame:
    """The plan (`PLAN_COLUMNS`, one row per role and model) of a run of `params`. No call is sent
    unless `pilot` > 0: then up to `pilot` of each LLM model's planned requests are sent (and
    cached, so the run reuses them) when the cache holds no call of that model to take its latency
    from."""
    from cube.systems.retrieval_store import store_folder, stored_in

    # the retrievers' segmentations are kept beside the cache: stage 02 reads them back
    with stored_in(store_folder(cache_path) if cache_path is not None else None):
        return _build_plan(params, base_dir, cache_path, pilot, question_ids)


def _build_plan(
    params: Params,
    base_dir: Path,
    cache_path: Path | None,
    pilot: int,
    question_ids: list[str] | None,
) -> pd.DataFrame:
    from cube.judges.dimensions import load_dimensions
    from cube.kb.corpus import build_corpus
    from cube.run.ablation import plan_twins

    plan = _Plan(params)
    corpus = build_corpus(params, base_dir=base_dir)
    questions, known_questions = _plan_question_writing(plan, params, corpus, base_dir)
    if question_ids is not None:  # a sequential run's questions reached (`cube.run.sequential`)
        questions = questions[questions["question_id"].astype(str).isin(set(question_ids))]
    inputs = _AnsweringInputs.of(plan, params, corpus, questions, known_questions)
    inputs.cache_path = cache_path
    answer_rows: list[pd.DataFrame] = []
    bound_specs: set[str] = set()
    needed = _planned_bound_questions(params, inputs)
    for sp in params.systems:
        spec, rows = kind_of(sp).plan(inputs, sp)
        answer_rows += rows
        if spec is not None:  # None: the system plans its own bound sets (a bounds function)
            answer_rows += _plan_bound_answers(plan, inputs, sp, spec, bound_specs, needed)
    _note_llm_refusal_questions(plan, params)
    if cache_path is not None:  # the store is open
        _retrieve_refusal_questions(params, corpus, inputs.refusal)
    answers, n_stand_in = _answers_to_judge(answer_rows)
    dimensions = load_dimensions(params, base_dir=base_dir)
    records = _judge_records(answers, corpus, questions)
    judge_calls, audit_inputs = _plan_judging(plan, params, records, dimensions, n_stand_in)
    _plan_audit(plan, params, audit_inputs, judge_calls, len(questions))
    plan_twins(plan, params, audit_inputs, judge_calls)  # the screen's twins: an upper bound
    return _table(plan, cache_path, pilot)


def _retrieve_refusal_questions(
    params: Params, corpus: pd.DataFrame, refusal: pd.DataFrame
) -> None:
    """Each builtin system's retrieval of the refusal questions, into the store (`build_plan`
    opens it): stage 02 answers them, and with the rest read back it would segment the corpus
    and build the index (~1 s of CPU at the paper's scale) and start jieba (~1.5 s) for these
    few alone. Milliseconds here, where the index is built. Nothing of the plan reads them."""
    if not len(refusal):
        return
    from cube.llm import make_model
    from cube.systems.builtin import BuiltinRAG

    for sp in params.systems:
        if sp.kind == "builtin":
            model = make_model(params.model(params.system_answerer(sp)))
            BuiltinRAG(sp, model, lang=params.lang).retrieve(refusal, corpus)


def planned_questions(params: Params, corpus: pd.DataFrame, base_dir: Path) -> pd.DataFrame:
    """The questions a plan counts with (the real ones when known before the run, else
    stand-ins): those of `_plan_question_writing`, for `cube.run.sequential.with_least`."""
    return _plan_question_writing(_Plan(params), params, corpus, base_dir)[0]


def _plan_question_writing(
    plan: _Plan, params: Params, corpus: pd.DataFrame, base_dir: Path
) -> tuple[pd.DataFrame, bool]:
    """The question writer's calls (an LLM generator's), and the questions the later steps plan
    with: the real ones when known before the run, else stand-ins; and whether they are real."""
    from cube.kb.questions import plan_questions, question_requests
    from cube.run.questions import build_question_set, unusable_questions

    qp = params.questions
    if qp.generator != "llm":
        questions = build_question_set(params, corpus, None, base_dir)
        return questions[~unusable_questions(questions)].reset_index(drop=True), True
    slots = plan_questions(corpus, qp.per_doc, qp.limit, qp.seed)
    requests, _ = question_requests(params, corpus, slots)
    spec = params.model(qp.model)  # type: ignore[arg-type]
    g = plan.add("question_generation", spec, requests)
    if qp.screen:
        g.notes.append("the later stages assume every question passes the screen")
    return _stand_in_questions(corpus, slots), False


@dataclass
class _AnsweringInputs:
    """What the answering steps read (a kind's plan reads it as its `cube.systems.kinds.
    PlanContext`): the corpus, the questions (`known`: the real ones), the refusal questions, each
    document's text, and `real`: whether answers an LLM judge will read are computed when that
    costs no call (an offline answerer, an imported file, questions known before the run): its
    calls and prompts are then the real ones; `plan`, which the calls are added to."""

    params: Params
    corpus: pd.DataFrame
    questions: pd.DataFrame
    known: bool
    refusal: pd.DataFrame
    real: bool
    texts: dict[str, str]
    plan: _Plan
    # the systems whose retrieval the plan cannot know (`_planned_bound_questions` fills it)
    unknown_retrieval: set[str] = field(default_factory=set)
    # the call cache: bound answers already in it are known before the run (`_bound_rows`)
    cache_path: Path | None = None

    @classmethod
    def of(
        cls,
        plan: _Plan,
        params: Params,
        corpus: pd.DataFrame,
        questions: pd.DataFrame,
        known: bool,
    ) -> _AnsweringInputs:
        texts = dict(
            zip(corpus["doc_id"].astype(str), corpus["text"].fillna("").astype(str), strict=True)
        )
        refusal = _refusal_questions(params, corpus)
        real = known and any(params.model(j.model).provider != "offline" for j in params.judges)
        return cls(params, corpus, questions, known, refusal, real, texts, plan)

    @property
    def question_texts(self) -> list[str]:
        return self.questions["question"].astype(str).tolist()

    def add(
        self,
        role: str,
        spec: ModelSpec,
        requests: list[Any],
        *,
        calls: int | None = None,
        exact: bool = True,
    ) -> _Group:
        """`_Plan.add`: a kind's calls counted."""
        return self.plan.add(role, spec, requests, calls=calls, exact=exact)

    def known_answers(self, rows: pd.DataFrame, system: str) -> pd.DataFrame:
        """Answers computed before the run (their texts are the real ones)."""
        return rows[["question_id", "doc_id", "set", "answer"]].assign(
            system=system, source="", known=True
        )

    def answers_to_come(self, system: str, source: Any) -> pd.DataFrame:
        """A system's rag answers not known before the run: one stand-in per question; `source`
        tells apart the answers that differ (one answer shared by two systems has one source)."""
        return self.questions.assign(system=system, set="rag", answer="", source=source)


def _planned_bound_questions(params: Params, inputs: _AnsweringInputs) -> dict[str, list[Any]]:
    """Per system, the questions whose bound answers the run makes (`cube.systems.bounds.
    bound_questions`): known before the run where the retrieval costs no call
    (`cube.systems.known_outcomes`, the kind's `free_outcomes`: a builtin system's BM25, an
    imported file, a user kind's) on known questions, every question otherwise (the plan's upper
    bound: a missed question's bounds are not made, known after retrieval; those systems are
    noted in `inputs.unknown_retrieval`)."""
    from cube.systems import known_outcomes
    from cube.systems.bounds import bound_questions

    questions = inputs.questions
    ids = questions["question_id"].tolist()
    out: dict[str, list[Any]] = {}
    for sp in params.systems:
        rag = known_outcomes(sp, params, inputs.corpus, questions) if inputs.known else None
        if rag is None:
            inputs.unknown_retrieval.add(sp.name)
        out[sp.name] = (
            ids if rag is None or not len(questions) else bound_questions(rag, params.analysis)
        )
    return out


def _plan_bound_answers(
    plan: _Plan,
    inputs: _AnsweringInputs,
    sp: Any,
    spec: ModelSpec,
    bound_specs: set[str],
    needed: dict[str, list[Any]],
) -> list[pd.DataFrame]:
    """The bound sets' calls (zero and full context), answered once per distinct answering model
    (`bound_specs`: those already planned) for the questions some system of that model needs
    (`needed`, `_planned_bound_questions`), and the system's bound answers for the judges."""
    from cube.llm import make_model
    from cube.systems import answer_bounds

    lang = inputs.params.lang
    offline = spec.provider == "offline"
    rows = []
    key = spec.model_dump_json()
    mine = set(needed.get(sp.name, inputs.questions["question_id"]))
    if key not in bound_specs:
        bound_specs.add(key)
        questions = inputs.questions[
            inputs.questions["question_id"].isin(
                _model_questions(inputs.params, key, needed) | mine
            )
        ]
        g = _add_bound_calls(plan, inputs, spec, questions, offline)
        saved = len(inputs.questions) - len(questions)
        if not saved and _retrieval_unknown(inputs, key):
            g.notes.append(
                "bound sets: an upper bound (a missed question's zero and full answers are not "
                "made, known after the system's retrieval; analysis.bounds_of_missed)"
            )
        if saved:
            g.notes.append(
                f"bound sets: {2 * saved} calls not made, nor their judgments ({saved} missed "
                "questions: no estimator reads their zero and full answers; "
                "analysis.bounds_of_missed)"
            )
        if offline and inputs.real:
            bounds = answer_bounds(
                questions, inputs.corpus, make_model(spec), lang=lang, progress=False
            )
            rows.append(inputs.known_answers(bounds, sp.name))
    # a bound answer is one answer for every system sharing its answering model: judged once
    if not (inputs.real and offline):
        asked = inputs.questions[inputs.questions["question_id"].isin(mine)]
        rows += _bound_rows(inputs, sp.name, spec, asked, key)
    return rows


def _bound_rows(
    inputs: _AnsweringInputs, system: str, spec: ModelSpec, asked: pd.DataFrame, key: str
) -> list[pd.DataFrame]:
    """A system's bound answers for the judges: those of an LLM answerer already in the cache are
    known (an earlier run sharing the cache made them: their judgments' prompts are the real ones,
    and are found in the cache when that run judged them too), the others stand-ins."""
    from cube.run.bounds_reuse import cached_bound_answers

    sets = [asked.assign(system=system, set=s, answer="", source=key) for s in ("zero", "full")]
    if not inputs.real or spec.provider == "offline" or not len(asked):
        return sets
    found = cached_bound_answers(spec, _bound_requests(inputs, asked), inputs.cache_path)
    n = len(asked)
    return [part for i, frame in enumerate(sets) for part in _known_or_not(frame, found, i * n)]


def _known_or_not(frame: pd.DataFrame, found: dict[int, str], start: int) -> list[pd.DataFrame]:
    """`frame`'s stand-in rows split: those whose answer the cache holds (`found`, by request
    position from `start`) become known answers, the others stay stand-ins."""
    texts = [found.get(start + j) for j in range(len(frame))]
    hit = pd.Series([t is not None for t in texts], index=frame.index)
    known = frame[hit].assign(answer=[t for t in texts if t is not None], source="", known=True)
    return [known, frame[~hit]]


def _retrieval_unknown(inputs: _AnsweringInputs, key: str) -> bool:
    """Whether some system of the answering model of spec `key` has a retrieval the plan cannot
    know (a service, a Python function, or questions not known), so its bound sets are counted
    whole."""
    params = inputs.params
    if params.analysis.bounds_of_missed == "all":
        return False
    return any(
        params.model(params.system_answerer(s)).model_dump_json() == key
        and s.name in inputs.unknown_retrieval
        for s in params.systems
    )


def _model_questions(params: Params, key: str, needed: dict[str, list[Any]]) -> set[Any]:
    """The questions whose bounds the answering model of spec `key` answers: those some system of
    that model needs."""
    same = [
        s.name
        for s in params.systems
        if params.model(params.system_answerer(s)).model_dump_json() == key
    ]
    return set().union(*(set(needed.get(n, [])) for n in same))


def _add_bound_calls(
    plan: _Plan, inputs: _AnsweringInputs, spec: ModelSpec, questions: pd.DataFrame, offline: bool
) -> _Group:
    """The bound sets' answering calls of `questions` (two each: zero and full)."""

    if offline:
        return plan.add("answering", spec, [], calls=2 * len(questions))
    reqs = _bound_requests(inputs, questions)
    return plan.add("answering", spec, reqs, exact=inputs.known, bound=[True] * len(reqs))


def _bound_requests(inputs: _AnsweringInputs, questions: pd.DataFrame) -> list[Any]:
    """The bound sets' answering requests of `questions`: every zero answer's, then every full
    answer's (`cube.systems.bounds.answer_bounds` builds the same)."""
    from cube.systems.builtin import answer_request

    lang = inputs.params.lang
    qtexts = questions["question"].astype(str).tolist()
    golds = questions["doc_id"].astype(str).tolist()
    return [answer_request(q, [], lang) for q in qtexts] + [
        answer_request(q, [inputs.texts[g]], lang) for q, g in zip(qtexts, golds, strict=True)
    ]


def _note_llm_refusal_questions(plan: _Plan, params: Params) -> None:
    """An LLM refusal-question writer's row: its calls depend on its replies, so are not planned."""
    if params.diagnostics.refusal_generator == "llm" and params.diagnostics.refusal_questions:
        spec = params.model(params.diagnostics.refusal_model)  # type: ignore[arg-type]
        g = plan.add("question_generation", spec, [], calls=0)
        g.notes.append(
            "refusal questions by an LLM: their calls depend on its replies (not planned); the "
            "builtin systems' answers to them are not counted either"
        )


def _answers_to_judge(answer_rows: list[pd.DataFrame]) -> tuple[pd.DataFrame, int]:
    """The answers the judges will read, each once, and how many of them are stand-ins."""
    answers = (
        pd.concat(answer_rows, ignore_index=True)
        if answer_rows
        else pd.DataFrame(columns=["question_id", "doc_id", "system", "set", "answer"])
    )
    if len(answers):
        answers["known"] = (
            answers["known"].fillna(False).astype(bool) if "known" in answers else False
        )
        # a real answer is judged once per question (the same prompt is one call); a stand-in
        # once per source
        answers = pd.concat(
            [
                answers[answers["known"]].drop_duplicates(["question_id", "answer"]),
                answers[~answers["known"]].drop_duplicates(["question_id", "set", "source"]),
            ]
        )
    n_stand_in = int((~answers["known"]).sum()) if len(answers) else 0
    return answers, n_stand_in


def _judge_records(
    answers: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame
) -> list[dict[str, Any]]:
    """The judges' inputs, one record per answer to judge."""
    from cube.judges.scoring import judge_inputs

    if not len(answers):
        return []
    columns = ["question_id", "doc_id", "system", "set", "answer"]
    records = judge_inputs(answers[columns], corpus, questions).to_dict("records")
    for rec, known in zip(records, answers["known"], strict=True):
        rec["_known"] = bool(known)  # a real answer (its judgments' prompts are the real ones)
    return records


def _plan_judging(
    plan: _Plan,
    params: Params,
    records: list[dict[str, Any]],
    dimensions: Any,
    n_stand_in: int,
) -> tuple[int, list[tuple[ModelSpec, int, list[Any], int]]]:
    """Every judge's calls; the judge calls in all (as stage 03 counts them, for the audit's cap)
    and, per judge, what the audit plans with: its spec, calls per answer, requests, completion
    tokens per call."""
    judge_calls, audit_inputs = 0, []
    for j in params.judges:
        spec = params.model(j.model)
        per_answer = (1 if j.all_dimensions else len(dimensions)) * j.samples
        if spec.provider == "offline":
            plan.add("judging", spec, [], calls=len(records) * per_answer)
            judge_calls += len(records) * per_answer
            audit_inputs.append((spec, per_answer, [], 0))
            continue
        calls, reqs, per_call = _plan_llm_judge(
            plan, j, spec, records, dimensions, n_stand_in, per_answer
        )
        judge_calls += calls
        audit_inputs.append((spec, per_answer, reqs, per_call))
    return judge_calls, audit_inputs


def _plan_llm_judge(
    plan: _Plan,
    j: Any,
    spec: ModelSpec,
    records: list[dict[str, Any]],
    dimensions: Any,
    n_stand_in: int,
    per_answer: int,
) -> tuple[int, list[Any], int]:
    """An LLM judge's requests, built as stage 03 builds them: its calls (identical requests are one
    call), its requests and its completion tokens per call."""
    from cube.judges.scoring import Judge, judge_requests
    from cube.llm import make_model
    from cube.run.audit import judge_calls as count_judge_calls

    judge = Judge(
        name=j.name, model=make_model(spec), samples=j.samples, all_dimensions=j.all_dimensions
    )
    units, reqs, _ = judge_requests(judge, records, dimensions)
    per_call = COMPLETION_ESTIMATE["judging"] * (len(dimensions) if j.all_dimensions else 1)
    g = plan.add(
        "judging",
        spec,
        reqs,
        exact=not n_stand_in,
        per_call=per_call,
        extra_tokens=n_stand_in * per_answer * ANSWER_TOKENS,
        real=[bool(u[0].get("_known")) for u in units],
        bound=[str(u[0]["set"]) in ("zero", "full") for u in units],
    )
    # identical requests of a judge are one call, counted as stage 03 and cube batch count them
    calls = count_judge_calls([judge], {judge.name: reqs}) if not n_stand_in else len(reqs)
    if j.retry_unscored:
        g.notes.append(
            f"judge {j.name}: up to {j.retry_unscored} re-asks per unscored reply not counted"
        )
    if j.pilot and not j.insist:
        g.notes.append(f"judge {j.name}: its pilot ({j.pilot} calls) may stop it")
    return calls, reqs, per_call


def _plan_audit(
    plan: _Plan,
    params: Params,
    judges: list[tuple[ModelSpec, int, list[Any], int]],
    judge_calls: int,
    n_questions: int,
) -> None:
    """The judge audit's calls (role 'audit'), as stage 03 sends them: `audit.questions` capped by
    `audit.max_share` of the judge calls planned above (`cube.run.pipeline.audit_sample`), x
    `PROBES_PER_QUESTION` probes x each judge's calls per answer. Its prompts stand in as the
    judge's own prompts in turn (the probes are length-matched to the answers they replace, give or
    take the empty and truncated ones): not exact, never counted as cached."""
    from cube.run.audit import audit_sample
    from cube.systems.probes import PROBES_PER_QUESTION

    sample = audit_sample(params, judge_calls)
    n = sample["questions"] if n_questions >= 2 else 0  # the probes need two answered questions
    n = min(n, n_questions)
    if not n:
        return
    for spec, per_answer, reqs, per_call in judges:
        calls = n * PROBES_PER_QUESTION * per_answer
        stand_in = [reqs[i % len(reqs)] for i in range(calls)] if reqs else []
        g = plan.add("audit", spec, stand_in, calls=calls, exact=False, per_call=per_call or None)
        note = f"judge audit: {n} questions x {PROBES_PER_QUESTION} probes"
        if sample["capped"]:
            note += (
                f" (audit.questions {sample['requested']} capped at {sample['max_share']:.0%} of "
                "the judge calls)"
            )
        if note not in g.notes:
            g.notes.append(note)


def _refusal_questions(params: Params, corpus: pd.DataFrame) -> pd.DataFrame:
    d = params.diagnostics
    if not d.refusal_questions or d.refusal_generator == "llm":
        return pd.DataFrame(columns=["question_id", "question"])
    from cube.kb.refusal_questions import build_refusal_set

    return build_refusal_set(params, corpus)[0]


def _cache_facts(
    cache_path: Path | None, groups: dict[tuple[str, str], _Group]
) -> tuple[dict, dict, dict]:
    """Per (role, model): how many of its built requests the cache holds; per model: the latencies
    of its cached calls (the latest 200), and the messages and reported prompt tokens of its latest
    cached calls (`observed`, for the chat template's tokens:
    `cube.llm.tokens.count_prompt_tokens`)."""
    from cube.llm import CallCache

    cached: dict[tuple[str, str], tuple[int, int]] = {}
    latencies: dict[str, list[float]] = {}
    observed: dict[str, list[tuple[list[dict], int]]] = {}
    if cache_path is None or not Path(cache_path).exists():
        return cached, latencies, observed
    cache = CallCache(cache_path)
    try:
        for key, g in groups.items():
            if g.spec.provider == "offline":
                continue
            cached[key] = _cached_count(cache, g)
            latencies[key[1]] = _cached_latencies(cache, g.spec.model)
            observed[key[1]] = _cached_messages(cache, g.spec.model)
    finally:
        cache.close()
    return cached, latencies, observed


def _cached_count(cache: CallCache, g: _Group) -> tuple[int, int]:
    """How many of a group's real built requests the cache holds (a stand-in never is), and how
    many of those are the bound sets' calls (made by an earlier run: `cube.run.bounds_reuse`)."""
    from cube.llm import cache_key

    keys = [cache_key(g.spec, r) for r, real in zip(g.requests, g.real, strict=True) if real]
    bound = [b for b, real in zip(g.bound, g.real, strict=True) if real]
    stored = cache.get_many(keys)
    hits = [k in stored for k in keys]
    return sum(hits), sum(h and b for h, b in zip(hits, bound, strict=True))


def _cached_latencies(cache: CallCache, model: str) -> list[float]:
    """The latencies of a model's latest 200 cached calls (those that recorded one)."""
    rows = cache.conn.execute(
        "SELECT latency_s FROM calls WHERE model = ? ORDER BY created_at DESC LIMIT 200",
        (model,),
    ).fetchall()
    return [r[0] for r in rows if r[0]]


def _cached_messages(cache: CallCache, model: str) -> list[tuple[list[dict], int]]:
    """The messages and reported prompt tokens of a model's latest 200 cached calls."""
    rows = cache.conn.execute(
        "SELECT request, input_tokens FROM calls WHERE model = ? ORDER BY created_at DESC "
        "LIMIT 200",
        (model,),
    ).fetchall()
    return [(json.loads(r[0]).get("messages") or [], r[1]) for r in rows]


def _dedupe(plan: _Plan) -> None:
    """Identical requests are one call (one cache key), as in the stages; a judge's prompts hold
    stand-in answers, alike where the real ones differ (its answers are told apart by `source`
    instead), so a judge's or the audit's requests are merged only when exact."""
    from cube.llm import cache_key

    for g in plan.groups.values():
        if (
            (g.role not in ("judging", "audit") or g.exact)
            and g.requests
            and g.spec.provider != "offline"
        ):
            _keep_unique(g, cache_key)


def _keep_unique(g: _Group, cache_key: Any) -> None:
    """A group's requests each once (by cache key), their flags with them."""
    unique: dict[str, tuple[Any, bool, bool]] = {}
    for r, real, bound in zip(g.requests, g.real, g.bound, strict=True):
        unique.setdefault(cache_key(g.spec, r), (r, real, bound))
    g.calls -= len(g.requests) - len(unique)
    g.requests, g.real, g.bound = (list(x) for x in zip(*unique.values(), strict=True))


def _pilot_latency(
    role: str, g: _Group, cache_path: Path | None, pilot: int, observed: dict[str, list]
) -> tuple[float, str] | None:
    """Send up to `pilot` of the group's planned requests (cached: the run reuses them); their
    median latency, and their messages and prompt tokens added to `observed`. None when none was
    sent fresh."""
    from cube.llm import make_model

    sent = make_model(g.spec, cache_path).complete(g.requests[:pilot], role=role, progress=False)
    times = [r.latency_s for r in sent if r.ok and not r.cached]
    observed.setdefault(g.spec.model, []).extend(
        (list(q.messages), r.input_tokens)
        for q, r in zip(g.requests[:pilot], sent, strict=True)
        if r.ok
    )
    return (statistics.median(times), f"median of {len(times)} pilot calls") if times else None


def _latencies(
    plan: _Plan,
    seen: dict[str, list[float]],
    observed: dict[str, list],
    cache_path: Path | None,
    pilot: int,
) -> dict[str, tuple[float, str]]:
    """Per LLM model: the median latency of its cached calls, else of `pilot` calls of its first
    role's planned requests, and where it comes from; a model with neither is left out."""
    latency: dict[str, tuple[float, str]] = {}
    for (role, model), g in plan.groups.items():
        if g.spec.provider == "offline" or model in latency:
            continue
        if seen.get(model):
            latency[model] = (
                statistics.median(seen[model]),
                f"median of {len(seen[model])} cached calls",
            )
        elif pilot and g.requests:
            measured = _pilot_latency(role, g, cache_path, pilot, observed)
            if measured is not None:
                latency[model] = measured
    return latency


OFFLINE_NOTE = (
    "an offline algorithm computes identical inputs once (two systems' equal answers, say): an "
    "upper bound"
)
NO_LATENCY = (float("nan"), "unknown: no cached call (cube plan --pilot N)")


def _offline_row(role: str, model: str, g: _Group) -> dict[str, Any]:
    """The row of an offline algorithm: its calls are computed here, never sent (no tokens, no
    cost, no time)."""
    spec = g.spec
    return {
        "role": role,
        "model": model,
        "calls": g.calls,
        "cached_calls": 0,
        "to_send": 0,
        "prompt_tokens": 0,
        "completion_tokens": g.completion_per_call * g.calls,
        "completion_tokens_max": 0,
        "tokens_by": "offline (no tokens)",
        "exact": True,
        "cost": _cost(spec, 0.0, 0.0, batch=False),
        "batch_cost": _cost(spec, 0.0, 0.0, batch=True)
        if role in ("judging", "audit")
        else float("nan"),
        "currency": spec.currency,
        "concurrency": float("nan"),
        "latency_s": float("nan"),
        "latency_from": "",
        "time_s": float("nan"),
        "note": "; ".join(g.notes + [OFFLINE_NOTE] * (role != "question_generation")),
        "bounds_cached": 0,
    }


def _prompt_tokens(g: _Group, observed: Any) -> tuple[int, str]:
    """The prompt tokens of a group's built requests by its model's tokenizer (plus its stand-in
    answers' tokens), and how they were counted ('' with no request built)."""
    from cube.llm.tokens import count_prompt_tokens, prompt_text

    if not g.requests:
        return 0, ""
    counted = count_prompt_tokens(
        g.spec,
        [prompt_text(r) for r in g.requests],
        [tuple(str(m.get("role", "")) for m in r.messages) for r in g.requests],
        observed,
    )
    return sum(counted.counts) + g.extra_prompt_tokens, counted.method


def _llm_row(
    role: str,
    model: str,
    g: _Group,
    in_cache: tuple[int, int],
    observed: Any,
    latency: tuple[float, str],
) -> dict[str, Any]:
    """The row of an LLM model in one role: prompt tokens counted by its tokenizer, the calls not
    in the cache to send, their cost and their time at its concurrency."""
    spec = g.spec
    prompt, tokens_by = _prompt_tokens(g, observed)
    # keys of the built requests already in the cache: only real requests can be (stand-ins not)
    cached = min(in_cache[0], g.calls)
    completion = g.completion_per_call * g.calls
    to_send = g.calls - cached
    share = to_send / g.calls if g.calls else 0.0
    lat, lat_from = latency
    conc = spec.max_concurrency or 1
    return {
        "role": role,
        "model": model,
        "calls": g.calls,
        "cached_calls": cached,
        "to_send": to_send,
        "prompt_tokens": prompt,
        "prefix_share": _prefix_share(role, g.requests),  # prompt40's hook (issue 40.4)
        "completion_tokens": completion,
        "completion_tokens_max": (spec.max_tokens or 0) * g.calls,
        "tokens_by": tokens_by,
        "exact": bool(g.exact),
        "cost": _cost(spec, prompt * share, completion * share, batch=False),
        "batch_cost": _cost(spec, prompt * share, completion * share, batch=True)
        if role in ("judging", "audit")
        else float("nan"),
        "currency": spec.currency,
        "concurrency": conc,
        "latency_s": lat,
        "latency_from": lat_from,
        "time_s": float("nan") if math.isnan(lat) else to_send * lat / min(conc, max(to_send, 1)),
        "note": "; ".join(g.notes),
        "bounds_cached": min(in_cache[1], cached),
    }


def _prefix_share(role: str, requests: list[Any]) -> float:
    """For the roles whose calls go in prompt-text order (a judge's, the audit's), the share of
    their prompt text a prefix cache could serve (`cube.llm.usage.prefix_share`); else NaN."""
    from cube.llm.usage import prefix_share

    if role not in ("judging", "audit") or not requests:
        return float("nan")
    return prefix_share("\n".join(str(m.get("content", "")) for m in r.messages) for r in requests)


def _table(plan: _Plan, cache_path: Path | None, pilot: int) -> pd.DataFrame:
    """The plan's rows (`PLAN_COLUMNS`): its requests deduplicated, what the cache holds and the
    latencies read (or measured by `pilot` calls), one row per role and model."""
    _dedupe(plan)
    in_cache, seen, observed = _cache_facts(cache_path, plan.groups)
    latency = _latencies(plan, seen, observed, cache_path, pilot)
    rows = [
        _offline_row(role, model, g)
        if g.spec.provider == "offline"
        else _llm_row(
            role,
            model,
            g,
            in_cache.get((role, model), (0, 0)),
            observed.get(model, ()),
            latency.get(model, NO_LATENCY),
        )
        for (role, model), g in plan.groups.items()
    ]
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def least_text(plan: pd.DataFrame) -> str:
    """The lines `cube plan` adds under `analysis.sequential` ('' without it)."""
    facts = plan.attrs.get("sequential")
    if not facts or "calls_least" not in plan:
        return ""
    costs = plan["cost_least"]
    cost = "n/a" if costs.isna().any() else f"{costs.sum():.4f}"
    why = f" ({facts['min_questions_why']})" if facts.get("min_questions_why") else ""
    why += f", judge calls per question from {facts['min_questions_from']}" * bool(
        facts.get("min_questions_from")
    )
    return (
        f"sequential (analysis.sequential): the totals above are the most it will send, on all "
        f"{facts['questions_full']} questions; the least, if it stops at its first possible look "
        f"({facts['questions_least']} questions: the first batches up to min_questions "
        f"{facts['min_questions']}{why}): calls {int(plan['calls_least'].sum())}, to send "
        f"{int(plan['to_send_least'].sum())}, cost {cost}"
    )


def plan_line(plan: pd.DataFrame) -> str:
    """The plan in one line for the run's log: calls, how many are to send, and why the others
    are not (in the cache, or computed offline)."""
    calls, send = int(plan["calls"].sum()), int(plan["to_send"].sum())
    cached = int(plan["cached_calls"].sum())
    offline = int(plan.loc[plan["tokens_by"] == "offline (no tokens)", "calls"].sum())
    why = [f"{cached} in the cache"] * bool(cached) + [f"{offline} computed offline"] * bool(
        offline
    )
    return f"{calls} calls, {send} to send" + (f" ({', '.join(why)})" if why else "")


def _cost(spec: ModelSpec, prompt: float, completion: float, *, batch: bool) -> float:
    """Cost at the spec's prices (0 offline, NaN when no price is set); `batch`: its batch
    prices."""
    if spec.provider == "offline":
        return 0.0
    p_in, p_out = spec.price_input_per_m, spec.price_output_per_m
    if batch:
        p_in = spec.batch_price_input_per_m if spec.batch_price_input_per_m is not None else p_in
        p_out = (
            spec.batch_price_output_per_m if spec.batch_price_output_per_m is not None else p_out
        )
    if p_in is None and p_out is None:
        return float("nan")
    return ((p_in or 0.0) * prompt + (p_out or 0.0) * completion) / 1e6


def plan_vs_actual(plan: list[dict[str, Any]], usage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per role and model: planned calls, tokens and cost beside those the run's tables report."""
    used = {(u.get("role"), u.get("model")): u for u in usage}
    planned = {(p.get("role"), p.get("model")): p for p in plan}
    out = []
    for key in list(planned) + [k for k in used if k not in planned]:
        p, u = planned.get(key, {}), used.get(key, {})
        out.append(
            {
                "role": key[0],
                "model": key[1],
                "planned_calls": p.get("calls"),
                "calls": u.get("calls"),
                "planned_prompt_tokens": p.get("prompt_tokens"),
                "input_tokens": u.get("input_tokens"),
                "planned_completion_tokens": p.get("completion_tokens"),
                "output_tokens": u.get("output_tokens"),
                "planned_cost": p.get("cost"),
                "cost_this_run": u.get("cost_this_run"),
                "planned_time_s": p.get("time_s"),
            }
        )
    return out


def _row_lines(r: dict[str, Any]) -> list[str]:
    """One role and model's line, and the line of how its figures were found when there is one."""
    cost = "n/a" if pd.isna(r["cost"]) else f"{r['cost']:.4f} {r['currency']}"
    batch = "" if pd.isna(r["batch_cost"]) else f" (batch {r['batch_cost']:.4f})"
    t = "n/a" if pd.isna(r["time_s"]) else f"{r['time_s']:.0f} s"
    least = f", least {r['calls_least']}" if "calls_least" in r else ""
    line = (
        f"{r['role']:<20} {r['model']:<28} calls {r['calls']:>7} (cached {r['cached_calls']}, "
        f"to send {r['to_send']}{least})  prompt tokens "
        f"{r['prompt_tokens']:>10}{'' if r['exact'] else '*'}{_prefix_text(r)}  completion "
        f"~{r['completion_tokens']} (max {r['completion_tokens_max']})  cost {cost}{batch}  "
        f"time {t}"
    )
    details = _row_details(r["tokens_by"], r["latency_from"], r["note"])
    return [line, " " * 22 + "; ".join(details)] if details else [line]


def _prefix_text(r: dict[str, Any]) -> str:
    """ " (prefix ~x % shareable)" when the row has a prefix-share estimate (`_prefix_share`)."""
    share = r.get("prefix_share")
    return "" if share is None or pd.isna(share) else f" (prefix ~{share:.0%} shareable)"


def _row_details(tokens_by: str, latency_from: str, note: str) -> list[str]:
    """How a row's tokens and latency were found, and its note (an offline model: its note)."""
    offline = str(tokens_by).startswith("offline")
    shown = (note,) if offline else (tokens_by, latency_from, note)
    return [x for x in shown if x]


def _totals_line(plan: pd.DataFrame) -> str:
    costs = plan["cost"]
    total = "n/a" if costs.isna().any() else f"{costs.sum():.4f}"
    times = plan["time_s"].dropna()
    time = "n/a" if times.empty else f"{times.sum():.0f} s (roles one after another)"
    stand_ins = (
        ""
        if plan["exact"].all()
        else "; * prompts with stand-ins for text not known before the run"
    )
    return (
        f"total: calls {int(plan['calls'].sum())}, to send {int(plan['to_send'].sum())}, cost "
        f"{total}, time {time}{stand_ins}"
    )


def plan_text(plan: pd.DataFrame) -> str:
    """The plan as `cube plan` prints it: one line per role and model, then the totals."""
    from cube.run.bounds_reuse import bounds_line

    lines = [line for r in plan.to_dict("records") for line in _row_lines(r)]
    lines.append(_totals_line(plan))
    lines.append(bounds_line(plan))
    least = least_text(plan)
    return "\n".join(lines + ([least] if least else []))
