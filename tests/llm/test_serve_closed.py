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


def test_an_app_allowing_any_origin_is_closed_to_browsers() -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.applications import Starlette
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from cube.llm.local import close_to_browsers

    def models(request: object) -> JSONResponse:
        return JSONResponse({"data": [{"id": "local"}]})

    def build() -> Starlette:
        app = Starlette(routes=[Route("/v1/models", models, methods=["GET", "POST"])])
        app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"])
        return app

    evil = {"Origin": "http://evil.example"}
    preflight = {**evil, "Access-Control-Request-Method": "POST"}
    with TestClient(build(), base_url="http://127.0.0.1") as open_app:  # as shipped: open
        assert open_app.get("/v1/models", headers=evil).headers["access-control-allow-origin"]
        assert open_app.options("/v1/models", headers=preflight).status_code == 200
    with TestClient(close_to_browsers(build()), base_url="http://127.0.0.1") as closed:
        got = closed.get("/v1/models", headers=evil)
        assert got.status_code == 200 and "access-control-allow-origin" not in got.headers
        pre = closed.options("/v1/models", headers=preflight)
        assert pre.status_code >= 400 and "access-control-allow-origin" not in pre.headers
    with TestClient(close_to_browsers(build()), base_url="http://evil.example") as rebound:
        assert rebound.get("/v1/models").status_code == 400
