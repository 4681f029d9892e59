"""Answers of known quality for the judge audit (issue 20; the statistics are `cube.method.audit`).

From each sampled question's full answer (the answering model with the gold document alone),
`build_probes` derives variants whose quality relative to it is known by construction:

- worse, length-matched (whole sentences or lines, cut after one or lengthened by those of other
  answers, within `length_tolerance` of the original's length, on either side, and ending a
  sentence exactly when the original does; `match_length`), so that a judge reading only the length
  or the form of the ending cannot tell them from the original: `corrupted_facts` (every fact
  number replaced, by the sibling item's numbers in turn when the gold document has a near-duplicate
  sibling, else by shifted ones, and the item's name by the sibling's; list markers and ordinals,
  "1." "2、" "（1）" "第3条" "Step 2", are kept: `fact_numbers`), `sibling_answer` (the full answer
  of the question whose gold document is a member of the same family, `family_id` in the corpus;
  else of another question), `other_question` (the full answer of another question);
- worse, not length-matched: `empty` (a near-empty reply: the courtesy sentence alone; a blank
  answer would not be judged), `truncated` (cut at a third of its characters, earlier when that
  would keep every fact, so at least its last fact number is lost);
- not worse: `padded` (a courtesy sentence, the question restated, a closing sentence),
  `authority` (a line citing the official regulations), `reordered` (sentences in reverse order);
- worse, with an injection (issues 29, 38): `injected_<kind>`, the question's first worse probe
  (`<kind>`) cut at its end to make room for an injection from the battery
  (`cube.systems.injections`: five families, English and Chinese, whole, split across the answer
  or broken by zero-width characters, rotated by the audit's seed; the row's `injection` column
  names the family), so it keeps its twin's length and loses a little content: a judge that reads
  the content scores it at most like its twin, a judge that obeys the line scores it up
  (`cube.method.audit`).

Each question gets two worse, length-matched probes, one of empty and truncated, one not-worse
probe, the kinds in turn (`kinds_for`), and the injected twin of its first worse probe, so an audit
of 40 questions costs 200 judgments per judge and dimension (`PROBES_PER_QUESTION`). A probe that
cannot be made (no number to corrupt, a single sentence to reorder, too little text to match a
length, a text equal to the original) falls back to the next kind of its group (none left: the
question has fewer probes); the row says which kind it is. Rows: `question_id, doc_id, system`
(`audit:<kind>`, so the scoring pipeline keeps them apart), `set` (`full`), `answer`, `probe`,
`expect`, `rank` (0), `injection` (the injected probe's family, else empty).
"""

from __future__ import annotations

import random
import re
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.schema import require_columns
from cube.systems.injections import Injection, place, rotation

WORSE_MATCHED = ("corrupted_facts", "sibling_answer", "other_question")
WORSE_UNMATCHED = ("empty", "truncated")
PROBES_PER_QUESTION = (
    5  # `kinds_for` and the injected twin: what one audit question costs per judge and dimension
)
NOT_WORSE = ("padded", "authority", "reordered")
PADDING = {
    "zh": (
        "您好，感谢您的咨询。",
        "您问的是：{q}",
        "希望以上信息对您有所帮助，如有其他问题欢迎随时咨询。",
    ),
    "en": (
        "Hello, and thank you for your question.",
        "You asked: {q}",
        "I hope this information helps; feel free to ask if you have any other questions.",
    ),
}
AUTHORITY = {"zh": "根据官方发布的有关规定，", "en": "According to the official regulations, "}
INJECTED_PREFIX = "injected_"
_NUM = re.compile(r"\d+(?:\.\d+)?")
# List markers and ordinals are not facts: "1." "2、" "3)" at the start of a line or after a
# sentence's end, "（1）" "(2)", "第3条", "1st", "Step 2" keep their numbers when facts are
# corrupted.
_MARKER = re.compile(
    r"(?:(?:^|(?<=[\n。；;：:！？!?]))[ \t]*\d{1,2}(?:[.．、)）](?!\d)))"
    r"|[（(]\d{1,2}[)）]|第\d+(?=[条款项步章节点次])|\b\d+(?:st|nd|rd|th)\b|\b[Ss]tep \d+",
    re.MULTILINE,
)
_SENT = re.compile(r"(?<=[。！？!?.；;])\s*")


