"""Attachments in every store: bytes stored once and before any reference, the same model input after a restart,
deletes that free what no chat holds, and generated messages that round-trip unchanged."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agency_swarm import Agency, Agent, MemoryThreadStore, StoreError, ThreadStore, file_part, image_part
from agency_swarm._attachments._media import sniff
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message
from test_store_contract import BACKENDS, POSTGRES_URL, Backend, _postgres_reachable

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
DIGEST = hashlib.sha256(PNG).hexdigest()
PNG_ID = "att_" + DIGEST[:12]


@pytest.fixture(params=list(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Backend]:
    name: str = request.param
    if name == "postgres" and not await _postgres_reachable():
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {POSTGRES_URL} is unreachable in CI")
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is unreachable")
    return name, BACKENDS[name](tmp_path)


def team(store: ThreadStore, seen: dict[str, list[ModelCall]], image_id: str = PNG_ID) -> Agency:
    """CEO passes the image it was sent on to Dev; each model records its calls in `seen`."""

    def ceo(call: ModelCall) -> Step:
        seen.setdefault("CEO", []).append(call)
        if call.tool_outputs:
            return "done"
        return send_message("Dev", "Look.", None, [image_id]) if call.last_user_message != "again" else "again?"

    def dev(call: ModelCall) -> Step:
        seen.setdefault("Dev", []).append(call)
        return "a dot"

    first = Agent(name="CEO", model=ScriptedModel(ceo))
    return Agency([first, [first, Agent(name="Dev", model=ScriptedModel(dev))]], thread_store=store)


def ask() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "Look"}, image_part(PNG),
                                         file_part(PDF, filename="r.pdf")]}]


async def blob_count(name: str, store: Any, tmp_path: Path, digest: str = DIGEST) -> int:
    """How many copies of the PNG's bytes the store keeps (outside the items)."""
    if name in ("memory", "callbacks"):
        return int(digest in store._blobs) if name == "memory" else 0
    if name == "file":
        return int((tmp_path / "threads" / "blobs" / digest).exists())
    if name == "sqlite":
        with sqlite3.connect(tmp_path / "threads.db") as conn:
            found = conn.execute("SELECT count(*) FROM agency_swarm_blobs WHERE digest = ?", (digest,)).fetchone()
            return int(found[0])
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM agency_swarm_blobs WHERE digest = $1", digest))
    finally:
        await conn.close()


async def test_a_restart_gives_every_model_exactly_the_input_it_had(backend: tuple[str, Backend]) -> None:
    _, opened = backend
    chat_id = f"att-{uuid.uuid4().hex[:10]}"
    before: dict[str, list[ModelCall]] = {}
    agency = team(await opened.open(), before)
    assert (await agency.get_response(ask(), chat_id=chat_id)).final_output == "done"
    await agency.aclose()

    after: dict[str, list[ModelCall]] = {}
    again = team(await opened.open(), after)
    await again.get_response("again", chat_id=chat_id)
    assert after["CEO"][0].input[:3] == before["CEO"][-1].input  # every item the CEO's model had, and no other
    assert before["Dev"][0].input[0]["content"][1]["image_url"].startswith("data:image/png;base64,")
    threads = await again.get_threads(chat_id)
    assert threads["CEO->Dev"][0]["content"][1]["attachment"]["sha256"] == DIGEST
    if opened.can_delete:
        await again.thread_manager.delete_chat(chat_id)
    await again.aclose()


