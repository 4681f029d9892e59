"""The release gate's report (`cube.run.release` hands it over): `summary.md`, `junit.xml`,
`decision.json` and the terminal's lines. Computes nothing.

Outside text (run, system and category names, question ids and texts, and the reasons, which
quote names) is untrusted wherever it goes:

- **summary.md** is read as a CI job summary or posted as a pull-request comment, where Markdown,
  HTML and `@mentions` are live. Names and question texts are written as code spans
  (`code_span`: a backtick fence longer than any run of backticks inside, line breaks and control
  characters as spaces, `|` escaped in a table cell as GFM requires), inside which nothing is
  markup, no HTML and no mention; the reasons, our sentences quoting names, go through
  `cube.pages.escape.escape_text` with the remaining Markdown characters and `@` as character
  references (`md_text`).
- **junit.xml** is built by ElementTree (which escapes `& < > "`), with the characters XML 1.0
  forbids (control characters, lone surrogates) removed first (`xml_text`).
- **the terminal** gets no control character (no ANSI escape sequence can recolour or rewrite
  the screen): `plain`.

JUnit: one `testsuite` "release gate" of one test case per condition of the rule (a `failure`
when the condition holds the release, `skipped` when it is undetermined) and one `testsuite`
"regressed questions" of one failing test case per regressed question (its id and text, both
scores, or the lost gold document when the scores are equal: `regression_change`), readable by
Jenkins, GitLab and GitHub Actions (the Ant/Jenkins JUnit format).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from cube.pages.escape import escape_text

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# invisible bidi and format characters (they reorder or hide what a reader sees: "Trojan
# source") and lone surrogates (no UTF-8 encoding: writing them raises): removed everywhere
_INVISIBLE = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_XML_BAD = re.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MD_EXTRA = {c: f"&#{ord(c)};" for c in "`*_~#|@!()$"}  # $: GitHub's math
DECISION_LABEL = {"release": "RELEASE", "hold: regression": "HOLD: REGRESSION"}


def visible(text: Any) -> str:
    """`text` without bidi/format characters and lone surrogates (`_INVISIBLE`)."""
    return _INVISIBLE.sub("", "" if text is None else str(text))


def plain(text: Any) -> str:
    """Text for the terminal: control characters (escape sequences, line breaks) as spaces, bidi
    and format characters and lone surrogates removed."""
    return _CONTROL.sub(" ", visible(text))


def code_span(text: Any, in_table: bool = True) -> str:
    """`text` as a Markdown code span, literal whatever it holds (the module docstring); n/a for
    None."""
    if text is None:
        return "n/a"
    s = plain(text).strip()
    if not s:
        return "(empty)"
    if in_table:
        s = s.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_text(text: Any) -> str:
    """Our sentences quoting outside text: every Markdown and HTML character as a reference."""
    return "".join(_MD_EXTRA.get(ch) or escape_text(ch) for ch in plain(text))


def xml_text(text: Any) -> str:
    """Text XML 1.0 allows (ElementTree escapes the rest when it writes)."""
    return _XML_BAD.sub("\ufffd", visible(text))


def _n(v: Any, digits: int = 1, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def _pct(v: Any, signed: bool = False) -> str:
    return "n/a" if v is None else (f"{100 * v:+.1f}" if signed else f"{100 * v:.1f} %")


def _label(decision: str) -> str:
    return DECISION_LABEL.get(decision, decision.upper())


LOST_GOLD = "gold document no longer retrieved"  # cube.run.release.regression_cause


def _cause(q: dict[str, Any]) -> str:
    """A regressed question's cause (older reports without one: from its retrieval change)."""
    if q.get("cause"):
        return str(q["cause"])
    return LOST_GOLD if q.get("retrieval_change") == "lost" else "jury score dropped"


def _same_score(q: dict[str, Any]) -> bool:
    return _n(q.get("baseline_score"), 2) == _n(q.get("score"), 2)


def regression_change(q: dict[str, Any], before: str = "", after: str = "") -> str:
    """A regressed question's change in words: both scores, and the lost gold document when that
    is the cause; equal scores are not shown as a change ("gold document no longer retrieved,
    jury score 7.50 unchanged")."""
    cause = _cause(q)
    if _same_score(q):
        return f"{cause}, jury score {_n(q.get('score'), 2)} unchanged"
    scores = f"{before}{_n(q.get('baseline_score'), 2)} -> {after}{_n(q.get('score'), 2)}"
    return f"{scores}, {cause}" if cause == LOST_GOLD else scores


