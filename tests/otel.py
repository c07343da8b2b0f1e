"""An OpenTelemetry SDK for the tracing tests: ``spans`` records what the code
under test traces, in memory.

A process has one global tracer provider, set once for good, so the first test
that asks for ``spans`` installs one whose sampler records only while a ``spans``
fixture is active: later tests of the session run with tracing configured (their
spans are not recorded), which is what a traced site runs too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult


class Switch(Sampler):
    """Records every span while on, none while off."""

    on = False

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Sequence[Any] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        decision = Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP
        return SamplingResult(decision, attributes)

    def get_description(self) -> str:
        return "Switch"


class Recorded:
    """The spans recorded, finished ones only, in the order they ended."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next(s for s in self.all() if s.context.span_id == span.parent.span_id)

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return sorted(
            (
                s
                for s in self.all()
                if s.parent is not None and s.parent.span_id == span.context.span_id
            ),
            key=lambda s: s.start_time or 0,
        )

    def tree(self, span: ReadableSpan) -> list[Any]:
        """``[name, [child trees...]]``, children in start order."""
        return [span.name, [self.tree(c) for c in self.children(span)]]


_sdk: tuple[Switch, InMemorySpanExporter] | None = None


def _installed() -> tuple[Switch, InMemorySpanExporter]:
    global _sdk
    if _sdk is None:
        switch = Switch()
        exporter = InMemorySpanExporter()
        provider = TracerProvider(sampler=switch)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _sdk = (switch, exporter)
    return _sdk


@pytest.fixture
def spans() -> Iterator[Recorded]:
    switch, exporter = _installed()
    exporter.clear()
    switch.on = True
    try:
        yield Recorded(exporter)
    finally:
        switch.on = False
        exporter.clear()
