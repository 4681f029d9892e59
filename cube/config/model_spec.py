"""The model spec: one OpenAI-compatible endpoint or offline algorithm, as a params file names it.

Used by the params schema (`cube.config.params`) and re-exported by `cube.config`: how a model is
reached (base URLs, the NAME of the environment variable holding its key, never the key), its
sampling parameters, its prices and its concurrency limits, with the checks that keep secrets out of
params and errors.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- models (LLM access)
DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024  # a reply's most bytes (cube.llm.transport)


def url_credential_problem(url: str) -> str | None:
    """Why `url` must not be a params value (it carries credentials), or None.

    User-info (`http://user:pass@host/v1`) would be written to params.yaml, the manifest and
    the cache, and httpx turns it into Basic auth that replaces the API key; a query token
    (`?api_key=...`, Azure Functions' `?code=...`, a SAS `?sig=...`, or any parameter whose
    value looks like a credential) would be written likewise. The message never repeats the
    secret.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a valid URL"
    if parts.username is not None or parts.password is not None:
        return (
            "contains credentials (user:password@host); remove them and put the key in an "
            "environment variable named by api_key_env (or a header's value in one named "
            "by header_env)"
        )
    from cube.config.secret_scan import secret_query_names

    bad = secret_query_names(parts.query)
    if bad:
        return (
            f"carries a credential in its query ({', '.join(bad)}=...); remove it and put the key "
            "in an environment variable named by api_key_env (or header_env)"
        )
    return None


def redact_url(url: str) -> str:
    """`url` without user-info, query and fragment: safe to print, log and store."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<unparseable URL>"
    return (
        urlunsplit((parts.scheme, host, parts.path, "", ""))
        if parts.scheme
        else url.split("?")[0].split("@")[-1]
    )


LOCAL_MAX_CONCURRENCY = (
    64  # default max_concurrency when every base URL is local (a vLLM / Ollama next door)
)
REMOTE_MAX_CONCURRENCY = 16  # elsewhere (a hosted API's rate limits)


LOCAL_SUFFIXES = (
    ".localhost",
    ".local",
    ".internal",
    ".cluster.local",
)  # mDNS, Docker / cloud, Kubernetes
SHARED_ADDRESS_SPACE = (
    "100.64.0.0/10"  # carrier-grade NAT, Tailscale: a machine of one's own network
)
# The private networks, listed (not `ipaddress.is_private`, which also counts documentation,
# benchmark and reserved ranges such as 198.18/15, 240/4, 2001:db8::/32)
LOCAL_NETWORKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", SHARED_ADDRESS_SPACE, "fc00::/7")


def local_url(url: str) -> bool:
    """True when `url`'s host is local: `localhost` or a name ending in `.localhost`, `.local`
    (mDNS, e.g. `gpu-box.local`), `.internal` (`host.docker.internal`) or `.cluster.local` (a
    Kubernetes service); or a loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local,
    unspecified (`0.0.0.0`) or shared (100.64.0.0/10) address. Any other name is not local, a
    one-word one included: it may be a corporate gateway reached through the DNS search domain."""
    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(LOCAL_SUFFIXES):
        return True
    return _local_address(host)


def _local_address(host: str) -> bool:
    """Whether `host` is a loopback, link-local, unspecified or private (`LOCAL_NETWORKS`) IP
    address (a name is not)."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified or _in_local_network(ip)


def _in_local_network(ip: Any) -> bool:
    """Whether the address is in one of `LOCAL_NETWORKS` of its IP version."""
    import ipaddress

    networks = [ipaddress.ip_network(net) for net in LOCAL_NETWORKS]
    return any(ip in net for net in networks if net.version == ip.version)


