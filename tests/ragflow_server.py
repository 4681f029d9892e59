"""A local RAGFlow HTTP API stand-in (127.0.0.1, free port) for the ragflow adapter's tests.

It speaks the routes ragflow-sdk calls for chat assistants, with RAGFlow's JSON shapes
(`{"code": 0, "data": ...}` on success, `{"code": <n>, "message": ...}` on failure), in one of
two API generations (`generation`), as read from the SDK sources:

- `"0.22"` (RAGFlow <= 0.22, SDK 0.22): `GET /chats` replies `data: [chat, ...]`, a chat
  carrying `llm: {"model_name": ...}`; an unmatched `name`/`id` filter is code 102 "The chat
  doesn't exist";
- `"0.26"` (RAGFlow >= 0.23, SDK 0.23-0.27): `GET /chats` replies `data: {"chats": [...],
  "total": n}`, a chat carrying `llm_id` and `llm_setting` instead of `llm`; this stand-in
  answers an unmatched filter with an empty list (so both behaviours are covered).

Routes (the same paths in both generations):

- `GET  /api/v1/chats?page&page_size&orderby&desc&id&name`: list assistants (filtered);
- `POST /api/v1/chats/{chat_id}/sessions`: create a session;
- `POST /api/v1/chats/{chat_id}/completions`: answer `question` in `session_id`
  (non-streaming), with `reference.chunks` and `reference.doc_aggs`.

Every route checks `Authorization: Bearer <api_key>` (code 109 otherwise). The answers come
from a `responder(question) -> {"answer": str, "chunks": [{"document_name", "document_id",
"content"}]}` supplied by the test; a responder raising `ReplyError(code, message)` makes
the server send that error reply. Requests are recorded in `server.log`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class ReplyError(Exception):
    """Raised by a responder to make the server answer `{"code": code, "message": message}`."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


Responder = Callable[[str], dict[str, Any]]
GENERATIONS = ("0.22", "0.26")


class RagflowTestServer:
    """Start with `with RagflowTestServer(key, chats, responder) as srv:`; `srv.base_url`."""

    def __init__(
        self,
        api_key: str,
        chats: list[dict[str, Any]],
        responder: Responder,
        generation: str = "0.22",
    ):
        if generation not in GENERATIONS:
            raise ValueError(f"generation must be one of {GENERATIONS}, got {generation!r}")
        self.generation = generation
        self.api_key = api_key
        self.chats = chats
        self.responder = responder
        self.sessions: dict[str, str] = {}  # session id -> chat id
        self.log: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -------------------------------------------------------------- lifecycle
    def __enter__(self) -> RagflowTestServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                server._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self, "POST")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # -------------------------------------------------------------- routing
    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body: dict[str, Any] = {}
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            body = json.loads(h.rfile.read(length) or b"{}")
        with self._lock:
            self.log.append((method, url.path, body or query))
        if h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send(
                h, {"code": 109, "message": "Authentication error: API key is invalid!"}
            )
        parts = url.path.strip("/").split("/")
        if parts[:2] != ["api", "v1"]:
            return self._send(h, {"code": 404, "message": f"no route {url.path}"}, status=404)
        parts = parts[2:]
        if method == "GET" and parts == ["chats"]:
            return self._send(h, self._list_chats(query))
        if method == "POST" and len(parts) == 3 and parts[0] == "chats" and parts[2] == "sessions":
            return self._send(h, self._create_session(parts[1], body))
        if (
            method == "POST"
            and len(parts) == 3
            and parts[0] == "chats"
            and parts[2] == "completions"
        ):
            return self._send(h, self._complete(parts[1], body))
        return self._send(h, {"code": 404, "message": f"no route {method} {url.path}"}, status=404)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    # -------------------------------------------------------------- routes
    def _list_chats(self, query: dict[str, str]) -> dict[str, Any]:
        chats = self.chats
        for key in ("id", "name"):
            if query.get(key):
                chats = [c for c in chats if c.get(key) == query[key]]
                if not chats and self.generation == "0.22":
                    return {"code": 102, "message": "The chat doesn't exist"}
        if self.generation == "0.22":
            return {"code": 0, "data": chats}
        return {
            "code": 0,
            "data": {"chats": [self._new_chat(c) for c in chats], "total": len(chats)},
        }

    @staticmethod
    def _new_chat(chat: dict[str, Any]) -> dict[str, Any]:
        """A chat record as RAGFlow >= 0.23 lists it: `llm_id` and `llm_setting` instead of
        `llm`."""
        out = {k: v for k, v in chat.items() if k != "llm"}
        llm = dict(chat.get("llm") or {})
        out["llm_id"] = llm.pop("model_name", None)
        out["llm_setting"] = llm
        return out

    def _create_session(self, chat_id: str, body: dict[str, Any]) -> dict[str, Any]:
        if not any(c["id"] == chat_id for c in self.chats):
            return {"code": 102, "message": "You do not own the assistant."}
        sid = uuid.uuid4().hex
        with self._lock:
            self.sessions[sid] = chat_id
        return {
            "code": 0,
            "data": {
                "chat_id": chat_id,
                "id": sid,
                "name": body.get("name", "New session"),
                "messages": [
                    {"role": "assistant", "content": "Hi! I am your assistant, can I help you?"}
                ],
            },
        }

    def _complete(self, chat_id: str, body: dict[str, Any]) -> dict[str, Any]:
        sid = body.get("session_id")
        if self.sessions.get(sid) != chat_id:
            return {"code": 102, "message": "Session does not exist"}
        if body.get("stream", True):
            return {"code": 102, "message": "this test server answers stream=false only"}
        question = str(body.get("question") or "")
        if not question:
            return {"code": 102, "message": "Please input your question."}
        try:
            reply = self.responder(question)
        except ReplyError as err:
            return {"code": err.code, "message": err.message}
        chunks = [
            {
                "id": uuid.uuid4().hex[:16],
                "content": c.get("content", ""),
                "document_id": c["document_id"],
                "document_name": c["document_name"],
                "dataset_id": "ds0",
                "image_id": "",
                "url": None,
                "similarity": 0.5,
                "vector_similarity": 0.5,
                "term_similarity": 0.5,
                "doc_type": [],
                "positions": [""],
            }
            for c in reply.get("chunks", [])
        ]
        aggs: dict[str, dict[str, Any]] = {}
        for c in chunks:
            agg = aggs.setdefault(
                c["document_name"],
                {"doc_name": c["document_name"], "doc_id": c["document_id"], "count": 0},
            )
            agg["count"] += 1
        return {
            "code": 0,
            "data": {
                "answer": reply["answer"],
                "reference": {
                    "total": len(chunks),
                    "chunks": chunks,
                    "doc_aggs": list(aggs.values()),
                },
                "prompt": "",
                "created_at": 0.0,
                "id": uuid.uuid4().hex,
                "session_id": sid,
            },
        }
