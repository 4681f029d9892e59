"""What each stage (notebook) reads, its fingerprint, and which params produced a run's data.

- **Per-stage fingerprints.** A stage's fingerprint covers only what it reads: the params
  sections listed in `STAGES`, the user files those sections name (corpus, question file,
  imported answers, prompt files, ratings), the `cube` modules the notebook imports (followed
  through their own `cube` imports), the notebook file, and the fingerprints of the stages it
  takes data or run-record parts from (`stage_inputs`: each `Stage` declares the data files and
  the parts of `cube.run.record.RunRecord` it reads and writes; `upstream` is the one walk of
  that graph, for fingerprints, provenance and what a re-executed stage makes stale). A section
  may be a subset of one's keys (`diagnostics.refusal_*`: 02 reads only
  the refusal questions' keys, a failure threshold re-runs 06 and 10). So adding a judge re-runs
  from 03, changing `analysis` re-runs 04-07,
  changing `lexical` re-runs 08 only; 00 (the paper's published tables) reads no params at all.
  Of `models:` a stage reads only the entries its sections refer to (02 the answerers' and the
  question writer's, 03 the judges'), and of a model spec only what identifies its calls (not its
  prices, key variable, timeouts, retries or concurrency): adding a judge with its own `models:`
  entry re-runs from 03, a price edit re-runs nothing.
  A notebook not listed here (a new one) reads every section and every earlier stage.
- **Provenance.** `data/.provenance.json` records, for each data file, the stage that wrote it and
  the params sections that produced it (its own and its inputs'), in `comparable_values` form (no
  local absolute path: outside the project a path is kept as its name and a hash). Reading a data
  file under params that differ there raises `ParamsMismatchError` naming the differing keys, so
  data of two params files are never mixed in one run folder.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from cube.config.jsonfile import update_json
from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.project import project_root, shared_values


@dataclass(frozen=True)
class Stage:
    """What a stage reads and writes: params, data files and parts of the run record.

    The stage graph is these declarations: a stage's inputs (`stage_inputs`) are the stages whose
    data files it reads (`inputs`) and those writing the run-record parts it reads
    (`record_reads`, the parts of `cube.run.record.RunRecord`); its fingerprint, the sections of
    its provenance, the stages a re-executed one makes stale and the keys a skipped one forgets
    all follow from them (`upstream`, `record_writer`)."""

    # params keys the stage reads: a top-level section, or keys of one (`diagnostics.refusal_*`:
    # a dotted name with a glob for the sub-keys), so a key only later stages read re-runs only them
    sections: tuple[str, ...]
    inputs: tuple[str, ...]  # stages whose data it reads
    writes: tuple[str, ...] = ()  # data files it writes (data/<name>.parquet)
    record_reads: tuple[str, ...] = ()  # parts of the run record (results.json) it reads
    record_writes: tuple[str, ...] = ()  # parts of the run record it writes


STAGES: dict[str, Stage] = {
    "00_paper_tables": Stage((), (), record_writes=("paper",)),
    "01_dataset_prep": Stage(("lang", "corpus"), (), ("corpus",), record_writes=("corpus",)),
    "02_qa_sets": Stage(
        (
            "lang",
            "models",
            "questions",
            "answerer",
            "systems",
            "diagnostics.refusal_*",
            "analysis.sequential",
        ),
        ("01_dataset_prep",),
        ("questions", "answers", "questions_failed", "refusal_generation", "refusal_answers"),
        record_writes=("questions", "sequential", "answers", "refusal"),
    ),
    "03_scoring_sets": Stage(
        ("models", "dimensions", "judges", "audit"),
        ("02_qa_sets",),
        ("scores", "audit_scores"),
        record_reads=("sequential",),  # the driver's outcome: its failed calls and pilots
        record_writes=("scores",),
    ),
    "04_rank_correlation": Stage(("analysis",), ("03_scoring_sets",)),
    "05_bounds_and_weights": Stage(("analysis",), ("03_scoring_sets",)),
    "06_cube_score": Stage(  # the decision states the diagnosis
        ("analysis", "diagnostics"),
        ("03_scoring_sets",),
        record_reads=("answers", "scores"),  # systems not measured; the audit's sample
        record_writes=("decision",),
    ),
    "07_human_agreement": Stage(
        ("lang", "human", "analysis"),
        ("03_scoring_sets",),
        ("human_ratings",),
        record_writes=("human",),
    ),
    "08_bleu_rouge": Stage(  # its scores joined with 07's human ratings (`scores_with_human`)
        ("lang", "lexical", "human"), ("03_scoring_sets", "07_human_agreement"), ("lexical",)
    ),
    "09_compare": Stage(("analysis",), ("03_scoring_sets",), record_writes=("comparisons",)),
    "10_diagnostics": Stage(
        ("analysis", "diagnostics"),
        ("03_scoring_sets",),
        record_reads=("decision",),  # 06's sweep reading
        record_writes=("diagnostics",),
    ),
    "11_judge_audit": Stage(("audit", "analysis"), ("03_scoring_sets",), record_reads=("scores",)),
    "12_validation": Stage(  # simulated runs only: no data of the run
        ("analysis", "simulation"), (), record_writes=("simulation",)
    ),
}
# What stage 02 reads besides its own sections when `analysis.sequential` is on: its driver judges
# and looks (`cube.run.sequential`), so a change of the judges, the audit or the keys of the CuBE
# point estimate, the bands and the minimums may change the questions it reaches (not the
# bootstrap's keys: a look has no bootstrap)
SEQUENTIAL_SECTIONS = (
    "judges",
    "dimensions",
    "audit",
    "analysis.trim_proportion",
    "analysis.subset",
    "analysis.paired",
    "analysis.weights*",
    "analysis.custom_weights",
    "analysis.top_n",
    "analysis.cluster",
    "analysis.verdict_thresholds",
    "analysis.max_interval_width",
    "analysis.gate_alpha",
)
# Sections no stage's data depend on: the report's title, where outputs go.
# `stages`: which optional stages run is the runner's choice (`cube.run.skip`), not a stage input.
NOT_STAGE_INPUTS = ("run", "title", "outputs_dir", "cache_path", "stages", "baseline")


def stage_spec(name: str, earlier: list[str] | None = None) -> Stage:
    """The stage's spec; an unknown notebook reads every section and every earlier stage."""
    if name in STAGES:
        return STAGES[name]
    every = tuple(k for k in Params.model_fields if k not in NOT_STAGE_INPUTS)
    return Stage(every, tuple(earlier or [s for s in STAGES if s < name]))


