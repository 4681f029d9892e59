"""`cube simulate --sequential` (issue 31, item 3): the command writes the sequential design's table
with one row per true CuBE, each rate beside its Monte Carlo SE, and its settings."""

from __future__ import annotations

import json

import pandas as pd

from cube.cli import main
from tests import ROOT


def test_cube_simulate_sequential_writes_one_row_per_distance(tmp_path, capsys):
    code = main(
        [
            "simulate",
            str(ROOT / "params" / "default.yaml"),
            "--sequential",
            "--replicates",
            "6",
            "--questions",
            "40,80",
            "--inside",
            "20,30",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    table = pd.read_csv(tmp_path / "sim_sequential.csv")
    assert table["inside"].round().tolist() == [20, 30]
    assert (table["replicates"] == 6).all() and (table["max_questions"] == 80).all()
    assert table["truth"].round().tolist() == [20, 10]  # below the lowest edge, fair's 40
    for key in ("coverage", "wrong_sequential", "wrong_full", "wrong_at_mean_n"):
        assert table[key].between(0, 1).all() and (table[f"{key}_mc_se"] > 0).all()
    assert table["mean_questions"].between(40, 80).all()
    settings = json.loads((tmp_path / "sim_sequential_settings.json").read_text())
    assert settings["stop_rule"]["min_questions"] == 40 and settings["replicates"] == 6
    out = capsys.readouterr().out
    assert "coverage (SE)" in out and str(tmp_path) in out