def calls_per_question(params: Params) -> int:
    """The judge calls one audit question costs: `PROBES_PER_QUESTION` probes x every judge's calls
    per answer (one per dimension, or one for all, x its samples), as `cube.judges.score_answers`
    sends them."""
    dims = len(params.dimension_names())
    return PROBES_PER_QUESTION * sum(
        (1 if j.all_dimensions else dims) * j.samples for j in params.judges
    )


def capped_questions(
    requested: int, judge_calls: int, calls_per_question: int, max_share: float
) -> int:
    """How many audit questions the run sends: `requested`, fewer when their calls
    (`calls_per_question`: `PROBES_PER_QUESTION` x every judge's calls per answer) would exceed
    `max_share` of the run's `judge_calls` (role 'judging'). `cube plan` and stage 03 both
    call it."""
    if requested <= 0 or calls_per_question <= 0:
        return 0
    return max(0, min(requested, int(max_share * judge_calls // calls_per_question)))


def kinds_for(i: int) -> tuple[str, str, str, str]:
    """The probes of the i-th audit question: two length-matched worse kinds, one of empty and
    truncated, and one not-worse kind, each in turn."""
    return (
        WORSE_MATCHED[i % 3],
        WORSE_MATCHED[(i + 1) % 3],
        WORSE_UNMATCHED[i % 2],
        NOT_WORSE[i % 3],
    )


def fact_numbers(text: str) -> list[re.Match[str]]:
    """The numbers of `text` that are facts (fees, amounts, time limits, phone numbers, addresses):
    every number but those of list markers and ordinals (`_MARKER`)."""
    marked = [m.span() for m in _MARKER.finditer(text)]
    return [m for m in _NUM.finditer(text) if not any(a <= m.start() < b for a, b in marked)]


def corrupt_facts(
    answer: str, sibling: str = "", name: str = "", sibling_name: str = ""
) -> str | None:
    """The facts' numbers replaced (by the sibling's in turn, else shifted) and the item name by the
    sibling's; list markers and ordinals kept (`fact_numbers`). None when nothing changes."""
    pool = [m.group(0) for m in fact_numbers(sibling)]
    parts, last = [], 0
    for k, m in enumerate(fact_numbers(answer)):
        new = next(
            (
                c
                for c in (pool[(k + off) % len(pool)] for off in range(len(pool)))
                if c != m.group(0)
            ),
            str(int(float(m.group(0))) + 3 + k % 7),
        )
        parts += [answer[last : m.start()], new]
        last = m.end()
    out = "".join(parts) + answer[last:]
    if name and sibling_name and name != sibling_name:
        out = out.replace(name, sibling_name)
    return out if out != answer else None


def truncate(answer: str) -> str | None:
    """The answer cut mid-way (at a third of its characters, earlier when that would keep every
    fact) so that key facts are lost: at least its last fact number, else its last two thirds. None
    when the answer is too short to cut (under 6 characters)."""
    text = answer.strip()
    if len(text) < 6:
        return None
    cut = len(text) // 3
    facts = fact_numbers(text)
    if facts and facts[-1].start() < cut:
        cut = max(facts[-1].start(), 1)
    return text[:cut].rstrip() or None


def near_empty(lang: str) -> str:
    """An empty reply that is still a reply (a judge skips a blank answer): the courtesy
    sentence alone."""
    return PADDING.get(lang, PADDING["en"])[0]


def match_length(
    text: str, target: int, filler: list[str], lang: str, ends: bool | None = None
) -> str | None:
    """`text` at about `target` characters and ending as the original ends: whole sentences or
    lines (`units`) of `text`, cut after one, or lengthened by those of `filler` (other answers),
    the candidate nearest `target` among those that end a sentence exactly when the original does
    (`ends`; default: as `text` ends); None when none is within `length_tolerance` (the next kind is
    used). Whole units, not an exact cut: a cut at exactly `target` ends mid-sentence, a tell that a
    judge reading only the form used to pass the audit (issue 30); nearest on either side (on the
    demo knowledge bases longer in 50 %, shorter in 31 %, equal in 19 % of probes, by a median 1-2
    characters), so a judge preferring the longer answer gains nothing from it."""
    want = ends_sentence(text) if ends is None else ends
    best: tuple[int, str] | None = None

    def consider(candidate: str) -> None:
        nonlocal best
        c = candidate.strip()
        if c and ends_sentence(c) == want and (best is None or abs(len(c) - target) < best[0]):
            best = (abs(len(c) - target), c)

    acc = ""
    for u in units(text):  # the text itself cut after each of its units
        if acc.strip() and len((acc + u).strip()) > target:
            consider(acc + u)
            break
        acc += u
        consider(acc)
    for u in (x for f in filler for x in units(f)):  # then lengthened, filling the gap greedily
        joined = _join(acc, u, lang)
        consider(joined)
        if len(joined.strip()) <= target:
            acc = joined
    return best[1] if best is not None and best[0] <= length_tolerance(target) else None


def length_tolerance(target: int) -> int:
    """How far from the original's length a length-matched probe may be: 10 % of it, at least 8
    characters (beyond, the next kind of probe is used)."""
    return max(8, target // 10)


_UNIT_END = re.compile(r"(?:[。！？!?；;…]|\.(?!\d))[”\"'’）)」』]*[ \t]*\n?|\n")
_ENDS = re.compile(r"[。！？!?；;….．][”\"'’）)」』]*$")


def units(text: str) -> list[str]:
    """`text` split after each sentence end (。！？!?；; or a full stop not followed by a digit)
    and each line end, every unit keeping its punctuation and line break: joined they are `text`."""
    out, last = [], 0
    for m in _UNIT_END.finditer(text):
        out.append(text[last : m.end()])
        last = m.end()
    out.append(text[last:])
    return [u for u in out if u.strip()]


def ends_sentence(text: str) -> bool:
    """Whether `text` ends a sentence: its last character (closing quotes and brackets aside) is
    sentence punctuation."""
    return bool(_ENDS.search(text.rstrip()))


def _join(acc: str, unit: str, lang: str) -> str:
    if not acc.strip():
        return unit.lstrip()
    sep = "" if lang == "zh" or acc[-1].isspace() else " "
    return acc + sep + unit.lstrip()


def sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(text.strip()) if s]


def pad(answer: str, question: str, lang: str) -> str:
    hello, restate, bye = PADDING.get(lang, PADDING["en"])
    sep = "" if lang == "zh" else " "
    return sep.join([hello, restate.format(q=question), answer, bye])


def reorder(answer: str) -> str | None:
    s = sentences(answer)
    return "".join(reversed(s)) if len(s) >= 2 and s != list(reversed(s)) else None


def inject(base: str, injection: Injection, lang: str) -> str:
    """`base` cut at its end to make room for the injection's line, then the line in its form
    (`cube.systems.injections.place`): the result keeps `base`'s visible length (a judge preferring
    longer answers gains nothing; zero-width characters are not counted), or is base + line when
    base is shorter than the line."""
    sep = "" if lang == "zh" else " "
    text = base.strip()
    room = len(text) - len(injection.line) - len(sep)
    return place(text[:room].rstrip() if room > 0 else text, injection, sep)


def _injected(
    made: dict[str, str | None], chosen: list[str], injection: Injection, lang: str
) -> dict[str, str]:
    """The injected twin of the question's first worse probe (none when it has no worse probe)."""
    base = next((k for k in chosen if k not in NOT_WORSE), None)
    if base is None:
        return {}
    return {INJECTED_PREFIX + base: inject(str(made[base]), injection, lang)}


def build_probes(
    full: pd.DataFrame,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    n: int,
    seed: int = 0,
    lang: str = "zh",
) -> pd.DataFrame:
    """The probe answers of up to `n` sampled questions (module docstring). `full`: one system's
    full-set answers (`question_id, doc_id, answer`); `corpus`: `doc_id` (and `item_name`,
    `family_id` when known); `questions`: `question_id, question`."""
    require_columns(full, ("question_id", "doc_id", "answer"), "answers (full set)")
    require_columns(questions, ("question_id", "question"), "questions")
    cols = ["question_id", "doc_id", "system", "set", "answer", "probe", "expect", "rank"]
    cols.append("injection")
    ok = full[full["answer"].fillna("").astype(str).str.strip() != ""].drop_duplicates(
        "question_id"
    )
    if n <= 0 or len(ok) < 2:
        return pd.DataFrame(columns=cols)
    rng = random.Random(seed)
    ids = sorted(ok["question_id"].astype(str))
    sample = rng.sample(ids, min(n, len(ids)))
    by_q = ok.assign(question_id=ok["question_id"].astype(str)).set_index("question_id")
    qtext = (
        questions.assign(question_id=questions["question_id"].astype(str))
        .drop_duplicates("question_id")
        .set_index("question_id")["question"]
    )
    docs = (
        corpus.assign(doc_id=corpus["doc_id"].astype(str))
        .drop_duplicates("doc_id")
        .set_index("doc_id")
    )
    doc_q = {str(d): q for q, d in zip(by_q.index, by_q["doc_id"], strict=True)}
    rows: list[dict[str, Any]] = []
    battery = rotation(len(sample), seed, lang)
    for i, q in enumerate(sample):
        answer, doc = str(by_q.at[q, "answer"]), str(by_q.at[q, "doc_id"])
        sib_q = _sibling_question(doc, docs, doc_q, q, rng, ids)
        other_q = rng.choice([x for x in ids if x not in (q, sib_q)] or [sib_q])
        target = len(answer.strip())
        filler = [
            str(by_q.at[x, "answer"])
            for x in rng.sample(ids, min(len(ids), 8))
            if x not in (q, sib_q)
        ]
        corrupted = corrupt_facts(
            answer,
            str(by_q.at[sib_q, "answer"]),
            _name(docs, doc),
            _name(docs, str(by_q.at[sib_q, "doc_id"])),
        )
        ends = ends_sentence(answer)  # the length-matched probes end as the original ends
        made: dict[str, str | None] = {
            "corrupted_facts": corrupted and match_length(corrupted, target, filler, lang, ends),
            "sibling_answer": match_length(
                str(by_q.at[sib_q, "answer"]), target, filler, lang, ends
            )
            if sib_q != q
            else None,
            "other_question": match_length(
                str(by_q.at[other_q, "answer"]), target, filler, lang, ends
            ),
            "empty": near_empty(lang),
            "truncated": truncate(answer),
            "padded": pad(answer, str(qtext.get(q, "")), lang),
            "authority": AUTHORITY.get(lang, AUTHORITY["en"]) + answer,
            "reordered": reorder(answer),
        }
        # a probe that reads as the original is no probe: its known truth ("worse") would be wrong
        made = {k: v if v is None or v.strip() != answer.strip() else None for k, v in made.items()}
        worse_a, worse_b, cut, fine = kinds_for(i)
        chosen = (
            _pick(made, [worse_a, *WORSE_MATCHED], 2, first_two=(worse_a, worse_b))
            + _pick(made, [cut, *WORSE_UNMATCHED], 1)
            + _pick(made, [fine, *NOT_WORSE], 1)
        )
        twin = _injected(made, chosen, battery[i], lang)
        made.update(twin)
        for kind in [*chosen, *twin]:
            rows.append(
                {
                    "question_id": q,
                    "doc_id": doc,
                    "system": f"audit:{kind}",
                    "set": "full",
                    "answer": made[kind],
                    "probe": kind,
                    "expect": "not_worse" if kind in NOT_WORSE else "worse",
                    "rank": 0,
                    "injection": battery[i].family if kind in twin else "",
                }
            )
    return pd.DataFrame(rows, columns=cols)


def _pick(
    made: dict[str, str | None], order: list[str], k: int, first_two: tuple[str, ...] = ()
) -> list[str]:
    out = [x for x in first_two if made.get(x)]
    for x in order:
        if len(out) >= k:
            break
        if made.get(x) and x not in out:
            out.append(x)
    return out[:k]


def _name(docs: pd.DataFrame, doc: str) -> str:
    return str(docs.at[doc, "item_name"]) if "item_name" in docs and doc in docs.index else ""


def _sibling_question(
    doc: str, docs: pd.DataFrame, doc_q: dict[str, str], q: str, rng: random.Random, ids: list[str]
) -> str:
    """The question whose gold document shares `doc`'s family (else a random other question)."""
    if "family_id" in docs and doc in docs.index:
        fam = str(docs.at[doc, "family_id"] or "")
        if fam and fam != "nan":
            members = [
                d
                for d in docs.index[docs["family_id"].astype(str) == fam]
                if d != doc and d in doc_q
            ]
            if members:
                return doc_q[rng.choice(sorted(members))]
    return rng.choice([x for x in ids if x != q])
