"""Publishing a run as pages people can share: HTML pages of the executed notebooks and the index.

Each executed notebook in `outputs/<run>/notebooks/` (by `cube run`, or saved there by papermill)
is exported twice, `report/<name>.html` without code and `report/code/<name>.html` with code, each
with a header linking the index and the previous/next page. No script or stylesheet is loaded from
the network (require.js and MathJax are dropped), so the report folder works offline. `index.html`
opens on the decision, lists the pages and, grouped by the page that made them, every table and
figure with its caption (a figure's own, `cube.pages.captions`; a table's, the Markdown heading
before the cell that writes it); pages whose inputs
changed since they ran, and their files, are marked stale. Everything that came from params, a
system or a judge is escaped by `cube.pages.escape.escape_text` (the templates' `finalize`, the
tables' cells, the decision's Markdown), and nbconvert passes the HTML of every output and Markdown
cell through `cube.pages.escape.sanitise_html` (nh3) when it exports a page: whatever a notebook
prints, no script, event attribute, `javascript:` link or `data:` URL but an image's reaches a
page. The tables' stylesheet, which the sanitiser removes from the outputs, is put once in each
page's header instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from cube.config.params import Params
from cube.config.runpaths import LAST_RUN, RunPaths

NAV_START, NAV_END = "<!-- cube-nav -->", "<!-- /cube-nav -->"
NAV_STYLE = (
    "<style>.cube-nav{font:14px system-ui,sans-serif;background:#eef1f5;border-bottom:1px solid "
    "#d9dde3;padding:8px 16px;display:flex;gap:18px;flex-wrap:wrap;align-items:baseline}.cube-nav "
    "a{color:#2f6fdf}.cube-nav .here{font-weight:600}.cube-nav .stale{color:#9a6700}</style>"
)
_REMOTE_SCRIPT = re.compile(r"<script\b[^>]*\bsrc=[\"']?(?:https?:)?//[^>]*>\s*</script>", re.I)
_REMOTE_LINK = re.compile(r"<link\b[^>]*\bhref=[\"']?(?:https?:)?//[^>]*>", re.I)
_MATHJAX_CONFIG = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
# nbconvert's Mermaid loader: an inline module importing mermaid from a CDN (no notebook draws one)
_REMOTE_IMPORT = re.compile(
    r"<script\b[^>]*>(?:(?!</script>).)*?\bimport\(\s*[\"'](?:https?:)?//(?:(?!</script>).)*?</script>",
    re.S | re.I,
)


def offline_html(body: str) -> str:
    """Drop every script and stylesheet loaded from the network (require.js, MathJax and Mermaid
    from a CDN): the pages are self-contained, work on an offline network and run no script.
    Formulas in Markdown cells then show as their TeX source."""
    body = _REMOTE_IMPORT.sub("", _MATHJAX_CONFIG.sub("", body))
    return _REMOTE_LINK.sub("", _REMOTE_SCRIPT.sub("", body))


@functools.cache
def _exporter(with_code: bool) -> Any:
    """The HTML exporter of pages with or without code, made once per process: an exporter
    compiles its Jinja templates on first use (about half of a page's export), and nbconvert's
    exporters are made to convert one notebook after another (its command line does)."""
    from nbconvert import HTMLExporter

    from cube.pages.escape import sanitise_html

    return HTMLExporter(
        template_name="lab",
        exclude_input=not with_code,
        exclude_input_prompt=not with_code,
        exclude_output_prompt=True,
        sanitize_html=True,  # outputs and Markdown through `clean_html`: ours, nh3 (below)
        filters={"clean_html": sanitise_html},
    )


def page_html(notebook: Any, *, with_code: bool) -> str:
    """An executed notebook (`nbformat.read`) as a standalone, offline HTML page's text."""
    # the exporter leaves the notebook as it was: its preprocessors work on a copy
    body, _ = _exporter(with_code).from_notebook_node(notebook)
    from cube.pages.browser import (
        rebase_links,  # links into the judgment browser, from report/ or report/code/
    )

    return rebase_links(offline_html(body), "../" if with_code else "")


def export_html(
    executed: Path, target: Path, *, with_code: bool, notebook: Any | None = None
) -> Path:
    """One executed notebook as a standalone, offline HTML page (nbconvert, in-process).
    `notebook`: the executed notebook already read (`nbformat.read`), to export it twice from one
    read."""
    import nbformat

    if notebook is None:
        notebook = nbformat.read(executed, as_version=4)
    text = page_html(notebook, with_code=with_code)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


class PreparedPages:
    """The two pages of each executed notebook, exported while the next stages execute (`cube
    run`: the runner only waits for the kernel then, so the export takes the machine's other core
    instead of adding to the run's time). A page is used by `publish` only if its notebook is the
    one exported (same size and modification time); otherwise, or if the export failed, `publish`
    exports it itself, so a prepared page is always the page `export_html` would write.

    On Linux the pages are exported in a worker process forked when this is made (before the
    run's kernel starts, so no thread of the runner is forked with it), not on a thread of the
    runner: nbconvert's exports took the runner from 215 to 380 MB over the stages of a
    paper-scale run (its templates, nh3, pygments, and the memory their work left to the
    allocator), memory it then held under publishing and the manifest, the run's largest process.
    The worker has the runner's modules (no new imports); it returns each page's text. Elsewhere
    (no `fork`), a thread of the runner exports them."""

    def __init__(self) -> None:
        self._pool = _page_pool()
        self._pages: dict[str, Any] = {}  # notebook file name -> future of (identity, html, code)

    def add(self, executed: Path) -> None:
        """Export `executed` (as it is now) in the background. Never raises: if the worker cannot
        take it (it died: `BrokenProcessPool`), the page is not prepared and `publish` exports it
        itself, so a dead worker costs time, never the run."""
        try:
            self._pages[executed.name] = self._pool.submit(_export_pages, executed)
        except Exception:  # noqa: BLE001  exported by `publish` instead
            self._pages.pop(executed.name, None)

    def get(self, executed: Path) -> tuple[str, str] | None:
        """(page, page with code) of `executed` if prepared from the file as it is, else None."""
        future = self._pages.get(executed.name)
        if future is None:
            return None
        try:
            identity, html, code = future.result()
        except Exception:  # noqa: BLE001  exported again by `publish`, which says why if it fails
            return None
        return (html, code) if identity == _identity(executed) else None

    def finish(self) -> None:
        """Wait for every page to be exported (then no export runs beside `publish`'s own)."""
        with contextlib.suppress(Exception):  # a dead worker: its pages are exported by `publish`
            self._pool.shutdown(wait=True)

    def close(self) -> None:
        """Stop: pages not started are dropped, a page being exported is finished."""
        with contextlib.suppress(Exception):
            self._pool.shutdown(wait=True, cancel_futures=True)


def _page_pool() -> Any:
    """One worker for the pages: a process forked now where `fork` exists (Linux), else a thread."""
    import sys
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if not sys.platform.startswith("linux"):  # macOS: forking a process using system frameworks
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="cube-pages")
    import multiprocessing

    pool = ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("fork"), initializer=_page_worker
    )
    pool.submit(int).result()  # fork it now: the runner has no other thread yet
    return pool


