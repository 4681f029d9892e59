"""A small real RAG service on 127.0.0.1 for tests (stdlib http.server + bm25s), in two shapes.

It indexes a knowledge base (the run's corpus: `doc_id`, `text`) with bm25s, retrieves the top
`k` documents for a question and answers extractively (the line of the best document sharing
most words with the question). It speaks one of two real protocols:

- `shape="ids"`: `POST /ask` with `{"question": ..., "k": ...}` -> `{"answer": ...,
  "doc_ids": [...]}` (a FastAPI-style service of one's own);
- `shape="chat"`: RAGFlow's OpenAI-compatible chat route, `POST
  /api/v1/chats_openai/<chat_id>/chat/completions` with `{"model", "messages", "stream": false,
  "extra_body": {"reference": true}}` -> a chat completion whose `choices[0].message` carries
  `reference`: the retrieved chunks `[{id, content, document_id, document_name}, ...]` (RAGFlow's
  `chunks_format`). A chunk is a few lines cut from its document, not the whole document, so the
  passages must be mapped back to documents.

    with RagService(corpus, shape="ids") as service:
        service.url                       # the route to put in params
        service.fail("500", when=lambda question: question == q, times=None)
        service.requests_total, service.by_question

Fault kinds: "500" (HTTP 500), "hang" (answers after `delay_s`, past a client's timeout),
"malformed" (200 with broken JSON), "close" (200 whose body stops half way: the connection closes
mid-body), "no_answer" (200, valid JSON, but without the answer field: a path finds nothing),
"401" (the body echoes the Authorization header, as some gateways do: tests prove it is scrubbed).
The ids shape also answers `GET /ask?question=...&k=...`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import bm25s
import pandas as pd

FAULTS = ("500", "401", "hang", "malformed", "close", "no_answer")
_WORDS = re.compile(r"\w+")


@dataclass
class _Rule:
    kind: str
    times: int | None
    when: Callable[[str], bool] | None
    delay_s: float


class RagService:
    """The service over `corpus` (see the module docstring).

    Args:
        corpus: `doc_id`, `text`.
        shape: "ids" or "chat".
        chunk_lines: lines per chunk of the chat shape's references.
    """

    def __init__(self, corpus: pd.DataFrame, shape: str = "ids", chunk_lines: int = 3):
        if shape not in ("ids", "chat"):
            raise ValueError(f"shape must be 'ids' or 'chat', got {shape!r}")
        self.shape, self.chunk_lines = shape, chunk_lines
        self.route = "/ask" if shape == "ids" else "/api/v1/chats_openai/chat-1/chat/completions"
        self.doc_ids = corpus["doc_id"].astype(str).tolist()
        self.texts = corpus["text"].astype(str).tolist()
        self.index = bm25s.BM25()
        self.index.index(
            bm25s.tokenize(self.texts, stopwords="en", show_progress=False), show_progress=False
        )
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self.requests_total = 0
        self.by_question: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self.route}"

    def __enter__(self) -> RagService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def fail(
        self,
        kind: str,
        *,
        times: int | None = 1,
        when: Callable[[str], bool] | None = None,
        delay_s: float = 5.0,
    ) -> None:
        """Answer the next `times` requests (None: all) whose question `when` accepts, with
        `kind`."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; expected one of {FAULTS}")
        with self._lock:
            self._rules.append(_Rule(kind, times, when, delay_s))

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    def _take_rule(self, question: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.when is None or rule.when(question):
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times <= 0:
                            self._rules.remove(rule)
                    return rule
        return None

    # -- the RAG itself -------------------------------------------------------------------
    def retrieve(self, question: str, k: int) -> list[int]:
        """Row numbers of the top-k documents (those sharing a word with the question)."""
        tokens = bm25s.tokenize([question], stopwords="en", show_progress=False)
        k = max(1, min(int(k), len(self.texts)))
        rows, scores = self.index.retrieve(tokens, k=k, show_progress=False)
        return [int(r) for r, s in zip(rows[0], scores[0], strict=True) if s > 0]

    def best_line(self, question: str, row: int) -> int:
        """The line of document `row` sharing most words with the question (the first of ties)."""
        asked = set(_WORDS.findall(question.lower()))
        lines = self.texts[row].splitlines()
        overlap = [len(asked & set(_WORDS.findall(line.lower()))) for line in lines]
        return overlap.index(max(overlap)) if lines else 0

    def chunk(self, question: str, row: int) -> str:
        """The chunk of document `row` sharing most words with the question (the first of ties):
        the document cut into windows of `chunk_lines` lines, as a chunker would."""
        asked = set(_WORDS.findall(question.lower()))
        lines = self.texts[row].splitlines()
        windows = [
            "\n".join(lines[i : i + self.chunk_lines])
            for i in range(0, len(lines), self.chunk_lines)
        ]
        overlap = [len(asked & set(_WORDS.findall(w.lower()))) for w in windows]
        return windows[overlap.index(max(overlap))]

    def answer(self, question: str, k: int) -> tuple[str, list[int]]:
        rows = self.retrieve(question, k)
        if not rows:
            return "I could not find this in the knowledge base.", []
        lines = self.texts[rows[0]].splitlines()
        return (lines[self.best_line(question, rows[0])] if lines else ""), rows

    def reply(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(question, reply JSON) of one request in this service's shape."""
        if self.shape == "ids":
            question = str(body["question"])
            answer, rows = self.answer(question, int(body.get("k", 4)))
            return question, {"answer": answer, "doc_ids": [self.doc_ids[r] for r in rows]}
        question = str(body["messages"][-1]["content"])
        answer, rows = self.answer(question, 4)
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if (body.get("extra_body") or {}).get("reference"):
            message["reference"] = [
                {
                    "id": f"chunk-{r}",
                    "content": self.chunk(question, r),
                    "document_id": f"ragflow-{r:04d}",
                    "document_name": f"{self.doc_ids[r]}.txt",
                }
                for r in rows
            ]
        return question, {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "")),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(question), "completion_tokens": len(answer)},
        }

    # -- HTTP -----------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"service": self})


