"""`agency-swarm serve --durable`, two real workers on PostgreSQL: Idempotency-Key, background turns, turn status,
and event streams a client picks up again with Last-Event-ID; and Idempotency-Key without durable mode."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from durable_app import make_side_effects_table
from postgres_support import require_postgres
from serving_app import long_text
from serving_support import Server, _in_own_loop, peak_rss_kib, stalled_reader, start_serve

WRITE_TIMEOUT_S = 0.5  # the long-answer server's --stream-write-timeout (30 s by default)
BOUND_S = 60.0  # a safety net for reads and waits, never a pause
STALLED_READERS = 12
LONG = "long 2048 40"
"""A 2 MiB answer: ~9 MB of durable events (text deltas merged per batch, the answer's message and the agent's end,
then `done` with the result), of which the kernel buffers between the server and a reader that reads nothing take
~3 MB."""
PEAK_RSS_GROWTH_BOUND_KIB = 50 * 1024
"""What the stalled readers of the finished turn's events may add to the worker's peak memory (~23 MiB measured
here): one reader's reading at a time (the stored events, the result), and its buffer (256 KiB) and one 64 KiB
piece in uvicorn's until it is dropped. Before, each stalled reader held every event the kernel did not take for as
long as its socket stayed open (~6 MiB each: 89 MiB for these 12) and was never dropped."""


@pytest.fixture(scope="module")
def long_durable_server() -> Iterator[Server]:
    """One durable worker answering `long KB WORD` (serving_app), its readers dropped after WRITE_TIMEOUT_S."""
    url = require_postgres()
    server = start_serve([
        "--factory", "serving_app:build_long_agency", "--store", url, "--durable",
        "--stream-write-timeout", str(WRITE_TIMEOUT_S),
    ])
    yield server
    server.stop()


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


def dropped(server: Server, chat_id: str) -> None:
    """Returns once the server logged (again) that a reader of the chat's stream took nothing and was dropped."""
    while True:
        line = server.lines.get(timeout=BOUND_S)  # queue.Empty: a reader never dropped
        assert line is not None, "the server stopped"
        if f"Chat {chat_id!r}: a stream's reader took nothing for {WRITE_TIMEOUT_S:g} s and was dropped" in line:
            return


def cut_events(body: bytes) -> list[dict[str, Any]]:
    """The whole SSE blocks of a body cut short."""
    text = body.decode(errors="ignore")
    return list(sse(iter(text[:text.rfind("\n\n") + 1].split("\n"))))


def picked_up_after_cut(server: Server, chat_id: str, response: http.client.HTTPResponse) -> None:
    """What a dropped reader was sent ends unfinished; it picks the turn up with Last-Event-ID, to its `done`."""
    with pytest.raises(http.client.IncompleteRead) as cut:  # the server closes it once its buffer is read
        response.read()
    got = cut_events(cut.value.partial)
    assert got
    assert all(block["event"] != "done" for block in got)
    turn = f"{server.url}/chats/{chat_id}/turns/{response.headers['turn-id']}"
    last = {"Last-Event-ID": got[-1]["id"]}
    with httpx.stream("GET", f"{turn}/events", headers=last, timeout=BOUND_S) as rest:
        picked_up = list(sse(rest.iter_lines()))
    ids = [int(block["id"]) for block in got + picked_up if "id" in block]
    assert ids == list(range(len(ids)))  # every event once, in order
    assert picked_up[-1]["event"] == "done"
    assert picked_up[-1]["data"]["result"]["final_output"] == long_text(LONG)
    ended = httpx.get(turn, timeout=BOUND_S).json()
    assert (ended["status"], ended["result"]["final_output"]) == ("done", long_text(LONG))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
def test_durable_streams_readers_that_stop_reading_are_dropped_holding_little(long_durable_server: Server) -> None:
    server = long_durable_server
    (pid,) = server.worker_pids
    chat_id = chat()
    stalled = [stalled_reader(server.url, f"/chats/{chat_id}/messages:stream", BOUND_S, message=LONG)]
    events = f"/chats/{chat_id}/turns/{stalled[0][1].headers['turn-id']}/events"
    try:
        # the chat's turns run in order: this returns once the stalled reader's turn has ended
        later = httpx.post(f"{server.url}/chats/{chat_id}/messages", json={"message": "long 1 5"}, timeout=BOUND_S)
        assert later.status_code == 200
        dropped(server, chat_id)
        before = peak_rss_kib(pid)
        for _ in range(STALLED_READERS):  # each reads the whole turn's events, stored, as fast as the server can
            stalled.append(stalled_reader(server.url, events, BOUND_S))
            dropped(server, chat_id)
        growth = peak_rss_kib(pid) - before
        assert growth < PEAK_RSS_GROWTH_BOUND_KIB, f"peak RSS grew by {growth // 1024} MiB"
        for _, response in stalled:
            picked_up_after_cut(server, chat_id, response)
    finally:
        for reader, _ in stalled:
            reader.close()
