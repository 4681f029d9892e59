"""LLM role-play refusal questions (`diagnostics.refusal_generator: llm`).

A model (`diagnostics.refusal_model`, a name under `models:` or an inline spec) plays a citizen
and writes questions about government services the knowledge base does NOT cover (prompt
`cube/prompts/<lang>/refusal_generation.txt`). So that it stays out of scope it is given what
the knowledge base covers: its departments and its item names without variants (`base_name`),
the first `MAX_LISTED` of them in corpus order, delimited as untrusted content.

- Calls: `ceil(n / PER_CALL)` calls asking for `PER_CALL` questions each (call k is sample k, so
  each is its own cache entry, and suggests a life area `THEMES[k]`, so each prompt differs), then
  up to `EXTRA_CALLS` more while duplicates or in-corpus questions leave fewer than `n`. Calls go
  through `cube.llm` (cached, concurrent, costed, role `question_generation`); a re-run is served by
  the cache.
- Parsing (`parse_questions`): a JSON array of strings (or of objects with a `question` key, else
  `q`/`text`/`content`/`问题`, else their only string value, or `{"questions": [...]}`), also inside
  a ```json fence or surrounded by prose: the first "[" or "{" at which valid JSON holding strings
  starts (`json.JSONDecoder.raw_decode`, so a "[note]" before it or a "// [end]" after it does not
  matter; an array whose strings read as questions, see below, wins over an earlier one whose
  strings do not, as a '["transport"]' theme), or an array cut short at the token limit (its
  complete strings; the cut one is dropped), or a Python list of single-quoted strings; otherwise
  one question per line with its numbering ("1.", "2、", "（3）", "-", "•") and quotes removed,
  keeping only lines that read as a question (end with "?"/"？", or hold an interrogative: 吗, 怎么,
  哪, 什么, 多少, 是否, 请问 ..., how, what, where, can, do ... at the start) and are no decline
  (`cube.diagnose.refusal.is_refusal`): "Here are ten questions:" or "抱歉，我不能帮助你。" is no
  question. A markdown table is read cell by cell. A reasoning model's `<think>…</think>` (or a
  thinking cut short) is ignored, and a theme label around a question ("[旅游度假] …",
  "…？（交通出行）") or a note after its question mark ("…？——该事项由…主管", "…? — handled by …")
  removed.
- Deduplication: questions equal once lower-cased with spaces and punctuation removed, or with a
  rapidfuzz `ratio` of at least `DUPLICATE_AT`, are kept once (the first).
- In-corpus check (`corpus_item`), deterministic: a question is dropped when it contains a corpus
  item name or that name without its variant (zh: as a substring; en: case-insensitive, on
  word boundaries), names of fewer than `MIN_NAME_CHARS` characters ignored. A question that
  only paraphrases a covered item is not caught: a detector of names, not of meaning.
- A failed call (or a reply with no question in it) is recorded in `calls` with its reason and
  produces no question; nothing is made up in its place.

The questions are of kind `role_play`, style `role-play`, with no known item (`item` ""), and are
answered and scored like the template ones (`cube.kb.refusal_questions`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from cube.config.fence import fill_fenced
from cube.llm.usage import Accounting

KIND = "role_play"
STYLE = "role-play"
ROLE = "question_generation"


class GenerationCall(Accounting):
    """One generation call's record: its sample, whether it gave questions, why not, how many,
    and its accounting."""

    sample: int
    ok: bool
    error: str
    questions: int


JsonScalar = str | int | float | bool | None


class GenerationRecord(TypedDict):
    """How the questions were made, for results.json (`refusal_generation`): the calls (NaN as
    None), the questions parsed, the duplicates and the questions naming a corpus item dropped."""

    generator: str
    model: str
    requested: int
    questions: int
    parsed: int
    duplicates: int
    in_corpus: list[dict[str, str]]
    failed_calls: int
    calls: list[dict[str, JsonScalar]]


class QuestionRow(TypedDict):
    """A refusal question's row (`cube.config.schema.REFUSAL_QUESTION_COLUMNS`)."""

    question_id: str
    doc_id: str
    question: str
    kind: str
    style: str
    generator: str
    item: str


