"""Planted secrets (API key, URL user-info, URL query token, secret header value) never reach
the params, the cache, the responses, the logs or any message of the LLM layer."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cube.config.model_spec import redact_url, url_credential_problem
from cube.config.params import ParamsError, params_to_yaml, parse_params
from cube.llm import Request, make_model
from cube.llm.preflight import check_endpoints, check_keys
from tests.openai_server import OpenAIServer

KEY = "sk-PLANTED-api-key-0a1b2c"
USERINFO = "PLANTED-userinfo-pass-3d4e"
QUERY = "PLANTED-query-token-5f6a"
HEADER = "PLANTED-header-value-7b8c"
SECRETS = (KEY, USERINFO, QUERY, HEADER)


def data(url: str, **spec: object) -> dict:
    model = {
        "model": "test-model",
        "base_url": url,
        "api_key_env": "CUBE_SECRET_KEY",
        "header_env": {"x-gateway-key": "CUBE_SECRET_HEADER"},
        "max_attempts": 2,
        "backoff_base_s": 0.01,
        **spec,
    }
    return {"run": "s", "models": {"llm": model}, "judges": [{"name": "gpt", "model": "llm"}]}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBE_SECRET_KEY", KEY)
    monkeypatch.setenv("CUBE_SECRET_HEADER", HEADER)


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{USERINFO}@127.0.0.1:9/v1",
        f"http://{USERINFO}@127.0.0.1:9/v1",
        f"http://127.0.0.1:9/v1?api_key={QUERY}",
        f"http://127.0.0.1:9/v1?api-version=1&access_token={QUERY}",
    ],
)
def test_credentials_in_a_url_are_refused_without_repeating_them(url: str) -> None:
    with pytest.raises(ParamsError) as err:
        parse_params(data(url), "p.yaml")
    msg = str(err.value)
    assert "api_key_env" in msg and "p.yaml" in msg and "models.llm" in msg
    assert USERINFO not in msg and QUERY not in msg
    with pytest.raises(ParamsError) as err:  # also a base_urls replica and a RAGFlow system
        parse_params(data(None, base_urls=["http://127.0.0.1:8/v1", url]), "p.yaml")
    assert (
        "base_urls[1]" in str(err.value)
        and USERINFO not in str(err.value)
        and QUERY not in str(err.value)
    )
    rf = {
        **data("http://127.0.0.1:8/v1"),
        "answerer": "llm",
        "systems": [{"kind": "ragflow", "name": "rf", "base_url": url, "assistant": "a"}],
    }
    with pytest.raises(ParamsError) as err:
        parse_params(rf, "p.yaml")
    assert (
        "systems" in str(err.value)
        and USERINFO not in str(err.value)
        and QUERY not in str(err.value)
    )


def test_a_harmless_query_is_allowed() -> None:
    assert parse_params(data("http://127.0.0.1:9/v1?api-version=2024-06-01"))


def test_header_env_takes_names_not_values() -> None:
    with pytest.raises(ParamsError, match="header_env") as err:
        parse_params(data("http://127.0.0.1:9/v1", header_env={"x-gateway-key": HEADER}))
    assert HEADER not in str(err.value)


def test_secrets_are_sent_but_never_stored_logged_or_returned(
    tmp_path: Path, caplog, capsys, monkeypatch
) -> None:
    caplog.set_level(logging.DEBUG)  # openai, httpx and our own loggers at their most verbose
    monkeypatch.setenv("CUBE_PROGRESS", "terminal")  # the breaker line is also printed
    produced: list[str] = []
    with OpenAIServer() as server:
        params = parse_params(data(server.url), "p.yaml")
        produced.append(params_to_yaml(params))
        spec = params.model("llm")
        cache = tmp_path / "cache.sqlite"
        reqs = [Request(messages=({"role": "user", "content": f"q {i}"},)) for i in range(6)]
        ok = make_model(spec, cache).complete(reqs[:3], role="judging", progress=False)
        assert all(r.ok for r in ok)
        sent = server.headers[0]
        assert (
            sent["authorization"] == f"Bearer {KEY}" and sent["x-gateway-key"] == HEADER
        )  # they are used
        server.fail("401", times=None)  # the 401 body echoes the key and the header
        bad = make_model(spec, cache).complete(reqs[3:], role="judging", progress=False)
        assert not any(r.ok for r in bad) and "Bearer [redacted]" in bad[0].error
        produced += [repr(ok), repr(bad)]
        produced += check_endpoints(params) + check_keys(params)
        assert check_endpoints(params)  # the 401 was reported
    monkeypatch.delenv("CUBE_SECRET_HEADER")
    produced += check_keys(params)
    produced += [caplog.text, *capsys.readouterr()]
    blob = "\n".join(produced)
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert "stopped sending" in blob and "CUBE_SECRET_HEADER" in blob
    for secret in SECRETS:
        assert secret not in blob, secret
        assert secret.encode() not in files, secret
    assert yaml.safe_load(produced[0])["models"]["llm"]["header_env"] == {
        "x-gateway-key": "CUBE_SECRET_HEADER"
    }


# no '.', ':' or '/': no run of 8 such characters occurs in the host part, so a hit is a leak
_SECRET = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_~",
    min_size=8,
    max_size=40,
)


@given(
    user=_SECRET,
    password=_SECRET,
    token=_SECRET,
    name=st.sampled_from(["api_key", "key", "token", "access_token", "sig", "X-Auth", "password"]),
)
def test_any_url_credential_is_refused_and_never_shown(
    user: str, password: str, token: str, name: str
) -> None:
    urls = (
        "https://{user}:{password}@api.example.com:8443/v1",
        "https://{password}@api.example.com/v1",
        "https://api.example.com/v1?api-version=1&{name}={token}",
    )
    for url in urls:
        filled = url.format(user=user, password=password, name=name, token=token)
        why = url_credential_problem(filled)
        shown = redact_url(filled)
        assert why is not None and "api_key_env" in why
        assert shown.startswith("https://api.example.com") and shown.endswith("/v1")
        # the message of the same URL with other values: a secret found there is a word of the
        # message (e.g. 'header_e' in 'header_env'), not a leak
        fixed = url_credential_problem(url.format(user="u", password="p", name=name, token="t"))
        for secret in (password, token):
            assert (secret not in why or secret in str(fixed)) and secret not in shown


@pytest.mark.parametrize(
    "pasted",
    [
        "sk-proj-AbC123secretKEY",  # not an identifier: refused, and was echoed back
        "sk_live_9fQ2xLm81KdPzR0aTu4wYc",  # an identifier: it passed, and check_keys printed it
        "hf_QpZk2mN8rT5vXy1bLc9dHj4sWf",
        "Zx81kLmQ2pRt7vWy3nBc5dFgHj",  # high entropy, no known prefix
    ],
)
@pytest.mark.parametrize("field", ["api_key_env", "header_env"])
def test_a_key_pasted_as_a_variable_name_is_refused_without_repeating_it(
    pasted: str, field: str
) -> None:
    # Review finding 9: the error appended "(got '<input>')", i.e. the key itself.
    model = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}
    model.update(
        {"api_key_env": pasted} if field == "api_key_env" else {"header_env": {"api-key": pasted}}
    )
    with pytest.raises(ParamsError) as err:
        parse_params(
            {"run": "t", "models": {"llm": model}, "judges": [{"name": "j", "model": "llm"}]},
            "p.yaml",
        )
    msg = str(err.value)
    assert field in msg and "NAME of an environment variable" in msg and "p.yaml" in msg
    assert pasted not in msg and pasted[:10] not in msg


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "AZURE_OPENAI_KEY_2",
        "HF_TOKEN",
        "HF_API_TOKEN_2024",
        "GITHUB_PAT_TOKEN_FOR_CI",
        "my_key",
        "SK_LIVE_KEY_2",
    ],
)
def test_ordinary_variable_names_are_accepted(name: str) -> None:
    p = parse_params(
        {
            "run": "t",
            "models": {
                "llm": {
                    "model": "m",
                    "base_url": "http://h/v1",
                    "api_key_env": name,
                    "header_env": {"x-key": name},
                }
            },
            "judges": [{"name": "j", "model": "llm"}],
        }
    )
    assert p.models["llm"].api_key_env == name


def test_a_wrongly_typed_api_key_env_is_not_echoed_either() -> None:
    with pytest.raises(ParamsError) as err:
        parse_params(
            {
                "run": "t",
                "models": {
                    "llm": {
                        "model": "m",
                        "base_url": "http://h/v1",
                        "api_key_env": 12345678987654321,
                    }
                },
            }
        )
    assert "api_key_env" in str(err.value) and "12345678987654321" not in str(err.value)


@pytest.mark.parametrize(
    "query",
    [
        "code=Zq8xT4mW2nR7",  # Azure Functions' key
        "sig=abc%2Bdef&sv=2022-11-02",  # a SAS token
        "jwt=a.b.c",
        "pwd=hunter2",
        "pass=hunter2",
        "password=x",
        "apikey=x",
        "api_key=x",
        "access_token=x",
        "key=x",
        "token=x",
        "secret=x",
        # no credential name, a credential-looking value (the params scan's detectors)
        "q=sk-abcdefghijklmnopqrstuvwx1234",
        "v=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_a_query_credential_is_refused_by_name_or_by_value(query: str) -> None:
    why = url_credential_problem(f"https://svc.example.com/ask?lang=en&{query}")
    assert why is not None and "carries a credential" in why
    assert query.split("=", 1)[1] not in why  # the value is never repeated


@pytest.mark.parametrize(
    "query", ["lang=en&n=5", "passages=3", "region=eu-west-1", "model=gpt-4o-mini", "api-version=1"]
)
def test_ordinary_query_parameters_pass(query: str) -> None:
    assert url_credential_problem(f"https://svc.example.com/ask?{query}") is None


def test_a_url_with_a_query_credential_in_a_free_form_mapping_is_found() -> None:
    from cube.config.secret_scan import secret_findings

    found = secret_findings({"callback": "https://hook.example.com/x?code=Zq8xT4"}, "extra_body")
    assert found and "extra_body.callback" in found[0] and "Zq8xT4" not in found[0]


def test_cube_init_refuses_a_url_with_a_code_canary_and_writes_nothing(tmp_path, capsys) -> None:
    from cube.cli import main

    (tmp_path / "kb.csv").write_text("doc_id,text\nD1,hello\n", encoding="utf-8")
    canary = "CANARYq8xT4mW2"
    args = ["init", str(tmp_path / "params.yaml"), "--system", "http", "--no-input"]
    args += ["--kb", str(tmp_path / "kb.csv"), "--url", f"http://127.0.0.1:9/ask?code={canary}"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and "carries a credential in its query (code=...)" in err
    assert canary not in err and not (tmp_path / "params.yaml").exists()
