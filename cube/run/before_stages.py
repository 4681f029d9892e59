"""The runner's work before the stages, in one forked child: the input checks, then the plan.

`cube run` checks its inputs (`cube.run.validate.validate_data`) and counts its calls
(`cube.run.plan.build_plan`) in forked children, so that their memory leaves with them
(`cube.config.forked`). Both build the demo knowledge base the same way (`build_corpus` of the same
params and folder: 6,111 items, ~0.5 s of CPU at the paper's scale), and the plan's child, forked
from the runner, imported again what the checks' child had imported. `checks_then` runs both in
one child (`cube.config.forked.start_steps`): the checks' report comes back first (the runner
stops there on an error, killing the child), then, once the runner holds the run folder's lock
(`Child.go`), the child goes on with the plan while the runner prepares the run folder and starts
its kernel; the knowledge base the checks built is the
one the plan reads (`_CorpusOnce`).

What is shared, and only then: the demo corpus (`corpus.source: demo`, the one the checks build
with `build_corpus`) of a run without imported systems (whose checks hand it to other readers).
Nothing reads it in place between the two (the checks only look at it), so the plan sees what
its own `build_corpus` would have built. Elsewhere than in a forked child (no `fork`) nothing is
kept between the steps.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cube.config.forked import Child, start_steps
from cube.config.params import Params

T = TypeVar("T")


def checks_then(
    params: Params, root: Path, params_file: Path | None, then: Callable[[], T]
) -> Child[T]:
    """A child checking the run's inputs (`first()`: the `DataReport`), then computing `then()`
    (`result()`; None when the checks found an error) with the checks' demo corpus."""
    from cube.run.validate import validate_data

    once = _CorpusOnce(params, root)

    def checks() -> Any:
        report = once.around(lambda: validate_data(params, root, params_file))
        if os.getpid() == once.runner:  # no child here: nothing kept beside the runner's work
            once.corpus = None
        return report

    def after(report: Any) -> T | None:
        try:
            return once.around(then) if report.ok else None
        finally:
            once.corpus = None

    return start_steps(checks, after)


class _CorpusOnce:
    """`cube.kb.corpus.build_corpus` of these params and folder built once across `around`
    blocks: the first call's corpus is kept, the next call of the same arguments gets it (and the
    store lets go of it)."""

    def __init__(self, params: Params, root: Path) -> None:
        from cube.config.sections import ImportedSystem

        self.params, self.root, self.runner = params, Path(root), os.getpid()
        self.corpus: Any = None
        self.shared = params.corpus.source == "demo" and not any(
            isinstance(s, ImportedSystem) for s in params.systems
        )

    def around(self, fn: Callable[[], T]) -> T:
        """`fn()` with `build_corpus` of these arguments built once."""
        import cube.kb.corpus as corpus_module

        real = corpus_module.build_corpus
        if not self.shared:
            return fn()

        def build(params: Params, base_dir: Path = Path(".")) -> Any:
            if params is not self.params or Path(base_dir) != self.root:
                return real(params, base_dir)
            if self.corpus is None:
                self.corpus = real(params, base_dir)
                return self.corpus
            corpus, self.corpus = self.corpus, None  # handed on: freed with its last reader
            return corpus

        corpus_module.build_corpus = build
        try:
            return fn()
        finally:
            corpus_module.build_corpus = real
