"""Bad inputs refused with a clear message, not a hang or a traceback (issue 38): a YAML alias
bomb, a run name too long for a folder, a knowledge-base cell over the documented size, `cube
init` on a symbolic link."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube import cli
from cube.config.params import RUN_NAME_MAX, ParamsError, load_params
from cube.config.yaml_load import MAX_VALUES, YamlTooLarge, load_yaml
from cube.kb.corpus import CELL_MAX_CHARS, oversized_cells

JUDGES = "judges: [{name: r, model: {provider: offline, model: rubric-strict}}]\n"


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """`levels` anchors, each a list of `width` aliases of the one before (width^levels strings)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _timed(fn) -> tuple[object, float]:
    """fn() in a thread, given at most 20 s (a hang fails the test instead of the session)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["out"] = fn()
        except BaseException as err:  # noqa: BLE001  the test looks at it
            box["out"] = err

    t0 = time.perf_counter()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "still busy after 20 s"
    return box["out"], time.perf_counter() - t0


def test_a_9x9_alias_bomb_is_refused_as_a_params_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("run: bomb\n" + alias_bomb(), encoding="utf-8")
    err, secs = _timed(lambda: load_params(path))
    assert isinstance(err, ParamsError), err
    assert str(path) in str(err) and "alias" in str(err) and f"{MAX_VALUES:,}" in str(err)
    assert secs < 5  # measured: milliseconds (the bound is a second; timings not asserted)


def test_cube_validate_refuses_the_bomb_and_a_dimension_file_bomb(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("run: bomb\n" + alias_bomb(), encoding="utf-8")
    code, _ = _timed(lambda: cli.main(["validate", str(path)]))
    assert code == 2 and "alias" in capsys.readouterr().err
    from cube.config.dimension_files import DimensionFileError, read_dimension_file

    dim = tmp_path / "dim.yaml"
    dim.write_text("name: x\n" + alias_bomb(), encoding="utf-8")
    err, _ = _timed(lambda: read_dimension_file(dim))
    assert isinstance(err, DimensionFileError) and str(dim) in str(err) and "alias" in str(err)


def test_ordinary_aliases_and_documents_load_as_safe_load_does() -> None:
    text = "base: &b {model: m, timeout_s: 5}\njudges: [{name: a, model: *b}, {name: b, model: *b}]"
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml("") is None and load_yaml("- 1\n- [2, 3]") == [1, [2, 3]]
    for bad in ("a: &a [1, *a]", "[" * 3000 + "]" * 3000):
        with pytest.raises(YamlTooLarge):
            load_yaml(bad)
    # the bound counts the expansion, not the text: 8 levels of 9 is 43 million values
    with pytest.raises(YamlTooLarge):
        load_yaml(alias_bomb(8, 9))
    assert len(load_yaml(alias_bomb(3, 9))["l2"]) == 9  # 729 values: fine


def _params(tmp_path: Path, run: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(f"run: {run}\n{JUDGES}", encoding="utf-8")
    return path


def test_a_run_name_over_the_documented_length_is_a_params_error(tmp_path: Path, capsys) -> None:
    assert load_params(_params(tmp_path, "r" * RUN_NAME_MAX)).run == "r" * RUN_NAME_MAX
    with pytest.raises(ParamsError) as err:
        load_params(_params(tmp_path, "r" * 300))
    assert "300 characters" in str(err.value) and f"at most {RUN_NAME_MAX}" in str(err.value)
    assert cli.main(["validate", str(_params(tmp_path, "r" * 300))]) == 2
    assert "run" in capsys.readouterr().err


def test_a_knowledge_base_cell_over_the_documented_size_is_a_warning_with_row_and_column(
    tmp_path: Path,
) -> None:
    from cube.kb.demo import generate_demo_corpus
    from cube.run.validate import validate_data

    kb = generate_demo_corpus(6, "en", seed=1).drop(columns=["text"])
    kb.loc[3, "process"] = "x" * (CELL_MAX_CHARS + 1)
    kb.to_csv(tmp_path / "kb.csv", index=False)
    (tmp_path / "p.yaml").write_text(
        f"run: big\nlang: en\ncorpus: {{source: file, path: kb.csv}}\n{JUDGES}", encoding="utf-8"
    )
    params = load_params(tmp_path / "p.yaml")
    report = validate_data(params, tmp_path / "p.yaml")
    hits = [w for w in report.warnings if "column 'process'" in w]
    assert len(hits) == 1 and "row 4" in hits[0] and f"{CELL_MAX_CHARS + 1:,} characters" in hits[0]
    raw = pd.DataFrame({"a": ["ok", "y" * 11], "b": [None, 3]})
    assert oversized_cells(raw, ["row 1", "row 2"], "f.csv", limit=10) == [
        oversized_cells(raw, ["row 1", "row 2"], "f.csv", limit=10)[0]
    ]
    assert oversized_cells(raw, ["row 1", "row 2"], "f.csv", limit=11) == []


def test_cube_init_refuses_to_write_through_a_symbolic_link(tmp_path: Path, capsys) -> None:
    target = tmp_path / "elsewhere" / "victim.txt"
    link = tmp_path / "params.yaml"
    link.symlink_to(target)  # dangling: exists() is False
    assert cli.main(["init", str(link), "--no-input", "--force"]) == 2
    assert "symbolic link" in capsys.readouterr().err and not target.exists()
    target.parent.mkdir()
    target.write_text("keep me", encoding="utf-8")
    assert cli.main(["init", str(link), "--no-input", "--force"]) == 2
    assert target.read_text(encoding="utf-8") == "keep me"
    plain = tmp_path / "ok" / "params.yaml"
    assert cli.main(["init", str(plain), "--no-input"]) == 0 and plain.is_file()
