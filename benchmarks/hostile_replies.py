"""Peak memory and wall time of one call under each hostile reply (issue 38, transport limits).

A hostile service (tests/hostile_server.py, a thread of this process) answers an http system's
call (`cube.llm` with `JsonWire`, the path every system and judge call takes) with: a plain answer
(`ok`, the baseline), a gzip bomb (2 MB on the wire, 2,000 MB inflated), a 200 MB body, a
58-character answer padded with 200 MB of blanks, and a slow drip (one byte every 2 s,
`timeout_s` 5). Each case runs in a fresh Python process with the call cache in a temporary
folder; the table gives the child's peak RSS (`VmHWM` of /proc/<pid>/status: `ru_maxrss` would
carry the parent's high-water mark across the fork and exec), the wall time, the outcome and the
size of cache.sqlite afterwards.

Run it on the tree to measure (`PYTHONPATH` picks it), e.g. before and after a change:

    PYTHONPATH=/path/to/main python benchmarks/hostile_replies.py
    PYTHONPATH=$PWD python benchmarks/hostile_replies.py

A case that does not end within `--cap-s` seconds (default 120) is killed and reported as such.
The headline, printed last, is the largest peak RSS over the hostile cases, in MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = ("ok", "bomb", "big", "padded", "drip")


def child(url: str, timeout_s: float) -> None:
    """One call to `url` through cube.llm (an http system's wire); prints what happened."""
    import cube
    from cube.config.model_spec import ModelSpec
    from cube.llm import JsonWire, OpenAIModel, Request

    print(f"cube from {Path(cube.__file__).parent}", file=sys.stderr)

    folder = Path(tempfile.mkdtemp())
    spec = ModelSpec(
        provider="openai", model="http:bench", base_url=url, timeout_s=timeout_s, max_attempts=1
    )
    wire = JsonWire("POST", url, {}, lambda data: None)
    model = OpenAIModel(spec, cache_path=folder / "cache.sqlite", wire=wire)
    r = model.complete([Request(messages=[], payload={"q": "x"})], role="bench", progress=False)[0]
    cache = folder / "cache.sqlite"
    print(
        json.dumps(
            {
                "peak_mb": _vm_hwm_mb(os.getpid()),
                "ok": r.ok,
                "error": (r.error or "")[:90],
                "text_chars": len(r.text or ""),
                "cache_mb": cache.stat().st_size / 1e6 if cache.exists() else 0.0,
            }
        )
    )


def _vm_hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run_case(url: str, timeout_s: float, cap_s: float) -> dict:
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--child", url, "--timeout-s", str(timeout_s)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        out, _ = proc.communicate(timeout=cap_s)
    except subprocess.TimeoutExpired:
        peak = _vm_hwm_mb(proc.pid)
        proc.kill()
        proc.communicate()
        return {"peak_mb": peak, "wall_s": cap_s, "ok": False, "error": f"killed at {cap_s:g} s"}
    wall = time.perf_counter() - t0
    try:
        row = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        row = {"peak_mb": float("nan"), "ok": False, "error": f"child exited {proc.returncode}"}
    return {**row, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--timeout-s", type=float, default=5.0)
    ap.add_argument("--cap-s", type=float, default=120.0)
    ap.add_argument("--bomb-mb", type=int, default=2000, help="inflated size of the gzip bomb")
    ap.add_argument("--big-mb", type=int, default=200)
    ap.add_argument("--pad-mb", type=int, default=200)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    if args.child:
        child(args.child, args.timeout_s)
        return
    import importlib.util

    # the server from this tree's tests/, whichever tree PYTHONPATH measures
    path = Path(__file__).resolve().parents[1] / "tests" / "hostile_server.py"
    module_spec = importlib.util.spec_from_file_location("hostile_server", path)
    hostile = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    module_spec.loader.exec_module(hostile)  # type: ignore[union-attr]
    HostileServer = hostile.HostileServer

    server = HostileServer(
        bomb_bytes=args.bomb_mb << 20,
        big_bytes=args.big_mb << 20,
        pad_chars=args.pad_mb << 20,
        drip_s=2.0,
    )
    print(f"tree: {os.environ.get('PYTHONPATH', '(installed)')}; timeout_s {args.timeout_s:g}")
    print(f"{'case':<8} {'peak MB':>8} {'wall s':>7} {'cache MB':>9}  outcome")
    peaks = []
    with server:
        if "bomb" in args.cases:
            server.bomb()  # compressed before the clock starts
        for case in args.cases.split(","):
            row = run_case(server.url(case), args.timeout_s, args.cap_s)
            outcome = "ok" if row["ok"] else row["error"]
            if row.get("ok") and row.get("text_chars") is not None:
                outcome += f" ({row['text_chars']:,} characters kept)"
            print(
                f"{case:<8} {row['peak_mb']:>8.0f} {row['wall_s']:>7.1f} "
                f"{row.get('cache_mb', float('nan')):>9.2f}  {outcome}"
            )
            if case != "ok":
                peaks.append(row["peak_mb"])
    print(f"peak_rss_mb_hostile_max: {max(peaks):.0f}")


if __name__ == "__main__":
    main()
