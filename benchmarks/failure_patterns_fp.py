"""The failure pattern `field_missing` on a hand-checked sample: false-positive rate before and
after.

The sample (tests/fixtures/field_missing_labelled.csv, 95 rows) holds rag answers whose gold
document was retrieved, from the default demo run (params/default.yaml) and the example spreadsheet
run (params/own_kb.yaml, stages ..02): every answer that the former rule or the current one flags
(63), plus 24 that neither flags (a random control sample); and 8 out-of-sample answers a review
found afterwards (source `review`: the gold value itself, the value after its label, 缴纳 ... 费用),
which the rule was then fixed for. Each row was labelled by reading the
field's value and the answer: `missing` 1 when the answer does not say the gold's value (another
value, "not stated", or a clause or material of a list left out), 0 when it says it (in any form:
"否" said as "不收费"). The sample contains only flags from these two offline runs: its rates
describe the extractive answerer's phrasing, not an LLM's.

- before: the former rule, rapidfuzz partial_ratio(value[:120], answer) < 60 (restated here);
- after: `cube.diagnose.claims.field_stated` (yes/no and fee values by meaning, numbers with
  their units, text by segments) at the default `diagnostics.field_match_below`.

Printed per source and overall: flags, false positives (flagged, labelled said) and their share
of the flags, misses (labelled missing, not flagged).

The held-out sample (tests/fixtures/field_missing_heldout.csv, 70 rows), which the rule never saw:
two runs of stages ..02 of params/default.yaml with the corpus and questions drawn anew (seed 23,
200 items), one in English (no English answer was in the first sample) and one in Chinese, run
after the rule was last changed. From each, `draw` took 20 flagged and 15 unflagged answers at
random (seed 2026) among the rag answers of bm25-top8 whose gold was retrieved and whose asked field
has a value; each was labelled by reading the gold value and the answer (the same rule as above;
`note` says why). Printed: false positives among the flags and misses among the unflagged, with a
95 % Clopper-Pearson upper bound (scipy). Last line: the held-out false-positive rate.

    python benchmarks/failure_patterns_fp.py
    python benchmarks/failure_patterns_fp.py --draw outputs/<run>

(the second: a new draw to label, as CSV on stdout)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cube.config.sections import DiagnosticsParams  # noqa: E402
from cube.diagnose.claims import field_stated  # noqa: E402

SAMPLE = ROOT / "tests" / "fixtures" / "field_missing_labelled.csv"
HELD_OUT = ROOT / "tests" / "fixtures" / "field_missing_heldout.csv"
DRAW_SEED, DRAW_FLAGGED, DRAW_UNFLAGGED = 2026, 20, 15


def draw(run_dir: Path, system: str = "bm25-top8") -> pd.DataFrame:
    """The held-out draw from one run's data (stages ..02): every rag answer of `system` whose gold
    was retrieved, whose question asks a field, and whose gold value for it is not a placeholder; of
    these DRAW_FLAGGED that `field_stated` flags and DRAW_UNFLAGGED it does not, at random
    (DRAW_SEED). The `missing` column is left for a reader to fill in."""
    from cube.config.phrasing import is_missing

    data = run_dir / "data"
    answers, questions = (
        pd.read_parquet(data / "answers.parquet"),
        pd.read_parquet(data / "questions.parquet"),
    )
    corpus = pd.read_parquet(data / "corpus.parquet").set_index("doc_id")
    rag = answers[(answers["system"] == system) & (answers["set"] == "rag") & (answers["rank"] > 0)]
    rag = rag.merge(questions[["question_id", "asked_field"]], on="question_id")
    rag = rag[rag["asked_field"].fillna("").isin(corpus.columns)].copy()
    rag["field_value"] = [
        str(corpus.at[d, f]) for d, f in zip(rag["doc_id"], rag["asked_field"], strict=True)
    ]
    rag = rag[~rag["field_value"].map(is_missing)]
    match = DiagnosticsParams().field_match_below
    rag["flagged"] = [
        not field_stated(f, v, str(a), match)
        for f, v, a in zip(rag["asked_field"], rag["field_value"], rag["answer"], strict=True)
    ]
    picked = pd.concat(
        [
            rag[rag["flagged"]].sample(
                min(DRAW_FLAGGED, int(rag["flagged"].sum())), random_state=DRAW_SEED
            ),
            rag[~rag["flagged"]].sample(DRAW_UNFLAGGED, random_state=DRAW_SEED),
        ]
    )
    return picked.assign(source=run_dir.name, missing="", note="")[
        [
            "source",
            "question_id",
            "asked_field",
            "field_value",
            "answer",
            "flagged",
            "missing",
            "note",
        ]
    ]


def former_rule(value: str, answer: str) -> bool:
    from rapidfuzz import fuzz

    return bool(value.strip()) and fuzz.partial_ratio(value[:120], answer) < 60


def rates(flags: pd.Series, missing: pd.Series) -> dict[str, float]:
    fp = int((flags & ~missing).sum())
    return {
        "flags": int(flags.sum()),
        "false_pos": fp,
        "fp_rate": fp / flags.sum() if flags.sum() else float("nan"),
        "misses": int((~flags & missing).sum()),
        "missing": int(missing.sum()),
    }


def main() -> float:
    sample = pd.read_csv(SAMPLE, keep_default_na=False)
    missing = sample["missing"].astype(int).astype(bool)
    match = DiagnosticsParams().field_match_below
    before = sample.apply(lambda r: former_rule(str(r.field_value), str(r.answer)), axis=1)
    after = sample.apply(
        lambda r: not field_stated(r.asked_field, str(r.field_value), str(r.answer), match), axis=1
    )
    rows = []
    for source, part in [*sample.groupby("source"), ("all", sample)]:
        idx = part.index
        for name, flags in (("before", before), ("after", after)):
            rows.append(
                {
                    "source": source,
                    "rule": name,
                    "rows": len(part),
                    **rates(flags[idx], missing[idx]),
                }
            )
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    overall = table[(table["source"] == "all")].set_index("rule")
    print(f"field_missing_false_positive_rate_before: {overall.at['before', 'fp_rate']:.3f}")
    print(f"field_missing_false_positive_rate_in_sample: {overall.at['after', 'fp_rate']:.3f}")
    held = pd.read_csv(HELD_OUT, keep_default_na=False)
    flagged, missing = (
        held["flagged"].astype(str).eq("True"),
        held["missing"].astype(int).astype(bool),
    )
    now = held.apply(
        lambda r: not field_stated(r.asked_field, str(r.field_value), str(r.answer), match), axis=1
    )
    if not now.equals(flagged):
        print(
            f"note: the rule now flags {int((now != flagged).sum())} "
            f"held-out answers differently from the draw"
        )
    for source, part in [*held.groupby("source"), ("all", held)]:
        f, m = now[part.index], missing[part.index]
        fp, fn = int((f & ~m).sum()), int((~f & m).sum())
        print(
            f"held-out {source}: {fp} false positives of {int(f.sum())} flags (95 % upper bound "
            f"{stats.beta.ppf(0.975, fp + 1, max(int(f.sum()) - fp, 1)):.3f}); {fn} misses of "
            f"{int((~f).sum())} "
            "unflagged answers" + "".join(f"; missed: {n}" for n in part.loc[~f & m, "note"])
        )
    rate = float((now & ~missing).sum() / now.sum())
    print(f"field_missing_false_positive_rate_held_out: {rate:.3f}")
    return rate


if __name__ == "__main__":
    if sys.argv[1:2] == ["--draw"]:
        pd.concat([draw(Path(d)) for d in sys.argv[2:]]).to_csv(sys.stdout, index=False)
    else:
        main()
