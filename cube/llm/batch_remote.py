"""`cube batch submit/status/fetch`: drive an OpenAI-compatible Batch API with the `openai` client.

submit uploads a request file (`files.create(purpose="batch")`) and creates a batch on
`/v1/chat/completions` with a 24 h completion window, after checking that every line's `body.model`
is the `--model`'s model (export writes one file per model; a mixed file is refused, naming the
models); status prints the batch's state and request counts; fetch downloads the output file (and
the error file, whose lines `cube batch import` records as failures) into one results file for `cube
batch import`. The endpoint and the key come from the model named by `--model` (a name under
`models:`, or a judge's name) (`base_url`, `api_key_env`), as for live calls.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import openai

from cube.config.model_spec import ModelSpec
from cube.config.params import load_params
from cube.llm.batch import check_batch_file
from cube.llm.wire import NO_KEY


def model_spec(params_path: Path, model: str) -> ModelSpec:
    """The spec `--model` names: a model under `models:`, else a judge (whose model may be
    inline)."""
    params = load_params(params_path)
    if model in params.models:
        return params.models[model]
    judges = {j.name: j for j in params.judges}
    if model in judges:
        return params.model(judges[model].model)
    raise ValueError(
        f"--model {model!r}: neither a model under `models:` ({sorted(params.models)}) nor a judge "
        f"({sorted(judges)})"
    )


def client(params_path: Path, model: str) -> tuple[openai.OpenAI, ModelSpec]:
    spec = model_spec(params_path, model)
    if spec.provider != "openai":
        raise ValueError(f"--model {model!r}: an offline model has no batch API")
    key = NO_KEY
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env, "")
        if not key:
            raise ValueError(
                f"--model {model!r}: the environment variable {spec.api_key_env} (api_key_env) "
                "is not set"
            )
    # no redirect followed (`cube.llm.transport`'s rule): the key never goes to another origin;
    # no size limit here, a batch's results file is legitimately large
    http = openai.DefaultHttpxClient(follow_redirects=spec.follow_redirects)
    return openai.OpenAI(
        api_key=key,
        base_url=spec.endpoints()[0],
        timeout=spec.timeout_s,
        max_retries=2,
        http_client=http,
    ), spec


def submit(c: openai.OpenAI, path: Path) -> str:
    with path.open("rb") as f:
        uploaded = c.files.create(file=f, purpose="batch")
    created = c.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return created.id


def status(c: openai.OpenAI, batch_id: str) -> str:
    b = c.batches.retrieve(batch_id)
    counts = b.request_counts
    done = (
        f", {counts.completed}/{counts.total} completed, {counts.failed} failed" if counts else ""
    )
    return f"{b.id}: {b.status}{done}"


def fetch(c: openai.OpenAI, batch_id: str, out: Path) -> int:
    """Write the output and error lines to `out`; returns the number of lines. Refuses an unfinished
    batch."""
    b = c.batches.retrieve(batch_id)
    if b.status != "completed":
        raise ValueError(f"batch {batch_id} is {b.status!r}, not completed: nothing to fetch yet")
    text = ""
    for file_id in (b.output_file_id, b.error_file_id):
        if file_id:
            part = c.files.content(file_id).text
            text += part if part.endswith("\n") or not part else part + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return sum(1 for line in text.splitlines() if line.strip())


def command(args: argparse.Namespace) -> int:
    c, spec = client(args.params, args.model)
    if args.batch_command == "submit":
        check_batch_file(
            args.file, spec
        )  # before any upload: a mixed or foreign file is refused, models named
        print(f"batch {submit(c, args.file)} submitted (check it with `cube batch status`)")
    elif args.batch_command == "status":
        print(status(c, args.batch_id))
    else:
        n = fetch(c, args.batch_id, args.out)
        print(
            f"{n} result line(s) written to {args.out}; load them with `cube batch import "
            f"{args.params} {args.out}`"
        )
    return 0
