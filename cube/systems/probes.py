"""Answers of known quality for the judge audit (issue 20; the statistics are `cube.method.audit`).

From each sampled question's full answer (the answering model with the gold document alone),
`build_probes` derives variants whose quality relative to it is known by construction:

- worse, length-matched: `corrupted_facts` (every number replaced by another: the sibling item's
  numbers in turn when the gold document has a near-duplicate sibling, else shifted ones; the
  item's name replaced by the sibling's), `sibling_answer` (the full answer of the question whose
  gold document is a member of the same family, `family_id` in the corpus; else of the most
  similar other item by name), `other_question` (the full answer of another question);
- worse, not length-matched: `empty`, `truncated` (the first third of the answer);
- not worse: `padded` (a courtesy sentence, the question restated, a closing sentence),
  `authority` (a line citing the official regulations), `reordered` (sentences in reverse order).

Each question gets two worse, length-matched probes and one not-worse probe, the kinds in turn
(`kinds_for`), so an audit of 40 questions costs 120 judgments per judge and dimension. A
probe that cannot be made (no number to corrupt, a single sentence to reorder) falls back to the
next kind of its group; the row says which kind it is. Rows: `question_id, doc_id, system`
(`audit:<kind>`, so the scoring pipeline keeps them apart), `set` (`full`), `answer`, `probe`,
`expect`, `rank` (0).
"""

from __future__ import annotations

import random
import re
from typing import Any

import pandas as pd

from cube.config.schema import require_columns

WORSE_MATCHED = ("corrupted_facts", "sibling_answer", "other_question")
NOT_WORSE = ("padded", "authority", "reordered")
PADDING = {
    "zh": ("您好，感谢您的咨询。", "您问的是：{q}", "希望以上信息对您有所帮助，如有其他问题欢迎随时咨询。"),
    "en": ("Hello, and thank you for your question.", "You asked: {q}",
           "I hope this information helps; feel free to ask if you have any other questions."),
}
AUTHORITY = {"zh": "根据官方发布的有关规定，", "en": "According to the official regulations, "}
_NUM = re.compile(r"\d+(?:\.\d+)?")
_SENT = re.compile(r"(?<=[。！？!?.；;])\s*")


def kinds_for(i: int) -> tuple[str, str, str]:
    """The probes of the i-th audit question: two length-matched worse kinds and one not-worse kind."""
    return WORSE_MATCHED[i % 3], WORSE_MATCHED[(i + 1) % 3], NOT_WORSE[i % 3]


def corrupt_facts(answer: str, sibling: str = "", name: str = "", sibling_name: str = "") -> str | None:
    """Numbers replaced (by the sibling's in turn, else shifted) and the item name by the sibling's;
    None when nothing changes."""
    pool = [m for m in _NUM.findall(sibling) if m]
    count = iter(range(10**6))

    def swap(m: re.Match[str]) -> str:
        k = next(count)
        for off in range(len(pool)):
            cand = pool[(k + off) % len(pool)]
            if cand != m.group(0):
                return cand
        return str(int(float(m.group(0))) + 3 + k % 7)

    out = _NUM.sub(swap, answer)
    if name and sibling_name and name != sibling_name:
        out = out.replace(name, sibling_name)
    return out if out != answer else None


def sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(text.strip()) if s]


def pad(answer: str, question: str, lang: str) -> str:
    hello, restate, bye = PADDING.get(lang, PADDING["en"])
    sep = "" if lang == "zh" else " "
    return sep.join([hello, restate.format(q=question), answer, bye])


def reorder(answer: str) -> str | None:
    s = sentences(answer)
    return "".join(reversed(s)) if len(s) >= 2 and s != list(reversed(s)) else None


