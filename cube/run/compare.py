"""`cube compare A B` and notebook 09: resolve the two sides, compare, write the folder.

A side is a params file (its run folder `outputs/<run>`, `outputs_dir` read from the project
root) or a run folder (or a folder inside it), and optionally a system of that run (default:
the run's primary system). Both sides are resolved to their run root, so two spellings of one
run are the same run: B then defaults to the run's first system other than A's, and a system
compared with itself is refused. Each listed regression and improvement links to its records in
each side's judgment browser. The comparison folder holds `comparison.json` (the headline:
`delta_cube`, `delta_cube_ci`, `p_value`, `mde`, `n_questions`, `regressions`, `improvements`:
the questions that changed beyond the judges' noise or by retrieval, with `n_expected_by_chance`,
the count of each expected if A and B did not differ, `cube.diagnose.regressions`),
`tables/*.csv`, `figures/*.png` (a forest plot of Δ by dimension and judge, a scatter of the
per-question jury scores A vs B) and `index.html` in the report style (all text escaped).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from cube.config.params import AnalysisParams, Params, load_params
from cube.config.runpaths import RunPaths
from cube.config.sheets import write_csv
from cube.run.state import STAGING


@dataclass
class Side:
    run: str
    system: str
    paths: RunPaths
    params: Params | None
    top_n: int | None

    @property
    def label(self) -> str:
        return self.system

    def load(self, name: str) -> pd.DataFrame:
        path = self.paths.data_file(name)
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: missing; run the stages of run {self.run!r} first (cube run)"
            )
        return pd.read_parquet(path)

    def load_if_present(self, name: str) -> pd.DataFrame | None:
        return self.load(name) if self.paths.data_file(name).exists() else None

    def own(self, table: pd.DataFrame) -> pd.DataFrame:
        """The rows of a run's table that are this side's system."""
        return table[table["system"] == self.system]

    @property
    def analysis(self) -> AnalysisParams | None:
        return self.params.analysis if self.params is not None else None

    @property
    def evaluated_top_n(self) -> int | None:
        """The N the run evaluated this side at: its analysis' `top_n`, else the system's."""
        ap = self.analysis
        return (ap.top_n if ap is not None else None) or self.top_n


def _systems(params: Params | None, answers_path: Path) -> list[str]:
    if params is not None:
        return [s.name for s in params.systems]
    return list(
        dict.fromkeys(pd.read_parquet(answers_path, columns=["system"])["system"].astype(str))
    )


def _is_run_root(folder: Path) -> bool:
    return (folder / "data" / "answers.parquet").is_file() or (
        (folder / "params.yaml").is_file() and (folder / "data").is_dir()
    )


def run_root(folder: str | Path) -> Path:
    """The run folder holding `folder` (itself or the nearest parent with the run's `data/`),
    absolute and resolved, so two spellings of one run compare equal; `folder` itself if none."""
    here = Path(folder).expanduser().resolve()
    return next((f for f in (here, *here.parents) if _is_run_root(f)), here)


def resolve_side(
    spec: str | Path, system: str | None = None, *, default_index: int = 0, avoid: str | None = None
) -> Side:
    """A params file or a run folder (or a folder inside it), and a system of it (default: the
    `default_index`-th system, or with `avoid` the first system other than `avoid`). The run
    root is resolved: a params file's `outputs_dir` is read from the project root, and a run's
    own `params.yaml` copy stands for its folder."""
    spec = Path(spec).expanduser()
    params, paths = _located(spec)
    systems = _systems(params, paths.data_file("answers"))
    if system is None:
        system = _default_system(spec, paths, systems, default_index=default_index, avoid=avoid)
    elif system not in systems:
        raise ValueError(f"{spec}: no system {system!r}; the run has {systems}")
    top_n = {s.name: s.top_n for s in params.systems}.get(system) if params is not None else None
    return Side(
        params.run if params is not None else run_folder_name(paths.root),
        system,
        paths,
        params,
        top_n,
    )


def _located(spec: Path) -> tuple[Params | None, RunPaths]:
    """The params (None for a run folder without its copy) and the run paths a side names."""
    if spec.is_file():
        return _located_params_file(spec)
    if spec.is_dir():
        root = run_root(spec)
        params = load_params(root / "params.yaml") if (root / "params.yaml").exists() else None
        return params, RunPaths(root=root, cache=root.parent / "cache.sqlite")
    raise FileNotFoundError(f"{spec}: neither a params file nor a run folder")


def _located_params_file(spec: Path) -> tuple[Params, RunPaths]:
    """A params file's run: the run's own `params.yaml` copy stands for its folder, wherever it
    moved; any other params file's `outputs_dir` is read from the project root."""
    from cube.config.project import resolve

    params = load_params(spec)
    folder = spec.resolve().parent
    if spec.name == "params.yaml" and _is_run_root(folder):
        return params, RunPaths(root=folder, cache=folder.parent / "cache.sqlite")
    paths = RunPaths.for_params(params, resolve(params.outputs_dir))
    return params, RunPaths(root=paths.root.resolve(), cache=paths.cache)


def _default_system(
    spec: Path, paths: RunPaths, systems: list[str], *, default_index: int, avoid: str | None
) -> str:
    """The side's system when none is named: the first other than `avoid`, else the
    `default_index`-th; a run without such a system is refused, saying how to name two."""
    choices = [s for s in systems if s != avoid] if avoid is not None else systems[default_index:]
    if choices:
        return choices[0]
    same = f"side B is the same run as side A (system {avoid!r}), and " if avoid is not None else ""
    raise ValueError(
        f"{spec}: {same}run {run_folder_name(paths.root)!r} has only the system(s) "
        f"{systems}; a comparison needs two systems: give two runs, or name two systems "
        "(--system-a / --system-b)"
    )


def run_folder_name(root: Path) -> str:
    """The run folder's name as published: under `cube run` a stage works in `<run>/.staging`,
    which is committed as `<run>`, so a comparison written there names `<run>`."""
    return root.parent.name if root.name == STAGING else root.name


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-") or "side"


def side_name(side: Side, other: Side) -> str:
    return _slug(side.system if side.run == other.run else f"{side.run}-{side.system}")


class _Judged(NamedTuple):
    """One side's rows of the run's answers and scores tables."""

    answers: pd.DataFrame
    scores: pd.DataFrame


def _judged(a: Side, b: Side) -> tuple[_Judged, _Judged]:
    """Each side's own rows (its system's) of its run's answers and scores; two systems of one
    run read the tables once."""
    ans_a, sc_a = a.load("answers"), a.load("scores")
    same_run = a.paths.root == b.paths.root
    ans_b, sc_b = (ans_a, sc_a) if same_run else (b.load("answers"), b.load("scores"))
    return (
        _Judged(a.own(ans_a), a.own(sc_a)),
        _Judged(b.own(ans_b), b.own(sc_b)),
    )


def _dimension_names(params: Params | None) -> list[str] | None:
    """The dimensions side A's params name (None: the comparison's default, every dimension)."""
    if params is None or not params.dimensions:
        return None
    return [d if isinstance(d, str) else getattr(d, "name", str(d)) for d in params.dimensions]


class _Listing(NamedTuple):
    """What a listed regression or improvement is detailed and linked from."""

    a: Side
    b: Side
    ja: _Judged
    jb: _Judged
    questions: pd.DataFrame | None
    corpus: pd.DataFrame | None
    hrefs: list[str | None]


def _listed(rows: pd.DataFrame, at: _Listing) -> list[dict[str, Any]]:
    """Each changed question's details, with its links to each side's judgment browser."""
    from cube.diagnose.regressions import details

    out = []
    for _, r in rows.iterrows():
        d = details(r, *at.ja, *at.jb, at.questions, at.corpus)
        d["links"] = {
            side: _browser_link(href, sd, str(r["question_id"]))
            for side, sd, href in (("a", at.a, at.hrefs[0]), ("b", at.b, at.hrefs[1]))
        }
        out.append(d)
    return out


def _browser_link(href: str | None, side: Side, question_id: str) -> str | None:
    from cube.pages.browser import link

    return link(href, system=side.system, set="rag", q=question_id) if href else None


def _side_record(side: Side) -> dict[str, str]:
    return {"run": side.run, "system": side.system, "folder": run_folder_name(side.paths.root)}


def _cleaned(figures: Mapping[Hashable, object]) -> dict[str, object]:
    """Figures as JSON values: NaN and infinities None, numpy scalars plain numbers."""
    return {str(k): _clean(v) for k, v in figures.items()}


def _records(table: pd.DataFrame) -> list[dict[str, object]]:
    return [_cleaned(r) for r in table.to_dict("records")]


def _ids(questions: Any) -> list[str]:
    return [str(q) for q in questions]


def _counted(column: pd.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in column.value_counts().items()}


def _write_tables(out_dir: Path, tables: dict[str, pd.DataFrame]) -> None:
    """The comparison's tables as CSV (answers and names beginning with = + - @ stay text in a
    spreadsheet)."""
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, out_dir / "tables" / f"{name}.csv", index=False)


