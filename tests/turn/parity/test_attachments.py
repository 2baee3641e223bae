"""Parity for input items with images and files: the same list through `Runner` and through ours gives every model
call the same input; our items hold references to the bytes where Runner's hold the data URLs (documented)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from parity.harness import Kit, Scenario, call, msg, run_and_compare
from parity.test_output_items import _note_tool

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
IMAGE = {"type": "input_image", "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(), "detail": "low"}
FILE = {"type": "input_file", "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
        "filename": "report.pdf"}


def asking(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "What do these show?"}, *parts]}]


def note(kit: Kit) -> dict[str, Any]:
    return {"tools": [_note_tool(kit)]}


SCENARIOS = [
    Scenario("list_input_with_an_image_and_a_pdf", lambda: [[msg("A dot and a short report.")]],
             input=asking(IMAGE, FILE), differences=("attachments_by_reference",)),
    Scenario("list_input_with_an_image_then_a_tool_call", lambda: [
        [call("note", {"text": "a dot"})], [msg("Noted the dot.", "msg_2")],
    ], note, input=asking(IMAGE), differences=("attachments_by_reference",)),
    Scenario("list_input_of_urls_file_ids_and_two_messages", lambda: [[msg("Two pictures.")]], input=[
        {"role": "user", "content": [
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
            {"type": "input_image", "file_id": "file-abc123", "detail": "high"},
        ]},
        {"role": "user", "content": "Compare them."},
    ]),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
async def test_scenario(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
