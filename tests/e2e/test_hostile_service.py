"""End to end (issue 38 items 1-2): a run whose http systems answer with hostile replies
(tests/hostile_server.py) completes, each bad reply a failed row of its own system, and a key the
service echoes back is found in no file of the run folder, the cache or the executed notebooks.

One run, stages 01-03 (every call of an http system and its scoring): `echo` repeats every request
header, its `X-Api-Key` canary included; `surrogate` answers with a lone `\\ud800` escape (stored
as U+FFFD, not a pyarrow crash); `deep` answers JSON nested 200,000 levels (a failed row with its
reason, not a RecursionError for every system); the builtin system is scored as usual. A params
file whose url carries a `?code=` canary is refused before anything is written.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.config.params import ParamsError
from cube.run.execute import execute_run
from tests import ROOT
from tests.hostile_server import HostileServer

pytestmark = pytest.mark.e2e
CANARY = "canary-key-Zq8xT4mW2nR7vK9pL3sB6dF1"
URL_CANARY = "urlcanary7Qx9"
OFFLINE = {"provider": "offline", "model": "extractive"}


def _http(name: str, url: str) -> dict:
    return {
        "kind": "http",
        "name": name,
        "url": url,
        "top_n": 4,
        "timeout_s": 5,
        "max_attempts": 1,
        "header_env": {"X-Api-Key": "HOSTILE_KEY"},
        "body": {"question": "{question}"},
        "response": {"answer": "answer", "retrieved_ids": "ids"},
    }


def _params(tmp: Path, systems: list[dict]) -> Path:
    data = {
        "run": "hostile",
        "lang": "en",
        "outputs_dir": str(tmp / "out"),
        "corpus": {"source": "demo", "n_items": 8, "seed": 1},
        "questions": {"generator": "template", "seed": 1},
        "answerer": OFFLINE,
        "judges": [{"name": "rubric", "model": {"provider": "offline", "model": "rubric"}}],
        "systems": systems,
    }
    path = tmp / "p.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _texts(path: Path) -> list[str]:
    """Every text a file holds: its bytes, a zip's (xlsx) members, a parquet's cells."""
    raw = path.read_bytes()
    out = [raw.decode("utf-8", "replace")]
    if zipfile.is_zipfile(io.BytesIO(raw)):
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            out += [z.read(n).decode("utf-8", "replace") for n in z.namelist()]
    if path.suffix == ".parquet":
        out.append(pd.read_parquet(path).astype(str).to_csv())
    return out


def test_hostile_replies_fail_their_own_rows_and_an_echoed_key_is_nowhere(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HOSTILE_KEY", CANARY)
    with HostileServer() as hostile:
        systems = [
            {"kind": "builtin", "name": "bm25", "top_n": 4},
            _http("echo", hostile.url("echo")),
            _http("surrogate", hostile.url("surrogate")),
            _http("deep", hostile.url("deep")),
        ]
        summary = execute_run(_params(tmp_path, systems), only="01..03", log=lambda _: None)
        sent = [v for _, h in hostile.requests for k, v in h.items() if k.lower() == "x-api-key"]
    assert summary.ok
    assert CANARY in sent  # the key was sent, and echoed back
    answers = pd.read_parquet(tmp_path / "out" / "hostile" / "data" / "answers.parquet")
    rag = answers[answers["set"] == "rag"].set_index("system")
    assert rag.loc["deep", "error"].str.contains("nested deeper").all()
    assert rag.loc["surrogate", "error"].eq("").all()
    assert rag.loc["surrogate", "answer"].str.contains("\ufffd").all()
    assert rag.loc["echo", "answer"].str.contains("[redacted]", regex=False).all()
    assert rag.loc["bm25", "error"].eq("").all()
    scores = pd.read_parquet(tmp_path / "out" / "hostile" / "data" / "scores.parquet")
    assert {"bm25", "echo", "surrogate"} <= set(scores["system"])
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert any(p.name == "cache.sqlite" for p in files) and any(p.suffix == ".ipynb" for p in files)
    leaks = [str(p) for p in files if any(CANARY in t for t in _texts(p))]
    assert leaks == []


def test_a_url_with_a_code_canary_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HOSTILE_KEY", CANARY)
    url = f"http://127.0.0.1:9/ask?code={URL_CANARY}"
    with pytest.raises(ParamsError) as err:
        execute_run(_params(tmp_path, [_http("svc", url)]), log=lambda _: None)
    assert "code=..." in str(err.value) and URL_CANARY not in str(err.value)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "p.yaml"]
    assert not any(URL_CANARY in t for p in files for t in _texts(p))
