"""What several subcommands share: loading the params file, the run's call cache and the
start-of-run preflight.

Kept small on purpose: a helper used by one command lives in that command's module.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from cube.config.project import resolve
from cube.config.runpaths import RunPaths

if TYPE_CHECKING:
    from pathlib import Path

    from cube.config.params import Params


def preflight(params: Params, *, endpoints: bool | None, timeout_s: float = 10.0) -> list[str]:
    """Print every preflight problem (missing key variables, failing LLM endpoints) to stderr
    and return them. `endpoints=None`: check endpoints when the params use LLM models."""
    from cube.llm.preflight import check_endpoints, check_keys, uses_llm

    problems = check_keys(params)
    if endpoints or (endpoints is None and uses_llm(params)):
        problems += check_endpoints(params, timeout_s=timeout_s)
    for line in problems:
        print(f"cube: preflight: {line}", file=sys.stderr)
    if problems:
        print(
            "cube: preflight failed; nothing was run (fix the above, or skip the check with "
            "--no-preflight)"
            if endpoints is None
            else "cube: preflight failed",
            file=sys.stderr,
        )
    return problems


def load_params(path: Path) -> Params:
    """The params file, loaded and checked; its module (pydantic, YAML) is imported on first use,
    so `cube --help` does not load it."""
    from cube.config.params import load_params as load

    return load(path)


def run_cache(params: Params) -> Path:
    """The call cache a run of `params` reads and writes: `cache_path` when the params set it,
    else the run folder's."""
    if params.cache_path:
        return resolve(params.cache_path)
    return RunPaths.for_params(params, resolve(params.outputs_dir)).cache