PER_CALL = 10
EXTRA_CALLS = 2
MAX_LISTED = 300
DUPLICATE_AT = 90.0
MIN_NAME_CHARS = {"zh": 4, "en": 8}
# Call k asks about life area THEMES[lang][k % len]: the calls' prompts differ, so a model sampled
# at temperature 0 (same prompt, same reply) still gives new questions in each call.
THEMES = {
    "zh": [
        "交通出行",
        "医疗健康",
        "子女教育",
        "文化体育",
        "宠物与动物",
        "户外运动",
        "金融保险",
        "旅游度假",
        "婚育家庭",
        "养老服务",
        "新兴行业经营",
        "海洋与渔业",
    ],
    "en": [
        "transport",
        "health care",
        "children's education",
        "culture and sport",
        "pets and animals",
        "outdoor activities",
        "finance and insurance",
        "travel",
        "marriage and family",
        "elderly care",
        "new kinds of business",
        "sea and fishing",
    ],
}
_MARKER = re.compile(
    r"^\s*(?:[-*•·]+|\d{1,3}\s*[.、．)）:：]|[（(]\s*\d{1,3}\s*[)）]|[\u2460-\u2473])\s*"
)
_PREFIX = re.compile(r"^(?:问题|提问|question|q)\s*\d*\s*[:：]\s*", re.IGNORECASE)
# A theme label the model put before a question ("[旅游度假] …", "【婚育家庭】…") or after its
# question mark ("…？（交通出行）", "…? (transport)"); a label has no digit ("[A-3]" stays).
_LABEL = re.compile(
    r"^[\[【][^\]】\d\n]{1,20}[\]】]\s*(?=\S)|(?<=[?？])\s*[（(【\[][^）)】\]\d\n]{1,20}[）)】\]]$"
)
# A note the model put after the question mark ("…？——该事项由…主管", "…? — handled by …",
# "…？理由：…").
_NOTE = re.compile(
    r"(?<=[?？])\s*(?:[—–]+|-{1,2}|(?:理由|说明|原因|备注|注|reason|note|because)\s*[:：]).*$",
    re.IGNORECASE,
)
_THINKING = re.compile(
    r"<think>.*?(?:</think>|\Z)", re.IGNORECASE | re.DOTALL
)  # a reasoning model's thinking
_ITEM_KEYS = ("question", "q", "text", "content", "问题")
_QUOTES = " \t\"'“”‘’「」『』`*,，"
_PUNCT = re.compile(r"[\W_]+")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"(?=\s*[,\]])')
_QUESTION = re.compile(
    r"[?？]$|吗|呢|怎么|如何|哪|什么|多少|是否|能否|请问|"
    r"^(how|what|where|when|which|who|whom|why|can|could|do|does|is|are|should|may|"
    r"i want|i'd like)\b",
    re.IGNORECASE,
)


def refusal_prompt_template(lang: str) -> str:
    """The packaged role-play prompt (`cube/prompts/<lang>/refusal_generation.txt`)."""
    if lang not in MIN_NAME_CHARS:
        raise ValueError(
            f"no refusal-generation prompt for lang {lang!r}; expected one of "
            f"{sorted(MIN_NAME_CHARS)}"
        )
    return (
        resources.files("cube")
        .joinpath("prompts", lang, "refusal_generation.txt")
        .read_text(encoding="utf-8")
    )


