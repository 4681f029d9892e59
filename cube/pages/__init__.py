"""What people read: figures, formatted tables, HTML pages, the judgment browser, fonts, templates.

It draws what it is handed and computes nothing; it never imports `cube.run`. Modules: `style`
(the figures' shared conventions), `plots`, `plots_cube` and `diag_plots` (one function per
figure), `display` (tables for people), `decision` (the decision page's markdown),
`browser` (report/judgments.html), `publish` (HTML pages and the index), `fonts` (the CJK font).
"""
