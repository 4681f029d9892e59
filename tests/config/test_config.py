"""Params: validation errors name the key and the file; resolved params hold no secrets."""

import tomllib

import pytest
import yaml

from cube.config.params import ParamsError, load_params, params_to_yaml, parse_params
from cube.config.runpaths import RunPaths
from tests import ROOT

MINIMAL = {
    "run": "t",
    "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric-lenient"}}],
}


def _write(tmp_path, data, name="p.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_every_shipped_params_file_is_valid():
    files = sorted((ROOT / "params").glob("*.yaml"))
    assert files, "params/ is empty"
    for f in files:
        load_params(f)


def test_unknown_key_names_key_and_file(tmp_path):
    path = _write(tmp_path, {**MINIMAL, "analysis": {"trim_proportoin": 0.2}})
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert str(path) in str(err.value) and "analysis.trim_proportoin: unknown key" in str(err.value)


def test_wrong_type_names_key(tmp_path):
    path = _write(tmp_path, {**MINIMAL, "analysis": {"bootstrap": "many"}})
    with pytest.raises(ParamsError, match=r"analysis\.bootstrap: .*integer.*'many'"):
        load_params(path)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ParamsError, match="params file not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: [unclosed", encoding="utf-8")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)


def test_references_and_names_are_checked():
    with pytest.raises(ParamsError, match="model 'gpt' is not defined under `models:`"):
        parse_params({**MINIMAL, "judges": [{"name": "j", "model": "gpt"}]})
    with pytest.raises(ParamsError, match="duplicate judge names"):
        parse_params({**MINIMAL, "judges": MINIMAL["judges"] * 2})
    with pytest.raises(ParamsError, match="run must be a simple name"):
        parse_params({**MINIMAL, "run": "../escape"})
    with pytest.raises(ParamsError, match="needs base_url"):
        parse_params({**MINIMAL, "models": {"m": {"model": "gpt-4o"}}})


def test_api_key_is_never_a_param():
    with pytest.raises(ParamsError, match="NAME of an environment variable"):
        parse_params(
            {
                **MINIMAL,
                "models": {
                    "m": {
                        "model": "x",
                        "base_url": "http://h/v1",
                        "api_key_env": "sk-live-abcdef123456-xyz",
                    }
                },
            }
        )


def test_params_are_frozen_and_resolved_yaml_round_trips(tmp_path):
    p = parse_params(
        {
            **MINIMAL,
            "models": {"m": {"model": "x", "base_url": "http://h/v1", "api_key_env": "MY_KEY"}},
        }
    )
    with pytest.raises(Exception, match="frozen"):
        p.run = "other"
    again = parse_params(yaml.safe_load(params_to_yaml(p)))
    assert again == p
    paths = RunPaths.for_params(p, tmp_path)
    assert paths.root == tmp_path / "t" and paths.cache == tmp_path / "cache.sqlite"


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    def name(req: str) -> str:
        return (
            req.split(";")[0]
            .split("[")[0]
            .split(">")[0]
            .split("<")[0]
            .split("=")[0]
            .strip()
            .lower()
        )

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    conda = [d for d in env if isinstance(d, str)]
    pip = next(d["pip"] for d in env if isinstance(d, dict))
    assert "python>=3.11,<3.14" in conda
    named = {name(d) for d in conda + pip if not d.startswith("-e")} - {"python", "pip"}
    assert named == {name(d) for d in project}
    # the same Python range and the same per-Python ragflow-sdk lines (environment markers)
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert spec == ">=3.11,<3.14"
    assert sorted(d for d in pip if d.startswith("ragflow-sdk")) == sorted(
        d for d in project if d.startswith("ragflow-sdk")
    )
    assert "-e ." in pip


def test_docs_params_reference_is_generated_from_the_schema():
    from cube.config.reference import params_reference

    text = (ROOT / "docs" / "reference" / "params.md").read_text(encoding="utf-8")
    assert params_reference().strip() in text, (
        "run: cube params-reference > docs/reference/params.md"
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in readme and "make test" in readme


def test_ragflow_and_imported_systems_must_name_their_answering_model():
    system = {"kind": "imported", "name": "mine", "path": "qa.csv"}
    with pytest.raises(ParamsError, match=r"systems\[mine\] \(imported\): set `answerer`"):
        parse_params({**MINIMAL, "systems": [system]})
    parse_params(
        {
            **MINIMAL,
            "systems": [{**system, "answerer": {"provider": "offline", "model": "extractive"}}],
        }
    )
    parse_params(
        {**MINIMAL, "answerer": {"provider": "offline", "model": "extractive"}, "systems": [system]}
    )
    with pytest.raises(ParamsError, match="greater than or equal to 1"):
        parse_params(
            {
                **MINIMAL,
                "answerer": {"provider": "offline", "model": "extractive"},
                "systems": [{**system, "top_n": 0}],
            }
        )
