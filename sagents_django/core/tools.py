"""Tools: functions the model may call.

A tool's function receives ``(args, context)`` and may be sync or async. It returns a
string (the result the model reads), a ``(string, update)`` pair where ``update`` is a
``State`` to merge or a dict of state fields to apply, a ``ToolOutput`` (a short
summary as the result, and material the model reads as messages on its next call;
see ``core.expansion``), or a ``ToolResult``. Anything the model could fix (arguments
that break the schema, an exception in the function, a timeout) becomes an error
result the model reads, never a crash of the turn.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import tracing
from .exceptions import ConfigurationError
from .limits import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, MAX_TOOL_RESULT_CHARS
from .messages import ContentPart, Message, ToolCall, ToolResult
from .outbox import QueuedFromTool

if TYPE_CHECKING:
    from .state import State

logger = logging.getLogger(__name__)

ToolFunction = Callable[[dict[str, Any], "ToolContext"], Any]

EXPANSION_ROLES: frozenset[str] = frozenset(("user", "assistant", "system"))
"""Roles a tool's material may take (``tool`` messages only answer calls)."""


@dataclass(kw_only=True, slots=True)
class ToolContext:
    """The second argument of every tool function.

    ``state`` and ``agent_id`` are always present; the agent's ``tool_context`` (caller
    data such as a user id) is readable as ``context.tool_context[key]`` and, for
    convenience, as ``context.key``.
    """

    state: State
    agent_id: str | None
    tool_context: dict[str, Any] = field(default_factory=dict)
    tool_call: ToolCall | None = None
    """The call being executed."""
    execution: Any = None
    """The running ``Execution`` (agent, callbacks), for tools that start sub-agents."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields: look them up in tool_context.
        if name.startswith("_") or name == "tool_context":
            raise AttributeError(name)
        try:
            return self.tool_context[name]
        except KeyError:
            raise AttributeError(name) from None

    def get(self, key: str, default: Any = None) -> Any:
        return self.tool_context.get(key, default)

    def queue_message(self, message: str | Message, *, display: bool = True) -> None:
        """Queue a user message for a turn right after this one (upstream Sagents'
        ``queue_message_from_tool``; ``core.outbox``): e.g. a playbook the model
        should follow next. ``display=False`` keeps it out of the transcript."""
        if isinstance(message, str):
            message = Message.user(message)
        if not isinstance(message, Message) or message.role != "user":
            raise ConfigurationError(
                f"queue_message takes a text or a user Message, not {message!r}"
            )
        if not message.text.strip() and not message.content:
            raise ConfigurationError("queue_message needs a message with content")
        execution = self.execution
        if execution is None:
            raise ConfigurationError("queue_message needs a running turn")
        call = self.tool_call
        execution.outbox.put(
            QueuedFromTool(
                message=message,
                display=display,
                tool_name=call.name if call is not None else None,
                call_id=call.call_id if call is not None else None,
            )
        )


@dataclass(kw_only=True, slots=True)
class ToolOutput:
    """A tool's result that expands into conversation messages (Sagents v0.14.2).

    The model reads ``summary`` as the tool result and ``messages`` (strings are user
    messages) right after the batch's results, on its next call in the same turn::

        return ToolOutput(
            summary="Loaded chart.png",
            messages=[Message.user([ContentPart.image(data, media="image/png")])],
        )
    """

    summary: str
    """The short tool result (the material itself goes in ``messages``)."""
    messages: list[Message | str]
    """User, assistant or system messages without tool calls or results."""
    update: Any = None
    """A state update, as the second item of a ``(text, update)`` pair."""

    def __post_init__(self) -> None:
        if not isinstance(self.summary, str):
            raise ConfigurationError(
                f"ToolOutput summary must be a string, not {self.summary!r}"
            )
        self.messages = [*expansion_messages(self.messages)]


def expansion_messages(messages: Any) -> list[Message]:
    """Check a tool's material messages (strings become user messages)."""
    if not isinstance(messages, list | tuple):
        raise ConfigurationError(
            f"ToolOutput messages must be a list, not {type(messages).__name__}"
        )
    checked = []
    for i, message in enumerate(messages):
        if isinstance(message, str):
            message = Message.user([ContentPart.text(message)])
        if not isinstance(message, Message):
            raise ConfigurationError(
                f"ToolOutput messages[{i}] must be a Message or a string, not "
                f"{message!r}"
            )
        if message.role not in EXPANSION_ROLES:
            raise ConfigurationError(
                f"ToolOutput messages[{i}] has role {message.role!r}; expected one of "
                f"{sorted(EXPANSION_ROLES)}"
            )
        if message.tool_calls or message.tool_results:
            raise ConfigurationError(
                f"ToolOutput messages[{i}] must not carry tool calls or results"
            )
        checked.append(message)
    return checked


