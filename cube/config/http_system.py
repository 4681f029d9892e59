"""The params of a `kind: http` system: any JSON endpoint, its body template and response paths.

    - kind: http
      name: my-rag
      url: http://localhost:8000/ask
      body: {query: "{question}", k: "{top_n}"}
      response: {answer: answer, retrieved_ids: "sources[*].doc_id"}
      answerer: my-llm            # the model the service answers with: it writes the bounds

`body` is a template: a mapping (or list) whose string values may hold the placeholders
`PLACEHOLDERS` (a value that is exactly one placeholder takes its JSON type: `"{top_n}"` -> 8,
`"{region}"` -> null when the question names none; inside a longer string it is text), or a
JSON text whose placeholders stand for whole JSON values (`'{"q": {question}, "k": {top_n}}'`).
`response` holds JMESPath expressions (jmespath.org) for the answer and for the retrieved
documents' ids and/or passages' texts. `preset` fills `body` and `response` for a known shape
(`HTTP_PRESETS`); what the entry gives itself wins. Secrets go only through `header_env` (header
name -> the NAME of an environment variable): a plain `headers` entry that looks like a credential
is refused, and no error repeats a header's value.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import Field, model_validator

from cube.config.model_spec import (
    DEFAULT_MAX_REPLY_BYTES,
    ModelRef,
    Name,
    StrictModel,
    env_name_problem,
    redact_url,
    url_credential_problem,
)

PLACEHOLDERS = ("question", "question_id", "top_n", "lang", "region")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# The chat preset reads RAGFlow's OpenAI-compatible chat endpoint
# (POST /api/v1/chats_openai/{chat_id}/chat/completions, or /api/v1/openai/{chat_id}/... since
# 0.25; https://ragflow.io/docs/http_api_reference "OpenAI-Compatible API"): with
# `"extra_body": {"reference": true}` in the body, the non-stream reply carries the references
# beside the message, `choices[0].message.reference`: a list of chunks ({id, content,
# document_id, document_name, ...}, RAGFlow's `chunks_format`) in the chat route, or
# `{"chunks": {"<position>": {...}} | [...], "doc_aggs": ...}` in the documented agent example.
# The passages path reads the chunks' `content` from each of those shapes (not_null: the first
# that exists; an empty list is an empty retrieval, a reply with no reference at all finds nothing).
# The Dify preset reads Dify's chat app API (POST /v1/chat-messages, response_mode "blocking";
# docs.dify.ai "Send Chat Message"; langgenius/dify template_chat.en.mdx): `answer`, and
# `metadata.retriever_resources[*].content` (the app's "Citations and Attributions" turned on).
HTTP_PRESETS: dict[str, dict[str, Any]] = {
    "openai_chat_references": {
        "body": {
            "model": "model",
            "messages": [{"role": "user", "content": "{question}"}],
            "stream": False,
            "extra_body": {"reference": True},
        },
        "response": {
            "answer": "choices[0].message.content",
            "retrieved_passages": "not_null(choices[0].message.reference[*].content, "
            "choices[0].message.reference.chunks[*].content, "
            "choices[0].message.reference.chunks.*.content)",
        },
    },
    "dify_chat_messages": {
        "body": {"inputs": {}, "query": "{question}", "response_mode": "blocking", "user": "cube"},
        "response": {
            "answer": "answer",
            "retrieved_passages": "metadata.retriever_resources[*].content",
        },
    },
}

# header names that carry credentials (a plain `headers` entry with one is refused)
_SECRET_HEADER = re.compile(
    r"(auth|cookie|key|token|secret|password|passwd|credential|signature|session)", re.IGNORECASE
)
# values that look like a credential whatever the header: an auth scheme, a provider key prefix
_SECRET_VALUE = re.compile(
    r"^\s*((bearer|basic|digest|token)\s+\S|(sk|pk|rk|hf|ghp|gho|ghs|github_pat|glpat|xox[abpr]|"
    r"AIza|AKIA|nvapi|gsk|r8)[-_][A-Za-z0-9_-]{8,})",
    re.IGNORECASE,
)


def placeholders(template: Any) -> set[str]:
    """Every `{name}` in the template's strings (keys excluded)."""
    if isinstance(template, str):
        return set(PLACEHOLDER.findall(template))
    if isinstance(template, dict):
        return set().union(*(placeholders(v) for v in template.values()))
    if isinstance(template, list):
        return set().union(*(placeholders(v) for v in template))
    return set()


