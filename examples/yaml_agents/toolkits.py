"""The toolkits the YAML files pick from, over a small simulated office (the run's `context`): a web index,
a calendar, an outbox and a code host. Sending email and merging code need the user's approval."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from agents import RunContextWrapper, Tool, function_tool


@dataclass(kw_only=True)
class Email:
    to: str
    subject: str
    body: str


@dataclass(kw_only=True)
class PullRequest:
    number: int
    title: str
    approved: bool
    merged: bool = False


@dataclass(kw_only=True)
class Office:
    calendar: dict[str, list[str]] = field(default_factory=dict)
    outbox: list[Email] = field(default_factory=list)
    pull_requests: dict[int, PullRequest] = field(default_factory=dict)


def sample_office() -> Office:
    return Office(
        calendar={"2025-07-01": ["Stand-up", "Design review"]},
        pull_requests={
            41: PullRequest(number=41, title="Login fix: keep the session after a password reset", approved=True),
            42: PullRequest(number=42, title="New pricing page", approved=False),
        },
    )


WEB = {
    "release checklist": "A release checklist: freeze the branch, run the full test suite, tag, write notes.",
    "status page": "A status page tells customers about incidents; update it before and after maintenance.",
}

Ctx = RunContextWrapper[Office]


@function_tool
async def web_search(query: str) -> str:
    """Search the web (simulated: a small fixed index).

    Args:
        query: A few keywords.
    """
    words = set(query.lower().split())
    hits = [text for title, text in WEB.items() if words & set(title.split())]
    return " ".join(hits) or f"No results for {query!r}."


@function_tool
async def list_events(ctx: Ctx, day: str) -> str:
    """The team calendar's events on one day.

    Args:
        day: An ISO date, e.g. 2025-07-01.
    """
    events = ctx.context.calendar.get(date.fromisoformat(day).isoformat(), [])
    return f"{day}: {', '.join(events)}" if events else f"{day}: no events."


@function_tool
async def create_event(ctx: Ctx, day: str, title: str) -> str:
    """Add an event to the team calendar.

    Args:
        day: An ISO date, e.g. 2025-07-02.
        title: What the event is.
    """
    ctx.context.calendar.setdefault(date.fromisoformat(day).isoformat(), []).append(title)
    return f"Booked {title!r} on {day}."


@function_tool
async def cancel_event(ctx: Ctx, day: str, title: str) -> str:
    """Remove an event from the team calendar.

    Args:
        day: An ISO date.
        title: The event's exact title.
    """
    ctx.context.calendar.get(day, []).remove(title)
    return f"Cancelled {title!r} on {day}."


@function_tool(needs_approval=True)
async def send_email(ctx: Ctx, to: str, subject: str, body: str) -> str:
    """Send an email from the team's address. The user approves every email before it leaves.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    if "@" not in to:
        raise ValueError(f"{to!r} is not an email address")
    ctx.context.outbox.append(Email(to=to, subject=subject, body=body))
    return f"Email {subject!r} sent to {to}."


@function_tool
async def list_pull_requests(ctx: Ctx) -> str:
    """The open pull requests, with their review state."""
    open_ones = [pr for pr in ctx.context.pull_requests.values() if not pr.merged]
    return "\n".join(f"#{pr.number} {pr.title} ({'approved' if pr.approved else 'not approved'})"
                     for pr in open_ones) or "No open pull requests."


@function_tool(needs_approval=True)
async def merge_pull_request(ctx: Ctx, number: int) -> str:
    """Merge a pull request into main. The user approves every merge.

    Args:
        number: The pull request's number.
    """
    pr = ctx.context.pull_requests.get(number)
    if pr is None or pr.merged:
        raise ValueError(f"there is no open pull request #{number}")
    if not pr.approved:
        raise ValueError(f"#{number} is not approved by a reviewer yet")
    pr.merged = True
    return f"Merged #{number} ({pr.title})."


TOOLKITS: dict[str, list[Tool]] = {
    "search": [web_search],
    "calendar": [list_events, create_event, cancel_event],
    "email": [send_email],
    "github": [list_pull_requests, merge_pull_request],
}
"""What `toolkits:` in the YAML files name; passed to Agency.from_config(..., toolkits=TOOLKITS)."""
