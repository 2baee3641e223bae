"""A remote A2A agent built only with the a2a-sdk's own server classes: it echoes each message as a completed task.
`python a2a_echo_server.py PORT [disorder]` serves it on 127.0.0.1:PORT (uvicorn) and prints "ready" once it
listens; with `disorder` its events come out of order (its answer before its start, then a second artifact)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator

import uvicorn
from a2a.helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette


class Echo(AgentExecutor):
    def __init__(self, disorder: bool = False) -> None:
        self.disorder = disorder

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(Task(id=task_id, context_id=context_id,
                                                 status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
        updater = TaskUpdater(event_queue, task_id, context_id)
        echo = [Part(text=f"echo: {context.get_user_input()}")]
        if self.disorder:  # its answer before its start, a second answer after a progress note, and the end
            await updater.add_artifact(echo, name="echo")
            await updater.start_work(new_text_message("echoing"))
            await updater.add_artifact([Part(text="(and again)")], name="echo-again")
        else:
            await updater.start_work(new_text_message("echoing"))
            await updater.add_artifact(echo, name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


def app(port: int, disorder: bool = False) -> Starlette:
    card = AgentCard(
        name="Echo", description="Says back what it is told.", version="1",
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"], skills=[AgentSkill(id="echo", name="echo", description="Echoes.")],
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(disorder), task_store=InMemoryTaskStore(), agent_card=card)
    @contextlib.asynccontextmanager
    async def ready(_: Starlette) -> AsyncIterator[None]:
        print("ready", flush=True)  # the test reads this line: the server is up (no polling)
        yield

    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    return Starlette(routes=routes, lifespan=ready)


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(port, disorder=sys.argv[2:] == ["disorder"]), host="127.0.0.1", port=port, log_level="warning")