class ModelSpec(StrictModel):
    """One model: an OpenAI-compatible endpoint, or an offline deterministic algorithm.

    `provider: openai` covers OpenAI, DeepSeek, vLLM, Ollama and any server speaking
    `/v1/chat/completions`. `provider: offline` names a built-in algorithm (`extractive`
    answerer, `rubric` judge); they are not LLMs and say so in every table they fill.
    """

    provider: Literal["openai", "offline"] = "openai"
    model: str = Field(
        description="Model name sent to the endpoint, or the offline algorithm's name."
    )
    base_url: str | None = Field(
        None, description="Endpoint base URL, e.g. https://api.openai.com/v1."
    )
    base_urls: list[str] | None = Field(
        None, description="Several replicas of one model; requests are spread across them."
    )
    api_key_env: str | None = Field(
        None, description="NAME of the environment variable holding the API key (never the key)."
    )
    header_env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra HTTP headers whose values are secrets: header name -> NAME of the "
        "environment variable holding the value (e.g. {api-key: AZURE_KEY}).",
    )
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = 512
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens",
        description="Request field for max_tokens: OpenAI's o-series models want "
        "max_completion_tokens.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra JSON fields sent with every request (e.g. vLLM chat_template_kwargs).",
    )
    structured_output: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Ask for JSON that a schema constrains where a caller gives one (the judges' "
        "score, an LLM question writer's question): `response_format` json_schema (OpenAI, vLLM), "
        "else llama.cpp's schema-constrained json_object. auto (the default of an "
        "OpenAI-compatible model): the first the endpoint accepts, free text when it refuses both; "
        "on: the same, but calls fail when it refuses both; off: free text only (the former "
        "default: set it to keep the cache keys of earlier runs' judge calls). An offline "
        "algorithm reads no schema (its default stays off).",
    )
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="Seconds one attempt may take as a whole (connecting, redirects, the last byte "
        "of the reply), not each read; a later attempt gets its own.",
    )
    max_reply_bytes: int = Field(
        DEFAULT_MAX_REPLY_BYTES,
        ge=1024,
        description="The most bytes of one reply, on the wire and once inflated (gzip, deflate), "
        "counted while it streams: a larger reply is a failed call ('reply too large').",
    )
    follow_redirects: bool = Field(
        False,
        description="Follow HTTP redirects (at most 5, http and https only). Off: a redirect is a "
        "failed call naming where it pointed. On: headers holding a secret (Authorization, "
        "api-key, Cookie, every header_env header) are never sent to another origin.",
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="Most calls in flight: the adaptive limit starts at 4 (or min_concurrency if "
        "larger, at most this), or at half the limit an earlier run learned for this endpoint and "
        "model (concurrency_limits.json beside the call cache), and doubles per window of answered "
        "calls up to this. Default: "
        f"{LOCAL_MAX_CONCURRENCY} when every base URL is local (localhost or a host name ending in "
        ".localhost, .local, .internal or .cluster.local; a loopback, private, link-local, 0.0.0.0 "
        f"or 100.64.0.0/10 address), else {REMOTE_MAX_CONCURRENCY} (a one-word host name included: "
        "it may be a gateway); a value given always wins.",
    )
    min_concurrency: int = Field(
        1,
        ge=1,
        description="Fewest calls in flight the adaptive limit goes down to: it is cut to 70 % on "
        "HTTP 429 or a timeout (once for the calls in flight at the cut) and then grows by 1/limit "
        "per answered call, only 429s and timeouts moving it from then on; before any cut it steps "
        "back here when the answered calls per second stay flat as the calls in flight rise two "
        "windows in a row, as on a server that answers one request at a time "
        "(cube/llm/concurrency.py).",
    )
    max_attempts: int = Field(5, ge=1, description="Attempts per call, retries included.")
    backoff_base_s: float = Field(
        0.5, gt=0, description="First retry delay; doubles each attempt, with jitter."
    )
    backoff_max_s: float = Field(30.0, gt=0)
    breaker_threshold: int = Field(
        5,
        ge=0,
        description="Stop sending to an endpoint after this many calls in a row used up all their "
        "attempts on connection errors, timeouts or unusable answers (401/403/404 stop it at "
        "once); one trial call after a 30 s cool-down resumes it; 0: never.",
    )
    price_input_per_m: float | None = Field(
        None, ge=0, description="Price per million input tokens."
    )
    price_output_per_m: float | None = Field(
        None, ge=0, description="Price per million output tokens."
    )
    price_cached_input_per_m: float | None = Field(
        None,
        ge=0,
        description="Price per million input tokens the provider reports as served from its prompt "
        "cache (`usage.prompt_tokens_details.cached_tokens`; default: price_input_per_m).",
    )
    batch_price_input_per_m: float | None = Field(
        None,
        ge=0,
        description="Price per million input tokens of replies imported by `cube batch import` "
        "(batch APIs are often cheaper; default: price_input_per_m).",
    )
    batch_price_output_per_m: float | None = Field(
        None,
        ge=0,
        description="Price per million output tokens of batch replies (default: "
        "price_output_per_m).",
    )
    currency: str = "USD"
    options: dict[str, Any] = Field(
        default_factory=dict, description="Options of an offline algorithm."
    )

    # Model validators, not field validators: a field validator's error would echo the value,
    # which may be a key pasted where its variable's name belongs (`_format_validation_error`
    # never shows the input of these fields either).
    @model_validator(mode="after")
    def _env_names(self) -> ModelSpec:
        problems = []
        if self.api_key_env is not None and (why := env_name_problem(self.api_key_env)):
            problems.append(f"api_key_env {why}")
        bad = [h for h, v in self.header_env.items() if env_name_problem(v)]
        if bad:
            problems.append(
                f"header_env[{', '.join(bad)}] must be the NAME of an environment variable, not a "
                "value (the value is not repeated here)"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _no_secrets(self) -> ModelSpec:
        """`extra_body` and `options` are sent or stored as written: a key or token pasted into
        them is refused like `api_key` (`cube.config.secret_scan`; the value is never echoed)."""
        from cube.config.secret_scan import secrets_problem

        why = secrets_problem({"extra_body": self.extra_body, "options": self.options})
        if why:
            raise ValueError(why)
        return self

    @model_validator(mode="before")
    @classmethod
    def _offline_structured_output(cls, data: Any) -> Any:
        """An offline algorithm keeps `off` (it reads no schema): its dumped spec, and with it the
        stage fingerprints and provenance of runs made before `auto` became the default, stay
        the same."""
        if (
            isinstance(data, dict)
            and data.get("provider") == "offline"
            and "structured_output" not in data
        ):
            data = {**data, "structured_output": "off"}
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_max_concurrency(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("max_concurrency") is None:
            urls = data.get("base_urls") or [data.get("base_url")]
            local = bool(urls) and all(isinstance(u, str) and local_url(u) for u in urls)
            data = {
                **data,
                "max_concurrency": LOCAL_MAX_CONCURRENCY if local else REMOTE_MAX_CONCURRENCY,
            }
        return data

    @model_validator(mode="after")
    def _endpoint(self) -> ModelSpec:
        if self.provider == "openai" and not (self.base_url or self.base_urls):
            raise ValueError("an openai-compatible model needs base_url (or base_urls)")
        urls = [("base_url", self.base_url)] + [
            (f"base_urls[{i}]", u) for i, u in enumerate(self.base_urls or [])
        ]
        problems = [
            f"{where} {redact_url(u)} {why}"
            for where, u in urls
            if u and (why := url_credential_problem(u))
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def endpoints(self) -> list[str]:
        return list(self.base_urls or [self.base_url or ""])


_KEY_PREFIX = re.compile(
    r"(sk|pk|rk|hf|ghp|gho|ghs|github_pat|glpat|xox[abpr]|AIza|AKIA|nvapi|gsk|r8)[-_]?[A-Za-z0-9]",
    re.IGNORECASE,
)
SECRET_FIELDS = ("api_key_env", "header_env")  # their input is never echoed in an error


def env_name_problem(name: str) -> str | None:
    """Why `name` is no environment variable name, or looks like a secret itself; None if fine.
    The message never repeats `name` (it may be a key pasted in the wrong place)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return (
            "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key (the "
            "value is not repeated here)"
        )
    if _looks_like_key(name):
        return (
            "looks like a key, not the NAME of an environment variable (the value is not repeated "
            "here): put the key in a variable, e.g. export OPENAI_API_KEY=..., and give its name "
            "(OPENAI_API_KEY)"
        )
    return None


def _looks_like_key(name: str) -> bool:
    """A known key prefix on a long mixed-case name with digits, or any long name mixing lower
    case, upper case and digits (a variable name is one case)."""
    has_digit = any(c.isdigit() for c in name)
    prefixed = bool(_KEY_PREFIX.match(name)) and len(name) >= 20 and name != name.upper()
    mixed = any(c.islower() for c in name) and any(c.isupper() for c in name)
    return has_digit and (prefixed or (len(name) >= 24 and mixed))


ModelRef = str | ModelSpec  # a name from the `models:` section, or an inline spec


def _one_line(name: str) -> str:
    """A name (of a system, a judge, a dimension) is one line of printable characters: a line
    break or a control character would break the lines of the pages' Markdown, of the CSV tables
    and of the logs. Any other character is allowed, and escaped wherever the name is shown
    (docs/explanation/report-security.md)."""
    import unicodedata

    if not name.strip() or any(unicodedata.category(c) in _UNPRINTED for c in name):
        raise ValueError(
            "a name must be one non-empty line: no line break, tab, control or invisible "
            "formatting character"
        )
    return name


_UNPRINTED = {"Cc", "Cf", "Zl", "Zp"}  # controls, invisible formatting (bidi), line separators
Name = Annotated[str, AfterValidator(_one_line)]
