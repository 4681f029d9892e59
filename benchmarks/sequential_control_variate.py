"""A cheap judge as a control variate for the sequential jury CuBE (issue 40, item 2): coverage at
every look, variance cut, calls per verdict, against the jury alone and a Neyman allocation.

Simulated on `cube.method.simulate_control_variate` (its docstring has the model): 300 questions,
all answered and scored by the cheap judges up front, the jury (the model's two judges) judging
one question per family in a seeded round-robin, a look every 20 judged questions from 40 (14
looks). Worlds: independent questions and families of 5 (benchmarks/sequential_cube.py's fam5),
each with the true jury CuBE at the centre of a 20-point band (50, in fair 40-60) and 10 points
inside one edge (30, in poor 0-40). Cheap judges correlated with the jury's per-question score at
rho 0, 0.3, 0.5, 0.7, 0.9, and one at 0.7 that is lenient, compressed and partial to the system
(offset +2, scale 0.6, +1.5 on rag answers). Two boundaries: today's AsympCS sequence
(`asympcs`) and Pocock's constant 2.58 for 14 looks at 5 % (`pocock`), each times Student's t at the
judged groups. Columns:

- `coverage`: the share of runs whose interval held the truth at every look where a stop was
  allowed (Monte Carlo SE); `bias`: mean estimate - truth at the 100-question look;
- `var`: the estimate's variance over runs at 100 judged questions over the jury's alone
  (empirical); `lam`: the median power-tuned lambda; `rho_eff`: the median correlation of the jury's
  and the correction's leave-out values at 100 (what the variance cut rests on);
- `questions`: judged at the stop; `wrong`: wrong verdicts; `saved`: the fixed-n run's calls (300 x
  27: 3 answers, 24 jury calls) over the design's (the jury's judged questions x 24, the 300
  answers x 3 up front for a cheap judge; an offline cheap judge's calls free).

Then the Neyman comparison at 100 judged questions (families of 5, centre): the variance of the
jury CuBE from a Neyman allocation by the cheap judge's influence, and of the control variate, over
the one-per-family subset's.

    .venv/bin/python benchmarks/sequential_control_variate.py [--replicates 40] [--workers 2]

(40 runs a cell: 10 minutes on a loaded 2-core machine; coverage's MC SE is then 0.03-0.05.)
The rubric judge's rho with an LLM judge, on a run's answers (a local server, `cube serve`):

    .venv/bin/python benchmarks/sequential_control_variate.py --llm-rho outputs/<run>/data \
        --base-url http://127.0.0.1:8765/v1 --limit 12 --dimensions relevance

Last line: `cv_calls_saved_centre_fam5_rho07_pocock: x` (the fixed-n run's calls over the control
variate's, cheap judge at rho 0.7, free).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cube.method import control_variate as cv  # noqa: E402
from cube.method import sequential as seq  # noqa: E402
from cube.method import simulate_control_variate as S  # noqa: E402
from cube.method.simulate import RunModel  # noqa: E402
from cube.method.simulate_sequential import recall_for  # noqa: E402

RULE = seq.StopRule(min_questions=40, batch=20)
TRUTHS = {"centre": 50.0, "10 inside": 30.0}
ANALYSIS = types.SimpleNamespace(trim_proportion=0.1, weights="rank_correlation")


def design(world: str, truth: float) -> S.CVDesign:
    model = dataclasses.replace(RunModel(), **S.WORLDS[world])
    model = model.with_system(recall=recall_for(model, truth, ANALYSIS))
    bounds = {"asympcs": cv.asympcs_boundary(RULE), "pocock": cv.constant_boundary(2.58, RULE)}
    return S.CVDesign(model, 300, RULE, truth, boundaries=bounds)


def cell(world: str, where: str, replicates: int) -> pd.DataFrame:
    d = design(world, TRUTHS[where])
    looks = S.run_design(d, range(replicates))
    at = looks[looks["n"] == 100].groupby(["estimator", "boundary"])["rho"].median()
    out = S.summary(d, looks)
    out["rho_eff"] = [
        at.get((e, b), np.nan) for e, b in zip(out.estimator, out.boundary, strict=True)
    ]
    return out.assign(world=world, where=where, truth=d.truth, recall=d.model.system.recall)


def neyman(replicates: int) -> pd.DataFrame:
    d = design("families of 5", TRUTHS["centre"])
    est = S.neyman_variance(d, 100, range(replicates))
    base = est.loc[est["design"] == "uniform", "estimate"].var()
    rows = est[est["design"] != "uniform"].groupby(["cheap", "design"], sort=False)["estimate"]
    return rows.agg(var=lambda x: x.var() / base, bias=lambda x: x.mean() - d.truth).reset_index()


def print_cells(table: pd.DataFrame) -> None:
    cols = ["world", "where", "estimator", "boundary", "coverage", "coverage_mc_se", "bias_at_100",
            "var_ratio_at_100", "lam", "rho_eff", "questions", "wrong", "saved"]  # fmt: skip
    shown = table[cols].rename(columns={"bias_at_100": "bias", "var_ratio_at_100": "var"})
    with pd.option_context("display.width", 220, "display.max_rows", 500):
        print(shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


def llm_rho(data: Path, base_url: str, limit: int, dimensions: list[str]) -> None:
    """The correlation of the offline rubric judge's per-question scores with an LLM judge's on a
    run's answers (`data`: a run's data folder after stage 02, answers/corpus/questions.parquet),
    per set and dimension over the first `limit` questions, and pooled over the three sets."""
    from cube.config.model_spec import ModelSpec
    from cube.config.params import parse_params
    from cube.judges import Judge, load_dimensions, score_answers
    from cube.llm import make_model

    answers = pd.read_parquet(data / "answers.parquet")
    corpus = pd.read_parquet(data / "corpus.parquet")
    questions = pd.read_parquet(data / "questions.parquet")
    keep = sorted(answers["question_id"].unique())[:limit]
    answers = answers[answers["question_id"].isin(keep)]
    params = parse_params(
        {
            "run": "rho",
            "lang": "en",
            "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
            "dimensions": dimensions,
        }
    )
    llm = ModelSpec(model="local", base_url=base_url, temperature=0, max_tokens=16,
                    timeout_s=300, max_concurrency=1)  # fmt: skip
    judges = [
        Judge(name="rubric", model=make_model(ModelSpec(provider="offline", model="rubric"))),
        Judge(name="llm", model=make_model(llm)),
    ]
    t0 = time.time()
    scores = score_answers(
        answers, judges, load_dimensions(params, ROOT), corpus, questions=questions, progress=False
    )
    wide = scores.pivot_table(
        index=["question_id", "set", "dimension"], columns="judge", values="score"
    ).reset_index()
    failed = int(scores.loc[scores["judge"] == "llm", "score"].isna().sum())
    took = time.time() - t0
    print(f"{len(keep)} questions x 3 sets x {len(dimensions)} dimensions, {took:.0f} s; "
          f"LLM judgments unscored (failed or unparsed): {failed}")  # fmt: skip
    both = wide.dropna(subset=["rubric", "llm"])
    for (d, s_), g in both.groupby(["dimension", "set"]):
        r = g["rubric"].corr(g["llm"]) if g["llm"].std() > 0 else float("nan")
        print(f"{d:12s} {s_:5s} n={len(g):3d} rho {r:.3f}  (llm scores {sorted(set(g['llm']))}, "
              f"rubric sd {g['rubric'].std():.2f})")  # fmt: skip
    pooled = both["rubric"].corr(both["llm"])
    print(f"rubric_llm_rho_pooled: {pooled:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=40)
    ap.add_argument("--neyman-replicates", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--llm-rho", type=Path, help="a run's data folder: measure rho instead")
    ap.add_argument("--base-url", default="http://127.0.0.1:8765/v1")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--dimensions", default="relevance")
    args = ap.parse_args()
    if args.llm_rho:
        llm_rho(args.llm_rho, args.base_url, args.limit, args.dimensions.split(","))
        return
    t0 = time.time()
    jobs = [(w, where) for w in S.WORLDS for where in TRUTHS]
    with ProcessPoolExecutor(max_workers=args.workers) as ex:
        futures = [ex.submit(cell, w, where, args.replicates) for w, where in jobs]
        ney = ex.submit(neyman, args.neyman_replicates)
        for done in as_completed(futures):  # each cell as it ends (a long run shows progress)
            print_cells(done.result())
            print(flush=True)
        table = pd.concat([f.result() for f in futures], ignore_index=True)
        ney_table = ney.result()
    took = time.time() - t0
    print(f"{args.replicates} runs a cell, 300 questions, looks every 20 from 40 ({took:.0f} s)")
    print_cells(table)
    print(
        "\nNeyman allocation by the cheap judge vs the control variate, 100 judged, families of 5,"
        f" centre ({args.neyman_replicates} runs; var over the one-per-family subset's)"
    )
    print(ney_table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    pick = table[
        (table.world == "families of 5") & (table["where"] == "centre")
        & (table.estimator == "cheap rho 0.7") & (table.boundary == "pocock")
    ]  # fmt: skip
    jury = table[
        (table.world == "families of 5") & (table["where"] == "centre")
        & (table.estimator == S.JURY) & (table.boundary == "pocock")
    ]  # fmt: skip
    print(f"jury_alone_calls_saved_centre_fam5_pocock: {float(jury['saved'].iloc[0]):.3f}")
    print(f"cv_calls_saved_centre_fam5_rho07_pocock: {float(pick['saved'].iloc[0]):.3f}")


if __name__ == "__main__":
    main()
