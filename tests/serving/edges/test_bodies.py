"""Hostile JSON bodies against a real server per store: deep, wide, many keys, long strings, with and without text
that is refused (a lone surrogate). Each answers in time with a 4xx or a turn (never a 5xx), while /healthz keeps
answering and the worker's peak memory stays bounded (measure.py)."""

from __future__ import annotations

import json
import uuid

import httpx
from hypothesis import example, given
from hypothesis import strategies as st

from edges.measure import REQUEST_BOUND_S, hostile
from edges.strategies import (
    EDGE_SETTINGS,
    MAX_BODY_BYTES,
    deep_body,
    long_string_body,
    many_keys_body,
    wide_body,
)
from serving_support import Server
from test_serving_edges import JSON_TYPE


def post(server: Server, store: str, shape: str, chat: str, body: bytes) -> httpx.Response:
    def send() -> httpx.Response:
        return httpx.post(f"{server.url}/chats/{chat}/messages", content=body, headers=JSON_TYPE,
                          timeout=REQUEST_BOUND_S)

    return hostile(server, store, shape, send, describe)


def describe(response: httpx.Response) -> str:
    if response.status_code == 200:
        return "200"
    return f"{response.status_code} {response.json()['error']['type']}"


def check_answer(response: httpx.Response, body: bytes, lone: bool, nesting: int = 0) -> None:
    """Too large: 413. Refused text: 422 invalid_request. Else whatever the route makes of it, but never a 5xx.

    A body nested past the JSON parser's depth limit (~1,000) cannot be walked for refused text: the route refuses
    it as a body that does not parse (FastAPI's 400 `http_error`, "There was an error parsing the body"). The limit
    is the server's recursion limit less the frames below the parser, while this process parses under Hypothesis,
    which raises its own limit: from half the server's limit on (`UNSURE_NESTING`) either refusal is right."""
    if len(body) > MAX_BODY_BYTES:
        assert response.status_code == 413, response.text[:500]
    elif lone and parses(body):
        if nesting >= UNSURE_NESTING and response.status_code == 400:
            assert response.json()["error"]["type"] == "http_error", response.text[:500]
        else:
            assert response.status_code == 422, response.text[:500]
            assert response.json()["error"]["type"] == "invalid_request"
    assert response.status_code < 500, response.text[:500]


SERVER_RECURSION_LIMIT = 1000
"""CPython's default, which `agency-swarm serve` keeps."""
UNSURE_NESTING = SERVER_RECURSION_LIMIT // 2


def parses(body: bytes) -> bool:
    try:
        json.loads(body)
    except RecursionError:
        return False
    except ValueError:
        return True  # a lone surrogate as raw bytes: refused as bytes that are not UTF-8, before any parse
    return True


def chat_id(prefix: str, shape: str) -> str:
    return f"{prefix}{shape}-{uuid.uuid4().hex[:8]}"


@EDGE_SETTINGS
@given(depth=st.integers(1, 150_000), objects=st.booleans(), lone=st.booleans())
@example(depth=150_000, objects=False, lone=True)
@example(depth=150_000, objects=True, lone=False)
@example(depth=1277, objects=True, lone=True)  # parses under Hypothesis' raised limit, not in the server
def test_deep_bodies(edge_server: tuple[str, Server], edge_prefix: str, depth: int, objects: bool, lone: bool) -> None:
    store, server = edge_server
    body = deep_body(depth, objects, lone)
    check_answer(post(server, store, "deep JSON", chat_id(edge_prefix, "deep"), body), body, lone, nesting=depth)


@EDGE_SETTINGS
@given(depth=st.integers(0, 3), zeros=st.integers(0, 500_000), lone=st.booleans())
@example(depth=3, zeros=500_000, lone=True)
@example(depth=0, zeros=500_000, lone=False)
def test_wide_bodies(edge_server: tuple[str, Server], edge_prefix: str, depth: int, zeros: int, lone: bool) -> None:
    store, server = edge_server
    body = wide_body(depth, zeros, lone)
    check_answer(post(server, store, "wide JSON", chat_id(edge_prefix, "wide"), body), body, lone)


@EDGE_SETTINGS
@given(count=st.integers(1, 60_000), lone=st.booleans())
@example(count=60_000, lone=True)  # ~0.9 MB: just under the limit, walked whole
@example(count=60_000, lone=False)
@example(count=80_000, lone=True)  # over the limit: 413 before it is parsed
def test_many_small_keys(edge_server: tuple[str, Server], edge_prefix: str, count: int, lone: bool) -> None:
    store, server = edge_server
    body = many_keys_body(count, lone)
    check_answer(post(server, store, "many small keys", chat_id(edge_prefix, "keys"), body), body, lone)


@EDGE_SETTINGS
@given(
    length=st.integers(0, 300_000), character=st.sampled_from(["a", "\u00e9", "\u65e5", "\U0001f600"]),
    lone=st.booleans(), escaped=st.booleans(),
)
@example(length=300_000, character="a", lone=False, escaped=True)  # a turn of a 300 KB message: stored, answered
@example(length=200_000, character="\u65e5", lone=True, escaped=False)
def test_long_strings(
    edge_server: tuple[str, Server], edge_prefix: str, length: int, character: str, lone: bool, escaped: bool
) -> None:
    store, server = edge_server
    body = long_string_body(length, character, lone, escaped)
    check_answer(post(server, store, "long string", chat_id(edge_prefix, "long"), body), body, lone)
