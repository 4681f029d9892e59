"""Run parameters: the params schema, loading from YAML, and the run-directory layout.

A params file is YAML validated by pydantic models that forbid unknown keys, so a typo
(`trim_proportoin`) is an error naming the key and the file instead of a silently ignored
setting. Loaded params are frozen. API keys are never params: a model names the environment
variable that holds its key (`api_key_env`), and only `cube.llm` reads it, at call time.

The run layout (every path of a run; `cube.config.runpaths` owns it; the package face `cube.config`
re-exports it with these params and the model spec of `cube.config.model_spec`):

    outputs/<run>/params.yaml   the resolved params actually used (no secrets)
    outputs/<run>/data/         corpus, questions, answers, scores (parquet, long format)
    outputs/<run>/tables/       every table shown, as CSV
    outputs/<run>/figures/      every figure shown, as PNG
    outputs/<run>/notebooks/    executed notebooks
    outputs/<run>/report/       HTML pages and index.html (last_run.html: how the last
                                attempt ended)
    outputs/<run>/.staging/     where `cube run` executes stages before publishing them
                                (cube.run.state)
    outputs/<run>/.lock         held by the `cube run` working on the folder
    outputs/cache.sqlite        LLM call cache shared by all runs
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    WrapSerializer,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from cube.config.model_spec import (
    SECRET_FIELDS,
    ModelRef,
    ModelSpec,
    StrictModel,
)
from cube.config.project import paths_from_file
from cube.config.sections import (
    LEXICAL_INCOMPATIBLE,
    PAPER_DIMENSIONS,
    AnalysisParams,
    AuditParams,
    BaselineParams,
    BuiltinSystem,
    CorpusParams,
    DiagnosticsParams,
    DimensionParams,
    HumanParams,
    JudgeParams,
    LexicalParams,
    QuestionParams,
    SimulationParams,
    StagesParams,
    SystemParams,
    expand_sweeps,
)
from cube.config.system_kinds import checked_entry, dumped_entry, import_kind_modules
from cube.config.yaml_load import load_yaml

# a `systems:` entry: a package kind by the union, a user's kind by its registered model
SystemEntry = Annotated[SystemParams, WrapValidator(checked_entry), WrapSerializer(dumped_entry)]


def answerer_missing(name: str, kind: str) -> str:
    """The error for a system other than `builtin` whose answering model is not named: why the
    bounds need it, and the ways to name it."""
    also = (
        ", or give `bounds`: a function of yours answering with the documents it is handed "
        "(docs/how-to/python-system.md)"
        if kind == "python"
        else ""
    )
    return (
        f"systems[{name}] ({kind}): set `answerer` (on the system, or at the top level) to the "
        "model this system answers with: CuBE places the system's score between the zero set (the "
        "question answered with no document) and the full set (with the gold document), both "
        "written by that model, so a different model would move 0 and 100 and the score with them "
        f"(docs/explanation/method.md){also}"
    )


class ParamsError(ValueError):
    """A params file that cannot be used: the message names the file and the key."""


# The longest run name: it is a folder name (outputs/<run>/), and a run's folders and files add to
# it (sweeps: <run>-<system>...; locks, temporary copies); file systems refuse names over 255 bytes.
RUN_NAME_MAX = 100


class Params(StrictModel):
    run: str = Field(
        description=f"Run name: outputs go to outputs/<run>/. At most {RUN_NAME_MAX} characters "
        "(letters, digits, '_', '-', '.'; a folder name, with room for what is added to it)."
    )
    lang: Literal["zh", "en"] = Field(
        "zh", description="Language of the corpus, prompts and answers."
    )
    title: str = Field("CuBE evaluation", description="Title of the report.")
    outputs_dir: str = Field(
        "outputs",
        description="Folder holding run directories and the LLM cache. Not set: outputs/ in the "
        "project root for a params file inside the project, else outputs/ beside the params file.",
    )
    cache_path: str | None = Field(None, description="Default: <outputs_dir>/cache.sqlite.")
    models: dict[str, ModelSpec] = Field(
        default_factory=dict, description="Named models referenced elsewhere."
    )
    corpus: CorpusParams = Field(
        default_factory=CorpusParams, description="The knowledge base (see `corpus`)."
    )
    questions: QuestionParams = Field(
        default_factory=QuestionParams, description="The question set (see `questions`)."
    )
    answerer: ModelRef = Field(
        default_factory=lambda: ModelSpec(provider="offline", model="extractive"),
        description="Model writing the answers (rag of builtin systems, and the zero/full "
        "bound sets).",
    )
    system_kinds: list[str] = Field(
        default_factory=list,
        description="Modules defining system kinds of your own (`package.module`, importable from "
        "the project root), imported before `systems` is read; an installed package's kinds come "
        "through the entry point group `cube.system_kinds` without this key "
        "(docs/how-to/system-kind.md).",
    )
    systems: list[SystemEntry] = Field(
        default_factory=lambda: [BuiltinSystem(name="bm25-top8")],
        description="Systems under test (one or more).",
    )
    dimensions: list[str | DimensionParams] = Field(
        default_factory=lambda: list(PAPER_DIMENSIONS),
        description="Scoring dimensions: names or full definitions.",
    )
    judges: list[JudgeParams] = Field(min_length=1, description="The jury: one or more judges.")
    analysis: AnalysisParams = Field(
        default_factory=AnalysisParams, description="CuBE computation settings."
    )
    human: HumanParams = Field(
        default_factory=HumanParams, description="Human ratings (paper 5.6)."
    )
    lexical: LexicalParams = Field(
        default_factory=LexicalParams, description="BLEU/ROUGE settings (paper 5.7)."
    )
    diagnostics: DiagnosticsParams = Field(
        default_factory=DiagnosticsParams,
        description="Failure patterns of low-scoring answers (notebook 10).",
    )
    audit: AuditParams = Field(
        default_factory=AuditParams,
        description="The judge audit by counterfactual probes (notebook 11).",
    )
    simulation: SimulationParams = Field(
        default_factory=SimulationParams,
        description="The simulation study (notebook 12, `cube simulate`).",
    )
    stages: StagesParams = Field(
        default_factory=StagesParams,
        description="Optional stages (00_paper_tables, 12_validation): on, off or auto.",
    )
    baseline: BaselineParams | None = Field(
        None,
        description="The previous version's run to compare with and the release decision "
        "(see `baseline`; docs/explanation/release-gate.md).",
    )

    @field_validator("system_kinds")
    @classmethod
    def _import_kinds(cls, v: list[str]) -> list[str]:
        import_kind_modules(v)  # before `systems` (the next field): its kinds are then known
        return v

    @field_validator("run")
    @classmethod
    def _run_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", v):
            raise ValueError("run must be a simple name (letters, digits, '_', '-', '.')")
        if len(v) > RUN_NAME_MAX:
            raise ValueError(
                f"run is {len(v)} characters long; at most {RUN_NAME_MAX} (it names the run's "
                "folder, and file systems refuse a name over 255 bytes)"
            )
        return v

    @field_validator("systems")
    @classmethod
    def _expand_sweeps(cls, v: list[Any]) -> list[Any]:
        return expand_sweeps(v)

    @model_validator(mode="after")
    def _references(self) -> Params:
        self._check_systems()
        self.question_source()
        self._check_judges()
        self._check_model_names()
        if (self.lang, self.lexical.tokenizer) in LEXICAL_INCOMPATIBLE:
            raise ValueError(
                f"lexical.tokenizer: {self.lexical.tokenizer!r} cannot be used with lang: "
                f"{self.lang!r}: {LEXICAL_INCOMPATIBLE[self.lang, self.lexical.tokenizer]}"
            )
        return self

    def _check_systems(self) -> None:
        """System names unique; each system's answerer known (a builtin's may be the default)."""
        names = [s.name for s in self.systems]
        if len(set(names)) != len(names):
            raise ValueError(f"systems: duplicate system names {names}")
        for s in self.systems:
            if s.kind != "builtin" and not self._answerer_known(s):
                raise ValueError(answerer_missing(s.name, s.kind))

    def _check_judges(self) -> None:
        """Judge names unique, and no two judges making exactly the same calls."""
        jnames = [j.name for j in self.judges]
        if len(set(jnames)) != len(jnames):
            raise ValueError(f"judges: duplicate judge names {jnames}")
        twins = self._twin_judges()
        if twins:
            raise ValueError(
                "judges: "
                + "; ".join(f"{a!r} and {b!r}" for a, b in twins)
                + " would make exactly the same calls (same model spec, sampling settings, samples "
                "and all_dimensions), so they share every cached reply and their scores would be "
                "identical: one judge counted twice. Remove one, or make their calls differ (e.g. "
                "another seed or temperature; an offline rubric: another preset)"
            )

    def _check_model_names(self) -> None:
        """Every model named by a string is an entry of `models:`."""
        refs = [
            ("answerer", self.answerer),
            ("questions.model", self.questions.model),
            ("diagnostics.refusal_model", self.diagnostics.refusal_model),
            *((f"systems[{s.name}].answerer", s.answerer) for s in self.systems),
            *((f"judges[{j.name}].model", j.model) for j in self.judges),
        ]
        for where, ref in refs:
            if isinstance(ref, str) and ref not in self.models:
                raise ValueError(
                    f"{where}: model '{ref}' is not defined under `models:` ({sorted(self.models)})"
                )

    def question_source(self) -> Any:
        """The `kind: imported` system whose file holds the questions (`questions.generator:
        imported`), or None for another generator.

        Raises:
            ValueError: no imported system, an unknown `questions.system`, or several imported
                systems and none named.
        """
        if self.questions.generator != "imported":
            return None
        imported = {s.name: s for s in self.systems if s.kind == "imported"}
        wanted = self.questions.system
        if wanted is not None and wanted not in imported:
            raise ValueError(
                f"questions.system: {wanted!r} is not a `kind: imported` system "
                f"(imported systems: {sorted(imported)})"
            )
        if wanted is None and len(imported) != 1:
            raise ValueError(
                "questions.generator 'imported' reads the questions of a `kind: imported` "
                "system's file: "
                + (
                    "add one under `systems:`"
                    if not imported
                    else f"name the one holding them in questions.system ({sorted(imported)})"
                )
            )
        return imported[wanted] if wanted is not None else next(iter(imported.values()))

    def _twin_judges(self) -> list[tuple[str, str]]:
        """Pairs of judges whose calls are identical (`cube.llm.cache.key_payload`'s fields, or an
        offline algorithm's name and options), with the same samples and all_dimensions."""
        seen: dict[str, str] = {}
        twins = []
        for j in self.judges:
            if isinstance(j.model, str) and j.model not in self.models:
                continue  # reported as an undefined reference
            spec = self.model(j.model)
            if spec.provider == "offline":
                ident: list[Any] = ["offline", spec.model, spec.options]
            else:
                ident = [
                    spec.model,
                    sorted(u.rstrip("/") for u in spec.endpoints()),
                    spec.temperature,
                    spec.top_p,
                    spec.seed,
                    spec.max_tokens,
                    spec.extra_body,
                ]
            key = json.dumps([ident, j.samples, j.all_dimensions], sort_keys=True, default=str)
            if key in seen:
                twins.append((seen[key], j.name))
            else:
                seen[key] = j.name
        return twins

    # -- resolution helpers ------------------------------------------------------------
    def model(self, ref: ModelRef) -> ModelSpec:
        """The spec behind a model reference (a name in `models:` or an inline spec)."""
        return self.models[ref] if isinstance(ref, str) else ref

    def model_name(self, ref: ModelRef) -> str:
        return ref if isinstance(ref, str) else ref.model

    def dimension_list(self) -> list[DimensionParams]:
        return [DimensionParams(name=d) if isinstance(d, str) else d for d in self.dimensions]

    def dimension_names(self) -> list[str]:
        return [d.name for d in self.dimension_list()]

    def _answerer_known(self, system: Any) -> bool:
        """Whether the model writing a system's bound sets is named: on the system, at the top
        level, or replaced by a python system's `bounds` function."""
        return (
            system.answerer is not None
            or "answerer" in self.model_fields_set
            or getattr(system, "bounds", None) is not None
        )

    def system_answerer(self, system: Any) -> ModelRef:
        """The model writing a system's bound sets (and a builtin system's answers). A python
        system's `bounds` function stands in as an offline spec named `bounds:<function>` (with
        `@<version>` when set), never built as a model (`cube.systems.build_answers` calls the
        function)."""
        if getattr(system, "bounds", None) is not None:
            version = f"@{system.version}" if system.version else ""
            return ModelSpec(provider="offline", model=f"bounds:{system.bounds}{version}")
        return system.answerer if system.answerer is not None else self.answerer


# --------------------------------------------------------------------------- loading
def _schema_keys(model: Any = None, seen: set[Any] | None = None) -> set[str]:
    """Every key the params schema knows (of every section and nested model), for "did you mean"."""
    import typing

    from pydantic import BaseModel

    model, seen = model or Params, seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    keys: set[str] = set()
    for name, f in model.model_fields.items():
        keys.add(name)
        todo = [f.annotation]
        while todo:
            t = todo.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                keys |= _schema_keys(t, seen)
            todo += list(typing.get_args(t))
    return keys


def _did_you_mean(key: str) -> str:
    import difflib

    known = sorted(_schema_keys())
    folded = {k.casefold(): k for k in known}
    if key.casefold() in folded:
        return f"; did you mean '{folded[key.casefold()]}'?"
    close = difflib.get_close_matches(key, known, n=2, cutoff=0.75)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _indexes(node: Any, p: Any) -> bool:
    """Whether a step of an error's location is an index of this YAML list."""
    return isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node)


