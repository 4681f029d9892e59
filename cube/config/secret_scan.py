"""Secrets pasted into the free-form mappings of a params file, found before they are written.

A params file never holds a key: a model names the environment variable holding it (`api_key_env`,
`header_env`), and `api_key:` itself is an unknown key. The free-form mappings are another way in:
`extra_body: {api_key: sk-...}` would be sent, and written to `params.yaml`, the manifest, the
provenance record and the cache. `secret_findings` walks such a mapping (nested mappings and lists
included) and names every entry that looks like a secret, without repeating its value:

- by its key: a key naming a credential (detect-secrets' keyword list: `api_key`, `auth_key`,
  `private_key`, `password`, `secret`, ...; `access_token`, `auth_token`, ...; `authorization`,
  `credential(s)`, `access_key`, ...; a key ending in `_token` (`hf_token`) but a tokenizer's
  special token (`pad_token`, `eos_token`); and the whole key `token`, `auth`, `key`, `bearer` or
  `cookie`), whatever the value (an empty one excepted), compared word by word in any case and
  separator (`apiKey`, `X-Api-Key`), so that `max_tokens`, `stop_token_ids` and
  `prompt_cache_key` are not credentials;
- by its value, under any key: a token of a known provider (detect-secrets' detectors: AWS,
  GitHub, GitLab, Slack, Stripe, OpenAI's older keys, JWTs, private keys, SendGrid, Twilio, ...),
  an HTTP authorisation value (`Bearer ...`, `Basic ...`), a key prefix of the LLM providers
  (`sk-`, `hf_`, `gsk_`, `nvapi-`, ...) followed by 16 or more letters and digits, a key of a fixed
  shape (Zhipu's, Google's), or a long random string: a run of `MIN_RUN` or more characters of the
  base64 alphabet with letters and digits, not hex, not sequential, whose Shannon entropy
  (detect-secrets' measure) is more than `RANDOMNESS_LIMIT` of the most its length allows. Hex
  strings (a commit, a digest, a request id) pass: a key that is bare hex or a UUID is found by its
  key name only. Model ids, paths and names (`Qwen/Qwen2.5-72B-Instruct`, `gpt4oMiniDeployment`)
  are words between separators, or shorter than a key.
- a URL value (`http(s)://...`) whose query carries a credential (`secret_query_names`: a
  parameter named like one, `key`, `token`, `sig`, ..., or the whole names `code` (Azure
  Functions' key), `pwd`, `pass`, `jwt`, ...; or one whose value the detectors above find), or
  whose user-info holds a password. The same check refuses such a URL as a model's `base_url` or
  an http system's `url` (`cube.config.model_spec.url_credential_problem`), `cube init --url`
  included;
- data URLs and base64 images are content, not keys.

benchmarks/secret_scan.py measures how often this is wrong on real-looking keys of common providers
and on ordinary values of these mappings (the figure is in docs/explanation/report-security.md).
detect-secrets (0.3 s to import) is imported only when a mapping is not empty.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

MIN_RUN = 32  # a random run is at least this long (shorter ones: identifiers; benchmark)
RANDOMNESS_LIMIT = 0.77  # entropy / its maximum for the run's length (benchmarks/secret_scan.py)
MIN_KEY_LENGTH = 16  # shorter values are checked by their key only
# prefixes of API keys: OpenAI and the OpenAI-compatible providers (sk-), Stripe (pk-, rk-),
# Hugging Face, GitHub, GitLab, Slack, Google, AWS, NVIDIA, Groq, Replicate, Baidu
KEY_PREFIXES = r"sk|pk|rk|hf|ghp|gho|ghs|github_pat|glpat|xox[abpr]|AIza|AKIA|nvapi|gsk|r8|bce"
_PREFIXED = re.compile(rf"^(?:(?i:{KEY_PREFIXES})[-_]|AIza|AKIA)")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{16,}")
# keys of a fixed shape: Zhipu's `<32 hex>.<16 characters>`, Google's `AIza` + 35
_FIXED_SHAPES = re.compile(r"^(?:[0-9a-f]{32}\.[A-Za-z0-9]{16}|AIza[0-9A-Za-z_\-]{35})$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
# key words naming a credential, besides detect-secrets' keyword list
_TOKEN_QUALIFIERS = (
    "access|auth|api|bearer|refresh|session|id|oauth|personal|private|secret|security|bot|app"
)
_EXTRA_KEY_WORDS = (
    rf"(?:{_TOKEN_QUALIFIERS})_?token|authorization|credentials?|passphrase|"
    r"access_?key|subscription_?key|master_?key|signing_?key|encryption_?key"
)
# words that name a credential only as the whole key (`stop_token_ids`, `prompt_cache_key` and
# `auth_mode` are no credentials)
_WHOLE_KEYS = r"token|auth|key|bearer|cookie"
# a key ending in `_token` (`hf_token`, `github_token`) but a tokenizer's special token
_ENDS_IN_TOKEN = (
    r"^(?!(?:.*_)?(?:pad|bos|eos|unk|sep|cls|mask|start|end|stop|special|image|audio|video|max|min|num)_token$)"
    r".*_token$"
)
_AUTH_SCHEME = re.compile(r"(?i)^\s*(?:bearer|basic|token|digest|apikey)\s+\S{8,}\s*$")
_SEPARATORS = re.compile(r"[^A-Za-z0-9+/=]")


def _words(key: str) -> str:
    """`key` in lower snake case: `apiKey`, `X-Api-Key` and `api key` all become words joined by
    `_` (`api_key`, `x_api_key`)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key)
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


