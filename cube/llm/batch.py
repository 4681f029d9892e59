"""Batch judging: the pending LLM calls of a stage as an OpenAI Batch API file, and the replies
back.

For runs that outgrow one machine's live calls. The round trip:

1. `cube batch export PARAMS --stage 03 --out calls.jsonl` writes every judging call of the run
   that is not in the call cache yet, one JSON line each in the OpenAI Batch API request format
   (`custom_id`, `method`, `url`, `body`), one file per (endpoint, model), named after both and a
   short hash of the exact pair (`calls.gpt-4o@api.openai.com.3f9c2a1b.jsonl`, `batch_file`): a
   batch runs on one endpoint, so `cube batch submit` refuses a file with another model's lines. The
   file also runs unchanged on vLLM's `python -m vllm.entrypoints.openai.run_batch -i calls.jsonl -o
   results.jsonl` (one GPU node, or a Ray cluster for many), or through `cube batch
   submit/status/fetch` on OpenAI's Batch API.
2. `cube batch import PARAMS results.jsonl [more.jsonl ...]` (any model's results) stores every
   successful reply in the call cache under its `custom_id`, which IS the call's cache key
   (`cube.llm.cache.cache_key`): the reply lands exactly where `cube run` looks. Every `custom_id`
   is checked against the calls the run makes now (an unknown one, e.g. from another run or older
   params, is refused and named, nothing of that line is stored); a failed line (an `error`, a
   non-200 status, a body without a usable answer) is recorded with its reason in
   `results.failures.jsonl` and stays pending (a live `cube run` makes it, or export again). It then
   says how many calls of the export files (in the run's `batch/` folder and beside the results
   files) are still not cached, per file, and how many pending calls are in no export
   (`pending_after_import`); `cube run` says the same in one line before it starts
   (`unanswered_exports`), since it would send them as live, paid requests.
3. `cube run PARAMS` then finds every call in the cache and sends no request.

Only stage 03 (judging) is exported: questions and answers written by an LLM are few next to the
judgments (one per question and set against sets x dimensions x judges x samples). A judge's
`retry_unscored` re-asks are not exported (they depend on the first replies); they happen live.
The call cost of an imported reply uses the model's batch prices (`batch_price_input_per_m`,
`batch_price_output_per_m`) when given, else its ordinary prices.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cube.config.model_spec import ModelSpec
from cube.llm.cache import CallCache, canonical_json, key_payload
from cube.llm.calls import Request, Response
from cube.llm.endpoints import call_cost
from cube.llm.wire import MalformedReply, parse_completion
from cube.llm.wire import request_body as endpoint_body

URL = "/v1/chat/completions"


class BatchError(ValueError):
    """A batch file or request that cannot be used (the message names the file and line)."""


@dataclass
class Pending:
    custom_id: str  # the cache key
    judge: str
    spec: ModelSpec
    request: Request


def request_body(spec: ModelSpec, request: Request) -> dict[str, Any]:
    """The chat-completions body the live client sends for this call
    (`cube.llm.endpoints.Endpoints`); with `structured_output` on or auto, a schema-constrained
    reply as OpenAI's `json_schema` (which the Batch API and vLLM's run_batch take)."""
    return endpoint_body(
        spec, request, "json_schema" if spec.structured_output != "off" else "text"
    )


def pending_of(calls: list[Pending], cache_path: Path, every: bool = False) -> list:
    """`calls` without those already in the call cache at `cache_path`; with `every`, all calls as
    (call, pending) pairs."""
    done: dict[str, Any] = {}
    if calls and Path(cache_path).exists():
        cache = CallCache(cache_path)
        try:
            done = cache.get_many(c.custom_id for c in calls)
        finally:
            cache.close()
    if every:
        return [(c, c.custom_id not in done) for c in calls]
    return [c for c in calls if c.custom_id not in done]


def batch_target(spec: ModelSpec) -> str:
    """`model@host[:port]`: the model and endpoint a batch file goes to (its first base URL)."""
    url = urlsplit(spec.endpoints()[0])
    host = (url.hostname or "") + (f":{url.port}" if url.port is not None else "")
    return f"{spec.model}@{host}"


def batch_file(out: Path, spec: ModelSpec) -> Path:
    """The export file of the calls to `spec`'s (endpoint, model):
    `<out stem>.<model>@<host>.<hash>.jsonl` beside `out` (e.g.
    `03.gpt-4o@api.openai.com.3f9c2a1b.jsonl`). The readable part is made safe for a file system
    (letters, digits, `._@-`; anything else becomes `-`), which can make two pairs alike
    ('qwen2.5:7b' and 'qwen2.5-7b', 'org/model' and 'org-model', one host's two endpoint paths): the
    8 hex digits of sha256 over the exact model and endpoint URL keep their calls in separate
    files."""
    target = re.sub(r"[^\w.@-]+", "-", batch_target(spec).replace(":", "-"))
    exact = hashlib.sha256(f"{spec.model}\n{spec.endpoints()[0].rstrip('/')}".encode()).hexdigest()[
        :8
    ]
    return out.with_name(f"{out.stem}.{target}.{exact}.jsonl")


def export_batch(calls: list[tuple[Pending, bool]], out: str | Path) -> dict[Path, int]:
    """Write the pending calls as OpenAI Batch API JSONL, one file per (endpoint, model)
    (`batch_file` of `out`): a batch is submitted to one endpoint and its lines name one model.
    Returns {file: number of calls} of the files written (empty: nothing to do). A group with
    nothing pending any more has its earlier export file removed, so no stale file is submitted
    twice. `calls`: every call of the stage as (call, still pending) pairs (`pending_of(...,
    every=True)`)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    groups: dict[Path, list[Pending]] = {}
    for c, pending in calls:
        groups.setdefault(batch_file(out, c.spec), [])
        if pending:
            groups[batch_file(out, c.spec)].append(c)
    written = {}
    for path, group in groups.items():
        if not group:
            path.unlink(missing_ok=True)
            continue
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for c in group:
                line = {
                    "custom_id": c.custom_id,
                    "method": "POST",
                    "url": URL,
                    "body": request_body(c.spec, c.request),
                }
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        tmp.replace(path)
        written[path] = len(group)
    return written


def check_batch_file(path: Path, spec: ModelSpec) -> None:
    """Refuse a request file that is not all for `spec`'s model: every line's `body.model` must be
    `spec.model` (a batch runs on one endpoint, which serves one model). Names every other model
    found, with its line numbers (the first few), and every line that is not a request."""
    if not path.exists():
        raise BatchError(f"{path}: no such file")
    others: dict[str, list[int]] = {}
    broken: list[str] = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            model = line["body"]["model"]
        except (ValueError, KeyError, TypeError) as exc:
            broken.append(
                f"line {n}: not a Batch API request line with body.model "
                f"({type(exc).__name__}: {exc})"
            )
            continue
        if model != spec.model:
            others.setdefault(str(model), []).append(n)
    problems = [
        f"{len(lines)} line(s) for model {m!r} (lines {', '.join(map(str, lines[:5]))}"
        f"{', ...' if len(lines) > 5 else ''})"
        for m, lines in others.items()
    ] + broken
    if problems:
        raise BatchError(
            f"{path}: refused, the endpoint {batch_target(spec)} serves model {spec.model!r} but "
            + "; ".join(problems)
            + " (export writes one file per model: submit each with its own "
            "--model)"
        )


@dataclass
class ImportReport:
    stored: int = 0
    already: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)  # custom_id, judge, reason
    problems: list[str] = field(default_factory=list)  # lines that could not be used at all

    def lines(self) -> list[str]:
        out = [
            f"{self.stored} repl{'y' if self.stored == 1 else 'ies'} stored in the call cache"
            + (f", {self.already} already there" if self.already else "")
        ]
        out += [
            f"failed: {f['custom_id'][:12]}… ({f['judge']}): {f['reason']}" for f in self.failed
        ]
        out += [f"refused: {p}" for p in self.problems]
        return out


