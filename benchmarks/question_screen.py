"""Measured error rates of the two garbage catchers of issue 22, on known-truth cases.

1. The question screen (`cube.kb.screen`): good questions are the offline template generator's
   `named` questions of the English and Chinese demo corpora (each names its item: they should all
   pass); bad ones are made from them with known defects: sentences of the question-writing prompt
   (instruction echoes), URLs, statements without a question, exact and near copies of a good
   question, and good questions moved to another item's document (naming no service of their gold
   document). Printed: the share of good questions rejected (false rejections) and, per defect, the
   share let through (misses).
2. The judge pilot (`judges[].pilot`, default 20 calls, stop when under 50 % of the dimension
   scores in the replies parse): the chance that it stops a judge whose dimension scores parse at a
   true rate p, at p = 0.6, 0.7, 0.8, 0.9 (a wrong stop) and p = 0.05, 0.2, 0.4 (a right one).
   A per-dimension judge has one score per call: 20 scores, binomial (scipy). An all-dimensions
   judge (4 dimensions) has 80 scores in 20 replies: binomial over 80 when its scores fail
   independently; when a reply's scores fail together it is the 20-call figure, so its true chance
   lies between the two.
3. The cost of `names_no_service` on questions in a citizen's own words (the template's colloquial
   style, which avoids the official name on purpose): good questions the screen rejects.

Usage: python benchmarks/question_screen.py  (a few seconds; headline: the screen's false rejections)
"""

from __future__ import annotations

import random
import re

import pandas as pd
from scipy import stats

from cube.config.params import parse_params
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions, question_prompt_template
from cube.kb.screen import screen_questions

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}]


def cases(lang: str, n_items: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    params = parse_params({"run": "b", "lang": lang, "corpus": {"n_items": n_items, "seed": seed}, "judges": JUDGES,
                           "questions": {"styles": {"named": 1.0}, "seed": seed}})
    corpus = build_corpus(params)
    good = build_questions(params, corpus)[["question", "doc_id"]].assign(truth="")
    rng = random.Random(seed)
    prompt = question_prompt_template(lang)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?。！？:：])\s*|\n", prompt.replace("{focus}", ""))
                 if len(s.strip()) > 25 and "{" not in s and "<" not in s]
    docs = good["doc_id"].tolist()
    bad = []
    for i in range(60):
        g = good.iloc[rng.randrange(len(good))]
        other = good.iloc[rng.randrange(len(good))]
        bad += [
            {"question": rng.choice(sentences), "doc_id": rng.choice(docs), "truth": "instruction_echo"},
            {"question": f"https://www.service{i}.gov.example.com/guide/{i}", "doc_id": rng.choice(docs), "truth": "url"},
            {"question": ("I went to the office yesterday and it was closed" if lang == "en" else "我昨天去办事大厅了，门关着"),
             "doc_id": g["doc_id"], "truth": "not_a_question"},
            {"question": g["question"], "doc_id": g["doc_id"], "truth": "near_duplicate"},
            {"question": other["question"], "doc_id": g["doc_id"] if other["doc_id"] != g["doc_id"] else docs[0],
             "truth": "names_no_service"},
        ]
    # a copy comes after its original: the original (good) is screened first
    return pd.concat([good, pd.DataFrame(bad)], ignore_index=True), corpus


def main() -> None:
    false_rejections, good_total = 0, 0
    misses: dict[str, list[int]] = {}
    for lang, seed in (("en", 1), ("zh", 2)):
        q, corpus = cases(lang, 300, seed)
        got = screen_questions(q, corpus, question_prompt_template(lang))
        good = q["truth"].eq("")
        false_rejections += int(got[good].ne("").sum())
        good_total += int(good.sum())
        for truth, g in q[~good].groupby("truth"):
            passed = got[g.index].eq("")
            # a near copy of an item's question also names another service when moved: either reason is right
            m = misses.setdefault(truth, [0, 0])
            m[0] += int(passed.sum())
            m[1] += len(g)
        print(f"{lang}: {int(good.sum())} good questions, {int(got[good].ne('').sum())} rejected "
              f"({got[good][got[good].ne('')].value_counts().to_dict()})")
    # the cost of `names_no_service`: questions in a citizen's own words (the template's colloquial style,
    # which avoids the official name on purpose) are good questions the screen rejects
    params = parse_params({"run": "b", "lang": "zh", "corpus": {"n_items": 300, "seed": 3}, "judges": JUDGES,
                           "questions": {"styles": {"colloquial": 1.0}, "seed": 3}})
    corpus = build_corpus(params)
    colloquial = build_questions(params, corpus)
    colloquial = colloquial[colloquial["style"] == "colloquial"]
    got = screen_questions(colloquial, corpus, question_prompt_template("zh"))
    print(f"colloquial (zh) questions rejected: {got.ne('').mean():.3f} of {len(got)} "
          f"({got[got.ne('')].value_counts().to_dict()})")
    for truth, (missed, n) in sorted(misses.items()):
        print(f"screen miss rate {truth}: {missed / n:.3f} ({missed} of {n} let through)")
    for p in (0.05, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9):
        per_dimension = stats.binom.cdf(9, 20, p)  # fewer than 10 of 20 scores parse
        all_dimensions = stats.binom.cdf(39, 80, p)  # fewer than 40 of 80 scores parse (independent)
        print(f"pilot (20 calls, stop under 50 % of scores) stops a judge parsing {p:.0%} of its dimension scores: "
              f"{per_dimension:.4f} (1 score per call), {all_dimensions:.4f} (4 per call, independent)")
    print(f"screen_false_rejection_rate: {false_rejections / good_total:.4f}")


if __name__ == "__main__":
    main()
