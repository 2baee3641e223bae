"""Parity for output items other than messages and function calls: reasoning, hosted tool calls, hosted MCP,
and calls that need a local-execution tool (computer, local shell, shell, apply_patch)."""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    ApplyPatchOperation,
    ApplyPatchTool,
    CodeInterpreterTool,
    Computer,
    ComputerTool,
    FileSearchTool,
    HostedMCPTool,
    ImageGenerationTool,
    LocalShellCommandRequest,
    LocalShellTool,
    MCPToolApprovalFunctionResult,
    MCPToolApprovalRequest,
    ShellCommandRequest,
    ShellTool,
    WebSearchTool,
    function_tool,
)

from parity.harness import (
    Decision,
    Kit,
    Outcome,
    Scenario,
    apply_patch_call,
    call,
    code_interpreter,
    computer_call,
    file_search,
    image_generation,
    local_shell_call,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    msg,
    reasoning,
    run_and_compare,
    shell_call,
    shell_call_output,
    web_search,
)


def _approved_note_tool(kit: Kit) -> Any:
    @function_tool(needs_approval=True)
    def note(text: str) -> str:
        """Write a note."""
        kit.ran("note", {"text": text})
        return "noted"

    return note


def _note_tool(kit: Kit) -> Any:
    @function_tool
    def note(text: str) -> str:
        """Write a note down."""
        kit.ran("note", {"text": text})
        return f"noted: {text}"

    return note


def _mcp(kit: Kit, *, require_approval: str = "never", decide: bool | None = None) -> HostedMCPTool:
    config: Any = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse",
                   "require_approval": require_approval}
    if decide is None:
        return HostedMCPTool(tool_config=config)

    def on_approval_request(request: MCPToolApprovalRequest) -> MCPToolApprovalFunctionResult:
        kit.ran("on_approval_request", {"name": request.data.name, "arguments": request.data.arguments})
        return {"approve": True} if decide else {"approve": False, "reason": "not allowed today"}

    return HostedMCPTool(tool_config=config, on_approval_request=on_approval_request)


class FakeComputer(Computer):
    def __init__(self, kit: Kit) -> None:
        self.kit = kit

    @property
    def environment(self) -> Any:
        return "linux"

    @property
    def dimensions(self) -> tuple[int, int]:
        return (800, 600)

    def screenshot(self) -> str:
        self.kit.ran("screenshot", {})
        return "iVBORw0KGgo="

    def click(self, x: int, y: int, button: Any) -> None:
        self.kit.ran("click", {"x": x, "y": y, "button": button})

    def double_click(self, x: int, y: int) -> None:
        self.kit.ran("double_click", {"x": x, "y": y})

    def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int) -> None:
        self.kit.ran("scroll", {"x": x, "y": y})

    def type(self, text: str) -> None:
        self.kit.ran("type", {"text": text})

    def wait(self) -> None:
        self.kit.ran("wait", {})

    def move(self, x: int, y: int) -> None:
        self.kit.ran("move", {"x": x, "y": y})

    def keypress(self, keys: list[str]) -> None:
        self.kit.ran("keypress", {"keys": keys})

    def drag(self, path: list[tuple[int, int]]) -> None:
        self.kit.ran("drag", {"path": path})


class FakeEditor:
    def __init__(self, kit: Kit) -> None:
        self.kit = kit

    def create_file(self, operation: ApplyPatchOperation) -> str:
        self.kit.ran("create_file", {"path": operation.path, "diff": operation.diff})
        return f"created {operation.path}"

    def update_file(self, operation: ApplyPatchOperation) -> str:
        self.kit.ran("update_file", {"path": operation.path})
        return f"updated {operation.path}"

    def delete_file(self, operation: ApplyPatchOperation) -> str:
        self.kit.ran("delete_file", {"path": operation.path})
        return f"deleted {operation.path}"


def computer_tool(kit: Kit) -> dict[str, Any]:
    return {"tools": [ComputerTool(computer=FakeComputer(kit))]}


