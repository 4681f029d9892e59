"""The `python` system: a user's own RAG pipeline (LangChain, LlamaIndex, plain code) as a function.

Params (`cube.config.sections.PythonSystem`): `callable: package.module:function` (imported with
the project root first on `sys.path`) or `path/to/file.py:function` (read relative to the params
file's folder, like every relative path of a params file: the loader makes it absolute; its
folder goes first on `sys.path`, as for a script), `top_n`, `answerer` or `bounds`, `version`,
`max_concurrency`.

The contract (docs/how-to/python-system.md):

- the function gets one `Question` (`text`, `question_id`, `lang`, `top_n`) and returns a dict
  with `answer` (str) and `retrieved_ids` (corpus doc ids in rank order) and/or
  `retrieved_passages` (the retrieved texts in rank order, mapped to corpus documents by
  `cube.systems.passages.map_passages`), or a `SystemAnswer`; ids win when both are given
  (its passages when its id list is empty);
- sync or async (`async def`): at most `max_concurrency` questions at a time, sync functions in a
  thread pool of that size, async ones on one event loop under a semaphore;
- an exception is that question's failure, its type and message in `error` (answer None,
  `retrieval_ok` False: nothing is known about what it retrieved), never a crash of the run; so is
  a reply of the wrong shape, naming what was expected; an empty answer is a failure whose
  retrieval is known;
- the reply's ids or passages become ranked doc ids by the policy of every kind
  (`cube.systems.retrieved.ranked_lists`): misses keep their rank as `unmapped:...` and are
  counted in `attrs['unmapped']` (apart in `attrs['retrieved']`); a document listed again keeps
  its first rank; lists are cut at `top_n` (counted in `attrs['truncated']`, with a warning);
- every successful call is stored in the run's call cache (`cube.llm.CallCache`) under the sha256
  of the function's name, the bytes of the file defining it (`source_digest`), the params'
  `version` and the question: a re-run calls nothing; an edit of that file, or a new `version`
  (for what the file cannot show: another module, a model, an index), calls again. Failures are
  never stored.

The bound sets: with `bounds: module:function` the function answers each question twice, with
no document (`zero`) and with the gold document's text as the corpus renders it for the builtin
answerer (`full`), cached the same way; otherwise `answerer` names the model that writes them
(`cube.systems.bounds`).

Accounting: each question is one call of model `python:<name>` (`bounds:<function>` for the bound
sets), its `call_id` the cache key, its cost unknown (NaN: the function may pay for calls the
workbench cannot see).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.project import project_root, resolve
from cube.config.schema import require_columns
from cube.config.sections import PythonSystem, split_target
from cube.llm import CallCache, Response, progress_bar, run_sync
from cube.llm.cache import canonical_json
from cube.systems.base import System, answers_frame
from cube.systems.retrieved import Retrieved, ranked_lists

MAX_ERROR_CHARS = 500  # an exception's message kept in `error` (a traceback-sized one is cut)
ANSWER_KEYS = ("answer", "retrieved_ids", "retrieved_passages")
EXPECTED = (
    "a dict with 'answer' (str) and 'retrieved_ids' and/or 'retrieved_passages' (lists of str), "
    "or a cube.systems.SystemAnswer"
)


@dataclass(frozen=True)
class Question:
    """One question as a python system receives it."""

    text: str
    question_id: str
    lang: str
    top_n: int


@dataclass(frozen=True)
class SystemAnswer:
    """What a python system may return instead of a dict: the answer and what it retrieved, in
    rank order (ids of corpus documents, or the retrieved texts)."""

    answer: str
    retrieved_ids: Sequence[str] | None = None
    retrieved_passages: Sequence[str] | None = None


class PythonSystemError(ValueError):
    """A python system's function that cannot be loaded (the message names it and why)."""


class ShapeError(ValueError):
    """A function's reply that is not of the expected shape."""


