"""Keeping credentials out of logs and error texts: one redaction of key-shaped strings and bearer tokens."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterable

REDACTED = "***"
_KEY_PATTERN = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-*]{6,}")
"""OpenAI-style API keys (sk-..., sk-proj-..., rk-..., pk-...)."""
_BEARER_PATTERN = re.compile(r"\b(Bearer)(\s+|%20)[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
"""An Authorization header's credentials, wherever a message or a traceback quotes one."""


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without any of `secrets` (longest first) and without anything shaped like an API key or a bearer
    token. Idempotent: a redacted text stays as it is."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, REDACTED)
    text = _KEY_PATTERN.sub(lambda match: f"{match.group(1)}-{REDACTED}", text)
    return _BEARER_PATTERN.sub(lambda match: f"{match.group(1)}{match.group(2)}{REDACTED}", text)


class SecretFreeRecords(logging.Filter):
    """Redacts each record of the logger it is attached to: its message, its exception's traceback (the exception
    text of a model's or a tool's own code is quoted word for word there) and its stack. A record with nothing to
    redact passes untouched; one with a redacted traceback carries it as `exc_text` and no longer its exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it itself, at format time
            return True
        clean = redact_secrets(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            shown = record.exc_text or "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            redacted = redact_secrets(shown)
            if redacted != shown:
                record.exc_text, record.exc_info = redacted, None
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


_FILTER = SecretFreeRecords()


def secret_free_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` with the redaction attached (once): filters apply to the logger a record is made on,
    not to its parents, so every logger of ours gets it."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


# The library's own top logger (modules that call logging.getLogger("agency_swarm") directly) and the SDK's, which
# logs a failing tool's error when OPENAI_AGENTS_DONT_LOG_TOOL_DATA is off: ours run its tools.
for _name in ("agency_swarm", "openai.agents"):
    secret_free_logger(_name)
