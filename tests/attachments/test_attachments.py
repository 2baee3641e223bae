"""Images and files in messages: the part helpers, refusals that store nothing, what the model and the caller see,
and attachments passed on between agents by id."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import (
    Agency,
    Agent,
    AgentStarted,
    AttachmentError,
    AttachmentLimits,
    ConfigError,
    MemoryThreadStore,
    MessageSent,
    file_part,
    image_part,
)
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG_B64 = base64.b64encode(PNG).decode()
PNG_URL = f"data:image/png;base64,{PNG_B64}"
PDF_URL = f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
PNG_ID = "att_" + hashlib.sha256(PNG).hexdigest()[:12]
PDF_ID = "att_" + hashlib.sha256(PDF).hexdigest()[:12]


def ask(*parts: dict[str, Any], text: str = "What is in it?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": text}, *parts]}]


def user_parts(call: ModelCall, index: int = 0) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = call.input[index]["content"]
    return content


# -- the helpers ---------------------------------------------------------------------------------------------------


def test_image_part_from_a_path_bytes_or_url(tmp_path: Path) -> None:
    path = tmp_path / "dot.png"
    path.write_bytes(PNG)
    assert image_part(path) == {"type": "input_image", "image_url": PNG_URL, "detail": "auto"}
    assert image_part(str(path), detail="low")["detail"] == "low"
    assert image_part(PNG) == image_part(path)
    assert image_part("https://example.com/a.png") == {
        "type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto",
    }


def test_file_part_from_a_path_bytes_or_url(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(PDF)
    assert file_part(path) == {"type": "input_file", "file_data": PDF_URL, "filename": "report.pdf"}
    assert file_part(PDF) == {"type": "input_file", "file_data": PDF_URL, "filename": "file.pdf"}
    assert file_part(b"a,b\n1,2\n", filename="t.csv")["file_data"].startswith("data:text/csv;base64,")
    assert file_part("https://example.com/r.pdf") == {"type": "input_file", "file_url": "https://example.com/r.pdf"}


@pytest.mark.parametrize(
    ("build", "problem", "words"),
    [
        (lambda tmp: image_part(tmp / "missing.png"), "no_such_file", "no file at"),
        (lambda tmp: image_part(PDF), "unsupported_type", "not an image"),
        (lambda tmp: image_part(PNG, media_type="image/jpeg"), "type_mismatch", "declares image/jpeg but holds"),
        (lambda tmp: file_part(PNG, filename="r.pdf"), "type_mismatch", "declares application/pdf"),
        (lambda tmp: image_part(PNG, max_bytes=10), "too_large", "over max_part_bytes=10"),
        (lambda tmp: file_part(b"\x00\x01"), "unsupported_type", "cannot tell the file's type"),
        (lambda tmp: image_part("ftp://example.com/a.png"), "no_such_file", "no file at"),
    ],
    ids=["missing-path", "pdf-as-image", "png-as-jpeg", "png-as-pdf", "too-large", "unknown-type", "not-http"],
)
def test_the_helpers_refuse_bad_input_clearly(tmp_path: Path, build: Any, problem: str, words: str) -> None:
    with pytest.raises(AttachmentError, match=re.escape(words)) as caught:
        build(tmp_path)
    assert caught.value.problem == problem


def test_a_path_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.png"
    path.write_bytes(PNG + b"\x00" * 100)
    with pytest.raises(AttachmentError) as caught:
        image_part(path, max_bytes=100)
    assert (caught.value.problem, caught.value.size, caught.value.limit) == ("too_large", len(PNG) + 100, 100)


# -- refusals: clear, and nothing is stored -----------------------------------------------------------------------

REFUSED = [
    ({"type": "input_image", "image_url": "data:image/png," + PNG_B64, "detail": "auto"}, "not_base64",
     "data URL that is not base64"),
    ({"type": "input_image", "image_url": "data:image/png;base64,%%%", "detail": "auto"}, "not_base64",
     "not valid base64"),
    ({"type": "input_image", "image_url": f"data:image/jpeg;base64,{PNG_B64}", "detail": "auto"}, "type_mismatch",
     "declares image/jpeg but holds image/png"),
    ({"type": "input_file", "file_data": f"data:application/pdf;base64,{PNG_B64}", "filename": "x.pdf"},
     "type_mismatch", "declares application/pdf but holds image/png"),
    ({"type": "input_image", "file_id": "../../etc/passwd", "detail": "auto"}, "bad_file_id", "file_id"),
    ({"type": "input_file", "file_id": "not a file id"}, "bad_file_id", "file_id"),
    ({"type": "input_image", "image_url": "https://example.com/a.png", "file_id": "file-abc", "detail": "auto"},
     "ambiguous", "image_url and file_id"),
    ({"type": "input_file", "file_url": "https://example.com/a.pdf", "file_data": PDF_URL}, "ambiguous",
     "file_data and file_url"),
    ({"type": "input_file", "filename": "x.pdf"}, "bad_part", "has none of"),
    ({"type": "input_file", "file_data": base64.b64encode(PDF).decode()}, "bad_part", "without a filename"),
    ({"type": "input_image", "image_url": "file:///etc/passwd", "detail": "auto"}, "bad_url", "http(s) URL"),
    ({"type": "input_image", "detail": "auto", "attachment": {"sha256": "0" * 64, "media_type": "image/png",
      "size": 3, "encoding": "data:image/png;base64"}}, "unknown_attachment", "does not hold"),
    ({"type": "input_image", "detail": "auto", "attachment": {"sha256": "../x"}}, "unknown_attachment",
     "did not write"),
]


@pytest.mark.parametrize(("part", "problem", "words"), REFUSED, ids=[r[1] + f"-{n}" for n, r in enumerate(REFUSED)])
async def test_a_bad_part_is_refused_and_nothing_is_stored(part: dict[str, Any], problem: str, words: str) -> None:
    store = MemoryThreadStore()
    model = ScriptedModel(["never"])
    agency = Agency(Agent(name="CEO", model=model), thread_store=store)
    with pytest.raises(AttachmentError, match=re.escape(words)) as caught:
        await agency.get_response(ask(image_part(PNG), part), chat_id="c1")
    assert caught.value.problem == problem
    assert isinstance(caught.value, ConfigError)
    assert await store.load("c1") == {}
    assert store._blobs == {}  # not even the valid image of the same message
    assert model.calls == []


async def test_the_agencys_limits_apply_and_name_themselves() -> None:
    largest = max(len(PNG), len(PDF))
    limits = AttachmentLimits(max_part_bytes=largest, max_parts=2, max_message_bytes=len(PDF) + len(PNG) - 1)
    agency = Agency(Agent(name="CEO", model=ScriptedModel(["ok"])), attachment_limits=limits)
    big = PDF + b"\n" * (largest + 1 - len(PDF))
    with pytest.raises(AttachmentError, match=f"is {largest + 1} bytes, over max_part_bytes={largest}") as caught:
        await agency.get_response(ask(file_part(big)))
    assert (caught.value.size, caught.value.limit) == (largest + 1, largest)
    with pytest.raises(AttachmentError, match="more than max_parts=2") as caught:
        await agency.get_response(ask(*[image_part(f"https://example.com/{n}.png") for n in range(3)]))
    assert caught.value.problem == "too_many"
    with pytest.raises(AttachmentError, match="over max_message_bytes=") as caught:
        await agency.get_response(ask(image_part(PNG), file_part(PDF)))
    assert caught.value.problem == "message_too_large"
    typed = Agency(Agent(name="CEO", model=ScriptedModel(["ok"])),
                   attachment_limits=AttachmentLimits(media_types={"image/png"}))
    with pytest.raises(AttachmentError, match="application/pdf, which this agency does not take"):
        await typed.get_response(ask(file_part(PDF)))
    assert (await typed.get_response(ask(image_part(PNG)))).final_output == "ok"
    with pytest.raises(ConfigError, match="attachment_limits must be an AttachmentLimits"):
        Agency(Agent(name="CEO", model=ScriptedModel(["ok"])), attachment_limits={"max_parts": 1})  # type: ignore[arg-type]


async def test_a_list_that_is_not_input_items_is_refused() -> None:
    agency = Agency(Agent(name="CEO", model=ScriptedModel(["ok"])))
    with pytest.raises(ConfigError, match="empty list"):
        await agency.get_response([])
    with pytest.raises(ConfigError, match="message item 0 is a str"):
        await agency.get_response(["hello"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="message item 0 is not an item the model API accepts"):
        await agency.get_response([{"role": "user", "content": 3}])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="must be a str or a list of input items"):
        await agency.get_response(b"bytes")  # type: ignore[arg-type]


# -- what the model and the caller see -----------------------------------------------------------------------------


async def test_the_model_gets_the_data_and_the_thread_a_reference() -> None:
    model = ScriptedModel(["a dot and a pdf"])
    agency = Agency(Agent(name="CEO", model=model))
    result = await agency.get_response(ask(image_part(PNG), file_part(PDF, filename="r.pdf")))

    assert user_parts(model.calls[0]) == [
        {"type": "input_text", "text": "What is in it?"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_file", "file_data": PDF_URL, "filename": "r.pdf"},
    ]
    stored = result.new_items[0]["content"]
    assert stored[1] == {"type": "input_image", "detail": "auto", "attachment": {
        "sha256": hashlib.sha256(PNG).hexdigest(), "media_type": "image/png", "size": len(PNG),
        "encoding": "data:image/png;base64"}}
    assert stored[2]["attachment"]["media_type"] == "application/pdf"
    assert PNG_B64 not in json.dumps(result.new_items)
    assert PNG_B64 not in json.dumps(await agency.get_threads())
    assert result.context_wrapper.turn_input == ask(image_part(PNG), file_part(PDF, filename="r.pdf"))


async def test_urls_and_file_ids_pass_through_as_given() -> None:
    model = ScriptedModel(["ok"])
    agency = Agency(Agent(name="CEO", model=model))
    parts = [{"type": "input_image", "image_url": "https://example.com/a.png", "detail": "high"},
             {"type": "input_image", "file_id": "file-abc123"},
             {"type": "input_file", "file_id": "file-XyZ_9"},
             {"type": "input_file", "file_url": "https://example.com/r.pdf"}]
    result = await agency.get_response(ask(*parts))
    parts[1]["detail"] = "auto"  # the API's default, said out loud (the SDK's type requires it)
    assert user_parts(model.calls[0])[1:] == parts
    assert result.new_items[0]["content"][1:] == parts


async def test_stream_events_show_attachments_by_reference_never_bytes() -> None:
    agency = Agency(Agent(name="CEO", model=ScriptedModel(["seen"])))
    stream = agency.get_response_stream(ask(image_part(PNG), file_part(PDF)))
    events = [event async for event in stream]
    started = next(event for event in events if isinstance(event, AgentStarted))
    assert started.message == "What is in it?"
    assert [part["attachment"]["media_type"] for part in started.attachments] == ["image/png", "application/pdf"]
    for event in events:
        dumped = json.dumps(event.to_dict(), default=str)
        assert PNG_B64 not in dumped, event
        assert "JVBERi" not in dumped, event  # the PDF's base64
    assert PNG_B64 not in json.dumps(stream.result.new_items)


async def test_a_result_sent_again_refers_to_the_same_bytes_and_another_chat_cannot() -> None:
    model = ScriptedModel(["one", "two", "never"])
    store = MemoryThreadStore()
    agency = Agency(Agent(name="CEO", model=model), thread_store=store)
    first = await agency.get_response(ask(image_part(PNG)), chat_id="a")
    again = first.to_input_list()[:1]  # the stored message, by reference
    await agency.get_response(again, chat_id="a")
    assert user_parts(model.calls[1], 2)[1]["image_url"] == PNG_URL
    with pytest.raises(AttachmentError, match="chat 'b' does not hold") as caught:
        await agency.get_response(again, chat_id="b")  # knowing a digest does not give its bytes
    assert caught.value.problem == "unknown_attachment"
    assert await store.load("b") == {}


async def test_a_restart_on_callbacks_keeps_the_bytes_inline_and_the_model_input_the_same() -> None:
    saved: dict[str, Any] = {}
    seen: list[ModelCall] = []

    def agency() -> Agency:
        model = ScriptedModel(lambda call: (seen.append(call), "ok")[1])
        return Agency(Agent(name="CEO", model=model), load_threads_callback=lambda chat: saved.get(chat),
                      save_threads_callback=lambda chat, threads: saved.__setitem__(chat, threads))

    await agency().get_response(ask(image_part(PNG)), chat_id="c")
    assert PNG_URL in json.dumps(saved)  # the callbacks have no bytes of their own to refer to
    await agency().get_response("and now?", chat_id="c")
    assert seen[1].input[0] == seen[0].input[0]


# -- passing attachments on ----------------------------------------------------------------------------------------


def _ids(call: ModelCall) -> list[str]:
    return re.findall(r"\[attachment (att_[0-9a-f]{12}):", json.dumps(call.input))


def forwarding_ceo(*ids: str) -> ScriptedModel:
    def script(call: ModelCall) -> Step:
        if call.tool_outputs:
            return f"Dev said: {call.tool_outputs[-1]}"
        return send_message("Dev", "Describe these.", None, list(ids) or _ids(call))

    return ScriptedModel(script)


async def test_the_sender_names_attachments_by_id_and_the_recipient_gets_the_same_bytes() -> None:
    ceo_model, dev_model = forwarding_ceo(), ScriptedModel(["a dot and a report"])
    ceo = Agent(name="CEO", model=ceo_model)
    agency = Agency([ceo, [ceo, Agent(name="Dev", model=dev_model)]])
    stream = agency.get_response_stream(ask(image_part(PNG), file_part(PDF, filename="r.pdf")))
    events = [event async for event in stream]

    assert stream.result.final_output == "Dev said: a dot and a report"
    assert user_parts(ceo_model.calls[0])[1:] == [  # the sender, which can pass them on, sees their ids
        {"type": "input_text", "text": f"[attachment {PNG_ID}: image/png]"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_text", "text": f"[attachment {PDF_ID}: r.pdf, application/pdf]"},
        {"type": "input_file", "file_data": PDF_URL, "filename": "r.pdf"},
    ]
    assert dev_model.calls[0].input == [{"role": "user", "content": [  # Dev messages nobody: no markers
        {"type": "input_text", "text": "Describe these."},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_file", "file_data": PDF_URL, "filename": "r.pdf"},
    ]}]
    sent = next(event for event in events if isinstance(event, MessageSent))
    assert sent.attachments == [PNG_ID, PDF_ID]
    assert ceo_model.calls[0].tool_schema("send_message")["properties"]["attachments"]["type"] == ["array", "null"]


async def test_an_unseen_attachment_id_is_a_tool_error_the_model_reads() -> None:
    ceo_model, dev_model = forwarding_ceo("att_000000000000"), ScriptedModel(["never"])
    ceo = Agent(name="CEO", model=ceo_model)
    agency = Agency([ceo, [ceo, Agent(name="Dev", model=dev_model)]])
    result = await agency.get_response(ask(image_part(PNG)))
    assert result.final_output == (
        f"Dev said: Error: no attachment att_000000000000 in your conversation; the attachments you can pass on "
        f"are: {PNG_ID}."
    )
    assert dev_model.calls == []


async def test_a_recipient_can_pass_on_what_it_was_passed() -> None:
    ceo_model = forwarding_ceo()
    dev_model = ScriptedModel(lambda call: "qa says fine" if call.tool_outputs else send_message(
        "QA", "Check it.", None, _ids(call)))
    qa_model = ScriptedModel(["fine"])
    ceo, dev, qa = (Agent(name=name, model=model) for name, model in
                    (("CEO", ceo_model), ("Dev", dev_model), ("QA", qa_model)))
    agency = Agency([ceo, [ceo, dev], [dev, qa]])
    await agency.get_response(ask(image_part(PNG)))
    assert user_parts(qa_model.calls[0]) == [{"type": "input_text", "text": "Check it."},
                                             {"type": "input_image", "image_url": PNG_URL, "detail": "auto"}]
    assert len(agency.thread_manager.attachments._base64) == 1  # one copy in memory for the three threads
