"""Issue 29 item 6: every figure of the report has a caption written for it, not the heading of
the section it happens to sit in (`fig_cube_scores.png` was captioned "The judge validity gate",
`fig_rank_distribution.png` "Near-duplicate confusion ...")."""

from __future__ import annotations

import json
import re

from cube.pages.captions import FIGURE_CAPTIONS
from cube.pages.publish import page_outputs
from tests import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _headings(nb: dict) -> set[str]:
    out = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.strip():
                    out.add(line.strip().lstrip("#").strip())
    return out


def test_every_figure_of_every_notebook_has_its_own_caption_none_a_heading():
    seen = {}
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        headings = _headings(nb)
        for out in page_outputs(path):
            if out["kind"] != "figure":
                continue
            seen[out["name"]] = out["caption"]
            assert out["caption"] == FIGURE_CAPTIONS[out["name"]], out["name"]
            assert out["caption"] not in headings, out  # not the section's heading
    assert len(seen) >= 20  # every notebook's figures were found
    assert len(set(seen.values())) == len(seen)  # no two figures share one
    assert set(FIGURE_CAPTIONS) == set(seen)  # no caption for a figure nobody draws


def test_the_figures_that_were_captioned_by_an_unrelated_heading_no_longer_are():
    by_name = {
        o["name"]: o["caption"] for p in NOTEBOOKS for o in page_outputs(p) if o["kind"] == "figure"
    }
    assert "validity gate" not in by_name["fig_cube_scores"]
    assert by_name["fig_cube_scores"].startswith("Each judge's CuBE score")
    assert "validity gate" not in by_name["fig_normalised_dimensions"]
    assert "normalised" in by_name["fig_normalised_dimensions"]
    assert not by_name["fig_rank_distribution"].startswith("Near-duplicate")
    assert "Rank of the gold document" in by_name["fig_rank_distribution"]


def test_a_table_keeps_the_heading_before_it_as_its_caption(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["## Table 4, reproduced\n"]},
            {
                "cell_type": "code",
                "source": ['run.table("t4", df)\n', 'run.figure("fig_bounds", f)'],
            },
        ]
    }
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    got = page_outputs(path)
    assert got[0] == {"kind": "table", "name": "t4", "caption": "Table 4, reproduced"}
    assert got[1]["caption"] == FIGURE_CAPTIONS["fig_bounds"]
    assert re.search(r"zero and full bounds", got[1]["caption"])
