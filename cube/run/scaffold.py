"""`cube init`: a params file for the first run, from a few choices.

The choices (`InitChoices`): the system under test (`SYSTEMS`: the demo, your knowledge base with
the built-in baseline, an HTTP service, a Python function, imported answers) and the judge
(`JUDGES`: offline rubric judges, an OpenAI-compatible endpoint, a local `cube serve` model).
`params_text` writes the file as YAML with a comment before each section saying what it is and
what to change; paths are written relative to the file's folder (where a params file's relative
paths are read from). `check_written` validates the text as `cube validate` loads it, so `cube
init` never leaves a file the schema refuses.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYSTEMS = {
    "demo": "the synthetic demo knowledge base and the built-in BM25 baseline (offline)",
    "baseline": "your knowledge base and the built-in BM25 baseline",
    "http": "your RAG service behind an HTTP (JSON) endpoint",
    "python": "your RAG pipeline as a Python function",
    "imported": "answers your system wrote elsewhere, imported from a file",
}
JUDGES = {
    "offline": "two offline rubric judges (no model, no key: a first run, not a real evaluation)",
    "openai": "an LLM judge on an OpenAI-compatible endpoint (base_url, model, api_key_env)",
    "local": "a small local model served by `cube serve` beside the two rubric judges",
}
OFFLINE_JUDGES = [
    {"name": "rubric-lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
    {"name": "rubric-strict", "model": {"provider": "offline", "model": "rubric-strict"}},
]
# What each system choice needs beyond the common choices: (field, flag).
NEEDS = {
    "baseline": (("kb", "--kb"),),
    "http": (("kb", "--kb"), ("url", "--url")),
    "python": (("kb", "--kb"), ("callable", "--callable")),
    "imported": (("kb", "--kb"), ("answers", "--answers")),
}
# Column names read as a field key besides the key itself and its labels (`key_label`).
SYNONYMS = {"doc_id": ("id", "doc", "document_id", "docid"), "item_name": ("title", "name")}


@dataclass
class InitChoices:
    """What `cube init` asks. Paths are absolute (the command resolves what was typed)."""

    system: str = "demo"
    judge: str = "offline"
    run: str = "my-eval"
    lang: str = "en"
    kb: Path | None = None
    questions: Path | None = None
    url: str | None = None
    callable: str | None = None
    answers: Path | None = None
    model: str | None = None
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    answerer_model: str | None = None
    answerer_base_url: str | None = None
    answerer_api_key_env: str | None = None
    port: int = 8765

    def missing(self) -> list[str]:
        """The flags a choice still needs, e.g. ['--url'] for an HTTP system without one."""
        out = [flag for field, flag in NEEDS.get(self.system, ()) if not getattr(self, field)]
        return out + (["--model"] if self.judge == "openai" and not self.model else [])


def _rel(path: Path, folder: Path) -> str:
    """`path` as the params file in `folder` writes it: relative to `folder` (posix)."""
    return Path(os.path.relpath(Path(path).resolve(), folder.resolve())).as_posix()


def suggest_columns(kb: Path) -> tuple[dict[str, str], list[str]]:
    """A `corpus.columns` mapping for the knowledge-base file's columns named like a field key
    (its key, its Chinese or English label, or `SYNONYMS`), and the columns left unmapped (shown
    under their own name in each document: `corpus.extra_columns: render`)."""
    from cube.config.schema import MAPPABLE, key_label
    from cube.kb.corpus import read_table

    raw, _ = read_table(kb)
    columns = [str(c) for c in raw.columns]
    folded = {c.strip().casefold(): c for c in columns}
    mapping: dict[str, str] = {}
    for key in MAPPABLE:
        names = (key, key_label(key, "zh"), key_label(key, "en"), *SYNONYMS.get(key, ()))
        found = next((folded[n.casefold()] for n in names if n.casefold() in folded), None)
        if found is not None and found not in mapping.values():
            mapping[key] = found
    left = [c for c in columns if c not in mapping.values()]
    return {k: v for k, v in mapping.items() if k != v}, left


def _dump(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _comment(text: str) -> str:
    """`text` as YAML comment lines of at most 100 characters, a line break kept."""
    lines = [
        w
        for line in text.splitlines()
        for w in textwrap.wrap(line, 96, break_on_hyphens=False, break_long_words=False) or [""]
    ]
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def _corpus(c: InitChoices, folder: Path) -> tuple[str, dict[str, Any]]:
    if c.system == "demo" or c.kb is None:
        return (
            "The knowledge base: a SYNTHETIC demo (generated, deterministic; not real data).",
            {"corpus": {"source": "demo", "n_items": 300, "seed": 7}},
        )
    mapping, left = suggest_columns(c.kb)
    note = (
        f"Columns mapped to no field key (shown under their own name): {', '.join(left)}.\n"
        if left
        else ""
    )
    corpus: dict[str, Any] = {"source": "file", "path": _rel(c.kb, folder)}
    if mapping:
        corpus["columns"] = mapping
    return (
        "Your knowledge base. `columns` maps field keys to your column names (keys: `cube "
        "params-reference`, the field table of docs/reference/params.md); a column named like "
        f"a key needs no entry.\n{note}`cube validate` checks the mapping and suggests one.",
        {"corpus": corpus},
    )


def _questions(c: InitChoices, folder: Path) -> tuple[str, dict[str, Any]]:
    if c.questions is not None:
        return (
            "Your question set: a file with `question` and `doc_id` (the gold document); its "
            "columns: docs/reference/question-files.md.",
            {"questions": {"generator": "file", "path": _rel(c.questions, folder)}},
        )
    if _dataset_questions(c):
        return (
            "The questions and their gold documents: your dataset's own (the document its "
            "reference contexts come from; docs/how-to/ragas-deepeval.md).",
            {"questions": {"generator": "imported"}},
        )
    return (
        "The questions: written from the knowledge base by templates (offline, deterministic).\n"
        "`cube questions THIS_FILE --out questions.csv` writes them with the columns an import "
        "needs.",
        {"questions": {"generator": "template", "per_doc": 1, "seed": 7}},
    )


def _answerer(c: InitChoices) -> tuple[str, dict[str, Any]]:
    """The answering model: the bound sets must come from the model the system answers with."""
    if c.answerer_model:
        spec: dict[str, Any] = {"provider": "openai", "model": c.answerer_model}
        if c.answerer_base_url:
            spec["base_url"] = c.answerer_base_url
        if c.answerer_api_key_env:
            spec["api_key_env"] = c.answerer_api_key_env
        return (
            "The model your system answers with: it also writes the zero and full bound sets "
            "(the same model, or the score compares your system with another model's bounds: "
            "docs/explanation/method.md).",
            {"answerer": spec},
        )
    text = (
        "The answering model of the built-in baseline and of the zero and full bound sets: the "
        "offline extractive answerer (no model)."
    )
    if c.system in ("http", "python", "imported"):
        text += (
            "\nREPLACE it with the model your system answers with (an OpenAI-compatible spec, "
            "e.g. {provider: openai, model: ..., base_url: ..., api_key_env: ...}; `cube init "
            "--answerer-model`): the bounds must come from your system's own model, else the "
            "score compares it with the extractive answerer's bounds."
        )
    return text, {"answerer": {"provider": "offline", "model": "extractive"}}


def _system(c: InitChoices, folder: Path) -> tuple[str, dict[str, Any]]:
    if c.system in ("demo", "baseline"):
        entry: dict[str, Any] = {"kind": "builtin", "name": "bm25-top8", "top_n": 8}
        return "The system under test: the built-in BM25 retriever (top 8).", {"systems": [entry]}
    if c.system == "imported":
        entry = {"kind": "imported", "name": "my-system", "path": _rel(Path(c.answers), folder)}
        if _dataset_questions(c):
            return (
                "Your system's answers, imported from your ragas or DeepEval dataset: its "
                "questions, answers and retrieved passages (each mapped to the document it came "
                "from). Columns: docs/reference/imported-files.md.",
                {"systems": [entry]},
            )
        text = (
            "Your system's answers, imported: one row per question with `question_id`, `answer` "
            "and `retrieved_doc_ids` (the documents it retrieved, in rank order: a JSON list or "
            "ids separated by | or ;).\nThe questions to answer: `cube questions THIS_FILE --out "
            "FILE` (docs/tutorials/own-system.md)."
        )
        return text, {"systems": [entry]}
    if c.system == "http":
        entry = {  # the keys of `kind: http` (cube.config.http_system.HttpSystem)
            "kind": "http",
            "name": "my-rag",
            "url": c.url,
            "method": "POST",
            "body": {"question": "{question}", "top_k": "{top_n}"},
            "response": {"answer": "answer", "retrieved_ids": "sources[*].doc_id"},
            "top_n": 8,
        }
        text = (
            "Your RAG service: `body` is the JSON sent for each question ({question}, "
            "{question_id}, {top_n}, {lang}, {region} are filled in); `response` holds the "
            "JMESPath expressions finding the answer and the retrieved documents' ids "
            "(`retrieved_ids`) or passages' texts (`retrieved_passages`) in its reply.\nEdit them "
            "to your service's shapes, or set `preset: openai_chat_references` (RAGFlow's "
            "OpenAI-compatible chat) or `preset: dify_chat_messages`. A secret header goes through "
            "`header_env` (header name: the environment variable holding it)."
        )
        return text, {"systems": [entry]}
    entry = {"kind": "python", "name": "my-rag", "callable": _callable(c.callable, folder)}
    text = (
        "Your RAG pipeline as a Python function (`package.module:function` or "
        "`path/to/file.py:function`), called with one question; it returns the answer and the "
        "retrieved document ids or passages."
    )
    return text, {"systems": [entry]}


def _callable(target: str | None, folder: Path) -> str | None:
    """A `file.py:function` target with its file relative to the params file's folder."""
    from cube.config.project import callable_file

    split = callable_file(target) if target else None
    return _rel(Path(split[0]), folder) + split[1] if split else target


