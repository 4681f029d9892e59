"""The caption of every figure the notebooks save (`run.figure(name, ...)`), written for it.

The report's index lists each figure with its caption (`cube.pages.publish.page_outputs`). A
figure's caption was once the heading before the cell that saves it, so two figures under one
heading shared a caption that described neither ("The judge validity gate" for the CuBE forest
plot). Each figure now has its own sentence here, saying what is drawn and how to read it; a
figure a notebook saves without an entry gets none (and `tests/pages/test_captions.py` fails).
"""

from __future__ import annotations

FIGURE_CAPTIONS: dict[str, str] = {
    # 02 question sets and retrieval
    "fig_recall_curve": "R@k for every k up to each system's TOP-N, one line per system; the last "
    "point of a line is the share of questions whose gold document is anywhere in the list.",
    "fig_recall_by_family_size": "R@TOP-N of the system under test by the size of the gold "
    "document's near-duplicate family, with Wilson intervals.",
    "fig_recall_by_department": "R@TOP-N of the system under test by the gold document's "
    "department, with Wilson intervals.",
    "fig_confused_items": "The items whose questions most often retrieved a near-duplicate first, "
    "stacked by cause (another region's copy, another variant, a duplicate document).",
    "fig_rank_distribution": "Rank of the gold document in each rag answer's retrieved list "
    "(0: not retrieved), one bar per rank.",
    # 03-05 scores, correlations, bounds
    "fig1_score_distributions": "Figure 1: share of each integer score 0-10 per judge and "
    "dimension on the rag set.",
    "fig2_correlation_all": "Figure 2: Pearson correlations of the rank score and one judge's "
    "dimension scores, rag set, all questions.",
    "fig3_correlation_retrieved": "Figure 3: the same correlations over the questions whose gold "
    "document was retrieved.",
    "fig4_correlation_judges": "Figure 4: the correlation matrix of every judge, all questions.",
    "fig4b_correlation_judges_retrieved": "Figure 4b: the correlation matrix of every judge, "
    "questions whose gold document was retrieved.",
    "fig_bounds": "Per dimension and judge: the zero and full bounds (ends of each bar) and the "
    "rag trimmed mean (point), on the raw 0-10 scale, with the normalised score N_d.",
    # 06 CuBE
    "fig_cube_scores": "Each judge's CuBE score and the jury's, with their bootstrap intervals, "
    "over the bands of the verdicts.",
    "fig_normalised_dimensions": "Each judge's normalised dimension scores and weighted score "
    "(0 = zero bound, 100 = full bound), the jury mean marked on each group.",
    "fig_sequential_path": "A sequential run (`cube run --until-settled`): each system's jury "
    "CuBE against questions judged, its confidence sequence (band, valid at every look), the "
    "fixed-n interval at each look (dashed, valid only at one n fixed in advance), the verdict "
    "bands and the stop.",
    # 07-08 agreement, lexical metrics
    "fig5_agreement_heatmap": "Pairwise Spearman correlation between every two judges (and the "
    "human raters, when rated), all dimensions.",
    "fig5_judge_vs_reference": "Figure 5: each judge's score against the reference's, per "
    "dimension, with the identity line, n and Pearson r in each panel.",
    "fig_lexical_vs_judges": "BLEU and ROUGE of each answer against each judge's completeness "
    "score, points coloured by answer set, Pearson r in each panel.",
    # 10 diagnostics
    "fig_diag_recall_curve": "R@k for every k up to each system's TOP-N, one line per system "
    "(the diagnostics' copy of the retrieval curve).",
    "fig_top_n_sweep": "R@N, W and CuBE against TOP-N (log2 axis) with their intervals.",
    "fig_failure_patterns": "Low-scoring answers per failure pattern, most frequent first.",
    "fig_refusal_by_category": "Refusal accuracy on questions the corpus cannot answer and "
    "false-refusal rate on answerable ones, per category, with Wilson intervals.",
    "fig_patterns_by_department": "Share of each department's low-scoring answers per primary "
    "failure pattern.",
    # 11 audit, 12 validation
    "fig_audit": "The judge audit: each judge's discrimination between a correct answer and its "
    "corrupted twin (0.5 = chance), and its verbosity, authority and order biases.",
    "fig_sim_coverage": "Simulated runs: coverage of every printed interval against its nominal "
    "level, with ±2 Monte Carlo standard errors.",
    "fig_sim_pvalues": "Simulated runs with no difference: compare's p-values against the "
    "uniform distribution (QQ plot with the 95 % band of uniform order statistics).",
}


def figure_caption(name: str) -> str:
    """The caption written for figure `name` ("" for a figure without one)."""
    return FIGURE_CAPTIONS.get(name, "")
