"""The generated references: the params reference from the pydantic schema, and the command line's
from its argparse parser (so the documentation and the code never drift).

`write_references(folder, parser)` writes both pages (`cube docs-reference`, `make reference`):
docs/reference/params.md and docs/reference/cli.md are its output, never edited by hand.

The params page's sections are walked from `Params` through its fields' types (`sections_of`), not
listed: a system kind added to the `systems` union, or a sub-section added to any model, has its
section without a change here (a hand list once left out `kind: http` and `analysis.sequential`).
"""

from __future__ import annotations

import argparse
import re
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cube.config import model_spec, params, sections
from cube.config.system_kinds import kind_tag, registered_kinds

# A model reached through a model reference (`answerer`, `judges[].model`, ...) is documented once,
# under the name a reader looks for; every other section's title is its key path in the params file.
TITLES: dict[type[BaseModel], str] = {model_spec.ModelSpec: "models.<name> / any model reference"}


def _models_in(annotation: typing.Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through list, dict, Optional, unions, Annotated),
    in the order written."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += [m for m in _models_in(arg) if m not in found]
    return found


def union_kinds(annotation: typing.Any) -> list[tuple[str, type[BaseModel]]]:
    """(kind, model) of each member of the discriminated union an annotation holds, in the
    union's order, then the user kinds registered (`cube.config.system_kinds`: they extend the
    union of systems, the only one the schema has); empty when it holds none."""
    members = _models_in(annotation)
    kinds = [(kind_tag(m), m) for m in members]
    if len(members) < 2 or any(k is None for k, _ in kinds):
        return []
    return [(str(k), m) for k, m in kinds] + list(registered_kinds().items())


def system_kinds() -> list[tuple[str, type[BaseModel]]]:
    """Every system kind of the schema, read from the type of `Params.systems` and the registry of
    user kinds (so a kind added either way is documented without a change here)."""
    return union_kinds(params.Params.model_fields["systems"].annotation)


def _section_title(parent: str, name: str, info: FieldInfo, model: type[BaseModel]) -> str:
    """A nested section's title: its key path (`analysis.sequential`), `[]` after a list's key,
    `(kind: x)` for a member of a discriminated union, `(a name, or)` when a plain name may stand
    in for the section."""
    if model in TITLES:
        return TITLES[model]
    origin = typing.get_origin(info.annotation)
    path = name if parent == "(top level)" else f"{parent}.{name}"
    if origin is list:
        path += "[]"
    elif origin is dict:
        path += ".<name>"
    kind = kind_tag(model)
    if kind is not None and union_kinds(info.annotation):
        return f"{path} (kind: {kind})"
    if str in _plain_types(info.annotation):
        return f"{path} (a name, or)"
    return path


def _plain_types(annotation: typing.Any) -> list[typing.Any]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args:
        args = typing.get_args(args[0])
    return [a for a in args if not (isinstance(a, type) and issubclass(a, BaseModel))]


def sections_of(root: type[BaseModel] = params.Params) -> list[tuple[str, type[BaseModel]]]:
    """(title, model) of every section of the schema, walked from `root` depth first: each model
    reachable through the fields' types once, right after the section that holds it first. Walked,
    not listed, so a kind or sub-section added to the schema is never missing from the reference."""
    out: list[tuple[str, type[BaseModel]]] = []
    seen: set[type[BaseModel]] = set()

    def walk(title: str, model: type[BaseModel]) -> None:
        seen.add(model)
        out.append((title, model))
        for name, info in model.model_fields.items():
            children = _models_in(info.annotation)
            children += [m for _, m in union_kinds(info.annotation) if m not in children]
            for child in children:
                if child not in seen:
                    walk(_section_title(title, name, info, child), child)

    walk("(top level)", root)
    return out


def _type_name(annotation: typing.Any) -> str:
    kinds = union_kinds(annotation)
    if kinds:  # the discriminated union of systems: its kinds, each a section below
        return "list[" + " \\| ".join(kind for kind, _ in kinds) + "]"
    text = repr(annotation) if not isinstance(annotation, type) else annotation.__name__
    for prefix in (
        "typing.",
        "cube.config.params.",
        "cube.config.sections.",
        "cube.config.model_spec.",
        "cube.config.http_system.",
        "<class '",
        "'>",
    ):
        text = text.replace(prefix, "")
    text = re.sub(r"^Optional\[(.*)\]$", r"\1 | None", text)  # as every other row writes it
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
        "**Paths.** A relative path in a params file (`corpus.path`, `questions.path`, "
        "`systems[].path`, a Python system's `file.py:function`, `dimensions[].path` and "
        "`prompt_file`, `human.ratings` and `key`, `outputs_dir`, `cache_path`) is read from the "
        "folder of that params file, wherever the command runs; absolute and `~/` paths are used "
        "as they are, and so are the overrides' (`cube sweep --grid`, papermill's `overrides`). "
        "`outputs_dir`, when not set, is `outputs/` in the project root (the repository checkout, "
        "else the current folder) for a params file inside it, else `outputs/` beside the params "
        "file. A path that does not exist is named by `cube validate` with the params file and "
        "the path it looked for.",
        "",
    ]
    for title, model in sections_of():
        out += [
            f"#### `{title}`",
            "",
            "| key | type | default | description |",
            "|---|---|---|---|",
        ]
        for name, info in model.model_fields.items():
            desc = _cell(info.description or "")
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


