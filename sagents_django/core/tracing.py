"""OpenTelemetry spans for turns, model calls and tool calls, when the host traces.

Why this shape: most sites do not trace, and the core must cost them nothing and
import nothing for it (the OpenTelemetry API is often installed anyway: litellm's
MCP support requires it). So this module never imports OpenTelemetry. It uses
``opentelemetry.trace`` only when the process has imported it already, which a
host that set up tracing has done (``trace.set_tracer_provider(...)``, or
``opentelemetry-instrument``), and only while the global provider is a real one
(not the API's placeholder proxy, not its no-op). Otherwise ``span()`` returns a
shared ``nullcontext``: a dictionary lookup and a type check per call.

Spans start in the current context (context variables), so they nest by
themselves: model and tool calls under their turn, and a sub-agent's spans, which
run inside its parent's ``task`` tool call, under that call's span, in the
parent's trace. The runtime names the run (``turn(..., run_id=...)``): every span
started inside it carries ``sagents.run_id``.

The spans: ``sagents.turn`` (a turn; the runtime's, or ``Agent.aexecute`` /
``aresume`` called directly), ``sagents.subagent`` (a delegated task),
``sagents.model_call`` (one model call with its retries and fallbacks) and
``sagents.tool_call`` (one tool's execution). Attribute names follow the GenAI
semantic conventions where they have one (``gen_ai.request.model``,
``gen_ai.usage.input_tokens``, ``gen_ai.tool.name``...); the rest are ``sagents.*``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Final

RUN_ID: Final = "sagents.run_id"

_OFF: Final[AbstractContextManager[None]] = contextlib.nullcontext()
_run_id: ContextVar[str | None] = ContextVar("sagents_trace_run_id", default=None)
_in_turn: ContextVar[bool] = ContextVar("sagents_trace_in_turn", default=False)
_cached: tuple[Any, Any] | None = None
"""(provider, tracer): the tracer of the provider it was made from."""


def tracer() -> Any | None:
    """This package's tracer, or None when the process does not trace."""
    global _cached
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None
    except AttributeError:  # imported halfway, by another thread, right now
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    from sagents_django import __version__

    made = provider.get_tracer("sagents_django", __version__)
    _cached = (provider, made)
    return made


def span(name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[Any]:
    """A span started in the current context (with the run id, and without the
    attributes whose value is None), current until the block ends; the block gets
    the span, or None when the process does not trace."""
    found = tracer()
    if found is None:
        return _OFF
    values = {key: value for key, value in attributes.items() if value is not None}
    run_id = _run_id.get()
    if run_id is not None:
        values[RUN_ID] = run_id
    return found.start_as_current_span(name, attributes=values)  # type: ignore[no-any-return]


@contextlib.contextmanager
def turn(
    name: str, attributes: Mapping[str, Any], *, run_id: str | None = None
) -> Iterator[Any]:
    """The span of a turn (or of a sub-agent's task); the spans started inside it
    carry ``run_id`` (kept from an enclosing turn when None)."""
    inside = _in_turn.set(True)
    named = _run_id.set(run_id) if run_id is not None else None
    try:
        with span(name, attributes) as current:
            yield current
    finally:
        if named is not None:
            _run_id.reset(named)
        _in_turn.reset(inside)


def in_turn() -> bool:
    """Whether the running code is inside a turn's span already."""
    return _in_turn.get()


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Add attributes to ``current`` (None: not tracing); None values are left out."""
    if current is None:
        return
    current.set_attributes(
        {key: value for key, value in attributes.items() if value is not None}
    )


def mark_error(current: Any, error_type: str) -> None:
    """Mark ``current`` failed without an exception (a tool's error result, a run
    that ended in error): status ERROR and ``error.type``, no message (it may hold
    what the model or a person wrote)."""
    trace = sys.modules.get("opentelemetry.trace")
    if current is None or trace is None:
        return
    current.set_attribute("error.type", error_type)
    current.set_status(trace.Status(trace.StatusCode.ERROR))
