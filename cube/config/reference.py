"""The params reference, generated from the pydantic schema (so README and code never drift)."""

from __future__ import annotations

import typing

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cube.config import model_spec, params, sections

SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("(top level)", params.Params),
    ("models.<name> / any model reference", model_spec.ModelSpec),
    ("corpus", sections.CorpusParams),
    ("questions", sections.QuestionParams),
    ("systems[] (kind: builtin)", sections.BuiltinSystem),
    ("systems[] (kind: ragflow)", sections.RagflowSystem),
    ("systems[] (kind: imported)", sections.ImportedSystem),
    ("dimensions[] (a name, or)", sections.DimensionParams),
    ("judges[]", sections.JudgeParams),
    ("analysis", sections.AnalysisParams),
    ("human", sections.HumanParams),
    ("lexical", sections.LexicalParams),
    ("diagnostics", sections.DiagnosticsParams),
    ("audit", sections.AuditParams),
    ("simulation", sections.SimulationParams),
]


def _type_name(annotation: typing.Any) -> str:
    text = repr(annotation) if not isinstance(annotation, type) else annotation.__name__
    for prefix in (
        "typing.",
        "cube.config.params.",
        "cube.config.sections.",
        "cube.config.model_spec.",
        "<class '",
        "'>",
    ):
        text = text.replace(prefix, "")
    if "Annotated[" in text:  # the discriminated union of systems
        return "list[builtin \\| ragflow \\| imported]"
    return text.replace(" | ", "|").replace("|", " \\| ")


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "**required**"
    if info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, BaseModel):
            return "(section defaults)"
        if isinstance(value, list) and value and isinstance(value[0], BaseModel):
            return "[" + ", ".join(getattr(v, "name", "...") for v in value) + "]"
        return f"`{value}`"
    return f"`{info.default!r}`" if info.default is not None else "`None`"


def params_reference() -> str:
    """Markdown tables: one per section, one row per key (type, default, description)."""
    out = [
        "Every key is validated: an unknown key or a wrong type is an error naming the key and "
        "the file.",
        "",
    ]
    for title, model in SECTIONS:
        out += [
            f"#### `{title}`",
            "",
            "| key | type | default | description |",
            "|---|---|---|---|",
        ]
        for name, info in model.model_fields.items():
            desc = (info.description or "").replace("|", "\\|")
            out.append(f"| `{name}` | {_type_name(info.annotation)} | {_default(info)} | {desc} |")
        out.append("")
        if model is sections.CorpusParams:
            from cube.config.schema import field_key_table

            out += [
                "Field keys of `corpus.columns` (a column no key maps is rendered under its own "
                "label, or dropped with `extra_columns: drop`; `cube validate` lists them):",
                "",
                field_key_table(),
                "",
            ]
    return "\n".join(out)
