"""`cube.kb.mapping.MergedItem` declares every field a mapping can name (`MAPPABLE`): a field added
to the schema without its type here would be an undeclared key of the merged items."""

from __future__ import annotations

from cube.config.schema import MAPPABLE
from cube.kb.mapping import LIST_FIELDS, MergedItem


def test_merged_item_declares_every_mappable_field() -> None:
    declared = set(MergedItem.__annotations__)
    assert set(MAPPABLE) <= declared
    assert declared - set(MAPPABLE) == {"extras", "source_rows", "_idx"}
    assert set(LIST_FIELDS) <= set(MAPPABLE)
