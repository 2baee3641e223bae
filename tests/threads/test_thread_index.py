"""A thread's index (open calls, approval marks, turn marks, nested-run marks) answers what a scan of its items
answers, for generated threads grown by appends of any size, changed in place, or changed elsewhere."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agency_swarm._threads._checks import APPROVED_RUN, AWAITING_APPROVAL, NESTED_RUN, TURN_STARTED
from agency_swarm._threads._thread import ConversationThread
from agency_swarm._threads._thread_items import call_marks, turn_start, unanswered_calls, unanswered_requests
from agency_swarm._turn._nested_runs import paused_run_in

IDS = st.sampled_from(["c1", "c2", "c3", "c4"])


def items_strategy() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda text: {"role": "user", "content": text}, st.text(max_size=3)),
        st.builds(lambda text: {"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": text}]}, st.text(max_size=3)),
        st.builds(lambda call: {"type": "function_call", "call_id": call, "name": "f", "arguments": "{}"}, IDS),
        st.builds(lambda call: {"type": "function_call_output", "call_id": call, "output": "ok"}, IDS),
        st.builds(lambda call: {"type": "mcp_approval_request", "id": call, "name": "t", "arguments": "{}",
                                "server_label": "s"}, IDS),
        st.builds(lambda call: {"type": "mcp_approval_response", "approval_request_id": call, "approve": True}, IDS),
        st.builds(lambda call: {"type": AWAITING_APPROVAL, "call_id": call}, IDS),
        st.builds(lambda call: {"type": APPROVED_RUN, "call_id": call}, IDS),
        st.builds(lambda call, n: {"type": NESTED_RUN, "call_id": call, "waiting": [n]}, IDS, st.integers(0, 9)),
        st.builds(lambda turn: {"type": TURN_STARTED, "turn_id": turn}, st.sampled_from(["t1", "t2", "t3"])),
    )


def same_answers(thread: ConversationThread) -> None:
    items = thread.items
    assert thread.unanswered_calls() == unanswered_calls(items)
    assert thread.unanswered_requests() == unanswered_requests(items)
    assert thread.call_marks() == call_marks(items)
    for turn in ("t1", "t2", "t3", "t4"):
        assert thread.turn_begun(turn) == turn_start(items, turn)
    for call in ("c1", "c2", "c3", "c4", "c5"):
        assert thread.paused_run(call) is paused_run_in(items, call)


CHUNKS = st.lists(st.lists(items_strategy(), max_size=6), max_size=8)


def well_formed(chunks: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """As the model API and the loop write them: a call id (or request id) is used once, and its output (or
    response) comes after it."""
    calls: set[Any] = set()
    requests: set[Any] = set()
    kept: list[list[dict[str, Any]]] = []
    for chunk in chunks:
        kept.append([])
        for item in chunk:
            kind = item.get("type")
            if kind == "function_call" and item["call_id"] in calls:
                continue
            if kind == "function_call_output" and item["call_id"] not in calls:
                continue
            if kind == "mcp_approval_request" and item["id"] in requests:
                continue
            if kind == "mcp_approval_response" and item["approval_request_id"] not in requests:
                continue
            calls.update([item["call_id"]] if kind == "function_call" else [])
            requests.update([item["id"]] if kind == "mcp_approval_request" else [])
            kept[-1].append(item)
    return kept


@settings(max_examples=300, deadline=None)
@given(first=st.lists(items_strategy(), max_size=10), chunks=CHUNKS, ask_between=st.booleans(),
       cut=st.integers(0, 5), elsewhere=st.booleans())
def test_the_index_answers_as_a_scan_of_the_items(
    first: list[dict[str, Any]], chunks: list[list[dict[str, Any]]], ask_between: bool, cut: int, elsewhere: bool
) -> None:
    first, *chunks = well_formed([first, *chunks])
    thread = ConversationThread("chat", "user", "CEO", list(first))
    for chunk in chunks:
        if ask_between:
            same_answers(thread)  # the index exists: appends keep it up
        if elsewhere:
            thread.add_stored(chunk)  # another process stored them
        else:
            asyncio.run(thread.extend(chunk))
    same_answers(thread)
    del thread.writable()[len(thread.items) - cut:]  # changed in place: built again
    same_answers(thread)
