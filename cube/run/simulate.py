"""The simulation study as a run step: notebook 12 (`12_validation`) and `cube simulate`.

`study` draws the replicates of `cube.method.simulate_study` (in `workers` processes: each replicate
has its own seed, so the result does not depend on the number of workers), and returns the summary
tables; `write` saves them (and the raw replicates) as CSV beside the figures of
`cube.pages.sim_plots`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.sheets import write_csv
from cube.method import simulate_study as S
from cube.method.simulate import JudgeModel, RunModel, truth


@dataclass
class SimulationResult:
    """The study's tables (see `cube.method.simulate_study`) and its settings."""

    coverage: pd.DataFrame
    gate: pd.DataFrame
    pvalues: pd.DataFrame
    power: pd.DataFrame
    truth: pd.DataFrame
    replicates: pd.DataFrame
    pairs: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "sim_coverage": self.coverage,
            "sim_gate": self.gate,
            "sim_pvalues": self.pvalues,
            "sim_power": self.power,
            "sim_truth": self.truth,
        }

    def headline(self) -> dict[str, Any]:
        """Jury CuBE coverage per size, and p-value / power figures, for results.json and the
        CLI."""
        c = self.coverage[
            (self.coverage["judge"] == S.JURY) & (self.coverage["metric"] == "cube_score")
        ]
        own = self.settings.get("cluster", "family")
        return {
            "jury_cube_coverage": {
                str(r.n_questions): [r.coverage, r.coverage_mc_se]
                for r in c.itertuples()
                if getattr(r, "unit", own) == own
            },
            "jury_cube_coverage_by_unit": {
                f"{r.n_questions} {getattr(r, 'unit', own)}": [r.coverage, r.coverage_mc_se]
                for r in c.itertuples()
            },
            "intervals_missing_nominal": int(self.coverage["misses"].sum()),
            "pvalue_ks": {str(r.n_questions): r.ks_p_value for r in self.pvalues.itertuples()},
            "power_at_mde": {
                str(r.n_questions): [r.power, r.power_mc_se] for r in self.power.itertuples()
            },
            "settings": self.settings,
        }


def model_from(params: Params) -> RunModel:
    sp = params.simulation
    base = RunModel()
    judges = tuple(
        dataclasses.replace(j, bias_rag=sp.judge_bias) if i == 1 else j
        for i, j in enumerate(base.judges)
    )
    return dataclasses.replace(
        base,
        judges=judges,
        cluster_size=sp.cluster_size,
        cluster_sd=0.8 if sp.cluster_size > 1 else 0.0,
        family_size=sp.family_size,
        family_retrieval_share=sp.family_retrieval_share,
        family_correctness_share=sp.family_correctness_share,
        answer_sd=sp.answer_sd,
        system=dataclasses.replace(base.system, recall=sp.recall),
    )


def _map(fn: Callable[..., Any], jobs: Iterable[tuple], workers: int) -> list[Any]:
    jobs = list(jobs)
    if workers <= 1 or len(jobs) < 2:
        return [fn(*j) for j in jobs]
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(fn, *zip(*jobs, strict=True)))


_CUSTOM_WEIGHTS_NOTE = (
    "analysis.weights is custom: the simulated judges score the simulation's own "
    "dimensions, so the study weights them equally"
)


def _study_analysis(params: Params, bootstrap: int) -> tuple[Any, str]:
    """The analysis settings the study uses (the simulation's `bootstrap`), and a note when they
    differ from the run's: custom weights name the run's dimensions, while the simulated judges
    score their own, weighted equally."""
    ap = params.analysis.model_copy(update={"bootstrap": bootstrap})
    if ap.weights != "custom":
        return ap, ""
    return ap.model_copy(update={"weights": "equal", "custom_weights": None}), _CUSTOM_WEIGHTS_NOTE


def _mde_shifts(model: RunModel, pvalues: pd.DataFrame, ap: Any) -> dict[int, tuple[float, float]]:
    """Per number of questions, (the answer-quality shift making system B worse by the printed
    minimum detectable effect, that MDE), for the params' unit where an MDE was printed."""
    return {
        int(r.n_questions): (S.quality_shift_for(model, -r.mean_mde, ap), r.mean_mde)
        for r in pvalues.itertuples()
        if r.mean_mde == r.mean_mde and r.unit == ap.cluster  # the power of the params' unit
    }


