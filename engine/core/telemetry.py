"""Traces: spans around evaluations, runs and requests, sent through the OpenTelemetry API
when a process uses it, and nothing at all otherwise (docs/telemetry.md).

- ``span(name, attributes)`` opens a span as a context manager; the object it yields and
  ``set_attributes`` (on the current span) add attributes known only at the end (the verdict's
  status, the failure type, the action). Attributes whose value is None are left out.
- A library user's own tracer provider is respected: spans go to the API's global provider.
  This module imports ``opentelemetry`` only when something in the process has imported it
  already (the user's set-up, ``opentelemetry-instrument``, or ``configure_from_environment``);
  until then a span is a no-op costing a dictionary look-up, and without the extra
  ``rules-engine[otel]`` nothing is ever imported.
- ``configure_from_environment()`` is for the `rules` command alone: it sets up the SDK
  (a tracer provider, the exporters ``OTEL_TRACES_EXPORTER`` names, ``otlp`` by default when
  only ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set) when the standard ``OTEL_*`` variables ask for
  traces and no provider is set yet, and returns the function that flushes them at exit.
- ``request_span(method, route, headers)`` is the span of one HTTP request to a server:
  a SERVER span named ``"{method} {route}"`` with the HTTP semantic conventions' attributes,
  continuing the caller's trace from its ``traceparent`` header; ``record_response(span,
  status)`` sets the response status (and ``error.type`` for a 5xx) at the end::

      with request_span(request.method, "/v1/evaluate", request.headers) as span:
          response = await call_next(request)
          record_response(span, response.status_code)
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol

from engine.core.redaction import scrub
from engine.core.version import VERSION

TRACER_NAME = "rules-engine"
"""The instrumentation scope: the distribution's name, with ``VERSION``."""

# Attribute names: the OpenTelemetry semantic conventions' where they define one.
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_LABEL = "gen_ai.evaluation.score.label"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
ERROR_TYPE = "error.type"
HTTP_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_STATUS = "http.response.status_code"
# ... and the engine's own for the rest.
PACK_NAME = "rules.pack.name"
PACK_VERSION = "rules.pack.version"
PACK_REVISION = "rules.pack.revision"
BLOCK = "rules.block"
ITEM = "rules.item"
ATTEMPT = "rules.attempt"
ATTEMPTS = "rules.attempts"
VERDICT_STATUS = "rules.verdict.status"
FAILURE_TYPE = "rules.failure.type"
DECISION_ACTION = "rules.decision.action"
DECISION_FINAL = "rules.decision.final"
ATTEMPT_KIND = "rules.attempt.kind"
TOKENS_ESTIMATED = "rules.usage.estimated"
COST = "rules.usage.cost"

Value = str | bool | int | float
Attributes = Mapping[str, Value | None]

_API = "opentelemetry.trace"
_tracer: Any = None


class Span(Protocol):
    """What a span offers the engine: attributes added while it is open."""

    def set_attributes(self, attributes: Attributes) -> None: ...


class _NoSpan:
    def set_attributes(self, attributes: Attributes) -> None:
        pass


NO_SPAN: Span = _NoSpan()


class _ApiSpan:
    """An OpenTelemetry span, given only the attributes that have a value."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def set_attributes(self, attributes: Attributes) -> None:
        self.span.set_attributes(_present(attributes))


def enabled() -> bool:
    """Whether spans go anywhere: the OpenTelemetry API is in use in this process."""
    return _API in sys.modules


def _present(attributes: Attributes | None) -> dict[str, Value]:
    """The attributes that have a value, each text scrubbed of secrets."""
    return {
        k: scrub(v) if isinstance(v, str) else v
        for k, v in (attributes or {}).items()
        if v is not None
    }


def _get_tracer() -> Any:
    global _tracer
    if _tracer is None:
        from opentelemetry import trace  # only once the process uses OpenTelemetry

        _tracer = trace.get_tracer(TRACER_NAME, VERSION)
    return _tracer


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: its class's qualified name."""
    kind = type(exc)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


NOTHING: AbstractContextManager[Span] = nullcontext(NO_SPAN)
"""What ``span`` is while traces are off (reusable, shared)."""


def span(
    name: str,
    attributes: Attributes | None = None,
    *,
    server: bool = False,
    headers: Mapping[str, str] | None = None,
) -> AbstractContextManager[Span]:
    """A span named ``name``, current while the block runs (spans opened inside it are its
    children). An exception leaving the block marks it failed, with ``error.type``.
    ``server``: a SERVER span; ``headers``: an incoming request's, whose trace it continues."""
    if _API not in sys.modules:
        return NOTHING
    return _api_span(name, attributes, server, headers)