def compare_sides(
    a: Side,
    b: Side,
    out_dir: Path,
    *,
    n_permutations: int = 1000,
    k: int | None = 20,
    seed: int | None = None,
    browser: str | None = None,
    n_pairs: int = 1,
    tables_out: dict[str, pd.DataFrame] | None = None,
) -> dict[str, Any]:
    """Compare two sides and write the comparison folder; returns the `comparison.json` content.
    `n_pairs`: the pairs the run compares together (simultaneous intervals over them); `k`: the
    regressions and improvements listed (None: all); `tables_out`, when given, receives the
    tables written (`deltas`, `question_changes`, ...) for a caller that reports from them (the
    release gate, `cube.run.release`).
    Each listed regression / improvement links to its records in the judgment browser of each
    side's run (`_browsers`); `browser` (default: side B's regressions in its run's browser, when
    both sides are of the run holding `out_dir`) is the page's link to all of them."""
    from cube.diagnose.regressions import (
        check_answers,
        expected_counts,
        question_changes,
        ranked,
    )
    from cube.method.compare import compare_pair
    from cube.pages.browser import link
    from cube.run.evaluate import question_families

    ja, jb = _judged(a, b)
    tables = tuple(f"{s.paths.data_file('answers')} (system {s.system})" for s in (a, b))
    check_answers(ja.answers, tables[0])  # every bad row at once, naming the file, before any
    check_answers(jb.answers, tables[1])  # statistic
    ap = a.analysis
    corpus = a.load_if_present("corpus")
    cmp = compare_pair(
        *ja,
        *jb,
        ap,
        analysis_params_b=b.analysis,
        top_n_a=a.evaluated_top_n,  # the N each run evaluated its side at
        top_n_b=b.evaluated_top_n,
        labels=(a.label, b.label),
        n_permutations=n_permutations,
        seed=seed,
        dimensions=_dimension_names(a.params),
        clusters=question_families(ja.answers, corpus),  # the resampling unit: side A's families
        n_pairs=n_pairs,
    )
    confidence = ap.confidence if ap is not None else 0.95
    changes = question_changes(*ja, *jb, cmp.jury_judges, tables=tables, confidence=confidence)
    reg, imp = ranked(changes, "regressions", k), ranked(changes, "improvements", k)
    hrefs, browser_notes = _browsers((a, b), out_dir)
    if browser is None and hrefs[1] is not None and a.paths.root == b.paths.root:
        browser = link(hrefs[1], system=b.system, change="regression")
    listing = _Listing(a, b, ja, jb, a.load_if_present("questions"), corpus, hrefs)
    counts = expected_counts(changes, confidence)  # beyond the judges' noise, and by chance
    payload = {
        **cmp.headline(),
        "side_a": _side_record(a),
        "side_b": _side_record(b),
        "power": _cleaned(cmp.power),
        "settings": cmp.settings,
        "only_a": _ids(cmp.only_a),
        "only_b": _ids(cmp.only_b),
        "n_regressions": counts["regressions"],
        "n_improvements": counts["improvements"],
        "n_expected_by_chance": counts["expected"],
        "changes_by_chance": counts,
        "retrieval_changes": _counted(changes["retrieval_change"]),
        "regressions": _listed(reg, listing),
        "improvements": _listed(imp, listing),
        "deltas": _records(cmp.deltas),
        "n_holm": int(cmp.deltas["p_value"].notna().sum()),
        "browser": browser,
        "browser_notes": browser_notes,
    }
    out_dir = Path(out_dir)
    written = {
        "deltas": cmp.deltas,
        "question_changes": changes,
        "regressions": reg,
        "improvements": imp,
    }
    _write_tables(out_dir, written)
    if tables_out is not None:
        tables_out.update(written)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    _figures(cmp.deltas, changes, a.label, b.label, out_dir / "figures")
    (out_dir / "comparison.json").write_text(
        json.dumps(payload, ensure_ascii=False, indent=1, default=str), encoding="utf-8"
    )
    _page(payload, out_dir / "index.html")
    return payload