def _page_worker() -> None:
    """The page worker ignores the terminal's Ctrl-C (the runner stops it: `PreparedPages.close`
    lets the page being exported finish) and SIGTERM's handler of the runner (`cube.run.state`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _export_pages(executed: Path) -> tuple[tuple[int, int], str, str]:
    """(the notebook's identity, its page, its page with code), from the file as it is now."""
    import nbformat

    identity = _identity(executed)
    notebook = nbformat.read(executed, as_version=4)
    return (
        identity,
        page_html(notebook, with_code=False),
        page_html(notebook, with_code=True),
    )


def _identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def set_nav(page: Path, nav: str) -> None:
    """Put (or replace) the header `nav` at the top of a page's body, with the stylesheets of the
    header and of the tables (`cube.pages.display.STYLE`: the sanitiser removed it from the
    outputs)."""
    from cube.pages.display import STYLE

    text = page.read_text(encoding="utf-8")
    block = f"{NAV_START}{NAV_STYLE}{STYLE}{nav}{NAV_END}"
    if NAV_START in text:
        text = re.sub(
            re.escape(NAV_START) + ".*?" + re.escape(NAV_END),
            lambda _: block,
            text,
            count=1,
            flags=re.S,
        )
    else:
        text = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + block, text, count=1)
    page.write_text(text, encoding="utf-8")


