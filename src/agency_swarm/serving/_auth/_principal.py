"""Principal (who calls) and RequestContext (what tools, guardrails and instructions see of the request)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from starlette.types import Scope

C = TypeVar("C")

PRINCIPAL_KEY = "agency_swarm.principal"
"""Where the authentication guard puts the caller's Principal in the ASGI scope."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who calls: `name` is a static token's principal or a JWT's `sub`. `scopes` come from the JWT's `scope`
    (space-separated) or `scp` claim; `claims` are the verified JWT's claims ({} for a static token; read them, do
    not change them). `admin` may read every chat (the configured admin scope, or an admin principal)."""

    name: str
    scopes: frozenset[str] = frozenset()
    claims: dict[str, Any] = field(default_factory=dict)
    admin: bool = False


ANONYMOUS = Principal("anonymous", admin=True)
"""The caller of a server without authentication: one principal, who may read every chat."""


@dataclass(frozen=True, slots=True)
class RequestContext(Generic[C]):
    """The run context (`RunContextWrapper.context`) of a turn started over HTTP: the caller, the chat, and `data`,
    the request's `context` validated against the schema the server declares (`create_app(context_schema=...)`),
    None when the request has none. A tool takes `ctx: RunContextWrapper[RequestContext[MyContext]]` and may
    authorize by `ctx.context.principal`.

    In durable mode it is stored with the turn (pickled): the worker that runs the turn sees the same."""

    principal: Principal
    chat_id: str
    data: C | None = None


def principal_of(scope: Scope) -> Principal:
    """The request's principal, as the authentication guard found it (ANONYMOUS when the app has no
    authentication). A request that did not pass the guard has none: LookupError, never a default."""
    principal = scope.get(PRINCIPAL_KEY)
    if not isinstance(principal, Principal):
        raise LookupError("The request has no principal: it did not pass the authentication guard.")
    return principal