@lru_cache(maxsize=1)
def _key_pattern() -> re.Pattern[str]:
    from detect_secrets.plugins.keyword import DENYLIST

    words = "|".join((*DENYLIST, _EXTRA_KEY_WORDS))
    return re.compile(rf"(?:^|_)(?:{words})(?:_|$)|^(?:{_WHOLE_KEYS})$|{_ENDS_IN_TOKEN}")


def secret_key(key: str) -> bool:
    """True when the mapping key `key` names a credential (see the module docstring)."""
    return bool(_key_pattern().search(_words(str(key))))


@lru_cache(maxsize=1)
def _detectors() -> tuple[Any, ...]:
    """detect-secrets' detectors of known providers' tokens (its regex-based plugins, but the
    public-IP one: an address is no secret)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.ip_public import IPPublicDetector

    classes = get_mapping_from_secret_type_to_class().values()
    return tuple(
        c()
        for c in classes
        if issubclass(c, RegexBasedDetector) and not issubclass(c, IPPublicDetector)
    )


def entropy(text: str) -> float:
    """Shannon entropy of `text` in bits per character, over the base64 alphabet (detect-secrets'
    measure)."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString().calculate_shannon_entropy(text)


def randomness(run: str) -> float:
    """`entropy(run)` over the most a string of its length can have (log2 of its length, at most
    the 64 characters of the alphabet): near 1 for random characters, lower for words and for hex
    (16 symbols)."""
    return entropy(run) / math.log2(min(len(run), 64))


def candidate_runs(text: str) -> list[str]:
    """The runs of `text` that could be a random key: `MIN_RUN` or more characters of the base64
    alphabet between other characters (`- _ . ~`, blanks, ...), with letters and digits, not hex (a
    digest, a commit, an id: a hex key is found by its key name or prefix only) and not sequential
    (`abcdef...`, detect-secrets' filter)."""
    return [
        run
        for run in _SEPARATORS.split(text)
        if len(run) >= MIN_RUN
        and any(c.isdigit() for c in run)
        and any(c.isalpha() for c in run)
        and not _HEX.match(run)
        and not _sequential(run)
    ]


def random_string(text: str) -> bool:
    """True when a `candidate_runs` run of `text` has a `randomness` over `RANDOMNESS_LIMIT`.
    Model ids, paths and names are words and numbers between separators, or shorter."""
    return any(randomness(run) > RANDOMNESS_LIMIT for run in candidate_runs(text))


def _sequential(run: str) -> bool:
    """detect-secrets' filter of sequential strings (`abcdef...`, `0123...`)."""
    from detect_secrets.filters.heuristic import is_sequential_string

    return is_sequential_string(run)


def _prefixed_key(text: str) -> bool:
    """A known key prefix (`sk-`, `hf_`, ...) followed, after it, by 16 or more letters and digits;
    or a key of a fixed shape (Zhipu's, Google's)."""
    prefix = _PREFIXED.match(text)
    return bool((prefix and _ALNUM_RUN.search(text, prefix.end())) or _FIXED_SHAPES.match(text))


_FILE_SIGNATURES = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF", b"RIFF")


