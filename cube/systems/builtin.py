"""The `builtin` system: a real RAG baseline (bm25s retrieval + an answering model).

Retrieval: `cube.systems.retrieval.BM25Index` over the rendered guides (one chunk per item,
restricted to a region's knowledge base when `region` is set), top `top_n`.
Answering: the answering prompt (`cube/prompts/<lang>/answer.txt`, package data) as the
system message with the retrieved guides in place of `{knowledge}`, the question as the user
message; the same prompt writes the `zero` (no documents) and `full` (gold document alone)
sets (`cube.systems.bounds`). Any `cube.llm.Model` answers: an LLM reads the messages, an
offline algorithm (`extractive`) reads the request context `{question, documents, lang}`.
The bm25 retrieval always happens, so `retrieval_ok` is True for every row, also when the
answering call failed (the retrieval outcome is still known).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pandas as pd

from cube.config.fence import fence_block, fill_fenced, neutralise_tags
from cube.config.params import Params
from cube.config.schema import require_columns
from cube.config.sections import BuiltinSystem
from cube.llm import CallLog, Model, Request
from cube.systems.base import System, answers_frame
from cube.systems.kinds import PlanContext, Planned, SystemKind, outcomes_frame, register
from cube.systems.region_filter import RegionFilter
from cube.systems.retrieval import BM25Index
from cube.systems.retrieved import Retrieved, ranked_lists

_NO_DOCUMENTS = {"zh": "（无参考资料）", "en": "(no reference documents)"}


@lru_cache(maxsize=8)
def answer_prompt(lang: str) -> str:
    """The packaged answering prompt template for `lang` (placeholder `{knowledge}`)."""
    if lang not in _NO_DOCUMENTS:
        raise ValueError(f"answer prompt: unsupported lang {lang!r}; expected 'zh' or 'en'")
    return (
        resources.files("cube").joinpath("prompts", lang, "answer.txt").read_text(encoding="utf-8")
    )


def format_knowledge(documents: Sequence[str], lang: str) -> str:
    """The reference block: each guide inside its own numbered, fenced `<document-NONCE>` element
    (`cube.config.fence`: a guide cannot close it and pose as instructions)."""
    if not documents:
        return _NO_DOCUMENTS[lang]
    return "\n".join(
        fence_block("document", str(d).strip(), f' index="{i}"') for i, d in enumerate(documents, 1)
    )


def answer_request(
    question: str, documents: Sequence[str], lang: str, *, offline: bool = False
) -> Request:
    """One answering call: messages for an LLM, context for an offline answerer.

    `template_version` is a hash of the prompt template, so editing the template is a new
    cache entry rather than a stale hit. `offline`: the answerer reads `context` only (an
    offline algorithm's call id is made of it, `cube.llm.OfflineModel`), so the prompt is not
    built (no messages): fencing three answer sets' guides cost 5 s of stage 02 at the paper's
    scale for text nobody read.
    """
    template = answer_prompt(lang)
    context = {"question": str(question), "documents": [str(d) for d in documents], "lang": lang}
    version = _template_version(template)
    if offline:
        return Request(messages=(), context=context, template_version=version)
    # one literal pass, not str.format: guides may contain braces
    system = fill_fenced(template, {}, {"knowledge": format_knowledge(documents, lang)})
    return Request(
        messages=(
            {"role": "system", "content": system},
            # the user's own request, in its own message; tag-like text in it is made inert
            {"role": "user", "content": neutralise_tags(str(question))},
        ),
        context=context,
        template_version=version,
    )


@lru_cache(maxsize=8)
def _template_version(template: str) -> str:
    return "answer-" + hashlib.sha256(template.encode("utf-8")).hexdigest()[:12]


class BuiltinRAG(System):
    """bm25s top-N retrieval over the corpus, answered by `model` with the answering prompt.

    Args:
        spec: the params entry (`top_n`, `region`, `region_filter`, `k1`, `b`).
        model: the answering model.
        lang: corpus/prompt language.
    """

    kind = "builtin"

    def __init__(self, spec: BuiltinSystem, model: Model, *, lang: str):
        super().__init__(spec.name)
        self.spec = spec
        self.model = model
        self.lang = lang
        self.region_counts: dict[str, int] = {}

    def retrieve(self, questions: pd.DataFrame, corpus: pd.DataFrame) -> list[list[str]]:
        """Ranked doc ids per question (at most `top_n`).

        With `region_filter: question`, a question naming a region searches only that region's
        knowledge base (`cube.systems.region_filter`); `self.region_counts` says how many
        questions were filtered and how many named no region (searched unfiltered).
        """
        index = BM25Index.from_corpus(
            corpus, lang=self.lang, k1=self.spec.k1, b=self.spec.b, region=self.spec.region
        )
        texts = questions["question"].astype(str).tolist()
        plan = None
        if self.spec.region_filter == "question":
            plan = RegionFilter(index.rows).plan(texts)
            self.region_counts = {"filtered": plan.filtered, "unfiltered": plan.unfiltered}
        return index.search(texts, self.spec.top_n, plan)

    def answer(
        self,
        questions: pd.DataFrame,
        corpus: pd.DataFrame,
        *,
        progress: bool = True,
        retrieved: list[list[str]] | None = None,
    ) -> pd.DataFrame:
        """The rag answers; `retrieved`: lists already retrieved at a larger TOP-N by the same
        retriever (a `top_n_sweep`), cut here to this system's `top_n` instead of
        searching again."""
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        if retrieved is None:
            retrieved = self.retrieve(questions, corpus)
        else:
            retrieved = ranked_lists(
                [Retrieved(ids=d) for d in retrieved], corpus, self.spec.top_n
            ).lists
        texts = dict(
            zip(corpus["doc_id"].astype(str), corpus["text"].fillna("").astype(str), strict=True)
        )
        requests = [
            answer_request(q, [texts[d] for d in docs], self.lang, offline=self.model.offline)
            for q, docs in zip(questions["question"].astype(str), retrieved, strict=True)
        ]
        responses = self.model.complete(
            requests, role="answering", desc=f"{self.name}: rag answers", progress=progress
        )
        out = answers_frame(
            questions,
            system=self.name,
            set_name="rag",
            responses=responses,
            retrieved=retrieved,
            answerer=self.model.name,
            retrieval_ok=[True] * len(retrieved),
        )
        if self.region_counts:
            out.attrs["region_filter"] = dict(self.region_counts)
        return out


# --------------------------------------------------------------------------- the kind
def _build(
    entry: BuiltinSystem, params: Params, cache_path: Path | None, calls: CallLog | None = None
) -> BuiltinRAG:
    """The system; `calls`: the failed calls its answerer records and replays (`CallLog`)."""
    from cube.llm import make_model

    spec = params.model(params.system_answerer(entry))
    return BuiltinRAG(
        entry,
        make_model(spec, cache_path=Path(cache_path) if cache_path else None, calls=calls),
        lang=params.lang,
    )


def _plan(ctx: PlanContext, entry: BuiltinSystem) -> Planned:
    """A builtin system's answering calls: an offline answerer's are computed when an LLM judge will
    read them; an LLM's requests are built (its BM25 retrieval run: offline, no call), the
    refusal questions' too."""
    from cube.llm import cache_key, make_model

    params, questions, corpus = ctx.params, ctx.questions, ctx.corpus
    lang = params.lang
    spec = params.model(params.system_answerer(entry))
    if spec.provider == "offline":
        ctx.add("answering", spec, [], calls=len(questions) + len(ctx.refusal))
        if ctx.real:
            answers = BuiltinRAG(entry, make_model(spec), lang=lang).answer(
                questions, corpus, progress=False
            )
            return spec, [ctx.known_answers(answers, entry.name)]
        return spec, [ctx.answers_to_come(entry.name, entry.name)]
    system = BuiltinRAG(entry, make_model(spec), lang=lang)
    texts = ctx.texts
    retrieved = system.retrieve(questions, corpus)
    asked = questions["question"].astype(str).tolist()
    reqs = [
        answer_request(q, [texts[d] for d in docs], lang)
        for q, docs in zip(asked, retrieved, strict=True)
    ]
    # two systems sending the same request (the same documents retrieved) get one answer:
    # judged once
    source = [cache_key(spec, r) for r in reqs]
    if len(ctx.refusal):
        reqs += [
            answer_request(q, [texts[d] for d in docs], lang)
            for q, docs in zip(
                ctx.refusal["question"].astype(str),
                system.retrieve(ctx.refusal, corpus),
                strict=True,
            )
        ]
    ctx.add("answering", spec, reqs, exact=ctx.known)
    return spec, [ctx.answers_to_come(entry.name, source)]


def _free_outcomes(
    entry: BuiltinSystem, params: Params, corpus: pd.DataFrame, questions: pd.DataFrame
) -> pd.DataFrame:
    """Each question's retrieval without a call: the system's own bm25s retrieval (the
    answering model is built, never called), ranked as its answers rank it."""
    from cube.llm import make_model

    model = make_model(params.model(params.system_answerer(entry)))
    lists = BuiltinRAG(entry, model, lang=params.lang).retrieve(questions, corpus)
    return outcomes_frame(questions, corpus, [Retrieved(ids=d) for d in lists], None)


KIND = register(
    SystemKind(
        "builtin",
        BuiltinSystem,
        _build,
        "the built-in RAG baseline: BM25 retrieval and the answering model",
        plan=_plan,
        answerer_writes_rag=True,
        free_outcomes=_free_outcomes,
    )
)
