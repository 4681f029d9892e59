"""The `http` system: any JSON endpoint (a FastAPI or LangServe service, a Dify or RAGFlow app).

One request per question: the params' `body` template filled with the question
(`cube.config.http_system`: `{question}`, `{question_id}`, `{top_n}`, `{lang}`, and `{region}`,
the region the question names as `region_filter: question` reads it, null when none), sent by
`cube.llm` with the machinery of the judges' calls (`cube.llm.json_wire.JsonWire` beside the
chat wire): adaptive concurrency, retries of 408/409/429/5xx, timeouts, connection errors and
unusable replies (backoff, Retry-After), the circuit breaker, and the SQLite call cache, so a
re-run sends nothing for the questions already answered.

The reply is read with the `response` JMESPath expressions: the answer (text), and the retrieved
documents' ids (`retrieved_ids`, knowledge-base doc_ids) or, when no ids path is given, their
passages' texts (`retrieved_passages`), turned into ranked doc ids by the one policy of every
kind, `cube.systems.retrieved.ranked_lists` (misses keep their rank as `unmapped:...`, counted in
`attrs['unmapped']`, the counts in `attrs['retrieved']`; a document listed again keeps its first
rank; lists are cut at `top_n`).

A reply that is not JSON, or where a path finds nothing (or not the type it needs), is an unusable
reply: retried, then the question's failure. Every failure (HTTP 500 after the retries, a hang
past `timeout_s`, malformed JSON, a connection closed mid-body, a path that finds nothing) is a
row with `answer` None, its reason in `error` and `retrieval_ok` False (nothing is known about
what the service retrieved), never dropped and never scored. Accounting: model `http:<name>`,
no tokens, cost NaN (a service reports no price); the `answerer` column names the system's
`answerer`, the model that writes its bound sets.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Any

import jmespath
import pandas as pd

from cube.config.http_system import PLACEHOLDER, HttpSystem, fill_json_text, placeholders
from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.schema import require_columns
from cube.llm import CallLog, JsonWire, MalformedReply, OpenAIModel, Request, Response
from cube.llm.json_wire import secret_digest
from cube.systems.base import System, answers_frame
from cube.systems.kinds import SystemKind, SystemProbe, excerpt, extracted, register
from cube.systems.region_filter import RegionFilter
from cube.systems.retrieved import Retrieved, RetrievedLists, ranked_lists


def fill(template: Any, values: dict[str, Any]) -> Any:
    """The body of one request: `template` (a mapping or list) with its placeholders filled; a
    string that is exactly one placeholder takes the value itself (a number, null), one inside a
    longer string its text ('' for null). A JSON-text template gets JSON-encoded values."""
    if isinstance(template, str):
        return fill_json_text(template, values)
    return _fill(template, values)


def _fill(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return {k: _fill(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill(v, values) for v in node]
    if not isinstance(node, str):
        return node
    whole = PLACEHOLDER.fullmatch(node)
    if whole and whole.group(1) in values:
        return values[whole.group(1)]

    def text(m: Any) -> str:
        if m.group(1) not in values:
            return m.group(0)
        value = values[m.group(1)]
        return "" if value is None else str(value)

    return PLACEHOLDER.sub(text, node)


def _shown(data: Any) -> str:
    """The start of a reply, for an error message."""
    return json.dumps(data, ensure_ascii=False)[:160]


@dataclasses.dataclass
class Reading:
    """What the response paths found in one reply."""

    answer: str
    ids: list[str] | None = None
    passages: list[str] | None = None


class HttpRAG(System):
    """A JSON endpoint as the system under test.

    Args:
        spec: the params entry (`cube.config.http_system.HttpSystem`).
        answerer: the name of the model the service answers with (the `answerer` column).
        lang: the run's language (`{lang}`).
        cache_path: the call cache (`RunPaths.cache`); None: no persistence.
        calls: the failed calls to record and replay (`cube.llm.CallLog`).
    """

    kind = "http"

    def __init__(
        self,
        spec: HttpSystem,
        *,
        answerer: str,
        lang: str,
        cache_path: Path | None,
        calls: CallLog | None = None,
    ):
        super().__init__(spec.name)
        self.spec, self.answerer, self.lang = spec, answerer, lang
        self.paths = {
            key: (expr, jmespath.compile(expr))
            for key, expr in spec.response.model_dump().items()
            if expr is not None
        }
        model_spec = ModelSpec(
            provider="openai",
            model=f"http:{spec.name}",
            base_url=spec.url,
            header_env=spec.header_env,
            timeout_s=spec.timeout_s,
            max_reply_bytes=spec.max_reply_bytes,
            follow_redirects=spec.follow_redirects,
            max_concurrency=spec.max_concurrency,
            max_attempts=spec.max_attempts,
        )
        wire = JsonWire(
            spec.method,
            spec.url,
            {k: str(v) for k, v in spec.headers.items()},
            self._check,
            secret_headers=tuple(spec.header_env),
            secret_digest=secret_digest(
                {h: os.environ.get(var, "") for h, var in spec.header_env.items()}
            ),
        )
        self.model = OpenAIModel(model_spec, cache_path=cache_path, wire=wire, calls=calls)

    # ------------------------------------------------------------------ one reply
    def _find(self, key: str, data: Any) -> Any:
        expr, path = self.paths[key]
        found = path.search(data)
        if found is None:
            raise ValueError(f"response.{key} {expr!r} found nothing in the reply {_shown(data)}")
        return found

    def _list(self, key: str, data: Any, kinds: tuple[type, ...]) -> list[str]:
        found = self._find(key, data)
        bad = not isinstance(found, list) or any(
            not isinstance(x, kinds) or isinstance(x, bool) for x in found if x is not None
        )
        if bad:
            expr = self.paths[key][0]
            raise ValueError(
                f"response.{key} {expr!r} found {_shown(found)}, not a list of "
                f"{'texts' if kinds == (str,) else 'ids'}"
            )
        return [str(x) for x in found if x is not None]

    def read(self, data: Any) -> Reading:
        """The answer and retrieved ids or passages of a parsed reply; ValueError with the reason
        when a path finds nothing or not what it needs."""
        answer = self._find("answer", data)
        if not isinstance(answer, str):
            expr = self.paths["answer"][0]
            raise ValueError(f"response.answer {expr!r} found {_shown(answer)}, not text")
        if "retrieved_ids" in self.paths:
            return Reading(answer, ids=self._list("retrieved_ids", data, (str, int)))
        return Reading(answer, passages=self._list("retrieved_passages", data, (str,)))

    def _check(self, data: Any) -> None:
        """The wire's check of a fresh reply: an unusable one is retried (MalformedReply)."""
        try:
            self.read(data)
        except ValueError as exc:
            raise MalformedReply(str(exc)) from None

    # ------------------------------------------------------------------ the question set
    def requests(self, questions: pd.DataFrame, corpus: pd.DataFrame) -> list[Request]:
        """One request per question: the body template filled with its values."""
        uses_region = "region" in placeholders(self.spec.body)
        regions = RegionFilter(corpus) if uses_region and "region" in corpus.columns else None
        out = []
        for qid, question in zip(
            questions["question_id"].astype(str), questions["question"].astype(str), strict=True
        ):
            values = {
                "question": question,
                "question_id": qid,
                "top_n": self.spec.top_n,
                "lang": self.lang,
                "region": regions.named_region(question) if regions is not None else None,
            }
            body = fill(self.spec.body, values)
            if self.spec.method == "GET":
                body = {k: "" if v is None else v for k, v in body.items()}
            out.append(Request(messages=(), payload=body))
        return out

    def _readings(self, responses: list[Response]) -> tuple[list[Response], list[Reading | None]]:
        """Each response with its answer as text (or its failure), and what its paths found."""
        out, readings = [], []
        for resp in responses:
            reading = None
            if resp.ok:
                try:
                    reading = self.read(json.loads(resp.text))  # type: ignore[arg-type]
                # a stored reply that the paths given now cannot read (or one cached before the
                # transport bounded nesting: RecursionError)
                except (ValueError, RecursionError) as exc:
                    resp = dataclasses.replace(resp, text=None, error=f"unusable reply: {exc}")
            if reading is not None:
                resp = dataclasses.replace(resp, text=reading.answer)
            out.append(resp)
            readings.append(reading)
        return out, readings

    def _retrieved(self, readings: list[Reading | None], corpus: pd.DataFrame) -> RetrievedLists:
        """Per question, the retrieved doc ids (`cube.systems.retrieved.ranked_lists`)."""
        by_ids = self.kind_of_retrieval() == "ids"
        return ranked_lists(
            [
                None
                if r is None
                else Retrieved(ids=r.ids or [])
                if by_ids
                else Retrieved(passages=r.passages or [])
                for r in readings
            ],
            corpus,
            self.spec.top_n,
        )

    def kind_of_retrieval(self) -> str:
        """'ids' when the reply's retrieved ids are read (retrieved_ids given), else 'passages'."""
        return "ids" if "retrieved_ids" in self.paths else "passages"

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        responses = self.model.complete(
            self.requests(questions, corpus),
            role="answering",
            desc=f"{self.name}: http",
            progress=progress,
        )
        responses, readings = self._readings(responses)
        retrieved = self._retrieved(readings, corpus)
        df = answers_frame(
            questions,
            system=self.name,
            set_name="rag",
            responses=responses,
            retrieved=retrieved.lists,
            answerer=self.answerer,
            retrieval_ok=[r.ok for r in responses],  # a failed call says nothing about retrieval
        )
        df.attrs.update(unmapped=retrieved.unmapped, retrieved=retrieved)
        if retrieved.unmapped:
            what = "id(s)" if self.kind_of_retrieval() == "ids" else "passage(s)"
            warnings.warn(
                f"system {self.name!r}: {retrieved.unmapped} retrieved {what} named no "
                "knowledge-base document (they count as misses)",
                stacklevel=2,
            )
        return df