def _item_label(item: Any, index: int) -> str:
    """A list item in a key path: `[its name]`, else `[its index]`."""
    name = item.get("name") if isinstance(item, dict) else None
    return f"[{name}]" if isinstance(name, str) and name else f"[{index}]"


def _user_key(loc: tuple[Any, ...], data: Any) -> str | None:
    """The key path as the user wrote it ("systems[bm25-top8].top_N"): the keys and list items of
    the YAML, without the schema's own steps (a system's `kind` tag such as `builtin`, a union
    member such as `ModelSpec`); None for an error about a union member that does not apply (a
    mapping is no `str`)."""
    parts: list[str] = []
    node = data
    for i, p in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and p in node:
            parts.append(str(p))
            node = node[p]
        elif _indexes(node, p):
            node = node[p]
            parts[-1:] = ["".join(parts[-1:]) + _item_label(node, p)]  # "" at the top level
        elif last and p not in ("str",):
            parts.append(str(p))
        elif p == "str" and isinstance(node, dict):
            return None
    return ".".join(parts) or "(top level)"


def _format_validation_error(err: ValidationError, source: str, data: Any = None) -> str:
    lines: list[str] = []
    for e in err.errors():
        key = (
            _user_key(tuple(e["loc"]), data)
            if data is not None
            else ".".join(str(p) for p in e["loc"])
        )
        if key is None:
            continue
        line = _error_line(e, key or "(top level)")
        if line not in lines:
            lines.append(line)
    return "\n".join([f"{source}: invalid params ({len(lines)} problem(s))", *lines])


