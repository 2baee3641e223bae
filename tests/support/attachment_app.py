"""The agency the attachment upload tests serve (`--factory attachment_app:build_agency`): one scripted agent that
says what it was sent, under small attachment limits, so a refusal comes early in a large upload."""

from __future__ import annotations

from agents import set_tracing_disabled

from agency_swarm import Agency, Agent, AttachmentLimits
from agency_swarm._threads._store import ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel

set_tracing_disabled(True)
LIMITS = AttachmentLimits(max_part_bytes=1024 * 1024, max_parts=4, max_message_bytes=2 * 1024 * 1024)


def answer(call: ModelCall) -> str:
    parts = [part.get("type") for item in call.input for part in (item.get("content") or []) if isinstance(part, dict)]
    return f"parts: {parts}"


def build_agency(store: ThreadStore) -> Agency:
    return Agency([Agent(name="CEO", model=ScriptedModel(answer))], thread_store=store, attachment_limits=LIMITS)