def typed_callable(target: str | None, cwd: Path) -> str | None:
    """A `file.py:function` target as typed in `cwd`, with its file made absolute."""
    from cube.config.project import callable_file

    split = callable_file(target) if target else None
    return f"{(cwd / split[0]).resolve()}{split[1]}" if split else target


def _judges(c: InitChoices) -> tuple[str, dict[str, Any]]:
    if c.judge == "openai":
        model = {
            "provider": "openai",
            "model": c.model,
            "base_url": c.base_url,
            "api_key_env": c.api_key_env,
            "temperature": 0,
        }
        return (
            f"The judge: {c.model} on an OpenAI-compatible endpoint. Its key is read from the "
            f"environment variable {c.api_key_env} (never written here). Add judges for a jury.",
            {"models": {"judge": model}, "judges": [{"name": _name(c.model), "model": "judge"}]},
        )
    if c.judge == "local":
        model = {
            "provider": "openai",
            "model": "local",
            "base_url": f"http://127.0.0.1:{c.port}/v1",
            "max_concurrency": 1,
            "structured_output": "auto",
            "temperature": 0,
            "max_tokens": 16,
            "timeout_s": 300,
        }
        local = {"name": "local-model", "model": "local-judge", "role": "`cube serve`'s model"}
        return (
            "The jury: the two offline rubric judges and a local model served by `cube serve` "
            f"(port {c.port}; `make local-llm` installs it; start it before `cube run`).",
            {"models": {"local-judge": model}, "judges": [*OFFLINE_JUDGES, local]},
        )
    return (
        "The jury: two offline rubric judges of different strictness (no model, no key). They "
        "make a first run work anywhere; for a real evaluation use LLM judges (`cube init "
        "--judge openai`).",
        {"judges": OFFLINE_JUDGES},
    )