def build_probes(full: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame, n: int, seed: int = 0,
                 lang: str = "zh") -> pd.DataFrame:
    """The probe answers of up to `n` sampled questions (module docstring). `full`: one system's
    full-set answers (`question_id, doc_id, answer`); `corpus`: `doc_id` (and `item_name`,
    `family_id` when known); `questions`: `question_id, question`."""
    require_columns(full, ("question_id", "doc_id", "answer"), "answers (full set)")
    require_columns(questions, ("question_id", "question"), "questions")
    cols = ["question_id", "doc_id", "system", "set", "answer", "probe", "expect", "rank"]
    ok = full[full["answer"].fillna("").astype(str).str.strip() != ""].drop_duplicates("question_id")
    if n <= 0 or len(ok) < 2:
        return pd.DataFrame(columns=cols)
    rng = random.Random(seed)
    ids = sorted(ok["question_id"].astype(str))
    sample = rng.sample(ids, min(n, len(ids)))
    by_q = ok.assign(question_id=ok["question_id"].astype(str)).set_index("question_id")
    qtext = questions.assign(question_id=questions["question_id"].astype(str)).drop_duplicates(
        "question_id").set_index("question_id")["question"]
    docs = corpus.assign(doc_id=corpus["doc_id"].astype(str)).drop_duplicates("doc_id").set_index("doc_id")
    doc_q = {str(d): q for q, d in zip(by_q.index, by_q["doc_id"], strict=True)}
    rows: list[dict[str, Any]] = []
    for i, q in enumerate(sample):
        answer, doc = str(by_q.at[q, "answer"]), str(by_q.at[q, "doc_id"])
        sib_q = _sibling_question(doc, docs, doc_q, q, rng, ids)
        other_q = rng.choice([x for x in ids if x not in (q, sib_q)] or [sib_q])
        made: dict[str, str | None] = {
            "corrupted_facts": corrupt_facts(answer, str(by_q.at[sib_q, "answer"]), _name(docs, doc),
                                             _name(docs, str(by_q.at[sib_q, "doc_id"]))),
            "sibling_answer": str(by_q.at[sib_q, "answer"]) if sib_q != q else None,
            "other_question": str(by_q.at[other_q, "answer"]),
            "padded": pad(answer, str(qtext.get(q, "")), lang),
            "authority": AUTHORITY.get(lang, AUTHORITY["en"]) + answer,
            "reordered": reorder(answer),
        }
        worse_a, worse_b, fine = kinds_for(i)
        chosen = _pick(made, [worse_a, *WORSE_MATCHED], 2, first_two=(worse_a, worse_b)) + \
            _pick(made, [fine, *NOT_WORSE], 1)
        for kind in chosen:
            rows.append({"question_id": q, "doc_id": doc, "system": f"audit:{kind}", "set": "full",
                         "answer": made[kind], "probe": kind,
                         "expect": "worse" if kind in WORSE_MATCHED else "not_worse", "rank": 0})
    return pd.DataFrame(rows, columns=cols)


def _pick(made: dict[str, str | None], order: list[str], k: int, first_two: tuple[str, ...] = ()) -> list[str]:
    out = [x for x in first_two if made.get(x)]
    for x in order:
        if len(out) >= k:
            break
        if made.get(x) and x not in out:
            out.append(x)
    return out[:k]


def _name(docs: pd.DataFrame, doc: str) -> str:
    return str(docs.at[doc, "item_name"]) if "item_name" in docs and doc in docs.index else ""


def _sibling_question(doc: str, docs: pd.DataFrame, doc_q: dict[str, str], q: str, rng: random.Random,
                      ids: list[str]) -> str:
    """The question whose gold document shares `doc`'s family (else a random other question)."""
    if "family_id" in docs and doc in docs.index:
        fam = str(docs.at[doc, "family_id"] or "")
        if fam and fam != "nan":
            members = [d for d in docs.index[docs["family_id"].astype(str) == fam] if d != doc and d in doc_q]
            if members:
                return doc_q[rng.choice(sorted(members))]
    return rng.choice([x for x in ids if x != q])
