"""`agency-swarm serve --durable`, two real workers on PostgreSQL: Idempotency-Key, background turns, turn status,
and event streams a client picks up again with Last-Event-ID; and Idempotency-Key without durable mode."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from durable_app import make_side_effects_table
from postgres_support import require_postgres
from serving_support import Server, _in_own_loop, start_serve


@pytest.fixture(scope="module")
def durable_server() -> Iterator[Server]:
    url = require_postgres()
    _in_own_loop(make_side_effects_table())
    server = start_serve(["--factory", "durable_app:build_agency", "--store", url, "--durable"], workers=2)
    yield server
    server.stop()


def chat() -> str:
    return f"dur-{uuid.uuid4().hex[:12]}"


def sse_line(block: dict[str, Any], line: str) -> dict[str, Any] | None:
    """Reads one SSE line into `block`; at a block's end returns it whole ({"id", "event", "data"}) and empties
    `block`. Comments are skipped; a block cut short is never returned."""
    if not line:
        whole = dict(block) if block else None
        block.clear()
        return whole
    if not line.startswith(":"):
        name, _, value = line.partition(": ")
        block[name] = json.loads(value) if name == "data" else value
    return None


def sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Each SSE block as {"id", "event", "data"} (comments skipped)."""
    block: dict[str, Any] = {}
    for line in lines:
        if (whole := sse_line(block, line)) is not None:
            yield whole


def users(server: Server, chat_id: str) -> list[str]:
    threads = httpx.get(f"{server.url}/chats/{chat_id}/threads", timeout=30).json()["threads"]
    return [item["content"] for item in threads["user->A"] if item.get("role") == "user" and "type" not in item]


def test_a_retried_post_with_the_same_idempotency_key_runs_one_turn(durable_server: Server) -> None:
    chat_id = chat()
    url = f"{durable_server.url}/chats/{chat_id}/messages"
    first = httpx.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k-1"}, timeout=60)
    again = httpx.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k-1"}, timeout=60)
    assert first.status_code == again.status_code == 200
    assert first.headers["turn-id"] == again.headers["turn-id"]
    assert first.json()["final_output"] == again.json()["final_output"] == "done: hi"
    assert users(durable_server, chat_id) == ["hi"]


def test_a_background_turn_answers_202_and_is_read_by_its_id(durable_server: Server) -> None:
    chat_id = chat()
    accepted = httpx.post(
        f"{durable_server.url}/chats/{chat_id}/messages", json={"message": "later", "background": True}, timeout=60
    )
    assert accepted.status_code == 202
    body = accepted.json()
    assert body["status"] in ("queued", "running", "done")
    assert accepted.headers["location"] == f"/chats/{chat_id}/turns/{body['turn_id']}"
    with httpx.stream("GET", f"{durable_server.url}{accepted.headers['location']}/events", timeout=60) as events:
        last = list(sse(events.iter_lines()))[-1]
    assert last["event"] == "done"
    turn = httpx.get(f"{durable_server.url}{accepted.headers['location']}", timeout=60).json()
    assert turn["status"] == "done"
    assert turn["result"]["final_output"] == "done: later"
    missing = httpx.get(f"{durable_server.url}/chats/{chat()}/turns/{body['turn_id']}", timeout=60)
    assert missing.status_code == 404


@pytest.mark.parametrize("odd", ["a?b", "%41", "caf\u00e9", "\u65e5\u672c", "a b#c"])
def test_the_location_of_a_background_turn_is_ascii_and_names_its_turn(durable_server: Server, odd: str) -> None:
    chat_id = f"{chat()}-{odd}"
    url = f"{durable_server.url}/chats/{quote(chat_id, safe='')}/messages"
    key = {"Idempotency-Key": f"loc-{uuid.uuid4().hex}"}
    accepted = httpx.post(url, json={"message": "where", "background": True}, headers=key, timeout=60)
    assert accepted.status_code == 202, accepted.text
    location = accepted.headers["location"]
    assert location.isascii()
    assert location == f"/chats/{quote(chat_id, safe='')}/turns/{accepted.json()['turn_id']}"
    assert accepted.headers["turn-id"] == accepted.json()["turn_id"]
    turn = httpx.get(f"{durable_server.url}{location}", timeout=60)
    assert turn.status_code == 200, turn.text
    assert (turn.json()["chat_id"], turn.json()["turn_id"]) == (chat_id, accepted.json()["turn_id"])
    retried = httpx.post(url, json={"message": "where", "background": True}, headers=key, timeout=60)
    assert (retried.status_code, retried.headers["location"]) == (202, location)  # the same turn, and no 500
    with httpx.stream("GET", f"{durable_server.url}{location}/events", timeout=60) as events:
        assert list(sse(events.iter_lines()))[-1]["event"] == "done"
    assert users(durable_server, quote(chat_id, safe="")) == ["where"]


