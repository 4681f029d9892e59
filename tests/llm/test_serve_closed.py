"""`cube serve`'s server is closed to web pages (issue 38): llama-cpp-python's app allows every
origin; `close_to_browsers` removes that CORS middleware and answers only requests addressed to
127.0.0.1 or localhost. The app-level test needs starlette (the extra cube[local]); the real
server is checked in tests/llm/test_local_llm_real.py."""

from __future__ import annotations

import sys

import pytest

from cube.llm.local import LocalServer


def test_the_server_is_started_through_the_closing_launcher() -> None:
    cmd = LocalServer(model=None, port=1234).command()
    assert cmd[:3] == [sys.executable, "-m", "cube.llm.local"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


def _asgi(app: object, method: str, host: str, headers: dict[str, str]) -> tuple[int, dict]:
    """One request to an ASGI app, in process (no HTTP client needed): status and headers."""
    import asyncio

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/v1/models",
        "raw_path": b"/v1/models",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", host.encode())]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8765),
    }
    got: dict = {}

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            got["status"] = message["status"]
            got["headers"] = {k.decode().lower(): v.decode() for k, v in message["headers"]}

    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    return got["status"], got["headers"]


# starlette comes with the extra cube[local] (llama-cpp-python's server): `make test-local-llm`
@pytest.mark.local_llm
def test_an_app_allowing_any_origin_is_closed_to_browsers() -> None:
    pytest.importorskip("starlette")
    from starlette.applications import Starlette
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from cube.llm.local import close_to_browsers

    def models(request: object) -> JSONResponse:
        return JSONResponse({"data": [{"id": "local"}]})

    def build() -> Starlette:
        app = Starlette(routes=[Route("/v1/models", models, methods=["GET", "POST"])])
        app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"])
        return app

    evil = {"Origin": "http://evil.example"}
    preflight = {**evil, "Access-Control-Request-Method": "POST"}
    # as llama-cpp-python ships it: any page may read the replies
    status, headers = _asgi(build(), "GET", "127.0.0.1:8765", evil)
    assert status == 200 and headers["access-control-allow-origin"] == "*"
    assert _asgi(build(), "OPTIONS", "127.0.0.1:8765", preflight)[0] == 200
    closed = close_to_browsers(build())
    status, headers = _asgi(closed, "GET", "127.0.0.1:8765", evil)
    assert status == 200 and "access-control-allow-origin" not in headers
    status, headers = _asgi(closed, "OPTIONS", "127.0.0.1:8765", preflight)
    assert status >= 400 and "access-control-allow-origin" not in headers
    assert _asgi(closed, "GET", "localhost:8765", {})[0] == 200
    assert _asgi(closed, "GET", "evil.example", {})[0] == 400  # a DNS-rebound page's request
