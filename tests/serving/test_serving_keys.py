"""Idempotency-Key over HTTP: one turn per key and chat, whatever other requests came between, on every store."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agency_swarm import FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm.serving import create_app
from postgres_support import require_postgres
from serving_app import build_agency
from serving_support import chat_prefix, delete_chats, user_messages_in_order

STORES = ["memory", "file", "sqlite", "postgresql"]
chat_numbers = itertools.count()


@dataclass
class Served:
    """An app on one store, driven from its own event loop (kept across hypothesis' examples: one app per store)."""

    runner: asyncio.Runner
    app: Any
    prefix: str

    def run(self, requests: list[tuple[str | None, str, bool]]) -> tuple[list[dict[str, Any]], list[str]]:
        chat_id = f"{self.prefix}{next(chat_numbers)}"
        results: list[dict[str, Any]] = self.runner.run(post_all(self.app, chat_id, requests))
        threads = self.runner.run(read_threads(self.app, chat_id))
        return results, user_messages_in_order(threads)


def open_store(kind: str, directory: Path) -> ThreadStore:
    if kind == "memory":
        return MemoryThreadStore()
    if kind == "file":
        return FileThreadStore(directory / "chats")
    if kind == "sqlite":
        return SQLThreadStore(f"sqlite:///{directory / 'chats.db'}")
    return SQLThreadStore(require_postgres())


@pytest.fixture(params=STORES)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    kind = request.param
    prefix = chat_prefix("keys")
    runner = asyncio.Runner()
    app = runner.run(built_app(kind, tmp_path))
    try:
        yield Served(runner, app, prefix)
    finally:
        runner.run(app.state.agency.aclose())
        runner.close()
        if kind == "postgresql":
            delete_chats(prefix)


async def built_app(kind: str, directory: Path) -> Any:
    return create_app(build_agency, store=open_store(kind, directory))  # in the runner's loop: SQL pools bind to it


async def post_all(app: Any, chat_id: str, requests: list[tuple[str | None, str, bool]]) -> list[dict[str, Any]]:
    """Each request in turn: (Idempotency-Key or None, message, streamed?); each one's RunResult as JSON."""
    results = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        for key, message, streamed in requests:
            headers = {} if key is None else {"Idempotency-Key": key}
            path = f"/chats/{chat_id}/messages{':stream' if streamed else ''}"
            response = await client.post(path, json={"message": message}, headers=headers)
            assert response.status_code == 200, response.text
            results.append(last_result(response.text) if streamed else response.json())
    return results


def last_result(body: str) -> dict[str, Any]:
    """The result in a stream's `done` event, which must be its last."""
    events = [json.loads(line.removeprefix("data: ")) for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "done", events[-1]
    result: dict[str, Any] = events[-1]["result"]
    return result


async def read_threads(app: Any, chat_id: str) -> dict[str, list[dict[str, Any]]]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        response = await client.get(f"/chats/{chat_id}/threads")
        assert response.status_code == 200, response.text
        threads: dict[str, list[dict[str, Any]]] = response.json()["threads"]
        return threads


def check_one_turn_per_key(
    requests: list[tuple[str | None, str, bool]], results: list[dict[str, Any]], stored: list[str]
) -> None:
    """Each key is one stored user message (its first request's), each request without a key another; every
    response to a key is the same turn's result."""
    expected, first_result = [], {}
    for (key, message, _), result in zip(requests, results, strict=True):
        if key is None:
            expected.append(message)
            continue
        if key not in first_result:
            first_result[key] = result
            expected.append(message)
        assert result["final_output"] == first_result[key]["final_output"], key
        assert result["new_items"] == first_result[key]["new_items"], key
    assert stored == expected


KEYS = st.sampled_from(["K1", "K2", "K3"])
REQUESTS = st.lists(
    st.tuples(st.none() | KEYS, st.sampled_from(["one", "two", "three", "four"]), st.booleans()),
    min_size=1, max_size=8,
).map(lambda requests: [(key, key or message, streamed) for key, message, streamed in requests])
"""(key or none, message, streamed): a key always carries the same message, as a client's retry does."""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=REQUESTS)
def test_a_key_is_one_turn_whatever_came_between(served: Served, requests: list[tuple[str | None, str, bool]]) -> None:
    results, stored = served.run(requests)
    check_one_turn_per_key(requests, results, stored)


def test_a_key_retried_after_another_keyed_turn_does_not_run_again(served: Served) -> None:
    """As observed on a real server: K1 "one", K1, K2 "two", K1, no key "three", K2 stored one, two, one, three,
    two: a retry found its key only when its turn was the chat's last with a key."""
    requests: list[tuple[str | None, str, bool]] = [
        ("K1", "one", False), ("K1", "one", False), ("K2", "two", False), ("K1", "one", False),
        (None, "three", False), ("K2", "two", False),
    ]
    results, stored = served.run(requests)
    assert stored == ["one", "two", "three"]
    check_one_turn_per_key(requests, results, stored)


async def post_at_once(app: Any, chat_id: str, requests: list[tuple[str | None, str, bool]]) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(post_all(app, chat_id, [request]) for request in requests)))


def test_a_key_sent_again_while_its_turn_runs_gets_that_turn(served: Served) -> None:
    """Retries that come while the first is running wait for the chat, then find the turn and return its result."""
    requests: list[tuple[str | None, str, bool]] = [
        ("K1", "K1", False), ("K1", "K1", True), ("K2", "K2", True), (None, "plain", False), ("K1", "K1", False),
    ]
    chat_id = f"{served.prefix}{next(chat_numbers)}"
    results = [result for [result] in served.runner.run(post_at_once(served.app, chat_id, requests))]
    stored = user_messages_in_order(served.runner.run(read_threads(served.app, chat_id)))
    assert sorted(stored) == ["K1", "K2", "plain"]
    answers = {result["final_output"] for (key, _, _), result in zip(requests, results, strict=True) if key == "K1"}
    assert len(answers) == 1