def producer(data_name: str) -> str | None:
    return next((s for s, spec in STAGES.items() if data_name in spec.writes), None)


def record_writer(part: str) -> str | None:
    """The stage writing a part of the run record (None: written by `cube run` itself, `plan`)."""
    return next((s for s, spec in STAGES.items() if part in spec.record_writes), None)


def stage_inputs(name: str, stems: list[str] | None = None) -> tuple[str, ...]:
    """The stages `name` takes something from: those whose data it reads, then those writing the
    record parts it reads, unless already upstream (so a part read from a stage its data come
    through adds nothing). `stems`: the run's notebooks (an unknown one reads every earlier)."""
    earlier = None if stems is None else [s for s in stems if s < name]
    spec = stage_spec(name, earlier)
    out = list(spec.inputs)
    for part in spec.record_reads:
        writer = record_writer(part)
        # an earlier stage only: the graph stays acyclic
        if writer and writer < name and writer not in upstream(name, stems, out):
            out.append(writer)
    return tuple(out)


def upstream(
    name: str, stems: list[str] | None = None, direct: list[str] | None = None
) -> list[str]:
    """Every stage `name` depends on, transitively, ancestors first (the one walk of the stage
    graph: fingerprints, provenance, staleness). `direct`: its inputs, when already known."""
    out: list[str] = []
    for inp in direct if direct is not None else stage_inputs(name, stems):
        out += [s for s in upstream(inp, stems) if s not in out]
        if inp not in out:
            out.append(inp)
    return out


