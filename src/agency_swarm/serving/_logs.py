"""Structured logs (`serve --log-format json`): one JSON object per line, with the request id and the principal
of the request being handled (`_telemetry._request.REQUEST`) on every line written while handling it."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from .._base._redact import redact_secrets
from .._telemetry._request import REQUEST

LOG_FORMATS = ("text", "json")
_ON = False


def json_logs_on() -> bool:
    """A JSONFormatter was made in this process (uvicorn's logging setup makes them before the app)."""
    return _ON


class JSONFormatter(logging.Formatter):
    """`{"time", "level", "logger", "message", "request_id", "principal", "exception"}`, the last three when known.
    Every logger's message and traceback is redacted (key-shaped strings, bearer tokens), as the package's own are."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        global _ON
        super().__init__()
        _ON = True

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": redact_secrets(record.getMessage()),
        }
        note = REQUEST.get()
        if note is not None:
            line["request_id"] = note.request_id
            if note.principal is not None:
                line["principal"] = note.principal
        if record.exc_info:
            line["exception"] = redact_secrets(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's `log_config` for `log_format`: None keeps uvicorn's own (text); json sends every logger's lines
    (uvicorn's, the access log, the package's, the root's) through JSONFormatter to stderr."""
    if log_format == "text":
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JSONFormatter"}},
        "handlers": {"default": handler},
        "loggers": {
            name: {"handlers": ["default"], "level": "INFO", "propagate": False}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "agency_swarm")
        },
        "root": {"handlers": ["default"], "level": "INFO"},
    }
