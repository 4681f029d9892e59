"""The params reference is walked from the schema, not listed by hand: every system kind of the
`systems` union and every sub-section the schema holds has its section (issue 37: `kind: http`
and `analysis.sequential` were missing, and the `systems` row named three kinds of five).

The truth is taken from pydantic's JSON schema of `Params` (its discriminator mapping and its
`$defs`), a different route from the reference's own walk over the annotations."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from cube.config.params import Params
from cube.config.reference import params_reference, sections_of

SCHEMA = Params.model_json_schema()


def _heading(title: str) -> str:
    return f"#### `{title}`"


def _section(text: str, title: str) -> str:
    """The body of one section of the reference: from its heading to the next."""
    start = text.index(_heading(title))
    end = text.find("\n#### ", start + 1)
    return text[start : end if end != -1 else None]


def test_every_system_kind_of_the_schema_has_its_section_with_every_key():
    mapping = SCHEMA["properties"]["systems"]["items"]["discriminator"]["mapping"]
    assert {"builtin", "ragflow", "imported", "http", "python"} <= set(mapping)
    text = params_reference()
    for kind, ref in mapping.items():
        section = _section(text, f"systems[] (kind: {kind})")
        keys = SCHEMA["$defs"][ref.rsplit("/", 1)[1]]["properties"]
        for key in keys:
            assert f"| `{key}` |" in section, (kind, key)


def test_the_systems_row_names_every_kind():
    mapping = SCHEMA["properties"]["systems"]["items"]["discriminator"]["mapping"]
    row = next(line for line in params_reference().splitlines() if line.startswith("| `systems`"))
    listed = re.search(r"list\[([^\]]*)\]", row).group(1).replace("\\", "").split("|")
    assert sorted(k.strip() for k in listed) == sorted(mapping)


def test_every_model_of_the_schema_has_a_section():
    documented = {model.__name__ for _, model in sections_of()}
    assert documented == set(SCHEMA["$defs"]) | {"Params"}
    titles = [title for title, _ in sections_of()]
    assert len(titles) == len(set(titles))
    for title in ("analysis.sequential", "stages", "systems[] (kind: http).response"):
        assert title in titles


def test_a_kind_added_to_a_union_is_documented_without_a_list_to_edit():
    class One(BaseModel):
        kind: Literal["one"] = "one"
        a: int = Field(1, description="the first")

    class Two(BaseModel):
        kind: Literal["two"] = "two"
        b: str = Field("x", description="the second")

    class Root(BaseModel):
        things: list[Annotated[One | Two, Field(discriminator="kind")]] = Field(
            default_factory=list
        )

    assert sections_of(Root) == [
        ("(top level)", Root),
        ("things[] (kind: one)", One),
        ("things[] (kind: two)", Two),
    ]
