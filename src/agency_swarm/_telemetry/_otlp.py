"""Light spans to OTLP/HTTP: one protobuf `ExportTraceServiceRequest` per batch (written by `_wire`), posted with
requests to the endpoint the standard `OTEL_EXPORTER_OTLP_*` variables name, retried on transient failures."""

from __future__ import annotations

import atexit
import gzip
import logging
import os
import random
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import requests
from opentelemetry.sdk.trace import SpanLimits, sampling

from ._batch import SpanBatcher
from ._light import LightSpan, LightTracer
from ._wire import SpanWriter

_logger = logging.getLogger(__name__)

TRACES_PATH = "v1/traces"
DEFAULT_ENDPOINT = "http://localhost:4318"
DEFAULT_TIMEOUT_S = 10.0
RETRYABLE = frozenset({408, 429, 502, 503, 504})
MAX_ATTEMPTS = 6


# -- the standard variables ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportSettings:
    """Where and how batches go; `headers` (which may hold keys) is left out of the repr."""

    endpoint: str
    headers: dict[str, str] = field(repr=False)
    timeout: float
    compression: str
    verify: bool | str
    cert: str | tuple[str, str] | None


def _variable(env: Mapping[str, str], name: str) -> str:
    """The traces-specific variable, else the general one (`OTEL_EXPORTER_OTLP_TRACES_X`, `OTEL_EXPORTER_OTLP_X`)."""
    return env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}", "").strip() or env.get(f"OTEL_EXPORTER_OTLP_{name}", "").strip()


def parse_headers(raw: str) -> dict[str, str]:
    """`key=value` pairs separated by commas, each part URL-encoded; names lowercased, malformed pairs skipped."""
    headers: dict[str, str] = {}
    for pair in raw.split(","):
        name, equals, value = pair.partition("=")
        name = unquote(name).strip().lower()
        if not equals or not name:
            if pair.strip():
                _logger.warning("A malformed OTLP header entry is skipped (it needs name=value).")
            continue
        headers[name] = unquote(value).strip()
    return headers


def _timeout(env: Mapping[str, str]) -> float:
    """Seconds, as the OpenTelemetry SDK's OTLP/HTTP exporter reads the variable."""
    raw = _variable(env, "TIMEOUT")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        _logger.warning("Invalid OTLP timeout %r; using %s seconds.", raw, DEFAULT_TIMEOUT_S)
        return DEFAULT_TIMEOUT_S


def _compression(env: Mapping[str, str]) -> str:
    value = _variable(env, "COMPRESSION").lower() or "none"
    if value not in ("gzip", "deflate", "none"):
        _logger.warning("Unsupported OTLP compression %r; sending uncompressed.", value)
        return "none"
    return value


def settings_from_env(environ: Mapping[str, str] | None = None) -> ExportSettings:
    env = os.environ if environ is None else environ
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not endpoint:
        base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
        endpoint = f"{base.removesuffix('/')}/{TRACES_PATH}"
    client_cert, client_key = _variable(env, "CLIENT_CERTIFICATE"), _variable(env, "CLIENT_KEY")
    return ExportSettings(
        endpoint=endpoint, headers=parse_headers(_variable(env, "HEADERS")), timeout=_timeout(env),
        compression=_compression(env), verify=_variable(env, "CERTIFICATE") or True,
        cert=(client_cert, client_key) if client_cert and client_key else (client_cert or None),
    )


# -- HTTP ----------------------------------------------------------------------------------------------------------


