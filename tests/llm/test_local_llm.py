"""A real local model server (issue 22): structured output, context-window errors, rambling replies,
`cube serve`, against tests/openai_server.py fakes; the same paths end to end against
llama-cpp-python's server are in tests/llm/test_local_llm_real.py (marker `local_llm`)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cube.cli import main
from cube.config.model_spec import ModelSpec
from cube.judges.parsing import parse_score, parse_scores_json, score_schema
from cube.kb.questions import clean_question
from cube.llm import Request, cache_key, make_model
from cube.llm.local import LocalServer, LocalServerError, params_snippet
from tests import ROOT
from tests.openai_server import OpenAIServer

# llama-cpp-python 0.3.36's answer to response_format {"type": "json_schema", ...} (HTTP 500,
# measured)
LLAMA_CPP_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)
# its answer to a prompt longer than the context window (HTTP 400, measured)
CONTEXT_ERROR = (
    "This model's maximum context length is 2048 tokens. "
    "However, you requested 3052 tokens (3036 in "
    "the messages, 16 in the completion). Please reduce the length of the messages or completion."
)


def spec(url: str, **kw: object) -> ModelSpec:
    return ModelSpec(
        **{
            "model": "test-model",
            "base_url": url,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
            **kw,
        }
    )


def judge_requests(n: int, prefix: str = "grade") -> list[Request]:
    return [
        Request(messages=({"role": "user", "content": f"{prefix} {i}"},), schema=score_schema())
        for i in range(n)
    ]


def forms(server: OpenAIServer) -> list[str]:
    return [(b.get("response_format") or {}).get("type", "text") for b in server.bodies]


def json_score_reply(body: dict) -> str:
    return '{"score": 7}' if body.get("response_format") else "I think the answer is quite good."


def test_auto_falls_back_from_json_schema_to_llama_cpp_json_object() -> None:
    with OpenAIServer(reply=json_score_reply) as server:
        server.fail(
            "500",
            times=None,
            message=LLAMA_CPP_REFUSAL,
            when=lambda b: (b.get("response_format") or {}).get("type") == "json_schema",
        )
        model = make_model(spec(server.url, structured_output="auto", max_concurrency=1))
        rs = model.complete(judge_requests(4), role="judging", progress=False)
    assert [r.text for r in rs] == ['{"score": 7}'] * 4 and all(r.error is None for r in rs)
    # one refused request, then every call as json_object with the schema; the refusal cost no retry
    assert forms(server) == [
        "json_schema",
        "json_object",
        "json_object",
        "json_object",
        "json_object",
    ]
    assert server.bodies[1]["response_format"]["schema"] == score_schema()
    assert [r.detail["response_format"] for r in rs] == ["json_object"] * 4
    assert [parse_score(r.text) for r in rs] == [(7.0, None)] * 4


def test_auto_sends_free_text_where_every_structured_form_is_refused_and_on_fails_the_calls() -> (
    None
):
    refused = "response_format is not supported by this server"
    with OpenAIServer(reply=json_score_reply) as server:
        server.fail("400", times=None, message=refused, when=lambda b: "response_format" in b)
        auto = make_model(spec(server.url, structured_output="auto", max_concurrency=1))
        rs = auto.complete(judge_requests(3), role="judging", progress=False)
        assert [r.text for r in rs] == ["I think the answer is quite good."] * 3
        assert forms(server) == ["json_schema", "json_object", "text", "text", "text"]
        server.reset_stats()
        on = make_model(spec(server.url, structured_output="on", max_concurrency=1))
        rs = on.complete(judge_requests(3, "other"), role="judging", progress=False)
    assert all(r.text is None for r in rs)
    assert all(
        "structured_output is on and the endpoint refused every structured form" in r.error
        for r in rs
    )
    assert refused in rs[0].error
    assert forms(server) == ["json_schema", "json_object"]  # nothing sent after both were refused


def test_off_sends_no_response_format_and_keeps_the_cache_key_of_earlier_runs(
    openai_server: OpenAIServer,
) -> None:
    off = spec(openai_server.url, structured_output="off")
    plain = Request(messages=({"role": "user", "content": "q"},))
    with_schema = Request(messages=plain.messages, schema=score_schema())
    assert cache_key(off, with_schema) == cache_key(
        off, plain
    )  # a schema changes nothing while off
    assert cache_key(spec(openai_server.url, structured_output="auto"), with_schema) != cache_key(
        off, plain
    )
    make_model(off).complete([with_schema], role="judging", progress=False)
    assert forms(openai_server) == ["text"]


# The key of a judge call with `structured_output: off`, computed by the code before `auto` became
# the default (commit 2488684, `cache_key` of OFF_SPEC and OFF_REQUEST below): runs cached then must
# be served now, so this key may never change.
KEY_BEFORE_AUTO = "80690e9d0d0c4fd4a675a995b5103af5ecc59dbd0c5582e16191f663aaba968b"
OFF_SPEC = {
    "model": "judge-model",
    "base_url": "http://127.0.0.1:8000/v1",
    "structured_output": "off",
}
OFF_REQUEST = Request(
    messages=({"role": "user", "content": "Rate this answer."},),
    template_version="judge-v1",
    schema=score_schema(),
)


def test_auto_is_the_default_of_an_endpoint_and_an_explicit_off_keeps_the_earlier_cache_key() -> (
    None
):
    assert ModelSpec.model_validate(OFF_SPEC).structured_output == "off"
    assert cache_key(ModelSpec.model_validate(OFF_SPEC), OFF_REQUEST) == KEY_BEFORE_AUTO
    default = ModelSpec.model_validate(
        {k: v for k, v in OFF_SPEC.items() if k != "structured_output"}
    )
    assert default.structured_output == "auto"
    # the default now asks for the schema: a new key (the earlier runs' replies were free text)
    assert cache_key(default, OFF_REQUEST) != KEY_BEFORE_AUTO
    # a request without a schema (an answer) keeps its key whatever the setting
    plain = Request(messages=OFF_REQUEST.messages, template_version="judge-v1")
    assert cache_key(default, plain) == KEY_BEFORE_AUTO


def test_an_offline_algorithm_keeps_off_so_its_dumped_spec_is_the_one_earlier_runs_recorded() -> (
    None
):
    # stage fingerprints and data provenance hold the dumped specs: an offline judge's or
    # answerer's dump keeps the former default, so no stage of an offline run re-executes
    rubric = ModelSpec(provider="offline", model="rubric-strict")
    assert rubric.model_dump()["structured_output"] == "off"
    assert ModelSpec.model_validate(rubric.model_dump()) == rubric  # a dumped spec reads back


def test_a_prompt_longer_than_the_context_window_fails_alone_with_the_servers_reason() -> None:
    with OpenAIServer(reply=lambda b: "Score: 6") as server:
        server.fail(
            "400",
            times=None,
            message=CONTEXT_ERROR,
            when=lambda b: "LONG" in b["messages"][0]["content"],
        )
        reqs = judge_requests(3) + [Request(messages=({"role": "user", "content": "LONG " * 50},))]
        rs = make_model(spec(server.url, max_concurrency=1)).complete(
            reqs, role="judging", progress=False
        )
        total = server.requests_total
    assert [r.text for r in rs[:3]] == ["Score: 6"] * 3
    assert rs[3].text is None and rs[3].error == f"HTTP 400 (not retried): {CONTEXT_ERROR}"
    assert total == 4  # not retried; the endpoint not stopped (the next calls went through)


def test_a_one_at_a_time_server_gets_one_call_at_a_time_and_every_call_answered() -> None:
    with OpenAIServer(reply=lambda b: "Score: 5", latency_s=0.02, serial=True) as server:
        rs = make_model(spec(server.url, max_concurrency=1)).complete(
            judge_requests(12), role="judging", progress=False
        )
        assert server.max_in_flight == 1 and server.requests_total == 12
    assert all(r.ok for r in rs)


# Replies SmolLM2-135M-Instruct gave on this machine to the English judge prompts (issue 22):
# free text rambles, the json_object form answers the schema.
SMOLLM2_FREE_TEXT = [
    ("10\n", 10.0),
    (
        "You've been awarded a 10-point grade based on the three "
        "factors:\n\n1. Does the answer address the "
        "question?\n2. Does it respond to the aspect of the question asked?",
        None,
    ),
    (
        "The answer I'm about to provide is not part of the "
        "evaluation.\nHowever, if you'd like, you can request "
        "that I focus on your personal evaluation",
        None,
    ),
    # a labelled score in prose is read as one (whether it means anything is the audit's business)
    (
        "The integer score of 0.5 is the highest possible, "
        "and it's not a valid answer to the question",
        0.5,
    ),
]


@pytest.mark.parametrize(("reply", "expected"), SMOLLM2_FREE_TEXT)
def test_rambling_small_model_replies_are_scored_only_when_one_score_is_clear(
    reply: str, expected: float
) -> None:
    score, reason = parse_score(reply)
    assert score == expected
    assert (reason is None) == (expected is not None)


def test_schema_constrained_replies_parse_for_one_and_for_all_dimensions() -> None:
    assert parse_score('{ "score": 10 }') == (10.0, None)
    schema = score_schema(["relevance", "quality"])
    assert schema["required"] == ["relevance", "quality"] and not schema["additionalProperties"]
    assert parse_scores_json('{"relevance": 8, "quality": 3}', ["relevance", "quality"]) == {
        "relevance": (8.0, None),
        "quality": (3.0, None),
    }


def test_the_question_writer_reads_its_structured_reply() -> None:
    assert (
        clean_question('{"question": "How do I renew my passport?"}')
        == "How do I renew my passport?"
    )
    assert (
        clean_question("Question: How do I renew my passport?\nThanks")
        == "How do I renew my passport?"
    )
    assert (
        clean_question('{"question": "How do I renew my passport at the')
        == "How do I renew my passport at the"
    )


def test_local_server_refuses_to_start_naming_every_problem(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LocalServer(tmp_path / "missing.gguf", port)
        with pytest.raises(LocalServerError) as err:
            server.start()
    text = str(err.value)
    assert f"{tmp_path / 'missing.gguf'}: no such file (expected a .gguf model file)" in text
    assert f"port {port} on 127.0.0.1 is in use" in text
    assert server.proc is None


def test_cube_serve_says_why_it_cannot_start_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--model", str(tmp_path / "nope.gguf"), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cube serve: ") and "nope.gguf: no such file" in err


def test_the_printed_snippet_is_a_valid_model_spec() -> None:
    import yaml

    entry = yaml.safe_load(params_snippet("http://127.0.0.1:8765/v1"))["models"]["local"]
    model = ModelSpec(**entry)
    assert (
        model.max_concurrency == 1
        and model.structured_output == "auto"
        and model.base_url.endswith(":8765/v1")
    )


def test_params_local_llm_validates() -> None:
    from cube.config.params import load_params

    params = load_params(ROOT / "params" / "local_llm.yaml")
    assert (
        params.lang == "en" and params.questions.generator == "template"
    )  # the 135M writer echoes its prompt
    assert (
        params.model(params.questions.model).provider == "openai"
    )  # `generator: llm` switches it on
    llm_judges = [j for j in params.judges if params.model(j.model).provider != "offline"]
    assert len(llm_judges) == 1 and len(params.judges) == 3
    assert params.model(llm_judges[0].model).structured_output == "auto"


def test_the_server_gets_no_host_port_or_key_from_the_environment():
    """Review S1: llama-cpp-python's uvicorn takes HOST and PORT from the environment over the
    command line (HOST=0.0.0.0 would publish it), API_KEY would make it refuse cube, and keys have
    no business there."""
    from cube.llm.local import server_env

    env = server_env(
        {
            "HOST": "0.0.0.0",
            "PORT": "9",
            "API_KEY": "x",
            "CONFIG_FILE": "c.json",
            "OPENAI_API_KEY": "sk",
            "HF_TOKEN": "t",
            "PATH": "/usr/bin",
            "HOME": "/root",
            "port": "1",
        }
    )
    assert env == {"PATH": "/usr/bin", "HOME": "/root"}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_judge_prompts_put_their_fixed_part_first_so_a_prefix_cache_can_hit(lang: str) -> None:
    """A server's prefix cache (llama.cpp's last-prompt KV, a provider's cached input) reuses only a
    common *leading* part: two prompts of one dimension for different questions, documents and
    answers share the whole instruction block (everything before the question), and the three
    answers of one question share everything up to the answer (question and source too)."""
    import os

    import pandas as pd

    from cube.config.params import parse_params
    from cube.judges import Judge, load_dimensions
    from cube.judges.scoring import judge_requests as build

    params = parse_params(
        {
            "run": "t",
            "lang": lang,
            "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
        }
    )
    dims = load_dimensions(params)
    records = [
        {"question": q, "_document": d, "answer": a, "_item_name": "x"}
        for q, d, a in [
            (
                "How do I renew a passport?",
                "Passport renewal: bring the old passport and a photo.",
                "Bring a photo.",
            ),
            (
                "What does a dog licence cost?",
                "Dog licence: 20 a year, paid at the town hall.",
                "20 a year.",
            ),
            (
                "What does a dog licence cost?",
                "Dog licence: 20 a year, paid at the town hall.",
                "I do not know.",
            ),
        ]
    ]
    judge = Judge(
        name="m", model=make_model(ModelSpec(model="m", base_url="http://127.0.0.1:9/v1"))
    )
    _, reqs, _ = build(judge, pd.DataFrame(records).to_dict("records"), dims)
    by = {
        d.name: [r.messages[0]["content"] for r in reqs if r.context["dimension"] == d.name]
        for d in dims
    }
    for d in dims:
        fixed = d.template.split("{question}")[0]
        p1, p2, p3 = by[d.name]
        assert len(fixed) >= 0.6 * len(d.template)  # the instructions are most of the template...
        # ...and come first, whatever the question (then the question block's tag, whose code is
        # the hash of the question: cube.config.fence)
        head = os.path.commonprefix([p1, p2])
        assert head.startswith(fixed) and len(head) <= len(fixed) + len("<question-") + 12
        shared = os.path.commonprefix([p2, p3])
        assert (
            shared.startswith(fixed) and records[1]["_document"] in shared
        )  # same question: source shared too


def test_planned_prompt_tokens_add_the_chat_templates_tokens_measured_on_answered_calls() -> None:
    """The tokenize route sees the contents only; the server's usage also counts its chat template
    (here 4 per message + 3 per call, as ChatML-like markers). Calls already answered (the cache's,
    a pilot's) measure it per role sequence, no new call: user only -> 4 + 3 = 7, system+user ->
    2 x 4 + 3 = 11, so planned == reported for every call of another batch."""
    from cube.llm.tokens import count_prompt_tokens, prompt_text

    def reqs(tag: str) -> list[Request]:
        return [
            Request(({"role": "user", "content": f"{tag} two three"},)),
            Request(
                (
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": f"{tag} five six seven"},
                )
            ),
        ]

    with OpenAIServer(reply=lambda b: "Score: 5", tokenize=True, template_tokens=(4, 3)) as server:
        s = spec(server.url)
        model = make_model(s)
        answered = [
            (list(q.messages), r.input_tokens)
            for q, r in zip(
                reqs("a"), model.complete(reqs("a"), role="judging", progress=False), strict=True
            )
        ]
        assert [n for _, n in answered] == [3 + 7, 6 + 11]
        later = reqs("b")
        roles = [tuple(m["role"] for m in r.messages) for r in later]
        texts = [prompt_text(r) for r in later]
        bare = count_prompt_tokens(s, texts)
        unmeasured = count_prompt_tokens(s, texts, roles)
        planned = count_prompt_tokens(s, texts, roles, answered)
        sent = server.requests_total
        reported = [r.input_tokens for r in model.complete(later, role="judging", progress=False)]
        assert server.requests_total == sent + 2  # counting sent no call
    assert (
        bare.counts == unmeasured.counts == [3, 6]
    )  # contents only (the second: 2 + 4 words joined)
    assert "not counted" in unmeasured.method and "--pilot" in unmeasured.method
    assert planned.counts == reported == [3 + 7, 6 + 11]
    assert "7 for user" in planned.method and "11 for system+user" in planned.method


def test_a_judges_calls_after_its_pilot_go_in_prompt_order_and_each_score_lands_on_its_row() -> (
    None
):
    """Sent in the order of their prompt texts (one dimension's calls together, one question's three
    answers after each other: what a prefix cache reuses), the pilot's calls (the first built)
    first, every score is still the one its own request got: here the reply is the digit the answer
    holds."""
    import re

    import pandas as pd

    from cube.config.params import parse_params
    from cube.judges import Judge, load_dimensions, score_answers

    def reply(body: dict) -> str:
        found = re.search(r"<answer-\w+>\s*answer (\d)", body["messages"][-1]["content"])
        return f"Score: {found.group(1)}"

    corpus = pd.DataFrame(
        {
            "doc_id": ["d1", "d2"],
            "text": ["Dog licence: 20 a year.", "Passport: bring a photo."],
            "item_name": ["dog licence", "passport"],
        }
    )
    questions = pd.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "doc_id": ["d1", "d2"],
            "question": ["What does a dog licence cost?", "How do I renew a passport?"],
        }
    )
    answers = pd.DataFrame(
        {
            "question_id": ["q2", "q1", "q2", "q1", "q2", "q1"],
            "doc_id": ["d2", "d1"] * 3,
            "system": "s",
            "set": ["zero", "zero", "rag", "rag", "full", "full"],
            "answer": [f"answer {k}" for k in (1, 2, 3, 4, 5, 6)],
        }
    )
    dims = load_dimensions(
        parse_params(
            {
                "run": "t",
                "lang": "en",
                "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
            }
        )
    )
    with OpenAIServer(reply=reply) as server:
        judge = Judge(name="m", model=make_model(spec(server.url, max_concurrency=1)), pilot=4)
        scores = score_answers(answers, [judge], dims, corpus, questions=questions, progress=False)
        prompts = [b["messages"][-1]["content"] for b in server.bodies]
    assert len(prompts) == 6 * len(dims) and prompts[4:] == sorted(
        prompts[4:]
    )  # after the pilot: text order
    assert (
        prompts[:4] == sorted(prompts[:4]) and prompts[:4] != sorted(prompts)[:4]
    )  # the pilot's own calls
    got = scores.merge(answers, on=["question_id", "set"])
    assert (got["score"] == got["answer"].str[-1].astype(float)).all() and len(got) == 6 * len(dims)
