"""The HTTP library under the `openai` client: `httpx2` for openai >= 3, `httpx` before it.

cube uses it directly for what the client does not do (the TLS context its clients share, a local
server's tokenize route). Only the one the installed openai depends on is installed: `httpx` had
come with JupyterLab, which `make run` no longer installs (the extra `cube[lab]`)."""

from __future__ import annotations

import functools
from types import ModuleType


@functools.cache
def httpx_module() -> ModuleType:
    """`httpx2` when installed (openai >= 3), else `httpx`."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx
