"""Model output items as the plain dicts threads store: `model_dump(exclude_unset=True)`, faster for common kinds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from . import _sdk


def stored_item(item: Any) -> dict[str, Any]:
    """The dict a thread stores for one output item.

    Text messages and function calls (nearly every item) are read straight from their fields, about three times
    faster than pydantic's serializer; anything unusual in them (extra fields, annotations, logprobs) and every
    other kind of item go through `model_dump`, which the fast paths match key for key. Without `_sdk.SHORTCUTS`
    every item goes through `model_dump`.
    """
    fast = _FAST.get(type(item)) if _sdk.SHORTCUTS else None
    stored = None if fast is None else fast(item)
    if stored is not None:
        return stored
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped


def _function_call(call: ResponseFunctionToolCall) -> dict[str, Any] | None:
    """A function call with the fields a model sets (`_USUAL_CALL`), all str, read straight from them; any other
    as `_plain_fields`."""
    if call.__pydantic_fields_set__ == _USUAL_CALL_FIELDS and not call.__pydantic_extra__:
        values = call.__dict__
        arguments, call_id, name, kind = values["arguments"], values["call_id"], values["name"], values["type"]
        item_id, status = values["id"], values["status"]
        if type(arguments) is type(call_id) is type(name) is type(kind) is type(item_id) is type(status) is str:
            return {"arguments": arguments, "call_id": call_id, "name": name, "type": kind, "id": item_id,
                    "status": status}
    return _plain_fields(call)


def _plain_fields(model: Any) -> dict[str, Any] | None:
    """Set fields in declaration order (pydantic keeps `__dict__` so), when every value is a str or None: copied
    whole and the unset fields deleted (a dict's order survives deletions)."""
    if model.__pydantic_extra__:
        return None
    out = _set_only(model.__dict__, model.__pydantic_fields_set__)
    return out if _STR_OR_NONE.issuperset(map(type, out.values())) else None


def _set_only(values: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """`values` without the fields not in `fields`, in their order (a dict's order survives deletions)."""
    out = dict(values)
    for name in values.keys() - fields:
        del out[name]
    return out


def _message(message: ResponseOutputMessage) -> dict[str, Any] | None:
    if message.__pydantic_extra__:
        return None
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if type(part) is not ResponseOutputText or part.annotations or part.logprobs or part.__pydantic_extra__:
            return None
        set_fields = part.__pydantic_fields_set__  # annotations, text, type and perhaps logprobs: its only fields
        if set_fields == _ALL_TEXT_FIELDS:
            parts.append({"annotations": [], "text": part.text, "type": part.type, "logprobs": part.logprobs})
        elif set_fields == _TEXT_FIELDS:
            parts.append({"annotations": [], "text": part.text, "type": part.type})
        else:  # a field left unset: keep pydantic's exact choice
            return None
    values = message.__dict__
    fields = message.__pydantic_fields_set__
    if fields == _USUAL_MESSAGE_FIELDS:  # the fields a model sets (`_USUAL_MESSAGE`)
        item_id, role, status, kind = values["id"], values["role"], values["status"], values["type"]
        if type(item_id) is type(role) is type(status) is type(kind) is str:
            return {"id": item_id, "content": parts, "role": role, "status": status, "type": kind}
    if "content" not in fields:  # then as `_plain_fields`, the content in its place
        return None
    out = _set_only(values, fields)
    out["content"] = None  # the others must be str or None
    if not _STR_OR_NONE.issuperset(map(type, out.values())):
        return None
    out["content"] = parts
    return out


def _usual(model: type[Any], names: tuple[str, ...]) -> frozenset[str]:
    """`names` as a set, when they are the model's fields in that order (the fast paths write them so); else a set
    no item has (no field is named ""), and those fast paths are left to the generic one."""
    in_order = tuple(name for name in model.model_fields if name in names) == names
    return frozenset(names) if in_order else frozenset({""})


_USUAL_MESSAGE = ("id", "content", "role", "status", "type")
_USUAL_CALL = ("arguments", "call_id", "name", "type", "id", "status")
_USUAL_MESSAGE_FIELDS = _usual(ResponseOutputMessage, _USUAL_MESSAGE)
_USUAL_CALL_FIELDS = _usual(ResponseFunctionToolCall, _USUAL_CALL)
_STR_OR_NONE = frozenset({str, type(None)})
_TEXT_FIELDS = frozenset({"annotations", "text", "type"})
_ALL_TEXT_FIELDS = _TEXT_FIELDS | {"logprobs"}
_FAST: dict[type, Callable[[Any], dict[str, Any] | None]] = {
    ResponseOutputMessage: _message, ResponseFunctionToolCall: _function_call,
}
