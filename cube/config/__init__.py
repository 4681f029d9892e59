"""Configuration, the lowest layer: what a run is told and where its files live.

Modules: `params` (the params schema, loading and validation), `model_spec` (one model endpoint),
`overrides` (changes applied before validation), `reference` (the params reference generated from
the schema), `runpaths` (every path of one run), `project` (the project root and the notebooks
folder), `schema` (the long tables every stage exchanges and the knowledge-base field keys),
`phrasing` (field values as a reader says them), `jsonfile` (locked JSON records), `sheets` (CSV and
XLSX cells that are never formulas), `secret_scan` (secret-looking entries of params' mappings),
`fence` (untrusted text in prompts: fenced blocks whose nonce it cannot write).

The names most callers need are re-exported here: `from cube.config import Params, load_params`.
Modules of this package import each other by their own paths, never this face, and nothing above.
The names are re-exported lazily (`__getattr__`): importing the package imports none of its
modules.
"""

from __future__ import annotations

import importlib
from typing import Any

# name re-exported -> the module defining it, imported on first use (`__getattr__`)
_LAZY = {
    name: module
    for module, names in {
        "cube.config.model_spec": (
            "LOCAL_MAX_CONCURRENCY",
            "REMOTE_MAX_CONCURRENCY",
            "ModelSpec",
            "env_name_problem",
            "local_url",
            "redact_url",
            "url_credential_problem",
        ),
        "cube.config.params": (
            "Params",
            "ParamsError",
            "load_params",
            "params_to_yaml",
            "parse_params",
            "read_params_yaml",
        ),
        "cube.config.runpaths": ("RunPaths", "write_resolved_params"),
        "cube.config.schema": ("SETS",),
        "cube.config.sections": (
            "PAPER_DIMENSIONS",
            "AnalysisParams",
            "BuiltinSystem",
            "CorpusParams",
            "DiagnosticsParams",
            "DimensionParams",
            "HttpSystem",
            "HumanParams",
            "ImportedSystem",
            "JudgeParams",
            "LexicalParams",
            "PythonSystem",
            "QuestionParams",
            "RagflowSystem",
        ),
    }.items()
    for name in names
}

__all__ = [
    "LOCAL_MAX_CONCURRENCY",
    "REMOTE_MAX_CONCURRENCY",
    "ModelSpec",
    "env_name_problem",
    "local_url",
    "redact_url",
    "url_credential_problem",
    "PAPER_DIMENSIONS",
    "SETS",
    "AnalysisParams",
    "BuiltinSystem",
    "CorpusParams",
    "DiagnosticsParams",
    "DimensionParams",
    "HttpSystem",
    "HumanParams",
    "ImportedSystem",
    "JudgeParams",
    "LexicalParams",
    "Params",
    "ParamsError",
    "PythonSystem",
    "QuestionParams",
    "RagflowSystem",
    "load_params",
    "params_to_yaml",
    "parse_params",
    "read_params_yaml",
    "RunPaths",
    "write_resolved_params",
]


def __getattr__(name: str) -> Any:
    """PEP 562: a re-exported name is imported from its module on first use, so importing one
    module of the package (`cube.config.project`, by `cube --help`) loads neither pandas nor
    pydantic."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
