"""Attachments: what an image costs to store and to carry, on every store.

    .venv/bin/python benchmarks/attachments.py                        # a 5 MB image; every store
    .venv/bin/python benchmarks/attachments.py --stores memory sqlite --image-mb 1 --turns 1 10

(a) Store bytes: a user sends one `--image-mb` image to CEO, who passes it on (by its id) to two agents; then 1, 10
    and 100 (`--turns`) further text turns. A cell is what the store holds for the chat: its items (as JSON) and
    attachment bytes (file store: the files' sizes). The image should count once, whatever the turns or recipients.
(b) Per-turn cost: a chat whose first `--images` turns each sent a `--image-kb` image, against a chat of the same
    number of text turns, on a zero-latency scripted model: the median of `--rounds` further text turns per chat
    (interleaved), and their ratio.
(c) Bytes the model receives per call (its input as JSON) in a chat with `--images` images, one per turn, then two
    text turns: agency_swarm against `agents.Runner` given the same input (`to_input_list()` plus the new message);
    the first, middle and last three calls.
PostgreSQL: AGENCY_SWARM_BENCH_POSTGRES_URL (default: the test database).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agents
import asyncpg  # type: ignore[import-untyped]
from bench_fake_model import FakeModel

from agency_swarm import Agency, Agent, FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore, image_part
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message

POSTGRES_URL = os.environ.get("AGENCY_SWARM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def image(size: int) -> bytes:
    """`size` bytes that are a PNG by their magic number, random after it (nothing compresses them)."""
    return PNG_MAGIC + os.urandom(max(size - len(PNG_MAGIC), 1))


def ask(text: str, data: bytes | None = None) -> str | list[dict[str, Any]]:
    if data is None:
        return text
    return [{"role": "user", "content": [{"type": "input_text", "text": text}, image_part(data)]}]


def stores(directory: Path) -> dict[str, Callable[[], ThreadStore]]:
    return {
        "memory": MemoryThreadStore,
        "file": lambda: FileThreadStore(directory / "threads"),
        "sqlite": lambda: SQLThreadStore(f"sqlite:///{directory / 'chats.db'}"),
        "postgres": lambda: SQLThreadStore(POSTGRES_URL),
    }


async def held_bytes(name: str, store: ThreadStore, chat: str, directory: Path) -> int:
    """What the store holds for `chat`: its items as JSON plus its attachment bytes (file: the files' sizes)."""
    if name == "file":  # each file once: a chat's attachment is a hard link to the one blob, not a copy
        files = {(stat.st_dev, stat.st_ino): stat.st_size
                 for stat in (path.stat() for path in (directory / "threads").rglob("*") if path.is_file())}
        return sum(files.values())
    if name == "memory":
        threads = await store.load(chat)
        items = sum(len(json.dumps(item).encode()) for thread in threads.values() for item in thread)
        return items + sum(len(data) for data in store._blobs.values())  # type: ignore[attr-defined]
    if name == "sqlite":
        import sqlite3

        with sqlite3.connect(directory / "chats.db") as conn:
            items = conn.execute("SELECT coalesce(sum(length(CAST(item AS BLOB))), 0) FROM agency_swarm_items "
                                 "WHERE chat_id = ?", (chat,)).fetchone()[0]
            blobs = conn.execute("SELECT coalesce(sum(length(b.data)), 0) FROM agency_swarm_blobs b JOIN "
                                 "agency_swarm_blob_holders h ON h.digest = b.digest WHERE h.chat_id = ?",
                                 (chat,)).fetchone()[0]
        return int(items) + int(blobs)
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        items = await conn.fetchval("SELECT coalesce(sum(octet_length(item)), 0) FROM agency_swarm_items "
                                    "WHERE chat_id = $1", chat)
        blobs = await conn.fetchval("SELECT coalesce(sum(octet_length(b.data)), 0) FROM agency_swarm_blobs b JOIN "
                                    "agency_swarm_blob_holders h ON h.digest = b.digest WHERE h.chat_id = $1", chat)
        return int(items) + int(blobs)
    finally:
        await conn.close()


# -- (a) store bytes ------------------------------------------------------------------------------------------------


def team(store: ThreadStore, image_id: str) -> Agency:
    """CEO passes the image it is sent on to Dev1 and Dev2 (by its id), then answers; later turns it just answers."""

    def ceo(call: ModelCall) -> Step:
        if call.last_user_message != "Look at this.":
            return "noted"
        done = len(call.tool_outputs)
        if done < 2:
            return send_message(f"Dev{done + 1}", "Look.", None, [image_id])
        return "both looked"

    first = Agent(name="CEO", model=ScriptedModel(ceo))
    devs = [Agent(name=f"Dev{n}", model=ScriptedModel(lambda call: "a picture")) for n in (1, 2)]
    return Agency([first, [first, devs[0]], [first, devs[1]]], thread_store=store)


async def store_bytes(name: str, make: Callable[[], ThreadStore], directory: Path, size: int,
                      turns: list[int]) -> list[int]:
    data = image(size)
    chat = f"bench-att-{uuid.uuid4().hex[:8]}"
    store = make()
    agency = team(store, "att_" + hashlib.sha256(data).hexdigest()[:12])
    try:
        await agency.get_response(ask("Look at this.", data), chat_id=chat)
        cells = [await held_bytes(name, store, chat, directory)]
        done = 0
        for target in turns:
            for number in range(done, target):
                await agency.get_response(f"turn {number}", chat_id=chat)
            done = target
            cells.append(await held_bytes(name, store, chat, directory))
        await agency.thread_manager.delete_chat(chat)
        return cells
    finally:
        await agency.aclose()


# -- (b) per-turn cost -----------------------------------------------------------------------------------------------


async def turn_cost(make: Callable[[], ThreadStore], images: int, image_kb: int, rounds: int) -> tuple[float, float]:
    store = make()
    agency = Agency(Agent(name="Assistant", model=FakeModel("ok")), thread_store=store)
    with_images, text_only = f"bench-img-{uuid.uuid4().hex[:8]}", f"bench-txt-{uuid.uuid4().hex[:8]}"
    try:
        for number in range(images):
            await agency.get_response(ask(f"image {number}", image(image_kb * 1024)), chat_id=with_images)
            await agency.get_response(f"text {number}", chat_id=text_only)
        times: dict[str, list[float]] = {with_images: [], text_only: []}
        for number in range(rounds):
            for chat in (with_images, text_only) if number % 2 else (text_only, with_images):
                started = time.perf_counter()
                await agency.get_response(f"again {number}", chat_id=chat)
                times[chat].append(time.perf_counter() - started)
        for chat in times:
            await agency.thread_manager.delete_chat(chat)
        return statistics.median(times[with_images]) * 1e3, statistics.median(times[text_only]) * 1e3
    finally:
        await agency.aclose()


# -- (c) bytes per model call -----------------------------------------------------------------------------------------


class Weighing(FakeModel):
    """FakeModel that records the size of each call's input as JSON (what a client would send)."""

    def __init__(self) -> None:
        super().__init__("ok")
        self.sizes: list[int] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.sizes.append(len(json.dumps(input, default=str).encode()))
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def model_bytes(images: int, image_kb: int) -> tuple[list[int], list[int]]:
    messages = [ask(f"image {n}", image(image_kb * 1024)) for n in range(images)] + ["text 1", "text 2"]
    ours = Weighing()
    agency = Agency(Agent(name="Assistant", model=ours), thread_store=MemoryThreadStore())
    try:
        for message in messages:
            await agency.get_response(message, chat_id="weigh")
    finally:
        await agency.aclose()
    theirs = Weighing()
    sdk_agent = agents.Agent(name="Assistant", model=theirs)
    history: list[Any] = []
    for message in messages:
        new = [{"role": "user", "content": message}] if isinstance(message, str) else message
        result = await agents.Runner.run(sdk_agent, [*history, *new])
        history = result.to_input_list()
    return ours.sizes, theirs.sizes


# -- the tables -------------------------------------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", nargs="+", default=["memory", "file", "sqlite", "postgres"])
    parser.add_argument("--image-mb", type=float, default=5.0)
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--images", type=int, default=20)
    parser.add_argument("--image-kb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    agents.set_tracing_disabled(True)
    size = int(args.image_mb * 1024 * 1024)
    sized, costs = [], []
    for name in args.stores:
        with tempfile.TemporaryDirectory() as directory:
            make = stores(Path(directory))[name]
            cells = await store_bytes(name, make, Path(directory), size, args.turns)
            sized.append([name, *(f"{cell:,} ({cell / size:.3f}x)" for cell in cells)])
        with tempfile.TemporaryDirectory() as directory:
            with_images, text_only = await turn_cost(stores(Path(directory))[name], args.images, args.image_kb,
                                                     args.rounds)
            costs.append([name, f"{with_images:.2f}", f"{text_only:.2f}", f"{with_images / text_only:.2f}x"])
    print(f"(a) Store bytes for a chat: a {size:,}-byte image sent once and passed on to two agents (x: of the image)")
    table(["store", "after the send", *(f"after {turns} more turns" for turns in args.turns)], sized)
    print(f"(b) Per-turn cost (ms, median of {args.rounds}) of a chat holding {args.images} images of "
          f"{args.image_kb} KB vs text only, same length")
    table(["store", "with images", "text only", "ratio"], costs)
    ours, theirs = await model_bytes(args.images, args.image_kb)
    print(f"(c) Bytes the model receives per call (input as JSON): {args.images} images of {args.image_kb} KB, one "
          "per turn, then two text turns")
    shown = sorted({0, len(ours) // 2, len(ours) - 3, len(ours) - 2, len(ours) - 1} & set(range(len(ours))))
    rows = [[str(n + 1), f"{ours[n]:,}", f"{theirs[n]:,}", f"{ours[n] / theirs[n]:.3f}"] for n in shown]
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    table(["call", "agency_swarm", "agents.Runner", "ratio"], rows)


if __name__ == "__main__":
    asyncio.run(main())
