"""The `ragflow` system: a RAGFlow chat assistant, asked through ragflow-sdk.

The SDK each Python allows differs (0.22 on Python 3.11; 0.23-0.26 need 3.12+, 0.27 needs
3.13), and so do the RAGFlow servers people run. The adapter works with both API generations
whichever SDK is installed; the routes (all under `<base_url>/api/v1`, header
`Authorization: Bearer <key>`) are the same, one reply shape differs:

- `GET /chats?page&page_size&orderby&desc&name=...` then `...&id=...`: find the assistant by
  name, else by id. RAGFlow <= 0.22 replies `data: [chat, ...]`, chats carrying
  `llm: {model_name}`; RAGFlow >= 0.23 (SDK 0.23+) replies `data: {"chats": [...], "total": n}`,
  chats carrying `llm_id`. The adapter sends this request through the SDK client's `get` and
  reads either shape (the SDK's own `list_chats` reads only its generation's), then builds the
  SDK's `Chat` from the record;
- `POST /chats/{chat_id}/sessions` (`Chat.create_session`, the same in both): one fresh session
  per question, so no question sees another's history;
- `POST /chats/{chat_id}/completions` with `{"question", "stream": false, "session_id"}`: the
  same body `Session.ask(stream=False)` sends in both, posted through the SDK client's `post`
  because `Session.ask` reads `data` without checking `code`, which would turn RAGFlow's error
  reply into a bare KeyError. The reply is `{"code": 0, "data": {"answer", "reference":
  {"chunks": [{"document_id", "document_name", "content", ...}], "doc_aggs": [...]}}}` or
  `{"code": <n>, "message": ...}`.

Mapping chunks to corpus documents (`doc_mapping`):

- `document_name` (default): `doc_name_pattern`'s `doc_id` group applied to the chunk's
  `document_name` (default `^(?P<doc_id>[^.]+)`: `D00042.txt` -> `D00042`), i.e. the guides
  were uploaded as files named after their doc_id;
- `document_id`: the chunk's `document_id` is the corpus doc_id.

A chunk whose mapped id is not a corpus doc_id is kept, in place, as `unmapped:<name>` (it
still occupies its rank) and counted in `attrs['unmapped']` with a warning. Documents keep
the rank of their first chunk (later chunks of the same document are dropped), and the list
is cut at `top_n` (>= 1, after removing repeated documents) so ranks stay within the N of
`rank_score`. A failed question is a row with `error` set and `retrieval_ok` False (nothing
is known about what the assistant retrieved, so it is not a retrieval miss), never dropped;
a reply with no chunks is a known empty retrieval (`retrieval_ok` True, rank 0).

Accounting: each question is one real call with its own `call_id` (uuid4 hex) and cost NaN
(RAGFlow reports no tokens; its price is unknown). The accounting `model` is
`ragflow:<assistant name>`, so the unknown cost stays with RAGFlow in `usage_summary` and does
not contaminate a priced model of the same name (e.g. the one writing the bound sets); the
`answerer` column keeps the assistant's LLM name. The API key comes from the environment
variable `api_key_env` and never appears in outputs or error messages.

Transport: the SDK sends with `requests`, without a timeout, following redirects. `GuardedRAGFlow`
routes its requests through `cube.llm.transport.sync_request`, the limits of every other endpoint:
no redirect followed, at most `DEFAULT_MAX_REPLY_BYTES` per reply (on the wire and inflated),
`RAGFLOW_TIMEOUT_S` for a whole request; the reply is read by `cube.llm.replies.ReplyGuard` (the key
redacted if RAGFlow echoes it, nesting bounded, lone surrogates replaced, answers and passages
capped at `MAX_TEXT_CHARS`). A refused reply is the question's failure, with its reason.
"""

from __future__ import annotations

import os
import re
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd
from ragflow_sdk import RAGFlow
from ragflow_sdk.modules.chat import Chat

from cube.config.model_spec import DEFAULT_MAX_REPLY_BYTES, ModelSpec
from cube.config.schema import require_columns
from cube.config.sections import RagflowSystem
from cube.llm import Response, progress_bar
from cube.llm.replies import MalformedReply, ReplyGuard
from cube.llm.transport import Limits, TransportLimit, sync_request
from cube.systems.base import System, answers_frame
from cube.systems.kinds import PlanContext, Planned, SystemKind, register
from cube.systems.retrieved import Retrieved, ranked_lists


class RagflowError(RuntimeError):
    """The RAGFlow assistant cannot be used at all (no key, unknown assistant, bad params)."""


RAGFLOW_TIMEOUT_S = 300.0  # one request as a whole (an answer of a large model may take minutes)


