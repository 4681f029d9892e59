"""The CuBE mathematics and statistics: pure functions, DataFrames in, DataFrames or dataclasses out.

Bottom first: `analysis` (validation, ranks, retrieval outcomes, correlations, weights, trimmed
means, `CubeWarning`), `normalise` (N_d, W and their flags), `bootstrap` (the question bootstrap),
`gate` (the judge validity gate and failure rates), `evaluation` (`evaluate`: one system's whole
chain, `CubeResult`), `agreement` / `agreement_fast` (human vs judges, reliability), `lexical`
(BLEU/ROUGE), `compare` (paired comparison of two systems), `tables` (the paper's tables), `paper`
(the published tables and Table 4 rebuilt). No file, network, LLM or figure: only `cube.config`.
"""
