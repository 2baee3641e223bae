"""The serving layer's edges: a hostile body under the size limit (checked in linear time and memory, off the event
loop), and chat ids that are not UTF-8 once percent-decoded. (/healthz and writes: test_serving_health.py.)"""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agency_swarm import MemoryThreadStore
from agency_swarm.serving import create_app
from agency_swarm.serving._guard import OFF_LOOP_BYTES
from agency_swarm.serving._text import first_lone_surrogate, text_problems
from serving_app import build_agency
from serving_support import Server, start_server

JSON_TYPE = {"content-type": "application/json"}
PEAK_RSS_GROWTH_BOUND_KIB = 200 * 1024
"""What one hostile body may add to a worker's peak memory (the body itself is at most 1 MiB)."""


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


def nested_zeros(depth: int, zeros: int, *, lone: bool) -> bytes:
    """`{"message": ..., "x": [[[...0,0,0...]]]}`: `depth` arrays around `zeros` zeros (`lone`: a lone surrogate in
    the message)."""
    message = b'"\\ud800"' if lone else b'"hi"'
    return b'{"message":' + message + b',"x":' + b"[" * depth + b",".join([b"0"] * zeros) + b"]" * depth + b"}"


# -- a real server gets hostile bodies: /healthz keeps answering, memory stays bounded -----------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    started = start_server(workers=1, store="memory")
    yield started
    started.stop()


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


HOSTILE = [
    nested_zeros(600, 300_000, lone=True),  # 601 KB: took 18 s and 1.6 GB of one worker before
    nested_zeros(900, 500_000, lone=True),  # 1 MB: 59 s and 3.6 GB before
    nested_zeros(900, 500_000, lone=False),  # the same without refused text: the route's own 422
]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
async def test_a_hostile_body_neither_freezes_the_worker_nor_takes_its_memory(server: Server) -> None:
    (pid,) = server.worker_pids
    before = peak_rss_kib(pid)
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as client, httpx.AsyncClient(
        base_url=server.url
    ) as prober:
        for body in HOSTILE:
            assert len(body) < 1024 * 1024  # under the size limit: the guard reads it whole
            posted = asyncio.create_task(client.post("/chats/hostile/messages", content=body, headers=JSON_TYPE))
            probes = 0
            while probes == 0 or not posted.done():  # /healthz, again and again, while the body is being checked
                health = await prober.get("/healthz", timeout=1.0)  # a stalled event loop times this out
                assert health.status_code == 200
                probes += 1
            response = await posted
            assert response.status_code == 422, response.text
            assert response.json()["error"]["type"] == "invalid_request"
    assert peak_rss_kib(pid) - before < PEAK_RSS_GROWTH_BOUND_KIB


# -- the checker itself: the first problem's path, linear memory, any depth -----------------------------------------


def reference_location(value: Any, path: list[str | int]) -> list[str | int] | None:
    """The obvious recursive search, in document order: what the checker must find (shallow values only)."""
    if isinstance(value, str):
        return path if any("\ud800" <= char <= "\udfff" for char in value) else None
    if isinstance(value, dict):
        if any(any("\ud800" <= char <= "\udfff" for char in key) for key in value):
            return path
        children: Any = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return None
    for key, child in children:
        found = reference_location(child, [*path, key])
        if found is not None:
            return found
    return None


ANY_CHARACTER = st.characters(exclude_categories=())  # lone surrogates included
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(ANY_CHARACTER, max_size=8)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(ANY_CHARACTER, max_size=4), inner, max_size=6),
    max_leaves=60,
)


def deep_and_wide(depth: int, width: int, leaf: Any, lone_at: int | None, as_objects: bool) -> tuple[Any, Any]:
    """`depth` lists (or one-key objects) around `width` leaves, one of them (`lone_at`) refused text; and the path
    the checker must report (None without refused text)."""
    wide: list[Any] = [leaf] * width
    path: list[str | int] | None = None
    if lone_at is not None and width:
        wide[lone_at % width] = "x\udc00"
        path = [lone_at % width]
    value: Any = wide
    for _ in range(depth):
        value = {"k": value} if as_objects else [value]
        if path is not None:
            path.insert(0, "k" if as_objects else 0)
    return value, (None if path is None else ["body", "x", *path])


HOSTILE_VALUES = st.builds(
    deep_and_wide, st.integers(0, 300), st.integers(0, 3000), st.sampled_from([0, "", "ab", [], {}, 1.5, {"k": 0}]),
    st.none() | st.integers(0, 3000), st.booleans(),
)


def many_keys(count: int, lone: bool) -> dict[str, Any]:
    keys = {f"k{index}": index for index in range(count)}
    if lone:
        keys["\udfff"] = 0
    return keys


