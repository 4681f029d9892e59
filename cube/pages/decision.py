"""The decision page's text: the verdict badge and the decision as Markdown, with links into the
judgment browser. `cube.diagnose.assessment.assess` decides (it returns the typed record
`cube.diagnose.decision_record.Decision`); this module only writes what it decided. A decision
read from `results.json` (a dict) is read into the record first (`Decision.read`), and every
part of it is read by attribute. The decision's other homes: `cube.diagnose` (its package
docstring).
"""

from __future__ import annotations

from typing import Any

from cube.diagnose.decision_parts import SelfPreference
from cube.diagnose.decision_record import Decision
from cube.pages.browser import FROM_PAGES, link
from cube.pages.escape import escape_text


def retrieval_line(decision: Decision | dict[str, Any]) -> str:
    """One line on retrieval beyond R@k (R@1, near-duplicate confusion), '' when not known."""
    r = Decision.read(decision).retrieval_quality
    parts = []
    if r.r_at_1 is not None:
        parts.append(f"R@1 {r.r_at_1:.1%}")
    conf = r.near_duplicate_confusion
    if conf is not None and conf.rate is not None and conf.n:
        parts.append(
            f"near-duplicate confusion {conf.rate:.1%} ({conf.count} of {conf.n} "
            f"questions retrieved a sibling of the gold document first: "
            f"{conf.region} wrong region, "
            f"{conf.variant} wrong variant, {conf.duplicate} duplicate)"
        )
    return ("Retrieval: " + "; ".join(parts) + ".") if parts else ""


BADGE_COLOURS = {
    "excellent": "#1b5e20",
    "good": "#2e7d32",
    "fair": "#f9a825",
    "poor": "#c62828",
    "withheld": "#616161",
    "undetermined": "#616161",
}


def verdict_badge(name: str, label: str | None = None) -> str:
    """The verdict as an HTML badge (a coloured span), shown in Markdown and HTML alike; `label`
    (e.g. "good to excellent", "fair (provisional)") is the text, `name` the colour."""
    colour = BADGE_COLOURS.get(name, "#37474f")
    return (
        f'<span style="background:{colour};color:#fff;padding:2px 10px;border-radius:10px;'
        f'font-weight:bold">{escape_text((label or name).upper())}</span>'
    )


def headline(decision: Decision | dict[str, Any], questions: str = "") -> str:
    """The page's first line: the verdict badge, the CuBE score with its interval, and R@k. A
    withheld verdict's score is no verdict: it is shown greyed, in normal weight, as "not a
    verdict", with its interval (`withheld_score`). A sequential run adds what it judged
    (`questions`: `cube.pages.sequential.questions_phrase`, escaped here)."""
    d = Decision.read(decision)
    parts = [f"Verdict: {verdict_badge(d.verdict, d.verdict_label or None)}"]
    if d.cube_score is not None:
        ci = d.cube_ci
        interval = (
            f" ({d.confidence:.0%} interval {ci[0]:.1f}–{ci[1]:.1f})"
            if ci and d.confidence is not None
            else f" (interval {ci[0]:.1f}–{ci[1]:.1f})"
            if ci
            else " (no interval computed)"
        )
        parts.append(
            withheld_score(d.cube_score, interval)
            if d.verdict == "withheld"
            else f"CuBE score <b>{d.cube_score:.1f}</b>{interval}"
        )
    if d.recall_at_k is not None:
        parts.append(f"R@{escape_text(str(d.top_n or 'k'))} {d.recall_at_k:.1%}")
    if questions:
        parts.append(escape_text(questions))
    return '<p style="font-size:1.25em;line-height:1.6">' + " · ".join(parts) + "</p>"


WITHHELD_GREY = "#757575"


def withheld_score(score: float, interval: str) -> str:
    """The score of a withheld verdict: grey, normal weight and smaller, said to be no verdict."""
    return (
        f'<span class="withheld-score" style="color:{WITHHELD_GREY};font-weight:normal;'
        f'font-size:0.8em">CuBE {score:.1f}{interval}, not a verdict</span>'
    )


def self_preference_text(sp: SelfPreference | dict[str, Any]) -> str:
    """A judge's preference for its own model's answers apart from its leniency (`results.json`
    `audit`): the mean residual of its own model's answers with its interval
    (`cube.method.audit.self_preference`), or why it is not measurable."""
    sp = SelfPreference.model_validate(sp) if isinstance(sp, dict) else sp
    m, lo, hi = sp.self_preference, sp.self_preference_lo, sp.self_preference_hi
    n, c = sp.self_preference_items, sp.self_preference_control_items
    if m is None or not n or not c:
        return escape_text(
            sp.self_preference_note or "not measurable: no other judge scored the same answers"
        )
    ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else ""
    return (
        f"{m:+.2f} points{ci}: its scores of {n} answers of its own model above what the other "
        f"judges' scores predict, read on {c} answers of other models (leniency or a steeper "
        "scale alone gives 0)"
    )


