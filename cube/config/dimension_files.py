"""Dimension files: one YAML file per judge dimension, read as plain data.

A dimension is the file `cube/judges/dimensions/<name>.yaml` (package data) or a user's file
named by a params entry `{name: x, path: my/x.yaml}` (or `path: my/dims/`, a folder holding
`x.yaml`). A file holds (schema and worked example: docs/how-to/add-a-dimension.md):

    name: relevance                # required; the scores table's `dimension` value
    paper: 1                       # optional: its position among the paper's four dimensions
    rubric: relevance              # optional: the rubric judge's rule (registered by name)
    description: {en: ..., zh: ...}     # required, one line per prompt language
    criteria: [accurate_quote, ...]     # required: ids of the five criteria, in order
    advice: {en: ...}              # optional: the decision page's advice when it is weak
    score_format: "Verdict: {score}"    # optional: the reply format (see cube.judges.parsing)
    prompt: {en: |, zh: |}         # required: the templates, with {question} {document} {answer}

The criteria's wording is the prompt's own lines `(1) ...` to `(5) ...` (`parse_criteria`): the
file's `criteria` names them, so the wording has one source, the template.

This module is plain data for every layer: `cube.config.sections.PAPER_DIMENSIONS` (the files
with `paper:`, in that order), the decision page's advice (`dimension_advice`) and the judges'
`Dimension` objects (`cube.judges.dimensions`) all come from here. Reading the package data
folder is not an import of `cube.judges`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from cube.config.yaml_load import load_yaml

LANGS = ("zh", "en")
N_CRITERIA = 5
REQUIRED_KEYS = ("name", "description", "criteria", "prompt")
OPTIONAL_KEYS = ("paper", "rubric", "advice", "score_format")
PACKAGED_FOLDER = "cube/judges/dimensions"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class DimensionFileError(ValueError):
    """A dimension file that cannot be used: the message names the file and every bad key."""


@dataclass(frozen=True)
class DimensionSpec:
    """One dimension file's content (see the module docstring for the keys).

    Attributes:
        name: The dimension's name.
        source: The file it was read from, as shown in messages.
        description: One line per language.
        prompt: The prompt template per language (text as in the file, byte for byte).
        criteria: Ids of the criteria the templates list as `(1)` to `(5)`, in order.
        advice: The decision page's advice per language (may be empty).
        paper: Position among the paper's four dimensions, or None.
        rubric: Name of the rubric judge's rule, or None.
        score_format: The reply format, or None.
    """

    name: str
    source: str
    description: dict[str, str] = field(default_factory=dict)
    prompt: dict[str, str] = field(default_factory=dict)
    criteria: tuple[str, ...] = ()
    advice: dict[str, str] = field(default_factory=dict)
    paper: int | None = None
    rubric: str | None = None
    score_format: str | None = None


def parse_criteria(template: str) -> list[str]:
    """The criteria a template lists as lines `(1) ...` to `(n) ...` (ASCII or full-width
    brackets)."""
    found: list[tuple[int, str]] = []
    for line in template.splitlines():
        m = re.match(r"^\s*[(（](\d)[)）]\s*(.+?)\s*$", line)
        if m:
            found.append((int(m.group(1)), m.group(2)))
    # Only a clean 1..n run counts: numbered lines elsewhere in a custom prompt are not criteria.
    if [n for n, _ in found] != list(range(1, len(found) + 1)):
        return []
    return [text for _, text in found]


# --------------------------------------------------------------------------- checks
def _lang_texts(data: dict[str, Any], key: str, problems: list[str]) -> dict[str, str]:
    """A `{zh: ..., en: ...}` mapping of non-empty texts; problems named `key.lang`."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not value:
        problems.append(f"key '{key}': expected a mapping of languages {list(LANGS)} to texts")
        return {}
    out: dict[str, str] = {}
    for lang, text in value.items():
        if lang not in LANGS:
            problems.append(f"key '{key}.{lang}': unknown language; expected one of {list(LANGS)}")
        elif not isinstance(text, str) or not text.strip():
            problems.append(f"key '{key}.{lang}': expected a non-empty text")
        else:
            out[lang] = text
    return out


def _check_keys(data: dict[str, Any], problems: list[str]) -> None:
    known = (*REQUIRED_KEYS, *OPTIONAL_KEYS)
    for key in data:
        if key not in known:
            problems.append(f"key '{key}': unknown; expected one of {list(known)}")
    for key in REQUIRED_KEYS:
        if key not in data:
            problems.append(f"key '{key}': missing (required)")


def _check_name(data: dict[str, Any], problems: list[str]) -> str:
    name = data.get("name")
    if name is None:
        return ""
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(
            f"key 'name': {name!r} is not a name (letters, digits, '_' and '-', "
            "starting with a letter)"
        )
        return ""
    return name


def _check_criteria(data: dict[str, Any], problems: list[str]) -> tuple[str, ...]:
    crit = data.get("criteria")
    if crit is None:
        return ()
    ok = isinstance(crit, list) and all(isinstance(c, str) and _NAME.match(c) for c in crit)
    if not ok or len(crit) != N_CRITERIA or len(set(crit)) != len(crit):
        problems.append(
            f"key 'criteria': expected {N_CRITERIA} distinct ids (e.g. accurate_quote), "
            f"got {crit!r}"
        )
        return ()
    return tuple(crit)


