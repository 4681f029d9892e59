"""The manifest's usage is computed in a forked child while the runner has threads (the pages'
pool): the modules the child needs are imported before the fork, since a fork keeps an import
lock another thread held and the child would wait on it forever (`cube.run.execute._usage`)."""

from __future__ import annotations

import sys

from cube.run import execute


def test_the_usage_child_imports_nothing_after_the_fork(monkeypatch, tmp_path):
    import cube.run

    for name in ("cube.run.decide", "cube.llm.usage"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delattr(cube.run, "decide", raising=False)
    at_fork: list[bool] = []

    def in_child(fn):
        at_fork.append(all(m in sys.modules for m in ("cube.run.decide", "cube.llm.usage")))
        return []

    monkeypatch.setattr("cube.config.forked.in_child", in_child)
    assert execute._usage(object()) == []  # type: ignore[arg-type]
    assert at_fork == [True]