def fill_json_text(template: str, values: dict[str, Any]) -> Any:
    """A JSON-text template with each placeholder replaced by its value's JSON encoding, parsed."""
    text = PLACEHOLDER.sub(
        lambda m: (
            json.dumps(values[m.group(1)], ensure_ascii=False)
            if m.group(1) in values
            else m.group(0)
        ),
        template,
    )
    return json.loads(text)


class HttpResponsePaths(StrictModel):
    answer: str | None = Field(None, description="JMESPath of the answer text (required).")
    retrieved_ids: str | None = Field(
        None,
        description="JMESPath of the retrieved documents' ids (knowledge-base doc_ids), in rank "
        "order.",
    )
    retrieved_passages: str | None = Field(
        None,
        description="JMESPath of the retrieved passages' texts, in rank order; each is mapped to "
        "the knowledge-base document it came from (used when retrieved_ids is not given).",
    )


class HttpSystem(StrictModel):
    kind: Literal["http"] = "http"
    name: Name
    url: str = Field(description="The endpoint's full URL (no credentials in it).")
    method: Literal["POST", "PUT", "GET"] = Field(
        "POST", description="GET sends the body mapping as query parameters."
    )
    preset: Literal["openai_chat_references", "dify_chat_messages"] | None = Field(
        None,
        description="Fill body and response for a known reply shape: openai_chat_references "
        "(OpenAI-compatible chat with references beside the message, as RAGFlow's), "
        "dify_chat_messages (Dify's chat app API); given keys win.",
    )
    headers: dict[str, Any] = Field(
        default_factory=dict,
        description="Plain, non-secret headers (a credential-looking one is refused: use "
        "header_env).",
    )
    header_env: dict[str, str] = Field(
        default_factory=dict,
        description="Secret headers: header name -> NAME of the environment variable holding the "
        "value (e.g. {Authorization: MY_SERVICE_AUTH}, the variable holding 'Bearer ...').",
    )
    body: dict[str, Any] | list[Any] | str | None = Field(
        None,
        description="The JSON body template, with placeholders {question}, {question_id}, "
        "{top_n}, {lang}, {region} (docs/how-to/http-system.md).",
    )
    response: HttpResponsePaths = Field(
        default_factory=HttpResponsePaths,
        description="JMESPath expressions reading the reply: answer, retrieved_ids and/or "
        "retrieved_passages.",
    )
    top_n: int = Field(8, ge=1, description="Retrieved lists are cut at this many documents.")
    answerer: ModelRef | None = Field(
        None,
        description="The model the service answers with: it writes the zero/full bound sets "
        "(required).",
    )
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="Seconds one request may take as a whole (connecting, redirects, the last "
        "byte of the reply) before it is retried.",
    )
    max_reply_bytes: int = Field(
        DEFAULT_MAX_REPLY_BYTES,
        ge=1024,
        description="The most bytes of one reply, on the wire and once inflated: a larger reply "
        "is a failed question ('reply too large').",
    )
    follow_redirects: bool = Field(
        False,
        description="Follow HTTP redirects (at most 5). Off: a redirect is a failed question "
        "naming where it pointed. On: header_env headers, Authorization, api-key and Cookie are "
        "never sent to another origin.",
    )
    max_concurrency: int = Field(4, ge=1, description="Most requests in flight (adaptive below).")
    max_attempts: int = Field(3, ge=1, description="Attempts per question, retries included.")

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("preset") not in HTTP_PRESETS:
            return data
        preset = HTTP_PRESETS[data["preset"]]
        out = dict(data)
        out.setdefault("body", preset["body"])
        given = out.get("response")
        if given is None or isinstance(given, dict):
            out["response"] = {**preset["response"], **(given or {})}
        return out

    @model_validator(mode="after")
    def _check(self) -> HttpSystem:
        problems = [
            *self._url_problems(),
            *self._header_problems(),
            *self._path_problems(),
            *self._body_problems(),
            *self._secret_problems(),
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def secret_envs(self) -> list[tuple[str, str, str]]:
        """(variable, params key, who needs it) of each secret header
        (`cube.llm.preflight.check_keys`)."""
        return [
            (var, "header_env", f"HTTP at {redact_url(self.url)}")
            for var in self.header_env.values()
        ]

    def _url_problems(self) -> list[str]:
        if not re.match(r"^https?://", self.url):
            return [f"url {redact_url(self.url)} must start with http:// or https://"]
        why = url_credential_problem(self.url)
        return [f"url {redact_url(self.url)} {why}"] if why else []

    def _header_problems(self) -> list[str]:
        out = [why for name, value in self.headers.items() if (why := _header_problem(name, value))]
        bad = [h for h, v in self.header_env.items() if env_name_problem(v)]
        if bad:
            out.append(
                f"header_env[{', '.join(bad)}] must be the NAME of an environment variable, not a "
                "value (the value is not repeated here)"
            )
        both = sorted({h.lower() for h in self.headers} & {h.lower() for h in self.header_env})
        if both:
            out.append(f"headers and header_env both set {', '.join(both)}: keep one")
        return out

    def _secret_problems(self) -> list[str]:
        """Secret-looking entries of the body template and the plain headers, by the scan every
        free-form mapping of params goes through (`cube.config.secret_scan`): a key there would be
        written to params.yaml, the manifest and the cache's request column."""
        from cube.config.secret_scan import secrets_problem

        body: Any = self.body
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                body = {"(body text)": body}
        if not isinstance(body, dict):
            body = {"(body)": body}
        plain = {k: v for k, v in self.headers.items() if isinstance(v, str)}
        why = secrets_problem({"body": body, "headers": plain})
        return [why] if why else []

    def _path_problems(self) -> list[str]:
        out = []
        paths = self.response.model_dump()
        for key, expr in paths.items():
            if expr is None:
                continue
            try:
                jmespath.compile(expr)
            except JMESPathError as exc:
                out.append(f"response.{key}: not a JMESPath expression ({exc})")
        if paths["answer"] is None:
            out.append("response.answer: give the JMESPath of the answer in the reply")
        if paths["retrieved_ids"] is None and paths["retrieved_passages"] is None:
            out.append(
                "response: give retrieved_ids (the retrieved documents' ids) and/or "
                "retrieved_passages (their texts): R@k needs what the system retrieved"
            )
        return out

    def _body_problems(self) -> list[str]:
        if self.body is None:
            return ["body: give the JSON body template, e.g. {query: '{question}'} (or a preset)"]
        used = placeholders(self.body)
        out = []
        unknown = sorted(used - set(PLACEHOLDERS))
        if unknown:
            out.append(
                f"body: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
                f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
        if not used & {"question", "question_id"}:
            out.append(
                "body: no {question} placeholder: every question would send the same request"
            )
        if isinstance(self.body, str) and not unknown:
            out += _json_text_problems(self.body)
        if self.method == "GET" and not _flat_mapping(self.body):
            out.append("body: a GET sends its body as query parameters: give a flat mapping")
        return out


def _header_problem(name: str, value: Any) -> str:
    """A plain header's problem ("" for none): not text, or a credential written in params."""
    if not isinstance(value, str):
        return f"headers[{name}] must be text (the value is not repeated here)"
    if _SECRET_HEADER.search(name) or _SECRET_VALUE.match(value):
        return (
            f"headers[{name}] looks like a credential (the value is not repeated here): "
            f"put the value in an environment variable and name it under header_env, "
            f"e.g. header_env: {{{name}: MY_SERVICE_SECRET}}"
        )
    return ""


def _flat_mapping(body: Any) -> bool:
    """A body a GET can send as query parameters: a mapping of plain values."""
    return isinstance(body, dict) and all(not isinstance(v, dict | list) for v in body.values())


def _json_text_problems(template: str) -> list[str]:
    """A JSON-text body must be JSON once its placeholders hold values."""
    sample = {"question": 'a "quoted" question', "question_id": "q1", "top_n": 8, "lang": "en"}
    try:
        fill_json_text(template, {**sample, "region": None})
    except ValueError as exc:
        return [
            f"body: not JSON once its placeholders are filled ({exc}); in a JSON text a "
            'placeholder stands for a whole value: {"q": {question}}, not {"q": "{question}"}'
        ]
    return []
