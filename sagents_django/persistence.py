"""The core's persistence protocols, implemented over the services and models.

The runtime calls these from a worker during a turn, so the protocol methods never
raise into the agent: a failed write is logged (with its traceback), recorded as a
``PersistenceFailure`` row on the conversation (an operator sees it on the
conversation's admin page), and answered with None, or ``[]`` from
``save_message``. A display-row failure does not stop the turn, as in Sagents; a
state write that fails must not look like success, so ``persist_state`` answering
None means "not saved" and the caller says so (the generated coordinator ends the
turn as an error and goes on from the last saved state). ``save_state`` and
``load_stored`` are the raising forms, for callers that handle the errors
themselves.

State saves are a compare-and-set: ``context.revision`` is the revision the caller
read, and a save over any other revision is refused (``StateConflict``), so a stale
writer never overwrites a newer turn.

A tool call or interrupted result that is not found is an expected answer (the card
was never saved, or is in another state) and is logged as a warning only. When the
caller has a transaction open, every call runs in its own savepoint, so a failed
statement never poisons that transaction; in autocommit there is nothing to protect,
and the services' own transactions (or single statements) keep each write
all-or-nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from sagents_django import services
from sagents_django.core.display import DISPLAY_METADATA, extract_display_items
from sagents_django.core.exceptions import SerializationError
from sagents_django.core.messages import Message
from sagents_django.core.persistence import (
    LIFECYCLES,
    DisplayMessagePersistence,
    PersistenceContext,
    SyntheticMessage,
    ToolInfo,
    ToolStatus,
)
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.models import AgentState, DisplayMessage, PersistenceFailure
from sagents_django.services.sql import in_unit, isolated

logger = logging.getLogger(__name__)

MESSAGE_METADATA_KEYS = ("sender_user_id", "sender_display_name")
"""Keys of ``Message.metadata`` copied onto each display row (who sent it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredState:
    """A conversation's stored state envelope and the revision it was read at."""

    data: dict[str, Any] | None
    """The envelope, or None when the conversation has no state yet."""
    revision: int
    """Pass it back as ``PersistenceContext.revision`` to save over this state."""


def record_failure(
    scope: Any,
    context: PersistenceContext,
    error: BaseException,
    *,
    kind: str,
    operation: str,
    **details: Any,
) -> PersistenceFailure | None:
    """Record a failed write of ``context``'s conversation (never raises)."""
    if context.conversation_id is None:
        return None
    facts = {"agent_id": context.agent_id, **details}
    if kind == "state":
        facts["revision"] = context.revision
    return services.record_failure(
        scope,
        context.conversation_id,
        kind=kind,
        operation=operation,
        error=error,
        run_id=context.run_id,
        details=facts,
    )


class DjangoAgentPersistence:
    """``AgentPersistence`` over ``AgentState`` rows."""

    def load_stored(self, scope: Any, context: PersistenceContext) -> StoredState:
        """The stored envelope and its revision; raises what the database raises (a
        state that cannot be read is not "no state": starting over would lose it)."""
        if context.conversation_id is None:
            return StoredState(data=None, revision=0)
        with isolated():
            data, revision = services.load_agent_state_revision(
                scope, context.conversation_id
            )
        return StoredState(data=data, revision=revision)

    def load_state(
        self, scope: Any, context: PersistenceContext
    ) -> dict[str, Any] | None:
        if context.conversation_id is None:
            return None
        try:
            with isolated():
                return services.load_agent_state(scope, context.conversation_id)
        except SerializationError:
            raise  # a stored state that cannot be read must not look like no state
        except Exception:
            logger.exception("Could not load the state of %s", context.agent_id)
            return None

    def save_state(
        self, scope: Any, state_data: dict[str, Any], context: PersistenceContext
    ) -> AgentState:
        """``persist_state`` that raises: InvalidInput (a bad envelope or context),
        NotFound, StateConflict (``context.revision`` is not the stored one),
        ImproperlyConfigured (bad settings), database errors."""
        if context.lifecycle not in LIFECYCLES:
            raise InvalidInput(
                f"context.lifecycle is an unknown lifecycle {context.lifecycle!r}; "
                f"use one of {', '.join(LIFECYCLES)}"
            )
        options = {}
        if context.revision is not None:
            options["expected_revision"] = context.revision
        with isolated():
            return services.save_agent_state(
                scope, context.conversation_id, state_data, **options
            )

    def persist_state(
        self, scope: Any, state_data: dict[str, Any], context: PersistenceContext
    ) -> AgentState | None:
        try:
            return self.save_state(scope, state_data, context)
        except Exception as exc:
            logger.exception(
                "Could not persist the state of %s (%s)",
                context.agent_id,
                context.lifecycle,
            )
            record_failure(
                scope,
                context,
                exc,
                kind="state",
                operation=str(context.lifecycle or "persist_state"),
            )
            return None


class DjangoDisplayMessagePersistence:
    """``DisplayMessagePersistence`` over ``DisplayMessage`` rows."""

    def save_message(
        self, scope: Any, message: Message, context: PersistenceContext
    ) -> list[DisplayMessage]:
        try:
            items = display_rows(message)
            if not items:
                return []
            if context.run_id:
                items = [{**item, "run_id": context.run_id} for item in items]
            with isolated():
                return services.append_display_messages(
                    scope, context.conversation_id, items
                )
        except Exception as exc:
            role = getattr(message, "role", "?")
            logger.exception(
                "Could not save a %s message of %s", role, context.agent_id
            )
            record_failure(
                scope,
                context,
                exc,
                kind="display",
                operation="save_message",
                role=str(role),
            )
            return []

    def update_tool_status(
        self,
        scope: Any,
        status: ToolStatus,
        tool_info: ToolInfo,
        context: PersistenceContext,
    ) -> DisplayMessage | None:
        def update() -> DisplayMessage:
            call_id = tool_info["call_id"]
            where = {"conversation_id": context.conversation_id}
            if status == "executing":
                extra = _pick(tool_info, "display_text")
                return services.mark_tool_executing(scope, call_id, extra, **where)
            if status == "completed":
                extra = _pick(tool_info, "result", "display_text")
                return services.complete_tool_call(scope, call_id, extra, **where)
            if status == "failed":
                extra = _pick(tool_info, "error")
                return services.fail_tool_call(scope, call_id, extra, **where)
            if status == "interrupted":
                extra = _pick(tool_info, "display_text")
                return services.interrupt_tool_call(scope, call_id, extra, **where)
            if status == "cancelled":
                return services.cancel_tool_call(scope, call_id, **where)
            raise ValueError(f"Unknown tool status {status!r}")

        return self._guarded(
            scope,
            update,
            f"mark a tool call {status}",
            context,
            operation=f"update_tool_status:{status}"[:64],
            tool_call_id=_call_id(tool_info),
        )

    def resolve_tool_result(
        self, scope: Any, tool_call_id: str, content: str, context: PersistenceContext
    ) -> DisplayMessage | None:
        return self._guarded(
            scope,
            lambda: services.resolve_interrupted_tool_result(
                scope,
                tool_call_id,
                content,
                conversation_id=context.conversation_id,
            ),
            "resolve an interrupted tool result",
            context,
            operation="resolve_tool_result",
            tool_call_id=str(tool_call_id)[:255],
        )

    def save_synthetic_message(
        self, scope: Any, message: SyntheticMessage, context: PersistenceContext
    ) -> DisplayMessage | None:
        return self._guarded(
            scope,
            lambda: services.append_display_messages(
                scope,
                context.conversation_id,
                [{**message, "run_id": context.run_id} if context.run_id else message],
            )[0],
            "save a synthetic message",
            context,
            missing_is_normal=False,
            operation="save_synthetic_message",
        )

    def _guarded(
        self,
        scope: Any,
        write: Any,
        doing: str,
        context: PersistenceContext,
        *,
        operation: str,
        missing_is_normal: bool = True,
        **details: Any,
    ) -> DisplayMessage | None:
        try:
            with isolated():
                return write()
        except NotFound as exc:
            if missing_is_normal:
                logger.warning("Could not %s for %s: %s", doing, context.agent_id, exc)
                return None
            logger.exception("Could not %s for %s", doing, context.agent_id)
            failure: Exception = exc
        except Exception as exc:
            if in_unit():
                raise  # the transaction is spoiled: the unit's owner tries it again
            logger.exception("Could not %s for %s", doing, context.agent_id)
            failure = exc
        record_failure(
            scope, context, failure, kind="display", operation=operation, **details
        )
        return None


STOP_DETAILS_CHARS = 500
"""A cut-off reply's ``stop_details`` is the provider's error, bounded."""


def display_rows(message: Message) -> list[dict[str, Any]]:
    """The display-row attributes of ``message``: one per display item, numbered by
    ``sequence``; tool calls start pending, interrupted results are marked, and the
    text of a reply that did not finish carries the core's mark (``cancelled``,
    ``stream_error``, ``length``, ``content_filtered``) as its status."""
    shared = {
        k: message.metadata[k] for k in MESSAGE_METADATA_KEYS if k in message.metadata
    }
    shown = message.metadata.get(DISPLAY_METADATA)
    if isinstance(shown, dict):
        shared.update(shown)  # what transform_display_message hooks added
    unfinished = message.status != "complete"
    if unfinished:
        shared["stop_reason"] = message.status
    interrupted = {r.tool_call_id: r for r in message.tool_results if r.is_interrupt}
    rows = []
    for sequence, item in enumerate(extract_display_items(message)):
        content = item["content"]
        kind = item["type"]
        if kind == "tool_result" and content.get("tool_call_id") in interrupted:
            result = interrupted[content["tool_call_id"]]
            content = {**content, "is_interrupt": True}
            if result.display_text:
                content["display_text"] = result.display_text
        row = {
            "message_type": item["message_type"],
            "content_type": kind,
            "content": content,
            "sequence": sequence,
            "metadata": dict(shared),
        }
        if unfinished and kind in ("text", "thinking"):
            row["status"] = message.status
        rows.append(row)
    if unfinished and rows:
        # Upstream v0.12.1: the last item of a message that did not finish says
        # why (and the provider's words when it gave some); a finished one neither.
        last = rows[-1]
        last["content"] = {**last["content"], "stop_reason": message.status}
        details = message.metadata.get("stop_details")
        if isinstance(details, str) and details:
            last["content"]["stop_details"] = details[:STOP_DETAILS_CHARS]
    return rows


def _call_id(info: Any) -> str:
    return str(info.get("call_id", ""))[:255] if isinstance(info, dict) else ""


def _pick(info: ToolInfo, *keys: str) -> dict[str, Any]:
    fields: dict[str, Any] = dict(info)  # read by computed key, not a literal
    return {k: fields[k] for k in keys if fields.get(k) is not None}


Announce = Callable[[str, list[Any]], Awaitable[None]]
"""``announce(event, rows)``: told of rows just written ("display_message_saved" or
"display_message_updated"), e.g. to publish them."""


async def _no_announce(_event: str, _rows: list[Any]) -> None:
    return None


def display_callbacks(
    persistence: DisplayMessagePersistence,
    scope: Any,
    context: PersistenceContext,
    *,
    announce: Announce = _no_announce,
    run_sync: Callable[[Callable[..., Any]], Callable[..., Awaitable[Any]]] = (
        sync_to_async
    ),
) -> dict[str, Any]:
    """Agent callbacks that save each message and tool status as a turn goes.

    Pass the result in ``callbacks=[...]`` of ``Agent.aexecute``/``resume``. They run
    on the turn's event loop, so the (synchronous) persistence is reached through
    ``sync_to_async``; a failed write is logged and recorded by the persistence, and
    the turn goes on. ``announce`` hears of every row written (the runtime
    publishes them). ``run_sync`` takes the writes off the loop (the runtime's
    passes its database threads).
    """
    save_rows = run_sync(persistence.save_message)
    set_status = run_sync(persistence.update_tool_status)

    async def save(scope: Any, message: Message, context: PersistenceContext) -> None:
        rows = await save_rows(scope, message, context)
        if rows:
            await announce("display_message_saved", list(rows))

    async def status(
        scope: Any, kind: ToolStatus, info: ToolInfo, context: PersistenceContext
    ) -> None:
        row = await set_status(scope, kind, info, context)
        if row is not None:
            await announce("display_message_updated", [row])

    async def on_message(execution: Any, message: Message) -> None:
        agent = getattr(execution, "agent", None)
        if agent is not None:
            message = await agent.display_message(message)
        await save(scope, message, context)

    async def on_tool_started(_execution: Any, call: Any, tool: Any) -> None:
        info: ToolInfo = {"call_id": call.call_id, "name": call.name}
        display_text = getattr(tool, "display_text", None)
        if isinstance(display_text, str) and display_text:
            info["display_text"] = display_text
        await status(scope, "executing", info, context)

    async def on_tool_completed(_execution: Any, call: Any, result: Any) -> None:
        if result.is_interrupt:
            info: ToolInfo = {
                "call_id": call.call_id,
                "display_text": result.display_text,
            }
            await status(scope, "interrupted", info, context)
        else:
            info = {"call_id": call.call_id, "name": call.name, "result": result.text}
            await status(scope, "completed", info, context)

    async def on_tool_failed(_execution: Any, call: Any, result: Any) -> None:
        info: ToolInfo = {
            "call_id": call.call_id,
            "name": call.name,
            "error": result.text,
        }
        await status(scope, "failed", info, context)

    set_title = run_sync(services.set_generated_title)

    async def on_event(_execution: Any, name: str, data: dict[str, Any]) -> None:
        # A generated title names the conversation row too (the list, the admin), not
        # only the state's metadata; a second title middleware (metadata_key) doesn't.
        if name != "conversation_title_generated" or "metadata_key" in data:
            return
        if context.conversation_id is None:
            return
        try:
            await set_title(scope, context.conversation_id, data.get("title"))
        except Exception as exc:
            logger.exception("Could not store the generated title")
            await run_sync(record_failure)(
                scope, context, exc, kind="display", operation="set_title"
            )

    return {
        "on_agent_event": on_event,
        # Assistant replies (tool calls start as pending cards), tool results, and the
        # partial text a failed model call leaves.
        "on_llm_new_message": on_message,
        "on_tool_response_created": on_message,
        "on_error_message_created": on_message,
        "on_tool_execution_started": on_tool_started,
        "on_tool_execution_completed": on_tool_completed,
        "on_tool_execution_failed": on_tool_failed,
    }
