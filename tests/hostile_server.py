"""A hostile HTTP service for tests and benchmarks (stdlib only, threaded, 127.0.0.1).

The first path segment picks the behaviour; the rest of the path is ignored, so one server serves
an http system (`POST http://127.0.0.1:<port>/<mode>/ask`) and a chat endpoint
(`base_url=http://127.0.0.1:<port>/<mode>/v1`) alike: a request whose path ends with
`/chat/completions` gets the payload as the message content of an OpenAI-shaped reply, any other
the payload itself as JSON (`{"answer": ..., "ids": [...]}`).

    redirect   302 to `redirect_to` (another server's URL)
    bomb       a gzip body of `bomb_bytes` zeros (about 1/1000 of that on the wire)
    big        a plain body of `big_bytes` (a JSON answer padded with blanks, streamed)
    padded     a 58-character answer padded with `pad_chars` blanks (whole in one body)
    drip       a Content-Length of 1,000 and one byte every `drip_s` seconds
    surrogate  an answer with a lone `\\ud800` escape
    deep       JSON nested 200,000 levels
    echo       the answer repeats every request header's value (a service echoing its key)
    echo422    an HTTP 422 whose FastAPI-shaped `detail` repeats every request header's value
    ok         a plain answer

`Recorder` is a second server that records the headers of every request it gets (the target of a
redirect to another origin).
"""

from __future__ import annotations

import gzip
import io
import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "The answer is in the guide, section two, on page four. OK"  # 58 characters


def gzip_zeros(n: int) -> bytes:
    """A gzip member of `n` zero bytes, compressed a MiB at a time (never `n` bytes in memory)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out, block = io.BytesIO(), bytes(1 << 20)
    for _ in range(n >> 20):
        out.write(comp.compress(block))
    out.write(comp.compress(bytes(n & ((1 << 20) - 1))))
    out.write(comp.flush())
    return out.getvalue()


def chat_reply(content: str) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up on a hostile reply is the point, not an error


class HostileServer:
    """The hostile service (module docstring): `with HostileServer() as s: s.url('bomb')`."""

    def __init__(
        self,
        redirect_to: str = "",
        bomb_bytes: int = 200 << 20,
        big_bytes: int = 20 << 20,
        pad_chars: int = 2 << 20,
        drip_s: float = 0.4,
    ):
        self.redirect_to, self.bomb_bytes, self.big_bytes = redirect_to, bomb_bytes, big_bytes
        self.pad_chars, self.drip_s = pad_chars, drip_s
        self._bomb_body: bytes | None = None
        self.requests: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner._handle(self)

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                self.rfile.read(n)
                owner._handle(self)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]

    def url(self, mode: str, chat: bool = False) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/{'v1' if chat else 'ask'}"

    def bomb(self) -> bytes:
        if self._bomb_body is None:
            self._bomb_body = gzip_zeros(self.bomb_bytes)
        return self._bomb_body

    def __enter__(self) -> HostileServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ behaviours
    def _payload(self, h: BaseHTTPRequestHandler, answer: str) -> bytes:
        if h.path.rstrip("/").endswith("/chat/completions"):
            return json.dumps(chat_reply(answer)).encode()
        return json.dumps({"answer": answer, "ids": ["d1"]}).encode()

    def _send(
        self, h: BaseHTTPRequestHandler, body: bytes, status: int = 200, **headers: str
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            h.send_header(k.replace("_", "-"), v)
        h.end_headers()
        h.wfile.write(body)

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        mode = h.path.strip("/").split("/")[0]
        self.requests.append((mode, dict(h.headers.items())))
        try:
            getattr(self, f"_{mode}", self._ok)(h)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def _ok(self, h: BaseHTTPRequestHandler) -> None:
        self._send(h, self._payload(h, ANSWER))

    def _redirect(self, h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", self.redirect_to)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def _bomb(self, h: BaseHTTPRequestHandler) -> None:
        self._send(h, self.bomb(), Content_Encoding="gzip")

    def _big(self, h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")  # no length declared: counted while read
        h.end_headers()
        block = b" " * (1 << 16)
        chunks = [b'{"answer": "big", "pad": "', *[block] * (self.big_bytes >> 16), b'"}', b""]
        for chunk in chunks:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    def _padded(self, h: BaseHTTPRequestHandler) -> None:
        self._send(h, self._payload(h, ANSWER + " " * self.pad_chars))

    def _drip(self, h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "1000")
        h.end_headers()
        for _ in range(1000):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(self.drip_s)

    def _surrogate(self, h: BaseHTTPRequestHandler) -> None:
        text = self._payload(h, "SURROGATE").replace(b'"SURROGATE"', b'"bad \\ud800 x"')
        self._send(h, text)

    def _deep(self, h: BaseHTTPRequestHandler) -> None:
        self._send(h, b'{"answer": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")

    @staticmethod
    def _headers_sent(h: BaseHTTPRequestHandler) -> str:
        return " ".join(f"{k}={v}" for k, v in h.headers.items())

    def _echo(self, h: BaseHTTPRequestHandler) -> None:
        self._send(h, self._payload(h, f"{ANSWER} (you sent: {self._headers_sent(h)})"))

    def _echo422(self, h: BaseHTTPRequestHandler) -> None:
        detail = f"field required; headers: {self._headers_sent(h)}"
        self._send(h, json.dumps({"detail": [{"msg": detail}]}).encode(), status=422)

    def _gzipped(self, h: BaseHTTPRequestHandler) -> None:
        self._send(h, gzip.compress(self._payload(h, ANSWER)), Content_Encoding="gzip")


class Recorder:
    """A server recording every request's path and headers; answers a plain JSON reply."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                owner.requests.append((self.path, dict(self.headers.items())))
                n = int(self.headers.get("content-length") or 0)
                self.rfile.read(n)
                # a chat reply that an http system's paths read too
                body = json.dumps({**chat_reply(ANSWER), "answer": ANSWER, "ids": ["d1"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _any

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Recorder:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
