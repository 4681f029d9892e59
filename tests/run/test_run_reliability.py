"""`cube run` when things go wrong: failed calls retried by a plain re-run, interrupts, locks,
the judging-failed exit code, and secrets that never reach the run folder (local test server)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from cube import cli
from cube.config.runpaths import RunPaths
from cube.run.execute import RunSummary, execute_run
from tests import ROOT
from tests.openai_server import OpenAIServer, body_digest, score_reply

KEY = "sk-planted-secret-4f9a1c77e2"


def _llm_params(tmp_path: Path, url: str, *, concurrency: int = 4, name: str = "p.yaml") -> Path:
    params = {
        "run": "rel",
        "outputs_dir": str(tmp_path / "out"),
        "corpus": {"source": "demo", "n_items": 8, "seed": 3},
        "questions": {"generator": "template", "seed": 3},
        "systems": [{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
        "models": {
            "local": {
                "provider": "openai",
                "model": "test-model",
                "base_url": url,
                "api_key_env": "CUBE_REL_KEY",
                "max_concurrency": concurrency,
                "max_attempts": 1,
            }
        },
        "judges": [{"name": "local-llm", "model": "local"}],
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def test_a_plain_rerun_retries_exactly_the_failed_calls_and_no_secret_is_written(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CUBE_REL_KEY", KEY)
    with OpenAIServer(reply=score_reply) as server:
        params = _llm_params(tmp_path, server.url)
        failed_bodies: list[str] = []
        server.fail("500", times=5, when=lambda b: failed_bodies.append(body_digest(b)) is None)
        first = execute_run(params, only="01..03", log=lambda _: None)
        # rows whose call failed: one per dimension scored, and identical prompts (an answer equal
        # in two sets) share one call
        assert first.ok and first.stages[-1].failed_calls >= 5 and len(set(failed_bodies)) == 5
        assert server.requests_total > 5
        server.clear_faults()
        server.reset_stats()
        logs: list[str] = []
        second = execute_run(params, only="01..03", log=logs.append)
        assert [s.status for s in second.stages] == ["up to date", "up to date", "executed"], logs
        # only failed calls are sent again, each once; a failed pilot call whose identical prompt
        # was answered later in the same run (judge calls go in prompt order, the pilot first) is
        # read from the cache, not sent
        assert 0 < server.requests_total <= 5 and set(server.body_counts) <= set(failed_bodies)
        assert all(n == 1 for n in server.body_counts.values())
        assert second.stages[-1].failed_calls == 0
        third = execute_run(params, only="01..03", log=lambda _: None)
        assert [s.status for s in third.stages] == ["up to date"] * 3
        assert server.authorizations and all(a == f"Bearer {KEY}" for a in server.authorizations)
    out = tmp_path / "out"
    files = [f for f in out.rglob("*") if f.is_file()]
    assert any(f.name == "cache.sqlite" for f in files) and any(f.suffix == ".ipynb" for f in files)
    assert any(f.suffix == ".html" for f in files) and any(f.name == "manifest.json" for f in files)
    leaked = [str(f) for f in files if KEY.encode() in f.read_bytes()]
    assert leaked == []


def _kernel_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.mark.timeout(300)
def test_sigint_stops_the_kernel_records_the_attempt_and_a_rerun_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CUBE_REL_KEY", KEY)
    with OpenAIServer(reply=score_reply, latency_s=0.3) as server:
        params = _llm_params(tmp_path, server.url, concurrency=2)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "cube.cli", "run", str(params), "--only", "01..03"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 200
        while server.requests_total < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert server.requests_total >= 4, proc.communicate()
        kernels = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert kernels
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (out, err)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert "Resume with `cube run" in err and KEY not in out + err
        time.sleep(0.5)
        assert _kernel_alive(kernels) == []
        sent = server.requests_total
        time.sleep(1.5)
        assert server.requests_total == sent  # nothing keeps sending after the interrupt
        root = tmp_path / "out" / "rel"
        manifest = json.loads((root / ".staging" / "manifest.json").read_text())
        assert manifest["status"].startswith("interrupted") and not (root / ".lock").exists()
        assert 'data-status="interrupted"' in (root / "report" / "last_run.html").read_text(
            encoding="utf-8"
        )
        assert 'id="failure"' in (root / "report" / "index.html").read_text(encoding="utf-8")

        server.latency_s = 0.0
        resumed = execute_run(params, only="01..03", log=lambda _: None)
        assert [s.status for s in resumed.stages] == [
            "up to date",
            "up to date",
            "executed",
        ] and resumed.ok
        repeats = sum(n - 1 for n in server.body_counts.values() if n > 1)
        assert repeats <= 2  # at most the calls in flight at the interrupt (max_concurrency 2)
        print(f"interrupt: sent before SIGINT {sent}, repeated on resume {repeats}")


def test_cube_run_prints_one_line_per_stage_and_no_kernel_noise(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "quiet",
                "outputs_dir": str(tmp_path / "out"),
                "judges": [
                    {"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}
                ],
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "cube.cli", "run", str(params), "--only", "00"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[cube] 00_paper_tables: done in "), lines
    assert lines[1] == f"[cube] report: {tmp_path / 'out' / 'quiet' / 'report' / 'index.html'}"
    assert "without encryption" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    assert "[IPKernelApp]" not in done.stderr and "Alternative text" not in done.stderr, done.stderr


def test_a_second_run_on_a_locked_folder_exits_2_and_a_stale_lock_is_taken_over(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    params = tmp_path / "p.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "locked",
                "outputs_dir": str(tmp_path / "out"),
                "judges": [
                    {"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}
                ],
            }
        )
    )
    root = tmp_path / "out" / "locked"
    root.mkdir(parents=True)
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": "2026-01-01T00:00:00+00:00",
        "command": "cube run other.yaml",
    }
    (root / ".lock").write_text(json.dumps(holder))
    assert cli.main(["run", str(params), "--only", "00"]) == 2
    err = capsys.readouterr().err
    assert f"pid {os.getpid()}" in err and "cube run other.yaml" in err and ".lock" in err
    assert not (root / ".staging").exists()  # nothing was touched

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (root / ".lock").write_text(json.dumps({**holder, "pid": dead.pid}))
    logs: list[str] = []
    summary = execute_run(params, only="00", log=logs.append)
    assert summary.ok and any(f"stale lock of pid {dead.pid}" in line for line in logs)
    assert not (root / ".lock").exists()


def test_judging_failed_withholds_the_decision_with_exit_3(tmp_path, monkeypatch, capsys):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    paths.root.mkdir()
    decision = {
        "verdict": "withheld",
        "judging_failed": True,
        "withheld_reasons": ["judge GPT-4o has no scores (HTTP 401)"],
    }
    paths.results.write_text(json.dumps({"decision": decision}))
    monkeypatch.setattr(
        "cube.run.execute.execute_run", lambda *a, **k: RunSummary(paths, committed=True)
    )
    assert (
        cli.main(["run", str(tmp_path / "p.yaml"), "--no-preflight"]) == 3
    )  # no params file: execute_run is mocked
    out, err = capsys.readouterr()
    assert "WITHHELD: judge GPT-4o has no scores (HTTP 401)" in out  # the terminal summary
    assert "judging failed" in err and "exit code 3" in err
    # any withheld verdict exits 3, not only a judging failure
    paths.results.write_text(
        json.dumps({"decision": {**decision, "judging_failed": False, "withheld_reasons": ["x"]}})
    )
    assert cli.main(["run", str(tmp_path / "p.yaml"), "--no-preflight"]) == 3
    assert "WITHHELD: x" in capsys.readouterr().out
    paths.results.write_text(
        json.dumps({"decision": {**decision, "judging_failed": False, "verdict": "good"}})
    )
    assert cli.main(["run", str(tmp_path / "p.yaml"), "--no-preflight"]) == 0
