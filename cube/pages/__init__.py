"""What people read: figures, formatted tables, HTML pages, the judgment browser, fonts, templates.

It draws what it is handed and computes nothing; it never imports `cube.run`. Public face
(`__all__`), imported as modules (`from cube.pages import plots`): `style` (the figures' shared
conventions), `plots`, `plots_cube`, `plots_audit`, `plots_sequential`, `diag_plots` and
`sim_plots` (one function per figure; `captions`, each figure's caption), `display` (tables for
people), `numbers` (a figure and a parameter, each formatted once), `decision` (the decision
page's markdown), `sequential` (what a sequential run did: its section's text and tables),
`browser` (report/judgments.html; `browser_records` builds its data), `publish` (HTML pages and the
index), `escape` (the one escaping function for names and outside text, and the exported pages'
sanitiser), `fonts` (the CJK font; `webfont` subsets it for the pages), `release` (the release
gate's summary.md, junit.xml and terminal lines).
"""

__all__ = [
    "browser",
    "captions",
    "decision",
    "diag_plots",
    "display",
    "escape",
    "fonts",
    "numbers",
    "plots",
    "plots_audit",
    "plots_cube",
    "plots_sequential",
    "publish",
    "release",
    "sequential",
    "sim_plots",
    "style",
]
