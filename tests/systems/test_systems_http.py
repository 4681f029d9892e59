"""`kind: http`: a user's RAG service behind a JSON endpoint, against a real small RAG service on
127.0.0.1 (tests/systems/rag_service.py: bm25s over the run's corpus, extractive answers) in the
ids shape and in RAGFlow's OpenAI-compatible chat shape with references.

Faults (HTTP 500, a hang past the timeout, malformed JSON, a connection closed mid-body, a path that
finds nothing, a 401 echoing the credential) are failed rows with their reason, never scored; the
call cache serves a re-run, so it sends only what failed, and then nothing.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import jmespath
import pandas as pd
import pytest
import yaml

from cube.config.http_system import HTTP_PRESETS
from cube.config.params import ParamsError, parse_params
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions
from cube.llm.preflight import check_keys
from cube.run.execute import execute_run
from cube.systems import build_answers, make_system
from cube.systems.http import fill
from cube.systems.passages import map_passages
from cube.systems.retrieved import TIED
from tests import ROOT
from tests.systems.rag_service import RagService

SECRET = "Bearer tok-DO-NOT-LEAK-5c1e9a"
OFFLINE = {"provider": "offline", "model": "extractive"}
BASE: dict[str, Any] = {
    "run": "http",
    "lang": "en",
    "corpus": {"source": "demo", "n_items": 8, "seed": 1},
    "questions": {"generator": "template", "seed": 1},
    "answerer": OFFLINE,
    "judges": [{"name": "rubric", "model": {"provider": "offline", "model": "rubric"}}],
}
IDS = {
    "body": {"question": "{question}", "k": "{top_n}", "id": "{question_id}"},
    "response": {"answer": "answer", "retrieved_ids": "doc_ids"},
}


def params_for(system: dict[str, Any], **top: Any):
    return parse_params({**BASE, **top, "systems": [system]}, "p.yaml")


def http_entry(url: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "http", "name": "svc", "url": url, "top_n": 4, "timeout_s": 1.0, **fields}


@pytest.fixture(scope="module")
def kb() -> tuple[pd.DataFrame, pd.DataFrame]:
    params = parse_params(BASE)
    corpus = build_corpus(params)
    return corpus, build_questions(params, corpus, None)


def truth(service: RagService, question: str) -> list[str]:
    """The doc ids the service retrieved for `question` (its own bm25s ranking)."""
    return [service.doc_ids[r] for r in service.retrieve(question, 4)]


def rag_rows(answers: pd.DataFrame) -> pd.DataFrame:
    return answers[answers["set"] == "rag"].set_index("question_id")


# ------------------------------------------------------------------------------- params
def test_an_http_system_needs_its_answerer_and_says_why() -> None:
    top = {k: v for k, v in BASE.items() if k != "answerer"}
    with pytest.raises(ParamsError) as err:
        parse_params({**top, "systems": [http_entry("http://h/ask", **IDS)]}, "p.yaml")
    assert "systems[svc] (http): set `answerer`" in str(err.value)
    assert "a different model would move 0 and 100" in str(err.value)
    ok = parse_params({**top, "systems": [http_entry("http://h/ask", **IDS, answerer=OFFLINE)]})
    assert ok.system_answerer(ok.systems[0]) == ok.systems[0].answerer


def test_every_mistake_of_an_http_entry_is_named_at_once_and_no_secret_is_repeated() -> None:
    entry = http_entry(
        "http://u:pw@h/ask?token=abc",
        headers={"Authorization": SECRET, "X-Tenant": "sk-live-abcdefgh1234", "X-Ok": "plain"},
        header_env={"X-Key": "sk-abcdefghijklmnopqrstu1234"},
        body={"q": "{question}", "n": "{k}"},
        response={"answer": "choices[0", "retrieved_ids": None},
    )
    with pytest.raises(ParamsError) as err:
        params_for(entry)
    text = str(err.value)
    for expected in (
        "contains credentials",
        "headers[Authorization] looks like a credential",
        "headers[X-Tenant] looks like a credential",
        "header_env[X-Key] must be the NAME of an environment variable",
        "response.answer: not a JMESPath expression",
        "response: give retrieved_ids",
        "body: unknown placeholder(s) {k}",
    ):
        assert expected in text, (expected, text)
    assert "X-Ok" not in text
    for secret in (SECRET, "tok-DO-NOT-LEAK", "sk-live-abcdefgh1234", "sk-abcdefghij", "pw@"):
        assert secret not in text


# Credential headers of real services (and ordinary ones): the plain-header check on known truth.
SECRET_HEADERS = [
    "Authorization",  # OpenAI, RAGFlow, Dify, most APIs
    "Proxy-Authorization",
    "Cookie",
    "X-API-Key",  # FastAPI's APIKeyHeader examples, many gateways
    "api-key",  # Azure OpenAI
    "x-goog-api-key",  # Google
    "Ocp-Apim-Subscription-Key",  # Azure API Management
    "X-Auth-Token",
    "x-access-token",
    "X-Amz-Security-Token",  # AWS
    "X-Client-Secret",
    "X-Session-Id",
]
PLAIN_HEADERS = ["Accept-Language", "X-Tenant", "X-Request-Id", "Content-Language", "X-Region"]


def test_credential_headers_of_real_services_are_refused_and_ordinary_ones_kept() -> None:
    wrong = []
    for name in SECRET_HEADERS + PLAIN_HEADERS:
        entry = http_entry("http://h/ask", headers={name: "value-123"}, **IDS)
        try:
            params_for(entry)
            refused = False
        except ParamsError as err:
            refused = "looks like a credential" in str(err) and "value-123" not in str(err)
        if refused != (name in SECRET_HEADERS):
            wrong.append(name)
    assert wrong == []
    # a credential value under an ordinary name is refused too
    for value in ("Bearer abc.def", "Basic dXNlcjpwdw==", "sk-proj-abcdefgh12345678"):
        with pytest.raises(ParamsError, match="looks like a credential"):
            params_for(http_entry("http://h/ask", headers={"X-Tenant": value}, **IDS))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"q": "hello"}, "no {question} placeholder"),
        ('{"q": "{question}"}', "not JSON once its placeholders are filled"),
        (None, "body: give the JSON body template"),
    ],
)
def test_a_body_that_cannot_work_is_refused(body: Any, why: str) -> None:
    with pytest.raises(ParamsError, match=why.replace("{", r"\{").replace("(", r"\(")):
        params_for(http_entry("http://h/ask", body=body, response=IDS["response"]))


def test_a_preset_fills_body_and_paths_and_what_the_entry_gives_wins() -> None:
    (sp,) = params_for(http_entry("http://h/x", preset="openai_chat_references")).systems
    preset = HTTP_PRESETS["openai_chat_references"]
    assert sp.body == preset["body"] and sp.body["extra_body"] == {"reference": True}
    assert sp.response.answer == "choices[0].message.content"
    own = {"retrieved_ids": "metadata.retriever_resources[*].document_name"}
    (dify,) = params_for(
        http_entry("http://h/x", preset="dify_chat_messages", response=own)
    ).systems
    assert dify.response.retrieved_ids == own["retrieved_ids"] and dify.response.answer == "answer"
    assert dify.body["response_mode"] == "blocking"


# The response shapes the presets read, as RAGFlow's and Dify's documentation show them
# (ragflow.io/docs/http_api_reference "Create chat completion" / "Create agent completion",
# non-stream; docs.dify.ai "Send Chat Message", blocking mode), cut to the fields read.
RAGFLOW_CHAT = {  # the chat route: `chunks_format`'s list beside the message
    "choices": [
        {
            "message": {
                "content": "Neovim installs with make.",
                "reference": [
                    {"id": "4b89", "content": "cd /usr/ports/editors/neovim/ && make install"},
                    {"id": "4b90", "content": "Termux offers a Neovim package."},
                ],
                "role": "assistant",
            }
        }
    ]
}
RAGFLOW_AGENT = {  # the documented example: chunks keyed by their position
    "choices": [
        {
            "message": {
                "content": "To install Neovim ...",
                "reference": {
                    "chunks": {"20": {"content": "make install", "document_id": "4bdd"}},
                    "doc_aggs": {"INSTALL22.md": {"doc_id": "4bdd", "count": 3}},
                },
            }
        }
    ]
}
DIFY = {
    "event": "message",
    "answer": "iPhone 13 Pro Max specs are listed here:...",
    "metadata": {"retriever_resources": [{"position": 1, "content": '"iPhone 13 Pro Max"'}]},
}


@pytest.mark.parametrize(
    ("preset", "reply", "answer", "passages"),
    [
        ("openai_chat_references", RAGFLOW_CHAT, "Neovim installs with make.", 2),
        ("openai_chat_references", RAGFLOW_AGENT, "To install Neovim ...", 1),
        ("dify_chat_messages", DIFY, "iPhone 13 Pro Max specs are listed here:...", 1),
    ],
)
def test_the_presets_read_the_documented_reply_shapes(preset, reply, answer, passages) -> None:
    paths = HTTP_PRESETS[preset]["response"]
    assert jmespath.search(paths["answer"], reply) == answer
    found = jmespath.search(paths["retrieved_passages"], reply)
    assert isinstance(found, list) and len(found) == passages and all(found)
    empty = json.loads(json.dumps(reply).replace('"reference": [', '"reference": [], "x": ['))
    if preset == "openai_chat_references" and reply is RAGFLOW_CHAT:
        assert jmespath.search(paths["retrieved_passages"], empty) == []  # retrieved nothing
    no_ref = {"choices": [{"message": {"content": "x"}}]} if preset != "dify_chat_messages" else {}
    assert jmespath.search(paths["retrieved_passages"], no_ref) is None  # found nothing


def test_the_body_template_takes_json_safe_values() -> None:
    q = 'What does "D1" {cost}?\nA \\ backslash'
    values = {"question": q, "question_id": "q1", "top_n": 8, "lang": "en", "region": None}
    body = {"q": "{question}", "k": "{top_n}", "r": "{region}", "msg": "[{lang}] {question}"}
    assert fill(body, values) == {"q": q, "k": 8, "r": None, "msg": f"[en] {q}"}
    assert fill('{"q": {question}, "k": {top_n}, "r": {region}}', values) == {
        "q": q,
        "k": 8,
        "r": None,
    }
    assert fill(["{question_id}", {"deep": ["{top_n}"]}], values) == ["q1", {"deep": [8]}]


def test_a_missing_header_variable_is_listed_by_the_preflight(monkeypatch) -> None:
    monkeypatch.delenv("CUBE_HTTP_AUTH", raising=False)
    params = params_for(
        http_entry("http://h/ask", header_env={"Authorization": "CUBE_HTTP_AUTH"}, **IDS)
    )
    (line,) = check_keys(params)
    assert "CUBE_HTTP_AUTH (header_env)" in line and "system 'svc' (HTTP at http://h/ask)" in line


# ------------------------------------------------------------------------------- calls
def test_the_ids_shape_answers_every_question_with_the_services_ranking(
    kb, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-of-the-judges")  # the openai client would send it
    corpus, questions = kb
    with RagService(corpus, shape="ids") as service:
        params = params_for(http_entry(service.url, **IDS))
        answers = build_answers(params, corpus, questions, tmp_path / "c.sqlite", progress=False)
        sent = service.requests_total
        headers = service.headers
        bodies = service.bodies
        expected = {q: truth(service, q) for q in questions["question"]}
    rag = rag_rows(answers)
    assert sent == len(questions) and rag["error"].eq("").all() and rag["retrieval_ok"].all()
    for qid, question in zip(questions["question_id"], questions["question"], strict=True):
        assert rag.loc[qid, "retrieved_doc_ids"] == expected[question]
        assert isinstance(rag.loc[qid, "answer"], str) and rag.loc[qid, "answer"]
    assert (rag["rank"] > 0).sum() >= len(questions) // 2  # bm25 finds most gold documents
    assert {b["k"] for b in bodies} == {4} and {b["id"] for b in bodies} == set(
        questions["question_id"]
    )
    # only the request's own headers: no placeholder key, no OpenAI account ids, no SDK headers
    own = {"host", "accept-encoding", "connection", "accept", "content-type", "content-length"}
    assert all(set(h) == own | {"user-agent"} for h in headers), headers[0]
    assert all(h["user-agent"] == "cube-workbench" for h in headers)
    assert (rag["model"] == "http:svc").all() and rag["cost"].isna().all()
    assert (rag["answerer"] == "extractive").all()
    bounds = answers[answers["set"] != "rag"]  # the bounds come from the answerer, not the service
    assert len(bounds) == 2 * len(questions) and bounds["error"].eq("").all()


def test_each_fault_is_a_failed_row_with_its_reason_and_the_rest_are_answered(kb, tmp_path) -> None:
    corpus, questions = kb
    qs = questions["question"].tolist()
    faults = {qs[0]: "500", qs[1]: "hang", qs[2]: "malformed", qs[3]: "close", qs[4]: "no_answer"}
    with RagService(corpus, shape="ids") as service:
        for question, kind in faults.items():
            service.fail(kind, times=None, when=lambda q, x=question: q == x, delay_s=2.5)
        params = params_for(http_entry(service.url, max_attempts=2, **IDS))
        answers = build_answers(params, corpus, questions, tmp_path / "c.sqlite", progress=False)
        counts = dict(service.by_question)
    rag = rag_rows(answers)
    by_q = dict(zip(questions["question"], questions["question_id"], strict=True))
    reasons = {
        "500": "HTTP 500 after 2 attempts: Internal Server Error (test fault)",
        "hang": "timeout after 2 attempts: no answer within 1 s",
        "malformed": "malformed response after 2 attempts: not JSON",
        "close": "connection error after 2 attempts",
        "no_answer": "malformed response after 2 attempts: response.answer 'answer' found nothing",
    }
    for question, kind in faults.items():
        row = rag.loc[by_q[question]]
        assert row["error"].startswith(reasons[kind]), (kind, row["error"])
        assert pd.isna(row["answer"]) and not row["retrieval_ok"] and row["rank"] == 0
        assert counts[question] == 2  # retried once, like any call
    fine = rag[~rag.index.isin([by_q[q] for q in faults])]
    assert fine["error"].eq("").all() and fine["answer"].notna().all() and len(fine) == 3
    assert all(counts[q] == 1 for q in qs[5:])


def test_a_401_stops_the_service_at_once_and_its_echoed_secret_is_scrubbed(
    kb, tmp_path, monkeypatch
) -> None:
    corpus, questions = kb
    monkeypatch.setenv("CUBE_HTTP_AUTH", SECRET)
    cache = tmp_path / "c.sqlite"
    with RagService(corpus, shape="ids") as service:
        service.fail("401", times=None)
        entry = http_entry(service.url, header_env={"Authorization": "CUBE_HTTP_AUTH"}, **IDS)
        entry["max_concurrency"] = 1
        answers = build_answers(params_for(entry), corpus, questions, cache, progress=False)
        sent, seen = service.requests_total, service.headers
    rag = rag_rows(answers)
    assert sent == 1 and seen[0]["authorization"] == SECRET  # sent, and only the first request
    assert rag["answer"].isna().all() and not rag["retrieval_ok"].any()
    assert (
        rag["error"].str.contains("HTTP 401").all()
        and rag["error"].str.contains(r"\[redacted\]").all()
    )
    assert (rag["error"].str.startswith("not sent: endpoint stopped after HTTP 401")).sum() == 7
    stored = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not any(b"DO-NOT-LEAK" in p.read_bytes() for p in stored) and not any(
        "DO-NOT-LEAK" in str(v) for v in answers.astype(str).to_numpy().ravel()
    )


def test_a_rerun_sends_only_what_failed_and_then_nothing(kb, tmp_path) -> None:
    corpus, questions = kb
    q0 = questions["question"].iloc[0]
    cache = tmp_path / "c.sqlite"
    with RagService(corpus, shape="ids") as service:
        params = params_for(http_entry(service.url, max_attempts=1, **IDS))
        service.fail("500", times=None, when=lambda q: q == q0)
        first = build_answers(params, corpus, questions, cache, progress=False)
        service.clear_faults()
        before = service.requests_total
        second = build_answers(params, corpus, questions, cache, progress=False)
        retried = service.requests_total - before
        third = build_answers(params, corpus, questions, cache, progress=False)
        after = service.requests_total - before - retried
    assert rag_rows(first)["error"].ne("").sum() == 1
    assert retried == 1 and service.by_question[q0] == 2  # the failed question only
    assert after == 0  # everything is in the cache now
    assert rag_rows(third)["error"].eq("").all() and rag_rows(third)["cached"].all()
    pd.testing.assert_frame_equal(
        rag_rows(second)[["answer", "retrieved_doc_ids", "rank"]],
        rag_rows(third)[["answer", "retrieved_doc_ids", "rank"]],
    )


def test_a_get_endpoint_receives_the_body_as_query_parameters(kb, tmp_path) -> None:
    corpus, questions = kb
    with RagService(corpus, shape="ids") as service:
        entry = http_entry(service.url, method="GET", **IDS)
        answers = build_answers(params_for(entry), corpus, questions, tmp_path / "c.sqlite")
        bodies = service.bodies
    assert rag_rows(answers)["error"].eq("").all()
    assert {b["k"] for b in bodies} == {"4"} and {b["question"] for b in bodies} == set(
        questions["question"]
    )


def test_the_chat_shape_maps_its_reference_passages_to_documents(kb, tmp_path) -> None:
    corpus, questions = kb
    with RagService(corpus, shape="chat") as service:
        entry = http_entry(service.url, preset="openai_chat_references")
        system = make_system(params_for(entry).systems[0], params_for(entry), tmp_path / "c.db")
        with warnings.catch_warnings():  # unmatched passages warn; near-duplicate ties do not
            warnings.simplefilter("ignore")
            rag = system.answer(questions, corpus, progress=False).set_index("question_id")
        replies = [service.reply(b)[1] for b in service.bodies]
        by_question = {
            str(b["messages"][-1]["content"]): r
            for b, r in zip(service.bodies, replies, strict=True)
        }
        expected = {q: truth(service, q) for q in questions["question"]}
    assert all(b["extra_body"] == {"reference": True} and not b["stream"] for b in service.bodies)
    passages = [
        [c["content"] for c in by_question[q]["choices"][0]["message"]["reference"]]
        for q in questions["question"]
    ]
    mapped, unmatched = map_passages(passages, corpus)
    counts = rag.attrs["retrieved"]  # ties (near-duplicates) and text of no document, apart
    assert counts.unmapped_passages + counts.tied_passages == unmatched > 0
    assert rag.attrs["unmapped"] == counts.unmapped_passages
    for (qid, question), docs in zip(
        zip(questions["question_id"], questions["question"], strict=True), mapped, strict=True
    ):
        # a tie keeps its rank with the documents it may be (unmapped:passage<k>:tied:D1|D2)
        got = [d.split(TIED)[0] for d in rag.loc[qid, "retrieved_doc_ids"]]
        assert got == docs[:4]
        # every mapped document is one the service retrieved, in the service's order
        order = [expected[question].index(d) for d in got if not d.startswith("unmapped:")]
        assert order == sorted(order), (got, expected[question])
    assert rag["error"].eq("").all() and (rag["rank"] > 0).any()


# ------------------------------------------------------------------------------- cube run
def write_params(tmp_path: Path, systems: list[dict[str, Any]]) -> Path:
    data = {**BASE, "outputs_dir": str(tmp_path / "out"), "systems": systems}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_cube_run_with_both_shapes_records_faults_and_a_rerun_sends_only_what_failed(
    kb, tmp_path, monkeypatch
) -> None:
    # One run, two systems: the ids-shape service and the chat-shape one. Stages 01-03 hold every
    # call of an HTTP system and its scoring (the full 13 stages took 196 s on the shared 2 cores);
    # that a re-run with nothing failed sends nothing at all is
    # test_a_rerun_sends_only_what_failed_and_then_nothing (the function stage 02 calls).
    monkeypatch.chdir(ROOT)
    corpus, questions = kb
    qs = questions["question"].tolist()
    faults = {"ids": {qs[0]: "500", qs[1]: "hang"}, "chat": {qs[2]: "malformed", qs[3]: "close"}}
    with RagService(corpus, shape="ids") as ids, RagService(corpus, shape="chat") as chat:
        services = {"ids": ids, "chat": chat}
        systems = [
            {**http_entry(ids.url, max_attempts=2, **IDS), "name": "ids"},
            {
                **http_entry(chat.url, max_attempts=2, preset="openai_chat_references"),
                "name": "chat",
            },
        ]
        params = write_params(tmp_path, systems)
        for shape, failing in faults.items():
            for question, kind in failing.items():
                services[shape].fail(
                    kind, times=None, when=lambda q, x=question: q == x, delay_s=2.5
                )
        first = execute_run(params, only="01..03", log=lambda _: None)
        sent = [{k: s.requests_total for k, s in services.items()}]
        scores = pd.read_parquet(tmp_path / "out" / "http" / "data" / "scores.parquet")
        answers = pd.read_parquet(tmp_path / "out" / "http" / "data" / "answers.parquet")
        for service in services.values():
            service.clear_faults()
        # a plain re-run executes stage 02 again (it holds failed calls): the answered questions
        # come from the cache, only the failed ones are sent (once each: they answer now)
        second = execute_run(params, only="02", log=lambda _: None)
        sent.append({k: s.requests_total for k, s in services.items()})
        by_question = {k: dict(s.by_question) for k, s in services.items()}
    assert first.ok and second.ok
    n = len(questions)
    assert sent[0] == {"ids": n - 2 + 2 * 2, "chat": n - 2 + 2 * 2}  # two failing, tried twice
    assert sent[1] == {"ids": n + 4, "chat": n + 4}  # the re-run sent the failed questions only
    for shape, failing in faults.items():
        assert all(by_question[shape][q] == (3 if q in failing else 1) for q in qs)
    assert first.stages[1].failed_calls == 4 and second.stages[0].failed_calls == 0
    ids_of = questions.set_index("question")["question_id"]
    rag = answers[answers["set"] == "rag"].set_index(["system", "question_id"])
    reasons = {
        "500": "HTTP 500 after 2",
        "hang": "timeout after 2",
        "malformed": "malformed response after 2",
        "close": "connection error after 2",
    }
    for shape, failing in faults.items():
        for question, kind in failing.items():
            row = rag.loc[(shape, ids_of[question])]
            assert row["error"].startswith(reasons[kind]) and pd.isna(row["answer"]), row["error"]
            assert not row["retrieval_ok"]
            # a failed answer is never scored: its score rows are skipped, not zero
            judged = scores[
                (scores["system"] == shape)
                & (scores["set"] == "rag")
                & (scores["question_id"] == ids_of[question])
            ]
            assert len(judged) and judged["score"].isna().all()
            assert set(judged["error_kind"]) == {"skipped"}
    answered = rag[rag["error"] == ""]
    assert len(answered) == 2 * n - 4 and answered["answer"].notna().all()
    assert scores[scores["set"] == "rag"]["score"].notna().sum() > 0
    final = pd.read_parquet(tmp_path / "out" / "http" / "data" / "answers.parquet")
    assert final[final["set"] == "rag"]["error"].eq("").all()


def test_two_services_behind_one_url_told_apart_by_their_key_never_share_cached_replies(
    monkeypatch,
) -> None:
    # Review finding: Dify's apps share one URL and differ by key alone; the cache key left the
    # key out, so a second app got the first one's answers. It holds a digest, never the key.
    from cube.config.http_system import HttpSystem
    from cube.llm import Request
    from cube.systems.http import HttpRAG

    monkeypatch.setenv("DIFY_A", "app-aaaaaaaaaaaaaaaaaaaaaaaa")
    monkeypatch.setenv("DIFY_B", "app-bbbbbbbbbbbbbbbbbbbbbbbb")
    url = "http://127.0.0.1:9/v1/chat-messages"

    def key(var: str) -> str:
        spec = HttpSystem(
            name="s",
            url=url,
            preset="dify_chat_messages",
            header_env={"Authorization": var},
            answerer=OFFLINE,
        )
        rag = HttpRAG(spec, answerer="m", lang="en", cache_path=None)
        payload = {"query": "q", "inputs": {}, "response_mode": "blocking", "user": "cube"}
        return rag.model._key(Request(messages=(), payload=payload))

    assert key("DIFY_A") != key("DIFY_B")
    assert key("DIFY_A") == key("DIFY_A")


def test_a_secret_in_the_body_template_is_refused_without_repeating_it() -> None:
    from cube.config.http_system import HttpSystem

    secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234"
    with pytest.raises(ValueError) as err:
        HttpSystem(
            name="s",
            url="http://h/ask",
            body={"q": "{question}", "api_key": secret},
            response={"answer": "a", "retrieved_ids": "ids"},
            answerer=OFFLINE,
        )
    assert "body.api_key" in str(err.value) and secret not in str(err.value)
