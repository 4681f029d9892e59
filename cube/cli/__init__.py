"""The `cube` command: a thin layer over the package, one module per subcommand.

cube run PARAMS.yaml [--only 03..06] [--force]   execute the notebooks, publish the report
cube report PARAMS.yaml                          re-export HTML and index.html only
cube validate PARAMS.yaml [--print]              check a params file and every data file it names
cube init [PARAMS.yaml] [--system ...] [--judge ...]  write a params file for a first run
cube plan PARAMS.yaml [--pilot N] [--json]       what a run will send, before any call
cube questions PARAMS.yaml --out FILE            write the run's question set (to answer elsewhere)
cube example-kb PATH                             write the synthetic long-format example spreadsheet
cube annotate PARAMS.yaml [--out FILE]           export the human annotation sheet
cube sweep PARAMS.yaml --grid key=v1,v2 ...      one run per combination, plus an index linking them
cube params-reference                            print the params reference (Markdown)
cube batch export|import|submit|status|fetch     judge through a batch API (cube/llm/batch.py)
cube compare A B                                 paired comparison of two systems or runs
cube serve [--model PATH.gguf] [--port N]        a local OpenAI-compatible server (cube[local])
cube simulate [PARAMS.yaml] [--replicates R]     the simulation study: coverage, p-values, power
cube docs-reference [FOLDER]                     write docs/reference/params.md and cli.md

The layout follows inspect_ai's `_cli/`: `cube/cli/<command>.py` (`example_kb.py` for
`example-kb`) holds one subcommand, its `add_parser(subparsers)` (arguments, help, and `func`) and
its `handle(args) -> int` (the exit code), with the helpers only it uses. `app.py` assembles the
parser from the modules listed in its `COMMANDS` and holds `main` (the paths typed, the project
root, the errors every command shares); `common.py` holds what several commands share (the params
file, the run's call cache, the preflight). Adding a subcommand: a module with those two functions
and one line in `app.COMMANDS`; `make reference` then regenerates docs/reference/cli.md.

The top layer of the package (import-linter: cli above run/, which it is thin over). A handler
imports the heavy modules it needs inside its body, so `cube --help` loads no pandas or pydantic
(tests/cli/test_startup.py, benchmarks/cli_startup.py).
"""

from __future__ import annotations

from cube.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
