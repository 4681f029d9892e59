"""Running: the stages and their fingerprints, the run folder's lock and staging, the warm
kernel, papermill execution, sweeps, validation of inputs, comparison folders, batch judging.

Modules: `pipeline` (one function per stage), `evaluate` (the run's evaluation, computed once),
`diagnosis` (notebook 10's diagnostics from the run folder), `notebook` (`open_run`: what a notebook
needs), `stages` (what each stage reads), `state` (lock, staging, interrupts), `kernel`, `execute`
(`execute_run`: the notebook sequence and the report), `ran_alone`, `sweep`, `validate`, `compare`,
`batch` and `batch_cli` (`cube batch`). The top of the package below `cube.cli`.
"""