# --------------------------------------------------------------------------- loading
def _on_path(folder: Path) -> None:
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def _file_module(path: Path) -> Any:
    """The module of a .py file, loaded once under a name of its own (a hash of its path), so that
    two files of one name (`v1/rag.py`, `v2/rag.py`: two versions in one run) stay apart;
    importlib's recipe for importing a source file."""
    name = "cube_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # registered before it runs: a dataclass in it looks its module up there (not an alias)
    sys.modules[name] = module
    _on_path(path.parent)  # its sibling modules import as they would from a script
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@functools.lru_cache(maxsize=64)
def _load(target: str, root: str) -> Callable[..., Any]:
    where, name, is_file = split_target(target)
    try:
        if is_file:
            path = resolve(where, Path(root))
            if not path.is_file():
                raise PythonSystemError(
                    f"{target!r}: file {path} not found"
                    + ("" if Path(where).is_absolute() else f" (read relative to {root})")
                )
            obj: Any = _file_module(path)
        else:
            _on_path(Path(root))
            obj = importlib.import_module(where)
    except PythonSystemError:
        raise
    except Exception as exc:  # the user's module failed to import: its own error, named
        raise PythonSystemError(
            f"{target!r}: importing {where!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for part in name.split("."):
        if not hasattr(obj, part):
            raise PythonSystemError(f"{target!r}: {where!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise PythonSystemError(f"{target!r}: {name!r} is a {type(obj).__name__}, not a function")
    return obj


def load_callable(target: str, base_dir: str | Path | None = None) -> Callable[..., Any]:
    """The function `target` names (`package.module:function` or `path/to/file.py:function`),
    relative paths and modules found from `base_dir` (default: the project root).

    Raises:
        PythonSystemError: the file, module or attribute is missing, or importing it failed.
    """
    root = Path(base_dir).resolve() if base_dir is not None else project_root()
    return _load(target, str(root))


def _unwrapped(fn: Any) -> Any:
    """The function whose source identifies `fn`: through decorators and partials; the class of a
    callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = inspect.unwrap(fn)
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isclass(fn):
        return fn
    return type(fn)


def source_digest(fn: Any) -> str:
    """sha256 of the file defining `fn` (its helpers in that file count too), else of its own
    source, else of its qualified name (no source: only `version` tells an edit)."""
    target = _unwrapped(fn)
    try:
        file = inspect.getsourcefile(target)
    except TypeError:
        file = None
    if file and Path(file).is_file():
        return hashlib.sha256(Path(file).read_bytes()).hexdigest()
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):
        text = f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', target)}"
    return hashlib.sha256(text.encode()).hexdigest()


def source_files(spec: PythonSystem, base_dir: str | Path | None = None) -> list[str]:
    """The files defining a python system's functions, found without running them (for the stage
    fingerprints: an edit re-runs the answers' stage); one not found is left to the run to
    report."""
    root = Path(base_dir).resolve() if base_dir is not None else project_root()
    out = []
    for target in (spec.callable, spec.bounds):
        if target is None:
            continue
        where, _, is_file = split_target(target)
        if is_file:
            out.append(str(resolve(where, root)))
            continue
        _on_path(root)
        try:  # imports the parent packages only, not the module
            found = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin and Path(found.origin).is_file():
            out.append(found.origin)
    return out


def load_problems(spec: PythonSystem, base_dir: str | Path | None = None) -> list[str]:
    """Why a python system's functions cannot be loaded, one line each (`cube validate`)."""
    problems = []
    for key in ("callable", "bounds"):
        target = getattr(spec, key)
        if target is None:
            continue
        try:
            load_callable(target, base_dir)
        except PythonSystemError as err:
            problems.append(f"systems[{spec.name}].{key}: {err}")
    return problems


# --------------------------------------------------------------------------- replies
def _str_list(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ShapeError(f"{key!r} must be a list of str in rank order, got {type(value).__name__}")
    bad = [type(v).__name__ for v in value if not isinstance(v, str | int) or isinstance(v, bool)]
    if bad:
        raise ShapeError(f"{key!r} must hold str, got {bad[0]}")
    return [str(v) for v in value]


def parse_answer(value: Any) -> dict[str, Any]:
    """A system function's reply as `{answer, retrieved_ids, retrieved_passages}`.

    Raises:
        ShapeError: naming what was expected and what came.
    """
    if isinstance(value, SystemAnswer):
        value = asdict(value)
    if not isinstance(value, dict):
        raise ShapeError(f"expected {EXPECTED}; got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in ANSWER_KEYS)
    if unknown:
        raise ShapeError(f"unknown key(s) {unknown}; expected {EXPECTED}")
    if not isinstance(value.get("answer"), str):
        raise ShapeError(f"'answer' must be a str, got {type(value.get('answer')).__name__}")
    ids = _str_list(value.get("retrieved_ids"), "retrieved_ids")
    passages = _str_list(value.get("retrieved_passages"), "retrieved_passages")
    if ids is None and passages is None:
        raise ShapeError(f"no 'retrieved_ids' and no 'retrieved_passages'; expected {EXPECTED}")
    return {"answer": value["answer"], "retrieved_ids": ids, "retrieved_passages": passages}


def parse_bound(value: Any) -> dict[str, Any]:
    """A bounds function's reply (a str, a dict with 'answer', or a `SystemAnswer`) as
    `{answer}`."""
    if isinstance(value, SystemAnswer):
        value = value.answer
    elif isinstance(value, dict) and "answer" in value:
        value = value["answer"]
    if not isinstance(value, str):
        raise ShapeError(
            "expected the answer as a str (or a dict with 'answer', or a "
            f"cube.systems.SystemAnswer); got {type(value).__name__}"
        )
    return {"answer": value}


# --------------------------------------------------------------------------- calling
def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _is_async(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    # an object whose class defines `async def __call__`
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


async def call_all(
    fn: Callable[..., Any], calls: list[tuple[Any, ...]], limit: int, bar: Any = None
) -> list[tuple[Any, str | None, float]]:
    """`fn(*args)` for every args of `calls`, at most `limit` at a time: (value, error, seconds)
    each, in order; an exception is its call's error (type: message), never raised."""
    sem = asyncio.Semaphore(limit)
    is_async = _is_async(fn)
    loop = asyncio.get_running_loop()
    pool = None if is_async else ThreadPoolExecutor(limit, thread_name_prefix="cube-python")

    async def one(args: tuple[Any, ...]) -> tuple[Any, str | None, float]:
        async with sem:
            t0 = time.perf_counter()
            value, error = None, None
            try:
                if pool is None:
                    value = await fn(*args)
                else:
                    value = await loop.run_in_executor(pool, functools.partial(fn, *args))
                if inspect.isawaitable(value):  # a sync wrapper handing back a coroutine
                    value = await value
            except Exception as exc:  # the question's failure, never the run's
                value, error = None, _reason(exc)
            if bar is not None:
                bar.update(1)
            return value, error, time.perf_counter() - t0

    try:
        return list(await asyncio.gather(*(one(a) for a in calls)))
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


@dataclass
class Outcome:
    """One call's result: its accounting `Response` (text = the answer) and the parsed reply
    (None when the call failed or the reply had the wrong shape)."""

    response: Response
    reply: dict[str, Any] | None


class CachedCaller:
    """Calls one user function for many argument tuples, through the call cache.

    Args:
        fn: the function.
        label: the accounting model name (`python:<name>`, `bounds:<function>`).
        identity: what identifies the function beside its arguments (name, source digest,
            version), hashed into every key.
        parse: the reply's parser (`parse_answer`, `parse_bound`), raising `ShapeError`.
        cache_path: the call cache (None: no cache).
        limit: calls at a time.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        label: str,
        identity: dict[str, Any],
        parse: Callable[[Any], dict[str, Any]],
        cache_path: Path | None,
        limit: int,
    ):
        self.fn, self.label, self.identity, self.parse = fn, label, identity, parse
        self.cache_path, self.limit = cache_path, limit
        self.calls = 0  # sent by this object (not served from the cache)

    def key(self, payload: dict[str, Any]) -> str:
        return hashlib.sha256(
            canonical_json({**self.identity, "call": payload}).encode()
        ).hexdigest()

    def run(
        self,
        calls: list[tuple[Any, ...]],
        payloads: list[dict[str, Any]],
        desc: str,
        progress: bool,
    ) -> list[Outcome]:
        """Each call's outcome, in order: cached ones read back, the others made (and stored when
        they succeeded)."""
        keys = [self.key(p) for p in payloads]
        cache = CallCache(self.cache_path) if self.cache_path is not None and calls else None
        try:
            hits = cache.get_many(keys) if cache else {}
            out: list[Outcome | None] = [self._hit(hits[k], k) if k in hits else None for k in keys]
            todo = [i for i, o in enumerate(out) if o is None]
            bar = progress_bar(
                total=len(calls), initial=len(calls) - len(todo), desc=desc, disable=not progress
            )
            try:
                raw = run_sync(call_all(self.fn, [calls[i] for i in todo], self.limit, bar))
            finally:
                bar.close()
            self.calls += len(todo)
            for i, (value, error, seconds) in zip(todo, raw, strict=True):
                out[i] = self._made(value, error, seconds, keys[i])
                if cache is not None and out[i].reply is not None and out[i].response.ok:
                    stored = Response(
                        text=json.dumps(out[i].reply, ensure_ascii=False),
                        latency_s=seconds,
                        model=self.label,
                        endpoint="python",
                        attempts=1,
                    )
                    cache.put(keys[i], stored, canonical_json({**self.identity, **payloads[i]}))
        finally:
            if cache is not None:
                cache.close()
        return out  # type: ignore[return-value]

    def _hit(self, row: dict[str, Any], key: str) -> Outcome:
        reply = json.loads(row["text"])
        resp = Response(
            text=reply["answer"],
            latency_s=float(row["latency_s"] or 0.0),
            cached=True,
            model=self.label,
            endpoint="python",
            call_id=key,
        )
        return Outcome(resp, reply)

    def _made(self, value: Any, error: str | None, seconds: float, key: str) -> Outcome:
        reply = None
        if error is None:
            try:
                reply = self.parse(value)
            except ShapeError as err:
                error = f"wrong reply shape: {err}"
        if reply is not None and not reply["answer"].strip():
            error = "empty answer"
        resp = Response(
            text=reply["answer"] if reply is not None and error is None else None,
            error=error,
            latency_s=seconds,
            attempts=1,
            model=self.label,
            endpoint="python",
            call_id=key,
        )
        return Outcome(resp, reply)


def _digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- the system
class PythonRAG(System):
    """A user's Python function as the system under test (module docstring).

    Args:
        spec: the params entry.
        lang: the run's language (passed in each `Question`).
        cache_path: the call cache (`RunPaths.cache`); None: no cache.
        answerer: the `answerer` column of its rag rows (the model it answers with, when named).
        base_dir: where relative paths and modules are found (default: the project root).
    """

    kind = "python"

    def __init__(
        self,
        spec: PythonSystem,
        *,
        lang: str,
        cache_path: str | Path | None,
        answerer: str = "",
        base_dir: str | Path | None = None,
    ):
        super().__init__(spec.name)
        self.spec, self.lang = spec, lang
        self.answerer = answerer or f"python:{spec.callable}"
        cache = Path(cache_path) if cache_path else None
        self.system = self._caller(
            spec.callable, f"python:{spec.name}", parse_answer, cache, base_dir
        )
        self.bounds_caller = (
            self._caller(spec.bounds, f"bounds:{spec.bounds}", parse_bound, cache, base_dir)
            if spec.bounds
            else None
        )

    def _caller(
        self,
        target: str,
        label: str,
        parse: Callable[[Any], dict[str, Any]],
        cache: Path | None,
        base_dir: str | Path | None,
    ) -> CachedCaller:
        fn = load_callable(target, base_dir)
        identity = {
            "python_function": split_target(target)[1],
            "source": source_digest(fn),
            "version": self.spec.version,
        }
        return CachedCaller(
            fn,
            label=label,
            identity=identity,
            parse=parse,
            cache_path=cache,
            limit=self.spec.max_concurrency,
        )

    def _questions(self, questions: pd.DataFrame) -> list[Question]:
        return [
            Question(text=str(t), question_id=str(q), lang=self.lang, top_n=self.spec.top_n)
            for q, t in zip(questions["question_id"], questions["question"], strict=True)
        ]

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        """The `rag` answers: one call per question (or its cached reply)."""
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        qs = self._questions(questions)
        outcomes = self.system.run(
            [(q,) for q in qs], [asdict(q) for q in qs], f"{self.name}: python", progress
        )
        retrieved = ranked_lists(
            [
                None
                if r is None
                else Retrieved(ids=r["retrieved_ids"], passages=r["retrieved_passages"])
                for r in (o.reply for o in outcomes)
            ],
            corpus,
            self.spec.top_n,
        )
        self._warn(retrieved.unmapped, retrieved.truncated)
        df = answers_frame(
            questions,
            system=self.name,
            set_name="rag",
            responses=[o.response for o in outcomes],
            retrieved=retrieved.lists,
            answerer=self.answerer,
            # a failed call or a reply of the wrong shape says nothing about the retrieval
            retrieval_ok=[o.reply is not None for o in outcomes],
        )
        df.attrs.update(
            unmapped=retrieved.unmapped,
            truncated=retrieved.truncated,
            calls=self.system.calls,
            retrieved=retrieved,
        )
        return df

    def _warn(self, unmapped: int, truncated: int) -> None:
        if unmapped:
            warnings.warn(
                f"system {self.name!r}: {unmapped} retrieved id(s) or passage(s) matched no "
                "knowledge-base document (ids kept as 'unmapped:<id>'; they count as misses)",
                stacklevel=3,
            )
        if truncated:
            warnings.warn(
                f"system {self.name!r}: {truncated} retrieved list(s) longer than "
                f"top_n={self.spec.top_n} were cut at top_n",
                stacklevel=3,
            )

    def bounds(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        """The `zero` and `full` sets written by the `bounds` function: each question answered
        with no document, and with the gold document's text (as `cube.systems.bounds` hands it
        to the builtin answerer). Rows as `cube.systems.bounds.answer_bounds` returns them."""
        if self.bounds_caller is None:
            raise ValueError(f"system {self.name!r} has no `bounds` function")
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        texts = dict(
            zip(corpus["doc_id"].astype(str), corpus["text"].fillna("").astype(str), strict=True)
        )
        golds = questions["doc_id"].astype(str).tolist()
        missing = [g for g in golds if g not in texts]
        if missing:
            raise ValueError(f"questions: gold doc_id(s) not in the corpus, e.g. {missing[:5]}")
        qs = self._questions(questions)
        docs = [[]] * len(qs) + [[texts[g]] for g in golds]
        calls = [(q, d) for q, d in zip(qs + qs, docs, strict=True)]
        payloads = [{**asdict(q), "documents": [_digest_text(t) for t in d]} for q, d in calls]
        out = self.bounds_caller.run(calls, payloads, f"{self.name}: bounds", progress)
        n = len(qs)
        return pd.concat(
            [
                answers_frame(
                    questions,
                    system="",
                    set_name=set_name,
                    responses=[o.response for o in part],
                    retrieved=retrieved,
                    answerer=self.bounds_caller.label,
                )
                for set_name, part, retrieved in (
                    ("zero", out[:n], [[] for _ in golds]),
                    ("full", out[n:], [[g] for g in golds]),
                )
            ],
            ignore_index=True,
        )