def _true_deltas(
    model: RunModel, shifts: dict[int, tuple[float, float]], ap: Any
) -> dict[int, float]:
    """Per number of questions, the true CuBE difference its shift makes."""
    base = S.jury_truth(model, ap)
    return {
        n: S.jury_truth(model.with_system(answer_quality=model.system.answer_quality + s), ap)
        - base
        for n, (s, _m) in shifts.items()
    }


@dataclass
class _Design:
    """What every replicate of the study shares."""

    model: RunModel
    ap: Any
    replicates: int
    permutations: int
    seed: int
    workers: int


def _coverage_replicates(d: _Design, sizes: list[int], true: pd.DataFrame) -> pd.DataFrame:
    """One row per judge and replicate of each size: the coverage and gate replicates."""
    rows = _map(
        S.coverage_replicate,
        [(d.model, n, r, d.ap, true, d.seed) for n in sizes for r in range(d.replicates)],
        d.workers,
    )
    return pd.DataFrame([x for rep in rows for x in rep])


def _null_pairs(d: _Design, units: Iterable[str], pair_sizes: list[int]) -> pd.DataFrame:
    """Compare's replicates under no difference, per unit and size."""
    jobs = [
        (d.model, n, r, d.ap, 0.0, 0.0, d.permutations, d.seed, u)
        for u in units
        for n in pair_sizes
        for r in range(d.replicates)
    ]
    return pd.DataFrame(_map(_pair, jobs, d.workers))


def _power_pairs(
    d: _Design, pvalues: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, dict[int, tuple[float, float]]]:
    """Compare's replicates with system B worse by the printed MDE: (the power table, the pairs,
    the shifts per size)."""
    shifts = _mde_shifts(d.model, pvalues, d.ap)
    true_d = _true_deltas(d.model, shifts, d.ap)
    jobs = [
        (d.model, n, r, d.ap, shifts[n][0], true_d[n], d.permutations, d.seed + 1, d.ap.cluster)
        for n in shifts
        for r in range(d.replicates)
    ]
    alt = pd.DataFrame(_map(_pair, jobs, d.workers))
    power_tab = S.power_table(alt, 1 - d.ap.confidence)
    power_tab.insert(1, "printed_mde", [shifts[int(n)][1] for n in power_tab["n_questions"]])
    return power_tab, alt, shifts