@contextmanager
def _api_span(
    name: str, attributes: Attributes | None, server: bool, headers: Mapping[str, str] | None
) -> Iterator[Span]:
    from opentelemetry import trace  # the optional extra, in use in this process

    context = None
    if headers is not None:
        from opentelemetry import propagate  # the optional extra, in use in this process

        context = propagate.extract(headers)
    kind = trace.SpanKind.SERVER if server else trace.SpanKind.INTERNAL
    with _get_tracer().start_as_current_span(
        scrub(name),
        context=context,
        kind=kind,
        attributes=_present(attributes),
        record_exception=False,  # recorded below, its message scrubbed of secrets
        set_status_on_exception=False,
    ) as current:
        try:
            yield _ApiSpan(current)
        except BaseException as exc:
            current.set_attribute(ERROR_TYPE, error_type(exc))
            message = scrub(f"{type(exc).__name__}: {exc}")
            current.set_status(trace.Status(trace.StatusCode.ERROR, message))
            stacktrace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            current.record_exception(
                exc,
                {"exception.message": scrub(str(exc)), "exception.stacktrace": scrub(stacktrace)},
            )
            raise


def set_attributes(attributes: Attributes) -> None:
    """Add ``attributes`` to the current span (none when no span is open or traces are off)."""
    if _API in sys.modules:
        from opentelemetry import trace  # the optional extra, in use in this process

        trace.get_current_span().set_attributes(_present(attributes))


def request_span(
    method: str, route: str, headers: Mapping[str, str] | None = None
) -> AbstractContextManager[Span]:
    """The span of one HTTP request: ``method`` (GET, POST ...), ``route`` the route's
    template (``/v1/sessions/{session}/outputs``, never the filled-in path), ``headers`` the
    request's (a ``traceparent`` there makes the span a child of the caller's)."""
    method = method.upper()
    return span(
        f"{method} {route}",
        {HTTP_METHOD: method, HTTP_ROUTE: route},
        server=True,
        headers=headers if headers is not None else {},
    )


def record_response(current: Span, status: int, route: str | None = None) -> None:
    """The response's status on a request span; a 5xx is the request's error. ``route``:
    the template of the route the request reached, when it was known only once routed
    (the span is then named after it)."""
    current.set_attributes(
        {
            HTTP_STATUS: status,
            ERROR_TYPE: str(status) if status >= 500 else None,
            HTTP_ROUTE: route,
        }
    )
    if route is not None and isinstance(current, _ApiSpan) and current.span.is_recording():
        recorded = getattr(current.span, "attributes", None) or {}
        current.span.update_name(f"{recorded.get(HTTP_METHOD, '')} {route}".strip())


def configure_from_environment(
    environ: Mapping[str, str] = os.environ,
    warn: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
) -> Callable[[], None]:
    """For the `rules` command only: send its spans where the ``OTEL_*`` variables say, when
    they ask for traces (``OTEL_TRACES_EXPORTER`` other than ``none``, or an
    ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``) and no tracer provider is set yet. Returns the
    function that flushes and ends them (a no-op when nothing was set up). Without the extra
    ``rules-engine[otel]``, or an exporter that is not installed, ``warn`` says so once and
    the command runs without traces."""
    names = _exporter_names(environ)
    if not names:
        return _nothing
    try:
        # the optional extra, imported only when the OTEL_* variables ask for traces
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        warn(
            "rules: warning: the OTEL_* variables ask for traces, but OpenTelemetry is not "
            "installed: pip install 'rules-engine[otel]' (no traces are sent)"
        )
        return _nothing
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return _nothing  # someone set a provider already: theirs is used
    exporters = [e for e in (_exporter(name, environ, warn) for name in names) if e is not None]
    if not exporters:
        return _nothing
    named = "OTEL_SERVICE_NAME" in environ or "service.name" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": "rules"}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _nothing() -> None:
    pass


def _exporter_names(environ: Mapping[str, str]) -> list[str]:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    given = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if not given and not endpoint:
        return []
    names = [name.strip().lower() for name in (given or "otlp").split(",")]
    return [name for name in names if name and name != "none"]


def _exporter(name: str, environ: Mapping[str, str], warn: Callable[[str], None]) -> Any:
    """The span exporter the SDK's entry points register under ``name`` (``otlp``: the
    protocol ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`` names, http/protobuf by default);
    the console exporter writes to stderr, never into the command's output."""
    from importlib.metadata import entry_points  # start-up time: only when traces are asked for

    if name == "otlp":
        protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
        )
        name = "otlp_proto_grpc" if protocol.strip() == "grpc" else "otlp_proto_http"
    found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
    if not found:
        warn(
            f"rules: warning: OTEL_TRACES_EXPORTER: no span exporter {name!r} is installed "
            "(pip install 'rules-engine[otel]' brings otlp and console); its traces are not sent"
        )
        return None
    try:
        exporter_class = found[0].load()
        return exporter_class(out=sys.stderr) if name == "console" else exporter_class()
    except Exception as exc:  # a broken install or setting: the command still runs
        warn(f"rules: warning: span exporter {name!r} could not start ({exc}); not sent")
        return None
