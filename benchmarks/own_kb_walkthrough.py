"""The own-knowledge-base walkthrough (docs/tutorials/own-knowledge-base.md), timed: validate and
run `params/own_kb.yaml`, and the same file loaded as rows.

Run from the repository root: .venv/bin/python benchmarks/own_kb_walkthrough.py [--skip-rows]
Writes into a temporary outputs folder (the LLM cache too), so nothing is reused. Prints, for the
synthetic example spreadsheet loaded as rows (the workbench's old behaviour: one document per row,
the materials column unmapped, placeholders literal) and with `group_by`: documents, exact-duplicate
texts, R@1, R@k, the CuBE score and the verdict; last the headline `own_kb_walkthrough_seconds:
<value>` (validate + run of params/own_kb.yaml, offline).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from cube.config.params import load_params
from cube.run.execute import execute_run
from cube.run.validate import validate_data

ROOT = Path(__file__).resolve().parents[1]


def rows_variant(data: dict) -> dict:
    """The params of the walkthrough, loaded as the workbench did before `group_by`."""
    corpus = dict(data["corpus"], extra_columns="drop", empty_values=[])
    corpus.pop("group_by", None)
    corpus["columns"] = {k: v for k, v in corpus["columns"].items() if k != "application_materials"}
    return dict(data, run="own_kb_rows", corpus=corpus)


def measure(params_file: Path, outputs: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    report = validate_data(load_params(params_file), ROOT)
    summary = execute_run(params_file, outputs_dir=outputs, log=lambda _m: None)
    seconds = time.perf_counter() - t0
    if not (report.ok and summary.ok):
        raise SystemExit(f"{params_file}: validate ok={report.ok}, run ok={summary.ok}")
    root = outputs / load_params(params_file).run
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    answers = pd.read_parquet(root / "data" / "answers.parquet")
    rag = answers[answers["set"].eq("rag")]
    s = results["corpus_structure"]
    return seconds, {
        "documents": s["documents"],
        "duplicate_texts": s["duplicate_texts"],
        "r_at_1": round(float(rag["rank"].eq(1).mean()), 3),
        "r_at_k": round(float(results["recall_at_k"]), 3),
        "cube": round(float(results["cube_score"]), 1),
        "verdict": results["verdict"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--skip-rows", action="store_true", help="time only the walkthrough, not the rows baseline"
    )
    args = ap.parse_args()
    data = yaml.safe_load((ROOT / "params" / "own_kb.yaml").read_text(encoding="utf-8"))
    # read from params/, as the file's own relative path is; absolute for the copies under tmp
    data["corpus"]["path"] = str((ROOT / "params" / data["corpus"]["path"]).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        variants = [("group_by", data)] + ([] if args.skip_rows else [("rows", rows_variant(data))])
        seconds = {}
        for name, params in variants:
            path = tmp_path / f"{name}.yaml"
            path.write_text(
                yaml.safe_dump(
                    {**params, "cache_path": str(tmp_path / "cache.sqlite")}, allow_unicode=True
                ),
                encoding="utf-8",
            )
            seconds[name], figures = measure(path, tmp_path / "outputs")
            print(
                f"{name}: "
                + ", ".join(f"{k} {v}" for k, v in figures.items())
                + f" ({seconds[name]:.1f} s)"
            )
    print(f"own_kb_walkthrough_seconds: {seconds['group_by']:.1f}")


if __name__ == "__main__":
    main()