def _browsers(
    sides: tuple[Side, Side], out_dir: Path
) -> tuple[list[str | None], list[dict[str, str]]]:
    """Per side, the relative link from `out_dir` to its run's judgment browser: when the browser
    exists, or when `out_dir` lies inside the run (published with it); else None (no link).

    A link never leaves the folder holding `compare/` (the outputs folder for `cube compare`, the
    run for notebook 09): a run elsewhere would be reached by one `..` per level and then every
    folder name down to it, publishing the local layout (a home folder, a user name). Such a side
    gets no link and a note (second value: `{"side", "note"}` per side left unlinked)."""
    from cube.pages.browser import PAGE, href_from

    out_dir = Path(out_dir).resolve()
    common = out_dir.parent.parent  # <common>/compare/<a>__vs__<b>/
    links: list[str | None] = []
    notes: list[dict[str, str]] = []
    for name, side in zip("ab", sides, strict=True):
        root = side.paths.root.resolve()
        inside = out_dir.is_relative_to(root)
        if not (inside or (root / "report" / PAGE).exists()):
            links.append(None)
        elif root.is_relative_to(common):
            links.append(href_from(out_dir, root))
        else:
            links.append(None)
            notes.append(
                {
                    "side": name,
                    "note": (
                        f"side {name.upper()}'s run ({run_folder_name(root)}) is outside the "
                        "folder holding this comparison: its judgment browser is not linked (a "
                        f"link would spell out the local folder layout); open report/{PAGE} in "
                        "that run's folder"
                    ),
                }
            )
    return links, notes


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v.item() if hasattr(v, "item") else v


