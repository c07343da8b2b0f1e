"""The edge between an MCP server's transport and the SDK's session.

Why messages are looked at before the SDK reads them: the SDK validates a whole
``tools/list`` result at once, so one tool whose ``inputSchema`` is not an object
makes the listing fail, and then every ``call_tool`` fails too (it lists again to
validate results), after the server already ran the tool. A listing of 10,000 tools
becomes 10,000 models, and a 50 MB result is parsed once more into a model and then
kept. So the guard wraps the transport's streams and, on the plain JSON of each
response:

- a listing keeps only usable tools (a name, an object ``inputSchema``), at most
  ``max_tools`` of them; each tool left out is recorded with the reason, for the
  operator's status and log. Output schemas are dropped: results are read as
  untrusted text, never validated as structure, so a broken output schema cannot
  fail a call;
- a call result's text is cut at ``max_chars`` (its ``_meta`` says how long it
  was) and binary data is dropped (its ``_meta`` says how much there was), so the
  session never builds the whole of it;
- a line that is not JSON-RPC is counted, and the end of the stream (a server that
  exited) is noticed, so the connection can say so and reconnect.

The stdio transport still reads a whole line before the guard sees it: that much
the SDK forces. An HTTP server's responses are bounded before that (``transports``).
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Self

from sagents_django.core.limits import value_bounds_problem

OMITTED = "sagents/omitted_chars"
"""``_meta`` key of a content block whose data the guard dropped: its length."""
TRUNCATED = "sagents/truncated_from"
"""``_meta`` key of a text block the guard cut: its length before."""

MAX_SCHEMA_CHARS = 100_000
"""A tool's input schema larger than this (as JSON) is left out."""
MAX_RECORDED = 20
"""Reasons kept per listing for the status (the count is kept whole)."""
MAX_PENDING_IDS = 10_000
"""Request ids remembered while unanswered (a cancelled one never is)."""


class Guard:
    """What one connection's guard saw (read by the connection, on its loop)."""

    def __init__(
        self,
        *,
        max_tools: int,
        max_chars: int,
        allowed: frozenset[str] | None = None,
        on_closed: Callable[[], None] = lambda: None,
    ) -> None:
        self.max_tools = max_tools
        self.max_chars = max_chars
        self.allowed = allowed
        """The tool names the site lets through (None: all)."""
        self.on_closed = on_closed
        self.rejected: list[str] = []
        """Why tools of the last listing were left out (the first ``MAX_RECORDED``)."""
        self.rejected_count = 0
        self.left_out = 0
        """Tools of the last listing beyond ``max_tools``."""
        self.kept = 0
        self.malformed = 0
        """Messages from the server that were not JSON-RPC."""
        self.last_malformed: str | None = None
        self.closed = False
        self._pending: dict[Any, str] = {}

    def wrap(
        self, transport: AbstractAsyncContextManager[tuple[Any, Any]]
    ) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        """``transport`` with its streams guarded."""
        return self._wrapped(transport)

    @asynccontextmanager
    async def _wrapped(
        self, transport: AbstractAsyncContextManager[tuple[Any, Any]]
    ) -> AsyncIterator[tuple[Any, Any]]:
        async with transport as streams:
            read, write = streams[0], streams[1]
            yield _Reading(read, self), _Writing(write, self)

    # Outgoing --------------------------------------------------------------------
    def sent(self, message: Any) -> None:
        method = getattr(message, "method", None)
        request_id = getattr(message, "id", None)
        if request_id is None or method not in ("tools/list", "tools/call"):
            return
        if len(self._pending) >= MAX_PENDING_IDS:
            self._pending.pop(next(iter(self._pending)))
        self._pending[request_id] = method

    # Incoming --------------------------------------------------------------------
    def received(self, item: Any) -> None:
        if isinstance(item, Exception):
            self.malformed += 1
            self.last_malformed = f"{type(item).__name__}: {str(item)[:200]}"
            return
        message = getattr(item, "message", None)
        request_id = getattr(message, "id", None)
        method = self._pending.pop(request_id, None) if request_id is not None else None
        result = getattr(message, "result", None)
        if method is None or not isinstance(result, dict):
            return
        if method == "tools/list":
            self._listing(result)
        else:
            cap_call_result(result, self.max_chars)

    def ended(self) -> None:
        if not self.closed:
            self.closed = True
            self.on_closed()

    def begin_listing(self) -> None:
        """A listing starts (its pages add up until the next one)."""
        self.rejected, self.rejected_count, self.left_out, self.kept = [], 0, 0, 0

    def _listing(self, result: dict[str, Any]) -> None:
        tools = result.get("tools")
        if not isinstance(tools, list):
            return  # the SDK refuses it, with its own message
        kept: list[dict[str, Any]] = []
        for index, tool in enumerate(tools):
            if self.kept + len(kept) >= self.max_tools:
                self.left_out += len(tools) - index
                result.pop("nextCursor", None)  # no more pages: enough tools
                break
            if (
                self.allowed is not None
                and isinstance(tool, dict)
                and tool.get("name") not in self.allowed
            ):
                continue  # the site did not choose it: not a problem to report
            problem = tool_problem(index, tool)
            if problem is not None:
                self.rejected_count += 1
                if len(self.rejected) < MAX_RECORDED:
                    self.rejected.append(problem)
                continue
            tool.pop("outputSchema", None)
            kept.append(tool)
        self.kept += len(kept)
        result["tools"] = kept


