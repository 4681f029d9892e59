"""Outside text made safe for the pages: one escaping function, and the sanitiser of the exports.

Names (judges, systems, dimensions, runs, roles), the report's title, documents, answers and
judge replies are outside text: whatever they hold, a page shows them as text. `escape_text` is
the one function that makes them so, in every context the project writes: HTML (tables, the
index, the compare page, the run and sweep pages) and the Markdown the notebooks display
(`IPython.display.Markdown`, rendered by JupyterLab and, when the pages are exported, by
nbconvert's Markdown renderer). Besides HTML's five characters (`& < > " '`), it writes the
characters that build a Markdown link or image as numeric character references: `[` and `]`
(inline and reference links `[x](javascript:...)`, images `![x](data:...)`, link definitions
`[x]: url`) and `\\` (a backslash escape). CommonMark never reads a character reference as
structure, so `&#91;x&#93;(javascript:...)` is the text "[x](javascript:...)", and an HTML
parser shows the same characters: the escaped text reads alike in both contexts. Autolinks
(`<javascript:...>`) and raw HTML need `<`, which is escaped. Emphasis and code spans are left
alone: they change no more than the look of the text, and the decision's sentences use them.

`sanitise_html` is the second line, for the exported pages (`cube.pages.publish`): nbconvert
passes every notebook output's HTML, every Markdown output rendered to HTML and every Markdown
cell through it, so that whatever a future notebook prints, no script, no event attribute, no
`javascript:` link and no `data:` URL but an image's survives (nh3, the Python binding of the
Ammonia sanitiser; the allow-list below). The pages' own scripts and styles come from nbconvert's
template and `cube.pages.publish`, not from the outputs, and are kept.
"""

from __future__ import annotations

from typing import Any

# HTML's characters, then Markdown's link and escape characters, as character references
_REFERENCES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "'": "&#x27;",
    "[": "&#91;",
    "]": "&#93;",
    "\\": "&#92;",
}
_TABLE = str.maketrans(_REFERENCES)


def escape_text(value: Any) -> str:
    """`value` as text that HTML and Markdown both show literally (see the module docstring):
    safe as element content and as a quoted attribute value. None is ''."""
    return "" if value is None else str(value).translate(_TABLE)


def jinja_finalize(value: Any) -> Any:
    """Jinja's `finalize` hook: every string a template prints goes through `escape_text` (one
    escaping function for the templates too); a float printed without a filter is written as a
    parameter (`cube.pages.numbers.param`: `0.05`, never `0.050000000000000044`); markup a
    template built itself (`Markup`), whole numbers and undefined values pass as they are, for
    autoescape to handle."""
    from markupsafe import Markup

    from cube.pages.numbers import param

    if isinstance(value, str) and not isinstance(value, Markup):
        return Markup(escape_text(value))
    if isinstance(value, float):
        return param(value)
    return value


def code_spans(value: Any) -> Any:
    """`value` escaped (`escape_text`), its backtick spans (`stages.validation: off`) as `<code>`
    elements: for a sentence written for Markdown and shown in an HTML page (the index page's
    reason a stage was skipped). An unpaired backtick stays a backtick."""
    from markupsafe import Markup

    parts = escape_text(value).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one is text
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


# The sanitiser's allow-list: the tags of text, tables, code and figures; the attributes that
# style them (nbconvert's and our tables' classes, the verdict badge's inline style); links to
# http(s), mail and relative targets (the judgment browser's `#` filters); `data:` only for an
# image's source, and then only a raster image (an SVG can hold a script).
_TAGS = {
    *(
        "a abbr b blockquote br caption code col colgroup dd del details div dl dt em figcaption "
        "figure h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre q s samp small span strong "
        "sub summary sup table tbody td tfoot th thead tr u ul var"
    ).split(),
}
_COMMON = {"class", "id", "title", "style", "lang", "dir", "align"}
_ATTRIBUTES = {
    "*": _COMMON,
    "a": {"href", "rel", "name", "target"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "col": {"span"},
    "ol": {"start"},
    "span": {"data-mime-type"},
    "div": {"data-mime-type"},
}
_SCHEMES = {"http", "https", "mailto", "data"}
_IMAGE_DATA = ("data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp")
# CSS properties an output may set inline (the verdict badge, the tables' alignment)
_STYLE_PROPERTIES = {
    *(
        "background background-color border border-radius color display font-size "
        "font-style font-weight line-height margin margin-left margin-right max-width padding "
        "text-align vertical-align white-space width"
    ).split(),
}
_URL_ATTRIBUTES = {"href", "src", "cite", "action", "formaction", "poster", "background"}


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """Keep `data:` URLs only as an image's source, and only raster images."""
    if attribute in _URL_ATTRIBUTES and value.strip().lower().startswith("data:"):
        ok = tag == "img" and attribute == "src" and value.lower().startswith(_IMAGE_DATA)
        return value if ok else None
    return value


def sanitise_html(html: Any) -> str:
    """`html` with everything outside the allow-list removed (nh3): no `<script>` or `<style>`
    element, no event attribute (`onerror`, ...), no `javascript:`, `vbscript:` or other scheme
    but http(s) and mailto in a link, no `data:` URL but a raster image's `src`, no CSS property
    but a few of layout and colour. Bytes are read as UTF-8."""
    import nh3

    text = html.decode("utf-8") if isinstance(html, bytes) else str(html)
    return nh3.clean(
        text,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_SCHEMES,
        attribute_filter=_attribute_filter,
        filter_style_properties=_STYLE_PROPERTIES,
        link_rel=None,
        strip_comments=True,
    )
