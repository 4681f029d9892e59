"""The decision with a random third judge (issue 9): CuBE, interval, verdict and the jury.

The default params' offline jury (two rubric judges) plus a judge on a local OpenAI-compatible
server whose replies ignore the answer (an integer 0-10 seeded by the request body digest), on
a small synthetic run. `--faults 0.2` also makes 10 % of that judge's calls fail (HTTP 500 on
every attempt) and 10 % of its replies unparseable; `--down` makes its endpoint answer every
call with HTTP 500 (the endpoint is down). The stages are called directly (no
papermill); the last line is `name: value`.

    PYTHONPATH=. python benchmarks/random_judge.py [--faults 0.2] [--items 40]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import yaml  # noqa: E402
from openai_server import OpenAIServer, body_digest  # noqa: E402

from cube.run import decide, evaluate, pipeline  # noqa: E402
from cube.run.notebook import open_run  # noqa: E402


def _bucket(body: dict) -> int:
    return int(body_digest(body)[:6], 16) % 100


def random_reply(faults: float):
    def reply(body: dict) -> str:
        if faults and _bucket(body) < 100 * faults and _bucket(body) >= 50 * faults:
            return "I would rather not give a number for this answer."  # a parse failure
        return f"Score: {random.Random(body_digest(body)).randint(0, 10)}"

    return reply


def run_case(tmp: Path, faults: float, items: int, bootstrap: int, down: bool = False) -> dict:
    with OpenAIServer(reply=random_reply(faults)) as server:
        if down:
            server.fail("500", times=None)
        elif faults:
            server.fail(
                "500", times=None, when=lambda b: _bucket(b) < 50 * faults
            )  # a call failure
        params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
        params.update(
            {
                "run": "random-judge",
                "outputs_dir": str(tmp / "outputs"),
                "corpus": {"source": "demo", "n_items": items, "seed": 3},
                "questions": {"generator": "template", "seed": 3},
                "systems": [{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
                "models": {
                    "random": {
                        "provider": "openai",
                        "model": "random",
                        "base_url": server.url,
                        "api_key_env": "CUBE_RANDOM_KEY",
                        "max_attempts": 1,
                        "max_concurrency": 8,
                    }
                },
                "judges": params["judges"] + [{"name": "random-llm", "model": "random"}],
                "analysis": {**params["analysis"], "bootstrap": bootstrap},
            }
        )
        path = tmp / "p.yaml"
        path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
        import os

        os.environ.setdefault("CUBE_RANDOM_KEY", "sk-local-test")
        run = open_run(path, tmp / "run")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for stage in (
                pipeline.corpus_stage,
                pipeline.questions_stage,
                pipeline.answers_stage,
                pipeline.scores_stage,
            ):
                stage(run)
            results = evaluate.evaluate_run(run)
            decision = decide.decision(run, results)
    return {
        "decision": decision,
        "results": results,
        "results_json": json.loads((run.paths.root / "results.json").read_text(encoding="utf-8"))
        if (run.paths.root / "results.json").exists()
        else {},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--faults", type=float, default=0.0)
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--bootstrap", type=int, default=300)
    ap.add_argument("--down", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = run_case(Path(tmp), args.faults, args.items, args.bootstrap, args.down)
    d = out["decision"]
    res = out["results"]["bm25-top8"]
    table = res.cube_table
    cols = [c for c in ("weighted_score", "cube_score", "in_jury", "excluded_reason") if c in table]
    print(table[cols].to_string())
    ci = d.get("cube_ci") or [float("nan"), float("nan")]
    print(
        f"verdict: {d['verdict']}; withheld because: {d.get('withheld_reasons')}; "
        f"judges used: {d.get('judges_used', list(table.index))}; "
        f"judging_failed: {d.get('judging_failed')}"
    )
    print(f"decision_cube: {d['cube_score']:.1f} [{ci[0]:.1f}, {ci[1]:.1f}] {d['verdict']}")


if __name__ == "__main__":
    main()
