"""What a thread's items say and how they are mended: calls without outputs, approval marks, a lost reasoning item,
and lending the item list to a model without a copy."""

from __future__ import annotations

import sys
from itertools import repeat
from operator import contains

from .._base._errors import ItemTooLarge
from ._checks import APPROVED_RUN, AWAITING_APPROVAL, CALL_MARKS, TURN_CANCELLED, TURN_STARTED
from ._store import Item

INTERRUPTED_OUTPUT = "Error: this call was interrupted before it finished; its result is unknown."


def held_elsewhere(items: list[Item]) -> bool:
    """Does anyone but its thread hold this list? CPython counts references exactly; elsewhere, assume so."""
    return not _COUNTS or sys.getrefcount(items) > _ALONE


def _alone(items: list[Item]) -> int:
    """`held_elsewhere`'s count, from a call as deep, for a list only its holder's slot holds."""
    return sys.getrefcount(items) if _COUNTS else 0


class _Holder:
    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Item] = []


_COUNTS = hasattr(sys, "getrefcount")
_ALONE = 0
_probe = _Holder()
_ALONE = _alone(_probe.items)
del _probe


def interrupted_output(call_id: str) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_OUTPUT}


def too_large_output(call_id: str, error: ItemTooLarge) -> Item:
    """What the model (and the store) get for a call whose output the store refused as too large."""
    size = "?" if error.size is None else error.size
    limit = "?" if error.limit is None else error.limit
    return {"type": "function_call_output", "call_id": call_id, "output": f"Error: output too large: {size} bytes, "
            f"limit {limit}"}


def turn_mark(turn_id: str) -> Item:
    """Stored just before the message of a turn started with an id: the turn exists, and where it begins."""
    return {"type": TURN_STARTED, "turn_id": turn_id}


def cancel_mark(turn_id: str | None) -> Item:
    """Stored last in the entry agent's thread of a cancelled turn: the turn is over (not waiting for a resume). It
    names the turn (its id, or the `run-...` one a turn started without an id ran under)."""
    return {"type": TURN_CANCELLED, "turn_id": turn_id}


def is_cancel_mark(item: Item) -> bool:
    return item.get("type") == TURN_CANCELLED


def turn_start(items: list[Item], turn_id: str) -> int | None:
    """Where the turn `turn_id` begins in a thread (its mark's index), wherever it stands: other turns, with ids or
    without, may have come after it (a client retrying an old request). A thread holds one mark per id, as a turn
    whose id it holds is never started again; read from the end, so the usual retry (of the latest turn) is quick."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("type") == TURN_STARTED and item.get("turn_id") == turn_id:
            return index
    return None


def turn_end(items: list[Item], begun: int) -> int:
    """Where the turn whose mark is at `begun` ends: at the next turn's mark or message, else the thread's end."""
    for index in range(begun + 2, len(items)):  # begun + 1: the turn's own message
        item = items[index]
        if item.get("type") == TURN_STARTED or (item.get("role") == "user" and "type" not in item):
            return index
    return len(items)


def call_mark(kind: str, call_id: str, steps: int | None = None) -> Item:
    """A call's mark; a waiting call's keeps the model calls its agent's turn had made (`steps_before_pause`)."""
    return {"type": kind, "call_id": call_id} if steps is None else {"type": kind, "call_id": call_id, "steps": steps}


def steps_before_pause(items: list[Item]) -> int:
    """The model calls the thread's last turn had made when it paused: the `steps` its latest waiting call's mark
    keeps (0 for a mark without them, or no mark since the turn's message)."""
    for item in reversed(items):
        kind = item.get("type")
        if kind == AWAITING_APPROVAL:
            steps = item.get("steps")
            return steps if type(steps) is int and steps > 0 else 0
        if kind is None and item.get("role") == "user":
            break
    return 0


def has_call_marks(items: list[Item]) -> bool:
    return any(item.get("type") in CALL_MARKS for item in items)