# ------------------------------------------------------------------------------------ summary.md
def summary_markdown(r: dict[str, Any]) -> str:
    """The article's report as Markdown (`report/summary.md`)."""
    base = r.get("baseline") or {}
    lines = [
        f"## CuBE release gate: {_label(r['decision'])} (exit code {r.get('exit_code')})",
        "",
        f"Version {code_span(r.get('run'))} (system {code_span(r.get('system'))}) against the "
        f"baseline {code_span(base.get('run'))} (system {code_span(base.get('system'))}) · "
        f"{md_text(r.get('date'))}",
        "",
    ]
    if "overall" in r:
        lines += _figure_sections(r)
    lines += [
        f"### Decision: {_label(r['decision'])}",
        "",
        f"Margin {r.get('margin'):g} CuBE points (the rule: docs/explanation/release-gate.md).",
        "",
        *[f"- {md_text(x)}" for x in r.get("reasons") or []],
        "",
        "| condition | status | detail |",
        "|---|---|---|",
        *[
            f"| {code_span(c['name'])} | {c['status']} | {md_text(c['text'])} |"
            for c in r.get("conditions") or []
        ],
        "",
    ]
    return "\n".join(lines)


def _figure_sections(r: dict[str, Any]) -> list[str]:
    o, rec = r["overall"], r.get("recall") or {}
    lines = [
        f"Questions: {r['n_questions']} in common ({r.get('n_only_baseline', 0)} only in the "
        f"baseline, {r.get('n_only_run', 0)} only in this version)",
        "",
        "| | baseline | this version | Δ | interval |",
        "|---|---|---|---|---|",
        f"| CuBE (jury) | {_n(o.get('a'))} | {_n(o.get('b'))} | {_n(o.get('delta'), 2, True)} | "
        f"{_bounds(r)} (the rule's bounds) |",
        f"| R@{rec.get('k') or 'k'} | {_pct(rec.get('a'))} | {_pct(rec.get('b'))} | "
        f"{_pct(rec.get('delta'), True)} points | [{_pct(rec.get('lo'), True)}, "
        f"{_pct(rec.get('hi'), True)}] |",
    ]
    lines.append(
        f"| CuBE, compare's interval | | | | [{_n(o.get('lo'), 2)}, {_n(o.get('hi'), 2)}] "
        "(percentile) |"
    )
    ref = r.get("refusal")
    if ref:
        lines.append(
            f"| refusal accuracy | {_pct(ref.get('baseline'))} | {_pct(ref.get('run'))} | | |"
        )
    lines += ["", "### Per dimension (jury, normalised, points)", ""]
    lines += ["| dimension | baseline | this version | Δ | interval |", "|---|---|---|---|---|"]
    for name, d in (r.get("dimensions") or {}).items():
        lines.append(
            f"| {code_span(name)} | {_n(d.get('a'))} | {_n(d.get('b'))} | "
            f"{_n(d.get('delta'), 2, True)} | [{_n(d.get('lo'), 2)}, {_n(d.get('hi'), 2)}] |"
        )
    lines += [""] + _category_sections(r.get("categories") or {}) + _regressed_section(r)
    return lines + _bounds_section(r.get("bounds_reuse"))


def _bounds(r: dict[str, Any]) -> str:
    """ΔCuBE's bounds the rule read (`delta_bounds`: compare's percentile interval widened to the
    t bound), else compare's interval."""
    o = r.get("overall") or {}
    lo, hi = r.get("delta_bounds") or [o.get("lo"), o.get("hi")]
    return f"[{_n(lo, 2)}, {_n(hi, 2)}]"


def _bounds_section(b: dict[str, Any] | None) -> list[str]:
    """Which bounds (the zero and full answers and their judgments) came from the cache and how
    many of those are the baseline's own calls (`cube.run.bounds_reuse`)."""
    if not b:
        return []
    head = ["### Bounds reused (zero / full answers and their judgments)", ""]
    if "unknown" in b:
        return [*head, md_text(b["unknown"]), ""]
    lines = [*head, "| calls | made | from the cache | of the baseline's | sent | offline |"]
    lines.append("|---|---|---|---|---|---|")
    for role in ("answering", "judging"):
        c = b.get(role) or {}
        base = c.get("from_baseline")
        lines.append(
            f"| {role} | {c.get('calls', 0)} | {c.get('from_cache', 0)} | "
            f"{'n/a' if base is None else base} | {c.get('sent', 0)} | {c.get('offline', 0)} |"
        )
    if b.get("from_baseline") is None:
        why = b.get("baseline_unknown") or "unknown"
        lines += ["", f"Which came from the baseline is not known: {md_text(why)}."]
    return [*lines, ""]


_BY = {"department": "Per category (department)", "style": "Per question style"}


