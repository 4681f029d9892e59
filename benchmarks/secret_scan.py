"""The params secret scanner (`cube.config.secret_scan`) on cases with known truth: how often it
misses a key and how often it refuses an ordinary value.

Positives: real-looking keys of common providers, drawn at random in each provider's published
shape (prefix, length, alphabet; `PROVIDERS`, 20 draws each, seed 0): OpenAI (project and legacy),
Anthropic, DeepSeek, DashScope (Qwen), Moonshot, Zhipu, Google, AWS (access key id and secret),
GitHub (classic and fine-grained), GitLab, Hugging Face, Slack, Stripe, Groq, Replicate, NVIDIA,
Mistral, Cohere, Azure OpenAI, Together, Baidu Qianfan, Volcengine Ark, SendGrid, JWTs,
`Bearer ...` and `Basic ...` header values. Each is scanned twice: under an ordinary key
(`extra_body: {custom_field: <key>}`: the value alone must give it away) and under a credential's
key (`extra_body: {api_key: <key>}`).

Negatives (`negatives`, `shipped_mappings`): ordinary values of the scanned mappings under their
usual keys: vLLM, OpenAI, Ollama, DeepSeek and DashScope request fields, offline options, corpus
column names, model ids of the hub and local paths, commit hashes, digests, UUIDs, dates, prompts,
an image as a data URL and as bare base64, identifiers written without separators
(`gpt4oMiniDeployment2024`); and every free-form mapping of the shipped params (params/*.yaml) and
of the tests' params (the `extra_body`, `options` and `columns` literals of tests/), each scanned
as a params file would be.

The scanner's two numbers (`RANDOMNESS_LIMIT`, `MIN_RUN`) were chosen on the draws of seed 0 and on
these negatives, so the false-positive rate is in-sample; the detection rates are measured on fresh
draws (seed 1). Printed: per provider the keys detected by value alone; the false positives (with
the entry); the misses and false positives at other limits and run lengths (what the chosen ones
trade); the randomness of the runs the last rule looks at. Last line: misses by value alone and
under a credential's key, and the false positives with a 95 % Clopper-Pearson upper bound.

    python benchmarks/secret_scan.py
"""

from __future__ import annotations

import ast
import base64
import json
import random
import string
import struct
import sys
import uuid
import zlib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cube.config import secret_scan  # noqa: E402

DRAWS = 20
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _jwt(rng: random.Random) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    head = part({"alg": "HS256", "typ": "JWT"})
    body = part({"sub": _r(rng, string.digits, 10), "iat": rng.randint(1.6e9, 1.8e9)})
    return f"{head}.{body}.{_r(rng, URLSAFE, 43)}"


