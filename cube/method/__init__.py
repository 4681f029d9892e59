"""The CuBE mathematics and statistics: pure functions, DataFrames in, DataFrames or
dataclasses out.

Public face (`__all__`), imported as modules (`from cube.method import tables`), bottom first:
`analysis` (validation, ranks, retrieval outcomes, correlations, weights, trimmed means,
`CubeWarning`), `normalise` (N_d, W and their flags), `bootstrap` (the family or question
bootstrap), `design` (the families' intraclass correlations and design effects), `ppi` (the
human-calibrated interval), `gate` (the judge validity gate and failure rates), `evaluation`
(`evaluate`: one system's whole chain, `CubeResult`), `agreement` / `agreement_fast` (human vs
judges, reliability), `audit` (the judge audit), `lexical` (BLEU/ROUGE), `compare` (paired
comparison of two systems), `sequential` (the anytime-valid confidence sequence and its stop
rule), `tables` (the paper's tables), `paper` (the published tables and Table 4 rebuilt),
`simulate` and `simulate_study` (runs simulated with a known truth), `release_rule` (the
release gate's non-inferiority rule). No file, network, LLM or
figure: only `cube.config`.
"""

__all__ = [
    "agreement",
    "agreement_fast",
    "analysis",
    "audit",
    "bootstrap",
    "compare",
    "design",
    "evaluation",
    "gate",
    "lexical",
    "normalise",
    "paper",
    "ppi",
    "release_rule",
    "sequential",
    "simulate",
    "simulate_study",
    "tables",
]