def decision_markdown(
    decision: Decision | dict[str, Any], human_line: str = "", questions: str = ""
) -> str:
    """The decision as Markdown for the notebook, the decision first (every text in it from params
    or the run, names included, goes through `cube.pages.escape.escape_text`, which also disarms
    Markdown's link syntax):
    the verdict badge with the score, its interval and R@k, the sentence, the human-calibrated
    line when notebook 07 recorded one (`human_line`: `cube.diagnose.assessment.human_sentence`),
    the questions a sequential run judged in the headline (`questions`:
    `cube.pages.sequential.questions_phrase`), why a verdict was withheld, the judges used and
    excluded with reasons, the diagnostics, and one ordered list of what to do next."""
    esc = escape_text
    d = Decision.read(decision)
    lines = [headline(d, questions), "", f"**{esc(d.sentence)}**", ""]
    if human_line:
        lines += [esc(human_line), ""]
    if d.withheld_reasons:
        lines.append("Why the verdict is withheld:")
        lines += [f"- {esc(r)}" for r in d.withheld_reasons]
        lines.append("")
    lines += _jury_lines(d)
    lines += _diagnostics_lines(d)
    lines.append("What to do next, in order (one list; no two suggestions contradict):")
    lines.append("")
    lines += [f"{i}. {esc(s)}" for i, s in enumerate(d.suggestions, 1)]
    return "\n".join(lines)


def _jury_lines(d: Decision) -> list[str]:
    """The judges used (validated or not), those excluded with reasons, the evidence the gate read
    and each judge's self-preference; nothing when the decision names no judges."""
    if not d.judges_used and not d.n_judges and not d.judges_excluded:
        return []
    return [*_jury_members(d), *_judge_notes(d), ""]


def _jury_members(d: Decision) -> list[str]:
    """The jury's validated members, then those kept because no test could decide on this run
    (not because one passed them)."""
    tested, untested = _validated(d)
    lines = []
    if tested or not untested:
        n = len(tested) if untested else d.n_judges or len(d.judges_used)
        lines.append(f"Judges in the jury ({n}): {_names(tested) or 'none'}.")
    if untested:
        lines.append(
            f"Judges not validated ({len(untested)}): {_names(untested)}: the gate could not test "
            "them on this run (kept, and the verdict withheld)."
        )
    return lines


def _validated(d: Decision) -> tuple[list[str], list[str]]:
    """The jury's members a test validated, and those no test could validate on this run."""
    untested = [j for j in d.judges_not_validated if j in d.judges_used]
    return [j for j in d.judges_used if j not in untested], untested


def _names(judges: list[str]) -> str:
    return ", ".join(escape_text(j) for j in judges)


# the injection probe (issue 29): True obeys (excluded by the gate), False passes, None untested
_INJECTION_SAID = {True: "OBEYS injections (excluded)", False: "passes", None: "no verdict"}


def _judge_notes(d: Decision) -> list[str]:
    """One line per judge excluded (with why), per judge's evidence the gate read (issue 20), per
    judge whose model wrote the answers (its self-preference) and per judge the injection probe
    read."""
    esc = escape_text
    return [
        *(f"- excluded: {esc(j)} ({esc(why)})" for j, why in d.judges_excluded.items()),
        *(f"- evidence for {esc(j)}: {esc(e)}" for j, e in d.judge_evidence.items()),
        *(
            f"- self-preference of {esc(j)}: {self_preference_text(sp)}"
            for j, sp in d.self_preference.items()
        ),
        *(
            f"- injection probe, {esc(j)}: {_INJECTION_SAID[obeys]}"
            for j, obeys in d.injection.items()
        ),
    ]


def _diagnostics_lines(d: Decision) -> list[str]:
    """The diagnostics: synthetic data, retrieval, the weakest dimensions, the sweep, refusals and
    the failure patterns with examples, each followed by an empty line."""
    esc = escape_text
    lines = []
    if d.synthetic_data:
        lines += [f"> {esc(d.synthetic_data)}", ""]
    if retrieval_line(d):
        lines += [esc(retrieval_line(d)), ""]
    if d.weakest:
        lines.append(
            "Weakest dimensions: "
            + ", ".join(
                f"{esc(w.dimension)} ({w.score:.1f})" if w.score is not None else esc(w.dimension)
                for w in d.weakest
            )
            + "."
        )
        lines.append("")
    for sentence in (d.retrieval_sentence, d.sweep_sentence, d.refusal_sentence):
        if sentence:
            lines += [esc(sentence), ""]
    if d.patterns_sentence:
        lines += _patterns_lines(d)
    return lines


def _patterns_lines(d: Decision) -> list[str]:
    """The failure patterns' sentence and its top patterns, each with examples that open their rag
    judgments in the judgment browser."""
    esc = escape_text
    lines = [esc(d.patterns_sentence)]
    for t in d.failure_patterns.top if d.failure_patterns else []:
        examples = ", ".join(
            f'<a href="{esc(link(FROM_PAGES, system=d.system, set="rag", q=q))}">{esc(q)}</a>'
            for q in str(t.examples).split(", ")
            if q
        )
        lines.append(
            f"- {esc(t.pattern.replace('_', ' '))}: {t.count} ({t.share:.0%}), e.g. {examples}"
        )
    lines.append("")
    return lines
