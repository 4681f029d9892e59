"""A reply's text made safe to parse, store and show: decoded defensively, secrets redacted, capped.

Every usable reply a wire reads (`cube.llm.wire`, `cube.llm.json_wire`) passes through
`ReplyGuard` before it becomes a call's text, so what the cache, the answers table, the pages and
the notebooks receive is already clean:

- **Decoded defensively** (`loads`): JSON parsed with its nesting bounded (`MAX_DEPTH` levels; a
  deeper reply, or one deep enough to exhaust the parser's recursion, is a `MalformedReply` with its
  reason, not a `RecursionError` that stops the stage for every system), and every string of it
  with lone surrogates (a `\\ud800` escape without its pair, which pyarrow cannot encode) replaced
  by U+FFFD.
- **Secrets redacted**: every secret value the run holds for the endpoint (its API key, its
  `header_env` values, a URL's user-info password) is replaced by `REDACTED` in the text, in the
  raw body before parsing and in each decoded string after (a key echoed in `\\u` escapes too), so
  a service that echoes its key back does not write it into answers.parquet, the annotation sheets,
  the pages, the notebooks or cache.sqlite.
- **Capped**: a string longer than `MAX_TEXT_CHARS` is cut to that length (an answer or a passage
  padded with megabytes of blanks) and ends with `CUT_MARK` ("[cut by the workbench: 2,097,210
  characters in all]"), so the cut travels with the text into the cache, the answers table and the
  pages; the reply also counts the strings cut (`notes` -> `Response.detail["truncated"]`).

A reply that changed is serialised again (`json.dumps`, the same data), so a stored body re-read by
a later run (changed response paths) finds the clean text.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # nesting levels of a JSON reply (a real service's replies stay under 20)
MAX_TEXT_CHARS = 100_000  # characters of one string of a reply (an answer, a passage)
REDACTED = "[redacted]"
CUT_MARK = " [cut by the workbench: {n:,} characters in all]"  # ends a capped string
MIN_SECRET = 6  # shorter values are not redacted (they would cut ordinary words)
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class MalformedReply(Exception):
    """A 200 answer we cannot use (not JSON, no choices, nested too deep): a transient fault."""


def fix_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def depth_problem(data: Any) -> str | None:
    """Why `data` is nested too deep (iteratively: no recursion to exhaust), or None."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return None


class ReplyGuard:
    """Cleans the replies of one endpoint (see the module docstring).

    Args:
        secrets: the secret values the run holds for the endpoint (empty ones are ignored).
        max_text_chars: the cap on one string of a reply.
    """

    def __init__(
        self, secrets: tuple[str, ...] | list[str] = (), max_text_chars: int = MAX_TEXT_CHARS
    ):
        self.secrets = tuple(
            sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        )
        self.max_text_chars = max_text_chars

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def text(self, value: str, notes: dict[str, int]) -> str:
        """One string made safe: surrogates replaced, secrets redacted, capped."""
        value = self.redact(fix_surrogates(value))
        if len(value) > self.max_text_chars:
            notes["truncated"] = notes.get("truncated", 0) + 1
            value = value[: self.max_text_chars] + CUT_MARK.format(n=len(value))
        return value

    def loads(self, body: str) -> tuple[Any, str, dict[str, int]]:
        """(the parsed, cleaned data; its text: the body, or the data serialised again when a string
        changed; notes such as {"truncated": n}). Raises MalformedReply on a body that is not
        JSON or is nested too deep."""
        body = self.redact(body)
        try:
            data = json.loads(body)
        except RecursionError:
            raise MalformedReply(f"nested deeper than {MAX_DEPTH} levels") from None
        except ValueError:
            raise MalformedReply(f"not JSON: {self.redact(fix_surrogates(body[:80]))!r}") from None
        if (why := depth_problem(data)) is not None:
            raise MalformedReply(why)
        notes: dict[str, int] = {}
        clean, changed = self._walk(data, notes)
        if changed:
            body = json.dumps(clean, ensure_ascii=False)
        return clean, body, notes

    def _walk(self, data: Any, notes: dict[str, int]) -> tuple[Any, bool]:
        """`data` with every string (keys included) cleaned by `text`; whether any changed. The
        depth is bounded (`depth_problem` ran first), so recursion stays shallow."""
        if isinstance(data, str):
            out = self.text(data, notes)
            return out, out != data
        if isinstance(data, list):
            pairs = [self._walk(v, notes) for v in data]
            return [v for v, _ in pairs], any(c for _, c in pairs)
        if isinstance(data, dict):
            changed, out = False, {}
            for k, v in data.items():
                key, c1 = self._walk(k, notes)
                val, c2 = self._walk(v, notes)
                out[key] = val
                changed = changed or c1 or c2
            return out, changed
        return data, False
