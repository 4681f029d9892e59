"""What a dropped connection is called: aiohttp's transport raises it as a timeout, which the
failure reason used to repeat ("Request timed out. (Server disconnected ...)")."""

from __future__ import annotations

import asyncio
import socket
import threading

from cube.config.model_spec import ModelSpec
from cube.llm import Request
from cube.llm.endpoints import Endpoints


def _closing_server() -> tuple[socket.socket, int]:
    """A server on 127.0.0.1 that reads each request and closes the socket without answering."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)

    def serve() -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            c.recv(65536)
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return s, s.getsockname()[1]


def test_a_server_closing_the_connection_is_a_connection_error_named_as_such_not_a_timeout():
    s, port = _closing_server()
    spec = ModelSpec(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_attempts=1, timeout_s=5)

    async def one():
        pool = Endpoints(spec, spec.endpoints(), "k")
        try:
            return await pool.call(
                Request(messages=({"role": "user", "content": "hi"},))
            ), pool.sem.pushback
        finally:
            await pool.close()

    try:
        resp, pushback = asyncio.run(one())
    finally:
        s.close()
    assert not resp.ok and resp.error.startswith("connection error after 1 attempt: ")
    assert "timed out" not in resp.error.lower() and "disconnected" in resp.error.lower()
    assert resp.error.lower().count("disconnected") == 1  # the cause chain's repeats are said once
    assert pushback["timeouts"] == 0  # not congestion: no AIMD cut


def test_a_loop_among_an_errors_causes_ends_the_reason_instead_of_hanging():
    """review4: the de-duplicated cause walk never reached its length bound on a cycle."""
    import openai

    from cube.llm.endpoints import connection_reason
    from cube.llm.http import httpx_module

    a, b = OSError("Server disconnected"), ConnectionError("reset")
    a.__cause__, b.__cause__ = b, a
    exc = openai.APIConnectionError(
        request=httpx_module().Request("POST", "http://127.0.0.1/v1/chat/completions")
    )
    exc.__cause__ = a
    assert connection_reason(exc) == "Connection error. (Server disconnected reset)"
