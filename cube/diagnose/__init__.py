"""What an answer did and why a run scores as it does: pure, above `cube.method`.

Public face (`__all__`): the modules below, imported as `from cube.diagnose import retrieval`.

Modules: `retrieval` (R@k, MRR, nDCG, the R@k curve, Wilson intervals, the rank-correlation
reading), `near_duplicates` (the top-1 document a sibling of the gold one), `refusal` (the refusal
detector and refusal report), `failures` (failure patterns of low answers) with `claims` (the
numbers an answer claims and whether it says a field's value), `categories` and
`refusal_categories` (figures by department and style), `regressions` (per-question changes
between two sides), `topn_sweep` (the TOP-N hypothesis).

The decision (the paper's Lightweight Targeted Assessment) lives in four modules here and two
outside, each with one role: `decision_record` (what the decision is: the typed record
`Decision`, its JSON and its reference page) with `decision_parts` (its diagnostics as typed
parts), `assessment` (how it is made: `assess` builds the record from the evaluation), `verdict`
(the verdict and one function per withholding rule) and `suggest` (what to do next); outside,
`cube.run.decide` (stage 06: reads the run folder into `DecisionInputs`, writes `results.json`
`decision`) and `cube.pages.decision` (writes the record as the page's Markdown).
"""

__all__ = [
    "assessment",
    "categories",
    "claims",
    "decision_parts",
    "decision_record",
    "failures",
    "near_duplicates",
    "refusal",
    "refusal_categories",
    "regressions",
    "retrieval",
    "suggest",
    "topn_sweep",
    "verdict",
]
