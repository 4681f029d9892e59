"""Run the documented CI workflow's commands from a clean clone (docs/how-to/ci.md, issue 42.6).

The GitHub Actions workflow (examples/ci/github-actions.yml) is read as YAML and its job's steps are
executed here, in order, as a runner would, on two versions of the offline demo:

1. **main**, a clean clone of HEAD (`github.ref` refs/heads/main): no baseline yet, so `cube run`
   without `--baseline`; a release (exit 0) makes the run the baseline and saves it;
2. **pull request**, a fresh clean clone with the version changed (`--change OLD=>NEW` in the params
   file, by default the system's `top_n: 4` made `top_n: 1`): the call cache and the baseline
   restored from step 1, `cube run --baseline`, its exit code checked (`--expect`).

`run:` steps run in bash as on a runner (`bash --noprofile --norc -eo pipefail`), with the
workflow's `env`, `$GITHUB_OUTPUT` (read back into `steps.<id>.outputs`) and `$GITHUB_STEP_SUMMARY`;
`${{ ... }}` expressions and `if:` conditions of the forms the workflow uses (`always()`,
`success()`, `failure()`, `github.ref`, `github.sha`, `github.run_id`, `steps.<id>.outputs.<name>`,
`==`, `!=`, `&&`, `||`) are evaluated; anything else stops the check naming it. `uses:` steps cannot
run here and are emulated: checkout and setup-python are the clone and `--python`;
`actions/cache/restore|save` copy their `path` from/to a store folder shared by the two jobs (the
cache between jobs); `actions/upload-artifact` copies its `path` to the job's artifacts folder;
`mikepenz/action-junit-report` parses the JUnit XML (a file that is no XML fails the step). The
`Install` step is skipped with `--python` naming an environment that has the dependencies: the
clone is put first on `PYTHONPATH`, so `cube` runs the clone's code (an editable install would
repoint that environment at the clone).

    python scripts/ci_workflow_check.py --python /work/main/.venv/bin/python
    python scripts/ci_workflow_check.py --jobs main     # the part that needs no --baseline

It prints each step's outcome and time, and last `ci_workflow_seconds: <seconds of the jobs>`;
it exits 1 when a job's exit code is not the expected one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
PARAMS = "examples/ci/cube-ci.yaml"
CHANGE = "top_n: 4}=>top_n: 1}"
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
NAME = re.compile(r"(github\.\w+|steps\.[\w-]+\.outputs\.[\w-]+)")


class WorkflowError(ValueError):
    """A workflow this check cannot run (an expression or action it does not know), named."""


@dataclass
class Job:
    """One emulated job: its clone, the GitHub context, the steps' outputs and outcome."""

    name: str
    clone: Path
    context: dict[str, str]
    store: Path
    artifacts: Path
    env: dict[str, str]
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    failed: bool = False
    log: list[tuple[str, str, float]] = field(default_factory=list)  # (step, outcome, seconds)
    summary: str = ""
    junit_cases: int | None = None


def steps_of(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps of the workflow's one job."""
    jobs = workflow.get("jobs") or {}
    if len(jobs) != 1:
        raise WorkflowError(f"expected one job, found {list(jobs)}")
    return list(next(iter(jobs.values()))["steps"])


def run_commands(workflow: dict[str, Any]) -> list[str]:
    """Every `run:` command of the workflow, in order."""
    return [s["run"] for s in steps_of(workflow) if "run" in s]


def _value(name: str, job: Job) -> str:
    if name.startswith("github."):
        return job.context[name.split(".", 1)[1]]
    _, step, _, key = name.split(".")
    return job.outputs.get(step, {}).get(key, "")


def substitute(text: str, job: Job) -> str:
    """`${{ expr }}` replaced by its value (a name of `NAME`)."""

    def one(m: re.Match[str]) -> str:
        if not NAME.fullmatch(m.group(1)):
            raise WorkflowError(f"expression not supported by this check: {m.group(0)}")
        return _value(m.group(1), job)

    return EXPR.sub(one, text)


def condition(expr: str | None, job: Job) -> bool:
    """An `if:` condition (no condition: `success()`)."""
    if expr is None:
        return not job.failed
    text = EXPR.sub(lambda m: m.group(1), str(expr))
    text = NAME.sub(lambda m: repr(_value(m.group(1), job)), text)
    text = text.replace("always()", "True").replace("success()", str(not job.failed))
    text = text.replace("failure()", str(job.failed)).replace("&&", " and ").replace("||", " or ")
    if re.search(r"[A-Za-z_]\w*\(|\bgithub\b|\bsteps\b|\benv\b", text):
        raise WorkflowError(f"condition not supported by this check: {expr}")
    # the names are quoted values now: what is left are literals, ==, !=, and, or
    return bool(eval(text, {"__builtins__": {}}, {}))  # noqa: S307


def _copy(src: Path, dst: Path) -> bool:
    if not src.exists():
        return False
    if dst.is_dir():
        shutil.rmtree(dst)
    elif dst.exists():
        dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)
    return True