@dataclass(kw_only=True, slots=True, eq=False)
class Tool:
    """A function the model may call, described by a JSON schema."""

    name: str
    description: str
    function: ToolFunction
    parameters: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """JSON schema of the arguments object."""
    display_text: str | None = None
    """A short human label for the UI ("Searching the web")."""
    idempotent: bool = False
    """Running it twice does no more than running it once (a read, a whole-file
    write): a turn taken over after its worker died while this call ran runs it
    again. Otherwise the call gets an error result instead (see ``core.journal``)."""
    permission: str | Iterable[str] | None = None
    """The permission the caller needs (``"app_label.codename"``), or several, all
    needed; checked by the agent's ``tool_access`` (see ``core.tool_access``)."""
    available: Callable[[Any], bool] | None = None
    """``available(subject) -> bool``, a plain (sync) function: whether the caller
    (the subject of the agent's ``tool_access``: in Django, the scope) may use
    it. Anything but ``True`` (or an exception) refuses."""
    _validator: Any = field(default=None, init=False, repr=False)
    _permissions: tuple[str, ...] = field(default=(), init=False, repr=False)
    _is_async: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ConfigurationError(
                f"Tool name must be a non-empty string, not {self.name!r}"
            )
        if not callable(self.function):
            raise ConfigurationError(f"Tool {self.name!r} needs a callable function")
        if (
            not isinstance(self.parameters, dict)
            or self.parameters.get("type") != "object"
        ):
            raise ConfigurationError(
                f"Tool {self.name!r} parameters must be a JSON schema of type 'object'"
            )
        try:
            self._validator = _validator_for(self.parameters)
        except Exception as exc:
            raise ConfigurationError(
                f"Tool {self.name!r} has an invalid parameters schema: {exc}"
            ) from exc
        self._is_async = inspect.iscoroutinefunction(self.function)
        self._permissions = checked_permissions(self.name, self.permission)
        if self.available is not None and (
            not callable(self.available) or inspect.iscoroutinefunction(self.available)
        ):
            raise ConfigurationError(
                f"Tool {self.name!r} available must be a plain function "
                f"available(subject) -> bool, not {self.available!r}"
            )

    @property
    def permissions(self) -> tuple[str, ...]:
        """``permission`` as a tuple (empty: none needed)."""
        return self._permissions

    @property
    def gated(self) -> bool:
        """Whether a permission or ``available`` decides who may use it."""
        return bool(self._permissions) or self.available is not None

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def validation_error(self, arguments: dict[str, Any]) -> str | None:
        """A message for the model when ``arguments`` break the schema, else None."""
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: e.path)
        if not errors:
            return None
        # A message quotes the bad value, which may be megabytes: keep it short.
        details = "; ".join(
            f"{'/'.join(str(p) for p in e.absolute_path)[:100] or 'arguments'}: "
            f"{_shorten(e.message)}"
            for e in errors[:5]
        )
        return f"Invalid arguments for tool {self.name!r}: {details}"

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Call the function; sync functions run in a worker thread."""
        if self._is_async:
            return await self.function(arguments, context)
        result = await asyncio.to_thread(self.function, arguments, context)
        if inspect.isawaitable(result):
            result = await result
        return result


def checked_permissions(
    name: str, permission: str | Iterable[str] | None
) -> tuple[str, ...]:
    """``permission`` as a tuple of ``"app.codename"`` strings, or
    ConfigurationError: a misspelt permission would refuse everyone, silently."""
    if permission is None:
        return ()
    found: list[Any] = [permission]
    if not isinstance(permission, str) and isinstance(permission, Iterable):
        found = list(permission)
    if not found:
        raise ConfigurationError(
            f"Tool {name!r} permission is an empty list: pass None for no permission"
        )
    for one in found:
        if not _is_permission(one):
            raise ConfigurationError(
                f"Tool {name!r} permission must be 'app_label.codename' (or a list "
                f"of them), not {one!r}"
            )
    return tuple(dict.fromkeys(found))


def _is_permission(value: object) -> bool:
    if not isinstance(value, str) or value.split() != [value]:
        return False
    app, _, codename = value.partition(".")
    return bool(app and codename)


# Agents are rebuilt from code on every turn: checking a schema costs ~1 ms, so each
# distinct schema is checked and compiled once per process.
_validators: dict[str, Any] = {}
_validators_lock = threading.Lock()


def _validator_for(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator

    key = json.dumps(schema, sort_keys=True, default=repr)
    validator = _validators.get(key)
    if validator is None:
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema)
        with _validators_lock:
            if len(_validators) > 4096:  # bound memory for generated schemas
                _validators.clear()
            _validators[key] = validator
    return validator


def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    display_text: str | None = None,
    idempotent: bool = False,
    permission: str | Iterable[str] | None = None,
    available: Callable[[Any], bool] | None = None,
) -> Callable[[ToolFunction], Tool]:
    """Decorator: ``@tool(description=..., parameters=...)`` over ``def f(args, ctx)``."""

    def wrap(function: ToolFunction) -> Tool:
        return Tool(
            name=name or function.__name__,
            description=description or inspect.getdoc(function) or "",
            function=function,
            parameters=parameters or {"type": "object", "properties": {}},
            display_text=display_text,
            idempotent=idempotent,
            permission=permission,
            available=available,
        )

    return wrap


def error_result(call: ToolCall, text: str) -> ToolResult:
    return ToolResult(
        tool_call_id=call.call_id, name=call.name, content=text, is_error=True
    )


async def execute_tool_call(
    call: ToolCall,
    tools: dict[str, Tool],
    context: ToolContext,
    *,
    timeout: float | None = None,
) -> ToolResult:
    """Run one call to completion; every failure becomes an error result. One
    ``sagents.tool_call`` span when the process traces (``core.tracing``): a
    sub-agent's task runs inside it."""
    with tracing.span(
        "sagents.tool_call",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
        },
    ) as span:
        result = await _execute(call, tools, context, timeout)
        tracing.set_attributes(span, {"sagents.tool.error": result.is_error})
        if result.is_error:
            tracing.mark_error(span, "tool_error")
        return result


