"""Pages exported while the stages run (`cube.pages.publish.PreparedPages`): the page `export_html`
writes, and only for the notebook file they were exported from."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat

from cube.pages.publish import PreparedPages, export_html


def _executed(path: Path, text: str) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(text)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    nb.cells = [nbformat.v4.new_markdown_cell("# 标题 A page"), cell]
    nbformat.write(nb, path)
    return path


def test_a_prepared_page_is_the_exported_page_of_that_very_notebook(tmp_path):
    executed = _executed(tmp_path / "01_a.ipynb", "<script>alert(1)</script> 得分 42")
    pages = PreparedPages()
    try:
        pages.add(executed)
        ready = pages.get(executed)
    finally:
        pages.close()
    html = export_html(executed, tmp_path / "a.html", with_code=False).read_text(encoding="utf-8")
    code = export_html(executed, tmp_path / "c.html", with_code=True).read_text(encoding="utf-8")
    assert ready == (html, code)
    assert "得分 42" in html and "<script>alert" not in html  # escaped as export_html does


def test_a_notebook_changed_since_its_pages_were_prepared_gets_none(tmp_path):
    executed = _executed(tmp_path / "01_a.ipynb", "first")
    pages = PreparedPages()
    try:
        pages.add(executed)
        pages.finish()
        _executed(executed, "second, longer")
        stat = executed.stat()
        os.utime(executed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        assert pages.get(executed) is None  # publish exports it itself
        assert pages.get(tmp_path / "02_never_added.ipynb") is None
    finally:
        pages.close()


def test_the_pages_are_exported_in_a_worker_process_not_in_the_runner():
    # the export's memory (nbconvert, its templates) stays out of the runner (`_page_pool`)
    pages = PreparedPages()
    try:
        worker = pages._pool.submit(os.getpid).result()
    finally:
        pages.close()
    assert worker != os.getpid()


def test_a_dead_page_worker_costs_the_prepared_pages_never_the_run(tmp_path):
    # the worker killed (out of memory, a signal): add() and get() do not raise, publish exports
    # the page itself (get() is None), and close() still returns
    import signal

    executed = _executed(tmp_path / "01_a.ipynb", "a page")
    pages = PreparedPages()
    try:
        worker = pages._pool.submit(os.getpid).result()
        if worker == os.getpid():  # a thread (no fork here): nothing to kill
            return
        os.kill(worker, signal.SIGKILL)
        for _ in range(50):  # the pool notices its dead worker
            pages.add(executed)
            if pages.get(executed) is None:
                break
        pages.add(executed)
        assert pages.get(executed) is None
    finally:
        pages.close()
