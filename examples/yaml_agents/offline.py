"""Scripted stand-ins for every agent of both YAML files, so the example runs offline. Each reads only what a
real model would get: its message, its instructions and the outputs of its own tool calls."""

from __future__ import annotations

import re
from collections.abc import Callable

from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
BOOKING = re.compile(r"[Bb]ook (?:a |an )?(.+?) on (\d{4}-\d{2}-\d{2})")
EMAIL = re.compile(r"[Ee]mail (\S+@[\w.-]+\w) (?:that|about|this:) (.+)", re.DOTALL)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
REJECTED = "Tool execution was not approved."


def replied(call: ModelCall) -> str | None:
    """The output of the agent's last tool call in this turn, if it made one."""
    return call.tool_outputs[-1] if call.tool_outputs else None


# -- the flat team ------------------------------------------------------------------------------------------

ROUTES = (("Mailer", ("email", "mail ")), ("Scheduler", ("calendar", "book", "meeting", "schedule")))


def dispatcher(call: ModelCall) -> Step:
    if (output := replied(call)) is not None:
        return f"Done: {output}"
    request = call.last_user_message
    worker = next((name for name, words in ROUTES if any(word in request.lower() for word in words)), "Researcher")
    return send_message(worker, request)


def researcher(call: ModelCall) -> Step:
    if (output := replied(call)) is not None:
        return f"From the web: {output}"
    return ToolCall("web_search", {"query": call.last_user_message})


def scheduler(call: ModelCall) -> Step:
    if (output := replied(call)) is not None:
        return output
    message = call.last_user_message
    booking = BOOKING.search(message)
    if booking:
        return ToolCall("create_event", {"day": booking[2], "title": booking[1].capitalize()})
    day = ISO_DAY.search(message)
    return ToolCall("list_events", {"day": day[0] if day else "2025-07-01"})


def mailer(call: ModelCall) -> Step:
    output = replied(call)
    wanted = EMAIL.search(call.last_user_message)
    to = wanted[1] if wanted else "unknown"
    if output is not None:
        return f"The email to {to} was not sent: the user did not approve it." if REJECTED in output else output
    if wanted is None:
        return "Tell me whom to email (an address) and what about."
    text = wanted[2].strip()
    subject = SENTENCE.split(text)[0].rstrip(".")[:60]
    body = text[:1].upper() + text[1:]
    return ToolCall("send_email", {"to": to, "subject": subject[:1].upper() + subject[1:], "body": body})


# -- the departments ----------------------------------------------------------------------------------------

DEPARTMENTS = (("EngineeringLead", ("merge", "pull request", "release")), ("CommsLead", ("email", "announce")))


def director(call: ModelCall) -> Step:
    """One part of the request per department, in the order the user asked; then the outcome."""
    sentences = SENTENCE.split(call.last_user_message)
    parts = [(lead, " ".join(s for s in sentences if any(word in s.lower() for word in words)))
             for lead, words in DEPARTMENTS]
    parts = [(lead, text.removeprefix("Then ").strip()) for lead, text in parts if text]
    done = len(call.tool_outputs)
    if done < len(parts):
        lead, text = parts[done]
        return send_message(lead, text[:1].upper() + text[1:])
    return "Done. " + " ".join(call.tool_outputs)


def engineering_lead(call: ModelCall) -> Step:
    return replied(call) or send_message("Developer", call.last_user_message)


def developer(call: ModelCall) -> Step:
    outputs = call.tool_outputs
    if not outputs:
        return ToolCall("list_pull_requests")
    if len(outputs) == 1:
        asked = set(re.findall(r"[a-z]{4,}", call.last_user_message.lower()))
        for line in outputs[0].splitlines():
            number, title = line.split(" ", 1)
            if "(approved)" in line and asked & set(re.findall(r"[a-z]{4,}", title.lower())):
                return ToolCall("merge_pull_request", {"number": int(number.lstrip("#"))})
        return "No approved pull request matches; nothing was merged."
    return "The merge was not approved; nothing was merged." if REJECTED in outputs[-1] else outputs[-1]


def comms_lead(call: ModelCall) -> Step:
    outputs = call.tool_outputs
    wanted = EMAIL.search(call.last_user_message)
    if wanted is None:
        return "I need an address to email and what to say."
    if not outputs:
        return send_message("Writer", f"Draft a two-sentence announcement that {wanted[2].strip()}")
    if len(outputs) == 1:
        return send_message("Mailer", f"Email {wanted[1]} this: {outputs[0]}")
    return outputs[-1]


def writer(call: ModelCall) -> Step:
    topic = call.last_user_message.partition(" that ")[2].strip().rstrip(".") or "there is news"
    return f"Good news: {topic}. Thank you for your patience!"


SCRIPTS: dict[str, Callable[[ModelCall], Step]] = {
    "Dispatcher": dispatcher, "Researcher": researcher, "Scheduler": scheduler, "Mailer": mailer,
    "Director": director, "EngineeringLead": engineering_lead, "Developer": developer, "CommsLead": comms_lead,
    "Writer": writer,
}


def scripted_models(names: list[str]) -> dict[str, ScriptedModel]:
    """A scripted model for each named agent; a name without a script is an error that says so."""
    missing = [name for name in names if name not in SCRIPTS]
    if missing:
        raise ValueError(f"no offline script for agent(s) {', '.join(missing)}; set OPENAI_API_KEY to use a real model")
    return {name: ScriptedModel(SCRIPTS[name], name=f"{name}-script") for name in names}
