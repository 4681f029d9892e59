"""Agreement of the one-call all-dimensions judge with per-dimension calls, on a local model.

`all_dimensions: true` on a judge asks for every dimension of one answer in one call (a JSON object,
one integer per dimension: `cube/prompts/<lang>/all_dimensions.txt`) instead of one call per
dimension. It cuts calls by the number of dimensions; whether it scores like the per-dimension
calls is a property of the model, measured here on the one the project can run: llama-cpp-python's
server with the SmolLM2-135M GGUF (`make local-llm`; `cube.llm.local.LocalServer` on a free port),
temperature 0, structured output on (the server constrains both replies to their JSON schema).

The material is the demo corpus (English): N questions, each answered three ways (zero: a
refusal, rag: the materials field, full: the fee field, as benchmarks/local_llm_prefix_cache.py),
judged on the four default dimensions by one judge with per-dimension calls and one with a
single call per answer. Printed: per judge its calls, prompt tokens and parsed share; per
dimension the pairs both scored, exact agreement, agreement within 1 point, Spearman's rho and
quadratic-weighted kappa (`cube.method.agreement.weighted_kappa`), and each side's distinct
scores (a 135M model often gives one score to everything, which makes rho and kappa undefined:
NaN, not 0); and per mode the mean Spearman correlation between two dimensions' scores of the
same answers (one reply for all dimensions may move them together: a halo). A 135M model is a
weak judge: its figures say how this model behaves, not how a capable judge would; the same script
measures any served GGUF (`--model PATH`).

    PYTHONPATH=. python benchmarks/local_llm_all_dimensions.py [--questions 10] [--model X.gguf]

Needs `make local-llm` (else a NaN headline). Last line: `all_dimensions_exact_agreement: x`, the
mean over dimensions of the share of answers scored identically by both modes.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from local_llm_prefix_cache import inputs  # noqa: E402
from scipy import stats  # noqa: E402

from cube.config.model_spec import ModelSpec  # noqa: E402
from cube.config.params import parse_params  # noqa: E402
from cube.judges import Judge, load_dimensions, score_answers  # noqa: E402
from cube.llm import make_model  # noqa: E402
from cube.llm.local import LocalServer, missing_parts  # noqa: E402
from cube.method.agreement import weighted_kappa  # noqa: E402

DIMENSIONS = ["relevance", "specificity", "completeness", "quality"]


def agreement(per: pd.Series, one: pd.Series) -> dict[str, float]:
    """The agreement figures of two score vectors aligned on the same answers (NaN dropped)."""
    both = pd.concat([per, one], axis=1, keys=["per", "one"]).dropna()
    a, b = both["per"].to_numpy(float), both["one"].to_numpy(float)
    varied = len(a) > 1 and np.ptp(a) > 0 and np.ptp(b) > 0
    return {
        "n": len(a),
        "exact": float(np.mean(a == b)) if len(a) else float("nan"),
        "within_1": float(np.mean(np.abs(a - b) <= 1)) if len(a) else float("nan"),
        "spearman": float(stats.spearmanr(a, b)[0]) if varied else float("nan"),
        "kappa": weighted_kappa(a, b),
        "distinct_per": len(set(a)),
        "distinct_one": len(set(b)),
        "mean_per": float(a.mean()) if len(a) else float("nan"),
        "mean_one": float(b.mean()) if len(b) else float("nan"),
    }


def halo(scores: pd.Series) -> float:
    """The mean Spearman correlation between two dimensions' scores of the same answers (over
    the pairs of dimensions where both vary): how much one mode's dimensions move together."""
    wide = scores.unstack("dimension")
    rho = []
    for i, a in enumerate(DIMENSIONS):
        for b in DIMENSIONS[i + 1 :]:
            both = wide[[a, b]].dropna()
            if len(both) > 1 and both[a].nunique() > 1 and both[b].nunique() > 1:
                rho.append(stats.spearmanr(both[a], both[b])[0])
    return float(np.mean(rho)) if rho else float("nan")


def _usage(scores: pd.DataFrame) -> tuple[int, int, float]:
    """(calls, prompt tokens, share of score rows parsed) of one judge's rows."""
    calls = scores.drop_duplicates("call_id")
    return len(calls), int(calls["input_tokens"].sum()), float(scores["score"].notna().mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=10, help="questions (x 3 answers each)")
    ap.add_argument("--model", type=Path, default=None, help="a GGUF (default: SmolLM2-135M)")
    args = ap.parse_args()
    missing = missing_parts()
    if missing:
        print("local_llm_all_dimensions: not measured: " + "; ".join(missing), file=sys.stderr)
        print("all_dimensions_exact_agreement: nan")
        return
    params = parse_params(
        {
            "run": "bench",
            "lang": "en",
            "judges": [{"name": "j", "model": {"provider": "offline", "model": "rubric"}}],
            "dimensions": DIMENSIONS,
        }
    )
    dims = load_dimensions(params)
    corpus, questions, answers = inputs(args.questions)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp, LocalServer(model=args.model, port=port) as server:
        spec = ModelSpec(
            model="local",
            base_url=server.base_url,
            temperature=0,
            max_tokens=64,
            timeout_s=600,
            max_concurrency=1,
            structured_output="on",
        )
        judges = [
            Judge(name="per-dimension", model=make_model(spec, Path(tmp) / "c.sqlite")),
            Judge(
                name="all-dimensions",
                model=make_model(spec, Path(tmp) / "c.sqlite"),
                all_dimensions=True,
            ),
        ]
        scores = score_answers(answers, judges, dims, corpus, questions=questions, progress=False)
    key = ["question_id", "set", "dimension"]
    per = scores[scores["judge"] == "per-dimension"].set_index(key)["score"]
    one = scores[scores["judge"] == "all-dimensions"].set_index(key)["score"]
    for name in ("per-dimension", "all-dimensions"):
        calls, tokens, parsed = _usage(scores[scores["judge"] == name])
        print(f"{name}: {calls} calls, {tokens} prompt tokens, {parsed:.3f} of scores parsed")
    rows = []
    for d in DIMENSIONS:
        fig = agreement(per.xs(d, level="dimension"), one.xs(d, level="dimension"))
        rows.append(fig)
        print(
            f"{d:<13} n {fig['n']:>3}  exact {fig['exact']:.3f}  within 1 {fig['within_1']:.3f}  "
            f"spearman {fig['spearman']:.3f}  kappa {fig['kappa']:.3f}  mean per-dim "
            f"{fig['mean_per']:.2f} / one-call {fig['mean_one']:.2f}  distinct scores "
            f"{fig['distinct_per']} / {fig['distinct_one']}",
            flush=True,
        )
    print(
        f"between dimensions (mean Spearman over pairs): per-dimension {halo(per):.3f}, "
        f"one-call {halo(one):.3f}"
    )
    exact = float(np.nanmean([r["exact"] for r in rows]))
    print(f"all_dimensions_exact_agreement: {exact:.3f}")


if __name__ == "__main__":
    main()