def tool_problem(index: int, tool: Any) -> str | None:
    """Why a listed tool cannot be offered (None: it can)."""
    if not isinstance(tool, dict):
        return f"item {index} of the list is not a tool object"
    name = tool.get("name")
    if not isinstance(name, str) or not name or len(name) > 128:
        return f"item {index} of the list has no usable name"
    shown = repr(name[:64])
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return f"tool {shown}: its inputSchema is not a JSON object"
    if schema.get("type") != "object":
        return (
            f"tool {shown}: its inputSchema is of type {schema.get('type')!r}, "
            "not 'object' (a tool takes an object of named arguments)"
        )
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        return f"tool {shown}: its inputSchema cannot be read as JSON"
    if size > MAX_SCHEMA_CHARS:
        return f"tool {shown}: its inputSchema is larger than {MAX_SCHEMA_CHARS} characters"
    return _sdk_problem(shown, tool)


def _sdk_problem(shown: str, tool: dict[str, Any]) -> str | None:
    """What the SDK would refuse in ``tool`` under any protocol version (it checks
    a listing whole, so one tool it refuses would fail them all)."""
    try:
        for model in _tool_models():
            model.model_validate(tool, by_name=False)
    except ValueError as exc:  # pydantic's ValidationError
        errors = getattr(exc, "errors", None)
        if not callable(errors) or not errors():
            return f"tool {shown}: {str(exc)[:200]}"
        first = errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the tool"
        return f"tool {shown}: {where}: {first['msg']}"
    return None


@functools.cache
def _tool_models() -> tuple[Any, ...]:
    """The SDK's models of a listed tool: one per protocol era, and its own."""
    from mcp.types import Tool, methods, version

    models = [Tool]
    for known in version.KNOWN_PROTOCOL_VERSIONS:
        result = methods.SERVER_RESULTS.get(("tools/list", known))
        if not isinstance(result, type):
            continue
        (model,) = typing.get_args(result.model_fields["tools"].annotation)
        if model not in models:
            models.append(model)
    return tuple(models)


def cap_call_result(result: dict[str, Any], max_chars: int) -> None:
    """Cut a ``tools/call`` result's text to ``max_chars`` in all and drop its
    binary data, noting in each block's ``_meta`` what was taken out."""
    content = result.get("content")
    budget = max_chars
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            budget = _cap_block(block, budget)
    structured = result.get("structuredContent")
    if structured is not None and (
        value_bounds_problem(structured, max_chars=max_chars) is not None
    ):
        result.pop("structuredContent")


def _cap_block(block: dict[str, Any], budget: int) -> int:
    kind = block.get("type")
    if kind == "text":
        return _cap_text(block, "text", budget)
    if kind in ("image", "audio"):
        _omit(block, "data")
    elif kind == "resource" and isinstance(block.get("resource"), dict):
        resource = block["resource"]
        if "blob" in resource:
            _omit(resource, "blob")
        elif isinstance(resource.get("text"), str):
            return _cap_text(resource, "text", budget)
    return budget


def _cap_text(holder: dict[str, Any], key: str, budget: int) -> int:
    text = holder.get(key)
    if not isinstance(text, str):
        return budget
    if len(text) > budget:
        holder[key] = text[: max(budget, 0)]
        _meta(holder)[TRUNCATED] = len(text)
    return max(budget - len(text), 0)


def _omit(holder: dict[str, Any], key: str) -> None:
    value = holder.get(key)
    if isinstance(value, str):
        holder[key] = ""
        _meta(holder)[OMITTED] = len(value)


def _meta(holder: dict[str, Any]) -> dict[str, Any]:
    meta = holder.get("_meta")
    if not isinstance(meta, dict):
        meta = holder["_meta"] = {}
    return meta


class _Stream:
    """One of the transport's streams, passed through to it."""

    def __init__(self, inner: Any, guard: Guard) -> None:
        self._inner = inner
        self._guard = guard

    def __getattr__(self, name: str) -> Any:  # last_context, for the dispatcher
        return getattr(self._inner, name)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)


class _Reading(_Stream):
    """The transport's read stream, each item shown to the guard first."""

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except Exception:
            self._guard.ended()
            raise
        self._guard.received(item)
        return item

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        self._guard.ended()
        return await super().__aexit__(exc_type, exc_val, exc_tb)


class _Writing(_Stream):
    """The transport's write stream, each request noted by the guard."""

    async def send(self, item: Any, /) -> None:
        self._guard.sent(getattr(item, "message", None))
        await self._inner.send(item)