def local_shell_tool(kit: Kit) -> dict[str, Any]:
    def execute(request: LocalShellCommandRequest) -> str:
        kit.ran("local_shell", {"command": list(request.data.action.command)})
        return "hi\n"

    return {"tools": [LocalShellTool(executor=execute)]}


def shell_tool(kit: Kit) -> dict[str, Any]:
    def execute(request: ShellCommandRequest) -> str:
        kit.ran("shell", {"commands": list(request.data.action.commands)})
        return "hi\n"

    return {"tools": [ShellTool(executor=execute)]}


def apply_patch_tool(kit: Kit) -> dict[str, Any]:
    return {"tools": [ApplyPatchTool(editor=FakeEditor(kit))]}


def _reasoning_replayed(runner: Outcome, ours: Outcome) -> None:
    """The reasoning items reach the next model call exactly as the model produced them, before what followed."""
    for outcome in (runner, ours):
        second = outcome.calls[1].input
        kinds = [item.get("type", "message") for item in second]
        assert kinds[1:4] == ["reasoning", "function_call", "function_call_output"], (outcome.side, kinds)
        assert second[1] == reasoning("rs_1").model_dump(exclude_unset=True), (outcome.side, second[1])


def _nothing_left_unanswered(runner: Outcome, ours: Outcome) -> None:
    """Ours must never end a turn with "" and a call left without its output."""
    if ours.error is None:
        assert ours.final_output != "", "ours ended the turn with '' although the model's call got no answer"
        calls = {item.get("call_id") for item in ours.items or [] if str(item.get("type", "")).endswith("_call")}
        answered = {item.get("call_id") for item in ours.items or [] if str(item.get("type", "")).endswith("_output")}
        assert calls <= answered, f"ours left calls without output: {sorted(calls - answered)}"