PROVIDERS = {
    "openai-project": lambda r: f"sk-proj-{_r(r, URLSAFE, 74)}T3BlbkFJ{_r(r, URLSAFE, 74)}",
    "openai-legacy": lambda r: f"sk-{_r(r, ALNUM, 20)}T3BlbkFJ{_r(r, ALNUM, 20)}",
    "anthropic": lambda r: f"sk-ant-api03-{_r(r, URLSAFE, 93)}AA",
    "deepseek": lambda r: f"sk-{_r(r, HEX, 32)}",
    "dashscope": lambda r: f"sk-{_r(r, HEX, 32)}",
    "moonshot": lambda r: f"sk-{_r(r, ALNUM, 48)}",
    "zhipu": lambda r: f"{_r(r, HEX, 32)}.{_r(r, ALNUM, 16)}",
    "google": lambda r: f"AIza{_r(r, URLSAFE, 35)}",
    "aws-key-id": lambda r: f"AKIA{_r(r, string.ascii_uppercase + string.digits, 16)}",
    "aws-secret": lambda r: _r(r, ALNUM + "/+", 40),
    "github-classic": lambda r: f"ghp_{_r(r, ALNUM, 36)}",
    "github-fine": lambda r: f"github_pat_{_r(r, ALNUM, 22)}_{_r(r, ALNUM, 59)}",
    "gitlab": lambda r: f"glpat-{_r(r, URLSAFE, 20)}",
    "huggingface": lambda r: f"hf_{_r(r, string.ascii_letters, 34)}",
    "slack-bot": lambda r: (
        f"xoxb-{_r(r, string.digits, 12)}-{_r(r, string.digits, 13)}-{_r(r, ALNUM, 24)}"
    ),
    "stripe": lambda r: f"sk_live_{_r(r, ALNUM, 24)}",
    "groq": lambda r: f"gsk_{_r(r, ALNUM, 52)}",
    "replicate": lambda r: f"r8_{_r(r, ALNUM, 37)}",
    "nvidia": lambda r: f"nvapi-{_r(r, URLSAFE, 64)}",
    "mistral": lambda r: _r(r, ALNUM, 32),
    "cohere": lambda r: _r(r, ALNUM, 40),
    "azure-openai": lambda r: _r(r, HEX, 32),
    "together": lambda r: _r(r, HEX, 64),
    "baidu-qianfan": lambda r: f"bce-v3/ALTAK-{_r(r, ALNUM, 21)}/{_r(r, HEX, 40)}",
    "volcengine-ark": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
    "sendgrid": lambda r: f"SG.{_r(r, URLSAFE, 22)}.{_r(r, URLSAFE, 43)}",
    "jwt": _jwt,
    "bearer-header": lambda r: f"Bearer {_r(r, URLSAFE, 40)}",
    "basic-header": lambda r: (
        "Basic " + base64.b64encode(f"user{r.randint(1, 99)}:{_r(r, ALNUM, 12)}".encode()).decode()
    ),
}


def _png(seed: int = 3, side: int = 8) -> str:
    """A small PNG of random pixels, base64: compressed bytes, as random as a key."""
    rng = random.Random(seed)
    raw = b"".join(
        b"\x00" + bytes(rng.randrange(256) for _ in range(side * 3)) for _ in range(side)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    head = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw))
    return base64.b64encode(png + chunk(b"IEND", b"")).decode()


