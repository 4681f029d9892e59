"""What `cube run` prints when it ends: the result in the terminal, read from the run's
`results.json` (its `decision`, written by notebook 06: `cube.run.pipeline.decision`).

One line per system (`decision.systems`, the primary first): CuBE with its interval, R@k at the
system's TOP-N, and the verdict, or WITHHELD with the first reason (cut at `REASON_CHARS`; the
report's decision page has them all); then the run's calls against its plan
(`cube.run.reconcile`, when the run folder recorded both; else the calls alone) and the cost
(judging serves every system, so they are the run's, not one system's) and the report's path.
`withheld` says whether the primary system's verdict was withheld: `cube run` then exits 3.
With a baseline, `with_release` combines that code with the release gate's (`cube.run.release`:
0 release, 4 hold: regression, 3 undecided): a hold wins (exit 4, the regression is shown), then
a withheld verdict or an undecided release (3), else 0.
A sequential run (`cube run --until-settled`) says after the systems how many questions it judged
and why it stopped (`read_questions`: `cube.pages.sequential.questions_phrase`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cube.diagnose.decision_record import Decision, SystemFigures
from cube.run.record import read_record


def read_decision(results: Path) -> Decision | None:
    """The `decision` of a run's results.json (None when there is none: stage 06 did not run)."""
    return read_record(results).decision.decision


def _typed(decision: Decision | Mapping[str, Any] | None) -> Decision | None:
    """The decision as its record (a mapping: its results.json form); None for none."""
    if not decision:
        return None
    return Decision.read(dict(decision) if isinstance(decision, Mapping) else decision)


def read_questions(results: Path) -> str:
    """'on 80 of 300 questions (stopped early: ...)' for a sequential run, '' for a fixed-n one
    (its results.json has no `sequential` record)."""
    from cube.pages.sequential import questions_phrase, read_record

    return questions_phrase(read_record(results))


FAILURE_LINES = 3  # distinct failure reasons shown per system (results.json has them all)


def failure_lines(results: Path) -> list[str]:
    """Per system whose calls to it failed (stage 02's `answers_failures`): how many of how many,
    then its most frequent reasons (status and a short body excerpt) with their counts ([] when
    none). A system whose retrieval was not measured says so on its own line (`system_line`: the
    first reason of its withheld verdict)."""
    lines = []
    for system, f in (read_record(results).answers.answers_failures or {}).items():
        lines.append(f"{system}: {f.failed} of {f.calls} calls to the system failed")
        reasons = f.reasons
        lines += [f"  {r.count} x {r.reason}" for r in reasons[:FAILURE_LINES]]
        if len(reasons) > FAILURE_LINES:
            lines.append(f"  ... {len(reasons) - FAILURE_LINES} other reason(s) in results.json")
    return lines


def withheld(decision: Decision | Mapping[str, Any] | None) -> bool:
    """Whether the primary system's verdict was withheld (judging failed, or another reason of
    `cube.diagnose.verdict.withheld_reasons`)."""
    d = _typed(decision)
    return d is not None and (d.verdict == "withheld" or d.judging_failed)


REASON_CHARS = 240  # a withheld verdict's first reason as the summary shows it (the report: whole)


def _number(value: Any, fmt: str) -> str:
    """A figure, or n/a when there is none (None, NaN: e.g. CuBE undefined)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, fmt)


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1].rstrip() + "…"


def system_line(entry: SystemFigures, width: int, k: Any = None) -> str:
    """One system: `name  CuBE 71.3 [66.6, 75.7]  R@8 81.7 %  good`, R@ at the system's own
    TOP-N (`entry.top_n`; `k` when the entry has none, else a plain R@k: never another
    system's N)."""
    head = f"{entry.system or '?':<{width}}  {_figures_text(entry, k)}"
    reasons = entry.withheld_reasons
    if entry.verdict == "withheld" or reasons:
        return f"{head}  WITHHELD: {_short(str(reasons[0])) if reasons else 'no reason recorded'}"
    return f"{head}  {_verdict_text(entry)}"


def _figures_text(entry: SystemFigures, k: Any) -> str:
    """`CuBE 71.3 [66.6, 75.7]  R@8 81.7 %` ("n/a" for a figure not recorded)."""
    ci = entry.cube_ci or [None, None]
    interval = f"[{_number(ci[0], '.1f')}, {_number(ci[1], '.1f')}]"
    recall = entry.recall_at_k
    return f"CuBE {_number(entry.cube_score, '.1f')} {interval}  R@{entry.top_n or k or 'k'} " + (
        "n/a" if recall is None else f"{100 * recall:.1f} %"
    )


def _verdict_text(entry: SystemFigures) -> str:
    label = entry.verdict_label or entry.verdict or "no verdict"
    if entry.provisional:
        label += f" (provisional: {entry.provisional_reason or 'see the report'})"
    return label


def outcome_lines(
    decision: Decision | Mapping[str, Any] | None, report: str, questions: str = "", calls: str = ""
) -> list[str]:
    """The summary `cube run` prints (`report`: the report's path as shown; `questions`: what a
    sequential run judged, `read_questions`; `calls`: the plan and the run's calls reconciled,
    `cube.run.reconcile.read_calls_line`, then the cost on its own line)."""
    d = _typed(decision)
    if d is None:  # notebook 06 has not run (e.g. `--only 00`): the log named the report
        return []
    systems: list[SystemFigures] = list(d.systems) or [d]
    width = max(len(s.system or "?") for s in systems)
    # an entry without its own top_n (a record written before it had one) borrows the decision's
    # only when it is the decision's system: the primary's N on another system was a wrong label
    lines = [system_line(s, width, d.top_n if not i else None) for i, s in enumerate(systems)]
    if len(systems) > 1:
        lines[0] += "   <- the decision is about this system"
    if questions:
        lines.append(f"judged {questions}")
    cost, currency = d.cost_this_run, d.currency
    cost_text = (
        f"cost this run {_number(cost, '.2f')} {currency}".rstrip()
        + f" (all calls {_number(d.cost_total, '.2f')} {currency})".rstrip()
    )
    if calls:  # the plan and the run's calls in the plan's words (`cube.run.reconcile`)
        lines += [calls, cost_text[0].upper() + cost_text[1:]]
    else:
        lines.append(f"calls: {d.calls_total} ({d.calls_cached} from the cache), {cost_text}")
    lines.append(f"report: {report}")
    return lines


EXIT_RELEASED, EXIT_WITHHELD, EXIT_HELD = 0, 3, 4  # with EXIT_WITHHELD also "release undecided"


def with_release(verdict_code: int, gate_code: int) -> int:
    """`cube run`'s exit code with a baseline: 4 when the release is held for a regression
    (whatever the verdict), else the verdict's code when not 0 (3: withheld), else the gate's
    (0 released, 3 undecided)."""
    if gate_code == EXIT_HELD:
        return EXIT_HELD
    return verdict_code or gate_code
