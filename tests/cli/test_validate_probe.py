"""`cube validate --check-endpoints` sends each http system one real question and calls a python
system once, showing what came back and what the response paths extracted (issue 37, item 4):
a FastAPI 422, an HTML page, a refused port, and a reply whose ids are in the wrong case."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from cube import cli
from cube.kb.demo import generate_demo_corpus
from tests import ROOT

N, SEED = 6, 4
IDS = generate_demo_corpus(N, "zh", seed=SEED)["doc_id"].tolist()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        if self.path == "/422":
            status, kind = 422, "application/json"
            data = json.dumps({"detail": [{"loc": ["body", "query"], "msg": "Field required"}]})
        elif self.path == "/html":
            status, kind, data = 200, "text/html", "<html><h1>Gateway maintenance</h1></html>"
        else:
            status, kind = 200, "application/json"
            data = json.dumps({"result": {"text": "Bring your ID card.", "docs": [IDS[1].lower()]}})
        raw = data.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.bodies = []  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _params(tmp: Path, systems: list[dict]) -> Path:
    path = tmp / "params.yaml"
    data = {
        "run": "probe",
        "outputs_dir": str(tmp / "out"),
        "corpus": {"source": "demo", "n_items": N, "seed": SEED},
        "questions": {"generator": "template", "seed": 1},
        "answerer": {"provider": "offline", "model": "extractive"},
        "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
        "systems": systems,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _http(name: str, url: str) -> dict:
    return {
        "kind": "http",
        "name": name,
        "url": url,
        "body": {"question": "{question}"},
        "response": {"answer": "result.text", "retrieved_ids": "result.docs"},
        "timeout_s": 2,
    }


def test_each_system_gets_one_question_and_shows_the_reply_and_what_was_extracted(
    tmp_path, server, capsys, monkeypatch
):
    monkeypatch.chdir(ROOT)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    params = _params(
        tmp_path,
        [
            _http("good", f"{base}/ok"),
            _http("fastapi", f"{base}/422"),
            _http("html", f"{base}/html"),
            _http("down", f"http://127.0.0.1:{_free_port()}/ask"),
        ],
    )
    code = cli.main(["validate", str(params), "--check-endpoints"])
    out, err = capsys.readouterr()
    assert code == 2  # three systems cannot be used as configured
    assert len(server.bodies) == 3 and all("question" in b for b in server.bodies)  # one each
    assert '"result": {"text": "Bring your ID card."' in err  # the reply, as it came
    assert "good: extracted answer: Bring your ID card." in err
    assert f"extracted ids ['unmapped:{IDS[1].lower()}']" in err
    assert f"did you mean '{IDS[1].lower()}' -> '{IDS[1]}'" in err
    assert "fastapi: the call failed: HTTP 422" in err and "Field required" in err
    assert "html: the call failed" in err and "Gateway maintenance" in err
    assert "down: the call failed" in err and "connection refused" in err
    assert "4 preflight problem(s)" not in out and "3 preflight problem(s)" in out
    assert "Traceback" not in out + err


def test_a_python_system_is_called_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = tmp_path / "probe_target.py"
    module.write_text(
        "CALLS = []\n"
        "def answer(q):\n"
        "    CALLS.append(q.text)\n"
        f"    return {{'answer': 'fine', 'retrieved_ids': [{IDS[0]!r}]}}\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    params = _params(
        tmp_path, [{"kind": "python", "name": "fn", "callable": "probe_target:answer"}]
    )
    code = cli.main(["validate", str(params), "--check-endpoints"])
    out, err = capsys.readouterr()
    import probe_target

    assert code == 0, out + err
    assert len(probe_target.CALLS) == 1
    assert "fn: extracted answer: fine" in err and f"extracted ids ['{IDS[0]}']" in err