_PNG = _png()
# Ordinary values of the scanned mappings, under their usual keys.
_MODEL_IDS = [
    "Qwen/Qwen2.5-72B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4",
    "Qwen/Qwen2.5-VL-72B-Instruct-AWQ",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
    "Qwen/Qwen3-30B-A3B-Thinking-2507",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "deepseek-ai/DeepSeek-V3-0324",
    "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "THUDM/glm-4-9b-chat-1m",
    "zai-org/GLM-4.5-Air-FP8",
    "01-ai/Yi-1.5-34B-Chat-16K",
    "internlm/internlm2_5-20b-chat",
    "baichuan-inc/Baichuan2-13B-Chat",
    "moonshotai/Kimi-K2-Instruct",
    "google/gemma-3-27b-it",
    "microsoft/Phi-3.5-mini-instruct",
    "HuggingFaceTB/SmolLM2-1.7B-Instruct",
    "BAAI/bge-reranker-v2-m3",
    "BAAI/bge-large-zh-v1.5",
    "hf.co/bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M",
    "qwen2.5:72b-instruct-q4_K_M",
    "deepseek-r1:32b-qwen-distill-q4_K_M",
    "gpt-4o-mini-2024-07-18",
    "claude-3-5-sonnet-20241022",
    "qwen-max-2025-01-25",
    "glm-4-plus",
    "moonshot-v1-128k",
    "ep-20250101123456-abcde",
    "Qwen2.5-7B-Instruct-gov-sft-v3",
    "qwen2.5-7b-instruct-lora-zhengwu-20240618",
    "/data/models/Qwen2.5-72B-Instruct-AWQ",
    "/mnt/nfs/checkpoints/llama3-8b-sft/checkpoint-12000",
    "./models/smollm2-360m-instruct-q8_0.gguf",
]
_OTHER = {
    "top_k": [20, 40, -1],
    "min_p": [0.05, 0.0],
    "repetition_penalty": [1.05, 1.1],
    "presence_penalty": [0.5],
    "frequency_penalty": [0.2],
    "seed": [42, 20240601],
    "n": [1],
    "max_tokens": [512, 8192],
    "max_completion_tokens": [1024],
    "max_new_tokens": [256],
    "num_ctx": [8192, 32768],
    "num_predict": [256],
    "keep_alive": ["5m", "-1", "30m"],
    "stop": [["</answer>", "\n\n"], ["<|im_end|>", "<|endoftext|>"]],
    "stop_token_ids": [[151645, 151643], [128001, 128009]],
    "skip_special_tokens": [False],
    "include_stop_str_in_output": [False],
    "ignore_eos": [False],
    "logit_bias": [{"50256": -100, "198": -5}],
    "chat_template_kwargs": [{"enable_thinking": False}, {"thinking": True}],
    "enable_thinking": [False],
    "thinking": [{"type": "disabled"}, {"type": "enabled", "budget_tokens": 1024}],
    "reasoning_effort": ["low", "medium"],
    "reasoning": [{"effort": "minimal", "summary": "auto"}],
    "service_tier": ["flex", "default"],
    "store": [False],
    "parallel_tool_calls": [False],
    "tool_choice": ["none"],
    "user": ["cube-eval", "gov-rag-team@example.org", "evaluation-pipeline-2024"],
    "metadata": [{"project": "gov-rag-eval", "run": "2024-05-01T08:00:00Z", "owner": "li.wei"}],
    "response_format": [
        {
            "type": "json_schema",
            "json_schema": {
                "name": "score",
                "schema": {"type": "object", "properties": {"score": {"type": "integer"}}},
            },
        },
        {"type": "json_object"},
    ],
    "guided_json": [{"type": "object", "properties": {"score": {"type": "integer"}}}],
    "guided_choice": [["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]],
    "guided_regex": ["^(10|[0-9])$", "\\[\\[(10|[0-9])\\]\\]"],
    "guided_decoding_backend": ["xgrammar", "outlines"],
    "structured_outputs": [{"choice": ["yes", "no"]}],
    "bad_words": [["抱歉", "作为AI"]],
    "prompt_cache_key": ["cube-judge-relevance-v2", "cube-answerer-bm25-top8"],
    "cache_salt": ["cube-2025-06", "judge-rubric-strict"],
    "request_id": [str(uuid.UUID(int=i * 7919 + 12345, version=4)) for i in range(6)],
    "x_request_id": [str(uuid.UUID(int=i * 104729 + 1, version=1)) for i in range(4)],
    "revision": [
        "5cfd8b2b4c7e8a9f0c3d1e2f4a5b6c7d8e9f0a1b",
        "a09a35458c702b33eeacc393d103063234e8bc28",
        "main",
        "v1.2.0",
    ],
    "digest": ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
    "checksum": ["d41d8cd98f00b204e9800998ecf8427e"],
    "lora_name": ["gov-sft-v3", "zhengwu_lora_r16_alpha32_ep3"],
    "adapter": ["/data/lora/qwen2.5-7b-zhengwu-r16/adapter_model.safetensors"],
    "safe_prompt": [False],
    "return_citations": [True],
    "search_domain_filter": [["gov.cn", "www.gov.cn"]],
    "documents": [[{"title": "办理指南", "text": "请携带身份证原件到政务服务大厅办理。"}]],
    "images": [f"data:image/png;base64,{_PNG}"],
    "image_base64": [_PNG],
    "system": [
        "You are a strict grader. Reply with one integer from 0 to 10 and nothing else.",
        "你是一名严谨的政务服务评估助手，只输出0到10之间的整数。",
    ],
    "preset": ["lenient", "strict", "rubric-lenient"],
    "threshold": [0.6],
    "segmenter": ["jieba", "whitespace"],
    "date": ["2024-06-18", "2025-01-01T00:00:00+08:00"],
    "region": ["北京市朝阳区", "广东省深圳市南山区"],
}
# identifiers written without separators: what the random-run rule could mistake for a key
_IDENTIFIERS = [
    "gpt4oMiniDeployment2024",
    "MyAzureDeployment01EastUS2",
    "ZhengWuFuWuPingJia2024V3",
    "ernie4turbo128kPreview",
    "baichuan2turbo192k",
    "deepseekReasoner20250528",
    "qwen25vl72binstructawq",
    "Application2024MaterialsList",
    "projectGovRagEval2025Q2",
    "checkpoint12000step",
    "run20240618T120000Z",
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "Test1234567890CaseNumber",
    "gov2rag4eval8judge16",
    "BeijingChaoyang2024Guide",
    "SmolLM2x360MInstructQ8",
]
_COLUMNS = {
    "doc_id": ["事项编码", "item_code", "ServiceItemIdentifierCode"],
    "region": ["区划名称", "RegionName"],
    "item_name": ["业务办理项名称", "Service item name (full)"],
    "fee_standard": ["收费标准", "FeeStandardDescriptionText"],
    "application_materials": ["申请材料", "Application_Materials_List_2024"],
    "family_id": ["ServiceFamilyIdentifier", "家族编号"],
}


def negatives() -> list[tuple[str, dict]]:
    """(label, mapping) pairs of ordinary values, each a one-entry mapping as a params file would
    hold it: (mapping name, key path, value)."""
    out = [(f"extra_body.model={m}", {"extra_body": {"model": m}}) for m in _MODEL_IDS]
    out += [
        (f"extra_body.lora={m}", {"extra_body": {"lora_request": {"lora_path": m}}})
        for m in _MODEL_IDS[-3:]
    ]
    for key, values in _OTHER.items():
        out += [(f"extra_body.{key}={v!r}"[:80], {"extra_body": {key: v}}) for v in values]
    out += [(f"extra_body.deployment={v}", {"extra_body": {"deployment": v}}) for v in _IDENTIFIERS]
    for key, values in _COLUMNS.items():
        out += [(f"corpus.columns.{key}={v}", {"corpus.columns": {key: v}}) for v in values]
    return out


def shipped_mappings() -> list[tuple[str, dict]]:
    """Every free-form mapping of params/*.yaml and of the tests' params literals."""
    out = []
    for path in sorted((ROOT / "params").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for name, mapping in _mappings(data):
            out.append((f"{path.name}: {name}", {name: mapping}))
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            for name, value in _literal_mappings(node):
                out.append((f"{path.relative_to(ROOT)}: {name}", {name: value}))
    return out


def _mappings(data: object, path: str = "") -> list[tuple[str, dict]]:
    found = []
    if isinstance(data, dict):
        for k, v in data.items():
            if k in ("extra_body", "options", "columns") and isinstance(v, dict):
                found.append((f"{path}{k}", v))
            else:
                found += _mappings(v, f"{path}{k}.")
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found += _mappings(v, f"{path}{i}.")
    return found


def _literal_mappings(node: ast.AST) -> list[tuple[str, dict]]:
    """`extra_body={...}` keywords and `"extra_body": {...}` / `"options": {...}` dict entries whose
    value is a literal."""
    pairs = []
    if isinstance(node, ast.keyword) and node.arg in ("extra_body", "options", "columns"):
        pairs.append((node.arg, node.value))
    if isinstance(node, ast.Dict):
        pairs += [
            (k.value, v)
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant) and k.value in ("extra_body", "options", "columns")
        ]
    out = []
    for name, value in pairs:
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            continue
        if isinstance(literal, dict) and literal:
            out.append((name, literal))
    return out


def positives(seed: int = 0) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {name: [make(rng) for _ in range(DRAWS)] for name, make in PROVIDERS.items()}


def flagged(mapping: dict) -> list[str]:
    return [f for name, m in mapping.items() for f in secret_scan.secret_findings(m, name)]


def evaluate(seed: int = 1) -> dict:
    keys = positives(seed)
    by_value = {
        p: sum(bool(flagged({"extra_body": {"custom_field": k}})) for k in v)
        for p, v in keys.items()
    }
    by_key = {
        p: sum(bool(flagged({"extra_body": {"api_key": k}})) for k in v) for p, v in keys.items()
    }
    neg = negatives() + shipped_mappings()
    false_pos = [(label, flagged(m)) for label, m in neg if flagged(m)]
    return {"by_value": by_value, "by_key": by_key, "negatives": neg, "false_pos": false_pos}


def _upper(k: int, n: int) -> float:
    """95 % Clopper-Pearson upper bound of a rate k/n."""
    from scipy import stats

    return 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))


