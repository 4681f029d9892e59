"""Batch judging round trip: export the pending calls, answer them as vLLM's run-batch or OpenAI's
Batch API would, import the results, and the run judges with zero requests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.request import Request as UrlRequest
from urllib.request import urlopen

import pytest

from cube.cli import main as cli
from cube.llm import batch as llm_batch
from cube.run import audit, batch, pipeline
from cube.run.notebook import open_run
from tests.openai_server import OpenAIServer, score_reply

PARAMS = """run: b
lang: zh
outputs_dir: {out}
corpus: {{source: demo, n_items: 5, seed: 1}}
questions: {{generator: template, seed: 1}}
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
dimensions: [relevance, completeness]
judges:
  - {{name: llm, model: {{provider: openai, model: test-model, base_url: "{url}", max_tokens: 16}}}}
  - {{name: rubric, model: {{provider: offline, model: rubric-strict}}}}
audit: {{max_share: 1.0}}  # 5 items: at the default share no audit question fits; its calls are \
exported too
"""


def run_batch(requests: Path, results: Path, url: str, broken: set[int] = frozenset()) -> None:
    """What `vllm run-batch` does with the file: each body to /v1/chat/completions, one output line
    each."""
    out = []
    for n, raw in enumerate(requests.read_text(encoding="utf-8").splitlines()):
        line = json.loads(raw)
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        if n in broken:
            out.append(
                {
                    "id": f"r{n}",
                    "custom_id": line["custom_id"],
                    "response": None,
                    "error": {"code": "server_error", "message": "model crashed"},
                }
            )
            continue
        req = UrlRequest(
            url.removesuffix("/v1") + line["url"],
            data=json.dumps(line["body"]).encode(),
            headers={"Content-Type": "application/json"},
        )
        body = json.loads(urlopen(req).read())
        out.append(
            {
                "id": f"r{n}",
                "custom_id": line["custom_id"],
                "response": {"status_code": 200, "request_id": f"q{n}", "body": body},
                "error": None,
            }
        )
    results.write_text("".join(json.dumps(x) + "\n" for x in out), encoding="utf-8")


@pytest.fixture
def prepared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with OpenAIServer(reply=score_reply) as server:
        params = tmp_path / "p.yaml"
        params.write_text(PARAMS.format(out=tmp_path / "out", url=server.url), encoding="utf-8")
        run = open_run(params)
        pipeline.corpus_stage(run)
        pipeline.questions_stage(run)
        pipeline.answers_stage(run)
        yield params, run, server


def test_export_import_then_the_run_judges_with_zero_requests(prepared, tmp_path):
    params, run, server = prepared
    answers = run.load("answers")
    written = batch.export_batch(params, tmp_path / "calls.jsonl")
    port = server.url.split(":")[-1].split("/")[0]
    (requests,) = (
        written  # one LLM judge: one file, named after it and a hash of its exact (model, endpoint)
    )
    assert re.fullmatch(
        rf"calls\.test-model@127\.0\.0\.1-{port}\.[0-9a-f]{{8}}\.jsonl", requests.name
    )
    assert requests.parent == tmp_path
    n = written[requests]
    judged = int(answers["answer"].notna().sum())
    probed = len(
        audit.audit_probes(run.params, run.load("corpus"), run.load("questions"), answers, 10**9)
    )  # at most
    lines = [json.loads(x) for x in requests.read_text(encoding="utf-8").splitlines()]
    # the LLM judge's calls only (2 dimensions; the offline judge makes none), identical calls once
    # (a rag answer equal to the full one is the same call)
    assert 0 < n == len(lines) == len({x["custom_id"] for x in lines}) <= (judged + probed) * 2
    assert {tuple(sorted(x)) for x in lines} == {("body", "custom_id", "method", "url")}
    assert all(
        x["body"]["model"] == "test-model"
        and x["body"]["max_tokens"] == 16
        and x["body"]["messages"]
        for x in lines
    )
    assert server.requests_total == 0  # exporting sends nothing

    results = tmp_path / "results.jsonl"
    run_batch(requests, results, server.url, broken={1})
    with results.open("a", encoding="utf-8") as f:  # a line of another run: refused, named
        f.write(
            json.dumps({"custom_id": "f" * 64, "response": {"status_code": 200, "body": {}}}) + "\n"
        )
    report = batch.import_batch(params, results)
    assert (
        report.stored == n - 1
        and len(report.failed) == 1
        and "model crashed" in report.failed[0]["reason"]
    )
    assert len(report.problems) == 1 and f"{results}: line {n + 1}" in report.problems[0]
    failures = [
        json.loads(x) for x in (tmp_path / "results.failures.jsonl").read_text().splitlines()
    ]
    assert failures == report.failed and failures[0]["custom_id"] == lines[1]["custom_id"]

    assert batch.export_batch(params, tmp_path / "calls.jsonl") == {
        requests: 1
    }  # the failed call, and only it
    assert json.loads(requests.read_text())["custom_id"] == lines[1]["custom_id"]
    run_batch(requests, results, server.url)
    assert batch.import_batch(params, results).stored == 1
    assert batch.export_batch(params, tmp_path / "calls.jsonl") == {}
    assert (
        not requests.exists()
    )  # the stale export (all imported now) is gone: nothing to submit twice

    server.reset_stats()
    scores = pipeline.scores_stage(run)
    assert server.requests_total == 0
    llm = scores[scores["judge"] == "llm"]
    assert len(llm) == judged * 2 and llm["cached"].all() and (llm["error_kind"] == "").all()
    audited = run.load("audit_scores")
    assert (
        llm["call_id"].nunique() + audited.loc[audited["judge"] == "llm", "call_id"].nunique() >= n
    )  # every export line used
    assert set(llm["call_id"]) | set(audited.loc[audited["judge"] == "llm", "call_id"]) == {
        x["custom_id"] for x in lines
    }
    # the same scores as judging live (fresh cache)
    from cube.judges import load_dimensions, make_judges, score_answers

    live = score_answers(
        answers,
        [j for j in make_judges(run.params, None) if j.name == "llm"],
        load_dimensions(run.params, base_dir=Path.cwd()),
        run.load("corpus"),
        questions=run.load("questions"),
        progress=False,
    )
    key = ["question_id", "system", "set", "dimension"]
    assert (
        server.requests_total == llm["call_id"].nunique()
    )  # the answers' calls (the audit's are not re-judged here)
    merged = llm.merge(live, on=key, suffixes=("_batch", "_live"))
    assert len(merged) == judged * 2 and (merged["score_batch"] == merged["score_live"]).all()


def test_cli_export_and_import(prepared, tmp_path, capsys):
    params, run, server = prepared
    assert cli(["batch", "export", str(params), "--out", str(tmp_path / "c.jsonl")]) == 0
    assert "pending call(s) written" in capsys.readouterr().out
    (exported,) = tmp_path.glob("c.test-model@*.jsonl")
    run_batch(exported, tmp_path / "r.jsonl", server.url)
    (tmp_path / "bad.jsonl").write_text('{"custom_id": "nope"}\nnot json\n', encoding="utf-8")
    assert cli(["batch", "import", str(params), str(tmp_path / "bad.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "line 1: custom_id 'nope'" in err and "line 2: not JSON" in err
    assert cli(["batch", "import", str(params), str(tmp_path / "r.jsonl")]) == 0
    assert cli(["batch", "export", str(params), "--out", str(tmp_path / "c.jsonl")]) == 0
    assert "nothing to export" in capsys.readouterr().out
    assert cli(["batch", "export", str(params), "--stage", "02"]) == 2
    assert "only 03" in capsys.readouterr().err


def test_submit_status_fetch_through_a_local_batch_api(tmp_path, monkeypatch, capsys):
    from tests.batch_server import BatchServer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BATCH_TEST_KEY", "sk-test-secret")
    with BatchServer(reply=score_reply, fail_lines=frozenset({0})) as server:
        params = tmp_path / "p.yaml"
        text = PARAMS.format(out=tmp_path / "out", url=server.url).replace(
            '  - {name: llm, model: {provider: openai, model: test-model, base_url: "'
            + server.url
            + '", max_tokens: 16}}',
            "  - {name: llm, model: m}",
        )
        text += (
            f'models:\n  m: {{provider: openai, model: test-model, base_url: "{server.url}", '
            "api_key_env: BATCH_TEST_KEY, max_tokens: 16}\n"
        )
        params.write_text(text, encoding="utf-8")
        run = open_run(params)
        for stage in (pipeline.corpus_stage, pipeline.questions_stage, pipeline.answers_stage):
            stage(run)
        assert cli(["batch", "export", str(params), "--out", str(tmp_path / "calls.jsonl")]) == 0
        (calls,) = tmp_path.glob("calls.test-model@*.jsonl")
        n = len(calls.read_text().splitlines())
        capsys.readouterr()
        assert cli(["batch", "submit", str(params), str(calls), "--model", "m"]) == 0
        batch_id = capsys.readouterr().out.split()[1]
        assert server.files["file-1"] == calls.read_bytes()  # the uploaded file is the export
        results = tmp_path / "results.jsonl"
        assert (
            cli(["batch", "fetch", str(params), batch_id, "--model", "m", "--out", str(results)])
            == 2
        )
        assert (
            "in_progress" in capsys.readouterr().err and not results.exists()
        )  # not finished: nothing written
        assert cli(["batch", "status", str(params), batch_id, "--model", "m"]) == 0
        assert f"completed, {n - 1}/{n} completed, 1 failed" in capsys.readouterr().out
        assert (
            cli(["batch", "fetch", str(params), batch_id, "--model", "m", "--out", str(results)])
            == 0
        )
        assert len(results.read_text().splitlines()) == n  # output and error lines
        assert len(server.authorizations) >= 6 and set(server.authorizations) == {
            "Bearer sk-test-secret"
        }
        assert cli(["batch", "import", str(params), str(results)]) == 0
        out = capsys.readouterr()
        assert f"{n - 1} replies stored" in out.out and "batch worker failed" in out.err
        assert server.requests_total == 0 and server.batch_requests == n - 1
        assert "sk-test-secret" not in results.read_text() + calls.read_text()


def test_imported_replies_cost_batch_prices_when_given():
    from cube.config.model_spec import ModelSpec
    from cube.llm.endpoints import call_cost

    spec = ModelSpec(
        model="m", base_url="http://127.0.0.1:1/v1", price_input_per_m=2.0, price_output_per_m=8.0
    )
    assert llm_batch._batch_spec(spec) is spec
    cheap = spec.model_copy(
        update={"batch_price_input_per_m": 1.0, "batch_price_output_per_m": 4.0}
    )
    assert call_cost(llm_batch._batch_spec(cheap), 1_000_000, 500_000) == pytest.approx(3.0)
    assert call_cost(
        llm_batch._batch_spec(spec.model_copy(update={"batch_price_output_per_m": 4.0})),
        1_000_000,
        500_000,
    ) == pytest.approx(4.0)


TWO_MODELS = PARAMS.replace(
    "  - {{name: rubric,",
    "  - {{name: other, model: {{provider: openai, model: "
    'other-model, base_url: "{url}", max_tokens: 16}}}}\n'
    "  - {{name: remote, model: {{provider: openai, model: "
    'test-model, base_url: "{url2}", max_tokens: 16}}}}\n'
    "  - {{name: rubric,",
)


def test_export_writes_one_file_per_endpoint_and_model_and_import_takes_them_all(
    tmp_path, monkeypatch, capsys
):
    """One export file mixed every LLM judge, so a submit sent every model's lines to one
    endpoint."""
    from tests.batch_server import BatchServer

    monkeypatch.chdir(tmp_path)
    with BatchServer(reply=score_reply) as server, OpenAIServer(reply=score_reply) as second:
        params = tmp_path / "p.yaml"
        params.write_text(
            TWO_MODELS.format(out=tmp_path / "out", url=server.url, url2=second.url),
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (pipeline.corpus_stage, pipeline.questions_stage, pipeline.answers_stage):
            stage(run)
        assert cli(["batch", "export", str(params)]) == 0
        out = capsys.readouterr().out
        folder = run.paths.root / "batch"
        port1, port2 = (u.split(":")[-1].split("/")[0] for u in (server.url, second.url))
        files = {
            f.name: [json.loads(x) for x in f.read_text().splitlines()]
            for f in folder.glob("*.jsonl")
        }
        readable = {
            re.sub(r"\.[0-9a-f]{8}\.jsonl$", ".jsonl", n): n for n in files
        }  # without the pair's hash
        assert len(readable) == len(files)
        # same server, two models: two files; same model, another endpoint: a third
        assert set(readable) == {
            f"03.test-model@127.0.0.1-{port1}.jsonl",
            f"03.other-model@127.0.0.1-{port1}.jsonl",
            f"03.test-model@127.0.0.1-{port2}.jsonl",
        }
        for name, lines in files.items():
            assert {x["body"]["model"] for x in lines} == {
                name.split(".")[1].split("@")[0]
            } and name in out
        assert "3 files, one per (model, endpoint)" in out
        # the two test-model files hold different calls (another endpoint is another cache key)
        ids = {name: {x["custom_id"] for x in lines} for name, lines in files.items()}
        assert (
            not ids[readable[f"03.test-model@127.0.0.1-{port1}.jsonl"]]
            & ids[readable[f"03.test-model@127.0.0.1-{port2}.jsonl"]]
        )

        results = []
        for name in sorted(files):
            results.append(tmp_path / ("r." + name))
            run_batch(folder / name, results[-1], server.url)
        assert (
            cli(["batch", "import", str(params), *map(str, results)]) == 0
        )  # any model's results, all at once
        out = capsys.readouterr().out
        assert all(f"{r}: {len(files[r.name[2:]])} replies stored" in out for r in results)
        assert cli(["batch", "export", str(params)]) == 0
        assert "nothing to export" in capsys.readouterr().out and not list(folder.glob("*.jsonl"))
        server.reset_stats()
        second.reset_stats()
        scores = pipeline.scores_stage(run)
        assert server.requests_total == second.requests_total == 0
        assert (
            set(scores["judge"]) == {"llm", "other", "remote", "rubric"}
            and (scores["error_kind"] == "").all()
        )


def test_submit_refuses_a_file_of_another_or_several_models_naming_them(
    tmp_path, monkeypatch, capsys
):
    from tests.batch_server import BatchServer

    monkeypatch.chdir(tmp_path)
    with BatchServer(reply=score_reply) as server:
        params = tmp_path / "p.yaml"
        params.write_text(
            TWO_MODELS.format(out=tmp_path / "out", url=server.url, url2="http://127.0.0.1:1/v1"),
            encoding="utf-8",
        )
        run = open_run(params)
        for stage in (pipeline.corpus_stage, pipeline.questions_stage, pipeline.answers_stage):
            stage(run)
        written = batch.export_batch(params, tmp_path / "c.jsonl")
        (other,) = (
            p
            for p in written
            if p.name.startswith(
                f"c.other-model@127.0.0.1-{server.url.split(':')[-1].split('/')[0]}."
            )
        )
        mine = next(p for p in written if p != other)
        capsys.readouterr()
        # another model's file to this judge's endpoint: refused before any upload, the model named
        assert cli(["batch", "submit", str(params), str(other), "--model", "llm"]) == 2
        err = capsys.readouterr().err
        assert (
            "serves model 'test-model'" in err
            and f"{written[other]} line(s) for model 'other-model'" in err
        )
        mixed = tmp_path / "mixed.jsonl"
        mixed.write_text(mine.read_text() + other.read_text() + "{}\n", encoding="utf-8")
        assert cli(["batch", "submit", str(params), str(mixed), "--model", "llm"]) == 2
        err = capsys.readouterr().err
        first_other = written[mine] + 1
        assert (
            f"for model 'other-model' (lines {first_other}," in err and "test-model' (" not in err
        )
        assert f"line {written[mine] + written[other] + 1}: not a Batch API request line" in err
        assert not server.files and server.batch_requests == 0  # nothing uploaded
        # the right file with its judge's name (an inline model): accepted
        assert cli(["batch", "submit", str(params), str(other), "--model", "other"]) == 0
        assert server.files["file-1"] == other.read_bytes()
        assert cli(["batch", "submit", str(params), str(other), "--model", "nobody"]) == 2
        assert "neither a model under `models:`" in capsys.readouterr().err


@pytest.mark.parametrize(
    "one, other",
    [
        (("通义千问-max", "http://10.0.0.5:8000/v1"), ("文心一言-max", "http://10.0.0.5:8000/v1")),
        (("qwen2.5:7b", "http://10.0.0.5:8000/v1"), ("qwen2.5-7b", "http://10.0.0.5:8000/v1")),
        (("org/model", "http://10.0.0.5:8000/v1"), ("org-model", "http://10.0.0.5:8000/v1")),
        (
            ("m", "http://gw:8000/a/v1"),
            ("m", "http://gw:8000/b/v1"),
        ),  # one host, two endpoints behind it
        (("m", "http://gw/v1"), ("m", "https://gw/v1")),
    ],
)
def test_two_models_or_endpoints_never_share_an_export_file(one, other):
    """Names made safe for a file system collided ('通义千问-max' and '文心一言-max' both '-max'),
    putting two models' calls in one file; a short hash of the exact (model, endpoint) pair keeps
    them apart."""
    from cube.config.model_spec import ModelSpec
    from cube.llm.batch import batch_file

    out = Path("outputs/run/batch/03.jsonl")
    fa, fb = (batch_file(out, ModelSpec(model=m, base_url=u)) for m, u in (one, other))
    assert fa != fb and fa.parent == fb.parent == out.parent
    for f, (model, url) in (
        (fa, one),
        (fb, other),
    ):  # the readable part is kept: model (ASCII part) @ host
        assert f.name.startswith("03.") and f.name.endswith(".jsonl")
        assert model[-2:] in f.name and f"@{url.split('/')[2].replace(':', '-')}." in f.name
    assert (
        batch_file(out, ModelSpec(model=one[0], base_url=one[1])) == fa
    )  # the same pair: the same file


def test_a_partial_import_names_the_calls_still_pending_and_cube_run_says_so_before_sending(
    tmp_path, monkeypatch, capsys
):
    """`cube batch import` of a results file answering only part of an export said nothing about the
    rest, so the next `cube run` silently sent them as live (paid) requests."""
    import cube.run.execute

    monkeypatch.chdir(tmp_path)
    with OpenAIServer(reply=score_reply) as server:
        params = tmp_path / "p.yaml"
        params.write_text(PARAMS.format(out=tmp_path / "out", url=server.url), encoding="utf-8")
        run = open_run(params)
        for stage in (pipeline.corpus_stage, pipeline.questions_stage, pipeline.answers_stage):
            stage(run)
        assert (
            cli(["batch", "export", str(params)]) == 0
        )  # outputs/<run>/batch/03.<model>@<host>.<hash>.jsonl
        (exported,) = (run.paths.root / "batch").glob("03.*.jsonl")
        n = len(exported.read_text(encoding="utf-8").splitlines())
        full = tmp_path / "full.jsonl"
        run_batch(exported, full, server.url, broken={0})  # line 0 failed on the batch side
        part = tmp_path / "results.jsonl"  # only part of the export came back
        part.write_text(
            "".join(full.read_text(encoding="utf-8").splitlines(keepends=True)[: n - 3]),
            encoding="utf-8",
        )
        capsys.readouterr()
        assert cli(["batch", "import", str(params), str(part)]) == 0
        out = capsys.readouterr().out
        assert f"{n - 4} replies stored" in out
        assert (
            f"pending: 4 exported call(s) still not in the call cache (4 of {exported.name})" in out
        )
        assert "`cube run` would send them live" in out and str(tmp_path) not in out

        seen = []

        def execute_run(*args, **kwargs):  # what `cube run` printed before it would start sending
            seen.append(capsys.readouterr().err)
            raise KeyboardInterrupt

        monkeypatch.setattr(cube.run.execute, "execute_run", execute_run)
        assert cli(["run", str(params), "--no-preflight"]) == 130
        (line,) = [x for x in seen[0].splitlines() if "batch" in x]
        assert line.startswith(
            f"cube: 4 call(s) of the batch export ({exported.name}) are not in the call cache"
        )
        assert "live" in line

        rest = tmp_path / "rest.jsonl"  # the rest comes back (the failed line answered this time)
        run_batch(exported, rest, server.url)
        assert cli(["batch", "import", str(params), str(rest)]) == 0
        out = capsys.readouterr().out
        assert "pending:" not in out and "every call of stage 03 is in the call cache" in out
        seen.clear()
        assert cli(["run", str(params), "--no-preflight"]) == 130
        assert not [x for x in seen[0].splitlines() if "batch" in x]