def uses(step: dict[str, Any], job: Job) -> str:
    """Emulate a `uses:` step; its outcome ('success', 'skipped: ...' or raises)."""
    action = step["uses"].split("@")[0]
    given = {k: substitute(str(v), job) for k, v in (step.get("with") or {}).items()}
    if action in ("actions/checkout", "actions/setup-python"):
        return "success (the clean clone; --python)"
    if action == "actions/cache/restore":
        hit = _copy(job.store / given["path"], job.clone / given["path"])
        return "success (restored)" if hit else "success (cache miss)"
    if action == "actions/cache/save":
        saved = _copy(job.clone / given["path"], job.store / given["path"])
        return "success (saved)" if saved else "success (nothing to save)"
    if action == "actions/upload-artifact":
        _copy(job.clone / given["path"], job.artifacts / given["name"])
        return "success"
    if action == "mikepenz/action-junit-report":
        path = job.clone / given["report_paths"]
        if not path.exists():
            return "success (no junit.xml)"
        job.junit_cases = sum(1 for _ in ET.parse(path).getroot().iter("testcase"))
        return f"success ({job.junit_cases} test cases)"
    raise WorkflowError(f"action not emulated by this check: {step['uses']}")


def run(step: dict[str, Any], job: Job) -> str:
    """A `run:` step in bash as on a runner; its outcome."""
    out, summary = job.clone / ".gh_output", job.clone / ".gh_summary"
    out.write_text("")
    env = {**job.env, "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", substitute(step["run"], job)],
        cwd=job.clone,
        env=env,
        check=False,
    )
    if "id" in step:
        pairs = [line.split("=", 1) for line in out.read_text().splitlines() if "=" in line]
        job.outputs[step["id"]] = {k: v for k, v in pairs}
    if summary.exists():
        job.summary = summary.read_text(encoding="utf-8")
    if done.returncode:
        job.failed = True
        return f"failure (exit {done.returncode})"
    return "success"


def run_job(steps: list[dict[str, Any]], job: Job, skip_install: bool) -> None:
    for step in steps:
        name = step.get("name") or step.get("uses") or step.get("id") or "step"
        t0 = time.perf_counter()
        if not condition(step.get("if"), job):
            outcome = "skipped (if)"
        elif skip_install and name == "Install":
            outcome = "skipped (--python)"
        elif "uses" in step:
            outcome = uses(step, job)
        else:
            outcome = run(step, job)
        job.log.append((name, outcome, time.perf_counter() - t0))
        print(f"  [{job.name}] {name}: {outcome} ({job.log[-1][2]:.1f} s)", flush=True)


def clone(repo: Path, target: Path, change: str | None) -> Path:
    """A clean clone of `repo`'s HEAD at `target`, the version changed by `change` (OLD=>NEW in
    the params file)."""
    subprocess.run(["git", "clone", "--quiet", str(repo), str(target)], check=True)
    if change:
        old, new = change.split("=>", 1)
        params = target / PARAMS
        text = params.read_text(encoding="utf-8")
        if old not in text:
            raise WorkflowError(f"{PARAMS}: {old!r} not found (--change)")
        params.write_text(text.replace(old, new, 1), encoding="utf-8")
    return target


def job_env(workflow: dict[str, Any], clone_dir: Path, python: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CUBE_"))}
    env.update({k: str(v) for k, v in (workflow.get("env") or {}).items()})
    env["CI"] = "true"
    if python is not None:
        env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(clone_dir)
    return env


def exit_code(job: Job) -> int:
    """The job's `cube run` exit code (`steps.evaluate.outputs.exit_code`; -1 when none)."""
    value = job.outputs.get("evaluate", {}).get("exit_code", "")
    return int(value) if value.strip().lstrip("-").isdigit() else -1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workflow", type=Path, default=WORKFLOW)
    ap.add_argument("--repo", type=Path, default=ROOT, help="the repository to clone (its HEAD)")
    ap.add_argument("--python", type=Path, default=None, help="an environment's python: no install")
    ap.add_argument("--work", type=Path, default=None, help="folder for the clones (default: temp)")
    ap.add_argument("--jobs", choices=("main", "both"), default="both")
    ap.add_argument("--change", default=CHANGE, help="OLD=>NEW in the params file for the PR job")
    ap.add_argument("--expect", type=int, nargs="*", default=[4], help="PR job exit codes accepted")
    args = ap.parse_args(argv)
    workflow = yaml.safe_load(args.workflow.read_text(encoding="utf-8"))
    steps = steps_of(workflow)
    work = args.work or Path(tempfile.mkdtemp(prefix="cube-ci-"))
    store, ok, seconds = work / "store", True, 0.0
    plan = [("main", "refs/heads/main", None, [0])]
    if args.jobs == "both":
        plan.append(("pull_request", "refs/pull/1/merge", args.change, args.expect))
    for i, (name, ref, change, expected) in enumerate(plan, 1):
        t0 = time.perf_counter()
        target = clone(args.repo, work / name, change)
        context = {"ref": ref, "sha": f"{i:040d}", "run_id": str(1000 + i)}
        job = Job(
            name,
            target,
            context,
            store,
            work / "artifacts" / name,
            job_env(workflow, target, args.python),
        )
        run_job(steps, job, skip_install=args.python is not None)
        took = time.perf_counter() - t0
        seconds += took
        code = exit_code(job)
        good = code in expected
        ok = ok and good
        print(
            f"{name}: cube run exit {code} (expected {expected}), job "
            f"{'failed' if job.failed else 'succeeded'}, {took:.0f} s, junit cases "
            f"{job.junit_cases}, summary {len(job.summary)} characters"
            + ("" if good else "  <-- UNEXPECTED")
        )
    print(f"ci_workflow_seconds: {seconds:.0f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
