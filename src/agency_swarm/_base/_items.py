"""Model output items as the plain dicts threads store: `model_dump(exclude_unset=True)`, faster for common kinds."""

from __future__ import annotations

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
    kind = type(item) if _sdk.SHORTCUTS else None
    if kind is ResponseOutputMessage:
        fast = _message(item)
    elif kind is ResponseFunctionToolCall:
        fast = _plain_fields(item)
    else:
        fast = None
    if fast is not None:
        return fast
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped


def _plain_fields(model: Any) -> dict[str, Any] | None:
    """Set fields in declaration order (pydantic keeps `__dict__` so), when every value is a str or None."""
    if model.__pydantic_extra__:
        return None
    fields = model.__pydantic_fields_set__
    out: dict[str, Any] = {}
    for name, value in model.__dict__.items():
        if name in fields:
            if value is not None and type(value) is not str:
                return None
            out[name] = value
    return out


def _message(message: ResponseOutputMessage) -> dict[str, Any] | None:
    if message.__pydantic_extra__:
        return None
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if type(part) is not ResponseOutputText or part.annotations or part.logprobs or part.__pydantic_extra__:
            return None
        set_fields = part.__pydantic_fields_set__  # annotations, text, type and perhaps logprobs: its only fields
        if len(set_fields) == 3 and "logprobs" not in set_fields:
            parts.append({"annotations": [], "text": part.text, "type": part.type})
        elif len(set_fields) == 4:
            parts.append({"annotations": [], "text": part.text, "type": part.type, "logprobs": part.logprobs})
        else:  # a field left unset: keep pydantic's exact choice
            return None
    fields = message.__pydantic_fields_set__
    result: dict[str, Any] = {}
    for name, value in message.__dict__.items():
        if name in fields:
            if name == "content":
                value = parts
            elif value is not None and type(value) is not str:
                return None
            result[name] = value
    return result
