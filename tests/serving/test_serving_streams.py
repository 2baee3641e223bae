"""A streamed turn does not depend on its reader: readers that stop reading are dropped after the write timeout,
hold a bounded number of bytes meanwhile, and hold neither the chat nor the turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agency_swarm import MemoryThreadStore
from agency_swarm.serving import _sse, create_app
from serving_app import build_long_agency, long_text
from serving_support import Server, StalledClient, peak_rss_kib, stalled_reader, start_serve

WRITE_TIMEOUT_S = 0.5  # the server's --stream-write-timeout here (30 s by default)
ANSWER_BOUND_S = 30.0
"""How long a POST to a chat whose reader stalled may take: the stalled turn (~1.5 s here) plus the write timeout.
Before, the stalled reader held the chat as long as its socket was open: this timed out."""
STALLED_READERS = 8
LONG = "long 1024 40"
"""A 1 MiB answer in 25,000 deltas: ~5 MB of events, more than the kernel buffers between the server and a reader
that reads nothing (~3 MB here), with thousands of events left once it is full."""
PEAK_RSS_GROWTH_BOUND_KIB = 100 * 1024
"""What the stalled readers may add to the worker's peak memory (52 MiB measured here): one turn's own working set
at a time (~40 MiB for this answer and its events), each chat's stored answer (1 MiB, in memory), and per stalled
reader its buffer (256 KiB) and one 64 KiB piece in uvicorn's until it is dropped. Before, each stalled turn stayed
alive with its working set as long as its reader's socket was open (~37 MiB each)."""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    started = start_serve([
        "--factory", "serving_app:build_long_agency", "--store", "memory",
        "--stream-write-timeout", str(WRITE_TIMEOUT_S),
    ])
    yield started
    started.stop()


def stored_texts(threads: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each item of the chat's thread as text: a user message's content, an answer's whole text."""
    return [
        item["content"] if item.get("role") == "user" else "".join(part["text"] for part in item["content"])
        for item in threads["user->CEO"]
    ]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
def test_readers_that_stop_reading_hold_neither_the_chat_nor_memory(server: Server) -> None:
    (pid,) = server.worker_pids
    before = peak_rss_kib(pid)
    readers = []
    try:
        with httpx.Client(base_url=server.url, timeout=ANSWER_BOUND_S) as client:
            for number in range(STALLED_READERS):
                chat_id = f"stalled-{number}"
                path = f"/chats/{chat_id}/messages:stream"
                reader, _ = stalled_reader(server.url, path, ANSWER_BOUND_S, message=LONG)
                readers.append(reader)
                # the same chat, while its reader still holds its socket open and reads nothing: answered once the
                # stalled turn has ended (a timeout here fails loudly)
                after = client.post(f"/chats/{chat_id}/messages", json={"message": "long 1 5"})
                assert after.status_code == 200, after.text
                stored = stored_texts(client.get(f"/chats/{chat_id}/threads").json()["threads"])
                assert stored == [LONG, long_text(LONG), "long 1 5", long_text("long 1 5")]  # the stalled turn whole
        growth = peak_rss_kib(pid) - before
        assert growth < PEAK_RSS_GROWTH_BOUND_KIB, f"peak RSS grew by {growth // 1024} MiB"
    finally:
        for reader in readers:
            reader.close()


# -- in-process: a reader whose every write blocks ---------------------------------------------------------------


async def test_a_reader_that_takes_nothing_holds_at_most_its_buffer_and_is_dropped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    held: list[tuple[int, int]] = []  # (bytes held for the reader, the chunk just put) after each put
    put = _sse.Outbox.put

    def recorded(self: _sse.Outbox, chunk: bytes) -> None:
        put(self, chunk)
        held.append((self.size, len(chunk)))

    monkeypatch.setattr(_sse.Outbox, "put", recorded)
    app = create_app(build_long_agency, store=MemoryThreadStore(), stream_write_timeout=0.2)
    client = StalledClient(app, "c", LONG)
    async with asyncio.timeout(ANSWER_BOUND_S):
        await client.run()  # returns once the reader was dropped, its response unfinished
        await app.state.streams.wait()  # the turn went on without it
    assert client.status == 200
    assert client.received == b""
    assert "a stream's reader took nothing for 0.2 s and was dropped; the turn goes on" in caplog.text
    assert max(size for size, _ in held) > _sse.SSE_BUFFER_BYTES // 2  # it did fill up
    assert all(size <= _sse.SSE_BUFFER_BYTES or size == chunk for size, chunk in held)  # never beyond its bound
    threads = await app.state.agency.get_threads("c")
    assert stored_texts(threads) == [LONG, long_text(LONG)]  # stored whole
    await app.state.agency.aclose()