# --------------------------------------------------------------------------- the kind
def _build(
    entry: HttpSystem, params: Params, cache_path: Path | None, calls: CallLog | None = None
) -> HttpRAG:
    """The system; `calls`: the failed calls it records and replays (`cube.llm.CallLog`)."""
    answerer = params.model_name(params.system_answerer(entry))
    path = Path(cache_path) if cache_path else None
    return HttpRAG(entry, answerer=answerer, lang=params.lang, cache_path=path, calls=calls)


def _probe(entry: HttpSystem, params: Params, q: pd.DataFrame, corpus: pd.DataFrame) -> SystemProbe:
    """ONE request, sent once (no retry, no cache): the body sent, the reply's start or the
    failure, and what the paths extracted."""
    entry = entry.model_copy(update={"max_attempts": 1})
    system = _build(entry, params, None)
    probe = SystemProbe(entry.name)
    requests = system.requests(q, corpus)
    body = json.dumps(requests[0].payload, ensure_ascii=False)
    probe.lines.append(f"{entry.name}: sent {entry.method} {entry.url} {excerpt(body)}")
    with warnings.catch_warnings():  # the failure is shown below, once
        warnings.simplefilter("ignore")
        (resp,) = system.model.complete(requests, role="answering", progress=False)
    if not resp.ok:  # the status and the body's start, or why nothing came back
        probe.problem = f"{entry.name}: the call failed: {excerpt(resp.error)}"
        probe.lines.append(probe.problem)
        return probe
    probe.lines.append(f"{entry.name}: reply: {excerpt(resp.text)}")
    reading = system.read(json.loads(str(resp.text)))  # the wire checked it reads
    lists = ranked_lists(
        [Retrieved(ids=reading.ids, passages=reading.passages)], corpus, entry.top_n
    )
    probe.lines += extracted(entry.name, reading.answer, lists)
    return probe


KIND = register(
    SystemKind(
        "http",
        HttpSystem,
        _build,
        "your RAG service behind an HTTP (JSON) endpoint",
        probe=_probe,
    )
)