async def _execute(
    call: ToolCall,
    tools: dict[str, Tool],
    context: ToolContext,
    timeout: float | None,
) -> ToolResult:
    if call.raw_arguments is not None:
        refusal = call.refusal
        if refusal is not None:
            return error_result(
                call,
                f"The arguments for tool {call.name!r} were refused: {refusal}. "
                f"Send arguments at most {MAX_ARGUMENT_DEPTH} levels deep and "
                f"{MAX_ARGUMENT_CHARS} characters long.",
            )
        return error_result(
            call,
            f"Invalid JSON in the arguments for tool {call.name!r}: "
            f"{call.raw_arguments[:500]!r}. Send the arguments as one JSON object.",
        )
    found = tools.get(call.name)
    if found is None:
        return error_result(
            call,
            f"Tool {call.name!r} does not exist. Available tools: "
            f"{', '.join(sorted(tools)) or 'none'}.",
        )
    problem = found.validation_error(call.arguments)
    if problem:
        return error_result(call, problem)
    try:
        if timeout is None:
            value = await found.invoke(call.arguments, context)
        else:
            value = await asyncio.wait_for(
                found.invoke(call.arguments, context), timeout
            )
    except Exception as exc:  # the model sees the failure and may try otherwise
        if isinstance(exc, TimeoutError) and timeout is not None:
            return error_result(
                call, f"Tool {call.name!r} timed out after {timeout:g} seconds."
            )
        logger.warning("Tool %r raised", call.name, exc_info=True)
        return error_result(
            call, f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}"
        )
    return to_tool_result(value, call, found)


def to_tool_result(value: Any, call: ToolCall, found: Tool | None = None) -> ToolResult:
    """Normalise a tool function's return value into a ToolResult."""
    display = found.display_text if found else None
    if isinstance(value, ToolResult):
        if not value.tool_call_id:
            value.tool_call_id = call.call_id
        if not value.name:
            value.name = call.name
        if isinstance(value.content, str):
            value.content = cap_result_text(value.content)
        if value.expand_messages:
            try:
                value.expand_messages = expansion_messages(value.expand_messages)
            except ConfigurationError as exc:
                return error_result(call, f"Tool {call.name!r} failed: {exc}")
        return value
    if isinstance(value, ToolOutput):
        return ToolResult(
            tool_call_id=call.call_id,
            name=call.name,
            content=cap_result_text(value.summary),
            display_text=display,
            processed_content=value.update,
            expand_messages=expansion_messages(value.messages),
        )
    update = None
    if isinstance(value, tuple) and len(value) == 2:
        value, update = value
    if not isinstance(value, str):
        value = _as_text(value)
    return ToolResult(
        tool_call_id=call.call_id,
        name=call.name,
        content=cap_result_text(value),
        display_text=display,
        processed_content=update,
    )


def _shorten(text: str, limit: int = 300) -> str:
    """``text`` without its middle when long (the end says what is wrong)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}...({len(text) - 2 * half} characters)...{text[-half:]}"


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return str(value)
    except Exception:  # a value too deep even for repr
        return f"<a {type(value).__name__} that cannot be shown as text>"


def cap_result_text(text: str, limit: int = MAX_TOOL_RESULT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a note the model reads."""
    if len(text) <= limit:
        return text
    note = (
        f"\n\n[Result truncated: it was {len(text)} characters; the limit is "
        f"{limit}. Ask for less at a time.]"
    )
    return text[: max(limit - len(note), 0)] + note