def _retry_after(response: requests.Response) -> float | None:
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class Sender:
    """Posts serialized batches; retries 408/429/502/503/504 and connection errors with exponential backoff (or the
    server's Retry-After) while the timeout lasts. A failed export is logged once, with its status code only."""

    def __init__(self, settings: ExportSettings) -> None:
        self.settings = settings
        self.session = self.new_session()
        self.headers = {"Content-Type": "application/x-protobuf", **settings.headers}
        if settings.compression != "none":
            self.headers["Content-Encoding"] = settings.compression
        self.stopping = threading.Event()
        """Set: no more waiting between attempts (shutdown)."""
        self._template = self.session.prepare_request(
            requests.Request("POST", settings.endpoint, headers=self.headers, data=b""))
        """The request every post sends, prepared once (the session's headers and .netrc credentials merged in):
        a post copies it and sets the body, and goes to the session's adapter directly, not through the whole of
        `Session.request`, which prepares and merges it all again each time."""

    def new_session(self) -> requests.Session:
        """A session (its pooled connections) of this process's own. What requests reads from the environment for
        the endpoint (proxies, a CA bundle, .netrc credentials) is read once here, not again for every post."""
        session = requests.Session()
        endpoint = self.settings.endpoint
        found = session.merge_environment_settings(endpoint, {}, None, self.settings.verify, self.settings.cert)
        session.proxies, session.verify, session.cert = found["proxies"], found["verify"], found["cert"]
        session.auth = requests.utils.get_netrc_auth(endpoint)
        session.trust_env = False
        return session

    def _compressed(self, body: bytes) -> bytes:
        if self.settings.compression == "gzip":
            return gzip.compress(body, compresslevel=6, mtime=0)
        if self.settings.compression == "deflate":
            return zlib.compress(body)
        return body

    def send(self, body: bytes) -> bool:
        data, deadline = self._compressed(body), time.monotonic() + self.settings.timeout
        for attempt in range(MAX_ATTEMPTS):
            failure, retryable, asked = self._attempt(data, deadline)
            if failure is None:
                return True
            if not retryable or attempt == MAX_ATTEMPTS - 1:
                break
            delay = 2.0 ** attempt * random.uniform(0.8, 1.2) if asked is None else asked
            if delay > deadline - time.monotonic() or self.stopping.wait(delay):
                break
        _logger.error("Span export to the OTLP endpoint failed (%s).", failure)
        return False

    def _post(self, data: bytes, timeout: float) -> requests.Response:
        """One post of `data`; a redirect is followed as `Session.post` follows it."""
        session, request = self.session, self._template.copy()
        request.prepare_body(data, None)
        adapter = session.get_adapter(request.url or "")
        response = adapter.send(request, timeout=timeout, verify=session.verify, cert=session.cert,
                                proxies=session.proxies)
        _ = response.content  # read whole: the connection goes back to the pool
        if response.is_redirect:
            response.close()
            return session.post(self.settings.endpoint, data=data, headers=self.headers, timeout=timeout)
        return response

    def _attempt(self, data: bytes, deadline: float) -> tuple[str | None, bool, float | None]:
        """(what failed or None when sent, whether to retry, the wait the server asked for in Retry-After)."""
        try:
            response = self._post(data, max(deadline - time.monotonic(), 0.001))
        except (requests.ConnectionError, requests.Timeout) as error:
            return type(error).__name__, True, None
        except requests.RequestException as error:
            return type(error).__name__, False, None
        response.close()
        status = response.status_code
        if 200 <= status < 300:
            return None, False, None
        return f"HTTP {status}", status in RETRYABLE, _retry_after(response)


# -- protobuf ------------------------------------------------------------------------------------------------------


class Encoder:
    """Batches of ended LightSpans as one serialized `ExportTraceServiceRequest`: the resource (read from the
    provider, encoded again only when it changes), one scope, and each span (`_wire`)."""

    def __init__(
        self, resource_of: Callable[[], Any], scope: tuple[str, str], span_length_limit: int | None = None,
        length_limit: int | None = None,
    ) -> None:
        self.resource_of = resource_of
        self.writer = SpanWriter(span_length_limit, length_limit)
        self.scope = self.writer.scope(*scope)
        self._resource: tuple[Any, bytes] | None = None

    def resource(self) -> bytes:
        current = self.resource_of()
        if self._resource is None or self._resource[0] is not current:
            self._resource = (current, self.writer.resource(current.attributes))
        return self._resource[1]

    def encode(self, spans: Iterable[LightSpan]) -> bytes:
        return self.writer.request(self.resource(), self.scope, self.writer.spans(spans))


def exporter(encoder: Encoder, sender: Sender) -> Callable[[list[LightSpan]], None]:
    """What the batcher calls with each batch: encode once, send."""

    def export(batch: list[LightSpan]) -> None:
        sender.send(encoder.encode(batch))

    return export


class LightPipeline:
    """The tracer made from the environment: LightSpans sampled by the provider's sampler, batched, encoded and
    posted here; the SDK `TracerProvider` is only where the sampler, ids and resource come from. Flushed at
    interpreter exit."""

    def __init__(self, provider: Any, scope: tuple[str, str], environ: Mapping[str, str] | None = None) -> None:
        limits = SpanLimits()
        self.sender = Sender(settings_from_env(environ))
        self.encoder = Encoder(lambda: provider.resource, scope, limits.max_span_attribute_length,
                               limits.max_attribute_length)
        self.batcher = SpanBatcher(exporter(self.encoder, self.sender), environ)
        self.tracer = LightTracer(
            provider.sampler, provider.id_generator, limits, self.batcher.add,
            roots_sampled=any(provider.sampler is sampler for sampler in (sampling.ALWAYS_ON, sampling.DEFAULT_ON)),
        )
        atexit.register(self.shutdown)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_in_child(weakref.WeakMethod(self._forked)))

    def _forked(self) -> None:
        """In a forked child: a connection and export thread of its own (the parent's are not its to use)."""
        self.sender.session = self.sender.new_session()
        self.batcher.restart()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.batcher.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Send what is queued (one attempt each: no waiting to retry) and stop."""
        self.sender.stopping.set()
        self.batcher.shutdown(timeout_millis)
        atexit.unregister(self.shutdown)


def _in_child(method: weakref.WeakMethod[Callable[[], None]]) -> Callable[[], None]:
    def after_fork() -> None:
        alive = method()
        if alive is not None:
            alive()

    return after_fork
