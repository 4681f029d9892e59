"""Changes applied to a params file before validation: `overrides` of a notebook or a sweep.

Accepted forms (the papermill parameter `overrides`, `cube sweep --grid`):
- a mapping, merged deeply: `{"corpus": {"seed": 3}}` or with dotted keys `{"corpus.seed": 3}`;
- a list of `key.path=value` strings: `["corpus.seed=3", "analysis.trim_proportion=0.2",
  "judges[0].name=strict"]` (a value is read as YAML: 3 is a number, true a boolean, [a, b] a list);
- the same as a YAML/JSON string (what `papermill -p overrides '[...]'` passes).

The result is validated exactly like the file: an unknown or invalid key is a `ParamsError`
naming the file, the override and the key.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from cube.config.params import Params, ParamsError, parse_params, read_params_yaml
from cube.config.project import paths_from_file
from cube.config.yaml_load import load_yaml

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_overrides(overrides: Any) -> list[tuple[str, Any]]:
    """Normalise every accepted form to a list of (dotted key, value)."""
    if _empty(overrides):
        return []
    if isinstance(overrides, str):
        overrides = _read_text(overrides)
    if isinstance(overrides, dict):
        return list(_flatten(overrides))
    if not isinstance(overrides, list | tuple):
        raise ParamsError(
            f"overrides: expected a mapping or a list of 'key.path=value' strings, got "
            f"{type(overrides).__name__}"
        )
    if _already_parsed(overrides):
        return list(overrides)
    return _parse_items(overrides)


def _empty(overrides: Any) -> bool:
    """No overrides: None, or an empty string, list or mapping."""
    return overrides is None or overrides == "" or overrides == [] or overrides == {}


def _read_text(raw: str) -> Any:
    """The overrides given as text, read as YAML; one `key=value` string as a one-item list."""
    text = raw.strip()
    try:
        loaded = load_yaml(text)
    except yaml.YAMLError:
        loaded = text
    return [text] if _one_assignment(loaded, text) else loaded


def _one_assignment(loaded: Any, text: str) -> bool:
    """Whether the text is one `key=value` string: YAML read it as a string, or (`a=b: c`) as a
    mapping that was not written as one."""
    return isinstance(loaded, str) or (
        isinstance(loaded, dict) and "=" in text and not text.startswith("{")
    )


def _already_parsed(overrides: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every item is a (key, value) pair already."""
    return all(isinstance(i, tuple) and len(i) == 2 for i in overrides)


def _parse_items(items: list[Any] | tuple[Any, ...]) -> list[tuple[str, Any]]:
    """The (key, value) pairs of a list of `key=value` strings and mappings; every item that is
    neither is reported at once."""
    out, bad = [], []
    for item in items:
        pairs = _item_pairs(item)
        if pairs is None:
            bad.append(item)
        else:
            out.extend(pairs)
    if bad:
        raise ParamsError(f"overrides: cannot read {bad!r}; expected strings like 'corpus.seed=3'")
    return out


def _item_pairs(item: Any) -> list[tuple[str, Any]] | None:
    """One item's pairs: a mapping's (flattened), or a `key=value` string's (its value read as
    YAML, empty text when none); None for anything else, or a string without a key."""
    if isinstance(item, dict):
        return _flatten(item)
    if not (isinstance(item, str) and "=" in item):
        return None
    key, _, raw = item.partition("=")
    if not key.strip():
        return None
    return [(key.strip(), load_yaml(raw) if raw.strip() else "")]


def _flatten(mapping: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in mapping.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.extend(_flatten(v, key) if isinstance(v, dict) and v else [(key, v)])
    return out


def _key_steps(key: str) -> list[str | int] | None:
    """A dotted key path's steps (`judges[0].name` -> judges, 0, name); None when it is not one."""
    steps: list[str | int] = [
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _STEP.finditer(key)
    ]
    if not steps or re.sub(r"[.\[\]]", "", key) != "".join(str(s) for s in steps):
        return None
    return steps


def _set_path(node: Any, steps: list[str | int], value: Any) -> None:
    """Set `value` at `steps` below `node`, making the mappings and lists on the way that are
    missing (raises when a step cannot be taken: an index out of range, a value not a mapping)."""
    for step, nxt in zip(steps, steps[1:], strict=False):
        if isinstance(step, str) and not isinstance(node.get(step), dict | list):
            node[step] = [] if isinstance(nxt, int) else {}
        node = node[step]
    node[steps[-1]] = value


def _set_override(data: dict[str, Any], key: str, value: Any) -> str | None:
    """Set one override in `data`; the problem, if it could not be set."""
    steps = _key_steps(key)
    if steps is None:
        return f"{key}: not a key path (use e.g. corpus.seed or judges[0].name)"
    try:
        _set_path(data, steps, value)
    except (IndexError, KeyError, TypeError, AttributeError):
        return (
            f"{key}: no such element in the params file (a list index out of range or a "
            "value that is not a mapping)"
        )
    return None


def apply_overrides(data: dict[str, Any], overrides: Any) -> dict[str, Any]:
    """A copy of the raw params mapping with the overrides set (every bad path reported at once)."""
    out = copy.deepcopy(data)
    problems = []
    for key, value in parse_overrides(overrides):
        problem = _set_override(out, key, value)
        if problem:
            problems.append(problem)
    if problems:
        raise ParamsError("overrides: " + "; ".join(problems))
    return out


def load_params_with_overrides(path: str | Path, overrides: Any = None) -> Params:
    """Load a params file, apply `overrides`, validate the result like the file; relative paths
    (the file's and the overrides') are read from the file's folder."""
    path = Path(path)
    data = read_params_yaml(path)
    if not isinstance(data, dict):
        raise ParamsError(
            f"{path}: expected a YAML mapping at the top level, got {type(data).__name__}"
        )
    changes = parse_overrides(overrides)
    if not changes:
        return parse_params(paths_from_file(data, path), str(path))
    shown = ", ".join(f"{k}={v!r}" for k, v in changes)
    changed = paths_from_file(apply_overrides(data, changes), path)
    return parse_params(changed, f"{path} with overrides {shown}")
