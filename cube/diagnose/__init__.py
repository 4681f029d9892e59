"""What an answer did and why a run scores as it does: pure, above `cube.method`.

Public face (`__all__`): the modules below, imported as `from cube.diagnose import retrieval`.

Modules: `retrieval` (R@k, MRR, nDCG, the R@k curve, Wilson intervals), `near_duplicates` (the
top-1 document a sibling of the gold one), `refusal` (the refusal detector and refusal report),
`failures` (failure patterns of low answers), `categories` and `refusal_categories` (figures by
department and style), `regressions` (per-question changes between two sides), `topn_sweep` (the
TOP-N hypothesis), `lta` (the decision: `assess`), `decision_record` (the decision as a typed
record), `verdict` (the verdict and one function per withholding rule), `suggest` (what to do next).
"""

__all__ = [
    "categories",
    "decision_record",
    "failures",
    "lta",
    "near_duplicates",
    "refusal",
    "refusal_categories",
    "regressions",
    "retrieval",
    "suggest",
    "topn_sweep",
    "verdict",
]