def _nav(pages: list[IndexPage], i: int, up: str) -> str:
    from cube.pages.escape import escape_text as escape

    page = pages[i]
    parts = [f'<a href="{up}index.html">&#8962; Report index</a>']
    if i > 0:  # a page and its code version have the same file name in their folders
        parts.append(
            f'<a href="{pages[i - 1]["href"]}" rel="prev">&larr; '
            f"{escape(pages[i - 1]['title'])}</a>"
        )
    parts.append(f'<span class="here">{escape(page["title"])}</span>')
    if i + 1 < len(pages):
        parts.append(
            f'<a href="{pages[i + 1]["href"]}" rel="next">{escape(pages[i + 1]["title"])} '
            "&rarr;</a>"
        )
    if page.get("stale"):
        parts.append(f'<span class="stale">{escape(page["stale"])}</span>')
    other = (
        f'<a href="{up}{page["href"]}">without code</a>'
        if up
        else f'<a href="{page["code_href"]}">with code</a>'
    )
    return f'<nav class="cube-nav" id="cube-nav">{"".join(parts)}{other}</nav>'


class PageOutput(TypedDict):
    """A table or figure a notebook writes, with its caption (`page_outputs`)."""

    kind: str  # "table" | "figure"
    name: str
    caption: str


class IndexItem(PageOutput):
    """A table or figure as the index lists it: where it is (`href`, relative to the index) and its
    file name."""

    href: str
    file: str


class IndexPage(TypedDict):
    """An executed notebook's two pages as the index and the navigation bars read them."""

    name: str
    title: str
    href: str
    code_href: str
    stale: str  # why the page may be out of date ("" when it is not)
    outputs: list[PageOutput]
    html: Path
    code: Path


class IndexGroup(TypedDict):
    """The index's tables and figures of one page (or the files no page claims)."""

    title: str
    href: str
    stale: str
    items: list[IndexItem]


_OUTPUT_CALL = re.compile(r"run\.(table|figure)\(\s*[\"']([^\"']+)[\"']")


def page_outputs(executed: Path) -> list[PageOutput]:
    """The tables and figures a notebook writes (`run.table("name", ...)`, `run.figure(...)`), in
    order, each with a caption: a figure's own (`cube.pages.captions`), a table's the heading or
    first line of the Markdown cell before it."""
    from cube.pages.captions import figure_caption

    nb = json.loads(executed.read_text(encoding="utf-8"))
    caption = ""
    found: list[PageOutput] = []
    for cell in nb.get("cells", []):
        source = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            lines = [ln.strip().lstrip("#").strip() for ln in source.splitlines() if ln.strip()]
            caption = lines[0] if lines else caption
            continue
        for kind, name in _OUTPUT_CALL.findall(source):
            own = figure_caption(name) if kind == "figure" else caption
            found.append({"kind": kind, "name": name, "caption": own})
    return found


OUT = "out of date"  # a page's stale mark when it may not show what the rest shows

# stage -> why `cube run` skipped it (an optional stage, params `stages`), in `notebooks/`
SKIPPED_FILE = ".skipped.json"