class _Handler(BaseHTTPRequestHandler):
    """The HTTP side of a `RagService` (its `service`)."""

    service: RagService
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: bytes, length: int | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload) if length is None else length))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != self.service.route:
            return self._send(404, b'{"detail": "Not Found"}')
        self._serve(json.loads(raw))

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if self.service.shape != "ids" or url.path != self.service.route:
            return self._send(404, b'{"detail": "Not Found"}')
        self._serve(dict(parse_qsl(url.query, keep_blank_values=True)))

    def _serve(self, body: dict[str, Any]) -> None:
        service = self.service
        question, reply = service.reply(body)
        with service._lock:
            service.requests_total += 1
            service.by_question[question] += 1
            service.bodies.append(body)
            service.headers.append({k.lower(): v for k, v in self.headers.items()})
        self._answer(service._take_rule(question), reply)

    def _answer(self, rule: _Rule | None, reply: dict[str, Any]) -> None:
        kind = rule.kind if rule else None
        payload = json.dumps(reply).encode()
        if kind == "500":
            return self._send(500, b'{"detail": "Internal Server Error (test fault)"}')
        if kind == "401":
            echo = {"detail": f"bad credentials: {self.headers.get('Authorization')}"}
            return self._send(401, json.dumps(echo).encode())
        if kind == "hang":
            time.sleep(rule.delay_s)  # type: ignore[union-attr]
        if kind == "malformed":
            return self._send(200, payload[: len(payload) // 2])
        if kind == "close":  # the header promises the whole body; half of it comes
            self._send(200, payload[: len(payload) // 2], length=len(payload))
            self.close_connection = True
            return None
        if kind == "no_answer":
            return self._send(200, json.dumps({"result": "no answer field"}).encode())
        return self._send(200, payload)