def covered(corpus: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The knowledge base's departments and item names without variants, each once, corpus order."""
    from cube.config.phrasing import base_name

    def unique(values: Any) -> list[str]:
        return list(
            dict.fromkeys(v for v in (str(x).strip() for x in values if not pd.isna(x)) if v)
        )

    departments = unique(corpus["department"]) if "department" in corpus else []
    return departments, unique(base_name(n) for n in corpus["item_name"].fillna(""))


def render_refusal_prompt(
    template: str, corpus: pd.DataFrame, lang: str, n: int, call: int = 0
) -> str:
    """Fill `{n}`, `{theme}` (`THEMES`, by `call`), `{departments}`, `{items}` and `{fence}` in one
    pass (`cube.config.fence`); the list cannot close its fenced `<covered-NONCE>` block."""
    departments, items = covered(corpus)
    sep = "、" if lang == "zh" else ", "
    listed = {
        "departments": sep.join(departments) or "-",
        "items": "\n".join(f"- {i}" for i in items[:MAX_LISTED]) or "-",
    }
    trusted = {"n": str(n), "theme": THEMES[lang][call % len(THEMES[lang])]}
    # the names sit in the template's own <covered-{fence}> block, tag-like text made inert
    return fill_fenced(template, listed, trusted, tags={"departments": None, "items": None})


def _clean(text: str) -> str:
    q = str(text).strip()
    for _ in range(2):
        q = _LABEL.sub("", _NOTE.sub("", _PREFIX.sub("", _MARKER.sub("", q)))).strip(_QUOTES)
    return q


def _item_text(item: Any) -> Any:
    """A question of a JSON array: the string itself, or an object's `question` (else `q`, `text`,
    `content`, `问题`) value, or an object's only string value."""
    if not isinstance(item, dict):
        return item
    for key in _ITEM_KEYS:
        if isinstance(item.get(key), str):
            return item[key]
    strings = [v for v in item.values() if isinstance(v, str)]
    return strings[0] if len(strings) == 1 else None


def _listed(got: Any) -> list[str]:
    """The questions of a decoded JSON value (an array, or an object with a `questions` array)."""
    if isinstance(got, dict):
        got = got.get("questions")
    if not isinstance(got, list):
        return []
    return [q for q in (_clean(x) for x in map(_item_text, got) if isinstance(x, str)) if q]


def _python_list(reply: str) -> list[str]:
    """The questions of a Python list literal of strings (['…', '…']: single quotes, not JSON)."""
    for m in re.finditer(r"\[\s*'", reply):
        for close in re.finditer(r"\]", reply[m.start() :]):
            try:
                got = ast.literal_eval(reply[m.start() : m.start() + close.end()])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if _listed(got):
                return _listed(got)
            break
    return []


def _json_questions(reply: str) -> list[str] | None:
    """The strings of the first JSON array or object holding a question (else of the first
    holding strings); an array cut short: its whole strings; else a Python list; None if none."""
    got = _first_json_strings(reply)
    if got:
        return got
    cut = re.search(r'\[\s*"', reply)  # an array cut short (the token limit): its whole strings
    if cut:
        whole = [json.loads(f'"{m}"') for m in _STRING.findall(reply[cut.start() :])]
        return [_clean(x) for x in whole if _clean(x)] or None
    return _python_list(reply) or None


def _first_json_strings(reply: str) -> list[str]:
    """The strings of the first JSON value (opened by "[" or "{") holding a question, else of the
    first holding strings none of which reads as a question ([] if none)."""
    decoder = json.JSONDecoder()
    first: list[str] = []  # kept unless a later array has a question
    for m in re.finditer(r"[\[{]", reply):
        try:
            got = _listed(decoder.raw_decode(reply, m.start())[0])
        except ValueError:
            continue
        if any(_QUESTION.search(q) for q in got):
            return got
        first = first or got
    return first


def parse_questions(reply: str, reject: Callable[[str], bool] | None = None) -> list[str]:
    """The questions in a model's reply (see the module doc); [] when there are none. A free-text
    line for which `reject` returns True (the caller's refusal detector) is not a question."""
    text = re.sub(r"```(?:json)?", "", reply or "", flags=re.IGNORECASE)
    text = _THINKING.sub("", text)
    got = _json_questions(text)
    if got is not None:
        return got
    lines = [_clean(c) for line in text.splitlines() for c in _cells_of(line)]
    return [q for q in lines if _reads_as_question(q, reject)]


def _cells_of(line: str) -> list[str]:
    """A Markdown table row's cells; any other line whole."""
    if line.lstrip().startswith("|"):
        return line.strip().strip("|").split("|")
    return [line]


def _reads_as_question(line: str, reject: Callable[[str], bool] | None) -> bool:
    """At least 4 characters, a question's form, and not rejected (a refusal)."""
    if len(line) < 4 or not _QUESTION.search(line):
        return False
    return not (reject and reject(line))


def corpus_item(question: str, names: list[str], lang: str) -> str | None:
    """The corpus item name (or name without variant) the question contains, else None."""
    from cube.config.phrasing import base_name

    low = question.lower()
    for name in names:
        for n in dict.fromkeys((name, base_name(name))):
            if len(n) < MIN_NAME_CHARS[lang]:
                continue
            if lang == "zh" and n in question:
                return name
            if lang != "zh" and re.search(r"(?<!\w)" + re.escape(n.lower()) + r"(?!\w)", low):
                return name
    return None


def dedupe(questions: list[str]) -> list[str]:
    """Each question once (see the module doc), first occurrence kept, order kept."""
    from rapidfuzz import fuzz

    kept: list[str] = []
    keys: list[str] = []
    for q in questions:
        key = _PUNCT.sub("", q.lower())
        if key and not any(key == k or fuzz.ratio(key, k) >= DUPLICATE_AT for k in keys):
            kept.append(q)
            keys.append(key)
    return kept


def build_llm_refusal_questions(
    params: Any,
    corpus: pd.DataFrame,
    n: int,
    cache_path: Path | None = None,
    reject: Callable[[str], bool] | None = None,
) -> tuple[pd.DataFrame, GenerationRecord]:
    """Up to `n` role-play refusal questions (the columns of `cube.kb.refusal_questions.COLUMNS`,
    `generator` "llm:<model>") and a record of the generation for `results.json`: the calls
    (ok, error, tokens, cost, cached), questions parsed, duplicates and in-corpus questions
    dropped (with the item each named). `reject`: as in `parse_questions`."""
    from cube.config.schema import REFUSAL_QUESTION_COLUMNS as COLUMNS
    from cube.llm import make_model

    ref = params.diagnostics.refusal_model
    if ref is None:
        raise ValueError("diagnostics.refusal_generator 'llm' needs diagnostics.refusal_model")
    lang = params.lang
    model = make_model(params.model(ref), cache_path)
    template = refusal_prompt_template(lang)
    version = "refusal_generation/" + hashlib.sha256(template.encode()).hexdigest()[:12]
    names = corpus["item_name"].fillna("").astype(str).tolist()
    first = math.ceil(n / PER_CALL) if n > 0 else 0
    parsed: list[str] = []
    calls: list[GenerationCall] = []
    kept: list[str] = []
    in_corpus: list[dict[str, str]] = []
    batch = list(range(first))
    while batch:
        requests = _generation_requests(batch, template, corpus, lang, version)
        replies = model.complete(requests, role=ROLE, desc="refusal questions", progress=False)
        for k, resp in zip(batch, replies, strict=True):
            call, got = _generation_call(k, resp, reject)
            calls.append(call)
            parsed += got
        kept, in_corpus = _outside_corpus(dedupe(parsed), names, lang)
        batch = _next_batch(len(kept), n, len(calls), first)
    kept = kept[:n]
    rows = [_question_row(i, q, model.name) for i, q in enumerate(kept)]
    record = _generation_record(model.name, n, kept, parsed, in_corpus, calls)
    if record["failed_calls"] or len(kept) < n:
        _warn_short(model.name, record, calls, n)
    return pd.DataFrame(rows, columns=COLUMNS), record


def _next_batch(kept: int, n: int, calls: int, first: int) -> list[int]:
    """One more call while fewer than `n` questions are kept, up to EXTRA_CALLS beyond the first
    `first` (the sample number is the call's: a new prompt, not a cached reply)."""
    if kept < n and calls < first + EXTRA_CALLS:
        return [calls]
    return []


def _generation_record(
    model: str,
    n: int,
    kept: list[str],
    parsed: list[str],
    in_corpus: list[dict[str, str]],
    calls: list[GenerationCall],
) -> GenerationRecord:
    """The record of the generation for results.json."""
    return {
        "generator": "llm",
        "model": model,
        "requested": n,
        "questions": len(kept),
        "parsed": len(parsed),
        "duplicates": len(parsed) - len(dedupe(parsed)),
        "in_corpus": in_corpus,
        "failed_calls": sum(not c["ok"] for c in calls),
        "calls": [_without_nan(c) for c in calls],
    }


def _generation_requests(
    batch: list[int], template: str, corpus: pd.DataFrame, lang: str, version: str
) -> list[Any]:
    """One request per sample of `batch`, each asking for PER_CALL questions."""
    from cube.llm import Request

    prompts = [render_refusal_prompt(template, corpus, lang, PER_CALL, k) for k in batch]
    return [
        Request(
            messages=({"role": "user", "content": p},),
            template_version=version,
            sample=k,
            context={"task": "refusal_generation", "lang": lang, "n": PER_CALL},
        )
        for k, p in zip(batch, prompts, strict=True)
    ]


def _generation_call(
    k: int, resp: Any, reject: Callable[[str], bool] | None
) -> tuple[GenerationCall, list[str]]:
    """The record of one call (ok, its error, the questions parsed, tokens and cost) and its
    questions; a reply without a question is a failed call."""
    from cube.llm.usage import response_accounting

    got = parse_questions(resp.text or "", reject) if resp.ok else []
    error = "" if resp.ok else (resp.error or "no reply")
    if resp.ok and not got:
        error = "no question in the reply"
    call: GenerationCall = {
        "sample": k,
        "ok": not error,
        "error": error,
        "questions": len(got),
        **response_accounting(resp, ROLE),
    }
    return call, got


def _outside_corpus(
    unique: list[str], names: list[str], lang: str
) -> tuple[list[str], list[dict[str, str]]]:
    """The questions naming no corpus item (kept), and the others with the item each names."""
    kept: list[str] = []
    in_corpus: list[dict[str, str]] = []
    for q in unique:
        item = corpus_item(q, names, lang)
        if item is None:
            kept.append(q)
        else:
            in_corpus.append({"question": q, "item": item})
    return kept, in_corpus


def _question_row(i: int, question: str, model: str) -> QuestionRow:
    """The i-th (0-based) refusal question's row."""
    return {
        "question_id": f"R{i + 1:05d}",
        "doc_id": "",
        "question": question,
        "kind": KIND,
        "style": STYLE,
        "generator": f"llm:{model}",
        "item": "",
    }


def _without_nan(call: GenerationCall) -> dict[str, JsonScalar]:
    """A call's record with NaN (an unknown cost) as None, for results.json."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in call.items()}


def _warn_short(model: str, record: GenerationRecord, calls: list[GenerationCall], n: int) -> None:
    """Warn that calls failed or fewer questions than asked for came back, and why."""
    import warnings

    first_error = next((c["error"] for c in calls if c["error"]), "")
    first = f" (first: {first_error})" if first_error else ""
    warnings.warn(
        f"refusal questions ({model}): {record['questions']} of {n} asked for; "
        f"{record['failed_calls']} of {len(calls)} calls failed or gave no "
        f"question{first}; {record['duplicates']} "
        f"duplicate(s) and {len(record['in_corpus'])} naming a corpus item dropped",
        stacklevel=3,
    )
