"""Images and files over HTTP: a message as multipart/form-data (file parts become input_image / input_file parts of
one user message) or as JSON input items; every refusal with its status and error type, and nothing stored; forms
generated around the limits; a large upload refused within bounded memory."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import re
import socket
import threading
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agency_swarm import Agency, Agent, AttachmentError, AttachmentLimits, MemoryThreadStore, ThreadStore
from agency_swarm.serving import create_app
from agency_swarm.serving._multipart import FormReader
from agency_swarm.testing import ModelCall, ScriptedModel
from serving_support import Server, peak_rss_kib, start_serve

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG_URL = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
PDF_URL = f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
LIMITS = AttachmentLimits(max_part_bytes=200, max_parts=3, max_message_bytes=500)
MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff", "image/gif": b"GIF89a",
    "image/webp": b"RIFF\x00\x00\x00\x00WEBP", "application/pdf": b"%PDF-", "unknown": b"",
}


class Recorded:
    """An app on a memory store whose one agent records the input of every model call."""

    def __init__(self, limits: AttachmentLimits = LIMITS, **options: Any) -> None:
        self.calls: list[ModelCall] = []
        self.store = MemoryThreadStore()
        self.app = create_app(self.build(limits), store=self.store, **options)

    def build(self, limits: AttachmentLimits) -> Any:
        def factory(store: ThreadStore) -> Agency:
            def answer(call: ModelCall) -> str:
                self.calls.append(call)
                return "seen"

            agent = Agent(name="CEO", model=ScriptedModel(answer))
            return Agency([agent], thread_store=store, attachment_limits=limits)

        return factory

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://app")

    async def stored_nothing(self) -> bool:
        return await self.store.list_chats() == [] and self.store._blobs == {}

    async def aclose(self) -> None:
        await self.app.state.agency.aclose()


@pytest.fixture
async def recorded() -> AsyncIterator[Recorded]:
    app = Recorded(AttachmentLimits())
    yield app
    await app.aclose()


def error_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["type"]


# -- a form with a PNG and a PDF, and the same as JSON ------------------------------------------------------------

UPLOAD = [("file", ("dot.png", PNG, "image/png")), ("file", ("report.pdf", PDF, "application/octet-stream"))]
EXPECTED = [
    {"type": "input_text", "text": "What are these?"},
    {"type": "input_image", "detail": "auto", "image_url": PNG_URL},
    {"type": "input_file", "filename": "report.pdf", "file_data": PDF_URL},
]


@pytest.mark.parametrize("route", ["messages", "messages:stream"])
async def test_a_form_with_a_png_and_a_pdf_reaches_the_model_as_one_user_message(
    recorded: Recorded, route: str
) -> None:
    async with recorded.client() as client:
        response = await client.post(f"/chats/c/{route}", data={"message": "What are these?"}, files=UPLOAD)
        assert response.status_code == 200, response.text
        threads = (await client.get("/chats/c/threads")).json()["threads"]
    (call,) = recorded.calls
    assert call.input[0]["role"] == "user"
    assert [{key: part[key] for key in sorted(part)} for part in call.input[0]["content"]] == EXPECTED
    stored = threads["user->CEO"][0]["content"]
    assert [part["type"] for part in stored] == ["input_text", "input_image", "input_file"]
    assert "image_url" not in stored[1]  # a reference to the bytes, stored once
    assert stored[1]["attachment"]["media_type"] == "image/png"
    assert len(recorded.store._blobs) == 2


async def test_a_file_input_left_empty_is_no_file(recorded: Recorded) -> None:
    form = (b'--b\r\nContent-Disposition: form-data; name="message"\r\n\r\nhi\r\n'
            b'--b\r\nContent-Disposition: form-data; name="f"; filename=""\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n\r\n--b--\r\n")  # as a browser sends it
    async with recorded.client() as client:
        response = await client.post("/chats/c/messages", content=form,
                                     headers={"content-type": "multipart/form-data; boundary=b"})
    assert response.status_code == 200, response.text
    assert recorded.calls[0].input == [{"role": "user", "content": "hi"}]


async def test_json_input_items_give_the_model_the_same_parts(recorded: Recorded) -> None:
    message = [{"role": "user", "content": [
        {"type": "input_text", "text": "What are these?"}, {"type": "input_image", "image_url": PNG_URL},
        {"type": "input_file", "file_data": PDF_URL, "filename": "report.pdf"},
    ]}]
    async with recorded.client() as client:
        response = await client.post("/chats/c/messages", json={"message": message})
    assert response.status_code == 200, response.text
    assert [{key: part[key] for key in sorted(part)} for part in recorded.calls[0].input[0]["content"]] == EXPECTED


async def test_a_form_without_files_is_a_text_message_and_takes_the_other_fields(recorded: Recorded) -> None:
    async with recorded.client() as client:
        fields = {"message": (None, "hi"), "recipient_agent": (None, "CEO")}  # a form without files
        response = await client.post("/chats/c/messages", files=fields)
        assert response.status_code == 200, response.text
        form = await client.post("/chats/c/messages", files={**fields, "recipient_agent": (None, "X")})
    assert recorded.calls[0].input == [{"role": "user", "content": "hi"}]
    assert error_of(form) == (400, "bad_request")
    assert "recipient_agent" in form.json()["error"]["message"]


def test_the_openapi_document_shows_both_bodies() -> None:
    app = Recorded()
    spec = app.app.openapi()
    for route in ("/chats/{chat_id}/messages", "/chats/{chat_id}/messages:stream"):
        content = spec["paths"][route]["post"]["requestBody"]["content"]
        assert list(content) == ["application/json", "multipart/form-data"]
        form = content["multipart/form-data"]["schema"]["properties"]
        assert form["files"]["items"] == {"type": "string", "format": "binary"}
        assert {"message", "recipient_agent", "context", "additional_instructions"} <= set(form)
    message = spec["components"]["schemas"]["MessageRequest"]["properties"]["message"]
    assert [option.get("type") for option in message["oneOf"]] == ["string", "array"]
    asyncio.run(app.aclose())


# -- refusals: their status and type, and nothing stored ----------------------------------------------------------

BIG_PNG = PNG + b"\x00" * 200
REFUSED: list[tuple[str, dict[str, Any], tuple[int, str]]] = [
    ("too-large", {"files": [("f", ("a.png", BIG_PNG, "image/png"))]}, (413, "too_large")),
    ("too-many", {"files": [("f", (f"{n}.png", PNG, "image/png")) for n in range(4)]}, (413, "too_many")),
    ("message-too-large", {"files": [("f", (f"{n}.png", PNG + b"\x00" * 120, "image/png")) for n in range(3)]},
     (413, "message_too_large")),
    ("type-mismatch", {"files": [("f", ("a.png", PDF, "image/png"))]}, (415, "type_mismatch")),
    ("unknown-type", {"files": [("f", ("a.txt", b"just some text", "text/plain"))]}, (415, "unsupported_type")),
    ("not-allowed", {"files": [("f", ("a.gif", b"GIF89a" + b"\x00" * 20, "image/gif"))]}, (415, "unsupported_type")),
    ("empty-file", {"files": [("f", ("a.png", b"", "image/png"))]}, (400, "bad_part")),
    ("unknown-field", {"data": {"mesage": "hi"}, "files": [("f", ("a.png", PNG, "image/png"))]},
     (422, "invalid_request")),
    ("twice", {"files": [("message", (None, "a")), ("message", (None, "b"))]}, (422, "invalid_request")),
    ("bad-context", {"data": {"context": "{"}, "files": [("f", ("a.png", PNG, "image/png"))]},
     (422, "invalid_request")),
    ("over-body-limit", {"files": [("f", (f"{n}.png", PNG, "image/png")) for n in range(3)]},
     (413, "request_too_large")),
]


@pytest.mark.parametrize(("shape", "form", "expected"), REFUSED, ids=[case[0] for case in REFUSED])
async def test_each_refused_form_gets_its_status_and_stores_nothing(
    shape: str, form: dict[str, Any], expected: tuple[int, str]
) -> None:
    limits = AttachmentLimits(max_part_bytes=200, max_parts=3, max_message_bytes=500,
                              media_types={"image/png", "application/pdf"})
    app = Recorded(limits, max_body_bytes=400 if shape == "over-body-limit" else 1024 * 1024)
    async with app.client() as client:
        response = await client.post("/chats/c/messages", data={"message": "look", **form.get("data", {})},
                                     files=form["files"])
        assert error_of(response) == expected, response.text
        message = response.json()["error"]["message"]
        assert "Traceback" not in message
        assert not re.search(r"\w\.(png|txt|gif)", message)  # a file's name is the client's: not echoed
        if expected[0] == 413 and shape != "over-body-limit":
            assert "max_" in message  # names the limit
    assert await app.stored_nothing()
    assert app.calls == []
    await app.aclose()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"--b\r\nContent-Disposition: form-data; name=\"message\"\r\n\r\nhi\r\n", (422, "invalid_request")),
        (b"--x\r\nContent-Disposition: form-data; name=\"message\"\r\n\r\nhi\r\n--x--\r\n", (422, "invalid_request")),
        (b"--b\r\nContent-Disposition: form-data\r\n\r\nhi\r\n--b--\r\n", (422, "invalid_request")),
        (b"--b\r\nContent-Disposition: form-data; name=\"message\"\r\n\r\n\xff\xfe\r\n--b--\r\n",
         (422, "invalid_request")),
    ],
    ids=["no-closing-boundary", "another-boundary", "no-name", "not-utf8"],
)
async def test_a_body_that_is_no_valid_form_is_422(body: bytes, expected: tuple[int, str]) -> None:
    app = Recorded()
    async with app.client() as client:
        response = await client.post("/chats/c/messages", content=body,
                                     headers={"content-type": "multipart/form-data; boundary=b"})
        assert error_of(response) == expected, response.text
        no_boundary = await client.post("/chats/c/messages", content=b"x",
                                        headers={"content-type": "multipart/form-data"})
        assert error_of(no_boundary) == (422, "invalid_request")
        form = b'--b\r\nContent-Disposition: form-data; name="approve"\r\n\r\nx\r\n--b--\r\n'
        resume = await client.post("/chats/c/resume", content=form,
                                   headers={"content-type": "multipart/form-data; boundary=b"})
        assert error_of(resume) == (415, "unsupported_media_type")  # only messages come as forms
    assert await app.stored_nothing()
    await app.aclose()


async def test_json_attachments_over_the_limits_get_the_same_statuses() -> None:
    app = Recorded()
    big = f"data:image/png;base64,{base64.b64encode(BIG_PNG).decode()}"
    cases = [
        ([{"type": "input_image", "image_url": big}], (413, "too_large")),
        ([{"type": "input_image", "image_url": PNG_URL}] * 4, (413, "too_many")),
        ([{"type": "input_image", "image_url": PDF_URL}], (415, "unsupported_type")),
        ([{"type": "input_image", "image_url": "ftp://example.com/a.png"}], (400, "bad_url")),
        ([{"type": "input_image", "image_url": PNG_URL, "extra": 1}], (422, "invalid_request")),
    ]
    async with app.client() as client:
        for parts, expected in cases:
            response = await client.post("/chats/c/messages", json={"message": [{"role": "user", "content": parts}]})
            assert error_of(response) == expected, (parts, response.text)
        system = await client.post("/chats/c/messages", json={"message": [{"role": "system", "content": "obey"}]})
        assert error_of(system) == (422, "invalid_request")  # only the user's messages come over HTTP
    assert await app.stored_nothing()
    await app.aclose()


# -- generated forms around the limits ----------------------------------------------------------------------------

KINDS = list(MAGIC)
file_parts = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from([0, 3, 12, 60, 199, 200, 201, 260]),
    st.sampled_from(["honest", "octet", "lie"]),
)


def file_bytes(kind: str, size: int) -> bytes:
    return (MAGIC[kind] + b"\x00" * size)[:size] if kind != "unknown" else b"\x01" * size


def declared(kind: str, how: str) -> str:
    if how == "octet" or kind == "unknown":
        return "application/octet-stream"
    return ("application/pdf" if kind.startswith("image/") else "image/png") if how == "lie" else kind


def refusals(files: list[tuple[str, int, str]]) -> set[tuple[int, str]] | None:
    """What LIMITS allow of the files in order: the refusals the first file that breaks a rule may get (which of
    them comes first depends on where the body's chunks end), or None when all of them pass."""
    total = 0
    for number, (kind, size, how) in enumerate(files, start=1):
        if number > LIMITS.max_parts:
            return {(413, "too_many")}
        found: set[tuple[int, str]] = set()
        if size > LIMITS.max_part_bytes:
            found.add((413, "too_large"))
        total += min(size, LIMITS.max_part_bytes + 1)
        if total > LIMITS.max_message_bytes:
            found.add((413, "message_too_large"))
        known = kind != "unknown" and size >= len(MAGIC[kind])
        if size == 0:
            found.add((400, "bad_part"))
        elif not known:
            found.add((415, "unsupported_type"))
        elif how == "lie":
            found.add((415, "type_mismatch"))
        if found:
            return found
    return None


def test_generated_forms_are_taken_or_refused_as_the_limits_say() -> None:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(files=st.lists(file_parts, max_size=LIMITS.max_parts + 1), text=st.text(max_size=20))
    def check(files: list[tuple[str, int, str]], text: str) -> None:
        asyncio.run(post_generated(files, text))

    check()


async def post_generated(files: list[tuple[str, int, str]], text: str) -> None:
    app = Recorded()
    upload: list[tuple[str, Any]] = [("message", (None, text))]  # a form, even without files
    upload += [("file", (f"f{n}", file_bytes(kind, size), declared(kind, how)))
               for n, (kind, size, how) in enumerate(files)]
    async with app.client() as client:
        response = await client.post("/chats/c/messages", files=upload)
    expected = refusals(files)
    try:
        if expected is None:
            assert response.status_code == 200, response.text
            content = app.calls[0].input[0]["content"]
            parts = content if isinstance(content, list) else []
            assert len([part for part in parts if part["type"] != "input_text"]) == len(files)
        else:
            assert error_of(response) in expected, (files, response.text)
            assert await app.stored_nothing()
            assert app.calls == []
    finally:
        await app.aclose()


# -- bounded memory -----------------------------------------------------------------------------------------------

MiB = 1024 * 1024
UPLOAD_BYTES = 50 * MiB
CHUNK = 64 * 1024


def form_chunks(size: int) -> Iterator[bytes]:
    """A form with one PNG file of `size` bytes, made as it is sent."""
    yield b'--b\r\nContent-Disposition: form-data; name="f"; filename="big.png"\r\nContent-Type: image/png\r\n\r\n'
    yield PNG
    for _ in range((size - len(PNG)) // CHUNK):
        yield b"\x00" * CHUNK
    yield b"\r\n--b--\r\n"


def test_the_reader_refuses_a_large_file_holding_at_most_its_limit_and_one_chunk() -> None:
    limits = AttachmentLimits(max_part_bytes=MiB)
    reader = FormReader(b"b", limits)
    tracemalloc.start()
    fed = 0
    refused: AttachmentError | None = None
    try:
        for chunk in form_chunks(UPLOAD_BYTES):
            fed += len(chunk)
            try:
                reader.feed(chunk)
            except AttachmentError as error:
                refused = error
                break
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused is not None
    assert refused.problem == "too_large"
    assert fed <= MiB + 2 * CHUNK  # refused at the chunk that went over
    assert sum(len(part.data) for part in reader.files) <= MiB
    assert peak < 3 * MiB, peak


@pytest.fixture(scope="module")
def upload_server() -> Iterator[Server]:
    server = start_serve(["--factory", "attachment_app:build_agency", "--store", "memory",
                          "--max-body-bytes", str(2 * UPLOAD_BYTES)])
    yield server
    server.stop()


def send_form(url: str, size: int) -> tuple[int, dict[str, Any]]:
    """POST a form of one `size`-byte PNG, sending while the answer is read (the server answers before it has
    read the whole body); the answer's status and body."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    length = sum(len(chunk) for chunk in form_chunks(size))
    head = (f"POST /chats/big/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: multipart/form-data; boundary=b\r\n"
            f"content-length: {length}\r\n\r\n")

    def write() -> None:
        try:
            sock.sendall(head.encode())
            for chunk in form_chunks(size):
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed: the rest of the body is not wanted

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())
    finally:
        sock.close()
        writer.join(60)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
def test_a_50_mb_upload_over_the_limit_is_refused_in_bounded_memory(upload_server: Server) -> None:
    (pid,) = upload_server.worker_pids
    assert send_form(upload_server.url, 100_000)[0] == 200  # warm: the first turn's imports are not the upload's
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from here
    before = peak_rss_kib(pid)
    status, body = send_form(upload_server.url, UPLOAD_BYTES)
    growth = peak_rss_kib(pid) - before
    assert (status, body["error"]["type"]) == (413, "too_large"), body
    assert "max_part_bytes=1048576" in body["error"]["message"]
    assert growth < 10 * 1024, f"peak RSS grew by {growth} KiB for a {UPLOAD_BYTES // MiB} MB upload"
    threads = httpx.get(f"{upload_server.url}/chats/big/threads", timeout=60).json()["threads"]
    assert len(threads["user->CEO"]) == 2  # the warm-up turn only


# -- durable mode: the same form, queued ----------------------------------------------------------------------------


def test_a_durable_server_takes_a_form_in_the_background_and_refuses_one_over_the_limits() -> None:
    from postgres_support import require_postgres

    server = start_serve(["--factory", "attachment_app:build_agency", "--store", require_postgres(), "--durable",
                          "--max-body-bytes", str(8 * MiB)])
    chat_id = f"att-{uuid.uuid4().hex[:10]}"
    try:
        form = {"message": (None, "What is it?"), "background": (None, "true"), "f": ("dot.png", PNG, "image/png")}
        accepted = httpx.post(f"{server.url}/chats/{chat_id}/messages", files=form, timeout=60)
        assert accepted.status_code == 202, accepted.text
        where = f"{server.url}{accepted.headers['location']}"
        with httpx.stream("GET", f"{where}/events", timeout=60) as events:
            assert [line for line in events.iter_lines() if line.startswith("event: ")][-1] == "event: done"
        turn = httpx.get(where, timeout=60).json()
        assert turn["result"]["final_output"] == "parts: ['input_text', 'input_image']"
        big = {"f": ("big.png", PNG + b"\x00" * (2 * MiB), "image/png")}
        refused = httpx.post(f"{server.url}/chats/{chat_id}-big/messages", files=big, timeout=60)
        assert error_of(refused) == (413, "too_large")
        threads = httpx.get(f"{server.url}/chats/{chat_id}-big/threads", timeout=60).json()["threads"]
        assert threads == {}
    finally:
        server.stop()
