"""Region-aware retrieval (`region_filter: question`) against no filter, on the demo corpus.

For zh and en and two corpus sizes (300 items, seed 7 as params/default.yaml; 2,000 items):
R@1, R@8 and the near-duplicate confusion rate (`cube.diagnose.near_duplicates`, split by cause) of
the builtin system (bm25s, top 8) on the template questions of the default style mix, without
and with the filter, plus how many questions named a region (filtered) and how many did not.

Run: .venv/bin/python benchmarks/region_filter.py
Last line: `region_confusion_300_zh_with_filter: <rate>` (share of questions whose top-1 is
the gold service in another region, with the filter).
"""

from __future__ import annotations

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.sections import BuiltinSystem, JudgeParams, QuestionParams
from cube.diagnose.near_duplicates import near_duplicate_confusion
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.systems import make_system


def _params(lang: str) -> Params:
    return Params(
        run="bench",
        lang=lang,
        questions=QuestionParams(seed=7),
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))],
    )


def main() -> None:
    last = float("nan")
    for lang in ("zh", "en"):
        for n in (300, 2000):
            corpus = generate_demo_corpus(n, lang, 0.33, seed=7)
            questions = build_questions(_params(lang), corpus)
            for mode in ("none", "question"):
                system = make_system(
                    BuiltinSystem(name=mode, region_filter=mode), _params(lang), None
                )
                answers = system.answer(questions, corpus, progress=False)
                c = near_duplicate_confusion(answers, corpus)
                counts = system.region_counts or {"filtered": 0, "unfiltered": len(questions)}
                print(
                    f"{lang} n={n} filter={mode:8s} R@1 {(answers['rank'] == 1).mean():.3f} "
                    f"R@8 {(answers['rank'] > 0).mean():.3f} confusion {c['rate']:.3f} "
                    f"(region {c['region']}, variant {c['variant']}, "
                    f"duplicate {c['duplicate']} of {c['n']}) "
                    f"filtered {counts['filtered']} unfiltered {counts['unfiltered']}"
                )
                if (lang, n, mode) == ("zh", 300, "question"):
                    last = c["region"] / c["n"]
    print(f"region_confusion_300_zh_with_filter: {last:.4f}")


if __name__ == "__main__":
    main()
