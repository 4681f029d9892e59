"""The one YAML loader for files and values a user writes (params, dimension files, overrides).

`yaml.safe_load` builds no objects beyond lists, mappings and scalars, but it keeps YAML's aliases:
`&a [x, x, ...]` then `&b [*a, *a, ...]` nine levels deep (the "billion laughs" of YAML) is a
few hundred bytes whose values, once walked, are 9^9 (387 million) strings. The loaded object
shares them, so loading is quick; everything that walks it afterwards (the params' path
resolution, the validation) is not: `cube validate` on such a file ran past 120 s with memory
growing (issue 38). `load_yaml` composes the document, counts its values as they would be walked
with every alias expanded (each node's count computed once, so the count itself is quick), and
refuses a document over `MAX_VALUES` or with an alias inside its own value (a cycle) before
building anything. A params file holds hundreds of values; the bound is far above any real one.

Refusals are `yaml.YAMLError`s (`YamlTooLarge`), so every caller's "not valid YAML" message names
the file as it does for a syntax error. YAML nested deeper than Python's recursion allows is
refused the same way (PyYAML composes recursively).
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_VALUES = 100_000  # scalars, lists and mappings once every alias is expanded


class YamlTooLarge(yaml.YAMLError):
    """A document whose aliases expand beyond `MAX_VALUES`, or refer to themselves."""


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many nodes walking `root` visits with every alias expanded (stops counting above
    `limit`); iterative and memoised per node, so a bomb costs its size in nodes, not its
    expansion. Raises YamlTooLarge for a node that contains itself."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(size[id(c)] for c in _children(node))
            size[key] = min(total, limit + 1)
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlTooLarge("an alias refers to a value that contains it (a recursive alias)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
    return size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str, max_values: int = MAX_VALUES) -> Any:
    """`yaml.safe_load(text)`, refusing a document whose aliases expand beyond `max_values` values
    (`YamlTooLarge`, a `yaml.YAMLError`)."""
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlTooLarge("nested too deep to read") from None
        if node is None:
            return None
        n = _expanded_size(node, max_values)
        if n > max_values:
            raise YamlTooLarge(
                f"its aliases (*name) expand to more than {max_values:,} values (an alias "
                "bomb?); write the values out or use fewer aliases"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()