def publish(
    params: Params,
    paths: RunPaths,
    attempt: dict[str, str] | None = None,
    notebooks_dir: Path | None = None,
    fingerprints: Callable[[list[Path]], dict[str, str]] | None = None,
    mixed: dict[str, str] | None = None,
    decision_page: str = "",
    prepared: PreparedPages | None = None,
) -> Path:
    """Export every executed notebook found in `notebooks/` (by `cube run`, or saved there by
    papermill) and write `report/index.html`. A page is marked out of date when what its stage
    reads changed since it ran, or of unknown freshness when it was not executed by `cube run`.
    `fingerprints` gives the current fingerprint of each of the source notebooks it is handed (the
    run's `cube.run.stages.stage_fingerprints`; None: freshness is not checked). `mixed`: stage ->
    why its page may show another run's numbers than the rest (a notebook run alone with other
    params since `cube run`: `cube.run.ran_alone.stages_mixed`), marked out of date too; when the
    page `decision_page` (the stage writing the decision) is out of date, the index says so above
    the decision it reads from results.json. `attempt` (status, message) is shown when an attempt
    ended without anything published yet. `prepared`: pages exported while the stages ran, used
    for the notebooks they were exported from."""
    from cube.config.project import NOTEBOOK_GLOB, default_notebooks_dir

    if prepared is not None:
        prepared.finish()
    recorded = _json_or_empty(paths.notebooks / ".fingerprints.json")
    sources = {p.name: p for p in list_notebooks_or_none(notebooks_dir or default_notebooks_dir())}
    executed_nbs = sorted(paths.notebooks.glob(NOTEBOOK_GLOB))
    current = _current_fingerprints(
        [sources[e.name] for e in executed_nbs if e.name in sources], fingerprints
    )
    pages: list[IndexPage] = []
    for executed in executed_nbs:
        page = _exported_page(executed, paths, prepared)
        page["stale"] = _stale_mark(executed, mixed or {}, recorded, current)
        pages.append(page)
    for i, page in enumerate(pages):
        set_nav(page["html"], _nav(pages, i, ""))
        set_nav(page["code"], _nav(pages, i, "../"))
    from cube.pages.browser import write_browser  # issue 13: report/judgments.html, every judgment

    write_browser(paths)
    missing = _not_run(sources, {e.name for e in executed_nbs}, paths)
    index = write_index(
        params,
        paths,
        pages,
        attempt,
        missing=missing,
        decision_stale=_decision_stale(pages, decision_page),
    )
    from cube.pages.font_store import store_folder

    embed_fonts(paths.report, store_folder(paths.cache))
    return index


def _json_or_empty(path: Path) -> dict[str, str]:
    """A JSON file's object of names to texts (the runner's fingerprints, its skipped stages);
    empty when the file does not exist."""
    return json.loads(path.read_text("utf-8")) if path.exists() else {}


def _current_fingerprints(
    known: list[Path], fingerprints: Callable[[list[Path]], dict[str, str]] | None
) -> dict[str, str]:
    """The source notebooks' current fingerprints; empty when not checked or not readable."""
    if not (known and fingerprints):
        return {}
    try:
        return fingerprints(known)
    except OSError:
        return {}


def _exported_page(
    executed: Path, paths: RunPaths, prepared: PreparedPages | None = None
) -> IndexPage:
    """An executed notebook's two pages, exported again when older than it (or taken from
    `prepared`); its index entry (without its stale mark)."""
    html = paths.report / f"{executed.stem}.html"
    code = paths.report / "code" / f"{executed.stem}.html"
    if _outdated(html, executed) or not code.exists():
        ready = prepared.get(executed) if prepared is not None else None
        if ready is not None:
            code.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(ready[0], encoding="utf-8")
            code.write_text(ready[1], encoding="utf-8")
        else:
            import nbformat

            notebook = nbformat.read(executed, as_version=4)
            export_html(executed, html, with_code=False, notebook=notebook)
            export_html(executed, code, with_code=True, notebook=notebook)
    return {
        "name": executed.stem,
        "title": _notebook_title(executed),
        "href": html.name,
        "code_href": f"code/{code.name}",
        "stale": "",
        "outputs": page_outputs(executed),
        "html": html,
        "code": code,
    }