GENERATED = (
    "<!-- generated by `cube docs-reference` (`make reference`) from {source}: do not edit, "
    "regenerate -->"
)


def params_page() -> str:
    """docs/reference/params.md: `params_reference()` under a title."""
    return (
        "\n".join(
            [
                GENERATED.format(source="the params schema (walked from cube/config/params.py)"),
                "",
                "# Params reference",
                "",
                params_reference(),
            ]
        ).rstrip("\n")
        + "\n"
    )


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """docs/reference/cli.md: the command, then every subcommand (and sub-subcommand) with its
    usage, description and arguments, in the parser's order. Built from the parser's actions, not
    its help text, so the page is the same on every Python version and terminal width."""
    out = [
        GENERATED.format(source="the parser of cube/cli/"),
        "",
        f"# Command line: `{parser.prog}`",
        "",
        *_code(_usage(parser)),
        _prose(parser.description or ""),
        "",
    ]
    if parser.epilog:
        out += _code(parser.epilog)
    out += ["Every command takes `-h` / `--help`, which prints its part of this page.", ""]
    commands = _subcommands(parser)
    out += ["| command | what it does |", "|---|---|"]
    out += [f"| `{sub.prog}` | {_cell(help_)} |" for sub, help_ in commands]
    out.append("")
    for sub, help_ in commands:
        out += _command_section(sub, help_, level=2)
    return "\n".join(out).rstrip("\n") + "\n"


def write_references(folder: Path | str, parser: argparse.ArgumentParser) -> list[Path]:
    """Write params.md and cli.md into `folder` (created if missing); the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("params.md", params_page()), ("cli.md", cli_reference(parser))):
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[argparse.ArgumentParser, str]]:
    """(parser, one-line help) of each subcommand, in the order they were added."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return found


def _command_section(parser: argparse.ArgumentParser, help_: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{parser.prog}`", "", _prose(help_), "", *_code(_usage(parser))]
    if parser.description:
        out += [_prose(parser.description), ""]
    rows = [
        f"| `{_invocation(action)}` | {_cell(_help(action))} |"
        for action in parser._actions
        if _shown(action) and not isinstance(action, argparse._SubParsersAction)
    ]
    if rows:
        out += ["| argument | meaning |", "|---|---|", *rows, ""]
    for sub, sub_help in _subcommands(parser):
        out += _command_section(sub, sub_help, level + 1)
    return out


def _shown(action: argparse.Action) -> bool:
    return action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": ""}
    if action.required and action.option_strings:
        text = f"(required) {text}".strip()
    return text


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _args(action: argparse.Action) -> str:
    """The arguments' part of an invocation, as argparse's usage writes it."""
    name, nargs = _metavar(action), action.nargs
    if isinstance(action, argparse._SubParsersAction):
        return f"{name} ..."
    if nargs == 0:
        return ""
    if nargs is None:
        return name
    if nargs == "?":
        return f"[{name}]"
    if nargs == "*":
        return f"[{name} ...]"
    if nargs == "+":
        return f"{name} [{name} ...]"
    return " ".join([name] * int(nargs))


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return _args(action)
    return ", ".join(f"{option} {_args(action)}".strip() for option in action.option_strings)


def _usage(parser: argparse.ArgumentParser) -> str:
    parts = []
    for action in parser._actions:
        if action.help is argparse.SUPPRESS:
            continue
        if not action.option_strings:
            parts.append(_args(action))
            continue
        text = f"{action.option_strings[0]} {_args(action)}".strip()
        parts.append(text if action.required else f"[{text}]")
    options = [p for p, a in zip(parts, _visible(parser), strict=True) if a.option_strings]
    positionals = [p for p, a in zip(parts, _visible(parser), strict=True) if not a.option_strings]
    return " ".join(["usage:", parser.prog, *options, *positionals])


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.help is not argparse.SUPPRESS]


def _code(text: str) -> list[str]:
    return ["```text", text.strip("\n"), "```", ""]


def _prose(text: str) -> str:
    """Markdown text of a help string: `*`, `<` and `>` escaped outside `code` spans."""
    pieces = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(
        piece
        if piece.startswith("`")
        else piece.replace("*", "\\*").replace("<", "&lt;").replace(">", "&gt;")
        for piece in pieces
    )


def _cell(text: str) -> str:
    return _prose(text).replace("|", "\\|")
