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
    if overrides is None or overrides == "" or overrides == [] or overrides == {}:
        return []
    if isinstance(overrides, str):
        text = overrides.strip()
        try:
            loaded = load_yaml(text)
        except yaml.YAMLError:
            loaded = text
        if isinstance(loaded, str) or (
            isinstance(loaded, dict) and "=" in text and not text.startswith("{")
        ):
            loaded = [text]  # one `key=value` string
        overrides = loaded
    if isinstance(overrides, dict):
        return list(_flatten(overrides))
    if isinstance(overrides, list | tuple) and all(
        isinstance(i, tuple) and len(i) == 2 for i in overrides
    ):
        return list(overrides)  # already parsed
    if isinstance(overrides, list | tuple):
        out, bad = [], []
        for item in overrides:
            if isinstance(item, str) and "=" in item:
                key, _, raw = item.partition("=")
                out.append(
                    (key.strip(), load_yaml(raw) if raw.strip() else "")
                ) if key.strip() else bad.append(item)
            elif isinstance(item, dict):
                out.extend(_flatten(item))
            else:
                bad.append(item)
        if bad:
            raise ParamsError(
                f"overrides: cannot read {bad!r}; expected strings like 'corpus.seed=3'"
            )
        return out
    raise ParamsError(
        f"overrides: expected a mapping or a list of 'key.path=value' strings, got "
        f"{type(overrides).__name__}"
    )


def _flatten(mapping: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in mapping.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.extend(_flatten(v, key) if isinstance(v, dict) and v else [(key, v)])
    return out


def apply_overrides(data: dict[str, Any], overrides: Any) -> dict[str, Any]:
    """A copy of the raw params mapping with the overrides set (every bad path reported at once)."""
    out = copy.deepcopy(data)
    problems = []
    for key, value in parse_overrides(overrides):
        steps: list[str | int] = [
            m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _STEP.finditer(key)
        ]
        if not steps or re.sub(r"[.\[\]]", "", key) != "".join(str(s) for s in steps):
            problems.append(f"{key}: not a key path (use e.g. corpus.seed or judges[0].name)")
            continue
        node: Any = out
        try:
            for step, nxt in zip(steps, steps[1:], strict=False):
                if isinstance(step, str) and not isinstance(node.get(step), dict | list):
                    node[step] = [] if isinstance(nxt, int) else {}
                node = node[step]
            node[steps[-1]] = value
        except (IndexError, KeyError, TypeError, AttributeError):
            problems.append(
                f"{key}: no such element in the params file (a list index out of range or a "
                "value that is not a mapping)"
            )
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
