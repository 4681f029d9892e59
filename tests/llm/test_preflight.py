"""Preflight: missing key variables and broken LLM endpoints are reported before any stage runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cube.cli import main
from cube.config.params import parse_params
from cube.llm.preflight import check_endpoints, check_keys, uses_llm
from tests.openai_server import OpenAIServer, broken_endpoint, closed_port_url

KEY = "sk-preflight-DO-NOT-LEAK-91ab"


def params_for(
    url: str,
    *,
    model: str = "test-model",
    key_env: str | None = "CUBE_PF_KEY",
    spec_fields: dict[str, Any] | None = None,
    **extra: Any,
):
    spec = {"provider": "openai", "model": model, "base_url": url, "api_key_env": key_env}
    spec.update(spec_fields or {})
    data = {
        "run": "pf",
        "models": {"llm": spec},
        "judges": [
            {"name": "rubric", "model": {"provider": "offline", "model": "rubric"}},
            {"name": "gpt", "model": "llm"},
        ],
        **extra,
    }
    return parse_params(data, "pf.yaml")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBE_PF_KEY", KEY)


def test_offline_params_need_nothing() -> None:
    params = parse_params(
        {"run": "x", "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}]}
    )
    assert not uses_llm(params) and check_keys(params) == [] and check_endpoints(params) == []


def test_every_missing_key_variable_is_listed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUBE_PF_KEY")
    monkeypatch.delenv("CUBE_PF_RAGFLOW", raising=False)
    params = params_for(
        "http://127.0.0.1:9/v1",
        systems=[
            {"kind": "builtin", "name": "bm25"},
            {
                "kind": "ragflow",
                "name": "rf",
                "base_url": "http://127.0.0.1:9",
                "assistant": "a",
                "api_key_env": "CUBE_PF_RAGFLOW",
                "answerer": "llm",
            },
        ],
    )
    problems = check_keys(params)
    assert len(problems) == 2
    assert (
        "CUBE_PF_KEY" in problems[0]
        and "judge 'gpt'" in problems[0]
        and "system 'rf' answerer" in problems[0]
    )
    assert "CUBE_PF_RAGFLOW" in problems[1] and "system 'rf' (RAGFlow" in problems[1]


def test_a_working_endpoint_passes_with_one_request(openai_server: OpenAIServer) -> None:
    assert check_endpoints(params_for(openai_server.url)) == []
    assert openai_server.requests_total == 1 and openai_server.bodies[0]["model"] == "test-model"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("401", "unauthorised (HTTP 401)"),
        ("refused", "connection refused"),
        ("no_choices", "empty choices"),
        ("unknown_model", "unknown model or wrong base_url (HTTP 404)"),
        ("slow", "timeout (no answer within 0.5 s)"),
    ],
)
def test_broken_endpoint_gives_one_line_naming_judge_model_endpoint_and_reason(
    case: str, expected: str
) -> None:
    fast = {"max_attempts": 3, "backoff_base_s": 0.05}
    with OpenAIServer(strict_model=True) as server:
        url, model = broken_endpoint(server, case, "test-model", delay_s=3.0)
        problems = check_endpoints(params_for(url, model=model, spec_fields=fast), timeout_s=0.5)
        sent = server.requests_total
    assert len(problems) == 1, problems
    line = problems[0]
    assert line.startswith(f"judge 'gpt': model {model} at {url}: {expected}"), line
    assert KEY not in line  # the 401 body echoes the Authorization header: scrubbed
    # one tiny request, retried only on a timeout (as a normal call is); none reaches "refused"
    assert sent == {"refused": 0, "slow": 3}.get(case, 1)
    assert line.endswith("(all 3 attempts failed)") == (case == "slow"), line


@pytest.mark.parametrize("kind", ["500", "503", "slow"])
def test_a_5xx_or_a_timeout_is_retried_like_a_normal_call_before_preflight_fails(kind: str) -> None:
    # Issue 29: one HTTP 500 on the first request stopped the run (exit 2).
    spec = {"max_attempts": 3, "backoff_base_s": 0.05}
    with OpenAIServer() as server:
        server.fail(kind, times=2, delay_s=2.0)  # the first two requests fail, the third answers
        assert check_endpoints(params_for(server.url, spec_fields=spec), timeout_s=0.5) == []
        assert server.requests_total == 3
        server.fail(kind, times=None, delay_s=2.0)  # every request fails: after all 3 attempts
        problems = check_endpoints(params_for(server.url, spec_fields=spec), timeout_s=0.5)
        assert server.requests_total == 3 + 3
    reason = "timeout (no answer within 0.5 s)" if kind == "slow" else f"HTTP {kind}: HTTP {kind}"
    assert problems == [
        f"judge 'gpt': model test-model at {server.url}: "
        f"{reason}{'' if kind == 'slow' else ' (test fault)'} (all 3 attempts failed)"
    ]


def test_endpoint_shared_by_several_users_is_probed_once(openai_server: OpenAIServer) -> None:
    openai_server.fail("401", times=None)
    warm = {
        "provider": "openai",
        "model": "test-model",
        "base_url": openai_server.url + "/",
        "api_key_env": "CUBE_PF_KEY",
        "temperature": 0.7,
    }
    params = params_for(
        openai_server.url, answerer="llm", questions={"generator": "llm", "model": warm}
    )
    problems = check_endpoints(params)
    assert openai_server.requests_total == 1
    assert problems == [
        f"question generator, system 'bm25-top8' answerer, judge 'gpt': model test-model at "
        f"{openai_server.url}/: unauthorised (HTTP 401): check the key in the api_key_env variable"
    ]


def write_params(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "p.yaml"
    data = {
        "run": "pf",
        "outputs_dir": str(tmp_path / "out"),
        "models": {"llm": {"model": "test-model", "base_url": url, "api_key_env": "CUBE_PF_KEY"}},
        "judges": [{"name": "gpt", "model": "llm"}],
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_cube_run_stops_before_any_stage_on_a_401(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with OpenAIServer() as server:
        server.fail("401", times=None)
        assert main(["run", str(write_params(tmp_path, server.url))]) == 2
        assert server.requests_total == 1
    err = capsys.readouterr().err
    assert (
        f"cube: preflight: judge 'gpt': model test-model at {server.url}: unauthorised (HTTP 401)"
        in err
    )
    assert "nothing was run" in err and KEY not in err
    assert not (tmp_path / "out" / "pf").exists()  # no stage ran, nothing was written


def test_cube_run_missing_key_exits_2_before_any_request(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv("CUBE_PF_KEY")
    with OpenAIServer() as server:
        assert main(["run", str(write_params(tmp_path, server.url))]) == 2
        assert server.requests_total == 0
    assert "CUBE_PF_KEY (api_key_env) is not set" in capsys.readouterr().err


def test_cube_validate_checks_keys_always_and_endpoints_on_request(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    url = closed_port_url()
    path = write_params(tmp_path, url)
    assert main(["validate", str(path)]) == 0  # keys are set; endpoints are not checked by default
    assert main(["validate", str(path), "--check-endpoints"]) == 2
    assert f"judge 'gpt': model test-model at {url}: connection refused" in capsys.readouterr().err
    monkeypatch.delenv("CUBE_PF_KEY")
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "CUBE_PF_KEY" in err
    assert out.splitlines()[-1].startswith("validate: FAILED") and "1 preflight problem" in out


class ReasoningServer(OpenAIServer):
    """A reasoning model: the 16-token budget goes to its hidden reasoning, the content is null."""

    def _completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        out = super()._completion(body, text)
        out["choices"][0]["message"]["content"] = None
        out["choices"][0]["finish_reason"] = "length"
        return out


def test_a_reasoning_model_with_no_content_in_the_tiny_probe_is_reachable() -> None:
    # Review S4: content null within max_tokens 16 was an "unusable answer": cube run exited 2.
    with ReasoningServer() as server:
        assert check_endpoints(params_for(server.url)) == []
        server.fail("no_choices", times=None)  # a 200 without choices is still a broken endpoint
        problems = check_endpoints(params_for(server.url))
    assert len(problems) == 1 and "empty choices" in problems[0]
