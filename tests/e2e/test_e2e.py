"""End to end: every notebook under papermill on a tiny run, then the report.

The run has 30 synthetic items, two systems (the builtin BM25 RAG and an imported QA file
whose answers contain HTML), two rubric judges and one LLM judge served by a local
OpenAI-compatible server. It checks that every declared table and figure exists, that the
tables agree with `cube.method.analysis` recomputed from the saved scores, that the report escapes
system text, that a forced re-run is served from the LLM cache, and that notebooks 07-08
work with human ratings filled into the exported sheet.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
import yaml

from cube.config.fence import fenced_text
from cube.config.params import load_params
from cube.kb.demo import generate_demo_corpus
from cube.method import analysis as A
from cube.method import evaluation as E
from cube.run.execute import execute_run
from tests import ROOT
from tests.openai_server import OpenAIServer, last_user_message

pytestmark = pytest.mark.e2e
KEY = "sk-e2e-secret-value-123456"
SCRIPT = "<script>alert('x')</script>"

TABLES = [
    "paper_table4_reproduced",
    "corpus_overview",
    "corpus_family_example",
    "questions_by_field",
    "retrieval",
    "qa_example",
    "judge_failure_rates",
    "table1_judge_summary",
    "rank_correlations",
    "retrieved_summary",
    "table2_trimmed_means",
    "table3_weights",
    "table4_cube_scores",
    "cube_bootstrap_intervals",
    "agreement",
    "lexical_by_set",
    "table6_example",
    "lexical_correlations",
    "retrieval_metrics",
    "refusal_answers",
    "failure_patterns",
    "failure_examples",
    "category_by_style",
    "category_by_department",
    "sim_coverage",
    "sim_pvalues",
    "sim_gate",
    "sim_truth",
]
FIGURES = [
    "fig_rank_distribution",
    "fig1_score_distributions",
    "fig2_correlation_all",
    "fig3_correlation_retrieved",
    "fig4_correlation_judges",
    "fig_bounds",
    "fig_cube_scores",
    "fig_normalised_dimensions",
    "fig5_agreement_heatmap",
    "fig5_judge_vs_reference",
    "fig_lexical_vs_judges",
    "fig_recall_curve",
    "fig_diag_recall_curve",
    "fig_failure_patterns",
    "fig_sim_coverage",
    "fig_sim_pvalues",
]


def overlap_judge(body: dict) -> str:
    """A scripted judge: 2 + 8 x the share of the answer's characters found in the source."""
    prompt = last_user_message(body)
    source, answer = fenced_text(prompt, "source"), fenced_text(prompt, "answer")
    if source is None or not (answer or "").strip():
        return "0"
    chars = [c for c in answer if not c.isspace()]
    share = sum(c in source for c in chars) / max(1, len(chars))
    return f"评分：{round(2 + 8 * share)}"


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        self.ids.update(v for k, v in attrs if k == "id" and v)
        self.scripts += tag == "script"


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    corpus = generate_demo_corpus(30, "zh", seed=3)
    gold = corpus["doc_id"].tolist()
    imported = pd.DataFrame(
        {
            "question_id": [f"Q{i + 1:05d}" for i in range(30)],
            "answer": [
                f"{SCRIPT} 请携带身份证到政务服务大厅办理。"
                if i % 2
                else corpus["text"].iloc[i][:120]
                for i in range(30)
            ],
            "retrieved_doc_ids": [
                json.dumps([gold[(i + 1) % 30], gold[i]] if i % 3 else [gold[(i + 5) % 30]])
                for i in range(30)
            ],
        }
    )
    imported_path = tmp / "imported.csv"
    imported.to_csv(imported_path, index=False)
    server = OpenAIServer(reply=overlap_judge).start()
    params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    params.update(
        {
            "run": "e2e",
            "outputs_dir": str(tmp / "outputs"),
            "corpus": {"source": "demo", "n_items": 30, "seed": 3},
            "questions": {"generator": "template", "seed": 3},
            # every stage's outputs are checked: 30 questions would skip 00 and 12 under `auto`
            "stages": {"paper_tables": "on", "validation": "on"},
            "models": {
                "local": {
                    "provider": "openai",
                    "model": "test-model",
                    "base_url": server.url,
                    "api_key_env": "CUBE_E2E_KEY",
                    "max_concurrency": 8,
                    "price_input_per_m": 1.0,
                    "price_output_per_m": 2.0,
                }
            },
            "systems": [
                {"kind": "imported", "name": "imported", "path": str(imported_path)},
                {"kind": "builtin", "name": "bm25-top8", "top_n": 8},
            ],
            "judges": params["judges"] + [{"name": "local-llm", "model": "local"}],
            "analysis": {**params["analysis"], "bootstrap": 100},
            "human": {"sample_size": 12, "seed": 1},
        }
    )
    path = tmp / "e2e.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv("CUBE_E2E_KEY", KEY)
    mp.chdir(ROOT)
    logs: list[str] = []
    summary = execute_run(path, log=logs.append)
    root = tmp / "outputs" / "e2e"
    yield {
        "summary": summary,
        "root": root,
        # results.json as the whole run wrote it (later tests re-run stages, which forgets the
        # keys of the stages left out of date)
        "results": (root / "results.json").read_text(encoding="utf-8"),
        "server": server,
        "params_path": path,
        "logs": logs,
        "tmp": tmp,
    }
    mp.undo()
    server.stop()