def _name(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text or "judge")).strip("-") or "judge"


def params_text(c: InitChoices, path: Path) -> str:
    """The params file for `c`, to be written at `path`: YAML with a comment before each
    section."""
    folder = path.resolve().parent
    head = (
        f"Written by `cube init` (system: {c.system}, judge: {c.judge}). Check it with `cube "
        f"validate {path.name}`, run it with `cube run {path.name}`. Relative paths are read "
        "from this file's folder.\nEvery key: docs/reference/params.md (or `cube "
        "params-reference`)."
    )
    top = {"run": _name(c.run), "lang": c.lang, "title": f"CuBE evaluation · {c.run}"}
    lexical = {"lexical": {"tokenizer": "jieba" if c.lang == "zh" else "13a"}}
    blocks = [
        (head, top),
        _corpus(c, folder),
        _questions(c, folder),
        _answerer(c),
        _system(c, folder),
        _judges(c),
        ("BLEU/ROUGE word segmentation for the language.", lexical),
    ]
    text = "\n".join(_comment(text) + _dump(data) for text, data in blocks)
    return text.replace("THIS_FILE", path.name)


def check_written(text: str, path: Path) -> None:
    """Validate `text` as the params file `path` (relative paths read from its folder), as `cube
    validate` loads it.

    Raises:
        ParamsError: naming every problem (e.g. a system kind this version does not know).
    """
    import yaml

    from cube.config.params import parse_params
    from cube.config.project import paths_from_file

    parse_params(paths_from_file(yaml.safe_load(text), path), str(path))


