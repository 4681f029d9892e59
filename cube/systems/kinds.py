"""The registry of system kinds: each kind in one place, and a user's own kind in one file.

A `SystemKind` bundles what the rest of the workbench asks of a kind:

- `params`: the model a `systems:` entry of that kind is validated against (the package's kinds
  are members of `cube.config.sections.SystemParams`, which the params layer validates without
  this layer; a user's kind registers its model with `cube.config.system_kinds`);
- `build(entry, params, cache_path) -> System`: the runnable system (`cube.systems.make_system`);
- `plan(ctx, entry)`: what `cube plan` counts for its answers (`cube.run.plan`; default
  `plan_service`: one call per question of a service that reports no tokens, the bound sets by
  its answerer);
- `check(entry, base_dir) -> problems`: what `cube validate` checks without sending anything
  (a python system's functions load, say);
- `probe(entry, params, question, corpus) -> SystemProbe`: the one real question `cube validate
  --check-endpoints` sends it (None: not probed; builtin and imported systems call nothing);
- `answerer_writes_rag`: its answering model writes its rag answers too (the judge audit's
  self-preference check, `cube.run.audit.answerer_sets`);
- `free_outcomes(entry, params, corpus, questions) -> DataFrame | None`: each question's retrieval
  outcome (`question_id, rank, retrieval_ok`) known without any call, for a kind whose retrieval
  is free (builtin: bm25s over the corpus; imported: the file's rows; a user kind whose retriever
  runs locally); None (the attribute, or its return for an entry): the retrieval comes with the
  answer. Read through `cube.systems.known_outcomes` alone, by `cube plan` (the bounds of missed
  questions not made) and the sequential driver (`recall: all`: R@k of the whole set), so both
  ask the same question of the kind; `outcomes_frame` builds the table from ranked lists;
- `summary`: one line saying what it is (`cube init`, the params reference).

The package's kinds register themselves at the end of their modules (`cube.systems.builtin`,
`.ragflow`, `.imported`, `.http`, `.python_system`); `all_kinds()` imports them, and any user kind
is registered by importing its module (params key `system_kinds:`, or the entry point group
`cube.system_kinds`: `cube.config.system_kinds`). A user kind's file is its params model, a
`QuestionSystem` subclass and one decorated builder (docs/how-to/system-kind.md):

    class EngineParams(KindParams):
        kind: Literal["my-engine"] = "my-engine"
        index: str

    @system_kind(EngineParams, summary="my query engine")
    def build(entry, params, cache_path): return MyEngine(entry, lang=params.lang, ...)
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
from pydantic import BaseModel

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.system_kinds import (
    PACKAGE_KINDS,
    kind_tag,
    params_model,
    register_params,
    registered_kinds,
)
from cube.systems.base import System, rank_of
from cube.systems.retrieved import Retrieved, RetrievedLists, ranked_lists

EXCERPT = 200  # characters of a reply shown by a probe


class PlanContext(Protocol):
    """What a kind's `plan` reads and adds to (`cube.run.plan` gives it): the run's params, corpus
    and questions (`known`: the real ones, else stand-ins), the refusal questions, each document's
    text, and `real`: whether answers an LLM judge reads are computed when that costs no call."""

    params: Params
    corpus: pd.DataFrame
    questions: pd.DataFrame
    known: bool
    refusal: pd.DataFrame
    real: bool
    texts: dict[str, str]

    def add(
        self,
        role: str,
        spec: ModelSpec,
        requests: list[Any],
        *,
        calls: int | None = None,
        exact: bool = True,
    ) -> Any:
        """Count calls (or built requests) of `spec` in `role`; the group, whose `notes` a kind
        may append to."""

    def known_answers(self, rows: pd.DataFrame, system: str) -> pd.DataFrame:
        """Answers computed before the run, for the judges to read."""

    def answers_to_come(self, system: str, source: Any) -> pd.DataFrame:
        """One stand-in rag answer per question (`source` tells apart answers that differ)."""


Planned = tuple[ModelSpec | None, list[pd.DataFrame]]


def plan_service(ctx: PlanContext, entry: Any) -> Planned:
    """One request per question to a service that reports no tokens (model `<kind>:<name>`,
    offline: its cost unknown); the bound sets by its answerer."""
    service = ModelSpec(provider="offline", model=f"{entry.kind}:{entry.name}")
    ctx.add("answering", service, [], calls=len(ctx.questions)).notes.append(
        "requests to your service: it reports no tokens (their cost unknown)"
    )
    params = ctx.params
    return params.model(params.system_answerer(entry)), [
        ctx.answers_to_come(entry.name, entry.name)
    ]


@dataclass
class SystemProbe:
    """One system's probe: the lines shown, and the problem (None: it answered readably)."""

    system: str
    lines: list[str] = field(default_factory=list)
    problem: str | None = None


