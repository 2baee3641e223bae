"""The A2A side of the app: the request handler (the a2a-sdk's, with our checks), its routes and the Agent Card."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import Event as A2AEvent
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.task import apply_history_length
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route

from ..._agency._agency import Agency
from ..._base._errors import InvalidChatId
from ..._threads._manager import check_chat_id
from ..._threads._store import ThreadStore
from ._executor import AgencyExecutor
from ._tasks import RESERVED, StoreTasks, new_task_id

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"})


class TaskIds(RequestContextBuilder):
    """Request contexts whose new task ids come from the message's id: a client sending the same message again (a
    retry) names the same task, so it never starts a second turn."""

    async def build(
        self, context: ServerCallContext, params: SendMessageRequest | None = None, task_id: str | None = None,
        context_id: str | None = None, task: Task | None = None,
    ) -> RequestContext:
        if params is not None and not task_id:
            context_id = context_id or uuid.uuid4().hex
            task_id = new_task_id(context_id, params.message.message_id)
        return RequestContext(call_context=context, request=params, task_id=task_id, context_id=context_id, task=task)


class AgencyRequestHandler(DefaultRequestHandler):
    """The a2a-sdk's request handling, after our checks: the context id is a chat id we serve, a task id names a
    task of that chat (else: not found, as every route answers for another chat's things), and a message sent again
    returns the task it started."""

    tasks: StoreTasks

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        done = await self._checked(params)
        if done is not None:
            return apply_history_length(done, params.configuration)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent, None]:
        done = await self._checked(params)
        if done is not None:
            yield apply_history_length(done, params.configuration)
            return
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def _checked(self, params: SendMessageRequest) -> Task | None:
        """Refuse what the request may not name; the finished task a repeated message started, if any."""
        message = params.message
        if message.context_id:
            try:
                check_chat_id(message.context_id)
            except InvalidChatId as bad:
                raise InvalidParamsError(message=f"contextId is not a chat id this server takes: {bad}") from None
            if message.context_id.startswith(RESERVED):
                raise InvalidParamsError(message=f"contextId may not start with {RESERVED!r}; it is reserved.")
        if message.task_id:
            task = await self.tasks.get(message.task_id)
            if task is None or (message.context_id and task.context_id != message.context_id):
                raise TaskNotFoundError(message="Task not found in this context.")
            return None
        if message.context_id and message.message_id:
            task = await self.tasks.get(new_task_id(message.context_id, message.message_id))
            if task is not None and task.status.state in _settled_states():
                return task  # a running one is joined by the SDK; a finished or paused one is answered as it is
        return None


def _settled_states() -> set[int]:
    from a2a.types.a2a_pb2 import TaskState

    return {TaskState.Value(name) for name in TERMINAL} | {TaskState.TASK_STATE_INPUT_REQUIRED}


class A2AService:
    """The agency served over A2A: the handler on the app's store, its routes, and the card built per request."""

    card_path = CARD_PATH

    def __init__(self, agency: Agency, store: ThreadStore, *, protected: bool) -> None:
        self.agency, self.protected = agency, protected
        self.tasks = StoreTasks(store)
        self.handler = AgencyRequestHandler(
            agent_executor=AgencyExecutor(agency), task_store=self.tasks, agent_card=self.card("http://localhost"),
            request_context_builder=TaskIds(),
        )
        self.handler.tasks = self.tasks

    def mount(self, app: Any) -> frozenset[str]:
        """Add the routes to the app (outside its OpenAPI document: A2A has its own); the paths without auth."""
        app.router.routes.extend(self.routes())
        return frozenset({self.card_path})

    def routes(self) -> list[BaseRoute]:
        rest = [route for route in create_rest_routes(self.handler, path_prefix=REST_PATH)
                if not isinstance(route, Mount)]  # no tenants: a mount at /{tenant} would shadow the app's routes
        return [
            Route(CARD_PATH, self._card_route, methods=["GET"]),
            *create_jsonrpc_routes(self.handler, rpc_url=JSONRPC_PATH),
            *rest,
        ]

    async def _card_route(self, request: Request) -> JSONResponse:
        base = str(request.base_url).rstrip("/")
        return JSONResponse(agent_card_to_dict(self.card(base)))

    def card(self, base_url: str) -> AgentCard:
        """The Agent Card: the first entry agent names the agency; every entry agent is a skill."""
        entries = self.agency.entry_points
        first = entries[0]
        card = AgentCard(
            name=first.name, description=first.description or f"An agency of agents; {first.name} answers.",
            version=_version(), default_input_modes=["text/plain"], default_output_modes=["text/plain"],
            capabilities=AgentCapabilities(streaming=True),
            supported_interfaces=[
                AgentInterface(url=base_url + JSONRPC_PATH, protocol_binding=TransportProtocol.JSONRPC.value,
                               protocol_version=PROTOCOL_VERSION_1_0),
                AgentInterface(url=base_url + REST_PATH, protocol_binding=TransportProtocol.HTTP_JSON.value,
                               protocol_version=PROTOCOL_VERSION_1_0),
            ],
            skills=[
                AgentSkill(id=agent.name, name=agent.name, description=agent.description or agent.name,
                           tags=["agency_swarm"])
                for agent in entries
            ],
        )
        if self.protected:
            card.security_schemes["bearer"].CopyFrom(SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer", description="The server's token.")
            ))
            card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
        return card

    async def aclose(self) -> None:
        await self.handler.aclose()


def _version() -> str:
    try:
        return version("agency-swarm-sdk")
    except PackageNotFoundError:
        return "0"