def _sweep(n_pos: int) -> None:
    """Misses by value and false positives at other randomness limits and run lengths (draws of
    seed 0, on which they were chosen; the headline uses the fresh draws of seed 1)."""
    chosen = (secret_scan.RANDOMNESS_LIMIT, secret_scan.MIN_RUN)
    print("limit, run length: misses by value / false positives (seed-0 draws)")
    settings = [(x, chosen[1]) for x in (0.60, 0.70, 0.85, 0.90, 0.95)]
    settings += [(chosen[0], n) for n in (16, 24, 28, 40)] + [chosen]
    try:
        for limit, run in settings:
            secret_scan.RANDOMNESS_LIMIT, secret_scan.MIN_RUN = limit, run
            r = evaluate(seed=0)
            missed = n_pos - sum(r["by_value"].values())
            mark = " (chosen)" if (limit, run) == chosen else ""
            fp = f"{len(r['false_pos'])}/{len(r['negatives'])}"
            print(f"  {limit:.2f}, {run:2d}{mark}: {missed}/{n_pos} / {fp}")
    finally:
        secret_scan.RANDOMNESS_LIMIT, secret_scan.MIN_RUN = chosen


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list | tuple):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def _margin() -> None:
    """The randomness of the ordinary values' runs (the most) and of the keys' runs (the least)."""
    neg = [
        (secret_scan.randomness(run), run)
        for _, m in negatives() + shipped_mappings()
        for text in _strings(m)
        if not secret_scan._content(text)
        for run in secret_scan.candidate_runs(text)
    ]
    pos = [
        (max(secret_scan.randomness(run) for run in secret_scan.candidate_runs(k)), name)
        for name, keys in positives(0).items()
        for k in keys
        if secret_scan.candidate_runs(k)
    ]
    low = min(pos)
    top = (
        f"at most {max(neg)[0]:.3f} ({max(neg)[1][:40]})"
        if neg
        else f"none with a run of {secret_scan.MIN_RUN}+ letters and digits"
    )
    print(
        f"randomness of the candidate runs: ordinary values {top}; keys at least {low[0]:.3f} "
        f"({low[1]}); limit {secret_scan.RANDOMNESS_LIMIT}"
    )


def main() -> None:
    r = evaluate()
    n_pos, n_neg = DRAWS * len(PROVIDERS), len(r["negatives"])
    print(
        f"{len(PROVIDERS)} providers x {DRAWS} keys = {n_pos} secrets (seed 1); {n_neg} ordinary "
        f"values ({len(shipped_mappings())} mappings from params/ and tests/)"
    )
    print("detected by its value alone (under an ordinary key):")
    for p, n in r["by_value"].items():
        print(f"  {p:16} {n:3d}/{DRAWS}")
    for label, why in r["false_pos"]:
        print(f"  false positive: {label}: {why}")
    _sweep(n_pos)
    _margin()
    miss_value = n_pos - sum(r["by_value"].values())
    miss_key = n_pos - sum(r["by_key"].values())
    fp = len(r["false_pos"])
    print(
        f"missed by value alone: {miss_value}/{n_pos} ({miss_value / n_pos:.1%}); missed under a "
        f"credential's key: {miss_key}/{n_pos} ({miss_key / n_pos:.1%}); false positives: "
        f"{fp}/{n_neg} ({fp / n_neg:.1%}, 95 % upper bound {_upper(fp, n_neg):.1%})"
    )


if __name__ == "__main__":
    main()
