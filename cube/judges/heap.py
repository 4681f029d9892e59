"""Python's cyclic garbage collector paused over the offline judges' work, collected per slice.

Scoring the paper's scale offline makes ~230k score rows, requests and responses a slice of answers
at a time, and keeps the tables the stage reads (14k answer records, the corpus) alive throughout.
The collector runs whenever allocations outnumber deallocations by 700, and as the heap grows it
traverses the whole of it again and again: ~3 s of stage 03's CPU (measured: `score_answers` 13.6
s with it running, 10.2 s without), while it found fewer than 2,000 objects to free (the scoring
makes almost no reference cycles). So the offline judges run with automatic collection off
(`young_collections`), and the caller collects the objects made since the last checkpoint at
each one (after each slice): cyclic garbage is still freed, a slice at a time, and each surviving
object is traversed once, not once per collection. Collection is never a result: outputs are the
same either way (tests/judges/test_heap.py).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def young_collections() -> Iterator[Callable[[], None]]:
    """Within the block, no automatic collection; the function it yields collects the youngest
    generation (everything made since the last checkpoint, automatic collection being off). When
    collection was off already (the caller's choice), it stays off and the checkpoint does
    nothing. Automatic collection resumes after the block, also when it raises."""
    if not gc.isenabled():
        yield _nothing
        return
    gc.disable()
    try:
        yield _collect_young
    finally:
        gc.enable()


def _collect_young() -> None:
    gc.collect(0)


def _nothing() -> None:
    return None
