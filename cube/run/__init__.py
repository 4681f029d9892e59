"""Running: the stages and their fingerprints, the run folder's lock and staging, the warm
kernel, papermill execution, sweeps, validation of inputs, comparison folders, batch judging.

Public face (`__all__`): `open_run` (what a notebook needs: `from cube.run import open_run`, served
from `notebook` on first use) and the modules `pipeline` (one function per stage), `audit` (the
judge audit of stage 03 and its report), `ablation` (the screen beside the audit, notebook 11),
`decide` (the decision of stage 06 and the run's call usage), `human` (human ratings, notebook 07),
`evaluate` (the run's evaluation, computed once, and the primary system), `diagnosis` (notebook 10's
diagnostics from the run folder), `notebook`, `stages` (what each stage reads), `state` (lock,
staging, interrupts), `kernel`, `execute` (`execute_run`: the notebook sequence and the report),
`plan` (what a run will send), `sequential` (the driver of `analysis.sequential`, run by stage 02),
`outcome` (the result `cube run` prints), `release` (the gate against a baseline run),
`reconcile` (its line of the plan's and the run's calls), `record` (results.json as one typed
record), `scaffold` (`cube init`), `question_file` (`cube questions`), `ran_alone`, `sweep`,
`validate`, `compare`, `simulate` (the simulation study), `batch` and `batch_cli` (`cube batch`).
A notebook imports the modules it calls by name (`from cube.run import decide, evaluate`); no
module re-exports another's names for it. The top of the package below
`cube.cli`.

`open_run` is re-exported lazily (PEP 562 `__getattr__`): importing this package imports none of
its modules, so `cube --help` and each subcommand load only what they use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cube.run.notebook import open_run

__all__ = [
    "ablation",
    "audit",
    "batch",
    "batch_cli",
    "compare",
    "decide",
    "diagnosis",
    "evaluate",
    "execute",
    "human",
    "kernel",
    "notebook",
    "open_run",
    "outcome",
    "pipeline",
    "plan",
    "question_file",
    "ran_alone",
    "reconcile",
    "record",
    "release",
    "scaffold",
    "sequential",
    "simulate",
    "stages",
    "state",
    "sweep",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name == "open_run":
        from cube.run.notebook import open_run

        return open_run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