def _outdated(page: Path, notebook: Path) -> bool:
    """Whether a page is missing or older than the notebook it shows."""
    return not page.exists() or page.stat().st_mtime < notebook.stat().st_mtime


def _stale_mark(
    executed: Path, mixed: dict[str, str], recorded: dict[str, str], current: dict[str, str]
) -> str:
    """The page's stale mark: out of date (mixed with another run, or what it reads changed since
    it ran), of unknown freshness (not executed by `cube run`), or none."""
    if executed.stem in mixed:
        return f"{OUT}: {mixed[executed.stem]}"
    if executed.name not in recorded:
        return "freshness unknown: not executed by `cube run`"
    if current.get(executed.name) not in (None, recorded[executed.name]):
        return f"{OUT}: what this page reads changed since it ran"
    return ""


def _not_run(sources: dict[str, Path], ran: set[str], paths: RunPaths) -> list[dict[str, str]]:
    """The stages not run in this folder (name, number, title, why the runner skipped it)."""
    skipped = _json_or_empty(paths.notebooks / SKIPPED_FILE)  # the runner's (`cube.run.skip`)
    return [
        {
            "name": name[:-6],
            "number": name[:2],
            "title": _notebook_title(src),
            "skipped": skipped.get(name[:-6], ""),
        }
        for name, src in sources.items()
        if name not in ran
    ]


def _decision_stale(pages: list[IndexPage], decision_page: str) -> str:
    """Why the page writing the decision is out of date ("" when it is not, or not shown)."""
    for p in pages:
        if p["name"] == decision_page and p["stale"].startswith(OUT):
            return p["stale"].removeprefix(f"{OUT}: ")
    return ""


def embed_fonts(report: Path, store: Path | None = None) -> dict[Path, int]:
    """Chinese in every browser: each HTML page of `report/` carries the CJK characters it shows as
    an embedded web font (`cube.pages.webfont`; the judgment browser's with those of its data
    files). Returns the embedded font's bytes per page. `store`: where the font subsets are kept
    between runs (`cube.pages.font_store`; None: none kept)."""
    from cube.pages.fonts import web_font_source
    from cube.pages.webfont import cjk_characters, embed_cjk_font

    pages = sorted([*report.glob("*.html"), *report.glob("code/*.html")])
    browser = report / "judgments.html"
    # the data files' characters one file at a time: their text joined (tens of MB at the paper's
    # scale, as str then copied by the font block's removal) was the runner's peak, +175 MB
    chars: set[str] = set()
    for f in sorted((report / "judgments").glob("*.js")):
        chars.update(cjk_characters(f.read_text(encoding="utf-8")))
    return embed_cjk_font(pages, web_font_source(), {browser: "".join(sorted(chars))}, store)


def list_notebooks_or_none(folder: Path) -> list[Path]:
    from cube.config.project import NOTEBOOK_GLOB

    return sorted(Path(folder).glob(NOTEBOOK_GLOB)) if Path(folder).is_dir() else []


