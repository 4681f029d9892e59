"""How often the judge audit's verdict is right, on judges of known truth (issue 20).

On seeded demo knowledge bases (120 items, template questions, the extractive answerer's full
answers), `cube.systems.probes.build_probes` makes the probes of 40 questions (`--questions`), and
three judges score the originals and the probes:

- the two offline rubric judges (`rubric-lenient`, `rubric-strict`): they read the content, so the
  audit must pass them (a content-blind verdict is a false exclusion);
- a length-only judge, the strongest of its kind: its score is the answer's length in characters,
  scaled to 0-10 by the longest answer (ties are rare), so it prefers the longer of two answers
  whatever they say: the audit must name it content-blind (a pass is a miss);
- a form-only judge (issue 30): 8 when the text ends a sentence (`ends_sentence`), else 6, plus
  N(0, 1), rounded: it must be named content-blind too (probes cut mid-sentence let it pass);
- a position-only judge: the length of the text's first sentence or line, scaled to 0-10 by the
  longest first sentence: it reads where the answer starts, not what it says.

Prints, per judge, the share of seeds whose verdict is content-blind and the mean discrimination
(share of length-matched worse pairs the original wins). The last line is the headline:
`length_judge_detected: <share of seeds in which the length-only judge was named content-blind>`,
after `form_judge_detected` and `position_judge_detected`.

    .venv/bin/python benchmarks/audit_verdicts.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

from cube.config.params import parse_params
from cube.judges import load_dimensions, make_judges, score_answers
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.method.audit import audit_summary, audit_verdict, probe_table
from cube.systems.extractive import extractive_answer
from cube.systems.probes import build_probes, ends_sentence, units


def one_seed(seed: int, lang: str, n: int) -> pd.DataFrame:
    params = parse_params(
        {
            "run": "bench",
            "lang": lang,
            "corpus": {"source": "demo", "n_items": 120, "seed": seed},
            "questions": {"generator": "template", "seed": seed},
            "dimensions": ["relevance", "specificity", "completeness", "quality"],
            "judges": [
                {"name": n, "model": {"provider": "offline", "model": n}}
                for n in ("rubric-lenient", "rubric-strict")
            ],
        }
    )
    corpus = generate_demo_corpus(n_items=120, lang=lang, seed=seed)
    questions = build_questions(params, corpus)
    text = corpus.set_index("doc_id")["text"]
    full = pd.DataFrame(
        [
            {
                "question_id": q,
                "doc_id": d,
                "system": "sys",
                "set": "full",
                "rank": 0,
                "answer": extractive_answer(question, [text[d]], lang)[0],
            }
            for q, d, question in zip(
                questions["question_id"], questions["doc_id"], questions["question"], strict=True
            )
        ]
    )
    probes = build_probes(full, corpus, questions, n=n, seed=seed, lang=lang)
    both = pd.concat([full, probes.drop(columns=["probe", "expect"])], ignore_index=True)
    scores = score_answers(
        both,
        make_judges(params, None),
        load_dimensions(params),
        corpus,
        questions=questions,
        progress=False,
    )
    longest = both["answer"].str.len().max()
    length = scores[scores["judge"] == "rubric-lenient"].merge(
        both[["question_id", "system", "answer"]], on=["question_id", "system"]
    )
    first = length["answer"].map(lambda a: len(units(a.strip())[0]) if a.strip() else 0)
    noise = np.random.default_rng(seed).normal(0, 1, len(length))
    blind = [
        length.assign(judge="length-only", score=10 * length["answer"].str.len() / longest),
        length.assign(
            judge="form-only",
            score=np.clip(np.round(length["answer"].map(ends_sentence) * 2 + 6 + noise), 0, 10),
        ),
        length.assign(judge="position-only", score=10 * first / max(1, first.max())),
    ]
    scores = pd.concat([scores, *[b.drop(columns=["answer"]) for b in blind]], ignore_index=True)
    summary = audit_summary(probe_table(scores, probes, "sys"))
    summary["content_blind"] = [audit_verdict(r, 0.05, 10)[0] for _, r in summary.iterrows()]
    return summary.assign(seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--lang", default="zh")
    ap.add_argument(
        "--questions",
        type=int,
        default=40,
        help="audited questions (the default run's cap leaves 27)",
    )
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = pd.concat(
            [one_seed(s, args.lang, args.questions) for s in range(args.seeds)], ignore_index=True
        )
    print(
        f"{args.seeds} seeded demo knowledge bases (120 items, "
        f"{args.questions} audited questions, lang {args.lang})"
    )
    for judge, g in runs.groupby("judge", sort=False):
        blind = g["content_blind"].astype(bool).mean()
        print(
            f"{judge:16} named content-blind in {blind:.0%} of seeds; discrimination mean "
            f"{g['discrimination'].mean():.3f} (min {g['discrimination'].min():.3f}, max "
            f"{g['discrimination'].max():.3f}); pairs "
            f"{int(g['pairs'].mean())}; empty/truncated probes below the "
            f"original in {g['empty_truncated_wins'].sum()} of {g['empty_truncated_pairs'].sum()}"
        )
    rubric = runs[runs["judge"].str.startswith("rubric")]
    print(f"rubric_judges_falsely_excluded: {rubric['content_blind'].astype(bool).mean():.3f}")
    for judge in ("form", "position", "length"):
        detected = runs.loc[runs["judge"] == f"{judge}-only", "content_blind"].astype(bool).mean()
        print(f"{judge}_judge_detected: {detected:.3f}")


if __name__ == "__main__":
    main()