def excerpt(text: object) -> str:
    """A reply's start, on one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= EXCERPT else flat[: EXCERPT - 1] + "…"


def extracted(system: str, answer: object, retrieved: RetrievedLists) -> list[str]:
    """What a reply gave, and what it maps to in the knowledge base."""
    out = [f"{system}: extracted answer: {excerpt(answer)}"]
    docs = retrieved.lists[0] if retrieved.lists else []
    if retrieved.passages:
        out.append(
            f"{system}: extracted {retrieved.passages} passage(s), mapped to {docs} "
            f"({retrieved.unmapped_passages} matched no document)"
        )
        return out
    hint = retrieved.did_you_mean
    out.append(
        f"{system}: extracted ids {docs}"
        + (
            f" (did you mean {', '.join(f'{k!r} -> {v!r}' for k, v in hint.items())}?)"
            if hint
            else ""
        )
    )
    return out


def probe_by_answer(
    entry: Any, params: Params, q: pd.DataFrame, corpus: pd.DataFrame, asked: str = ""
) -> SystemProbe:
    """The probe of a system answering in Python: asked once (no cache), its answer or failure
    shown, and what its retrieval mapped to; `asked`: how the first line says it was asked
    (default `asked once (<kind>)`)."""
    system = kind_of(entry).build(entry, params, None)
    probe = SystemProbe(entry.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = system.answer(q, corpus, progress=False)
    row = df.iloc[0]
    probe.lines.append(f"{entry.name}: {asked or f'asked once ({entry.kind})'}")
    if row["error"]:
        probe.problem = f"{entry.name}: the call failed: {excerpt(row['error'])}"
        probe.lines.append(probe.problem)
        return probe
    probe.lines += extracted(entry.name, row["answer"], df.attrs["retrieved"])
    return probe


Builder = Callable[[Any, Params, Path | None], System]
FreeOutcomes = Callable[[Any, Params, pd.DataFrame, pd.DataFrame], pd.DataFrame | None]


def outcomes_frame(
    questions: pd.DataFrame,
    corpus: pd.DataFrame,
    replies: Sequence[Retrieved | None],
    top_n: int | None,
) -> pd.DataFrame:
    """A `free_outcomes` table (`question_id, doc_id, retrieved_doc_ids, rank, retrieval_ok`)
    from each question's retrieval (`Retrieved` ids or passages, in rank order; None: unknown):
    the lists turned into ranked doc ids as a run turns a reply's
    (`cube.systems.retrieved.ranked_lists`: passages mapped, cut at `top_n`), the gold
    document's rank in each (0: missed), `retrieval_ok` False where the retrieval is unknown. The
    lists ride along in `attrs["retrieved"]`, so `cube.systems.known_outcomes` checks them as a
    run checks its answers (too many unmapped: R@k not measured, every row unknown)."""
    lists = ranked_lists(list(replies), corpus, top_n)
    golds = questions["doc_id"].astype(str).tolist()
    known = [r is not None for r in replies]
    df = pd.DataFrame(
        {
            "question_id": questions["question_id"].tolist(),
            "doc_id": golds,
            "retrieved_doc_ids": lists.lists,
            "rank": [
                rank_of(g, d) if k else 0 for g, d, k in zip(golds, lists.lists, known, strict=True)
            ],
            "retrieval_ok": known,
        }
    ).astype({"rank": "int64", "retrieval_ok": bool})
    df.attrs["retrieved"] = lists
    return df


@dataclass(frozen=True)
class SystemKind:
    """One kind of system under test (module docstring)."""

    name: str
    params: type[BaseModel]
    build: Builder
    summary: str
    plan: Callable[[PlanContext, Any], Planned] = plan_service
    check: Callable[[Any, Path], list[str]] | None = None
    probe: Callable[[Any, Params, pd.DataFrame, pd.DataFrame], SystemProbe] | None = None
    answerer_writes_rag: bool = False
    sources: Callable[[Any], list[str]] | None = None
    free_outcomes: FreeOutcomes | None = None

    def source_files(self, entry: Any) -> list[str]:
        """The files of the code an entry of this kind runs, for stage 02's fingerprint (editing
        one re-runs the answers; the kind's call cache decides which calls are made again): what
        `sources` names (a python system's functions, a user kind's engine), and for a kind
        outside the package the file of its own module. The package's own modules are in the
        stages' code fingerprints already."""
        files = list(self.sources(entry)) if self.sources is not None else []
        if self.name not in PACKAGE_KINDS:
            try:
                own = inspect.getsourcefile(self.build)
            except TypeError:  # a builder without a file (a builtin): nothing to follow
                own = None
            files += [own] if own and Path(own).is_file() else []
        return files


