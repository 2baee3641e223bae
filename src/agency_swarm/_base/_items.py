"""Model output items as the plain dicts threads store: `model_dump(exclude_unset=True)`, as the SDK dumps them."""

from __future__ import annotations

from typing import Any


def stored_item(item: Any) -> dict[str, Any]:
    """The dict a thread stores for one output item.

    Reading text messages and function calls straight from their fields was measured at stop 17 and paid under
    1 % of a turn (pydantic's serializer is fast enough), so every item takes the serializer.
    """
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped
