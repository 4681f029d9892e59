"""`cube simulate --sequential` (issue 31, item 3): the command writes the sequential design's table
with one row per true CuBE, each rate beside its Monte Carlo SE, and its settings."""

from __future__ import annotations

import json

import pandas as pd
import yaml

from cube.cli import main
from tests import ROOT


def test_cube_simulate_sequential_writes_one_row_per_distance(tmp_path, capsys):
    """With the run's own stop rule (`analysis.sequential`), not the defaults."""
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data["analysis"]["sequential"] = {"batch": 30, "min_questions": 60, "alpha": 0.1}
    params = tmp_path / "seq.yaml"
    params.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    code = main(
        [
            "simulate",
            str(params),
            "--sequential",
            "--replicates",
            "6",
            "--questions",
            "60,150",
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
    assert (table["replicates"] == 6).all() and (table["max_questions"] == 150).all()
    assert table["truth"].round().tolist() == [20, 10]  # below the lowest edge, fair's 40
    # every replicate had a look where a stop was allowed, so the coverage is of real looks
    assert (table["undefined_look"] == 0).all()
    for key in ("coverage", "wrong_sequential", "wrong_full", "wrong_at_mean_n"):
        assert table[key].between(0, 1).all() and (table[f"{key}_mc_se"] > 0).all()
    assert table["mean_questions"].between(60, 150).all()
    settings = json.loads((tmp_path / "sim_sequential_settings.json").read_text())
    rule = settings["stop_rule"]
    assert (rule["batch"], rule["min_questions"], rule["alpha"]) == (30, 60, 0.1)
    assert settings["replicates"] == 6 and "effective_minimum" in settings["not_simulated"]
    out = capsys.readouterr().out
    assert "coverage (SE)" in out and str(tmp_path) in out