def _batch_spec(spec: ModelSpec) -> ModelSpec:
    """The spec whose prices are the batch prices where the model gives them."""
    update = (
        {"price_input_per_m": spec.batch_price_input_per_m}
        if spec.batch_price_input_per_m is not None
        else {}
    )
    if spec.batch_price_output_per_m is not None:
        update["price_output_per_m"] = spec.batch_price_output_per_m
    return spec.model_copy(update=update) if update else spec


def _reply(line: dict[str, Any]) -> tuple[str | None, str]:
    """(completion body as JSON text, "") or (None, why the line holds no answer)."""
    if line.get("error"):
        err = line["error"]
        return None, f"batch error: {err.get('message', err) if isinstance(err, dict) else err}"
    response = line.get("response")
    if not isinstance(response, dict):
        return None, "no `response` object"
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        detail = body.get("error", body) if isinstance(body, dict) else body
        return None, f"HTTP {status}: {str(detail)[:200]}"
    return (body if isinstance(body, str) else json.dumps(body)), ""


@dataclass
class _Import:
    """One import of a results file into the call cache, line by line (see `import_batch`)."""

    by_id: dict[str, Pending]  # the calls the run makes now, by custom_id
    stored: dict[str, Any]  # custom_ids whose reply the cache holds
    cache: CallCache
    report: ImportReport
    stage: str

    def line(self, raw: str, where: str) -> None:
        """One line of the results file: refused (not JSON, not a call of this run), already
        stored, stored now, or failed with its reason."""
        try:
            line = json.loads(raw)
        except ValueError as exc:
            self.report.problems.append(f"{where}: not JSON ({exc})")
            return
        cid = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(cid, str) or cid not in self.by_id:
            self.report.problems.append(
                f"{where}: custom_id {cid!r} is not a call of this run's stage {self.stage} "
                "(another run, or params changed since the export?)"
            )
            return
        if cid in self.stored:
            self.report.already += 1
            return
        why = self._store(cid, line)
        if why is not None:
            self.report.failed.append(
                {"custom_id": cid, "judge": self.by_id[cid].judge, "reason": why}
            )

    def _store(self, cid: str, line: dict[str, Any]) -> str | None:
        """Store the line's reply in the cache; why it could not be, or None when it was."""
        body, why = _reply(line)
        if body is None:
            return why
        call = self.by_id[cid]
        try:
            text, n_in, n_out, finish, served, n_cached = parse_completion(body)
        except MalformedReply as exc:
            return f"malformed response: {exc}"
        resp = Response(
            text=text,
            input_tokens=n_in,
            output_tokens=n_out,
            cached_input_tokens=n_cached,
            cost=call_cost(_batch_spec(call.spec), n_in, n_out, n_cached),
            attempts=1,
            model=call.spec.model,
            endpoint="batch",
            detail={"finish_reason": finish, "served_model": served},
        )
        self.cache.put(cid, resp, canonical_json(key_payload(call.spec, call.request)))
        self.stored[cid] = {}
        self.report.stored += 1
        return None


