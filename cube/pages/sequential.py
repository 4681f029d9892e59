"""What a sequential run did, in words and tables: the report's "Sequential evaluation" section.

`cube run --until-settled` judges the questions batch by batch and stops when every system's
anytime-valid confidence sequence for its jury CuBE lies inside one verdict band (`stop: verdict`)
or is narrow enough (`stop: width`), or when the question set ends; it writes what happened to
`results.json` under `sequential` (`read_record` reads it into `SequentialPage`, checking every
key at once: the pages' own reading of the run record's `cube.run.record.SequentialRecord`, since
pages/ may not import run/). A run without that key judged every question of its set (a
fixed-n run).

Here: `questions_phrase` ("on 80 of 300 questions (stopped early: ...)", plain text for the
terminal and the decision's headline; HTML callers escape it), `section_markdown` (the section's
text, or `FIXED_N_LINE` for a fixed-n run), `summary_table` (questions, calls and cost: this run,
the full set, saved and how many times fewer) and `final_table` (each system's final sequence
interval beside the fixed-n interval). The figure of the sequence's path is
`cube.pages.plots_sequential.sequence_path`. Names and reasons are outside text: the Markdown goes
through `cube.pages.escape.escape_text`; the tables are escaped when displayed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cube.pages.escape import escape_text

KEY = "sequential"  # the key of results.json the driver writes
FIXED_N_LINE = (
    "Fixed-n run: every question of the set was judged{n} (no sequential stopping; "
    "`cube run --until-settled` stops as soon as the verdict is settled)."
)
READING_NOTE = (
    "Read the sequential interval: it is built to hold at every look at which the run could stop, "
    "whenever it stopped (a group-sequential boundary for this question set's looks, or an "
    "anytime-valid confidence sequence, as the rule above says; an asymptotic "
    "guarantee{measured}). The fixed-n interval beside it is shown for comparison only: it is "
    "valid only at one number of questions fixed in advance; a run that stopped as soon as it "
    "looked settled would give a wrong verdict more often."
)
# what the project's simulations measured, per boundary (docs/measurements.md); none: no number
MEASURED = {
    # benchmarks/sequential_design.py, design `new` (spread, R@k of every question, spending):
    # 300 runs per world and truth, independent questions, families of 5, unequal families
    "spending": ": the project's simulations measured it covering the truth at every such look in "
    "95-99 % of runs for a nominal 95 % (independent questions, families of five, and families of "
    "unequal size whose score goes with their size; see the docs' Intervals page)",
    # benchmarks/sequential_coverage.py
    "anytime": ": the project's simulations measured it covering the truth at every such look in "
    "93-98 % of runs for a nominal 95 %, families included (see the docs' Intervals page)",
}
_REQUIRED = (
    "stop",
    "batch",
    "min_questions",
    "alpha",
    "questions_available",
    "questions_used",
    "stopped_early",
    "reason",
    "thresholds",
    "path",
    "final",
)
_PATH_KEYS = ("system", "quantity", "questions", "estimate", "lower", "upper")
_FINAL_KEYS = ("estimate", "lower", "upper", "fixed_lower", "fixed_upper", "settled")


def _float(value: Any) -> float:
    """A figure of the record as a float; None (JSON's NaN) is NaN."""
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class SequentialPage:
    """`results.json` `sequential` as the pages draw it, written by the sequential driver (see the
    module docstring).

    `path` holds one dict per look and quantity ("CuBE" for the jury, "CuBE · <judge>", "R@k");
    `final` maps each system to its last look (`estimate`, `lower`, `upper`, `fixed_lower`,
    `fixed_upper`, `settled`); `calls` and `cost_usd` hold `used`, `full_set` and `saved` (None
    when not known)."""

    stop: str
    batch: int
    min_questions: int
    alpha: float
    questions_available: int
    questions_used: int
    stopped_early: bool
    reason: str
    thresholds: dict[str, float]
    path: list[dict[str, Any]]
    final: dict[str, dict[str, Any]]
    calls: dict[str, Any] | None = None
    cost_usd: dict[str, Any] | None = None
    max_width: float | None = None
    min_questions_why: str | None = None
    systems: str | None = None  # analysis.sequential.systems: all | primary (None: older records)
    watched: list[str] | None = None  # the systems whose intervals could stop the run
    design: dict[str, Any] | None = None  # order, boundary, recall, critical (None: older records)

    def watched_systems(self) -> list[str]:
        """The systems whose settled intervals stopped (or could have stopped) the run: those
        the record names, every system of `final` when it names none (`systems: all`)."""
        return [str(s) for s in self.watched] if self.watched else [str(s) for s in self.final]

    def primary_only(self) -> bool:
        """Whether the run waited only for its primary system (`systems: primary`)."""
        return self.systems == "primary"

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> SequentialPage:
        """The record from its JSON form; a ValueError names every missing or malformed key."""
        problems = record_problems(raw)
        if problems:
            raise ValueError("results.json sequential: " + "; ".join(problems))
        optional = (
            "calls", "cost_usd", "max_width", "min_questions_why", "systems", "watched", "design"
        )  # fmt: skip
        return cls(**{k: raw[k] for k in _REQUIRED}, **{k: raw.get(k) for k in optional})

    def path_of(self, system: str, quantity: str = "CuBE") -> pd.DataFrame:
        """One system's looks at one quantity, by questions judged (None read as NaN)."""
        rows = [p for p in self.path if p["system"] == system and p["quantity"] == quantity]
        frame = pd.DataFrame(rows, columns=[*_PATH_KEYS, "fixed_lower", "fixed_upper"])
        numeric = ["questions", "estimate", "lower", "upper", "fixed_lower", "fixed_upper"]
        frame[numeric] = frame[numeric].apply(pd.to_numeric, errors="coerce")
        return frame.sort_values("questions", kind="stable").reset_index(drop=True)


def record_problems(raw: Any) -> list[str]:
    """Every problem of a `sequential` record at once, each naming the key and what was expected."""
    if not isinstance(raw, Mapping):
        return [f"expected a mapping, got {type(raw).__name__}"]
    return [
        *(f"missing key {k!r}" for k in _REQUIRED if k not in raw),
        *_count_problems(raw),
        *_path_problems(raw),
        *_final_problems(raw),
        *_usage_problems(raw),
    ]


def _count_problems(raw: Mapping[str, Any]) -> list[str]:
    """The question counts: whole numbers >= 0."""
    out = []
    for key in ("batch", "min_questions", "questions_available", "questions_used"):
        v = raw.get(key)
        if key in raw and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            out.append(f"{key} is {v!r}, expected a whole number >= 0")
    return out


def _lacking(entry: Any, keys: tuple[str, ...]) -> list[str]:
    """The keys a path or final entry lacks (all of them when it is not a mapping)."""
    return [k for k in keys if not isinstance(entry, Mapping) or k not in entry]


def _path_problems(raw: Mapping[str, Any]) -> list[str]:
    """`path`: a list of looks, each with its keys."""
    if not isinstance(raw.get("path"), list):
        return ["path is not a list of looks"] if "path" in raw else []
    return [
        f"path[{i}] lacks {', '.join(missing)}"
        for i, look in enumerate(raw["path"])
        if (missing := _lacking(look, _PATH_KEYS))
    ]


def _final_problems(raw: Mapping[str, Any]) -> list[str]:
    """`final`: a mapping system -> its last look, each with its keys."""
    if not isinstance(raw.get("final"), Mapping):
        return ["final is not a mapping system -> last look"] if "final" in raw else []
    return [
        f"final[{system!r}] lacks {', '.join(missing)}"
        for system, last in raw["final"].items()
        if (missing := _lacking(last, _FINAL_KEYS))
    ]


def _usage_problems(raw: Mapping[str, Any]) -> list[str]:
    """`calls` and `cost_usd`: null or a mapping of used, full_set, saved."""
    return [
        f"{key} is {v!r}, expected null or a mapping of used, full_set, saved"
        for key in ("calls", "cost_usd")
        if (v := raw.get(key)) is not None and not isinstance(v, Mapping)
    ]


def read_record(results: Path | Mapping[str, Any]) -> SequentialPage | None:
    """The sequential record of a run (its `results.json` path or its parsed content); None for a
    fixed-n run (no `sequential` key, or no results.json yet)."""
    if isinstance(results, Path):
        if not results.exists():
            return None
        results = json.loads(results.read_text(encoding="utf-8"))
    raw = results.get(KEY)
    return None if raw is None else SequentialPage.read(raw)


def _stop_words(record: SequentialPage) -> str:
    """Why the run ended, without the driver's "stopped at N: " or "question set ended at N: "
    prefix (the sentences around it say N and how the run ended)."""
    reason = str(record.reason)
    for prefix in ("stopped at", "question set ended at"):
        head = f"{prefix} {record.questions_used}: "
        if reason.startswith(head):
            return reason[len(head) :]
    return reason


def questions_phrase(record: SequentialPage | None) -> str:
    """'on 80 of 300 questions (stopped early: every system's interval lies inside one verdict
    band)', or 'on 300 of 300 questions (the set ended before the verdict settled: bm25's
    interval 57.8-62.1 spans 60)'; '' for a fixed-n run. Plain text: a page escapes it."""
    if record is None:
        return ""
    watched = [record.final.get(s, {}) for s in record.watched_systems()]
    settled = bool(watched) and all(bool(f.get("settled")) for f in watched)
    how = (
        "stopped early"
        if record.stopped_early
        else "settled only at the last look"
        if settled
        else "the set ended before the verdict settled"
    )
    read = (  # the bootstrap interval is fixed-n: after a stop the data chose, it is too narrow
        f"; after a stop chosen by the data, read the sequential interval: "
        f"{_final_intervals(record)}"
        if record.stopped_early
        else ""
    )
    return (
        f"on {record.questions_used:,} of {record.questions_available:,} questions "
        f"({how}: {_stop_words(record)}{unsettled_bands(record)}{read})"
    )


def unsettled_bands(record: SequentialPage) -> str:
    """Under `stop: width`, every system whose final interval still spans a verdict edge with the
    bands it spans, '; the verdict is not settled: bm25 61.6-82.2 is good or excellent' ('' when
    every interval lies in one band, or under `stop: verdict`): a width stop must not read as a
    settled verdict (issue 40, item 3)."""
    from cube.method.sequential import bands_named, thresholds_inside

    if record.stop != "width":
        return ""
    open_, thresholds = [], dict(record.thresholds)
    for system, f in record.final.items():
        lo, hi = _float(f.get("lower")), _float(f.get("upper"))
        edges = thresholds_inside(lo, hi, thresholds) if lo == lo and hi == hi else []
        if edges:  # the terminal's sentence (`bands_named`): one implementation of it
            named = bands_named(edges, thresholds)
            open_.append(f"{system} {_number(lo)}-{_number(hi)} is {named}")
    return f"; the verdict is not settled: {'; '.join(open_)}" if open_ else ""


def _final_intervals(record: SequentialPage) -> str:
    """Each system's final sequential interval, 'bm25 63.4-79.2'."""
    return ", ".join(
        f"{system} {_number(f.get('lower'))}-{_number(f.get('upper'))}"
        for system, f in record.final.items()
    )


def _times_fewer(full: Any, used: Any) -> float:
    """How many times fewer than the full set (full / used); NaN when either is unknown or 0."""
    full_f, used_f = _float(full), _float(used)
    ok = math.isfinite(full_f) and math.isfinite(used_f) and used_f > 0
    return full_f / used_f if ok else float("nan")


def _saved(row: Mapping[str, Any] | None) -> tuple[float, float, float]:
    """(used, full set, saved) of a calls or cost mapping, NaN where unknown; `saved` computed
    from the other two when the record leaves it out."""
    row = row or {}
    used, full = _float(row.get("used")), _float(row.get("full_set"))
    saved = _float(row.get("saved"))
    if not math.isfinite(saved) and math.isfinite(used) and math.isfinite(full):
        saved = full - used
    return used, full, saved


def summary_table(record: SequentialPage) -> pd.DataFrame:
    """Questions, LLM calls and cost (USD): this run, the full set, saved, and how many times
    fewer; NaN (shown "n/a") where the record does not know (e.g. no price set for a model)."""
    q_used, q_full = float(record.questions_used), float(record.questions_available)
    rows = [
        ("questions", q_used, q_full, q_full - q_used),
        ("calls (as cube plan counts them)", *_saved(record.calls)),
        ("cost (USD)", *_saved(record.cost_usd)),
    ]
    frame = pd.DataFrame(rows, columns=["what", "this_run", "full_set", "saved"])
    frame["times_fewer"] = [_times_fewer(f, u) for _, u, f, _ in rows]
    return frame


def sequential_cube_is(record: SequentialPage, system: str) -> str:
    """What the driver's CuBE of `system` (its sequential interval's estimate) is: 'W of the 80
    judged x R@k of all 300' under `recall: all`, else 'W x R@k of the 80 judged'."""
    how = ((record.design or {}).get("recall") or {}).get(system)
    n, m = record.questions_used, record.questions_available
    if how == "all":
        return f"W of the {n:,} judged x R@k of all {m:,} (sequential)"
    return f"W x R@k of the {n:,} judged (sequential)"


def report_cube_is(record: SequentialPage) -> str:
    """What the report's CuBE (Table 4, its bootstrap interval, the verdict) is."""
    return f"W x R@k of the {record.questions_used:,} reached (Table 4, bootstrap)"


def final_table(record: SequentialPage, results: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Each system's jury CuBE at the stop: the driver's estimate (`cube`, what `cube_is` says),
    the sequential interval (the one to read) and the fixed-n interval (for comparison), whether
    it had settled; and beside it the report's CuBE (`report_cube`, from `results`, each system's
    `CubeResult`: NaN without them), which takes R@k from the questions reached only
    (`report_cube_is`): the two differ whenever the driver took R@k from every question."""

    def reported(system: str) -> float:
        r = (results or {}).get(system)
        return float(r.jury_cube()) if r is not None else float("nan")

    rows = [
        {
            "system": str(system),
            "questions": record.questions_used,
            "cube": _float(last.get("estimate")),
            "cube_is": sequential_cube_is(record, str(system)),
            "sequence_lower": _float(last.get("lower")),
            "sequence_upper": _float(last.get("upper")),
            "fixed_n_lower": _float(last.get("fixed_lower")),
            "fixed_n_upper": _float(last.get("fixed_upper")),
            "report_cube": reported(str(system)),
            "report_cube_is": report_cube_is(record),
            "settled": bool(last.get("settled")),
        }
        for system, last in record.final.items()
    ]
    return pd.DataFrame(rows)


def _two_cubes(record: SequentialPage) -> str:
    """The paragraph that tells the two CuBEs apart ('' when the driver's R@k is the report's:
    every system's from the questions judged)."""
    every = [s for s, how in ((record.design or {}).get("recall") or {}).items() if how == "all"]
    if not every:
        return ""
    n, m = record.questions_used, record.questions_available
    return (
        f"Two CuBEs: the sequential interval's estimate (column `cube` of the table below) is W "
        f"of the {n:,} questions judged x R@k of all {m:,} questions of the set (their retrieval "
        f"cost no call) for {escape_text(', '.join(map(str, every)))}; the CuBE, its bootstrap "
        f"interval, R@k and the verdict in the rest of this report (`report_cube`) are W x R@k of "
        f"the {n:,} questions reached. The sequential interval is the one a stop was decided on; "
        "the two estimates differ by R@k's sampling over the questions not reached."
    )


def _rule_words(record: SequentialPage) -> str:
    """The stop rule in words (Markdown: a system's name escaped), naming the watched system under
    `systems: primary`."""
    whose = "every system's interval"
    if record.primary_only():
        whose = (
            f"the primary system {escape_text(', '.join(record.watched_systems()))}'s interval "
            "(analysis.sequential.systems: primary; the other systems' last intervals are "
            "reported, marked not settled where they are not)"
        )
    design = _design_words(record)
    if record.stop == "width":
        both = (
            " and lies inside one verdict band" if (record.design or {}).get("require_band") else ""
        )
        return f"stop once {whose} is at most {_number(record.max_width)} points wide{both}{design}"
    return f"stop once {whose} lies inside one verdict band{design}"


ORDER_WORDS = {
    "spread": "each family's questions spread over the run (systematic sampling within families)",
    "families": "whole families per batch",
}
BOUNDARY_WORDS = {
    "spending": "a group-sequential boundary for this question set's looks (Lan-DeMets "
    "alpha-spending, Pocock-type)",
    "pocock": "a group-sequential boundary for this question set's planned looks (Pocock's "
    "constant)",
    "anytime": "anytime-valid confidence sequences",
}


def _design_words(record: SequentialPage) -> str:
    """The order and the boundary in words ('' for a record from before issue 40)."""
    d = record.design or {}
    if not d:
        return ""
    order = ORDER_WORDS.get(str(d.get("order")), str(d.get("order")))
    bound = BOUNDARY_WORDS.get(str(d.get("boundary")), str(d.get("boundary")))
    every = [escape_text(str(s)) for s, how in (d.get("recall") or {}).items() if how == "all"]
    rk = f"; R@k of {', '.join(every)} from every question's retrieval" if every else ""
    return f" ({order}; {bound}{rk})"


def _number(value: Any, digits: int = 1) -> str:
    v = _float(value)
    return f"{v:,.{digits}f}" if math.isfinite(v) else "n/a"


def _savings_sentence(record: SequentialPage) -> str:
    """Calls and cost against the full set, 'n/a' where not known."""
    used, full, saved = _saved(record.calls)
    if math.isfinite(used) and math.isfinite(full):
        x = _times_fewer(full, used)
        times = f", {x:.1f}x fewer" if math.isfinite(x) and saved > 0 else ""
        calls = (
            f"It needed {used:,.0f} calls where the full set needs {full:,.0f}: {saved:,.0f} "
            f"saved{times} (system answers, judgments and the audit, counted as `cube plan` counts "
            "them: offline scorers' and cached calls included, so not all were sent)."
        )
    else:
        calls = "Calls saved: n/a (the run did not count them)."
    c_used, c_full, c_saved = _saved(record.cost_usd)
    cost = (
        f"Cost {_number(c_used, 2)} USD where the full set costs {_number(c_full, 2)} USD: "
        f"{_number(c_saved, 2)} USD saved."
        if math.isfinite(c_saved)
        else "Cost saved: n/a (no price per token is set for a model, or the cost was not counted)."
    )
    return f"{calls} {cost}"


def reading_measured(record: SequentialPage) -> str:
    """What the simulations measured for the record's boundary ('' for one not measured, and for
    a record from before issue 40, whose boundary is the anytime sequence)."""
    boundary = str((record.design or {}).get("boundary") or "anytime")
    return MEASURED.get(boundary, "")


def section_markdown(record: SequentialPage | None, n_questions: int | None = None) -> str:
    """The report's "Sequential evaluation" section as Markdown (its heading, what the run did,
    what it saved and how to read the intervals); for a fixed-n run (`record` None) the one line
    `FIXED_N_LINE` (with the number of questions when given). Every outside text is escaped."""
    esc = escape_text
    if record is None:
        n = f" ({n_questions:,} questions)" if n_questions else ""
        return FIXED_N_LINE.format(n=n)
    ended = "stopped early" if record.stopped_early else "ran until its question set ended"
    ended += f": {esc(_stop_words(record))}"
    why = f": {esc(record.min_questions_why)}" if record.min_questions_why else ""
    lines = [
        "## Sequential evaluation",
        "",
        f"The run judged **{record.questions_used:,} of {record.questions_available:,} "
        f"questions**, {record.batch} at a time in a seeded order, with the rule: "
        f"{_rule_words(record)} (never before {record.min_questions} questions{why}; "
        f"{100 * (1 - float(record.alpha)):g} % confidence sequences). "
        f"It {ended}.",
        "",
        esc(_savings_sentence(record)),
        "",
        READING_NOTE.format(measured=reading_measured(record)),
    ]
    if _two_cubes(record):
        lines += ["", _two_cubes(record)]
    return "\n".join(lines)