def written_keys(stage: str) -> tuple[str, ...]:
    """The results.json keys a stage writes: what a stale or skipped stage's run forgets."""
    from cube.run.record import RunRecord

    parts = RunRecord.parts()
    return tuple(k for p in stage_spec(stage).record_writes for k in parts[p].model_fields)


def upstream_sections(name: str) -> list[str]:
    """The sections a stage's data depend on: its own and, transitively, its inputs'."""
    seen: list[str] = []
    for stage in upstream(name):
        seen += [s for s in stage_spec(stage).sections if s not in seen]
    return seen + [s for s in stage_spec(name).sections if s not in seen]


# The fields of a model spec that change no reply (`cube.llm.cache.key_payload` leaves them out
# too): prices, the API key's variable, headers' variables, timeouts, retries and concurrency. No
# stage depends on them; every other field (model, endpoints, sampling, max tokens, extra body, an
# offline algorithm's options, and any field added later) identifies the calls. A call's cost is
# recorded when it is made and a cached call keeps its original cost, so re-running a stage after a
# price edit would not change any cost shown either.
NOT_CALL_FIELDS = frozenset(
    {
        "price_input_per_m",
        "price_output_per_m",
        "price_cached_input_per_m",
        "batch_price_input_per_m",
        "batch_price_output_per_m",
        "currency",
        "api_key_env",
        "header_env",
        "timeout_s",
        "max_concurrency",
        "min_concurrency",
        "max_attempts",
        "backoff_base_s",
        "backoff_max_s",
        "breaker_threshold",
    }
)
_SPEC_FIELDS = frozenset(ModelSpec.model_fields)


def _is_spec(value: Any) -> bool:
    return isinstance(value, dict) and _SPEC_FIELDS <= set(value)


def _calls_only(value: Any) -> Any:
    """A dumped section with each inline model spec without its `NOT_CALL_FIELDS`."""
    if _is_spec(value):
        return {k: v for k, v in value.items() if k not in NOT_CALL_FIELDS}
    if isinstance(value, dict):
        return {k: _calls_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_calls_only(v) for v in value]
    return value


def _model_refs(value: Any, names: set[str], key: str = "") -> set[str]:
    """Names of `models:` entries a dumped section refers to: a string value naming an entry under
    a key that holds a model reference (`model`, `answerer`, `*_model`, `*_answerer`)."""
    if isinstance(value, str):
        return {value} if _refers_to_model(key) and value in names else set()
    if isinstance(value, dict) and not _is_spec(value):
        return set().union(*(_model_refs(v, names, k) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_model_refs(v, names, key) for v in value))
    return set()


def _refers_to_model(key: str) -> bool:
    return key in ("model", "answerer") or key.endswith(("_model", "_answerer"))