def checked_in_bounded_memory(body: bytes) -> list[dict[str, Any]]:
    """text_problems(body), failing when it allocates more than a small multiple of the body (the parsed body)."""
    tracemalloc.start()
    try:
        problems = text_problems(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 40 * len(body) + 256 * 1024, (peak, len(body))
    return problems


def location(problems: list[dict[str, Any]]) -> list[str | int] | None:
    return problems[0]["loc"] if problems else None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(VALUES)
def test_the_checker_finds_the_first_lone_surrogate_in_document_order(value: Any) -> None:
    body = json.dumps({"message": "hi", "x": value}).encode()  # ensure_ascii: a surrogate is a \\udXXX escape
    expected = reference_location(json.loads(body), ["body"])
    problems = checked_in_bounded_memory(body)
    assert location(problems) == expected
    assert len(problems) == (expected is not None)  # the first problem only


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(HOSTILE_VALUES)
@example(deep_and_wide(300, 3000, 0, 2999, False))  # a path copy per value (before): ~100 times the body in memory
@example(deep_and_wide(300, 3000, {"k": 0}, None, True))
def test_deep_and_wide_bodies_are_checked_in_memory_linear_in_their_size(case: tuple[Any, Any]) -> None:
    value, expected = case
    body = json.dumps({"message": "hi", "x": value}).encode()
    assert location(checked_in_bounded_memory(body)) == expected


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(1, 30_000), st.booleans(), st.integers(0, 200_000))
def test_many_keys_and_long_strings_are_checked_in_linear_memory(keys: int, lone: bool, length: int) -> None:
    with_keys = json.dumps({"message": "\ud800", "x": many_keys(keys, lone)}).encode()
    assert location(checked_in_bounded_memory(with_keys)) == ["body", "message"]
    long_text = json.dumps({"message": "a" * length + ("\udbff" if lone else "") + "b" * length}).encode()
    assert location(checked_in_bounded_memory(long_text)) == (["body", "message"] if lone else None)


def test_the_walk_has_no_depth_limit() -> None:
    value: Any = ["\ud800"]
    for _ in range(100_000):  # far past Python's recursion limit
        value = [value]
    assert first_lone_surrogate(value) == ["body", *[0] * 100_001]
    assert first_lone_surrogate([[[]] * 1000, {"a": [{"b": "c"}], "\udc00": 1}]) == ["body", 1]


async def test_a_large_body_is_checked_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    from agency_swarm.serving import _guard

    threads: list[threading.Thread] = []
    check = _guard.checked_body

    def recorded(*arguments: Any) -> Any:
        threads.append(threading.current_thread())
        return check(*arguments)

    monkeypatch.setattr(_guard, "checked_body", recorded)
    app = create_app(build_agency, store=MemoryThreadStore())
    async with client_for(app) as client:
        small = await client.post("/chats/c/messages", content=nested_zeros(2, 10, lone=True), headers=JSON_TYPE)
        large_body = nested_zeros(2, OFF_LOOP_BYTES, lone=True)
        large = await client.post("/chats/c/messages", content=large_body, headers=JSON_TYPE)
    assert (small.status_code, large.status_code) == (422, 422)
    assert threads[0] is threading.current_thread()  # a small body: checked at once, a thread would cost more
    assert threads[1] is not threading.current_thread()


# -- chat ids: UTF-8 once percent-decoded ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/chats/%FF/messages"), ("POST", "/chats/%FE/messages:stream"), ("POST", "/chats/a%C3/resume"),
        ("GET", "/chats/%FF/threads"), ("DELETE", "/chats/%ED%A0%80"), ("GET", "/chats/%C0%AF/threads"),
    ],
)
async def test_a_chat_id_that_is_not_utf8_once_decoded_is_refused(method: str, path: str) -> None:
    store = MemoryThreadStore()
    app = create_app(build_agency, store=store)
    async with client_for(app) as client:
        response = await client.request(method, path, json={"message": "hi"} if method == "POST" else None)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_chat_id"
        assert "not UTF-8 once percent-decoded" in error["message"]
        other = await client.post("/chats/%FE/messages", json={"message": "hi"})  # was the same chat as %FF
        assert other.status_code == 400
    assert await store.list_chats() == []


async def test_a_percent_encoded_utf8_chat_id_is_its_text() -> None:
    store = MemoryThreadStore()
    app = create_app(build_agency, store=store)
    async with client_for(app) as client:
        assert (await client.post("/chats/caf%C3%A9/messages", json={"message": "hi"})).status_code == 200
        threads = await client.get("/chats/caf%C3%A9/threads?marks=false&note=%FF")  # the query is not the path
        assert threads.json()["chat_id"] == "caf\u00e9"
    assert await store.list_chats() == ["caf\u00e9"]