class GuardedRAGFlow(RAGFlow):
    """The SDK's client, its requests sent through the transport limits (`sync_request`)."""

    def __init__(self, api_key: str, base_url: str, version: str = "v1"):
        super().__init__(api_key, base_url, version)
        self.limits = Limits(
            timeout_s=RAGFLOW_TIMEOUT_S,
            max_reply_bytes=DEFAULT_MAX_REPLY_BYTES,
            secret_values=(api_key,),
        )
        self.guard = ReplyGuard([api_key])

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        """A `requests.Response` whose body was read within the limits (the key redacted)."""
        import requests

        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        kwargs.pop("stream", None)  # the body is read here, bounded
        res, body = sync_request(
            requests,
            method,
            self.api_url + path,
            self.limits,
            headers=self.authorization_header,
            **kwargs,
        )
        res._content = self.guard.redact(body.decode("utf-8", "replace")).encode("utf-8")
        res.encoding = "utf-8"
        return res

    def post(self, path, json=None, stream=False, files=None):  # type: ignore[no-untyped-def]
        return self._send("POST", path, json=json, files=files)

    def get(self, path, params=None, json=None):  # type: ignore[no-untyped-def]
        return self._send("GET", path, params=params, json=json)

    def delete(self, path, json):  # type: ignore[no-untyped-def]
        return self._send("DELETE", path, json=json)

    def put(self, path, json):  # type: ignore[no-untyped-def]
        return self._send("PUT", path, json=json)


def _chunk_list(reference: Any) -> list[dict[str, Any]]:
    """Reference chunks in rank order (a list, or a dict keyed by position in some versions)."""
    if not isinstance(reference, dict):
        return []
    chunks = reference.get("chunks") or []
    if isinstance(chunks, dict):
        chunks = [
            chunks[k] for k in sorted(chunks, key=lambda k: int(k) if str(k).isdigit() else 0)
        ]
    return [c for c in chunks if isinstance(c, dict)]