def call_marks(items: list[Item]) -> tuple[set[str], set[str]]:
    """(call ids marked as waiting for approval, call ids whose last mark says they started after an approval).

    A call marked as waiting again after it started waits again: an agent tool whose nested run paused once more.
    """
    awaiting: set[str] = set()
    started: set[str] = set()
    for item in items:
        kind = item.get("type")
        if kind == AWAITING_APPROVAL:
            call_id = str(item.get("call_id"))
            awaiting.add(call_id)
            started.discard(call_id)
        elif kind == APPROVED_RUN:
            started.add(str(item.get("call_id")))
    return awaiting, started


def without_call_marks(items: list[Item]) -> list[Item]:
    return [item for item in items if item.get("type") not in CALL_MARKS]


SEND_CALL_ID = "send_call_id"
"""Key of the call id an incoming message between agents keeps (the turn loop's `_state.SEND_CALL_ID`)."""


def has_send_ids(items: list[Item]) -> bool:
    return any(map(contains, items, _SEND_CALL_IDS))  # `SEND_CALL_ID in item` for each, in C


_SEND_CALL_IDS = repeat(SEND_CALL_ID)


def model_item_of(item: Item) -> Item:
    """A copy of an incoming message without the `send_call_id` it keeps."""
    shown = dict(item)
    shown.pop(SEND_CALL_ID, None)
    return shown


def model_input(items: list[Item]) -> list[Item]:
    """A thread's items as a model takes them, e.g. as `agents.Runner.run`'s input: without bookkeeping marks and
    without the `send_call_id` of messages between agents. A new list; an item with `send_call_id` is a copy
    without it, every other item is the one given. Images and files stored by reference stay references here (the
    thread's `model_view` resolves them into their data)."""
    return [item if SEND_CALL_ID not in item else model_item_of(item) for item in items
            if item.get("type") not in CALL_MARKS]


def started_by_a_closed_send(items: list[Item], open_calls: set[str]) -> bool:
    """The thread's last incoming message came through a send (its call id is kept with it) that is no longer open.
    A message the user or `sender_name=` sent directly has no send behind it: its calls may still wait."""
    for item in reversed(items):
        if item.get("role") == "user" and "type" not in item:
            send = item.get("send_call_id")
            return isinstance(send, str) and send not in open_calls
    return False


def unanswered_calls(items: list[Item]) -> list[Item]:
    """The function_call items that have no function_call_output (they are always a thread's last calls)."""
    answered = {item.get("call_id") for item in items if item.get("type") == "function_call_output"}
    return [item for item in items if item.get("type") == "function_call" and item.get("call_id") not in answered]


def unanswered_requests(items: list[Item]) -> list[Item]:
    """The hosted MCP approval requests that have no `mcp_approval_response` (waiting for a decision)."""
    answered = {item.get("approval_request_id") for item in items if item.get("type") == "mcp_approval_response"}
    return [item for item in items if item.get("type") == "mcp_approval_request" and item.get("id") not in answered]


def repair(items: list[Item]) -> list[Item]:
    """A copy of a thread where every function_call has an output, as the model API requires.

    A reasoning item left last by a crash has lost its follower; it is not sent again.
    """
    if items and items[-1].get("type") == "reasoning":
        items = items[:-1]
    calls = unanswered_calls(items)
    return [*items, *(interrupted_output(str(call.get("call_id"))) for call in calls)]


def ends_with_reasoning(items: list[Item]) -> bool:
    return bool(items) and items[-1].get("type") == "reasoning"


def drop_lost_reasoning(items: list[Item]) -> None:
    """A reasoning item left last by a crash lost its follower; the model API rejects it alone, so it is not sent."""
    if ends_with_reasoning(items):
        items.pop()


def message_text(item: Item) -> str:
    """The text of a stored assistant message (its refusal, if it refused)."""
    return "".join(
        part.get("text", "") or part.get("refusal", "") for part in item.get("content", []) if isinstance(part, dict)
    )


def is_finished(items: list[Item]) -> bool:
    """Did the last turn on this thread end: with the recipient's final answer, or cancelled?"""
    if not items:
        return True
    last = items[-1]
    return (last.get("type") == "message" and last.get("role") == "assistant") or last.get("type") == TURN_CANCELLED