def _figures(deltas: pd.DataFrame, changes: pd.DataFrame, la: str, lb: str, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = deltas[deltas["metric"] != "recall_at_k"].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(d) + 1.2))
    y = range(len(d))[::-1]
    for yy, (_, r) in zip(y, d.iterrows(), strict=True):
        color = "black" if r["judge"] == "jury" else "tab:blue"
        ax.errorbar(
            r["delta"],
            yy,
            xerr=[[max(r["delta"] - r["lo"], 0)], [max(r["hi"] - r["delta"], 0)]]
            if pd.notna(r["lo"])
            else None,
            fmt="o",
            color=color,
            capsize=3,
        )
    ax.set_yticks(
        list(y), [f"{j} · {m}" for j, m in zip(d["judge"], d["metric"], strict=True)], fontsize=8
    )
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel(f"Δ ({lb} − {la}), points, with paired bootstrap interval")
    fig.tight_layout()
    fig.savefig(folder / "forest.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.scatter(
        changes["jury_a"],
        changes["jury_b"],
        s=10,
        alpha=0.5,
        c=changes["retrieval_change"]
        .map({"lost": "tab:red", "found": "tab:green"})
        .fillna("tab:blue"),
    )
    ax.plot([0, 10], [0, 10], color="grey", lw=0.8)
    ax.set_xlabel(f"{la}: jury rag score per question (mean over dimensions)")
    ax.set_ylabel(f"{lb}: jury rag score per question")
    fig.tight_layout()
    fig.savefig(folder / "scatter.png", dpi=110)
    plt.close(fig)


