"""Serving an agency over HTTP: a FastAPI app (JSON and Server-Sent Events) and `agency-swarm serve` with uvicorn.

```python
from agency_swarm import Agency, Agent
from agency_swarm.serving import AuthSettings, create_app

def build_agency(store):  # called once per worker process, with that worker's store
    ceo = Agent(name="CEO", model="gpt-4.1-mini", instructions="...")
    return Agency(ceo, thread_store=store)

auth = AuthSettings(jwks_url="https://id.example/.well-known/jwks.json", issuer="https://id.example/",
                    audience="agency-api")
app = create_app(build_agency, store="postgresql://app@db:5432/app", auth=auth)
```

Every chat belongs to the principal (a JWT's `sub`, or a static token's name) that posted its first message; tools
read the caller from the run context, a `RequestContext`.

Endpoints (all JSON unless said; every error is `{"error": {"type", "message", ...}}` with a 4xx/5xx status):
`GET /chats`, `POST /chats/{chat_id}/messages`, `POST /chats/{chat_id}/messages:stream` (SSE),
`POST /chats/{chat_id}/resume`, `POST /chats/{chat_id}/resume:stream` (SSE), `GET /chats/{chat_id}/threads`,
`DELETE /chats/{chat_id}`, `POST /chats/{chat_id}/turns/{turn_id}:cancel`, `GET /healthz`, `GET /openapi.json`;
with `ag_ui=True`, `POST /ag-ui` (AG-UI, docs/ag-ui.md). A message may also come as multipart/form-data, its images
and files as file parts. `create_app({name: factory, ...})` serves several agencies, each under `/<name>`;
`cors_origins=[...]` allows those browser origins. docs/design/serving.md says why it works the way it does.
"""

from .._base._extras import require_extra

require_extra("serve", "fastapi", "python_multipart", needed_by="agency_swarm.serving")  # before what imports them

from ._app import DEFAULT_MAX_BODY_BYTES, AgencyFactory, create_app, open_store  # noqa: E402
from ._auth._chats import ChatListResponse, ChatSummary  # noqa: E402
from ._auth._principal import Principal, RequestContext  # noqa: E402
from ._auth._settings import AuthSettings  # noqa: E402
from ._bodies import ErrorResponse, MessageRequest, ResumeRequest, RunResultResponse, ThreadsResponse  # noqa: E402
from ._health import StoreHealth  # noqa: E402
from ._serve import ServeSettings, app_from_env, serve  # noqa: E402

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "AgencyFactory",
    "AuthSettings",
    "ChatListResponse",
    "ChatSummary",
    "ErrorResponse",
    "MessageRequest",
    "Principal",
    "RequestContext",
    "ResumeRequest",
    "RunResultResponse",
    "ServeSettings",
    "StoreHealth",
    "ThreadsResponse",
    "app_from_env",
    "create_app",
    "open_store",
    "serve",
]
