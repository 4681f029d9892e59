"""The decision page's text: the verdict badge and the decision as Markdown, with links into the
judgment browser. `cube.diagnose.lta.assess` decides (it returns data); this module only writes
what it decided.
"""

from __future__ import annotations

from typing import Any

from cube.pages.browser import FROM_PAGES, link
from cube.pages.escape import escape_text


def retrieval_line(decision: dict[str, Any]) -> str:
    """One line on retrieval beyond R@k (R@1, near-duplicate confusion), '' when not known."""
    r = decision.get("retrieval_quality") or {}
    parts = []
    if r.get("r_at_1") is not None:
        parts.append(f"R@1 {r['r_at_1']:.1%}")
    conf = r.get("near_duplicate_confusion") or {}
    if conf.get("rate") is not None and conf.get("n"):
        parts.append(
            f"near-duplicate confusion {conf['rate']:.1%} ({conf['count']} of {conf['n']} "
            f"questions retrieved a sibling of the gold document first: "
            f"{conf.get('region', 0)} wrong region, "
            f"{conf.get('variant', 0)} wrong variant, {conf.get('duplicate', 0)} duplicate)"
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


def headline(decision: dict[str, Any]) -> str:
    """The page's first line: the verdict badge, the CuBE score with its interval, and R@k."""
    parts = [f"Verdict: {verdict_badge(decision['verdict'], decision.get('verdict_label'))}"]
    score = decision.get("cube_score")
    if isinstance(score, int | float) and score == score:
        ci = decision.get("cube_ci")
        conf = decision.get("confidence")
        interval = (
            f" ({conf:.0%} interval {ci[0]:.1f}–{ci[1]:.1f})"
            if ci and isinstance(conf, int | float)
            else f" (interval {ci[0]:.1f}–{ci[1]:.1f})"
            if ci
            else " (no interval computed)"
        )
        parts.append(f"CuBE score <b>{score:.1f}</b>{interval}")
    if isinstance(decision.get("recall_at_k"), int | float):
        parts.append(
            f"R@{escape_text(str(decision.get('top_n', 'k')))} {decision['recall_at_k']:.1%}"
        )
    return '<p style="font-size:1.25em;line-height:1.6">' + " · ".join(parts) + "</p>"


def self_preference_text(sp: dict[str, Any]) -> str:
    """A judge's preference for its own model's answers apart from its leniency (`results.json`
    `audit`): the mean residual of its own model's answers with its interval
    (`cube.method.audit.self_preference`), or why it is not measurable."""
    m, lo, hi, n, c = (
        sp.get(k)
        for k in (
            "self_preference",
            "self_preference_lo",
            "self_preference_hi",
            "self_preference_items",
            "self_preference_control_items",
        )
    )
    if m is None or not n or not c:
        return escape_text(
            sp.get("self_preference_note")
            or "not measurable: no other judge scored the same answers"
        )
    ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else ""
    return (
        f"{m:+.2f} points{ci}: its scores of {n} answers of its own model above what the other "
        f"judges' scores predict, read on {c} answers of other models (leniency or a steeper "
        "scale alone gives 0)"
    )


def decision_markdown(decision: dict[str, Any]) -> str:
    """The decision as Markdown for the notebook, the decision first (every text in it from params
    or the run, names included, goes through `cube.pages.escape.escape_text`, which also disarms
    Markdown's link syntax):
    the verdict badge with the score, its interval and R@k, the sentence, why a verdict was
    withheld, the judges used and excluded with reasons, the diagnostics, and one ordered list of
    what to do next."""
    esc = escape_text
    lines = [headline(decision), "", f"**{esc(decision['sentence'])}**", ""]
    if decision.get("human_sentence"):
        lines += [esc(decision["human_sentence"]), ""]
    if decision.get("withheld_reasons"):
        lines.append("Why the verdict is withheld:")
        lines += [f"- {esc(r)}" for r in decision["withheld_reasons"]]
        lines.append("")
    lines += _jury_lines(decision)
    lines += _diagnostics_lines(decision)
    lines.append("What to do next, in order (one list; no two suggestions contradict):")
    lines.append("")
    lines += [f"{i}. {esc(s)}" for i, s in enumerate(decision["suggestions"], 1)]
    return "\n".join(lines)


def _jury_lines(decision: dict[str, Any]) -> list[str]:
    """The judges used (validated or not), those excluded with reasons, the evidence the gate read
    and each judge's self-preference; nothing when the decision names no judges."""
    esc = escape_text
    used = decision.get("judges_used")
    if used is None:
        return []
    lines = []
    untested = [j for j in decision.get("judges_not_validated") or [] if j in used]
    tested = [j for j in used if j not in untested]
    if tested or not untested:
        n = len(tested) if untested else decision.get("n_judges", len(used))
        lines.append(
            f"Judges in the jury ({n}): " + (", ".join(esc(j) for j in tested) or "none") + "."
        )
    # kept because no test could decide on this run, not because one passed them
    if untested:
        lines.append(
            f"Judges not validated ({len(untested)}): "
            + ", ".join(esc(j) for j in untested)
            + ": the gate could not test them on this run (kept, and the verdict withheld)."
        )
    for j, why in (decision.get("judges_excluded") or {}).items():
        lines.append(f"- excluded: {esc(j)} ({esc(why)})")
    # what the gate read (issue 20)
    for j, evidence in (decision.get("judge_evidence") or {}).items():
        lines.append(f"- evidence for {esc(j)}: {esc(evidence)}")
    # a judge whose model wrote the answers
    for j, sp in (decision.get("self_preference") or {}).items():
        lines.append(f"- self-preference of {esc(j)}: {self_preference_text(sp)}")
    # the injection probe (issue 29): True obeys (excluded by the gate), False passes, None untested
    said = {True: "OBEYS injections (excluded)", False: "passes", None: "no verdict"}
    for j, obeys in (decision.get("injection") or {}).items():
        lines.append(f"- injection probe, {esc(j)}: {said[obeys]}")
    lines.append("")
    return lines


def _diagnostics_lines(decision: dict[str, Any]) -> list[str]:
    """The diagnostics: synthetic data, retrieval, the weakest dimensions, the sweep, refusals and
    the failure patterns with examples, each followed by an empty line."""
    esc = escape_text
    lines = []
    if decision.get("synthetic_data"):
        lines += [f"> {esc(decision['synthetic_data'])}", ""]
    if retrieval_line(decision):
        lines += [esc(retrieval_line(decision)), ""]
    if decision.get("weakest"):
        lines.append(
            "Weakest dimensions: "
            + ", ".join(f"{esc(w['dimension'])} ({w['score']:.1f})" for w in decision["weakest"])
            + "."
        )
        lines.append("")
    for key in ("retrieval_sentence", "sweep_sentence", "refusal_sentence"):
        if decision.get(key):
            lines += [esc(decision[key]), ""]
    if decision.get("patterns_sentence"):
        lines += _patterns_lines(decision)
    return lines


def _patterns_lines(decision: dict[str, Any]) -> list[str]:
    """The failure patterns' sentence and its top patterns, each with examples that open their rag
    judgments in the judgment browser."""
    esc = escape_text
    lines = [esc(decision["patterns_sentence"])]
    for t in (decision.get("failure_patterns") or {}).get("top", []):
        examples = ", ".join(
            f'<a href="{esc(link(FROM_PAGES, system=decision.get("system"), set="rag", q=q))}">'
            f"{esc(q)}</a>"
            for q in str(t["examples"]).split(", ")
            if q
        )
        lines.append(
            f"- {esc(t['pattern'].replace('_', ' '))}: {t['count']} ({t['share']:.0%}), "
            f"e.g. {examples}"
        )
    lines.append("")
    return lines
