"""Hosted MCP approval requests: answered by the user through resume, by the server's on_approval_request, or waiting.

As under `Runner`: a request that nobody decides (its server has no `on_approval_request`, whatever its
`require_approval` says) pauses the turn with an interruption named by the request's id, and resume answers it with
the `mcp_approval_response` item `Runner` appends (`approve`, and `reason` for a rejection with a message). The
thread keeps the request (the model's own item) and an `AWAITING_APPROVAL` mark with its id; the request has no
response until someone decides, so the pause survives a restart like a function call's.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from agents import HostedMCPTool, MCPToolApprovalRequest, ModelBehaviorError
from openai.types.responses.response_output_item import McpApprovalRequest

from .._base._events import ApprovalRequested
from .._threads._checks import AWAITING_APPROVAL
from .._threads._store import Item
from .._threads._thread import ConversationThread
from .._threads._thread_items import call_mark, unanswered_requests
from ._model_call import emit_hosted
from ._results import Interruption
from ._setup import Setup
from ._state import Run, Turn


async def answer_mcp_approvals(turn: Turn, setup: Setup, requests: Sequence[Any], *, ask: bool = True) -> bool:
    """Answer each request (the user's decision, else its server's callback); the answers join the thread and the
    stream. A request nobody decides waits: True (the turn pauses).

    Without `ask` (function calls of the response wait for approval) a server's callback is not asked yet: as under
    `Runner`, it decides when the turn goes on, with the context it goes on with, and its answer follows the calls'
    outputs (`callback_requests` finds the request again)."""
    servers = _servers(setup)
    run = turn.run
    responses: list[dict[str, Any]] = []
    waiting: list[Any] = []
    for request in requests:
        server = servers.get(request.server_label)
        if server is None:
            raise ModelBehaviorError(f"MCP server label {request.server_label} not found")
        response = _decided(run, request)
        if response is None and server.on_approval_request is not None:
            if not ask:
                continue
            response = await _asked(server, request, run)
        if response is None:
            waiting.append(request)
        else:
            responses.append(response)
    marks = [call_mark(AWAITING_APPROVAL, request.id, turn.steps) for request in waiting]
    stored = turn.thread.add([*responses, *marks])
    turn.thread.has_marks = turn.thread.has_marks or bool(marks)
    if stored is not None:
        await stored
    if turn.emit is not None:
        await emit_hosted(turn, responses)
    for request in waiting:
        await _wait(turn, request)
    return bool(waiting)


def _servers(setup: Setup) -> dict[Any, HostedMCPTool]:
    return {tool.tool_config.get("server_label"): tool for tool in setup.tools if isinstance(tool, HostedMCPTool)}


def callback_requests(items: list[Item], setup: Setup) -> list[McpApprovalRequest]:
    """The turn's unanswered MCP approval requests that their server's callback decides (left for when a turn paused
    for its function calls goes on: `answer_mcp_approvals` without `ask`)."""
    start = next((index for index in range(len(items) - 1, -1, -1)
                  if items[index].get("role") == "user" and "type" not in items[index]), 0)
    servers = _servers(setup)
    return [
        McpApprovalRequest.model_validate(item) for item in unanswered_requests(items[start:])
        if getattr(servers.get(item.get("server_label")), "on_approval_request", None) is not None
    ]


def waiting_requests(thread: ConversationThread, awaiting: set[str]) -> list[McpApprovalRequest]:
    """The thread's MCP approval requests still waiting for a decision (marked as waiting, not answered)."""
    requests = thread.unanswered_requests()
    return [McpApprovalRequest.model_validate(item) for item in requests if str(item.get("id")) in awaiting]


def _decided(run: Run, request: Any) -> dict[str, Any] | None:
    """The user's decision on the request from resume, as the response item `Runner` appends; None: undecided."""
    if request.id in run.approved:
        return _response(request.id, True, None)
    rejected: Any = run.rejected
    if request.id in rejected:
        return _response(request.id, False, rejected.get(request.id) if isinstance(rejected, Mapping) else None)
    return None


async def _asked(server: HostedMCPTool, request: Any, run: Run) -> dict[str, Any]:
    """The server's on_approval_request decides (as under `Runner`)."""
    assert server.on_approval_request is not None
    decided = server.on_approval_request(MCPToolApprovalRequest(run.context(), request))
    result = await decided if inspect.isawaitable(decided) else decided
    return _response(request.id, bool(result["approve"]), result.get("reason"))


def _response(request_id: str, approve: bool, reason: str | None) -> dict[str, Any]:
    response: dict[str, Any] = {"approval_request_id": request_id, "approve": approve, "type": "mcp_approval_response"}
    if not approve and reason:
        response["reason"] = reason
    return response


async def _wait(turn: Turn, request: Any) -> None:
    """The request joins the turn's interruptions (and `approval_requested` is emitted): resume decides."""
    run, agent = turn.run, turn.agent.name
    arguments = str(request.arguments or "")
    run.interruptions.append(Interruption(
        agent=agent, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, call_id=request.id, tool=request.name,
        arguments=arguments,
    ))
    if turn.emit is not None:
        await turn.emit(ApprovalRequested(
            agent=agent, caller=turn.caller, depth=turn.depth, chat_id=run.chat_id, tool=request.name,
            call_id=request.id, arguments=arguments,
        ))
