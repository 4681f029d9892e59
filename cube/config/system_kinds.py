"""The params side of a system kind: the schema a `systems:` entry is validated against.

The five kinds of the package (`builtin`, `ragflow`, `imported`, `http`, `python`) are the members
of the discriminated union `cube.config.sections.SystemParams`: the params layer validates them
without importing the systems layer above it (`cube.systems.kinds` holds the rest of each kind: its
builder, what `cube plan` counts, what `cube validate` checks and probes). A kind of the user's
(docs/how-to/system-kind.md) brings its own params model, a subclass of `KindParams`, and registers
it here when its module is imported (`cube.systems.kinds.system_kind` does it); `checked_entry`
validates an entry of that kind by it, and leaves every other entry to the union (whose error
names the known kinds).

Where a kind outside the package comes from, in this order:

- already registered (its module imported by the user's code, or by an earlier params file);
- the params key `system_kinds: [package.module, ...]`, modules imported before the systems are
  validated (`import_kind_modules`; the project root first on `sys.path`, as for a python
  system's `callable`);
- the entry point group `cube.system_kinds` of an installed package (`[project.entry-points.
  "cube.system_kinds"] llamaindex = "my_package.llamaindex_kind"`): the entry named as the kind is
  loaded the first time a params file names that kind.
"""

from __future__ import annotations

import importlib
import sys
import typing
from importlib.metadata import entry_points
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SerializationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from cube.config.model_spec import ModelRef, Name, StrictModel
from cube.config.project import project_root

ENTRY_POINT_GROUP = "cube.system_kinds"
PACKAGE_KINDS = ("builtin", "ragflow", "imported", "http", "python")

_REGISTERED: dict[str, type[BaseModel]] = {}


class KindParams(StrictModel):
    """What every `systems:` entry of a user's kind has; its own keys are added by subclassing
    (`kind: Literal["mykind"] = "mykind"` names the kind)."""

    kind: str
    name: Name
    top_n: int = Field(8, ge=1, description="Retrieved documents kept per question (N of R@k).")
    answerer: ModelRef | None = Field(
        None,
        description="The model the system answers with: it writes the zero and full bound sets "
        "(docs/explanation/method.md).",
    )
    version: str = Field(
        "",
        description="Your label for what the file cannot show (a model, an index): changing it "
        "asks every question again instead of reusing the cached replies.",
    )

    def secret_envs(self) -> list[tuple[str, str, str]]:
        """(environment variable, params key, who needs it) of each secret the system reads:
        `cube validate` and the run's preflight say which are unset, all at once."""
        return []

    @model_validator(mode="after")
    def _no_secrets(self) -> KindParams:
        """A user kind's keys are written to the resolved params.yaml and key its call cache: a
        key or token pasted into any of them is refused as in the package's kinds
        (`cube.config.secret_scan`; the value is never echoed). Secrets come from environment
        variables the kind names (`secret_envs`)."""
        from cube.config.secret_scan import secrets_problem

        if why := secrets_problem({f"systems[{self.name}]": self.model_dump(mode="json")}):
            raise ValueError(why)
        return self


def kind_tag(model: type[BaseModel]) -> str | None:
    """The `kind` a params model carries (`Literal["http"]` -> "http"); None without one."""
    info = model.model_fields.get("kind")
    values = typing.get_args(info.annotation) if info is not None else ()
    return str(values[0]) if len(values) == 1 else None


def register_params(model: type[BaseModel]) -> str:
    """Register a user kind's params model under its `kind` tag; returns the tag. A package kind's
    name, or a tag already taken by another model, is refused."""
    tag = kind_tag(model)
    if tag is None:
        raise TypeError(
            f"{model.__name__}: a system kind's params model needs `kind: Literal['<name>']`"
        )
    if tag in PACKAGE_KINDS or _REGISTERED.get(tag, model) is not model:
        raise ValueError(f"system kind {tag!r} is defined already ({model.__name__})")
    _REGISTERED[tag] = model
    return tag


def registered_kinds() -> dict[str, type[BaseModel]]:
    """The user kinds registered so far, kind -> params model, in the order registered."""
    return dict(_REGISTERED)


def import_kind_modules(modules: list[str]) -> None:
    """Import the modules of `system_kinds:` (each registers its kind), the project root first on
    `sys.path`; a module that does not import is a params error naming it."""
    root = str(project_root())
    if root not in sys.path:
        sys.path.insert(0, root)
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as err:  # the params check names the key and the module
            raise ValueError(
                f"system_kinds: module {name!r} did not import: {type(err).__name__}: {err}"
            ) from err


def params_model(kind: str) -> type[BaseModel] | None:
    """The params model of a user kind: registered, or loaded from the entry point of that name
    (group `ENTRY_POINT_GROUP`); None when neither knows it."""
    if kind not in _REGISTERED:
        for ep in entry_points(group=ENTRY_POINT_GROUP, name=kind):
            ep.load()  # the module registers its kind (a module, or its params model itself)
    return _REGISTERED.get(kind)


def checked_entry(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A `systems:` entry validated by its kind's model: a user kind's by the registered one, a
    package kind's (or an entry without a `kind`) by the discriminated union (`handler`); a kind
    nobody registered is an error naming the known ones and how to add one."""
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    if not isinstance(kind, str) or kind in PACKAGE_KINDS:
        return handler(value)
    model = params_model(kind)
    if model is None:
        known = [*PACKAGE_KINDS, *_REGISTERED]
        raise ValueError(
            f"unknown system kind {kind!r}; known: {', '.join(known)}. A kind of your own: name "
            f"its module in `system_kinds:`, or install a package with the entry point "
            f"{ENTRY_POINT_GROUP} (docs/how-to/system-kind.md)"
        )
    return value if isinstance(value, model) else model.model_validate(value)


def dumped_entry(value: Any, handler: Any, info: SerializationInfo) -> Any:
    """A `systems:` entry dumped by its own model (a user kind is no member of the union)."""
    if getattr(value, "kind", None) in PACKAGE_KINDS:
        return handler(value)
    return value.model_dump(
        mode=info.mode, exclude_unset=info.exclude_unset, exclude_defaults=info.exclude_defaults
    )
