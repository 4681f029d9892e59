"""How many of the notebook stages an edit of the params makes re-execute (issue 12, item 4).

Before issue 12 a stage's fingerprint was the whole resolved params plus the package source, so
any edit re-executed every stage; now each stage's fingerprint covers only what it reads
(`cube.stages`). For each edit of `params/default.yaml` the script prints the stages whose
fingerprint changes, the count under the old rule (every stage whenever the resolved params
differ) and under the new one. No notebook is executed.

    .venv/bin/python benchmarks/stage_reruns.py

The last line is the headline: `stages_rerun_after_adding_a_judge: <n of 9>`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from cube.config import params_to_yaml, parse_params
from cube.report import list_notebooks
from cube.stages import stage_fingerprints, stages_affected

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    notebooks = list_notebooks(ROOT / "notebooks")
    base = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    edits = {
        "adding_a_judge": lambda d: d["judges"].append(
            {"name": "extra", "model": {"provider": "offline", "model": "rubric-strict"}}),
        "analysis.trim_proportion": lambda d: d.setdefault("analysis", {}).update(trim_proportion=0.2),
        "lexical.tokenizer": lambda d: d.setdefault("lexical", {}).update(tokenizer="char"),
        "human.sample_size": lambda d: d.setdefault("human", {}).update(sample_size=10),
        "corpus.seed": lambda d: d.setdefault("corpus", {}).update(seed=11),
        "title": lambda d: d.update(title="Another title"),
    }
    before = parse_params(base)
    prints = stage_fingerprints(before, notebooks, ROOT)
    counts = {}
    for name, edit in edits.items():
        data = copy.deepcopy(base)
        edit(data)
        after = parse_params(data)
        new = stages_affected(prints, stage_fingerprints(after, notebooks, ROOT))
        old = len(notebooks) if params_to_yaml(after) != params_to_yaml(before) else 0
        counts[name] = len(new)
        print(f"{name}: old rule {old} of {len(notebooks)} stages, now {len(new)}: {[n[:2] for n in new]}")
    print(f"stages_rerun_after_adding_a_judge: {counts['adding_a_judge']}")


if __name__ == "__main__":
    main()