class UnsafeTarget(OSError):
    """`cube init`'s target is a symbolic link (dangling or not) or no regular file."""


def write_params_file(path: Path, text: str) -> None:
    """Write the new params file at `path`, never through a symbolic link: a link at `path`
    (dangling or not) is refused, and the file is opened with O_NOFOLLOW so a link put there in
    the meantime is refused too (issue 38: `cube init` on a dangling link wrote where it pointed).

    Raises:
        UnsafeTarget: `path` is a symbolic link or not a regular file.
    """
    if path.is_symlink():
        raise UnsafeTarget(
            f"{path}: is a symbolic link (to {os.readlink(path)}); cube init writes only a "
            "regular file: remove the link or name another path"
        )
    if path.exists() and not path.is_file():
        raise UnsafeTarget(f"{path}: exists and is not a regular file")
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if path.is_symlink():  # ELOOP: a link appeared between the check and the open
            raise UnsafeTarget(f"{path}: is a symbolic link; not written") from None
        raise err
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def data_problems(path: Path) -> list[str]:
    """What `cube validate` would still refuse in the written params file `path` (its data: the
    knowledge base's columns, the question and answer files), each with its fix; [] when none.
    A knowledge base of the user's is read but never guessed at: a field no column could be
    matched to is left for the user to map, and said here."""
    from cube.config.params import load_params
    from cube.run.validate import validate_data

    report = validate_data(load_params(path), path.parent, params_file=path)
    return list(report.errors)


def prompt_choices(c: InitChoices, ask: Any) -> InitChoices:
    """Fill `c` by asking: `ask(question, default, choices)` returns the answer (the default on an
    empty one). Only what the chosen system and judge need is asked."""
    c.system = ask("System to evaluate", c.system, SYSTEMS)
    if c.system != "demo":
        c.kb = _path(ask("Knowledge-base file or folder (CSV, JSONL, Parquet, Excel, TXT)", c.kb))
        c.questions = _path(ask("Question file (empty: written from the knowledge base)", None))
    if c.system == "http":
        c.url = ask("URL of your RAG service (POST, JSON)", c.url)
    if c.system == "python":
        c.callable = ask("Your function (package.module:function or file.py:function)", c.callable)
    if c.system == "imported":
        c.answers = _path(ask("File of your system's answers (CSV, JSONL, Parquet)", c.answers))
    if c.system in ("http", "python", "imported"):
        c.answerer_model = ask("Model your system answers with (empty: fill in later)", None)
        if c.answerer_model:
            c.answerer_base_url = ask("Its OpenAI-compatible base_url", c.base_url)
            c.answerer_api_key_env = ask("Environment variable holding its key", c.api_key_env)
    c.judge = ask("Judge", c.judge, JUDGES)
    if c.judge == "openai":
        c.model = ask("Judge model", c.model)
        c.base_url = ask("Judge base_url", c.base_url)
        c.api_key_env = ask("Environment variable holding the judge's key", c.api_key_env)
    c.run = ask("Run name (outputs go to outputs/<run>/)", c.run)
    c.lang = ask("Language of the knowledge base", c.lang, {"en": "English", "zh": "Chinese"})
    return c


def _dataset_questions(c: InitChoices) -> bool:
    """An imported file holding its questions and their reference contexts (a ragas or DeepEval
    dataset) gives the question set: no question file, nothing to ask with `cube questions`."""
    if c.system != "imported" or c.answers is None or c.questions is not None:
        return False
    from cube.systems.imported_questions import holds_questions

    return holds_questions(Path(c.answers))


def _path(answer: Any) -> Path | None:
    return Path(answer).expanduser().resolve() if answer else None


def next_steps(c: InitChoices, shown: str) -> list[str]:
    """What to do after `cube init`, as commands (`shown`: the params file as typed)."""
    steps = []
    if c.judge == "openai":
        steps.append(f"export {c.api_key_env}=...   # the judge's key (never in the params file)")
    if c.judge == "local":
        steps.append("cube serve &   # the local model (`make local-llm` installs it)")
    if c.system == "imported" and not _dataset_questions(c):
        steps.append(
            f"cube questions {shown} --out questions.csv   # the questions your system answers; "
            "its answers go to the file named under systems"
        )
    return [*steps, f"cube validate {shown}", f"cube run {shown}"]