def _content(text: str) -> bool:
    """A data URL, or base64 of an image or a PDF (compressed bytes look random, but are content
    sent to a model, not a credential)."""
    import base64
    import binascii

    if text.startswith("data:"):
        return True
    try:
        head = base64.b64decode(text[:64] + "=" * (-len(text[:64]) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return head.startswith(_FILE_SIGNATURES)


def secret_value(value: Any) -> str | None:
    """What makes `value` look like a secret (a provider's token, an authorisation value, a
    random string), or None. Only strings of `MIN_KEY_LENGTH` characters or more are checked, and
    content (`_content`: a data URL, a base64 image) is not."""
    if not isinstance(value, str) or len(value.strip()) < MIN_KEY_LENGTH:
        return None
    text = value.strip()
    if _content(text):
        return None
    if _AUTH_SCHEME.match(text):
        return "an HTTP authorization value"
    for detector in _detectors():
        if any(True for _ in detector.analyze_string(text)):
            return f"a {detector.secret_type}"
    if _prefixed_key(text):
        return "an API key (its prefix and length)"
    if random_string(text):
        return "a long random string"
    return None


# query parameter names that carry a credential: any name containing one of these words ...
_SECRET_QUERY = re.compile(
    r"(key|token|secret|password|passwd|auth|sig|signature|credential|jwt|session)", re.I
)
# ... and these whole names (too short or too common to search inside a name: `code` is Azure
# Functions' key, `pass` and `pwd` passwords, `sv`/`se`/`sp` with `sig` a SAS token's parts)
_SECRET_QUERY_NAMES = frozenset({"code", "pwd", "pass", "pw", "jwt", "sas", "hmac", "otp"})


def secret_query_names(query: str) -> list[str]:
    """The names of `query`'s parameters that carry a credential: by name (`_SECRET_QUERY`,
    `_SECRET_QUERY_NAMES`) or by value (the params secret scan's detectors,
    `secret_value`: a provider's key, a JWT, a long random string)."""
    from urllib.parse import parse_qsl

    bad = set()
    for name, value in parse_qsl(query, keep_blank_values=True):
        low = name.strip().lower()
        if _SECRET_QUERY.search(low) or low in _SECRET_QUERY_NAMES or secret_value(value):
            bad.add(name)
    return sorted(bad)


def url_secret(value: str) -> str | None:
    """What makes URL `value` carry a secret (a credential in its query or user-info), or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.password:
        return "a URL with a password"
    bad = secret_query_names(parts.query)
    return f"a URL with a credential in its query ({', '.join(bad)}=...)" if bad else None


def secret_findings(mapping: Any, where: str) -> list[str]:
    """Every entry of `mapping` (walked through nested mappings and lists) that looks like a
    secret, as `<where>.<key path>: <why>`, never with the value."""
    found: list[str] = []
    _walk(mapping, where, found)
    return found


def _walk(node: Any, path: str, found: list[str]) -> None:
    if isinstance(node, dict):
        _walk_mapping(node, path, found)
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _walk(value, f"{path}[{i}]", found)
    else:
        why = _value_secret(node)
        if why:
            found.append(f"{path}: {why}")


def _walk_mapping(node: dict[Any, Any], path: str, found: list[str]) -> None:
    """A mapping's entries: one whose key names a credential and holds a value is found, the
    others walked."""
    for key, value in node.items():
        here = f"{path}.{key}"
        if secret_key(str(key)) and _filled(value):
            found.append(f"{here}: its key names a credential")
        else:
            _walk(value, here, found)


def _value_secret(node: Any) -> str | None:
    """Why a value looks like a secret, or a URL holding a credential; None when it does not."""
    if (why := secret_value(node)) is not None:
        return f"its value looks like {why}"
    if isinstance(node, str) and re.match(r"(?i)^\s*https?://", node) and (why := url_secret(node)):
        return f"its value is {why}"
    return None


def _filled(value: Any) -> bool:
    """A value that could hold a secret: a non-empty string or a number (not a flag, not empty,
    not a mapping or a list, which are walked instead)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, int | float)


def secrets_problem(mappings: dict[str, Any]) -> str | None:
    """The error for every secret-looking entry of `mappings` (name -> mapping), or None: each
    named by its key path, with what to do instead; the values are never repeated."""
    found = [f for name, m in mappings.items() if m for f in secret_findings(m, name)]
    if not found:
        return None
    return (
        "; ".join(found) + " (the value is not repeated here). Secrets never go in a params file: "
        "put the key in an environment variable and name it, with api_key_env for the model's "
        "key or header_env {Header-Name: VARIABLE} for a header (docs/explanation/"
        "report-security.md)"
    )