def _page(payload: dict[str, Any], path: Path) -> None:
    path.write_text(_template().render(c=payload), encoding="utf-8")


@functools.cache
def _template() -> Any:
    """The comparison page's template, compiled once per process: a run writes each pair's page
    twice (before and after the p-values are adjusted over the pairs), and compiling it was most
    of a page's cost."""
    from cube.pages.publish import page_environment  # the index's filters: numbers formatted once

    return page_environment().get_template("compare.html.j2")


def run_compare(
    spec_a: str | Path,
    spec_b: str | Path,
    *,
    system_a: str | None = None,
    system_b: str | None = None,
    outputs: Path | None = None,
    **kwargs: Any,
) -> Path:
    """`cube compare`: resolve both sides to their run root and write
    `outputs/compare/<a>__vs__<b>/`. When both name the same run (any spelling: params file, its
    folder, a subfolder), B defaults to the run's first system other than A's; a system compared
    with itself is refused."""
    from cube.config.project import resolve

    a = resolve_side(spec_a, system_a)
    same = run_root_of(spec_b) == a.paths.root
    b = resolve_side(spec_b, system_b, avoid=a.system if same and system_b is None else None)
    if a.paths.root == b.paths.root and a.system == b.system:
        raise ValueError(
            f"both sides are system {a.system!r} of run {a.run!r} (A {spec_a} and B {spec_b} are "
            f"the same run folder {a.paths.root}): a system compared with itself has Δ 0 by "
            "construction; name two different systems (--system-a / --system-b) or give two runs"
        )
    base = (
        Path(outputs)
        if outputs is not None
        else (resolve(a.params.outputs_dir) if a.params is not None else a.paths.root.parent)
    )
    out = base / "compare" / f"{side_name(a, b)}__vs__{side_name(b, a)}"
    compare_sides(a, b, out, **kwargs)
    return out


def run_root_of(spec: str | Path) -> Path:
    """The run root a side's spec (params file or folder) resolves to, without choosing a system."""
    from cube.config.project import resolve

    spec = Path(spec).expanduser()
    if spec.is_file():
        folder = spec.resolve().parent
        if spec.name == "params.yaml" and _is_run_root(folder):
            return folder
        params = load_params(spec)
        return RunPaths.for_params(params, resolve(params.outputs_dir)).root.resolve()
    return run_root(spec)


def compare_in_run(run: Any, *, n_permutations: int = 1000, k: int = 20) -> list[dict[str, Any]]:
    """Notebook 09 inside a run: the primary system vs each other system, written to
    `<run>/compare/<primary>__vs__<other>/` (published with the run). Returns the headlines."""
    names = _comparable(run, [s.name for s in run.params.systems])
    out = []
    for other in names[1:]:
        sides = [
            Side(
                run.params.run,
                s,
                run.paths,
                run.params,
                {x.name: x.top_n for x in run.params.systems}[s],
            )
            for s in (names[0], other)
        ]
        folder = run.paths.root / "compare" / f"{_slug(names[0])}__vs__{_slug(other)}"
        payload = compare_sides(
            *sides, folder, n_permutations=n_permutations, k=k, n_pairs=len(names) - 1
        )
        out.append(
            {
                key: payload[key]
                for key in (
                    "a",
                    "b",
                    "delta_cube",
                    "delta_cube_ci",
                    "delta_cube_ci_simultaneous",
                    "p_value",
                    "mde",
                    "n_questions",
                    "n_regressions",
                    "n_improvements",
                    "n_expected_by_chance",
                )
            }
            | {"page": str(folder.relative_to(run.paths.root) / "index.html")}
        )
    out = with_holm(out)
    for row in out:  # each page headlines the p adjusted over the pairs
        _readjust_page(run.paths.root / Path(row["page"]).parent, row)
    return out


