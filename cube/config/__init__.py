"""Configuration, the lowest layer: what a run is told and where its files live.

Modules: `params` (the params schema, loading and validation), `model_spec` (one model endpoint),
`overrides` (changes applied before validation), `reference` (the params reference generated from
the schema), `runpaths` (every path of one run), `project` (the project root and the notebooks
folder), `schema` (the long tables every stage exchanges and the knowledge-base field keys),
`phrasing` (field values as a reader says them), `jsonfile` (locked JSON records), `sheets` (CSV and
XLSX cells that are never formulas), `secret_scan` (secret-looking entries of params' mappings).

The names most callers need are re-exported here: `from cube.config import Params, load_params`.
Modules of this package import each other by their own paths, never this face, and nothing above.
"""

from cube.config.model_spec import (
    LOCAL_MAX_CONCURRENCY,
    REMOTE_MAX_CONCURRENCY,
    ModelSpec,
    env_name_problem,
    local_url,
    redact_url,
    url_credential_problem,
)
from cube.config.params import (
    Params,
    ParamsError,
    load_params,
    params_to_yaml,
    parse_params,
    read_params_yaml,
)
from cube.config.runpaths import RunPaths, record_results, write_resolved_params
from cube.config.schema import SETS
from cube.config.sections import (
    PAPER_DIMENSIONS,
    AnalysisParams,
    BuiltinSystem,
    CorpusParams,
    DiagnosticsParams,
    DimensionParams,
    HttpSystem,
    HumanParams,
    ImportedSystem,
    JudgeParams,
    LexicalParams,
    PythonSystem,
    QuestionParams,
    RagflowSystem,
)

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
    "record_results",
    "write_resolved_params",
]