def _chat_records(data: Any) -> list[dict[str, Any]]:
    """The chat records of a `GET /chats` reply: `data` is a list (RAGFlow <= 0.22) or
    `{"chats": [...], "total": n}` (RAGFlow >= 0.23)."""
    if isinstance(data, dict):
        data = data.get("chats")
    return [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []


class RagflowAssistant(System):
    """A RAGFlow chat assistant as the system under test.

    Args:
        spec: the params entry (`base_url`, `assistant`, `api_key_env`, mapping, `top_n`).
    """

    kind = "ragflow"

    def __init__(self, spec: RagflowSystem):
        super().__init__(spec.name)
        self.spec = spec
        try:
            self._pattern = re.compile(spec.doc_name_pattern)
        except re.error as exc:
            raise RagflowError(
                f"systems[{spec.name}].doc_name_pattern: not a valid regex: {exc}"
            ) from None
        if spec.top_n < 1:  # config validates it; `out[:0]` or `out[:-1]` would cut silently
            raise RagflowError(f"systems[{spec.name}].top_n: must be >= 1, got {spec.top_n}")
        if spec.doc_mapping == "document_name" and "doc_id" not in self._pattern.groupindex:
            raise RagflowError(
                f"systems[{spec.name}].doc_name_pattern: needs a named group (?P<doc_id>...), got "
                f"{spec.doc_name_pattern!r}"
            )
        self._key = ""

    # ------------------------------------------------------------------ connection
    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _client(self) -> RAGFlow:
        key = os.environ.get(self.spec.api_key_env, "")
        if not key:
            raise RagflowError(
                f"system {self.name!r}: the environment variable {self.spec.api_key_env} (RAGFlow "
                "API key, params key `api_key_env`) is not set"
            )
        self._key = key
        return GuardedRAGFlow(api_key=key, base_url=self.spec.base_url.rstrip("/"))

    def _chat(self, rag: RAGFlow) -> tuple[Any, dict[str, Any]]:
        """The assistant (the SDK's `Chat`) and its record, looked up by name first, then by id."""
        problems = []
        for by in ("name", "id"):
            query = {
                "page": 1,
                "page_size": 30,
                "orderby": "create_time",
                "desc": True,
                by: self.spec.assistant,
            }
            try:
                res = rag.get("/chats", query)
                body = res.json()
            except Exception as exc:  # connection refused, not JSON, ...
                problems.append(f"by {by}: {type(exc).__name__}: {self._scrub(str(exc))}")
                continue
            if not isinstance(body, dict) or body.get("code") != 0:
                message = body.get("message") if isinstance(body, dict) else str(body)[:200]
                problems.append(f"by {by}: {self._scrub(str(message))}")
                continue
            chats = _chat_records(body.get("data"))
            if chats:
                return Chat(rag, chats[0]), chats[0]
            problems.append(f"by {by}: no match")
        raise RagflowError(
            f"system {self.name!r}: RAGFlow at {self.spec.base_url} has no chat assistant "
            f"{self.spec.assistant!r} ({'; '.join(problems)})"
        )

    # ------------------------------------------------------------------ one question
    def _ask(
        self, rag: RAGFlow, chat: Any, qid: str, question: str
    ) -> tuple[Response, list[dict[str, Any]]]:
        t0 = time.perf_counter()

        def failed(reason: str) -> tuple[Response, list[dict[str, Any]]]:
            return Response(
                text=None, error=self._scrub(reason), latency_s=time.perf_counter() - t0
            ), []

        try:
            session = chat.create_session(name=f"cube-{qid}")
            res = rag.post(
                f"/chats/{chat.id}/completions",
                {"question": question, "stream": False, "session_id": session.id},
            )
        except TransportLimit as exc:  # a redirect not followed, too large, the deadline
            return failed(str(exc))
        except Exception as exc:
            return failed(f"{type(exc).__name__}: {exc}")
        if res.status_code != 200:
            return failed(f"HTTP {res.status_code}: {res.text[:300]}")
        try:
            body = rag.guard.loads(res.text)[0]
        except MalformedReply as exc:
            return failed(f"unusable reply: {exc}")
        if not isinstance(body, dict):
            return failed(f"reply is not a JSON object: {res.text[:300]!r}")
        if body.get("code") != 0:
            return failed(f"RAGFlow code {body.get('code')}: {body.get('message')}")
        data = body.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            return failed(f"reply has no answer: {str(body)[:300]}")
        return Response(text=data["answer"], latency_s=time.perf_counter() - t0), _chunk_list(
            data.get("reference")
        )

    def chunk_ids(self, chunks: list[dict[str, Any]], known: set[str]) -> list[str]:
        """The chunks' corpus doc ids in rank order (by `doc_mapping`); a chunk whose id is not a
        corpus doc_id is named by its document name (kept as `unmapped:<name>` by the policy)."""
        out: list[str] = []
        for c in chunks:
            name = str(c.get("document_name") or "")
            if self.spec.doc_mapping == "document_id":
                cand = str(c.get("document_id") or "")
            else:
                m = self._pattern.search(name)
                cand = m.group("doc_id") if m else ""
            out.append(cand if cand in known else name or str(c.get("document_id") or "?"))
        return out

    def map_chunks(self, chunks: list[dict[str, Any]], known: set[str]) -> list[str]:
        """Corpus doc ids of the chunks in rank order, first chunk per document, cut at `top_n`
        (`cube.systems.retrieved.ranked_lists`)."""
        corpus = pd.DataFrame({"doc_id": sorted(known)})
        ids = self.chunk_ids(chunks, known)
        return ranked_lists([Retrieved(ids=ids)], corpus, self.spec.top_n).lists[0]

    # ------------------------------------------------------------------ the question set
    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        rag = self._client()
        chat, record = self._chat(rag)
        llm = record.get("llm")  # RAGFlow <= 0.22: {"model_name": ...}; >= 0.23: "llm_id"
        model = (llm.get("model_name") if isinstance(llm, dict) else None) or record.get("llm_id")
        answerer = str(model) if model else f"ragflow:{chat.name}"
        known = set(corpus["doc_id"].astype(str))
        items = list(
            zip(
                questions["question_id"].astype(str), questions["question"].astype(str), strict=True
            )
        )
        with ThreadPoolExecutor(max_workers=self.spec.max_concurrency) as pool:
            futures = [pool.submit(self._ask, rag, chat, qid, q) for qid, q in items]
            results = [
                f.result()
                for f in progress_bar(futures, desc=f"{self.name}: ragflow", disable=not progress)
            ]
        responses, replies = [], []
        for resp, chunks in results:
            resp.model, resp.endpoint, resp.attempts = f"ragflow:{chat.name}", self.spec.base_url, 1
            resp.call_id = uuid.uuid4().hex  # a real call, never served from a cache
            responses.append(resp)  # cost stays None (NaN): RAGFlow does not report usage
            replies.append(Retrieved(ids=self.chunk_ids(chunks, known)))
        lists = ranked_lists(replies, corpus, self.spec.top_n)
        retrieved = lists.lists
        df = answers_frame(
            questions,
            system=self.name,
            set_name="rag",
            responses=responses,
            retrieved=retrieved,
            answerer=answerer,
            retrieval_ok=[r.ok for r in responses],  # a failed call says nothing about retrieval
        )
        n_unmapped = sum(d.startswith("unmapped:") for docs in retrieved for d in docs)
        df.attrs.update(unmapped=n_unmapped, retrieved=lists)
        if n_unmapped:
            warnings.warn(
                f"system {self.name!r}: {n_unmapped} retrieved document(s) could not be mapped to "
                f"a corpus doc_id (doc_mapping={self.spec.doc_mapping!r}); kept as "
                "'unmapped:<name>' entries",
                stacklevel=2,
            )
        return df


# --------------------------------------------------------------------------- the kind
def _plan(ctx: PlanContext, entry: RagflowSystem) -> Planned:
    """One chat call per question (RAGFlow reports no tokens); the bound sets by its answerer (the
    chat's own model spec once stood here, an offline name `cube plan` could not build)."""
    spec = ModelSpec(provider="offline", model=f"ragflow:{entry.name}")
    ctx.add("answering", spec, [], calls=len(ctx.questions)).notes.append(
        "RAGFlow reports no tokens"
    )
    params = ctx.params
    bounds = params.model(params.system_answerer(entry))
    return bounds, [ctx.answers_to_come(entry.name, entry.name)]


KIND = register(
    SystemKind(
        "ragflow",
        RagflowSystem,
        lambda entry, params, cache_path: RagflowAssistant(entry),
        "a RAGFlow chat assistant, through ragflow-sdk",
        plan=_plan,
    )
)
