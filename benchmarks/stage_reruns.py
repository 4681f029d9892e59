"""How many of the notebook stages an edit of the params makes re-execute (issue 12, item 4).

Before issue 12 a stage's fingerprint was the whole resolved params plus the package source, so
any edit re-executed every stage; now each stage's fingerprint covers only what it reads
(`cube.run.stages`). For each edit of `params/default.yaml` the script prints the stages whose
fingerprint changes, the count under the old rule (every stage whenever the resolved params
differ) and under the new one. No notebook is executed.

    .venv/bin/python benchmarks/stage_reruns.py

The edits include `params/llm_jury.yaml` ones: a judge with its own `models:` entry, a price, a
sampling setting, a concurrency setting; and a diagnostics threshold only
the decision (06) and diagnostics (10) stages read. The last line is the headline:
`stages_rerun_after_adding_a_judge_with_its_own_models_entry: <n>`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import yaml

from cube.config.params import params_to_yaml, parse_params
from cube.config.project import list_notebooks
from cube.run.stages import stage_fingerprints, stages_affected

ROOT = Path(__file__).resolve().parents[1]


NEW_JUDGE_MODEL = {
    "provider": "openai",
    "model": "claude-x",
    "base_url": "http://127.0.0.1:9/v1",
    "temperature": 0,
    "price_input_per_m": 3.0,
    "price_output_per_m": 15.0,
}


def _edits() -> dict[str, tuple[str, Callable[[dict], None]]]:
    """Each edit: the params file it applies to, and the change."""

    def add_llm_judge(d: dict) -> None:
        d["models"]["claude-x"] = NEW_JUDGE_MODEL
        d["judges"].append({"name": "Claude-X", "model": "claude-x"})

    def edit_price(d: dict) -> None:
        d["models"]["gpt-4o"]["price_input_per_m"] = 5.0

    return {
        "adding_a_judge": (
            "default.yaml",
            lambda d: d["judges"].append(
                {
                    "name": "extra",
                    "model": {"provider": "offline", "model": "rubric-strict"},
                    "samples": 2,
                }
            ),
        ),
        "adding_a_judge_with_its_own_models_entry": ("llm_jury.yaml", add_llm_judge),
        "editing_a_price": ("llm_jury.yaml", edit_price),
        "models.gpt-4o.temperature": (
            "llm_jury.yaml",
            lambda d: d["models"]["gpt-4o"].update(temperature=0.5),
        ),
        "models.qwen2.5-32b.max_concurrency": (
            "llm_jury.yaml",
            lambda d: d["models"]["qwen2.5-32b"].update(max_concurrency=8),
        ),
        "analysis.trim_proportion": (
            "default.yaml",
            lambda d: d.setdefault("analysis", {}).update(trim_proportion=0.2),
        ),
        "diagnostics.judge_disagreement_above": (
            "default.yaml",
            lambda d: d.setdefault("diagnostics", {}).update(judge_disagreement_above=5.0),
        ),  # read by 06 and 10 only (02 reads diagnostics.refusal_*)
        "lexical.tokenizer": (
            "default.yaml",
            lambda d: d.setdefault("lexical", {}).update(tokenizer="char"),
        ),
        "human.sample_size": (
            "default.yaml",
            lambda d: d.setdefault("human", {}).update(sample_size=10),
        ),
        "corpus.seed": ("default.yaml", lambda d: d.setdefault("corpus", {}).update(seed=11)),
        "title": ("default.yaml", lambda d: d.update(title="Another title")),
    }


def main() -> None:
    notebooks = list_notebooks(ROOT / "notebooks")
    counts = {}
    for name, (file, edit) in _edits().items():
        base = yaml.safe_load((ROOT / "params" / file).read_text(encoding="utf-8"))
        before = parse_params(base)
        data = copy.deepcopy(base)
        edit(data)
        after = parse_params(data)
        new = stages_affected(
            stage_fingerprints(before, notebooks, ROOT), stage_fingerprints(after, notebooks, ROOT)
        )
        old = len(notebooks) if params_to_yaml(after) != params_to_yaml(before) else 0
        counts[name] = len(new)
        print(
            f"{name} ({file}): whole-params rule {old} of {len(notebooks)} stages, now {len(new)}: "
            f"{[n[:2] for n in new]}"
        )
    print(
        f"stages_rerun_after_adding_a_judge_with_its_own_models_entry: "
        f"{counts['adding_a_judge_with_its_own_models_entry']}"
    )


if __name__ == "__main__":
    main()