_KINDS: dict[str, SystemKind] = {}
PACKAGE_MODULES = {
    "builtin": "cube.systems.builtin",
    "ragflow": "cube.systems.ragflow",
    "imported": "cube.systems.imported",
    "http": "cube.systems.http",
    "python": "cube.systems.python_system",
}


def register(kind: SystemKind) -> SystemKind:
    """Add a kind to the registry (a user's: its params model to the params schema too). A
    package kind's name is taken by its own module only: a user's kind of that name would replace
    the package's builder depending on import order."""
    if kind.name in PACKAGE_KINDS:
        module = getattr(kind.build, "__module__", None)
        if module != PACKAGE_MODULES[kind.name]:
            raise ValueError(
                f"system kind {kind.name!r} is the package's ({PACKAGE_MODULES[kind.name]}); "
                f"{module} cannot register it: give your kind another name"
            )
    else:
        register_params(kind.params)
    _KINDS[kind.name] = kind
    return kind


def system_kind(
    params: type[BaseModel],
    *,
    summary: str,
    plan: Callable[[PlanContext, Any], Planned] = plan_service,
    check: Callable[[Any, Path], list[str]] | None = None,
    probe: Callable[..., SystemProbe] | None = probe_by_answer,
    sources: Callable[[Any], list[str]] | None = None,
    free_outcomes: FreeOutcomes | None = None,
) -> Callable[[Builder], Builder]:
    """Register the decorated builder as the kind its params model names (`kind: Literal[...]`);
    a user kind is probed by asking it one question unless `probe` says otherwise, and its
    retrieval is taken to come with its answer unless it gives `free_outcomes`."""

    def wrap(build: Builder) -> Builder:
        name = kind_tag(params)
        if name is None:
            raise TypeError(f"{params.__name__}: a kind's params model needs `kind: Literal[...]`")
        register(
            SystemKind(
                name,
                params,
                build,
                summary,
                plan=plan,
                check=check,
                probe=probe,
                sources=sources,
                free_outcomes=free_outcomes,
            )
        )
        return build

    return wrap


def all_kinds() -> dict[str, SystemKind]:
    """Every registered kind, the package's first (in `PACKAGE_MODULES` order), then the user
    kinds registered so far."""
    for module in PACKAGE_MODULES.values():
        importlib.import_module(module)
    order = [*PACKAGE_MODULES, *registered_kinds()]
    return {name: _KINDS[name] for name in order if name in _KINDS}


def kind_of(entry: Any) -> SystemKind:
    """The kind of a `systems:` entry (its `kind` tag)."""
    name = str(getattr(entry, "kind", ""))
    if name in PACKAGE_MODULES:
        importlib.import_module(PACKAGE_MODULES[name])
    elif name not in _KINDS:
        params_model(name)  # an entry point's module registers it
    if name not in _KINDS:
        raise KeyError(
            f"system {getattr(entry, 'name', '?')!r}: no system kind {name!r} is registered "
            f"(known: {', '.join(all_kinds())}); docs/how-to/system-kind.md"
        )
    return _KINDS[name]
