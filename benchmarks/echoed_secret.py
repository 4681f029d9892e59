"""Files of a whole run that hold a key an http system echoes back (issue 38, item 2).

One run of every stage (8 demo questions, `paper_tables` and `validation` on, two offline judges)
with two systems: the builtin one and an http system (tests/hostile_server.py, mode `echo`) whose
reply repeats every request header, its `X-Api-Key` canary included. Every file of the outputs
folder (the run, its report, the annotation sheets, the compare pages, cache.sqlite) is searched
for the canary: its bytes, the members of a zip (xlsx) and the cells of a parquet file.

Run it on the tree to measure (`PYTHONPATH` picks cube; the run's notebooks are that tree's):

    PYTHONPATH=/path/to/main python benchmarks/echoed_secret.py --tree /path/to/main
    PYTHONPATH=$PWD python benchmarks/echoed_secret.py

The headline, printed last, is the number of files holding the canary.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CANARY = "canary-key-Zq8xT4mW2nR7vK9pL3sB6dF1"


def texts(path: Path) -> list[str]:
    """Every text a file holds: its bytes, a zip's members, a parquet's cells."""
    import pandas as pd

    raw = path.read_bytes()
    out = [raw.decode("utf-8", "replace")]
    if zipfile.is_zipfile(io.BytesIO(raw)):
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            out += [z.read(n).decode("utf-8", "replace") for n in z.namelist()]
    if path.suffix == ".parquet":
        out.append(pd.read_parquet(path).astype(str).to_csv())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=HERE, help="the project whose notebooks run")
    args = ap.parse_args()
    import yaml

    spec = importlib.util.spec_from_file_location("hostile", HERE / "tests" / "hostile_server.py")
    hostile_server = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(hostile_server)  # type: ignore[union-attr]
    os.environ["HOSTILE_KEY"] = CANARY
    os.chdir(args.tree)
    from cube.run.execute import execute_run

    tmp, t0 = Path(tempfile.mkdtemp()), time.perf_counter()
    offline = {"provider": "offline", "model": "rubric"}
    with hostile_server.HostileServer() as hostile:
        echo = {
            "kind": "http",
            "name": "echo",
            "url": hostile.url("echo"),
            "top_n": 4,
            "max_attempts": 1,
            "header_env": {"X-Api-Key": "HOSTILE_KEY"},
            "body": {"question": "{question}"},
            "response": {"answer": "answer", "retrieved_ids": "ids"},
        }
        data = {
            "run": "hostile",
            "lang": "en",
            "outputs_dir": str(tmp / "out"),
            "corpus": {"source": "demo", "n_items": 8, "seed": 1},
            "questions": {"generator": "template", "seed": 1},
            "answerer": {"provider": "offline", "model": "extractive"},
            "judges": [
                {"name": "rubric", "model": offline},
                {"name": "lenient", "model": {**offline, "model": "rubric-lenient"}},
            ],
            "stages": {"paper_tables": "on", "validation": "on"},
            "systems": [{"kind": "builtin", "name": "bm25", "top_n": 4}, echo],
        }
        path = tmp / "p.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        summary = execute_run(path, log=lambda _: None)
    files = [p for p in (tmp / "out").rglob("*") if p.is_file()]
    leaks = [p.relative_to(tmp / "out") for p in files if any(CANARY in t for t in texts(p))]
    print(f"run ok: {summary.ok}; {len(files)} files; {time.perf_counter() - t0:.0f} s")
    for leak in leaks:
        print(f"  canary in {leak}")
    print(f"files_with_echoed_key: {len(leaks)}")


if __name__ == "__main__":
    main()
