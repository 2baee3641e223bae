"""What depends on the CPython version (3.11 to 3.13 are claimed; scripts/test.sh runs these on each): exact reference
counts behind the thread's copy-on-write, and objects the collector finalizes (3.13 reports their errors)."""

from __future__ import annotations

import asyncio
import gc
import io
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from agency_swarm._cli._terminal import Spinner, _HideSpinnerOnWrite
from agency_swarm._threads._thread_items import held_elsewhere


class Holder:
    """A thread's slot. `held_elsewhere` is called on it outside `assert`: pytest's rewriting of an assert keeps what
    it evaluates, a reference more."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = [{"type": "message"}]


def test_a_list_only_its_holder_holds_is_not_held_elsewhere() -> None:
    found = held_elsewhere(Holder().items)
    assert found is False
    holder = Holder()
    for _ in range(3):  # the probe leaves no reference behind
        found = held_elsewhere(holder.items)
        assert found is False


def test_every_other_kind_of_holder_is_seen_and_its_release_too() -> None:
    holder = Holder()
    local = holder.items
    found = held_elsewhere(holder.items)
    assert found is True
    del local
    found = held_elsewhere(holder.items)
    assert found is False

    kept_in: list[Any] = [holder.items]
    found = held_elsewhere(holder.items)
    assert found is True
    kept_in.clear()
    found = held_elsewhere(holder.items)
    assert found is False

    def closure(items: list[Any] = holder.items) -> int:
        return len(items)

    found = held_elsewhere(holder.items)
    assert found is True
    del closure
    found = held_elsewhere(holder.items)
    assert found is False


def test_a_suspended_generator_or_coroutine_holding_the_list_is_seen() -> None:
    holder = Holder()

    def reader(items: list[Any]) -> Iterator[int]:
        yield len(items)
        yield len(items)

    paused = reader(holder.items)
    next(paused)
    found = held_elsewhere(holder.items)
    assert found is True
    paused.close()
    del paused
    found = held_elsewhere(holder.items)
    assert found is False

    async def model_call(items: list[Any]) -> int:
        await asyncio.sleep(0)
        return len(items)

    pending = model_call(holder.items)
    found = held_elsewhere(holder.items)
    assert found is True
    pending.close()
    del pending
    found = held_elsewhere(holder.items)
    assert found is False


def test_the_chat_output_outlives_its_stream_without_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing or collecting the terminal chat's output wrapper leaves the wrapped stream alone; 3.13 reports an
    error of a collected stream's close as an unraisable exception."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # like sys.stdout: flushing it closed raises
    _HideSpinnerOnWrite(stream, Spinner(None)).close()
    stream.write("still open\n")  # closing the wrapper did not close the caller's stream
    wrapper = _HideSpinnerOnWrite(stream, Spinner(None))
    wrapper.write("hello\n")
    stream.flush()
    assert stream.buffer.getvalue() == b"still open\nhello\n"
    stream.close()
    wrapper.close()  # raised ValueError: I/O operation on closed file
    other = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    collected = _HideSpinnerOnWrite(other, Spinner(None))
    other.close()
    del collected
    gc.collect()
    assert unraisable == []
