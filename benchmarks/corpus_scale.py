"""Time to generate the synthetic demo corpus at the paper's size (6,111 province-level items).

Run: .venv/bin/python benchmarks/corpus_scale.py [--repeats 3]
Prints the best-of-N wall time per language, the TXT export and reload of the zh corpus
(the paper's one-file-per-item format), and last the headline `corpus_6111_seconds: <value>`
(the slower language, best of N).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cube.kb.corpus import export_txt_folder, load_corpus_file
from cube.kb.demo import generate_demo_corpus

N_ITEMS = 6111


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of `repeats` runs of `fn`, and its result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    seconds = {}
    for lang in ("zh", "en"):
        t, df = best_of(args.repeats, lambda lang=lang: generate_demo_corpus(N_ITEMS, lang))
        seconds[lang] = t
        chars = df["text"].str.len().mean()
        print(
            f"generate {N_ITEMS} items ({lang}): {t:.3f} s  "
            f"({N_ITEMS / t:,.0f} items/s, mean document {chars:.0f} chars)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        df = generate_demo_corpus(N_ITEMS, "zh")
        t0 = time.perf_counter()
        export_txt_folder(df, Path(tmp) / "kb")
        t_export = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = load_corpus_file(Path(tmp) / "kb", lang="zh")
        t_load = time.perf_counter() - t0
        print(
            f"export {N_ITEMS} TXT files: {t_export:.3f} s; load the TXT "
            f"folder back: {t_load:.3f} s ({len(back)} items)"
        )
    print(f"corpus_6111_seconds: {max(seconds.values()):.3f}")


if __name__ == "__main__":
    main()
