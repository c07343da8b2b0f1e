"""The scope-first conversation functions (Sagents' generated "context" module).

Every function takes a scope (``sagents_django.scope``) first and options
keyword-only. A conversation or row the scope does not own is "not found", exactly
like one that does not exist: ``NotFound`` is raised, or, where the reference says
so, None (``get_conversation``, ``load_agent_state``) or ``[]`` (``list_conversations``,
``search_messages``, ``load_todos``, ``load_display_messages``) is returned. Bad
arguments (wrong types, unknown values, malformed ids, oversized documents) raise
``InvalidInput`` before anything is written. A scope that owns nothing creating a
conversation gets ``PermissionDenied``.

Modules: ``conversations`` (CRUD, list, search), ``state`` (agent state, todos),
``display`` (display messages), ``tool_calls`` (the tool-call card lifecycle),
``validation`` (argument checks and the NUL policy), ``sql`` (the one-statement
writes PostgreSQL gets for appends and tool-call transitions), ``runs`` (one active
run per conversation, held while a turn runs), ``feedback`` (ratings of
replies), ``failures`` (failed writes recorded
for operators), ``usage`` (tokens and cost summed per conversation and per owner).
"""

from __future__ import annotations

from .conversations import (
    ORDERINGS,
    SearchResult,
    conversation_cursor,
    conversation_model,
    create_conversation,
    delete_conversation,
    get_conversation,
    get_conversation_or_404,
    list_conversations,
    owned_conversations,
    search_messages,
    set_generated_title,
    update_conversation,
)
from .display import (
    append_display_message,
    append_display_messages,
    append_text_message,
    build_display_message,
    display_message_cursor,
    load_display_messages,
)
from .failures import record_failure
from .feedback import clear_rating, feedback_for, rate_reply
from .runs import (
    active_run,
    begin_run,
    discard_run,
    finish_run,
    request_cancel,
)
from .state import (
    load_agent_state,
    load_agent_state_revision,
    load_todos,
    save_agent_state,
    state_revision,
)
from .tool_calls import (
    cancel_tool_call,
    complete_tool_call,
    fail_tool_call,
    interrupt_tool_call,
    mark_tool_executing,
    record_hitl_decision,
    resolve_interrupted_tool_result,
)
from .usage import (
    TurnUsage,
    UsageTotals,
    usage_by_conversation,
    usage_by_turn,
    usage_totals,
)

__all__ = [
    "ORDERINGS",
    "SearchResult",
    "TurnUsage",
    "UsageTotals",
    "active_run",
    "append_display_message",
    "append_display_messages",
    "append_text_message",
    "begin_run",
    "build_display_message",
    "cancel_tool_call",
    "clear_rating",
    "complete_tool_call",
    "conversation_cursor",
    "conversation_model",
    "create_conversation",
    "delete_conversation",
    "discard_run",
    "display_message_cursor",
    "fail_tool_call",
    "feedback_for",
    "finish_run",
    "get_conversation",
    "get_conversation_or_404",
    "interrupt_tool_call",
    "list_conversations",
    "load_agent_state",
    "load_agent_state_revision",
    "load_display_messages",
    "load_todos",
    "mark_tool_executing",
    "owned_conversations",
    "rate_reply",
    "record_failure",
    "record_hitl_decision",
    "request_cancel",
    "resolve_interrupted_tool_result",
    "save_agent_state",
    "search_messages",
    "set_generated_title",
    "state_revision",
    "update_conversation",
    "usage_by_conversation",
    "usage_by_turn",
    "usage_totals",
]
