"""What a thread's items say that every turn asks (open calls, approval marks, turn marks), kept up with appends."""

from __future__ import annotations

from typing import Any

from ._checks import APPROVED_RUN, AWAITING_APPROVAL, NESTED_RUN, TURN_STARTED
from ._store import Item


class ThreadIndex:
    """One pass over a thread's items, then a step per appended item: a turn asks these of a thread at every model
    call or resume, and a scan of the whole thread each time would make a turn's cost grow with the chat.

    Each answer is what the matching function of `_thread_items` gives for the same items (`unanswered_calls`,
    `unanswered_requests`, `call_marks`, `turn_start`, `paused_run_in`): tests compare them on generated threads.
    """

    __slots__ = ("awaiting", "calls", "length", "nested", "requests", "started", "turns")

    def __init__(self) -> None:
        self.length = 0
        self.calls: dict[Any, Item] = {}  # function_call items without an output yet, in thread order
        self.requests: dict[Any, Item] = {}  # hosted MCP approval requests without a response
        self.awaiting: set[str] = set()  # `call_marks`: waiting for approval, and started after one
        self.started: set[str] = set()
        self.turns: dict[str, int] = {}  # turn id -> its mark's index
        self.nested: dict[str, Item] = {}  # call id -> the last NESTED_RUN mark of that call

    def add(self, items: list[Item]) -> None:
        """Take items appended at `self.length`."""
        for offset, item in enumerate(items):
            kind = item.get("type")
            if kind is None or kind == "message":
                continue
            if kind == "function_call":
                self.calls[item.get("call_id")] = item
            elif kind == "function_call_output":
                self.calls.pop(item.get("call_id"), None)
            else:
                self._add_other(kind, item, self.length + offset)
        self.length += len(items)

    def _add_other(self, kind: object, item: Item, index: int) -> None:
        if kind == "mcp_approval_request":
            self.requests[item.get("id")] = item
        elif kind == "mcp_approval_response":
            self.requests.pop(item.get("approval_request_id"), None)
        elif kind == AWAITING_APPROVAL:
            call_id = str(item.get("call_id"))
            self.awaiting.add(call_id)
            self.started.discard(call_id)
        elif kind == APPROVED_RUN:
            self.started.add(str(item.get("call_id")))
        elif kind == TURN_STARTED:
            self.turns[str(item.get("turn_id"))] = index
        elif kind == NESTED_RUN:
            self.nested[str(item.get("call_id"))] = item
