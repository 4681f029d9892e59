"""Reading a score out of a judge's reply: strict, but tolerant of real judge habits.

A reply is scored only when it holds one clear score on the 0-10 scale. Accepted forms
(after Unicode NFKC normalisation, so full-width digits and colons count: `８`, `评分：８`):

- a bare number: `8`, `8.`, `**8**`, `` `8` ``
- a labelled number: `Score: 8`, `评分：8`, `得分为8`, `Final score - 8`
- a number with a unit or scale: `8分`, `8 points`, `8/10`, `8 out of 10`, `8分（满分10分）`,
  `Score: 8 (on a scale of 1-10)`, `[RESULT] 6 (0-10 rubric)` (a stated 0-10 or 1-10 scale is
  not a range of scores)
- JSON: `{"score": 8}` (also `评分`, `rating`, `分数` keys)
- a reply with reasoning that ends in (or contains) one labelled score, possibly repeated
  with the same value: "The answer covers the fee ... Score: 8"
- per-criterion points followed by one total: "(1) 2分 (2) 1分 ... 总分：8" (the total wins)
- the explicit markers of widely used judge prompts, which win over any number in the
  reasoning before them: `Rating: [[8]]` (MT-Bench / FastChat), `[RESULT] 8` (Prometheus),
  `<score>8</score>` (XML-tagged judges); `8/10` inside a marker is accepted, another scale
  is not. Several markers must agree ("[[7]] ... [[8]]" is conflicting).
- the output format the dimension's prompt declares (`score_format`, see below), tried first.

Declared formats. A dimension may declare its reply format as a literal pattern with one
`{score}` where the number goes, e.g. `"Verdict: {score}"` or `"<<{score}>>"`: the
`score_format` of the dimension in params, or else what the first line of its prompt
template holding `{score}` shows around it (`declared_format`: a prompt ending "Reply with
one line: Final mark: {score}." declares `Final mark: {score}`; the placeholder is shown to
the judge as written). Matching
is case-insensitive, full-width forms are normalised, Markdown emphasis is ignored and any
run of spaces in the pattern matches any spacing. One match (or several with one value) is
the score; different values are conflicting; no match falls back to the forms above.

Everything else is *unscored* with a reason, never guessed: prose without a labelled score,
two different scores ("7 or 8", "Score: 7 ... Score: 8"), a range ("7-8分"), another scale
(`4/5`, `满分5分`, `[RESULT] 4 (1-5 rubric)`, `on a scale of 1-5`), or a value outside 0-10.

Decimals: a single decimal score within 0-10 (`7.5`, `评分：7.5`) is accepted and kept as
given, not rounded. The prompts ask for integers, but a judge that answers 7.5 has still
given one clear score; rounding would add a bias of its own and rejecting it would discard a
usable judgment. Analyses work on floats (trimmed means), so nothing downstream needs integers.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

Parsed = tuple[float | None, str | None]

_NUM = r"-?\d+(?:\.\d+)?"
_LABELS = (
    r"(?:final\s+score|overall\s+score|score|rating|grade|"
    r"最终评分|最终得分|综合评分|评分|得分|分数|打分|总分)"
)
_FINAL_LABELS = (
    r"(?:final\s+score|overall\s+score|total\s+score|最终评分|最终得分|综合评分|总评分|总分|合计)"
)
_JSON_KEYS = ("score", "rating", "评分", "得分", "分数", "总分")

# A score on another scale ("4/5", "3 out of 5", "满分5分") is not a 0-10 score.
_OTHER_SCALE = re.compile(rf"({_NUM})\s*(?:/|out\s+of)\s*(\d+)(?!\.?\d)", re.IGNORECASE)
# A stated scale ("(on a scale of 1-10)", "on a 0-10 scale", "(1-5 rubric)") is not a range of
# scores: a 0/1-10 scale is dropped, another scale makes the score refused.
_SCALE_STATEMENT = re.compile(
    r"[(（]?\s*(?:on\s+)?(?:a|the)?\s*scale\s+(?:of|from)\s+(\d+)\s*(?:-|–|—|~|to)\s*(\d+)\s*[)）]?"
    r"|[(（]?\s*(?:on\s+)?(?:a|the)?\s*(\d+)\s*(?:-|–|—|~|to)\s*(\d+)\s*(?:points?\s+)?(?:scale|rubric)\s*[)）]?",
    re.IGNORECASE,
)
_FULL_MARKS = re.compile(r"[(（\[]?\s*满分\s*(?:为|是)?\s*[:：]?\s*(\d+)\s*分?\s*[)）\]]?")
_RANGE = re.compile(
    rf"({_NUM})\s*(?:-|–|—|~|～|到|至|或|or)\s*({_NUM})\s*(?:分|points?\b|/\s*10\b)?", re.IGNORECASE
)
_LABELLED = re.compile(
    rf"{_LABELS}\s*\**\s*[\"']?\s*(?:is|of|was|为|是)?\s*[:：=\-]?\s*\**\s*({_NUM})", re.IGNORECASE
)
_FINAL = re.compile(
    rf"{_FINAL_LABELS}\s*\**\s*(?:is|of|was|为|是)?\s*[:：=\-]?\s*\**\s*({_NUM})", re.IGNORECASE
)
_WITH_UNIT = re.compile(rf"({_NUM})\s*(?:分(?!之)|points?\b|pts\b|/\s*10(?!\d))", re.IGNORECASE)
_BARE = re.compile(rf"^\s*{_LABELS}?\s*[:：=]?\s*({_NUM})\s*(?:分|points?|pts)?\s*$", re.IGNORECASE)
# Explicit markers of common judge prompts: (opening, closing) around the number.
_SCALE = r"(?:\s*(?:/|out\s+of)\s*(\d+))?"  # group 2: an optional scale ("8/10")
_SEP = r"\s*(?:-|–|—|~|～|到|至|或|和|\bor\b|\bto\b|\band\b)\s*"
_MARKER_PARTS = (
    (r"\[\[\s*", r"\s*\]\]"),  # MT-Bench / FastChat: Rating: [[8]]
    (r"\[\s*RESULT\s*\]\s*[:：]?\s*", r"(?!\s*\d)"),  # Prometheus: [RESULT] 8
    (r"<\s*score\s*>\s*", r"\s*<\s*/\s*score\s*>"),  # <score>8</score>
)
_MARKERS = tuple(
    re.compile(rf"{a}({_NUM}){_SCALE}(?!{_SEP}\d){b}", re.IGNORECASE) for a, b in _MARKER_PARTS
)
_MARKER_RANGES = tuple(
    re.compile(rf"{a}{_NUM}{_SEP}{_NUM}", re.IGNORECASE) for a, _ in _MARKER_PARTS
)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    # Markdown emphasis and code marks carry no meaning for the score.
    text = re.sub(r"[*_`#]+", " ", text)
    return text.strip().rstrip(".。!！;；,，").strip()


def _in_range(value: float, raw: str) -> Parsed:
    if 0 <= value <= 10:
        return float(value), None
    return None, f"score {raw} is outside 0-10"


def _from_json_value(value: Any) -> Parsed:
    """A score from a JSON value: a number, a numeric string, or an object with a score key."""
    if isinstance(value, bool):
        return None, f"score is a boolean ({value})"
    if isinstance(value, int | float):
        return _in_range(float(value), str(value))
    if isinstance(value, str):
        return parse_score(value)
    if isinstance(value, dict):
        for key in value:
            if str(key).strip().lower() in _JSON_KEYS:
                return _from_json_value(value[key])
        return None, f"JSON object without a score key (keys: {list(value)[:6]})"
    return None, f"score has JSON type {type(value).__name__}"


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a reply, tolerating a ```json fence and prose around it."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL | re.IGNORECASE)
    candidate = fenced.group(1) if fenced else text
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(candidate[start : end + 1])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def format_pattern(score_format: str) -> re.Pattern[str]:
    """The regex of a declared reply format with one `{score}` (see the module docstring).

    Raises:
        ValueError: the format does not hold exactly one `{score}`.
    """
    if score_format.count("{score}") != 1 or not score_format.replace("{score}", "").strip():
        raise ValueError(
            f"score_format {score_format!r}: expected exactly one {{score}} where the number goes, "
            "with the text around it (a bare number is read without a format)"
        )
    before, after = (_normalise_format(part) for part in score_format.split("{score}"))
    return re.compile(rf"{before}\s*({_NUM})(?!{_SEP}\d)\s*{after}", re.IGNORECASE)


def _format_range(score_format: str) -> re.Pattern[str]:
    before = _normalise_format(score_format.split("{score}")[0])
    return re.compile(rf"{before}\s*{_NUM}{_SEP}{_NUM}", re.IGNORECASE)


def _normalise_format(part: str) -> str:
    part = re.sub(r"[*_`#]+", " ", unicodedata.normalize("NFKC", part)).strip()
    return r"\s*".join(re.escape(word) for word in part.split())


def declared_format(template: str) -> str | None:
    """The reply format a prompt template declares, or None.

    It is taken from the template's first line holding `{score}`: the label right before
    `{score}` (a label ending in a colon runs back to the previous colon; otherwise it is the
    last word) and what follows `{score}` on that line, without a closing full stop. "Reply
    with one line: Final mark: {score}." declares `Final mark: {score}`; "输出格式：最终分数为
    {score} 分" declares `最终分数为 {score} 分`; "End with [[{score}]]" declares `[[ {score}]]`.
    """
    for line in template.splitlines():
        if "{score}" in line:
            before, after = line.split("{score}", 1)
            before = unicodedata.normalize("NFKC", before).rstrip()
            own_colon = before.endswith(":")
            if own_colon:  # "...: Label: {score}": the label is what follows the previous colon
                label = before[:-1].split(":")[-1].strip() + ":"
            else:  # "...: 最终分数为 {score} 分", "End with [[{score}]]": the last word before it
                words = before.split(":")[-1].split()
                label = words[-1] if words else ""
            declared = f"{label} {{score}}{after.rstrip().rstrip('.。')}".strip()
            return None if declared == "{score}" else declared  # a bare number needs no format
    return None


def _agreeing(values: list[str], what: str) -> Parsed | None:
    """One score when every value agrees, a refusal when they differ, None when there is none."""
    if not values:
        return None
    distinct = sorted({float(v) for v in values})
    if len(distinct) > 1:
        return None, f"conflicting scores ({', '.join(f'{v:g}' for v in distinct)}) in {what}"
    return _in_range(distinct[0], values[0])


def _explicit(t: str, score_format: str | None) -> Parsed | None:
    """The score of a declared format or of the common explicit markers, if the reply uses one."""
    ranges = [*_MARKER_RANGES, *([_format_range(score_format)] if score_format else [])]
    for pattern in ranges:
        m = pattern.search(t)
        if m:
            return None, f"a range, not one score ({m.group(0).strip()})"
    if score_format:
        found = _agreeing(
            [m.group(1) for m in format_pattern(score_format).finditer(t)],
            f"the declared format {score_format!r}",
        )
        if found is not None:
            return found
    return _marked(t)


def _marked(t: str) -> Parsed | None:
    """The score of the common explicit markers ([[N]], [RESULT] N, <score>N</score>); a marker
    on a scale other than 10 is refused."""
    values = []
    for marker in _MARKERS:
        for m in marker.finditer(t):
            if m.group(2) is not None and m.group(2) != "10":
                return None, f"score on another scale ({m.group(0).strip()}), expected 0-10"
            values.append(m.group(1))
    return _agreeing(values, "the score markers ([[N]], [RESULT] N, <score>N</score>)")


def _stated_scale(t: str) -> Parsed | None:
    """A refusal when the reply states a scale other than 0-10 ("(1-5)", "out of 5")."""
    for m in _SCALE_STATEMENT.finditer(t):
        low, high = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
        if high != "10" or low not in ("0", "1"):
            return None, f"score on another scale ({m.group(0).strip(' ()（）')}), expected 0-10"
    return None


def _other_scale(t: str) -> Parsed | None:
    """A refusal when a score is given on another scale ("8/5", "满分5分")."""
    for pattern, group in ((_OTHER_SCALE, 2), (_FULL_MARKS, 1)):
        for m in pattern.finditer(t):
            if m.group(group) != "10":
                return None, f"score on another scale ({m.group(0).strip()}), expected 0-10"
    return None


def _without_scale_markers(t: str) -> str:
    """Scale markers are not scores: drop "满分10分" and turn "8/10", "8 out of 10" into "8分"."""
    t = _FULL_MARKS.sub(" ", t)
    t = re.sub(rf"({_NUM})\s*(?:/|out\s+of)\s*10(?!\.?\d)", r"\1分", t, flags=re.IGNORECASE)
    return t.strip().rstrip(".。!！;；,，()（） ").strip()


def _from_prose(t: str) -> Parsed:
    """The score of a reply in prose: a bare number, a total after per-criterion points, or
    the one labelled value (a range or conflicting values are refused)."""
    bare = _BARE.match(t)
    if bare:
        return _in_range(float(bare.group(1)), bare.group(1))
    rng = _labelled_range(t)
    if rng:
        return None, f"a range, not one score ({rng.group(0).strip()})"
    # Per-criterion points followed by a total ("(1) 2分 ... 总分：8"): the total is the score.
    finals = [m.group(1) for m in _FINAL.finditer(t)]
    if finals and len({float(v) for v in finals}) == 1:
        return _in_range(float(finals[0]), finals[0])
    return _one_labelled(t)


def _labelled_range(t: str) -> re.Match[str] | None:
    """A range of two different values in a reply that labels its score or gives it a unit."""
    rng = _RANGE.search(t)
    if not rng or rng.group(1) == rng.group(2):
        return None
    return rng if _LABELLED.search(t) or _WITH_UNIT.search(t) else None


def _one_labelled(t: str) -> Parsed:
    """The one labelled value (or value with a unit) of a reply; several values, only unlabelled
    numbers or none are refused, saying which."""
    found = [m.group(1) for m in _LABELLED.finditer(t)]
    found += [m.group(1) for m in _WITH_UNIT.finditer(t)]
    values = sorted({float(v) for v in found})
    if len(values) == 1:
        return _in_range(values[0], found[0])
    if len(values) > 1:
        shown = ", ".join(f"{v:g}" for v in values)
        return None, f"conflicting scores ({shown})"
    numbers = re.findall(_NUM, t)
    if numbers:
        shown = ", ".join(numbers[:5])
        return None, f"no single labelled score; numbers in prose ({shown})"
    return None, "no score found"


def parse_score(text: str, score_format: str | None = None) -> Parsed:
    """One 0-10 score from a judge's reply.

    Args:
        text: The judge's raw reply.
        score_format: the reply format the dimension declares (`"Verdict: {score}"`), if any.

    Returns:
        `(score, None)` when the reply holds one clear score in 0-10, else `(None, reason)`.
    """
    if text is None or not str(text).strip():
        return None, "empty reply"
    raw = str(text)
    if "{" in raw:
        obj = _json_object(unicodedata.normalize("NFKC", raw))
        if obj is not None:
            return _from_json_value(obj)
    t = _normalise(raw)
    refused = _stated_scale(t)
    if refused is not None:
        return refused
    t = _SCALE_STATEMENT.sub(" ", t).strip()
    found = _explicit(t, score_format)
    if found is None:
        found = _other_scale(t)
    return found if found is not None else _from_prose(_without_scale_markers(t))


def score_schema(dimensions: list[str] | None = None) -> dict[str, Any]:
    """The JSON schema of a judge's reply, for endpoints that constrain replies to one
    (`structured_output`): `{"score": <integer 0-10>}`, or one such key per dimension of an
    all-dimensions call. Both parse with `parse_score` / `parse_scores_json` like any JSON reply.
    Whether the constrained score means anything is the audit's business, not the parser's. The
    range is an `enum`: llama.cpp's grammar ignores `minimum`/`maximum` (SmolLM2 answered
    `{"score": 30}` under them) but keeps to an enum."""
    score = {"type": "integer", "enum": list(range(11))}
    keys = dimensions or ["score"]
    return {
        "type": "object",
        "properties": dict.fromkeys(keys, score),
        "required": list(keys),
        "additionalProperties": False,
    }


def parse_scores_json(text: str, dimensions: list[str]) -> dict[str, Parsed]:
    """Scores of several dimensions from one JSON reply (the all-dimensions-in-one-call mode).

    Accepts a JSON object (in a ```json fence or surrounded by prose) mapping dimension names
    to scores, optionally nested under a "scores" key; values may be numbers, strings that
    `parse_score` accepts, or objects with a "score" key. Keys match case-insensitively.

    Returns:
        For every requested dimension, `(score, None)` or `(None, reason)`.
    """
    if text is None or not str(text).strip():
        return {d: (None, "empty reply") for d in dimensions}
    obj = _json_object(unicodedata.normalize("NFKC", str(text)))
    if obj is None:
        return {d: (None, "reply is not a JSON object") for d in dimensions}
    obj = _unnested(obj)
    by_key = {str(k).strip().lower(): v for k, v in obj.items()}
    out: dict[str, Parsed] = {}
    for d in dimensions:
        if d.lower() not in by_key:
            out[d] = (None, f"JSON reply has no key {d!r} (keys: {list(obj)[:8]})")
        else:
            out[d] = _from_json_value(by_key[d.lower()])
    return out


def _unnested(obj: dict[str, Any]) -> dict[str, Any]:
    """The object under a "scores" key (any case) when it holds one, else the object itself."""
    nested = {str(k).lower(): v for k, v in obj.items()}.get("scores")
    return nested if isinstance(nested, dict) else obj
