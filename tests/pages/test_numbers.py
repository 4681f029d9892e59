"""Numbers formatted once (issue 37): a compare page printed `α = 0.050000000000000044` (1 - 0.95
as a float repr). A figure goes through `fixed`, a parameter through `param`, and a float a
template prints without a filter is written as a parameter, never as its repr."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cube.cli import main
from cube.pages.numbers import fixed, param
from cube.pages.publish import page_environment
from cube.run import pipeline
from cube.run.notebook import open_run
from tests import ROOT

RAW_FLOAT = re.compile(r"\d\.\d{9,}")  # a float repr's tail of noise: 0.050000000000000044


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1 - 0.95, "0.05"),  # 0.050000000000000044
        (0.1 + 0.2, "0.3"),  # 0.30000000000000004
        (0.95, "0.95"),
        (1e-5, "1e-05"),
        (200.0, "200"),
        (3, "3"),
        (float("nan"), "n/a"),
        (None, "n/a"),
        ("auto", "auto"),
        (True, "True"),
    ],
)
def test_a_parameter_is_written_as_a_person_would(value, shown):
    assert param(value) == shown


@pytest.mark.parametrize(
    ("value", "digits", "shown"),
    [(71.333, 1, "71.3"), (2, 2, "2.00"), ("0.5", 2, "0.50"), (float("inf"), 1, "n/a")],
)
def test_a_figure_has_fixed_decimals_and_none_is_n_a(value, digits, shown):
    assert fixed(value, digits) == shown
    assert fixed(None) == "n/a" and fixed("text") == "n/a"


def test_a_bare_float_in_a_template_is_never_its_repr():
    env = page_environment()
    out = env.from_string("α = {{ a }}, {{ b|num(1) }}, {{ c|param }}, {{ n }}, {{ s }}").render(
        a=1 - 0.95, b=0.1 + 0.2, c=1 - 0.9, n=12, s="<b>x</b>"
    )
    assert out == "α = 0.05, 0.3, 0.1, 12, &lt;b&gt;x&lt;/b&gt;"


def _tiny_run(tmp: Path, name: str, top_n: int) -> Path:
    params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    params.update(
        {
            "run": name,
            "outputs_dir": str(tmp / "outputs"),
            "corpus": {"source": "demo", "n_items": 16, "seed": 5},
            "questions": {"generator": "template", "seed": 5},
            "systems": [{"kind": "builtin", "name": f"bm25-top{top_n}", "top_n": top_n}],
            "analysis": {**params["analysis"], "bootstrap": 40, "confidence": 0.95},
        }
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    run = open_run(path)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    return path


@pytest.mark.filterwarnings("ignore")
def test_the_compare_page_shows_alpha_as_written_and_no_float_repr(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    a, b = _tiny_run(tmp_path, "v1", 2), _tiny_run(tmp_path, "v2", 8)
    assert main(["compare", str(a), str(b)]) == 0
    capsys.readouterr()
    page = next((tmp_path / "outputs" / "compare").glob("*/index.html")).read_text("utf-8")
    assert "α = 0.05," in page
    text = re.sub(r"<(style|script)[^>]*>.*?</\1>|<[^>]+>", " ", page, flags=re.S)
    assert not RAW_FLOAT.findall(text)
