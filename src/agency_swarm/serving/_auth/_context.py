"""What a request may carry to its turn: the run context (principal, chat, the request's `context` validated against
the schema the server declares) and, when the server allows them, `additional_instructions`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ValidationError

from ..._base._errors import ConfigError
from ._principal import RequestContext, principal_of

MAX_PROBLEMS_SHOWN = 5


@dataclass(frozen=True)
class RequestRules:
    """`context_schema`: the pydantic model a request's `context` must match (None: requests carry none).
    `allow_additional_instructions`: whether a request may add to the entry agent's instructions; whoever can
    call the server can then steer the agents (prompt injection), so only for clients trusted with that."""

    context_schema: type[BaseModel] | None = None
    allow_additional_instructions: bool = False

    def check(self) -> None:
        schema = self.context_schema
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise ConfigError("context_schema must be a pydantic BaseModel subclass (or None).")
        if not isinstance(self.allow_additional_instructions, bool):
            raise ConfigError("allow_additional_instructions must be True or False.")


def rules_of(http: Request) -> RequestRules:
    rules = getattr(http.app.state, "request_rules", None)
    return rules if isinstance(rules, RequestRules) else RequestRules()


def _problems(invalid: ValidationError) -> str:
    shown = []
    for error in invalid.errors(include_input=False, include_url=False)[:MAX_PROBLEMS_SHOWN]:
        where = ".".join(str(part) for part in ("context", *error.get("loc", ())))
        shown.append(f"{where}: {error.get('msg', '')}")
    return "; ".join(shown)


def context_data(rules: RequestRules, context: Any) -> Any:
    """A request's `context` validated against the server's schema (None for none); ConfigError (400) when the
    server takes none or it does not match."""
    if context is None:
        return None
    if rules.context_schema is None:
        raise ConfigError("This server takes no `context` with a request; leave it out.")
    try:  # strict, as JSON: what the OpenAPI document shows is what is taken (no `false` for an int)
        return rules.context_schema.model_validate_json(json.dumps(context), strict=True)
    except ValidationError as invalid:
        raise ConfigError(f"`context` does not match this server's schema: {_problems(invalid)}.") from None


def turn_options(http: Request, chat_id: str, body: BaseModel | None) -> dict[str, Any]:
    """The keyword arguments of the turn a request starts or resumes: `context` (a RequestContext) and, when
    given and allowed, `additional_instructions`. ConfigError (400) for what this server does not take."""
    rules = rules_of(http)
    data = context_data(rules, getattr(body, "context", None))
    options: dict[str, Any] = {"context": RequestContext(principal_of(http.scope), chat_id, data)}
    instructions = getattr(body, "additional_instructions", None)
    if instructions is not None:
        if not rules.allow_additional_instructions:
            raise ConfigError("This server takes no `additional_instructions`; leave them out.")
        options["additional_instructions"] = instructions
    return options


def show_context_schema(app: FastAPI, schema: type[BaseModel]) -> None:
    """The OpenAPI document shows `schema` as the `context` of the bodies that take one."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = build()
        model = schema.model_json_schema(ref_template="#/components/schemas/{model}")
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        components.update(model.pop("$defs", {}))
        components[schema.__name__] = model
        for body in ("MessageRequest", "DurableMessageRequest", "ResumeRequest"):
            fields = components.get(body, {}).get("properties", {})
            if "context" in fields:
                fields["context"] = {
                    "anyOf": [{"$ref": f"#/components/schemas/{schema.__name__}"}, {"type": "null"}],
                    "description": fields["context"].get("description", ""),
                }
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
