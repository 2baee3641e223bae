"""What a model reads of its thread: a list of its own, without bookkeeping the API rejects, windowed if asked."""

from __future__ import annotations

from typing import Any

from ._state import Turn


def model_history(turn: Turn) -> list[dict[str, Any]]:
    """What the model reads: a list of its own, so items the turn adds later never appear in what it was given;
    without bookkeeping marks, and in a thread between agents without the send call ids kept with incoming
    messages (`model_view` keeps that list up with the thread's appends: no work per call that grows with the
    thread). The list is lent rather than copied: the thread copies it before changing it only if someone kept it."""
    thread = turn.thread
    if turn.agent.history_window is None and not (thread.has_marks or thread.has_attachments or thread.has_send_ids):
        thread.lent = True  # the usual thread: the model reads its items as they are (`model_view`)
        return thread.items
    items = thread.model_view(turn.wiring.send_tool is not None)  # attachments resolved, markers for a sender
    window = turn.agent.history_window
    if window is not None and len(items) > window + 1:
        return window_of(items, window)  # a new list
    if items is thread.items:
        thread.lent = True
    return items


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