def study(
    params: Params,
    *,
    replicates: int | None = None,
    questions: list[int] | None = None,
    bootstrap: int | None = None,
    permutations: int | None = None,
    power: bool | None = None,
    power_questions: list[int] | None = None,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
) -> SimulationResult:
    """The whole study with the params' `simulation` section (arguments override it) and `analysis`
    settings (trim, weights, gate, confidence; `bootstrap` is the simulation's). Compare's p-values
    and power are simulated at `power_questions` (default: the sizes' middle one)."""
    sp = params.simulation
    R = replicates or sp.replicates
    sizes = questions or list(sp.questions)
    B = bootstrap or sp.bootstrap
    P = permutations or sp.permutations
    do_power = sp.power if power is None else power
    pair_sizes = power_questions or [sorted(sizes)[len(sizes) // 2]]
    ap, weights_note = _study_analysis(params, B)
    model = model_from(params)
    say = log or (lambda _m: None)
    if weights_note:
        say(weights_note)
    design = _Design(model, ap, R, P, sp.seed, workers)
    t0 = time.time()
    true = truth(model, proportion=ap.trim_proportion, weights=ap.weights)
    reps = _coverage_replicates(design, sizes, true)
    say(f"coverage: {len(sizes)} sizes x {R} runs in {time.time() - t0:.0f} s")
    units = S.study_units(model, ap)
    null = _null_pairs(design, units, pair_sizes)
    say(
        f"compare under no difference: {len(pair_sizes)} sizes x {R} pairs in "
        f"{time.time() - t0:.0f} s"
    )
    pvalues = S.pvalue_table(null, 1 - ap.confidence)
    power_tab = pd.DataFrame()
    pairs = null.assign(case="no difference")
    if do_power:
        power_tab, alt, shifts = _power_pairs(design, pvalues)
        pairs = pd.concat([pairs, alt.assign(case="B worse by the MDE")], ignore_index=True)
        say(f"power at the MDE: {len(shifts)} sizes x {R} pairs in {time.time() - t0:.0f} s")
    settings = {
        "weights_note": weights_note,
        "replicates": R,
        "questions": sizes,
        "pair_questions": pair_sizes,
        "bootstrap": B,
        "permutations": P,
        "confidence": ap.confidence,
        "cluster": ap.cluster,
        "units_compared": list(units),
        "seed": sp.seed,
        "workers": workers,
        "seconds": round(time.time() - t0, 1),
        "model": dataclasses.asdict(model),
    }
    return SimulationResult(
        S.coverage_table(reps, ap.confidence),
        S.gate_table(reps),
        pvalues,
        power_tab,
        true,
        reps,
        pairs,
        settings,
    )


def _pair(
    model: RunModel,
    n: int,
    r: int,
    ap: Any,
    shift: float,
    true_delta: float,
    permutations: int,
    seed: int,
    unit: str | None = None,
) -> dict[str, Any]:
    return S.compare_replicate(
        model,
        n,
        r,
        ap,
        shift=shift,
        true_delta=true_delta,
        n_permutations=permutations,
        seed=seed,
        unit=unit,
    )


def write(result: SimulationResult, folder: Path) -> list[Path]:
    """Every table as CSV under `folder` (raw replicates included), and the settings as JSON."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, df in {
        **result.tables(),
        "sim_replicates": result.replicates,
        "sim_pairs": result.pairs,
    }.items():
        write_csv(df, folder / f"{name}.csv", index=False)
        out.append(folder / f"{name}.csv")
    (folder / "sim_settings.json").write_text(
        json.dumps(result.settings, indent=2, default=str), encoding="utf-8"
    )
    return out


__all__ = [
    "JudgeModel",
    "SequentialResult",
    "SimulationResult",
    "model_from",
    "run_sequential",
    "sequential_study",
    "study",
    "write",
]


def summary_lines(result: SimulationResult) -> list[str]:
    """The study as text: every interval's coverage with its Monte Carlo error, then compare's
    figures."""
    from cube.pages.display import format_p

    c = result.coverage
    lines = [
        f"{'n':>4}  {'unit':<8} {'judge':<10} {'metric':<15} {'interval':<9} {'runs':>4}  "
        "coverage (MC SE)  width   bias (MC SE)   RMSE   deff"
    ]
    for r in c.itertuples():
        mark = "  <- misses nominal" if r.misses else ""
        lines.append(
            f"{r.n_questions:>4}  {getattr(r, 'unit', ''):<8} {r.judge:<10} {r.metric:<15} "
            f"{r.interval:<9} {r.replicates:>4}  "
            f"{r.coverage:7.1%} ({r.coverage_mc_se:4.1%})  {r.mean_width:6.2f}  {r.bias:+6.2f} "
            f"({r.bias_mc_se:4.2f})  {r.rmse:6.2f}  "
            f"{getattr(r, 'design_effect', float('nan')):4.2f}{mark}"
        )
    for r in result.pvalues.itertuples():
        lines.append(
            f"compare, no difference, {r.n_questions} questions, {r.unit} unit, {r.replicates} "
            f"pairs: KS p = "
            f"{format_p(r.ks_p_value)} (uniform p-values), rejection rate {r.rejection_rate:.1%} "
            f"({r.rejection_mc_se:.1%}), ΔCuBE interval coverage {r.delta_coverage:.1%} "
            f"({r.delta_coverage_mc_se:.1%}), SD of ΔCuBE {r.delta_sd:.2f} "
            f"({r.delta_sd_mc_se:.2f}) vs mean bootstrap SE {r.mean_se:.2f}, printed MDE "
            f"{r.mean_mde:.2f}"
        )
    for r in result.power.itertuples():
        lines.append(
            f"compare, B worse by the MDE (true ΔCuBE {r.true_delta:.2f}), {r.n_questions} "
            f"questions, {r.replicates} pairs: power {r.power:.1%} ({r.power_mc_se:.1%}; nominal "
            f"80%), ΔCuBE interval coverage {r.delta_coverage:.1%} ({r.delta_coverage_mc_se:.1%}), "
            f"SD of ΔCuBE {r.delta_sd:.2f} ({r.delta_sd_mc_se:.2f}) vs mean bootstrap SE "
            f"{r.mean_se:.2f}, MDE printed by these pairs {r.mde_printed_here:.2f}"
        )
    for r in result.gate.itertuples():
        lines.append(
            f"gate, {r.n_questions} questions: {r.judge} left out of the jury in "
            f"{r.excluded_rate:.1%} ({r.excluded_mc_se:.1%}) of {r.replicates} runs"
        )
    return lines


def run_simulate(
    params_path: Path,
    *,
    out: Path | None = None,
    log: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[Path, SimulationResult]:
    """`cube simulate`: the study with the params file's settings (`options` override the
    `simulation` section), its tables, settings and figures written to `out` (default
    `<outputs_dir>/simulate/<run>/`)."""
    from cube.config.params import load_params
    from cube.config.project import resolve
    from cube.pages import sim_plots

    params = load_params(params_path)
    folder = out or resolve(params.outputs_dir) / "simulate" / params.run
    result = study(params, log=log, **options)
    write(result, folder)
    for name, fig in (
        ("fig_sim_coverage", sim_plots.coverage(result.coverage, params.analysis.confidence)),
        (
            "fig_sim_pvalues",
            sim_plots.pvalues(result.pairs[result.pairs["case"] == "no difference"]),
        ),
    ):
        fig.savefig(
            folder / f"{name}.png", dpi=150, bbox_inches="tight", metadata={"Software": None}
        )
    return folder, result


# ------------------------------------------------------------------------ the sequential design
@dataclass
class SequentialResult:
    """The sequential design simulated (`cube.method.simulate_sequential`): one row per true CuBE
    (`table`), and the settings."""

    table: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)


def sequential_designs(
    params: Params,
    max_questions: int,
    distances: Iterable[float],
    scale: str | None = None,
    *,
    truths: Iterable[float] | None = None,
    design: dict[str, str] | None = None,
) -> list[Any]:
    """One design per distance: the params' simulated world (`simulation`: families, answer SD,
    judge bias) with the system's R@k moved so the true jury CuBE sits that many points below the
    lowest verdict edge (or at each of `truths`, when given: 50 is the centre of the 20-point band
    `fair`); the run's own stop rule (`analysis.sequential` and `analysis.max_interval_width`, else
    the defaults: batch 20, min_questions 40, alpha 0.05) and its design (`order`, `recall`,
    `boundary`; `design` overrides them: the benchmark compares the driver's designs). The
    minimum the driver raises for the gate and the audit (`effective_minimum`) is not simulated:
    the simulated judges have no audit; the settings file says so. `scale`: the sequence's
    (`sequential.functional_look`, its default when None; "linear" measures the sequence as first
    built)."""
    from cube.method import sequential as seq
    from cube.method import simulate_sequential as SS
    from cube.run.sequential import stop_rule
    from cube.run.sequential_design import design_of

    ap = params.analysis
    rule = stop_rule(params) if ap.sequential is not None else seq.StopRule()
    how = {**design_of(params), **(design or {})}
    rule = dataclasses.replace(rule, boundary=how["boundary"])
    model = model_from(params)
    thresholds = tuple(ap.verdict_thresholds.items())
    edge = min(ap.verdict_thresholds.values())
    targets = list(truths) if truths is not None else [edge - d for d in distances]
    designs = []
    for target in targets:
        placed = model.with_system(recall=SS.recall_for(model, target, ap))
        designs.append(
            SS.Design(
                placed,
                max_questions,
                rule,
                S.jury_truth(placed, ap),
                thresholds,
                ap.trim_proportion,
                ap.weights,
                scale=scale or seq.DEFAULT_SCALE,
                order=how["order"],
                recall_from=how["recall"],
            )
        )
    return designs


def _sequential_chunk(design: Any, start: int, stop: int, seed: int) -> list[dict[str, Any]]:
    """Replicates start..stop-1 of one design, BLAS on one thread (its matrix products are small:
    threads spinning beside the other worker cost 30x the time on a loaded 2-core machine)."""
    from threadpoolctl import threadpool_limits

    from cube.method import simulate_sequential as SS

    with threadpool_limits(1):
        return SS.run_design(design, range(start, stop), seed)


_Job = tuple[int, tuple[Any, int, int, int]]  # design index, (design, start, stop, seed)


def _chunk_jobs(designs: list[Any], replicates: int, workers: int, seed: int) -> list[_Job]:
    """Each design's replicates in about `workers` chunks (one job each)."""
    step = max(1, -(-replicates // max(1, workers)))
    return [
        (i, (d, s, min(s + step, replicates), seed))
        for i, d in enumerate(designs)
        for s in range(0, replicates, step)
    ]


def _replicates_of(i: int, jobs: list[_Job], parts: list[list[dict[str, Any]]]) -> list[Any]:
    """Design `i`'s replicates, gathered from the chunks' results in order."""
    return [r for (k, _), part in zip(jobs, parts, strict=True) if k == i for r in part]


def sequential_study(
    params: Params,
    *,
    replicates: int,
    max_questions: int = 300,
    distances: Iterable[float] | None = None,
    workers: int = 1,
    log: Callable[[str], None] | None = None,
    scale: str | None = None,
) -> SequentialResult:
    """`cube simulate --sequential`: `replicates` sequential runs of up to `max_questions`
    questions per true CuBE `distances` points below the lowest verdict edge (default 0, 5, 10,
    15, 20, 30), each summarised by `simulate_sequential.summary_row`; `scale` the sequence's
    (`sequential.functional_look`: "sqrt", the default when None, "log", or "linear", as first
    built)."""
    from cube.method import simulate_sequential as SS

    t0 = time.time()
    designs = sequential_designs(params, max_questions, distances or SS.DISTANCES, scale)
    jobs = _chunk_jobs(designs, replicates, workers, params.simulation.seed)
    parts = _map(_sequential_chunk, [j for _, j in jobs], workers)
    say = log or (lambda _m: None)
    rows = []
    for i, design in enumerate(designs):
        rows.append(SS.summary_row(design, _replicates_of(i, jobs, parts)))
        say(
            f"sequential, {rows[-1]['inside']:.0f} points inside: {replicates} runs "
            f"({time.time() - t0:.0f} s)"
        )
    settings = {
        "replicates": replicates,
        "max_questions": max_questions,
        "scale": scale,
        "design": {"order": designs[0].order, "recall": designs[0].recall_from} if designs else {},
        "stop_rule": dataclasses.asdict(designs[0].rule) if designs else {},
        "not_simulated": "the minimum the driver raises for the judge gate and the audit "
        "(effective_minimum): the simulated judges have no audit",
        "thresholds": dict(params.analysis.verdict_thresholds),
        "seed": params.simulation.seed,
        "seconds": round(time.time() - t0, 1),
        "model": dataclasses.asdict(model_from(params)),
    }
    return SequentialResult(pd.DataFrame(rows), settings)


def sequential_lines(result: SequentialResult) -> list[str]:
    """The sequential study as text: the design, then one line per true CuBE, Monte Carlo SEs in
    brackets (`coverage`: the truth inside the interval at every look at which a run may stop)."""
    how, rule = result.settings.get("design") or {}, result.settings.get("stop_rule") or {}
    lines = [
        f"design: order {how.get('order')}, R@k from {how.get('recall')} questions, boundary "
        f"{rule.get('boundary')}",
        "inside  truth   R@k   coverage (SE)  fixed-n re-used  questions (SE)  calls saved  "
        "wrong: sequential  fixed-n full  fixed-n at mean n  peeking  fixed n, same error  "
        "no look may stop",
    ]
    for r in result.table.itertuples():
        lines.append(
            f"{r.inside:6.0f}  {r.truth:5.1f}  {r.recall:4.2f}  {r.coverage:.3f} "
            f"({r.coverage_mc_se:.3f})  {r.fixed_coverage_every_look:.3f} "
            f"({r.fixed_coverage_every_look_mc_se:.3f})  {r.mean_questions:6.1f} "
            f"({r.mean_questions_mc_se:.1f})  {r.calls_saved:5.2f}x  "
            f"{r.wrong_sequential:.3f} ({r.wrong_sequential_mc_se:.3f})  "
            f"{r.wrong_full:.3f} ({r.wrong_full_mc_se:.3f})  "
            f"{r.wrong_at_mean_n:.3f} ({r.wrong_at_mean_n_mc_se:.3f}) at {r.fixed_n_at_mean}  "
            f"{r.wrong_peek:.3f} ({r.wrong_peek_mc_se:.3f})  {r.n_same_error:g}  "
            f"{r.undefined_look:.3f}"
        )
    return lines


def run_sequential(
    params_path: Path, *, out: Path | None = None, **options: Any
) -> tuple[Path, SequentialResult]:
    """`cube simulate --sequential`: the sequential study with the params file's world, its table
    (`sim_sequential.csv`) and settings (`sim_sequential_settings.json`) written to `out` (default
    `<outputs_dir>/simulate/<run>/`)."""
    import json

    from cube.config.params import load_params
    from cube.config.project import resolve

    params = load_params(params_path)
    folder = out or resolve(params.outputs_dir) / "simulate" / params.run
    result = sequential_study(params, **options)
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(result.table, folder / "sim_sequential.csv", index=False)
    (folder / "sim_sequential_settings.json").write_text(
        json.dumps(result.settings, indent=2, default=str), encoding="utf-8"
    )
    return folder, result
