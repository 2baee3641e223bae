"""Loaded threads checked once per load: items the model API would refuse, threads of agents not in the chart."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from agents import TResponseInputItem
from pydantic import TypeAdapter, ValidationError

from .._base._redact import secret_free_logger
from ._store import Item, Threads

logger = secret_free_logger(__name__)

AWAITING_APPROVAL = "agency_swarm.awaiting_approval"
APPROVED_RUN = "agency_swarm.approved_run"
TURN_STARTED = "agency_swarm.turn_started"
TURN_CANCELLED = "agency_swarm.turn_cancelled"
CALL_MARKS = frozenset({AWAITING_APPROVAL, APPROVED_RUN, TURN_STARTED, TURN_CANCELLED})
"""Bookkeeping items a thread keeps (never handed to a model): a call paused for approval, an approved call about
to run, and the id of a turn started with one (stored with its message). They make "nothing run twice" hold across
a crash: only a call marked as waiting, and not marked as started, may run after a restart; any other call without
an output was cut short and gets the "interrupted" output; a turn id already stored is continued, not started. A
cancelled turn ends with a cancel mark (its `turn_id`, or None): it is over, not waiting to be resumed."""


def item_problem(item: Item) -> str:
    """Why the model API would refuse `item` as input; "" when it takes it (or it is one of our approval marks).

    Checked against the SDK's `TResponseInputItem` types: only those of the item's own `type` (the whole union
    for a message without one), so a usual item costs 0.5-5 µs. Extra keys pass (our `send_call_id` is one).
    """
    kind = item.get("type")
    if kind == TURN_STARTED:
        return "" if isinstance(item.get("turn_id"), str) else "a turn mark without a turn_id"
    if kind == TURN_CANCELLED:
        return "" if isinstance(item.get("turn_id"), str | None) else "a cancel mark whose turn_id is not a str"
    if kind in CALL_MARKS:
        return "" if isinstance(item.get("call_id"), str) else "an approval mark without a call_id"
    if kind is not None and (not isinstance(kind, str) or kind not in _members_by_type()):
        return "its type is not one the model API knows"
    try:
        _adapter(kind).validate_python(item)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"not an item the model API accepts ({where}: {first['msg']})"
    return ""


NESTED_RUN = "agency_swarm.nested_run"
"""A bookkeeping item too: the paused run of an agent tool (`agent.as_tool`) that a call waits for, with the calls
it waits for and the SDK's serialized run state (stored with the call's `AWAITING_APPROVAL` mark)."""
CALL_MARKS = CALL_MARKS | {NESTED_RUN}


@cache
def _members_by_type() -> dict[str, tuple[Any, ...]]:
    """The SDK's input item types by the `type` each one declares (three kinds of message share "message")."""
    members: dict[str, list[Any]] = {}
    for member in get_args(TResponseInputItem):
        for kind in _literals(get_type_hints(member).get("type")):
            members.setdefault(kind, []).append(member)
    return {kind: tuple(found) for kind, found in members.items()}


def _literals(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [value for value in get_args(annotation) if isinstance(value, str)]
    return [value for part in get_args(annotation) for value in _literals(part)]


@cache  # one per known type (the caller checks the type first): built at the first load that has one
def _adapter(kind: str | None) -> TypeAdapter[Any]:
    if kind is None:
        return TypeAdapter(TResponseInputItem)
    members = _members_by_type()[kind]
    target: Any = members[0] if len(members) == 1 else Union[members]  # noqa: UP007 (a tuple made at run time)
    return TypeAdapter(target)


def without_refused_items(
    threads: Threads, chat_id: str, source: str, held: Mapping[str, int] | None = None
) -> Threads:
    """`threads` without the items the model API would refuse, and without what their absence leaves invalid (the
    outputs of a skipped call, a reasoning item whose follower was skipped). Each skipped item is logged once per
    load, naming chat, thread and its 0-based position in the thread (`held`: how many items each thread already
    has in memory, when `threads` are what was added since); the store keeps it."""
    checked: Threads = {}
    for key, items in threads.items():
        problems = {index: why for index, item in enumerate(items) if (why := item_problem(item))}
        if problems:
            first = (held or {}).get(key, 0)
            _skip_dependents(items, problems, first)
            for index in sorted(problems):
                logger.warning(
                    "%s: chat %r, thread %r: item %d skipped: %s. It stays in the store; the model is not sent it",
                    source, chat_id, key, first + index, problems[index],
                )
            items = [item for index, item in enumerate(items) if index not in problems]
        checked[key] = items
    return checked


def _skip_dependents(items: list[Item], problems: dict[int, str], first: int) -> None:
    """Add to `problems` what a skipped item leaves invalid for the model API, as the file store's quarantine does."""
    pending = list(problems)
    while pending:
        gone = pending.pop()
        before = next((index for index in range(gone - 1, -1, -1) if index not in problems), None)
        if before is not None and items[before].get("type") == "reasoning":
            problems[before] = f"a reasoning item whose follower (item {first + gone}) was skipped"
            pending.append(before)
        if items[gone].get("type") != "function_call":
            continue
        call_id = items[gone].get("call_id")
        for index, item in enumerate(items):
            if index not in problems and item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                problems[index] = f"a function_call_output whose function_call (item {first + gone}) was skipped"
                pending.append(index)


def only_known_recipients(threads: Threads, chat_id: str, recipients: frozenset[str]) -> Threads:
    """`threads` without those whose recipient is not an agent of the chart (nobody's model reads them), logged
    once per load. Senders are not checked: `sender_name=` may name anyone."""
    unknown = [key for key in threads if key.split("->", 1)[1] not in recipients]
    if not unknown:
        return threads
    logger.warning(
        "chat %r: thread(s) %s not loaded: their recipient is not an agent of this agency's chart (renamed or "
        "removed?). They stay in the store; add the agent back to use them, or delete the chat.",
        chat_id, ", ".join(repr(key) for key in unknown),
    )
    return {key: items for key, items in threads.items() if key not in unknown}