def _notebook_title(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return path.stem


def _output_file(paths: RunPaths, out: PageOutput) -> Path:
    """Where a page's table (CSV) or figure (PNG) is written."""
    if out["kind"] == "table":
        return paths.tables / f"{out['name']}.csv"
    return paths.figures / f"{out['name']}.png"


def _unclaimed_item(f: Path, href: str) -> IndexItem:
    """The index entry of a table or figure no page claims (a figure keeps its own caption)."""
    from cube.pages.captions import figure_caption

    figure = f.suffix == ".png"
    return {
        "kind": "figure" if figure else "table",
        "name": f.stem,
        "caption": figure_caption(f.stem) if figure else "",
        "href": href,
        "file": f.name,
    }


def _groups(paths: RunPaths, pages: list[IndexPage]) -> list[IndexGroup]:
    """Tables and figures grouped by the page that writes them, with captions and stale marks;
    files no page claims are listed last."""

    def rel(p: Path) -> str:
        return (Path("..") / p.relative_to(paths.root)).as_posix()

    claimed: set[Path] = set()
    groups: list[IndexGroup] = []
    for page in pages:
        items: list[IndexItem] = []
        for out in page["outputs"]:
            f = _output_file(paths, out)
            if f.exists() and f not in claimed:
                claimed.add(f)
                items.append({**out, "href": rel(f), "file": f.name})
        if items:
            groups.append(
                {
                    "title": page["title"],
                    "href": page["href"],
                    "stale": page["stale"],
                    "items": items,
                }
            )
    files = sorted([*paths.tables.glob("*.csv"), *paths.figures.glob("*.png")])
    rest = [_unclaimed_item(f, rel(f)) for f in files if f not in claimed]
    if rest:
        groups.append({"title": "Other files", "href": "", "stale": "", "items": rest})
    return groups


def write_index(
    params: Params,
    paths: RunPaths,
    pages: list[IndexPage],
    attempt: dict[str, str] | None = None,
    missing: list[dict[str, str]] | None = None,
    decision_stale: str = "",
) -> Path:
    """`report/index.html`: the decision, the pages that exist (a run where only some notebooks ran
    lists those), the stages not run in this folder yet (`missing`: name, number, title) with the
    command running them, and the tables and figures grouped by page. `decision_stale`: the
    decision page's out-of-date mark, said above the decision (which may then not be the one that
    page shows)."""
    import jinja2

    results = (
        json.loads(paths.results.read_text(encoding="utf-8")) if paths.results.exists() else {}
    )
    manifest = (
        json.loads(paths.manifest.read_text(encoding="utf-8")) if paths.manifest.exists() else {}
    )
    from cube.pages.sequential import questions_phrase, read_record

    template = page_environment(undefined=jinja2.ChainableUndefined).get_template("index.html.j2")
    html = template.render(
        params=params,
        results=results,
        decision=results.get("decision"),
        human_line=_human_line(results),
        questions=questions_phrase(read_record(results)),  # a sequential run's questions
        manifest=manifest,
        pages=pages,
        attempt=attempt,
        last_run=LAST_RUN,
        groups=_groups(paths, pages),
        missing=missing or [],
        decision_stale=decision_stale,
        browser="judgments.html" if (paths.report / "judgments.html").exists() else None,
    )
    paths.report.mkdir(parents=True, exist_ok=True)
    index = paths.report / "index.html"
    index.write_text(html, encoding="utf-8")
    return index


def _human_line(results: dict[str, Any]) -> str:
    """The human-calibrated line of the decision's system, from what notebook 07 recorded under its
    own key (`human_calibrated`), '' without it."""
    from cube.diagnose.assessment import human_sentence

    system = (results.get("decision") or {}).get("system")
    return human_sentence((results.get("human_calibrated") or {}).get(str(system)))


def page_environment(**options: Any) -> Any:
    """The Jinja environment of every HTML page the workbench writes from a template (the index,
    `cube compare`'s page): cube/pages/templates, autoescape, every printed string escaped and a
    bare float written as a parameter (`cube.pages.escape.jinja_finalize`), and one formatter per
    kind of number: `num` (a figure at fixed decimals), `param` (a parameter as written),
    `pval` and `p_is` (p-values), `code_spans` (a Markdown sentence's `code`). `options` go to
    `jinja2.Environment` (e.g. `undefined`)."""
    import jinja2

    from cube.method.analysis import p_is
    from cube.pages.display import format_p
    from cube.pages.escape import code_spans, jinja_finalize
    from cube.pages.numbers import fixed, param

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cube.pages", "templates"),
        autoescape=True,
        finalize=jinja_finalize,
        **options,
    )
    env.filters["num"] = fixed
    env.filters["param"] = param  # alpha, a threshold: 0.05, never 0.050000000000000044
    env.filters["pval"] = format_p  # the one p-value formatter: "< 0.0001" below 1e-4
    env.filters["p_is"] = p_is  # "p = 0.012" but "p < 0.0001"
    env.filters["code_spans"] = code_spans  # a Markdown sentence's `code` as <code>, escaped
    return env