def section_values(params: Params, sections: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The values of the params sections a stage reads, as its fingerprint and the provenance of its
    data record them. Model specs count without their `NOT_CALL_FIELDS`, and `models` holds only the
    entries the other listed sections refer to (the answerers for 02, the judges for 03): adding a
    judge with its own `models:` entry, or editing a price, leaves the answers' stage alone."""
    return dumped_section_values(json.loads(params.model_dump_json()), sections)


def _section(data: dict[str, Any], section: str) -> Any:
    """A section's value in dumped params (or in a record already keyed by section): a dotted
    `top.glob` section holds the keys of `top` matching the glob."""
    if section in data or "." not in section:
        return data.get(section)
    top, pattern = section.split(".", 1)
    value = data.get(top)
    return (
        {k: v for k, v in value.items() if fnmatchcase(k, pattern)}
        if isinstance(value, dict)
        else value
    )


def dumped_section_values(
    data: dict[str, Any], sections: list[str] | tuple[str, ...]
) -> dict[str, Any]:
    """`section_values` of params already dumped to a dict (a record, a params.yaml)."""
    out = {s: _calls_only(_section(data, s)) for s in sections}
    if "models" in sections:
        models = data.get("models") or {}
        used = set().union(
            *(
                _model_refs(_section(data, s), set(models), s.split(".")[0])
                for s in sections
                if s != "models"
            )
        )
        out["models"] = {name: _calls_only(models[name]) for name in sorted(used)}
    return out


# ------------------------------------------------------------------------------ fingerprints
def _corpus_files(params: Params) -> list[str]:
    corpus = params.corpus
    return [str(corpus.path)] if corpus.source == "file" and corpus.path else []


def _question_files(params: Params) -> list[str]:
    questions = params.questions
    return [questions.path] if questions.generator == "file" and questions.path else []


def _system_files(params: Params) -> list[str]:
    from cube.systems.kinds import kind_of

    files = [p for s in params.systems if (p := getattr(s, "path", None))]
    # the code a system runs (a python system's functions, a user kind's file and engine):
    # editing it re-runs the answers (its cache decides which calls are made again)
    return files + [f for s in params.systems for f in kind_of(s).source_files(s)]


def _dimension_files(params: Params) -> list[str]:
    return [p for d in params.dimension_list() for p in (d.prompt_file, d.path) if p]


def _human_files(params: Params) -> list[str]:
    return [p for p in (params.human.ratings, params.human.key) if p]


# the user files each params section names (a section absent here names none)
_SECTION_FILES: dict[str, Callable[[Params], list[str]]] = {
    "corpus": _corpus_files,
    "questions": _question_files,
    "systems": _system_files,
    "dimensions": _dimension_files,
    "human": _human_files,
}


def _files_for(params: Params, section: str) -> list[str]:
    files = _SECTION_FILES.get(section)
    return files(params) if files is not None else []


def files_digest(params: Params, sections: tuple[str, ...], root: Path) -> str:
    """Contents of the user files the sections name: replacing one at the same path makes the
    stages reading it out of date."""
    h = hashlib.sha256()
    for section in sections:
        for name in _files_for(params, section):
            path = Path(name).expanduser() if Path(name).expanduser().is_absolute() else root / name
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                h.update(name.encode())
                h.update(f.read_bytes() if f.is_file() else b"<missing>")
    return h.hexdigest()


PACKAGE = Path(__file__).resolve().parents[1]


# path -> ((mtime_ns, size), facts): a plain dict, not `functools.cache`, because the warm kernel's
# reset empties cube's memoised functions before every stage (`cube.run.kernel`) and three stages
# digest the evaluation's modules (`cube.run.evaluate`): each parsed the package again (~1 s of
# CPU). Facts depend on the file only, so a file changed since is parsed again.
_FACTS: dict[Path, tuple[tuple[int, int], tuple[frozenset[str], frozenset[str]]]] = {}


def _module_facts(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """A Python file's `cube` imports and the package data folders it reads, from one parse (the
    parse is most of a run's first fingerprints), kept while the file is unchanged; read from the
    run's store instead when it holds them for the file's bytes (`cube.run.facts_store`)."""
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    known = _FACTS.get(path)
    if known is not None and known[0] == key:
        return known[1]
    store = _facts_store()
    name = file_digest = ""
    # one read: the facts stored under a digest are those of the very bytes digested (a file
    # edited between two reads would file its new facts under its old bytes' digest for good)
    data = path.read_bytes()
    if store is not None:
        from cube.run.facts_store import digest

        name, file_digest = path.relative_to(PACKAGE).as_posix(), digest(data)
        stored = store.get(name, file_digest)
        if stored is not None:
            _FACTS[path] = (key, stored)
            return stored
    try:
        tree = ast.parse(data.decode("utf-8"))
    except SyntaxError:
        facts: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
    else:
        facts = _imports_of(tree, _module_name(path)), _data_of(tree, path)
    _FACTS[path] = (key, facts)
    if store is not None:
        store.put(name, file_digest, facts)
    return facts


_STORE: list[Any] = []  # [the open FactsStore or None], once asked for


@contextmanager
def facts_stored_in(file: Path | None) -> Iterator[None]:
    """Within the block, the package files' facts are read from and written to the store `file`
    (`cube.run.facts_store`; None: none): `cube run`'s fingerprints. Elsewhere (a run's kernels)
    the store is the one `FACTS_ENV` names, opened when facts are first needed."""
    from cube.run.facts_store import FactsStore

    before = list(_STORE)
    _STORE[:] = [FactsStore(file, PACKAGE) if file is not None else None]
    try:
        yield
    finally:
        _STORE[:] = before


def _facts_store() -> Any:
    if not _STORE:
        import os

        from cube.run.facts_store import FACTS_ENV, FactsStore

        named = os.environ.get(FACTS_ENV)
        _STORE[:] = [FactsStore(Path(named), PACKAGE) if named else None]
    return _STORE[0]


def _module_imports(path: Path) -> frozenset[str]:
    """`cube` modules imported by a Python file (by module name, e.g. 'cube.method.analysis')."""
    return _module_facts(path)[0]


def _module_data(path: Path) -> frozenset[str]:
    """The package folders (paths relative to `cube/`) whose data files (prompts, templates, tables)
    a Python file reads: named by a string in `resources.files(...)`, `.joinpath(...)`,
    `PackageLoader(...)`, or joined to a path built from `__file__`."""
    return _module_facts(path)[1]


def _data_of(tree: ast.AST, path: Path) -> frozenset[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called_name(node.func) in _DATA_CALLS:
            found |= _folders_named(node.args, path)
        elif (joined := _joined_to_file(node)) is not None:
            found |= _folders_named([joined], path)
    return frozenset(found)


_DATA_CALLS = ("files", "joinpath", "PackageLoader")  # the calls whose strings name data folders


def _called_name(f: ast.expr) -> str:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _joined_to_file(node: ast.AST) -> ast.expr | None:
    """What `<a path built from __file__> / <it>` joins to the module's path; None otherwise."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
        return None
    from_file = any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(node.left))
    return node.right if from_file else None


def _folders_named(nodes: list[ast.expr], path: Path) -> set[str]:
    """Package folders (relative to `cube/`) a string names: a dotted package (`"cube.pages"`),
    a top-level data folder (`"prompts"`) or a folder beside the module (`"templates"`)."""
    out = set()
    for n in nodes:
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value:
            for folder in (
                PACKAGE / n.value.removeprefix("cube.").replace(".", "/"),
                path.parent / n.value,
            ):
                if _inside_package(folder):
                    out.add(folder.resolve().relative_to(PACKAGE).as_posix())
    return out


def _inside_package(folder: Path) -> bool:
    """A folder of the package below its root."""
    return (
        folder.is_dir() and folder.resolve().is_relative_to(PACKAGE) and folder.resolve() != PACKAGE
    )


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports_in(source: str, current: str = "") -> frozenset[str]:
    """`cube` modules a source imports: import statements, and module names given as strings
    (`importlib.import_module("cube.judges.rubric")`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    return _imports_of(tree, current)


def _imports_of(tree: ast.AST, current: str) -> frozenset[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "cube"}
        elif isinstance(node, ast.ImportFrom):
            found |= _imported_from(node, current)
        elif (module := _module_named(node)) is not None:
            found.add(module)
    # importing a module runs its parent packages' __init__ first
    found |= {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 1)}
    return frozenset(found)


def _imported_from(node: ast.ImportFrom, current: str) -> set[str]:
    """The `cube` module of a `from ... import` (relative ones resolved from `current`) and each
    name imported from it (a name may be a submodule)."""
    base = node.module or ""
    if node.level:  # relative import inside the package
        pkg = current.split(".")[: -node.level] if current else ["cube"]
        base = ".".join([*pkg, base] if base else pkg)
    if base.split(".")[0] != "cube":
        return set()
    return {base} | {f"{base}.{a.name}" for a in node.names}


def _module_named(node: ast.AST) -> str | None:
    """The `cube` module a string constant spells (`"cube.judges.rubric"`); None otherwise."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    name = node.value
    spelled = name.startswith("cube.") and all(p.isidentifier() for p in name.split("."))
    return name if spelled else None


def _module_file(name: str) -> list[Path]:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    candidates = (
        [PACKAGE / rel.with_suffix(".py"), PACKAGE / rel / "__init__.py"]
        if rel.parts
        else [PACKAGE / "__init__.py"]
    )
    return [p for p in candidates if p.is_file()]


def modules_read(notebook_source: str) -> list[Path]:
    """The package files a notebook's code reads: `cube/__init__.py`, its `cube` imports followed
    transitively (a package's `__init__` counts with each of its modules, not its whole folder),
    and the package data folders those modules read (e.g. `cube/prompts/` for the judges)."""
    todo, seen = set(_imports_in(notebook_source)) | {"cube"}, set()
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for f in _module_file(name):
            files.add(f)
            todo |= _module_imports(f)
            for folder in _module_data(f):
                files |= {
                    g
                    for g in (PACKAGE / folder).rglob("*")
                    if g.is_file() and g.suffix != ".py" and "__pycache__" not in g.parts
                }
    if (store := _facts_store()) is not None:
        store.flush()
    return sorted(files)


# notebook source -> (the stats its files had, their digest): `cube.run.evaluate` digests the
# evaluation's modules on every `evaluate_run` (reading and hashing ~30 files each time). Kept while
# every file read, and every folder holding one, has the same (mtime_ns, size): an edited module
# changes its own stat, a module or data file added beside them changes its folder's.
_DIGESTS: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}


def _stats(paths: list[Path]) -> tuple[tuple[str, int, int], ...] | None:
    """Each path's (path, mtime_ns, size); None when one has gone."""
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            return None
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


def _digest_watched(files: list[Path]) -> list[Path]:
    return [*files, *sorted({f.parent for f in files} | {PACKAGE})]


def modules_digest(notebook_source: str) -> str:
    """Digest of the package files a notebook's code reads (`modules_read`), by their paths and
    bytes; kept per process while those files and their folders are unchanged."""
    known = _DIGESTS.get(notebook_source)
    if known is not None:
        watched = [Path(p) for p, _, _ in known[0]]
        if _stats(watched) == known[0]:
            return known[1]
    files = modules_read(notebook_source)
    stats = _stats(_digest_watched(files))  # before reading: a file edited meanwhile is read again
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(PACKAGE)).encode())
        h.update(f.read_bytes())
    digest = h.hexdigest()
    if stats is not None:
        _DIGESTS[notebook_source] = (stats, digest)
    return digest


def notebook_code(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join(
        "".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "code"
    )


def stage_fingerprints(params: Params, notebooks: list[Path], root: Path) -> dict[str, str]:
    """Fingerprint of every notebook (by file name) from what it reads (see the module
    docstring)."""
    prints: dict[str, str] = {}
    by_stem: dict[str, str] = {}
    stems = [p.stem for p in notebooks]
    for nb in notebooks:
        spec = stage_spec(nb.stem, [s for s in stems if s < nb.stem])
        h = hashlib.sha256()
        h.update(nb.read_text(encoding="utf-8").encode())
        sections = spec.sections
        if nb.stem == "02_qa_sets" and params.analysis.sequential is not None:
            sections = (*sections, *SEQUENTIAL_SECTIONS)
        h.update(json.dumps(section_values(params, sections), sort_keys=True).encode())
        # the files the sections name too (a judge's prompt file edited in place re-runs the
        # sequential driver of stage 02, which judged with it)
        h.update(files_digest(params, sections, root).encode())
        h.update(modules_digest(notebook_code(nb)).encode())
        for inp in stage_inputs(nb.stem, stems):
            h.update(by_stem.get(inp, f"<{inp} absent>").encode())
        by_stem[nb.stem] = prints[nb.name] = h.hexdigest()
    return prints


def stages_affected(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Notebooks whose fingerprint differs between two fingerprint maps (in order)."""
    return [name for name in sorted(after) if before.get(name) != after[name]]


# -------------------------------------------------------------------------------- provenance
PROVENANCE = ".provenance.json"


class ParamsMismatchError(RuntimeError):
    """The params differ from those that produced a data file of the run folder."""


def diff_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ (lists by index; a different length names the list)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return _diff_mappings(old, new, prefix)
    if isinstance(old, list) and isinstance(new, list):
        return _diff_lists(old, new, prefix)
    return [] if old == new else [prefix]


def _diff_mappings(old: dict[str, Any], new: dict[str, Any], prefix: str) -> list[str]:
    out = []
    for k in list(old) + [k for k in new if k not in old]:
        out += diff_keys(old.get(k), new.get(k), f"{prefix}.{k}" if prefix else str(k))
    return out


def _diff_lists(old: list[Any], new: list[Any], prefix: str) -> list[str]:
    if len(old) != len(new):
        return [f"{prefix} ({len(old)} entries in the data, {len(new)} in the params)"]
    out = []
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        out += diff_keys(a, b, f"{prefix}[{i}]")
    return out


def read_provenance(data_dir: Path) -> dict[str, Any]:
    path = data_dir / PROVENANCE
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError:
        return {}


def comparable_values(
    data: dict[str, Any], sections: list[str] | tuple[str, ...]
) -> dict[str, Any]:
    """Dumped params sections as records keep and compare them: local paths relative to the project
    root, or outside it by `path_identity` (name and hash: no local folder layout in a run folder),
    model specs by their call fields, `models` by the entries the sections refer to. Applied to both
    sides of a comparison, so a record written by an earlier version (absolute paths, whole
    `models:` entries with prices and concurrency) agrees with unchanged params."""
    return dumped_section_values(shared_values(data, project_root(), identify=True)[0], sections)


def params_differ(entry: dict[str, Any], params: Params) -> list[str]:
    """Dotted keys where a provenance entry's params differ from `params`."""
    recorded = entry.get("params") or {}
    if not isinstance(recorded, dict):
        return ["params"]
    sections = list(recorded)
    return diff_keys(
        comparable_values(recorded, sections),
        comparable_values(json.loads(params.model_dump_json()), sections),
    )


def record_provenance(data_dir: Path, name: str, params: Params, params_file: str) -> None:
    stage = producer(name)
    sections = (
        upstream_sections(stage)
        if stage
        else [k for k in Params.model_fields if k not in NOT_STAGE_INPUTS]
    )
    if stage and stage >= "02" and params.analysis.sequential is not None:
        # the questions stage 02 keeps were chosen by the sequential driver's judges and looks
        sections = [*sections, *(s for s in SEQUENTIAL_SECTIONS if s not in sections)]
    entry = {
        "stage": stage,
        "params_file": params_file,
        "params": comparable_values(json.loads(params.model_dump_json()), sections),
    }
    # notebooks run alone in parallel into one run folder each add their entries: locked update
    update_json(data_dir / PROVENANCE, lambda prov: {**prov, name: entry})


def check_provenance(
    data_dir: Path, name: str, params: Params, params_file: str, run_label: str
) -> None:
    """Raise `ParamsMismatchError` when `data/<name>` was produced under other params."""
    entry = read_provenance(data_dir).get(name)
    if not entry:
        return
    differing = params_differ(entry, params)
    if differing:
        stage = entry.get("stage") or "an earlier stage"
        raise ParamsMismatchError(
            f"{run_label}: data/{name}.parquet was produced by {stage} with params "
            f"{entry.get('params_file')!r} that differ from {params_file!r} in: "
            f"{', '.join(differing)}. Not mixing them: re-run {stage} with these params (`cube run "
            f"{params_file} --only {stage[:2]}..` or --force), or give this params file its own "
            "`run:` name."
        )


def check_run_folder(data_dir: Path, params: Params, params_file: str, run_label: str) -> None:
    """Before `cube run`: refuse a run folder whose data another params file produced with other
    values (a copied params file that kept the `run:` name), naming every differing key; the same
    params file, edited, simply re-runs the stages its edit touches."""
    problems = []
    for name, entry in sorted(read_provenance(data_dir).items()):
        other = entry.get("params_file")
        if other == params_file:
            continue
        differing = params_differ(entry, params)
        if differing:
            problems.append(f"data/{name}.parquet (from {other!r}): {', '.join(differing)}")
    if problems:
        raise ParamsMismatchError(
            f"{run_label}: this run folder holds data produced by another params file with other "
            f"values; {params_file!r} differs in: "
            + "; ".join(problems)
            + ". Not replacing them silently: give "
            f"{params_file!r} its own `run:` name, or pass --force to re-run every stage with it "
            "in this folder."
        )
