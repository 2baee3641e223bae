"""The A2A side of the app: the request handler (the a2a-sdk's, with our checks), its routes and the Agent Card."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import Event as A2AEvent
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
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
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route

from ..._agency._agency import Agency
from ..._base._errors import InvalidChatId
from ..._remote._protocol import message_text
from ..._threads._chat_index import title_of
from ..._threads._manager import check_chat_id
from ..._threads._store import ThreadStore
from .._auth._owners import NOT_FOUND, ChatOwners
from .._auth._principal import PRINCIPAL_KEY, Principal
from ._executor import AgencyExecutor
from ._stream import StoreEvents
from ._tasks import RESERVED, WRITING, StoreTasks, new_task_id

if TYPE_CHECKING:
    from ._durable import DurableSends

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


class PrincipalContexts(DefaultServerCallContextBuilder):
    """The a2a-sdk's call context, with the caller the authentication guard found (`PRINCIPAL_KEY` in its state)."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers")
        if isinstance(headers, dict):  # the bearer token stays with the HTTP request (the SDK reads A2A-Version)
            context.state["headers"] = {name: value for name, value in headers.items() if name != "authorization"}
        context.state[PRINCIPAL_KEY] = request.scope.get(PRINCIPAL_KEY)
        return context


class AgencyRequestHandler(DefaultRequestHandler):
    """The a2a-sdk's request handling, after our checks: the context id is a chat id we serve, and the caller's (a
    message claims a new one, `ChatOwners.claim`); a task id names a task of that chat (else: not found, as every
    route answers for another chat's things), and a message sent again returns the task it started. Reads (get,
    list, subscribe) see the tasks of the chats the caller may read; writes (send, cancel) those it may write: the
    store (`StoreTasks`) answers every other task as missing, so the a2a-sdk answers it as it does a missing one."""

    tasks: StoreTasks
    owners: ChatOwners
    durable: DurableSends | None = None
    """In durable mode: the turns are durable, and these start and cancel them."""

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        context.state[WRITING] = True
        if self.durable is not None:
            validate_proto_required_fields(params)
            return await self.durable.cancel(params, context)
        canceled: Task | None = await super().on_cancel_task(params, context)
        return canceled

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        done = await self._checked(params, context)
        if done is not None:
            return apply_history_length(done, params.configuration)
        if self.durable is not None:
            return apply_history_length(await self.durable.send(params, context), params.configuration)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent, None]:
        done = await self._checked(params, context)
        if done is not None:
            yield apply_history_length(done, params.configuration)
            return
        if self.durable is None:
            async for event in super().on_message_send_stream(params, context):
                yield event
            return
        async with contextlib.aclosing(self.durable.stream(params, context)) as events:
            async for event in events:
                yield apply_history_length(event, params.configuration) if isinstance(event, Task) else event

    async def _checked(self, params: SendMessageRequest, context: ServerCallContext) -> Task | None:
        """Refuse what the request may not name; the finished task a repeated message started, if any."""
        context.state[WRITING] = True
        if self.durable is not None:  # the a2a-sdk's checks, which its own handling of the message would make
            validate_proto_required_fields(params)
            validate_history_length(params.configuration)
        message = params.message
        if message.context_id:
            try:
                check_chat_id(message.context_id)
            except InvalidChatId as bad:
                raise InvalidParamsError(message=f"contextId is not a chat id this server takes: {bad}") from None
            if message.context_id.startswith(RESERVED):
                raise InvalidParamsError(message=f"contextId may not start with {RESERVED!r}; it is reserved.")
        if message.task_id:
            task = await self.tasks.task(message.task_id, context)
            if task is None or (message.context_id and task.context_id != message.context_id):
                raise TaskNotFoundError(message="Task not found in this context.")
            return None
        if not message.context_id:
            message.context_id = uuid.uuid4().hex  # a new chat, the caller's from here on
        principal = context.state.get(PRINCIPAL_KEY)
        title = title_of(message_text(message))
        if not isinstance(principal, Principal) or not await self.owners.claim(message.context_id, principal, title):
            raise InvalidParamsError(message=f"contextId: {NOT_FOUND}")  # what the chat routes answer (404)
        if message.message_id:
            task = await self.tasks.task(new_task_id(message.context_id, message.message_id), context)
            if task is not None and task.status.state in _settled_states():
                return task  # a running one is joined by the SDK; a finished or paused one is answered as it is
        return None


def _settled_states() -> set[int]:
    from a2a.types.a2a_pb2 import TaskState

    return {TaskState.Value(name) for name in TERMINAL} | {TaskState.TASK_STATE_INPUT_REQUIRED}


class A2AService:
    """The agency served over A2A: the handler on the app's store, its routes, and the card built per request."""

    card_path = CARD_PATH

    def __init__(
        self, agency: Agency, store: ThreadStore, owners: ChatOwners, *, protected: bool, turns: Any = None
    ) -> None:
        """`turns`: the app's DurableTurns in durable mode (tasks' turns are durable), else None."""
        self.agency, self.protected = agency, protected
        self.tasks = StoreTasks(store, owners)
        executor = AgencyExecutor(agency, self.tasks)
        self.handler = AgencyRequestHandler(
            agent_executor=executor, task_store=self.tasks, agent_card=self.card("http://localhost"),
            request_context_builder=TaskIds(), event_stream=StoreEvents(self.tasks),
        )
        self.handler.tasks, self.handler.owners = self.tasks, owners
        if turns is not None:
            from ._durable import DurableSends  # dbos is imported only in durable mode: an optional extra

            self.handler.durable = DurableSends(executor, self.tasks, turns)

    def mount(self, app: Any) -> frozenset[str]:
        """Add the routes to the app (outside its OpenAPI document: A2A has its own); the paths without auth."""
        app.router.routes.extend(self.routes())
        return frozenset({self.card_path})

    def routes(self) -> list[BaseRoute]:
        contexts = PrincipalContexts()
        rest = [route for route in create_rest_routes(self.handler, path_prefix=REST_PATH, context_builder=contexts)
                if not isinstance(route, Mount)]  # no tenants: a mount at /{tenant} would shadow the app's routes
        return [
            Route(CARD_PATH, self._card_route, methods=["GET"]),
            *create_jsonrpc_routes(self.handler, rpc_url=JSONRPC_PATH, context_builder=contexts),
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