def import_batch(
    calls: list[Pending], cache_path: Path, results: str | Path, stage: str = "03"
) -> ImportReport:
    """Store the successful replies of a Batch API output file in the call cache (see module);
    `calls`: the calls the run makes now (a reply to any other is refused)."""
    results = Path(results)
    if not results.exists():
        raise BatchError(f"{results}: no such file")
    by_id = {c.custom_id: c for c in calls}
    report = ImportReport()
    cache = CallCache(cache_path)
    try:
        run = _Import(by_id, cache.get_many(by_id), cache, report, stage)
        for n, raw in enumerate(results.read_text(encoding="utf-8").splitlines(), 1):
            if raw.strip():
                run.line(raw, f"{results}: line {n}")
    finally:
        cache.close()
    failures = results.with_name(results.stem + ".failures.jsonl")
    if report.failed:
        failures.write_text(
            "".join(json.dumps(f, ensure_ascii=False) + "\n" for f in report.failed),
            encoding="utf-8",
        )
    return report


def export_ids(path: Path) -> list[str] | None:
    """The `custom_id`s of a Batch API request file (an export), None when `path` is not one (a
    results, failures or any other JSONL file: the first line that is not a request line says
    so)."""
    ids: list[str] = []
    try:
        with path.open(encoding="utf-8") as f:
            for raw in f:
                if not raw.strip():
                    continue
                line = json.loads(raw)
                if not (
                    isinstance(line, dict)
                    and isinstance(line.get("custom_id"), str)
                    and "method" in line
                    and isinstance(line.get("body"), dict)
                ):
                    return None
                ids.append(line["custom_id"])
    except (OSError, ValueError):
        return None
    return ids or None


def export_files(folders: Any) -> dict[Path, list[str]]:
    """Every export file (`export_ids`) among the `*.jsonl` of `folders`, with its `custom_id`s."""
    found: dict[Path, list[str]] = {}
    for folder in dict.fromkeys(Path(f).resolve() for f in folders):
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            if (ids := export_ids(path)) is not None:
                found[path] = ids
    return found


def pending_after_import(pending: list[Pending], folders: Any, stage: str = "03") -> list[str]:
    """What `cube batch import` says after storing the replies: the calls of the export files in
    `folders` still not in the call cache, per file, and the stage's pending calls in no export;
    `cube run` would send both live. One line each (none pending: one line saying so). `pending`:
    the stage's calls not in the call cache."""
    ids = {c.custom_id for c in pending}
    per_file: dict[str, int] = {}
    exported: set[str] = set()
    for path, file_ids in export_files(folders).items():
        if mine := ids.intersection(file_ids):
            per_file[path.name] = len(
                mine
            )  # the name only: no local folder layout in what is printed
            exported |= mine
    lines = []
    if per_file:
        lines.append(
            f"pending: {len(exported)} exported call(s) still not in the call cache ("
            + ", ".join(f"{n} of {name}" for name, n in per_file.items())
            + "): `cube run` would send them live; import their results first (or export again)"
        )
    if never := len(ids - exported):
        lines.append(
            f"pending: {never} call(s) of stage {stage} are in no export file and not in the call "
            "cache: `cube run` would send them live (`cube batch export` writes them)"
        )
    return lines or [
        f"every call of stage {stage} is in the call cache: `cube run` sends no request for it"
    ]


def unanswered_exports(paths: Any) -> dict[Path, int]:
    """Before `cube run`: the export files of the run's `batch/` folder with calls not in the call
    cache (file -> how many). The run sends those it still needs as live requests."""
    files = export_files([Path(paths.root) / "batch"])
    if not files:
        return {}
    done: dict[str, Any] = {}
    if Path(paths.cache).exists():
        cache = CallCache(paths.cache)
        try:
            done = cache.get_many(i for ids in files.values() for i in ids)
        finally:
            cache.close()
    return {p: n for p, ids in files.items() if (n := len(set(ids) - done.keys()))}
