"""The fence's chat-template markers (`cube.config.fence.CHAT_MARKERS`, issue 38) on cases with
known truth: how many disguised markers pass it, and how much ordinary text it rewrites.

Positives: every listed marker (the templates llama.cpp's src/llama-chat.cpp and vLLM's example
templates ship) in 26 disguises each (the test's `_disguises`: case, spaces inside, zero-width and
format characters, fullwidth and small-form brackets, amid text); one passes when the text as a
model reads it (NFKC, format characters dropped) still holds a `<` or `[` of the marker.
Negatives: lines holding `<` or `[` that the project did not write: the Python standard library's
sources (comparisons, generics, indexing, HTML in docstrings) and the documentation under
/usr/share/doc; one is a false rewrite when the fence changes it. A false rewrite is cosmetic (the
text stays readable with `‹›`), so it is reported, not gated.

    python benchmarks/fence_markers.py
"""

from __future__ import annotations

import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cube.config.fence import CHAT_MARKERS, _as_read, neutralise_tags  # noqa: E402
from tests.config.test_fence import _disguises  # noqa: E402


def ordinary_lines(limit: int = 200_000) -> list[str]:
    """Lines with a bracket from the standard library's sources and /usr/share/doc."""
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path("/usr/share/doc")]
    lines: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix not in {".py", ".html", ".md", ".txt", ".rst"} or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            lines += [ln for ln in text.splitlines() if "<" in ln or "[" in ln]
            if len(lines) >= limit:
                return lines[:limit]
    return lines


def main() -> None:
    markers = sorted({m for ms in CHAT_MARKERS.values() for m in ms})
    cases = [(m, d) for m in markers for d in _disguises(m)]
    passed = []
    for marker, written in cases:
        seen = _as_read(neutralise_tags(f"answer {written} tail"))[0]
        if set(seen) & {"<", "["}:
            passed.append((marker, written))
    print(
        f"markers: {len(markers)} over {len(CHAT_MARKERS)} templates; disguised cases: {len(cases)}"
    )
    for marker, written in passed[:20]:
        print(f"  passed: {marker!r} written {written!r}")
    lines = ordinary_lines()
    t0 = time.perf_counter()
    changed = [ln for ln in lines if neutralise_tags(ln) != ln]
    secs = time.perf_counter() - t0
    print(f"ordinary lines with a bracket: {len(lines)}, rewritten: {len(changed)} ({secs:.1f} s)")
    for ln in changed[:15]:
        print(f"  rewritten: {ln.strip()[:100]!r}")
    print(
        f"false rewrites per 1,000 ordinary lines: {1000 * len(changed) / max(len(lines), 1):.2f}"
    )
    print(f"disguised markers passed: {len(passed)} of {len(cases)}")


if __name__ == "__main__":
    main()
