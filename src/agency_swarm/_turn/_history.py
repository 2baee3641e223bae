"""What a model reads of its thread: a list of its own, without bookkeeping the API rejects, windowed if asked."""

from __future__ import annotations

from typing import Any

from ._state import SEND_CALL_ID, USER_CALLER, Turn


def model_history(turn: Turn) -> list[dict[str, Any]]:
    """What the model reads: a list of its own, so items the turn adds later never appear in what it was given;
    in a thread between agents, without the send call ids kept with incoming messages. The thread's own list is
    lent rather than copied: the thread copies it before changing it only if someone kept it (`writable`)."""
    thread = turn.thread
    items = thread.model_view(turn.wiring.send_tool is not None)  # no marks; attachments resolved (`model_view`)
    window = turn.agent.history_window
    if window is not None and len(items) > window + 1:
        items = window_of(items, window)
    if turn.caller != USER_CALLER:
        return _model_input(items)  # a new list
    if items is thread.items:
        thread.lent = True
    return items


def _model_input(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `items` whose incoming messages leave out their send call id (`SEND_CALL_ID`)."""
    return [item if SEND_CALL_ID not in item else _without_call_id(item) for item in items]


def _without_call_id(item: dict[str, Any]) -> dict[str, Any]:
    plain = item.copy()
    del plain[SEND_CALL_ID]
    return plain


def window_of(items: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """The first item and the last `window` items, widened so no call loses its output or reasoning its follower."""
    start = len(items) - window
    while start > 1 and _splits(items[start - 1], items[start]):
        start -= 1
    return [items[0], *items[start:]]


def _splits(before: dict[str, Any], first: dict[str, Any]) -> bool:
    """Would a cut between these two items orphan something the model API insists on keeping together?"""
    return (
        first.get("type") == "function_call_output"  # its call would be cut off
        or before.get("type") in ("reasoning", "function_call")  # reasoning + follower; parallel calls
    )