def _error_line(e: ErrorDetails, key: str) -> str:
    """One problem as the user reads it: an unknown key (with a close known one), a missing key,
    or pydantic's message with the value given (never a mapping, a list or a secret)."""
    if e["type"] == "extra_forbidden":
        return (
            f"  - {key}: unknown key{_did_you_mean(str(e['loc'][-1]))} (see the params "
            "reference, docs/reference/params.md, or `cube params-reference`)"
        )
    if e["type"] == "missing":
        return f"  - {key}: required key is missing"
    got = e.get("input")
    secret = any(str(p) in SECRET_FIELDS for p in e["loc"])
    shown = "" if isinstance(got, dict | list) or secret else f" (got {got!r})"
    return f"  - {key}: {e['msg']}{shown}"


def parse_params(data: dict[str, Any], source: str = "<params>") -> Params:
    """Validate a params mapping; errors name `source` and every offending key."""
    if not isinstance(data, dict):
        raise ParamsError(
            f"{source}: expected a YAML mapping at the top level, got {type(data).__name__}"
        )
    try:
        return Params.model_validate(data)
    except ValidationError as err:
        raise ParamsError(_format_validation_error(err, source, data)) from None


def read_params_yaml(path: str | Path) -> Any:
    """The YAML of a params file, unvalidated; `ParamsError` naming the file when it is missing
    or not YAML (`parse_params` checks its shape)."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        return load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None


def load_params(path: str | Path, overrides: dict[str, Any] | None = None) -> Params:
    """Load and validate a params YAML file. `overrides` are merged (deeply) before validation.
    Relative paths inside (the file's and the overrides') are read from the file's folder
    (`cube.config.project.paths_from_file`)."""
    data = read_params_yaml(path)
    if overrides:
        data = _deep_merge(data, overrides)
    return parse_params(paths_from_file(data, path), str(path))


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = (
            _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        )
    return out


def params_to_yaml(params: Params) -> str:
    """The resolved params as YAML (keys never appear: params hold only variable names)."""
    data = json.loads(params.model_dump_json())
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