def _check_prompts(
    prompts: dict[str, str], descriptions: dict[str, str] | None, n: int, problems: list[str]
) -> None:
    """Each template: its {answer} placeholder, its criteria lines, its description."""
    for lang, template in prompts.items():
        if "{answer}" not in template:
            problems.append(f"key 'prompt.{lang}': the template has no {{answer}} placeholder")
        listed = len(parse_criteria(template))
        if n and listed != n:
            problems.append(
                f"key 'prompt.{lang}': the template lists {listed} criteria as lines "
                f"'(1) ...' to '({n}) ...'; `criteria` names {n}"
            )
        if descriptions is not None and lang not in descriptions:
            problems.append(f"key 'description.{lang}': missing (the file has prompt.{lang})")


def _bad_position(paper: Any) -> bool:
    """Whether a `paper` value is no position 1, 2, ... (None, no key, is fine)."""
    return paper is not None and (
        not isinstance(paper, int) or isinstance(paper, bool) or paper < 1
    )


def _bad_text(value: Any) -> bool:
    """Whether a value is no text (None, no key, is fine)."""
    return value is not None and (not isinstance(value, str) or not value.strip())


def _check_optional(data: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    paper = data.get("paper")
    if _bad_position(paper):
        problems.append(f"key 'paper': expected a position 1, 2, ... (or no key), got {paper!r}")
    else:
        out["paper"] = paper
    for key in ("rubric", "score_format"):
        value = data.get(key)
        if _bad_text(value):
            problems.append(f"key '{key}': expected a text, got {value!r}")
        else:
            out[key] = value
    fmt = out.get("score_format")
    if fmt is not None and fmt.count("{score}") != 1:
        problems.append("key 'score_format': expected exactly one {score}")
    return out


def dimension_spec(data: Any, source: str) -> DimensionSpec:
    """The dimension a file's parsed YAML describes.

    Raises:
        DimensionFileError: naming `source` and every bad or missing key at once.
    """
    if not isinstance(data, dict):
        raise DimensionFileError(
            f"dimension file {source}: expected a mapping of keys "
            f"{list(REQUIRED_KEYS)} (and optionally {list(OPTIONAL_KEYS)}), "
            f"got {type(data).__name__}"
        )
    problems: list[str] = []
    _check_keys(data, problems)
    name = _check_name(data, problems)
    descriptions = _lang_texts(data, "description", problems)
    prompts = _lang_texts(data, "prompt", problems)
    criteria = _check_criteria(data, problems)
    given = descriptions if "description" in data else None  # else reported missing already
    _check_prompts(prompts, given, len(criteria), problems)
    advice = _lang_texts(data, "advice", problems)
    optional = _check_optional(data, problems)
    if problems:
        raise DimensionFileError(
            f"dimension file {source}: {len(problems)} problem(s):\n"
            + "\n".join(f"  - {p}" for p in problems)
        )
    return DimensionSpec(name, source, descriptions, prompts, criteria, advice, **optional)


def read_dimension_file(path: Path | Traversable, source: str | None = None) -> DimensionSpec:
    """Read and check one dimension file (`source`: how messages name it, default its path).

    Raises:
        DimensionFileError: the file is missing, is not YAML, or has bad keys (all named).
    """
    source = source or str(path)
    if not path.is_file():
        raise DimensionFileError(f"dimension file {source}: not found")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise DimensionFileError(f"dimension file {source}: not valid YAML: {err}") from None
    return dimension_spec(data, source)


def user_dimension(name: str, path_text: str, base_dir: Path = Path(".")) -> DimensionSpec:
    """The dimension `name` of a params entry `{name: ..., path: ...}`: `path` is its YAML file
    or a folder holding `<name>.yaml` (relative to `base_dir`).

    Raises:
        DimensionFileError: naming the file and key: not found, bad keys, or a `name` in the
            file other than the entry's.
    """
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if path.is_dir():
        path = path / f"{name}.yaml"
    spec = read_dimension_file(path)
    if spec.name != name:
        raise DimensionFileError(
            f"dimension file {path}: key 'name': {spec.name!r}, but the params entry "
            f"(dimensions[].path) is dimension {name!r}"
        )
    return spec


# --------------------------------------------------------------------------- packaged files
@lru_cache(maxsize=1)
def packaged_dimensions() -> dict[str, DimensionSpec]:
    """The packaged dimension files by name: the paper's (in their `paper` order), then the
    others by name.

    Raises:
        DimensionFileError: a packaged file is bad, named other than its file, or two files
            claim one paper position.
    """
    # One string naming the folder: a stage's fingerprint (cube.run.stages) then hashes these
    # files, not the whole of cube/judges.
    folder = resources.files("cube").joinpath("judges/dimensions")
    specs: list[DimensionSpec] = []
    for res in sorted(folder.iterdir(), key=lambda r: r.name):
        if res.name.endswith(".yaml"):
            source = f"{PACKAGED_FOLDER}/{res.name}"
            spec = read_dimension_file(res, source)
            if spec.name != res.name[: -len(".yaml")]:
                raise DimensionFileError(f"dimension file {source}: key 'name': {spec.name!r}")
            specs.append(spec)
    positions = [s.paper for s in specs if s.paper is not None]
    if sorted(positions) != list(range(1, len(positions) + 1)):
        raise DimensionFileError(
            f"dimension files {PACKAGED_FOLDER}/*.yaml: key 'paper': positions {positions}, "
            "expected 1, 2, ... once each"
        )
    specs.sort(key=lambda s: (s.paper is None, s.paper or 0, s.name))
    return {s.name: s for s in specs}


def paper_dimensions() -> tuple[str, ...]:
    """The paper's dimensions, in order: the packaged files with a `paper:` position."""
    return tuple(n for n, s in packaged_dimensions().items() if s.paper is not None)


def dimension_advice(name: str, lang: str = "en") -> str | None:
    """A packaged dimension's advice for the decision page, or None when it has none."""
    spec = packaged_dimensions().get(name)
    return spec.advice.get(lang) if spec is not None else None