SCENARIOS = [
    Scenario(
        "reasoning_replayed_to_next_call",
        lambda: [[reasoning("rs_1"), call("note", {"text": "x"})], [reasoning("rs_2", "done"), msg("Noted.", "msg_2")]],
        lambda kit: {"tools": [_note_tool(kit)]}, check=_reasoning_replayed,
    ),
    Scenario(
        "reasoning_without_encrypted_content",
        lambda: [[reasoning("rs_1", encrypted=None), msg("Plain answer.")]],
        lambda kit: {},
    ),
    Scenario(
        "web_search_call",
        lambda: [[web_search(), msg("Sunny in Paris.")]],
        lambda kit: {"tools": [WebSearchTool()]},
    ),
    Scenario(
        "hosted_call_then_next_response",
        lambda: [[web_search()], [msg("Sunny in Paris.", "msg_2")]],
        lambda kit: {"tools": [WebSearchTool()]},
    ),
    Scenario(
        "file_search_call",
        lambda: [[file_search(), msg("Refunds take 5 days.")]],
        lambda kit: {"tools": [FileSearchTool(vector_store_ids=["vs_1"], max_num_results=3)]},
    ),
    Scenario(
        "code_interpreter_call",
        lambda: [[code_interpreter(), msg("The result is 42.")]],
        lambda kit: {"tools": [CodeInterpreterTool(tool_config={"type": "code_interpreter",
                                                                "container": {"type": "auto"}})]},
    ),
    Scenario(
        "image_generation_call",
        lambda: [[image_generation(), msg("Here is your image.")]],
        lambda kit: {"tools": [ImageGenerationTool(tool_config={"type": "image_generation"})]},
    ),
    Scenario(
        "hosted_mcp_list_and_call",
        lambda: [[mcp_list_tools(), mcp_call(), msg("The docs say: found it.")]],
        lambda kit: {"tools": [_mcp(kit)]},
    ),
    Scenario(
        "mcp_approval_request_approved",
        lambda: [[mcp_approval_request()], [mcp_call(), msg("Looked it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit, require_approval="always", decide=True)]},
    ),
    Scenario(
        "mcp_approval_request_rejected",
        lambda: [[mcp_approval_request()], [msg("I was not allowed to look it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit, require_approval="always", decide=False)]},
    ),
    Scenario(
        "mcp_approval_request_without_callback",
        lambda: [[mcp_approval_request()], [mcp_call(), msg("Looked it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit, require_approval="always")]},
        differences=("resume_announces_calls",), decisions=[Decision(approve=["mcpr_1"])],
    ),
    Scenario(
        "mcp_approval_request_without_callback_rejected",
        lambda: [[mcp_approval_request()], [msg("I was not allowed to look it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit, require_approval="always")]},
        differences=("resume_announces_calls",), decisions=[Decision(reject=["mcpr_1"])],
    ),
    Scenario(
        "mcp_approval_request_without_callback_rejected_with_a_reason",
        lambda: [[mcp_approval_request()], [msg("I was not allowed to look it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit, require_approval="always")]},
        differences=("resume_announces_calls",), decisions=[Decision(reject={"mcpr_1": "Not today."})],
    ),
    Scenario(
        "mcp_approval_request_despite_never",
        lambda: [[mcp_approval_request()], [mcp_call(), msg("Looked it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit)]},
        differences=("resume_announces_calls",), decisions=[Decision(approve=["mcpr_1"])],
    ),
    Scenario(
        "mcp_approval_request_despite_never_undecided_then_rejected",
        lambda: [[mcp_approval_request()], [msg("I was not allowed to look it up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit)]},
        differences=("resume_announces_calls",), decisions=[Decision(), Decision(reject=["mcpr_1"])],
    ),
    Scenario(
        "mcp_approval_request_beside_a_function_call_needing_approval",
        lambda: [[mcp_approval_request(), call("note", {"text": "hi"})], [msg("Noted and looked up.", "msg_2")]],
        lambda kit: {"tools": [_mcp(kit), _approved_note_tool(kit)]},
        differences=("resume_announces_calls",), decisions=[Decision(approve=["call_1"], reject=["mcpr_1"])],
    ),
    Scenario(
        "hosted_shell_call",
        lambda: [[shell_call(), shell_call_output()], [msg("The container said hi.", "msg_2")]],
        lambda kit: {"tools": [ShellTool(environment={"type": "container_auto"})]},
    ),
    Scenario(
        "computer_tool_refused",
        lambda: [[computer_call()], [msg("Clicked.", "msg_2")]], computer_tool,
        differences=("local_tool_refused",),
    ),
    Scenario(
        "local_shell_tool_refused",
        lambda: [[local_shell_call()], [msg("Ran it.", "msg_2")]], local_shell_tool,
        differences=("local_tool_refused",),
    ),
    Scenario(
        "shell_tool_refused",
        lambda: [[shell_call()], [msg("Ran it.", "msg_2")]], shell_tool,
        differences=("local_tool_refused",),
    ),
    Scenario(
        "apply_patch_tool_refused",
        lambda: [[apply_patch_call()], [msg("Patched.", "msg_2")]], apply_patch_tool,
        differences=("local_tool_refused",),
    ),
    Scenario(
        "computer_call_without_tool",
        lambda: [[computer_call()], [msg("Clicked.", "msg_2")]], lambda kit: {},
        check=_nothing_left_unanswered,
    ),
    Scenario(
        "local_shell_call_without_tool",
        lambda: [[local_shell_call()], [msg("Ran it.", "msg_2")]], lambda kit: {},
        check=_nothing_left_unanswered,
    ),
    Scenario(
        "shell_call_without_tool",
        lambda: [[shell_call()], [msg("Ran it.", "msg_2")]], lambda kit: {},
        check=_nothing_left_unanswered,
    ),
    Scenario(
        "apply_patch_call_without_tool",
        lambda: [[apply_patch_call()], [msg("Patched.", "msg_2")]], lambda kit: {},
        check=_nothing_left_unanswered,
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_parity(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