def test_every_stage_ran_and_every_table_and_figure_exists(e2e):
    n_notebooks = len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    assert [s.status for s in e2e["summary"].stages] == ["executed"] * n_notebooks, e2e["logs"]
    root = e2e["root"]
    assert (
        len(list(root.glob("compare/*__vs__*/comparison.json"))) == 1
    )  # notebook 09: primary vs the other
    assert (root / "report" / "judgments.html").exists() and (
        root / "report" / "judgments" / "index.js"
    ).exists()
    for name in TABLES:
        assert (root / "tables" / f"{name}.csv").exists(), name
    for name in FIGURES:
        assert (root / "figures" / f"{name}.png").stat().st_size > 5_000, name
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert (root / "report" / f"{nb.stem}.html").exists() and (
            root / "report" / "code" / f"{nb.stem}.html"
        ).exists()


def test_tables_agree_with_the_analysis_of_the_saved_scores(e2e):
    root = e2e["root"]
    answers = pd.read_parquet(root / "data" / "answers.parquet")
    scores = pd.read_parquet(root / "data" / "scores.parquet")
    params = load_params(e2e["params_path"])
    table4 = pd.read_csv(root / "tables" / "table4_cube_scores.csv")
    for system, top_n in (("bm25-top8", 8), ("imported", 8)):
        direct = E.evaluate(
            answers[answers.system == system],
            scores[scores.system == system],
            params.analysis.model_copy(update={"bootstrap": 0}),
            top_n,
        )
        mine = table4[table4.system == system].set_index("judge")
        for judge in direct.cube_table.index:
            for col in ("relevance", "completeness", "weighted_score", "recall_at_k", "cube_score"):
                want, got = direct.cube_table.at[judge, col], mine.at[judge, col]
                assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want, abs=1e-9), (
                    system,
                    judge,
                    col,
                )
        # NaN when no judge passes the validity gate (the imported system's odd answers): NaN on
        # both sides
        assert mine.at["Jury mean", "cube_score"] == pytest.approx(
            direct.jury.at["mean", "cube_score"], abs=1e-9, nan_ok=True
        )
    t2 = pd.read_csv(root / "tables" / "table2_trimmed_means.csv")
    tm = A.trimmed_means(
        scores[scores.system == "bm25-top8"],
        params.analysis.trim_proportion,
        A.question_ranks(answers[answers.system == "bm25-top8"]).query("retrieved")["question_id"],
    )
    row = t2[(t2.system == "bm25-top8") & (t2.judge == "local-llm") & (t2.set == "rag")].iloc[0]
    want = tm[(tm.judge == "local-llm") & (tm.set == "rag") & (tm.dimension == "quality")][
        "trimmed_mean"
    ].iloc[0]
    assert row["quality"] == pytest.approx(want)
    results = json.loads((root / "results.json").read_text())
    assert results["decision"]["system"] == "imported"
    assert "failure_patterns" in results["decision"] and "retrieval_sentence" in results["decision"]
    assert results["cube_score"] == pytest.approx(
        table4[(table4.system == "imported")].set_index("judge").at["Jury mean", "cube_score"],
        nan_ok=True,
    )


