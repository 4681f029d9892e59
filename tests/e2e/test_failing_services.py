"""Services that fail, or whose retrieval cannot be measured, end `cube run` with a reason and exit
code 3, never a traceback (issue 37, items 2 and 4).

One run of stages 01-06 on 8 demo questions with six http systems, each a route of one stdlib
server on 127.0.0.1 (plus a port nobody listens on): FastAPI's 422 with its `{"detail": [...]}`
body, a 500, a 200 HTML error page, connection refused, a service answering knowledge-base ids in
the wrong case, and one whose passages are text of no document."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from cube import cli
from cube.kb.demo import generate_demo_corpus
from tests import ROOT

pytestmark = pytest.mark.e2e
N, SEED = 8, 5
DETAIL = {"detail": [{"loc": ["body", "query"], "msg": "Field required", "type": "missing"}]}


def _reply(path: str) -> tuple[int, str, bytes]:
    ids = generate_demo_corpus(N, "zh", seed=SEED)["doc_id"].str.lower().tolist()
    if path == "/422":
        return 422, "application/json", json.dumps(DETAIL).encode()
    if path == "/500":
        return 500, "text/plain", b"Internal Server Error: the index is rebuilding"
    if path == "/html":
        return 200, "text/html", b"<html><body><h1>Maintenance tonight</h1></body></html>"
    if path == "/case":
        return 200, "application/json", json.dumps({"answer": "ok", "doc_ids": ids[:3]}).encode()
    chunks = ["The weekend weather will be mild, with light rain on Sunday afternoon."]
    return 200, "application/json", json.dumps({"answer": "ok", "chunks": chunks}).encode()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, kind, body = _reply(self.path)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _system(name: str, url: str, **response: str) -> dict:
    return {
        "kind": "http",
        "name": name,
        "url": url,
        "body": {"question": "{question}"},
        "response": {"answer": "answer", **(response or {"retrieved_ids": "doc_ids"})},
        "timeout_s": 2,
        "max_attempts": 1,
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failing")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    systems = [  # the first is the decision's (its withheld verdict: exit 3, the first screen)
        _system("foreign-chunks", f"{base}/chunks", retrieved_passages="chunks"),
        _system("fastapi-422", f"{base}/422"),
        _system("error-500", f"{base}/500"),
        _system("html-page", f"{base}/html"),
        _system("down", f"http://127.0.0.1:{_free_port()}/ask"),
        _system("wrong-case", f"{base}/case"),
    ]
    params = {
        "run": "failing",
        "outputs_dir": str(tmp / "out"),
        "corpus": {"source": "demo", "n_items": N, "seed": SEED},
        "questions": {"generator": "template", "seed": 7},
        "answerer": {"provider": "offline", "model": "extractive"},
        "systems": systems,
        "judges": [
            {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
            {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
        ],
        "analysis": {"bootstrap": 20},
        "human": {"sample_size": 4, "seed": 1},
    }
    path = tmp / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["run", str(path), "--only", "01..06"])
    finally:
        mp.undo()
        server.shutdown()
    return code, out.getvalue(), err.getvalue(), tmp / "out" / "failing"


def test_failing_services_end_with_their_reasons_and_exit_3(run):
    code, out, err, root = run
    assert code == 3, (out, err)
    assert "Traceback" not in out + err
    # each failing system: the count, the status and an excerpt of what came back
    assert "fastapi-422: 8 of 8 calls to the system failed" in err
    assert "HTTP 422" in err and "Field required" in err
    assert "HTTP 500" in err and "the index is rebuilding" in err
    assert "not JSON" in err and "Maintenance tonight" in err
    assert "down: 8 of 8 calls to the system failed" in err and "connection refused" in err
    lines = {line.split()[0]: line for line in out.splitlines() if "CuBE" in line}
    for name in ("fastapi-422", "error-500", "html-page", "down"):
        assert "WITHHELD" in lines[name] and "R@8 n/a" in lines[name], lines[name]
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    assert results["answers_failures"]["error-500"]["reasons"][0]["count"] == N
    assert (root / "report" / "index.html").exists()  # published: the earlier results are kept


def test_retrieval_that_does_not_map_is_withheld_not_scored_as_a_miss(run):
    code, out, err, root = run
    lines = {line.split()[0]: line for line in out.splitlines() if "CuBE" in line}
    case, chunks = lines["wrong-case"], lines["foreign-chunks"]
    assert "R@8 n/a" in case and "WITHHELD: 24 of 24 retrieved ids are not knowledge-base" in case
    assert "'d00001' -> 'D00001'" in case  # the did-you-mean
    assert "R@8 n/a" in chunks
    assert "WITHHELD: 8 of 8 retrieved passages matched no document" in chunks
    assert "retrieval not measured" in chunks
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    assert results["answers_retrieval"]["wrong-case"] == {
        "passages": 0,
        "unmapped_passages": 0,
        "tied_passages": 0,
        "ids": 24,
        "unknown_ids": 24,
        "undetermined_questions": 0,
    }
    index = (root / "report" / "index.html").read_text(encoding="utf-8")
    first_screen = index[index.index('id="withheld-reasons"') :][:600]
    assert "8 of 8 retrieved passages matched no document: retrieval not measured" in first_screen
    assert "not measured" in index[index.index('id="recall"') :][:300]  # R@k: not 0
