"""Shared fixtures. `openai_server`: a local OpenAI-compatible endpoint (see
tests/openai_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.openai_server import OpenAIServer


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started `OpenAIServer` on 127.0.0.1 (echo replies, no latency); script it with `.fail`,
    `.reply` and `.latency_s`."""
    with OpenAIServer() as server:
        yield server
