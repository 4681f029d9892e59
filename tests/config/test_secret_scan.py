"""Secrets in the free-form mappings of params (cube.config.secret_scan, issue 29 item 4): refused
with the key path named and the value never repeated; ordinary values pass."""

from __future__ import annotations

import copy

import pytest
import yaml

from cube.config.params import ParamsError, load_params, parse_params
from cube.config.secret_scan import secret_findings, secret_key, secret_value
from tests import ROOT

OPENAI = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1h" + "T3BlbkFJ" + "x8Y6z4" * 8
SECRETS = {
    "openai": OPENAI,
    "deepseek": "sk-" + "0123456789abcdef" * 2,
    "github": "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "bearer": "Bearer abcdefghijklmnop0123456789",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
    "random": "q8Zr2Lw9Xv4Nt7Kp1Ys6Hd3Fb0Mc5JgT2uW4eR7",  # a 40-character key, no prefix
}
ORDINARY = [
    "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "/data/models/Qwen2.5-72B-Instruct-AWQ",
    "5cfd8b2b4c7e8a9f0c3d1e2f4a5b6c7d8e9f0a1b",  # a commit
    "3f2504e0-4f89-41d3-9a0c-0305e82c3301",  # a request id
    "You are a strict grader. Reply with one integer from 0 to 10.",
    "cube-judge-relevance-v2",
    "gpt4oMiniDeployment2024EastUS",  # an identifier without separators, shorter than a key
    "请携带身份证原件到政务服务大厅办理。",
]


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("X-Api-Key", True),
        ("Authorization", True),
        ("access_token", True),
        ("hf_token", True),
        ("client_secret", True),
        ("password", True),
        ("token", True),
        ("max_tokens", False),
        ("stop_token_ids", False),
        ("skip_special_tokens", False),
        ("prompt_cache_key", False),
        ("eos_token", False),
        ("budget_tokens", False),
        ("top_k", False),
    ],
)
def test_keys_naming_a_credential(key, secret):
    assert secret_key(key) is secret


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_secret_values_under_any_key(name):
    assert secret_value(SECRETS[name]) is not None
    assert secret_findings({"custom": {"deep": [SECRETS[name]]}}, "extra_body") == [
        f"extra_body.custom.deep[0]: its value looks like {secret_value(SECRETS[name])}"
    ]


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_pass(value):
    assert secret_value(value) is None and secret_findings({"x": value}, "extra_body") == []


def test_an_empty_or_flag_value_under_a_credential_key_passes():
    assert secret_findings({"api_key": "", "token": None, "auth": False}, "extra_body") == []


def _params(**model) -> dict:
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data["models"] = {
        "m": {"model": "x", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "K", **model}
    }
    data["judges"] = [*data["judges"], {"name": "llm", "model": "m"}]
    return data


def test_a_secret_in_extra_body_is_refused_naming_the_key_path_never_the_value():
    data = _params(
        extra_body={"api_key": "sk-abcdefghijklmnopqrstuvwxyz", "meta": {"x": SECRETS["github"]}},
        options={"headers": {"Authorization": SECRETS["bearer"]}},
    )
    with pytest.raises(ParamsError) as err:
        parse_params(data, "p.yaml")
    text = str(err.value)
    assert "p.yaml" in text and "models.m" in text
    assert "extra_body.api_key: its key names a credential" in text
    assert "extra_body.meta.x: its value looks like a GitHub Token" in text
    assert "options.headers.Authorization: its key names a credential" in text
    assert "api_key_env" in text and "header_env" in text
    for value in ("sk-abcdefghijklmnopqrstuvwxyz", SECRETS["github"], SECRETS["bearer"]):
        assert value not in text


def test_a_secret_in_corpus_columns_is_refused():
    data = _params()
    data["corpus"] = {"source": "file", "path": "kb.csv", "columns": {"doc_id": SECRETS["aws"]}}
    with pytest.raises(ParamsError, match=r"corpus\.columns\.doc_id: its value looks like"):
        parse_params(data, "p.yaml")


def test_ordinary_extra_body_and_options_are_accepted():
    data = _params(
        extra_body={
            "chat_template_kwargs": {"enable_thinking": False},
            "top_k": 20,
            "stop_token_ids": [151645],
            "model": ORDINARY[0],
            "prompt_cache_key": ORDINARY[6],
        }
    )
    assert parse_params(copy.deepcopy(data), "p.yaml").models["m"].extra_body["top_k"] == 20


@pytest.mark.parametrize("path", sorted((ROOT / "params").glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_params_pass(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert load_params(path).run