def test_a_cut_stream_is_picked_up_with_last_event_id_every_event_once(durable_server: Server) -> None:
    chat_id = chat()
    with httpx.stream(
        "POST", f"{durable_server.url}/chats/{chat_id}/messages:stream", json={"message": "stream me"}, timeout=60
    ) as response:
        turn_id = response.headers["turn-id"]
        blocks = sse(response.iter_lines())
        seen = [next(blocks), next(blocks)]  # then the client's connection is cut
    assert [block["id"] for block in seen] == ["0", "1"]
    with httpx.stream(
        "GET", f"{durable_server.url}/chats/{chat_id}/turns/{turn_id}/events", headers={"Last-Event-ID": "1"},
        timeout=60,
    ) as response:
        rest = list(sse(response.iter_lines()))
    with httpx.stream("GET", f"{durable_server.url}/chats/{chat_id}/turns/{turn_id}/events", timeout=60) as response:
        every = list(sse(response.iter_lines()))
    assert seen + rest == every
    ids = [block["id"] for block in every if "id" in block]
    assert ids == [str(n) for n in range(len(ids))]
    assert every[-1]["event"] == "done"
    assert every[-1]["data"]["result"]["final_output"] == "done: stream me"


def test_a_durable_resume_with_the_same_key_applies_its_approval_once(durable_server: Server) -> None:
    chat_id = chat()
    paused = httpx.post(f"{durable_server.url}/chats/{chat_id}/messages", json={"message": "ask me"}, timeout=60)
    [waiting] = paused.json()["interruptions"]
    decisions = {"approve": [waiting["call_id"]]}
    url = f"{durable_server.url}/chats/{chat_id}/resume"
    first = httpx.post(url, json=decisions, headers={"Idempotency-Key": "go"}, timeout=60)
    again = httpx.post(url, json=decisions, headers={"Idempotency-Key": "go"}, timeout=60)
    assert first.status_code == again.status_code == 200
    assert first.headers["turn-id"] == again.headers["turn-id"]
    assert first.json()["final_output"] == "done: ask me"
    nothing = httpx.post(url, json={}, timeout=60)
    assert nothing.status_code == 409
    assert nothing.json()["error"]["type"] == "nothing_to_resume"
    threads = f"{durable_server.url}/chats/{chat_id}/threads"
    shown = httpx.get(threads, timeout=60).json()["threads"]["user->A"]
    marked = httpx.get(threads, params={"marks": "true"}, timeout=60).json()["threads"]["user->A"]
    marks = [item for item in marked if str(item.get("type", "")).startswith("agency_swarm.")]
    assert [item["type"] for item in marks] == ["agency_swarm.turn_started", "agency_swarm.awaiting_approval",
                                                "agency_swarm.turn_started", "agency_swarm.approved_run"]
    assert shown == [item for item in marked if item not in marks]  # the marks only when asked


def test_idempotency_key_without_durable_mode_runs_one_turn(tmp_path: Any) -> None:
    server = start_serve(
        ["--factory", "durable_app:build_agency", "--store", f"sqlite:///{tmp_path / 'chats.db'}"], workers=1
    )
    try:
        chat_id = chat()
        url = f"{server.url}/chats/{chat_id}/messages"
        first = httpx.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k-1"}, timeout=60)
        again = httpx.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k-1"}, timeout=60)
        other = httpx.post(url, json={"message": "hi"}, headers={"Idempotency-Key": "k-2"}, timeout=60)
        assert first.json()["final_output"] == again.json()["final_output"] == other.json()["final_output"]
        assert users(server, chat_id) == ["hi", "hi"]
        background = httpx.post(url, json={"message": "hi", "background": True}, timeout=60)
        assert background.status_code == 422  # only durable mode has background turns
    finally:
        server.stop()
