"""The one retrieved-list policy of every kind (`cube.systems.retrieved`): ids, passages, cuts,
misses kept at their rank, counts apart, and the case-insensitive "did you mean"."""

from __future__ import annotations

import pandas as pd

from cube.systems.retrieved import Retrieved, did_you_mean, ranked_lists, unmeasured_reasons

CORPUS = pd.DataFrame(
    {
        "doc_id": ["DOG01", "CAT02", "owl03"],
        "text": [
            "Dog licence. Bring the vaccination card to the town hall on Mondays.",
            "Cat shelter. Adoption needs a signed form and a home visit by the staff.",
            "Owl sanctuary. Night tours start at nine and cost four euros per person.",
        ],
    }
)


def test_ids_keep_first_rank_misses_keep_their_rank_and_lists_are_cut():
    out = ranked_lists(
        [Retrieved(ids=["CAT02", "nope", "CAT02", "DOG01", "owl03"]), None], CORPUS, 3
    )
    assert out.lists == [["CAT02", "unmapped:nope", "DOG01"], []]
    assert out.long == [True, False]
    # counted after the cut, as R@k reads them: 3 entries kept, one unknown
    assert (out.ids, out.unknown_ids, out.passages) == (3, ["nope"], 0)


def test_the_share_is_of_the_entries_kept_after_the_cut():
    # 8 unknown ids, then a long known tail: R@8 reads only the unknown ones, so the retrieval is
    # not measured, however many known ids follow (counted before the cut: 8 of 100, "measured")
    known = [f"K{i:03d}" for i in range(92)]
    corpus = pd.DataFrame({"doc_id": known, "text": [f"text {k}" for k in known]})
    head_unknown = Retrieved(ids=[f"x{i}" for i in range(8)] + known)
    out = ranked_lists([head_unknown], corpus, 8)
    assert (out.ids, len(out.unknown_ids)) == (8, 8)
    assert unmeasured_reasons(out, 0.1)
    # the reverse: a known first 8 and an unknown tail past the cut is measured
    tail_unknown = Retrieved(ids=known[:8] + [f"x{i}" for i in range(92)])
    out = ranked_lists([tail_unknown], corpus, 8)
    assert (out.ids, out.unknown_ids) == (8, [])
    assert not unmeasured_reasons(out, 0.1)


def test_passages_are_mapped_and_counted_apart_from_ids():
    replies = [
        Retrieved(
            passages=["Night tours start at nine", "a sentence from no document at all here"]
        ),
        Retrieved(ids=["dog01"]),
    ]
    out = ranked_lists(replies, CORPUS, 8)
    assert out.lists == [["owl03", "unmapped:passage2"], ["unmapped:dog01"]]
    assert (out.passages, out.unmapped_passages, out.ids, len(out.unknown_ids)) == (2, 1, 1, 1)
    assert out.did_you_mean == {"dog01": "DOG01"}


def test_ids_win_when_given_passages_when_ids_are_empty():
    out = ranked_lists(
        [
            Retrieved(ids=["CAT02"], passages=["Night tours start at nine"]),
            Retrieved(ids=[], passages=["Night tours start at nine"]),
        ],
        CORPUS,
        8,
    )
    assert out.lists == [["CAT02"], ["owl03"]]


def test_did_you_mean_ignores_case_and_spaces_but_never_guesses_between_two():
    known = ["DOG01", "Dog01", "CAT02"]
    assert did_you_mean([" cat02 ", "dog01", "zzz"], known) == {" cat02 ": "CAT02"}


def test_retrieval_not_measured_above_the_share_with_the_fix():
    every_passage = ranked_lists([Retrieved(passages=["unrelated words"] * 3)], CORPUS, 8)
    reasons = unmeasured_reasons(every_passage, 0.1)
    assert reasons and reasons[0].startswith(
        "3 of 3 retrieved passages matched no document: retrieval not measured"
    )
    by_case = ranked_lists([Retrieved(ids=["dog01", "cat02"])], CORPUS, 8)
    (reason,) = unmeasured_reasons(by_case, 0.1)
    assert "2 of 2 retrieved ids are not knowledge-base doc ids" in reason
    assert "'dog01' -> 'DOG01'" in reason and "'cat02' -> 'CAT02'" in reason
    fine = ranked_lists([Retrieved(ids=["DOG01"] * 1 + ["x"])], CORPUS, 8)
    assert unmeasured_reasons(fine, 0.5) == []  # 1 of 2 is not more than half