def _category_sections(categories: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = []
    for by, rows in categories.items():
        lines += [
            f"### {_BY.get(by, md_text(by))}: mean jury score per question (0-10)",
            "",
            "| category | questions | baseline | this version | Δ | regressed |",
            "|---|---|---|---|---|---|",
        ]
        for c in rows:
            a, b = c.get("baseline"), c.get("run")
            delta = None if a is None or b is None else b - a
            lines.append(
                f"| {code_span(c['category'])} | {int(c['questions'])} | {_n(a, 2)} | {_n(b, 2)} | "
                f"{_n(delta, 2, True)} | {int(c['regressed'])} |"
            )
        lines.append("")
    return lines


def _regressed_section(r: dict[str, Any]) -> list[str]:
    reg = r.get("regressed") or []
    rng = r.get("expected_range") or [None, None]
    lines = [
        f"### Regressed questions: {len(reg)} (about {_n(r.get('n_expected_by_chance'))} "
        f"expected by chance, range {rng[0]}-{rng[1]})",
        "",
        "Worse beyond the judges' noise (a drop of the mean jury score per question larger than "
        f"{_n(r.get('noise_threshold'), 2)}) or the gold document no longer retrieved.",
        "",
    ]
    if reg:
        lines += [
            "| id | question | baseline | this version | why | retrieval |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {code_span(q['question_id'])} | {code_span(q.get('text'))} | "
            f"{_n(q.get('baseline_score'), 2)} | "
            f"{'unchanged' if _same_score(q) else _n(q.get('score'), 2)} | "
            f"{md_text(_cause(q))} | {code_span(q.get('retrieval_change'))} |"
            for q in reg
        ]
        lines.append("")
    return lines


# ------------------------------------------------------------------------------------- junit.xml
def junit_xml(r: dict[str, Any]) -> str:
    """The gate as JUnit XML (`report/junit.xml`, the module docstring)."""
    root = ET.Element("testsuites", name="cube release gate")
    conditions = r.get("conditions") or []
    gate = _suite(root, "release gate", len(conditions))
    ET.SubElement(ET.SubElement(gate, "properties"), "property", name="decision").set(
        "value", xml_text(r["decision"])
    )
    failures = skipped = 0
    for c in conditions:
        case = ET.SubElement(
            gate, "testcase", classname="cube.release_gate", name=xml_text(c["name"]), time="0"
        )
        if c["status"] == "fail":
            failures += 1
            ET.SubElement(
                case, "failure", message=xml_text(c["text"]), type="regression"
            ).text = xml_text(c["text"])
        elif c["status"] == "unknown":
            skipped += 1
            ET.SubElement(case, "skipped", message=xml_text(c["text"]))
    gate.set("failures", str(failures))
    gate.set("skipped", str(skipped))
    regressed = r.get("regressed") or []
    reg = _suite(root, "regressed questions", len(regressed))
    reg.set("failures", str(len(regressed)))
    for q in regressed:
        change = regression_change(q, "baseline ", "this version ")
        text = (
            f"{q['question_id']}: {q.get('text')} ({change}; retrieval {q.get('retrieval_change')})"
        )
        case = ET.SubElement(
            reg,
            "testcase",
            classname="cube.regressed_questions",
            name=xml_text(q["question_id"]),
            time="0",
        )
        ET.SubElement(case, "failure", message=xml_text(text), type="regressed").text = xml_text(
            text
        )
    root.set("tests", str(len(conditions) + len(regressed)))
    root.set("failures", str(failures + len(regressed)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(root: ET.Element, name: str, tests: int) -> ET.Element:
    return ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(tests),
        failures="0",
        errors="0",
        skipped="0",
        time="0",
    )


# ------------------------------------------------------------------------------------- terminal
def terminal_lines(r: dict[str, Any], max_regressed: int = 20) -> list[str]:
    """What `cube run` prints of the gate (names and texts without control characters)."""
    base = r.get("baseline") or {}
    lines = [f"release gate against {plain(base.get('run'))}: {_label(r['decision'])}"]
    if "overall" in r:
        o = r["overall"]
        lines.append(
            f"  ΔCuBE {_n(o.get('delta'), 2, True)} {_bounds(r)} (the rule's bounds; compare's "
            f"interval [{_n(o.get('lo'), 2)}, {_n(o.get('hi'), 2)}]) "
            f"on {r['n_questions']} common questions (margin {r['margin']:g}); "
            + ", ".join(
                f"Δ{plain(k)} {_n(d.get('delta'), 1, True)}"
                for k, d in (r.get("dimensions") or {}).items()
            )
        )
        reg = r.get("regressed") or []
        lines.append(
            f"  regressed questions: {len(reg)} (about {_n(r.get('n_expected_by_chance'))} by "
            "chance)"
        )
        lines += [
            f"    {plain(q['question_id'])}: {plain(q.get('text'))[:80]} ({regression_change(q)})"
            for q in reg[:max_regressed]
        ]
        if len(reg) > max_regressed:
            lines.append(f"    ... {len(reg) - max_regressed} more in report/summary.md")
    lines += [f"  reason: {plain(x)}" for x in r.get("reasons") or []]
    return lines


def clean_record(x: Any) -> Any:
    """decision.json's content with every string `visible` (a lone surrogate cannot be written)."""
    if isinstance(x, str):
        return visible(x)
    if isinstance(x, dict):
        return {visible(k): clean_record(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean_record(v) for v in x]
    return x


def write_reports(r: dict[str, Any], report_dir: Path, record: dict[str, Any]) -> None:
    """summary.md, junit.xml and decision.json (`record`: its keys) into `report_dir`."""
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "summary.md").write_text(summary_markdown(r), encoding="utf-8")
    (report_dir / "junit.xml").write_text(junit_xml(r), encoding="utf-8")
    (report_dir / "decision.json").write_text(
        json.dumps(clean_record(record), ensure_ascii=False, indent=1, default=str),
        encoding="utf-8",
    )