def test_report_decision_page_and_escaping(e2e):
    report = e2e["root"] / "report"
    index = (report / "index.html").read_text(encoding="utf-8")
    ids = _Ids()
    ids.feed(index)
    assert {
        "decision",
        "cube-score",
        "recall",
        "weighted-score",
        "cost",
        "verdict",
        "suggestions",
        "pages",
        "files",
        "systems",
    } <= ids.ids
    assert ids.scripts == 0
    assert "SYNTHETIC" in index and "not LLMs" in index
    qa_page = (report / "02_qa_sets.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert" in qa_page and SCRIPT not in qa_page
    manifest = json.loads((e2e["root"] / "manifest.json").read_text())
    judging = [
        u for u in manifest["usage"] if u["role"] == "judging" and u["model"] == "test-model"
    ]
    assert judging and judging[0]["cost_total"] > 0 and judging[0]["failed_calls"] == 0
    # the decision's cost card is the usage table's total, the audit's calls included (issue 29)
    decision = json.loads((e2e["root"] / "results.json").read_text())["decision"]
    usage = manifest["usage"]
    assert any(u["role"] == "audit" and u["calls"] > 0 for u in usage)
    assert decision["calls_total"] == sum(u["calls"] for u in usage)
    assert decision["tokens_total"] == sum(u["input_tokens"] + u["output_tokens"] for u in usage)
    assert decision["cost_total"] == pytest.approx(sum(u["cost_total"] for u in usage))
    # `cube plan` before the run counted the LLM judge's calls the run then made (issue 22)
    vs = {(p["role"], p["model"]): p for p in manifest["plan_vs_actual"]}
    assert (
        vs[("judging", "test-model")]["planned_calls"] == vs[("judging", "test-model")]["calls"] > 0
    )
    assert 'id="plan"' in index


def test_secrets_never_reach_outputs(e2e):
    assert e2e["server"].authorizations and all(
        a == f"Bearer {KEY}" for a in e2e["server"].authorizations
    )
    for f in e2e["root"].rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
    assert KEY.encode() not in (e2e["tmp"] / "outputs" / "cache.sqlite").read_bytes()


def test_no_published_file_holds_a_local_path(e2e):
    """Outputs outside the project (the fixture's tmp folder) and the project root itself: no
    published text shows either (e.g. page 07 naming the annotation folder, the provenance of
    imported answers)."""
    for f in e2e["root"].rglob("*"):
        if f.is_file() and f.suffix in {".html", ".json", ".yaml", ".csv", ".ipynb", ".txt", ".md"}:
            text = f.read_text(encoding="utf-8", errors="replace")
            assert str(e2e["tmp"]) not in text and str(ROOT) not in text, f


def test_forced_rerun_is_served_from_the_cache(e2e):
    before = e2e["server"].requests_total
    assert before > 0
    again = execute_run(e2e["params_path"], only="03", force=True, log=e2e["logs"].append)
    assert [s.status for s in again.stages] == ["executed"]
    assert e2e["server"].requests_total == before  # every judge call came from outputs/cache.sqlite
    stale = execute_run(e2e["params_path"], only="04..05", log=e2e["logs"].append)
    assert [s.status for s in stale.stages] == [
        "executed",
        "executed",
    ]  # 03 re-ran: later stages are stale
    fresh = execute_run(e2e["params_path"], only="04..05", log=e2e["logs"].append)
    assert [s.status for s in fresh.stages] == ["up to date", "up to date"]


def test_human_ratings_flow_through_notebooks_07_and_08(e2e):
    root = e2e["root"]
    sheet = pd.read_csv(root / "annotation" / "annotation_sheet.csv")
    assert len(sheet) >= 12 and {"relevance.c1", "completeness.total"} <= set(sheet.columns)
    assert not {"system", "set", "question_id"} & set(sheet.columns)  # blind: the key maps ids back
    key = pd.read_csv(root / "annotation" / "annotation_key.csv", dtype=str)
    sheet = sheet.merge(key, on="item_id", how="left", validate="one_to_one")
    scores = pd.read_parquet(root / "data" / "scores.parquet")
    llm = scores[scores.judge == "local-llm"].set_index(
        ["question_id", "system", "set", "dimension"]
    )["score"]
    rng = np.random.default_rng(0)
    filled = []
    for rater in ("r1", "r2"):
        part = sheet.copy()
        part["rater"] = rater
        for dim in ("relevance", "specificity", "completeness", "quality"):
            base = [
                llm.get((q, s, st, dim), 5.0)
                for q, s, st in zip(part.question_id, part.system, part.set, strict=True)
            ]
            total = np.clip(np.round(np.asarray(base) + rng.integers(-1, 2, len(part))), 0, 10)
            for c in range(1, 6):
                part[f"{dim}.c{c}"] = np.clip(total - 2 * (c - 1), 0, 2)
            part[f"{dim}.total"] = part[[f"{dim}.c{c}" for c in range(1, 6)]].sum(axis=1)
        filled.append(part)
    ratings = root.parent / "ratings.csv"
    pd.concat(filled).drop(columns=["question_id", "system", "set"]).to_csv(ratings, index=False)
    params = yaml.safe_load(e2e["params_path"].read_text(encoding="utf-8"))
    params["human"] = {**params["human"], "ratings": str(ratings), "per_rater_judges": True}
    e2e["params_path"].write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    summary = execute_run(e2e["params_path"], only="07..08", log=e2e["logs"].append)
    assert [s.status for s in summary.stages] == ["executed", "executed"], e2e["logs"][-4:]
    agreement = pd.read_csv(root / "tables" / "agreement.csv")
    assert {"local-llm", "rubric-strict"} <= set(agreement.judge) and agreement["n"].min() > 0
    table5 = pd.read_csv(root / "tables" / "table5_human_vs_cube.csv")
    assert set(table5.group) == {"CuBE (judges)", "Human rating"}
    assert (root / "tables" / "table7_criteria.csv").exists()
    calibrated = pd.read_csv(root / "tables" / "human_calibrated_cube.csv")
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    assert (
        set(calibrated["system"]) == set(results["human_calibrated"])
        and (calibrated["n_rated"] > 0).all()
    )
    page = (root / "report" / "07_human_agreement.html").read_text(encoding="utf-8")
    assert "never invents" not in page.split("<main>")[-1] or "human rater" in page
    # notebook 07 writes its own key, never into the decision, and counts ratings as rated cells
    assert "human_calibrated" not in (results.get("decision") or {})
    rated = pd.read_parquet(root / "data" / "human_ratings.parquet")
    for system, head in results["human_calibrated"].items():
        mine = rated[rated["system"].astype(str) == system]
        assert head["n_ratings"] == int(mine["score"].notna().sum()) > head["n_rated"] > 0


def test_results_carry_the_diagnostics(e2e):
    results = json.loads((e2e["root"] / "results.json").read_text())
    ret = results["retrieval"]
    assert ret["system"] == "imported" and set(ret) >= {
        "r_at_k",
        "mrr",
        "ndcg_at_k",
        "p_at_k",
        "curve",
    }
    assert ret["curve"][-1] == ret["hit_rate"] and len(ret["curve"]) == ret["top_n"]
    patterns = results["failure_patterns"]
    assert sum(patterns["patterns"].values()) == patterns["low"]
    for rows in results["categories"].values():
        assert sum(r["questions"] for r in rows) == ret["n"]
    refusal = results["refusal"][
        "bm25-top8"
    ]  # the imported system holds no answers to refusal questions
    assert refusal["n_unanswerable"] == 30 and 0 <= refusal["refusal_accuracy"] <= 1


def test_results_json_validates_against_the_run_record(e2e):
    """Every key a whole run writes is a field of `RunRecord` (an unknown key would be warned of,
    a value of another shape refused), the file is the record's current version, and it reads
    back equal."""
    import warnings

    from cube.run.record import RECORD_VERSION, RunRecord

    raw = json.loads(e2e["results"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a key no part owns fails here
        record = RunRecord.from_json(raw, "e2e results.json")
    assert raw["version"] == RECORD_VERSION and list(raw)[0] == "version"
    assert json.dumps(record.as_json(), sort_keys=True, default=float) == json.dumps(
        raw, sort_keys=True, default=float
    )
    assert record.decision.decision is not None and record.scores.audit_sample is not None