def _comparable(run: Any, names: list[str]) -> list[str]:
    """The systems with at least one question of known retrieval, the primary first; the others
    (every call failed, or their retrieval was not measured: stage 02 names why) are left out of
    the comparisons with a line saying so. Without the primary, nothing is compared."""
    from cube.config.schema import known_retrieval

    answers = run.load("answers")
    rag = answers[answers["set"] == "rag"]
    known = set(rag.loc[known_retrieval(rag).to_numpy(), "system"].astype(str))
    left_out = [n for n in names if n not in known]
    for name in left_out:
        print(
            f"{name}: not compared: no question of known retrieval (its calls failed, or its "
            "retrieval was not measured: results.json's answers_failures and answers_unmeasured "
            "say why)"
        )
    return [n for n in names if n in known] if names and names[0] in known else []


def _readjust_page(folder: Path, row: dict[str, Any]) -> None:
    """Write the pairs' Holm adjustment into a comparison's `comparison.json` and page."""
    path = folder / "comparison.json"
    payload = json.loads(path.read_text(encoding="utf-8"))
    payload |= {"p_holm_pairs": row["p_holm_pairs"], "n_comparisons": row["n_comparisons"]}
    path.write_text(
        json.dumps(payload, ensure_ascii=False, indent=1, default=str), encoding="utf-8"
    )
    _page(payload, folder / "index.html")


def with_holm(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each comparison's p-value adjusted over all of them (Holm's step-down, `p_holm_pairs`; a
    comparison page's `p_holm_rows` adjusts over its own judge x metric rows instead) and the
    number of comparisons it is adjusted over: several pairs shown at once are several tests."""
    from cube.method.compare import holm

    adjusted = holm(
        [float("nan") if r.get("p_value") is None else float(r["p_value"]) for r in rows]
    )
    return [
        r | {"p_holm_pairs": None if p != p else p, "n_comparisons": len(rows)}
        for r, p in zip(rows, adjusted, strict=True)
    ]


def notebook_compare(
    run: Any,
    side_a: str | None = None,
    side_b: str | None = None,
    *,
    system_a: str | None = None,
    system_b: str | None = None,
    n_permutations: int = 1000,
    k: int = 20,
) -> pd.DataFrame:
    """Notebook 09: with no sides, the run's primary system vs each other system (inside the run,
    linked from `results.json` → `comparisons`); with sides, `cube compare side_a side_b`."""
    if side_a is None and side_b is None:
        rows = compare_in_run(run, n_permutations=n_permutations, k=k)
        from cube.run.record import ComparisonsRecord

        run.write_record(ComparisonsRecord(comparisons=rows))
    else:
        out = run_compare(
            side_a or run.paths.root,
            side_b or run.paths.root,
            system_a=system_a,
            system_b=system_b,
            n_permutations=n_permutations,
            k=k,
        )
        payload = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
        rows = [
            {
                key: payload[key]
                for key in (
                    "a",
                    "b",
                    "delta_cube",
                    "delta_cube_ci",
                    "delta_cube_ci_simultaneous",
                    "p_value",
                    "mde",
                    "n_questions",
                    "n_regressions",
                    "n_improvements",
                    "n_expected_by_chance",
                )
            }
            | {"page": str(out / "index.html")}
        ]
        rows = with_holm(rows)
    cols = [
        "a",
        "b",
        "delta_cube",
        "delta_cube_ci",
        "delta_cube_ci_simultaneous",
        "p_value",
        "p_holm_pairs",
        "n_comparisons",
        "mde",
        "n_questions",
        "n_regressions",
        "n_improvements",
        "n_expected_by_chance",
        "page",
    ]
    shown = run.table("comparisons", pd.DataFrame(rows, columns=cols))
    if side_a is not None or side_b is not None:
        return shown
    from cube.pages.browser import FROM_PAGES, link
    from cube.pages.display import table

    # inside the run: each comparison's page, and B's regressions in the judgment browser
    return table(
        shown,
        links={
            "page": lambda r: f"../{r['page']}",
            "n_regressions": lambda r: link(FROM_PAGES, system=r["b"], change="regression"),
            "n_improvements": lambda r: link(FROM_PAGES, system=r["b"], change="improvement"),
        },
    )