async def test_bytes_are_stored_once_and_a_delete_frees_only_what_no_chat_holds(
    backend: tuple[str, Backend], tmp_path: Path
) -> None:
    name, opened = backend
    if not opened.can_delete:
        pytest.skip("the load/save callbacks keep the bytes inline in what they save")
    store = await opened.open()
    seen: dict[str, list[ModelCall]] = {}
    # bytes of this test alone: a shared database may hold the fixed PNG for chats of other tests or runs
    image = PNG + uuid.uuid4().bytes
    digest = hashlib.sha256(image).hexdigest()
    message = [{"role": "user", "content": [{"type": "input_text", "text": "Look"}, image_part(image)]}]
    agency = team(store, seen, "att_" + digest[:12])
    first, second = f"att-{uuid.uuid4().hex[:10]}", f"att-{uuid.uuid4().hex[:10]}"
    await agency.get_response(message, chat_id=first)  # sent once, passed on to Dev: one copy
    await agency.get_response(message, chat_id=second)  # the same image in another chat: still one copy
    assert await blob_count(name, store, tmp_path, digest) == 1
    assert any("input_image" in repr(call.input) for call in seen["Dev"])  # passed on, by reference
    await agency.thread_manager.delete_chat(first)
    assert await blob_count(name, store, tmp_path, digest) == 1  # the second chat holds it
    assert set(await store.load_attachments(second, [digest])) == {digest}  # type: ignore[attr-defined]
    assert await store.load_attachments(first, [digest]) == {}  # type: ignore[attr-defined]
    await agency.thread_manager.delete_chat(second)
    assert await blob_count(name, store, tmp_path, digest) == 0
    await agency.aclose()


class FailingBlobs(MemoryThreadStore):
    async def put_attachments(self, chat_id: str, blobs: Mapping[str, bytes]) -> None:
        raise StoreError("disk full")


async def test_a_reference_is_never_stored_before_its_bytes() -> None:
    store = FailingBlobs()
    agency = team(store, {})
    with pytest.raises(StoreError, match="disk full"):
        await agency.get_response(ask(), chat_id="c")
    assert await store.load("c") == {}
    assert agency.thread_manager.attachments._base64 == {}


# -- generated messages round-trip through every store -------------------------------------------------------------

PNG_HEAD = PNG[:16]
binaries = st.binary(min_size=1, max_size=64)
parts = st.one_of(
    st.text(max_size=30).map(lambda text: {"type": "input_text", "text": text}),
    st.tuples(binaries, st.sampled_from(["auto", "low", "high"])).map(
        lambda pair: image_part(PNG_HEAD + pair[0], detail=pair[1])),  # type: ignore[arg-type]
    binaries.map(lambda body: file_part(b"%PDF-1.7\n" + body, filename="doc.pdf")),
    # a text file's bytes that do not begin like an image or a PDF (those must declare their own type)
    binaries.filter(lambda body: sniff(body) is None).map(
        lambda body: {"type": "input_file", "file_data": base64.b64encode(body).decode(), "filename": "notes.txt"}),
    st.sampled_from([{"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
                     {"type": "input_image", "file_id": "file-abc", "detail": "auto"},
                     {"type": "input_file", "file_url": "https://example.com/b.pdf"},
                     {"type": "input_file", "file_id": "file-xyz", "filename": "x.pdf"}]),
)
messages = st.lists(parts, min_size=1, max_size=6)


async def _round_trip(name: str, directory: Path, content: list[dict[str, Any]]) -> None:
    opened = BACKENDS[name](directory)
    chat_id = f"gen-{uuid.uuid4().hex[:10]}"
    seen: list[ModelCall] = []

    def agency(store: ThreadStore) -> Agency:
        return Agency(Agent(name="A", model=ScriptedModel(lambda call: (seen.append(call), "ok")[1])),
                      thread_store=store)

    first = agency(await opened.open())
    result = await first.get_response([{"role": "user", "content": content}], chat_id=chat_id)
    stored = result.new_items
    await first.aclose()
    second = agency(await opened.open())
    await second.get_response("next", chat_id=chat_id)
    assert (await second.get_threads(chat_id))["user->A"][:2] == stored
    assert seen[1].input[0] == seen[0].input[0] == {"role": "user", "content": [
        {**part, "detail": part.get("detail", "auto")} if part["type"] == "input_image" else part for part in content
    ]}
    if opened.can_delete:
        await second.thread_manager.delete_chat(chat_id)
    await second.aclose()


@pytest.mark.parametrize("name", list(BACKENDS))
def test_generated_messages_round_trip_through_every_store_unchanged(name: str) -> None:
    if name == "postgres" and not asyncio.run(_postgres_reachable()):
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is unreachable")

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(content=messages)
    def round_trip(content: list[dict[str, Any]]) -> None:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_round_trip(name, Path(directory), content))

    round_trip()
