"""Judgment browser at the paper's scale: page size and time to first render in headless Chromium.

6,111 questions x 3 sets x 4 dimensions x 4 judges (293,328 judgments), one system, answers of
~150 characters, gold documents of ~600, raw replies of ~60 (synthetic text, seeded). Writes the
browser into a temporary run folder, opens it in headless Chromium and reads the times the page
records on <body>: first render (first data file rendered) and everything loaded.

    python benchmarks/browser_scale.py [--questions 6111]
    python benchmarks/browser_scale.py --run outputs/default   # a finished run's own data (copied)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cube.config.runpaths import RunPaths  # noqa: E402
from cube.pages.browser import page_size, write_browser  # noqa: E402

JUDGES = ("judge-1", "judge-2", "judge-3", "judge-4")
DIMS = ("relevance", "specificity", "completeness", "quality")
CHARS = np.array(
    list(
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经"
    )
)


def _texts(rng: np.random.Generator, n: int, length: int) -> list[str]:
    idx = rng.integers(0, len(CHARS), size=(n, length))
    return ["".join(row) for row in CHARS[idx]]


def tables(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    qids = [f"Q{i:05d}" for i in range(n)]
    docs = [f"D{i:05d}" for i in range(n)]
    rank = np.where(rng.random(n) < 0.8, rng.integers(1, 9, n), 0)
    retrieved = [
        [docs[(i + k) % n] if k + 1 != r else docs[i] for k in range(8)] for i, r in enumerate(rank)
    ]
    ans = pd.DataFrame(
        {
            "question_id": np.repeat(qids, 3),
            "doc_id": np.repeat(docs, 3),
            "system": "sys",
            "set": np.tile(["zero", "rag", "full"], n),
            "answer": _texts(rng, 3 * n, 150),
            "rank": np.repeat(rank, 3),
            "retrieved_doc_ids": [x for x in retrieved for _ in range(3)],
            "retrieval_ok": True,
            "error": "",
        }
    )
    m = n * 3 * len(DIMS) * len(JUDGES)
    score = rng.integers(0, 11, m).astype(float)
    sc = pd.DataFrame(
        {
            "question_id": np.repeat(qids, m // n),
            "system": "sys",
            "set": np.tile(np.repeat(["zero", "rag", "full"], len(DIMS) * len(JUDGES)), n),
            "judge": np.tile(np.repeat(JUDGES, len(DIMS)), 3 * n),
            "dimension": np.tile(DIMS, m // len(DIMS)),
            "score": score,
            "raw": [
                f"评分：{int(v)}。理由：" + t
                for v, t in zip(score, _texts(rng, m, 50), strict=True)
            ],
            "error": "",
        }
    )
    questions = pd.DataFrame(
        {"question_id": qids, "question": _texts(rng, n, 30), "style": "named"}
    )
    corpus = pd.DataFrame(
        {"doc_id": docs, "item_name": _texts(rng, n, 10), "text": _texts(rng, n, 600)}
    )
    return ans, sc, questions, corpus


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=6111)
    ap.add_argument(
        "--run",
        type=Path,
        default=None,
        help="a finished run folder: its data and comparisons "
        "are copied to a temporary run (the run itself is left unchanged)",
    )
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        paths = RunPaths(root=Path(tmp) / "run", cache=Path(tmp) / "c.sqlite").ensure()
        if args.run is not None:
            for name in ("answers", "scores", "questions", "corpus"):
                if (args.run / "data" / f"{name}.parquet").exists():
                    shutil.copy(args.run / "data" / f"{name}.parquet", paths.data_file(name))
            for f in sorted(args.run.glob("compare/*/comparison.json")):  # the regression marks
                target = paths.root / f.parent.relative_to(args.run)
                (target / "tables").mkdir(parents=True)
                shutil.copy(f, target / f.name)
                shutil.copy(f.parent / "tables" / "question_changes.csv", target / "tables")
        else:
            for name, table in zip(
                ("answers", "scores", "questions", "corpus"), tables(args.questions), strict=True
            ):
                table.to_parquet(paths.data_file(name))
        n_judgments = len(pd.read_parquet(paths.data_file("scores"), columns=["judge"]))
        t = time.perf_counter()
        write_browser(paths)
        print(f"judgments: {n_judgments}")
        print(f"write_browser_s: {time.perf_counter() - t:.1f}")
        size = page_size(paths.report)
        for k, v in size.items():
            print(f"{k}_{'bytes' if k != 'chunks' else 'files'}: {v}")
        if chromium is None:
            print("chromium: not installed, no render time")
            return
        t = time.perf_counter()
        dom = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--dump-dom",
                (paths.report / "judgments.html").as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
        wall = time.perf_counter() - t
        body = dom[dom.index("<body") : dom.index(">", dom.index("<body"))]
        print(f"chromium_wall_s: {wall:.1f}")
        print(f"body: {body}")
        first = body.split('data-first-render-ms="')[1].split('"')[0]
        print(f"first_render_ms: {first}")


if __name__ == "__main__":
    main()
