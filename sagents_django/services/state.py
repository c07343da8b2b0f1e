"""Agent state: the serialized envelope of one conversation, and its todos.

``save_agent_state`` validates before writing (a dict envelope with an integer
``version`` and a ``state`` dict, JSON only, no deeper than the loader accepts, at
most ``SAGENTS["MAX_STATE_BYTES"]``), replaces NUL characters (see
``validation``), and upserts the conversation's one ``AgentState`` row. The row's
``version`` is the envelope's format version, as in Sagents. Only the first save
moves the conversation's ``updated_at`` (appending display messages moves it too):
checkpoints rewrite the state often and need not rewrite the conversation row.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, connections, router, transaction
from django.db.models import JSONField, TextField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from sagents_django.conf import sagents_settings
from sagents_django.core.exceptions import SerializationError
from sagents_django.core.todo import Todo
from sagents_django.exceptions import InvalidInput
from sagents_django.models import AgentState
from sagents_django.scope import Scope

from .conversations import conversation_pk, owned_ids, require_conversation
from .validation import clean_json

logger = logging.getLogger(__name__)


def save_agent_state(
    scope: Scope, conversation_id: Any, state_data: dict[str, Any]
) -> AgentState:
    """Store ``state_data`` (a ``serialize_server_state`` envelope) as the state of
    the conversation; NotFound outside ``scope``, InvalidInput for a bad envelope."""
    if not isinstance(state_data, dict):
        raise InvalidInput(
            f"state_data must be a dict, not {type(state_data).__name__}"
        )
    version = state_data.get("version")
    if type(version) is not int or not 1 <= version <= 2**31 - 1:
        raise InvalidInput(
            f"state_data['version'] must be a positive integer, not {version!r}"
        )
    if not isinstance(state_data.get("state"), dict):
        raise InvalidInput("state_data['state'] must be a dict")
    state_data, encoded = clean_json(
        state_data, what="state_data", max_bytes=sagents_settings.MAX_STATE_BYTES
    )
    pk = conversation_pk(conversation_id)
    document = _json_text(encoded)
    with transaction.atomic():
        # One small query answers "is it ours?" and "is there a row?" (only the id
        # is read: the stored document may be megabytes).
        row = (
            AgentState.objects.filter(
                conversation_id=pk, conversation__in=owned_ids(scope)
            )
            .only("pk", "created_at")
            .first()
        )
        if row is None:
            require_conversation(scope, pk, touch=True)
            row = _insert(pk, document, version)
        elif not _update_server_bound(row, encoded, version):
            row.state_data, row.version, row.conversation_id = document, version, pk
            row.save(update_fields=["state_data", "version", "updated_at"])
    # The row goes back with the document, not the SQL expression that wrote it.
    row.state_data = state_data
    return row


def _json_text(encoded: str) -> Cast:
    """The already-encoded document as a SQL value: the validation pass made the
    text, so the driver need not encode megabytes a second time."""
    return Cast(Value(encoded, output_field=TextField()), output_field=JSONField())


def _update_server_bound(row: AgentState, encoded: str, version: int) -> bool:
    """On PostgreSQL (psycopg 3), UPDATE with the document as a bound parameter.

    Django's psycopg cursors bind client-side: a megabyte parameter is escaped into
    the SQL text and lexed again by the server, which doubled the cost of a
    checkpoint. One statement on a server-binding cursor sends it as it is. Returns
    False where this does not apply (the ORM then writes the row).
    """
    using = router.db_for_write(AgentState, instance=row)
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql import base

    cursor_class = getattr(base, "ServerBindingCursor", None)  # psycopg 3 only
    if cursor_class is None:
        return False
    opts = AgentState._meta
    quote = connection.ops.quote_name
    column = {f.name: f.column for f in opts.concrete_fields}
    columns = [quote(column[f]) for f in _UPDATED]
    sql = (
        f"UPDATE {quote(opts.db_table)} SET {columns[0]} = (%s)::jsonb, "
        f"{columns[1]} = %s, {columns[2]} = %s WHERE {quote(opts.pk.column)} = %s"
    )
    now = timezone.now()
    connection.ensure_connection()
    # _prepare_cursor adds Django's wrapper (error translation, query logging).
    # It is private Django API (absent from django-stubs); no public call wraps a
    # cursor of our own class.
    wrap = connection._prepare_cursor  # type: ignore[attr-defined]
    with wrap(cursor_class(connection.connection)) as cursor:
        cursor.execute(sql, [encoded, version, now, row.pk])
    row.version, row.updated_at = version, now
    return True


_UPDATED = ("state_data", "version", "updated_at")


def _insert(pk: Any, document: Cast, version: int) -> AgentState:
    try:
        with transaction.atomic():
            return AgentState.objects.create(
                conversation_id=pk, state_data=document, version=version
            )
    except IntegrityError:
        # A concurrent first save won the insert; ours is the later write.
        AgentState.objects.filter(conversation_id=pk).update(
            state_data=document, version=version, updated_at=timezone.now()
        )
        return AgentState.objects.defer("state_data").get(conversation_id=pk)


def load_agent_state(scope: Scope, conversation_id: Any) -> dict[str, Any] | None:
    """The stored envelope, or None (no state yet, or not in ``scope``).

    A row that exists but cannot be read as a JSON object (nested deeper than the
    decoder goes, not an object, JSON null) is SerializationError, not None: None
    would start the conversation over and the next save would overwrite it.
    """
    pk = conversation_pk(conversation_id)
    found = _read(
        pk,
        AgentState.objects.filter(
            conversation_id=pk, conversation__in=owned_ids(scope)
        ).values_list("pk", "state_data"),
    )
    if found is None:
        return None
    data = found[1]
    if not isinstance(data, dict):
        raise _unreadable(pk, f"it holds a {type(data).__name__}, not an object")
    return data


def _read(pk: Any, rows: Any) -> Any:
    """The first of ``rows``, with a document too deep to decode as the error it is."""
    try:
        return rows.first()
    except RecursionError:
        raise _unreadable(pk, "it nests deeper than JSON can be decoded") from None


def _unreadable(pk: Any, why: str) -> SerializationError:
    logger.error("The stored state of conversation %s cannot be read: %s", pk, why)
    return SerializationError(
        f"The stored state of conversation {pk} cannot be read: {why}; it was left "
        "as it is."
    )


def load_todos(scope: Scope, conversation_id: Any) -> list[Todo]:
    """The todos of the stored state (``[]`` when none or not in ``scope``).

    Only the todos leave the database (a JSON path query), not the messages.
    """
    pk = conversation_pk(conversation_id)
    raw = _read(
        pk,
        AgentState.objects.filter(
            conversation_id=pk, conversation__in=owned_ids(scope)
        ).values_list("state_data__state__todos", flat=True),
    )
    if not isinstance(raw, list):
        return []
    todos = []
    for item in raw:
        try:
            todos.append(Todo.from_dict(item))
        except (TypeError, ValueError, AttributeError):
            logger.warning("Skipped a malformed todo in conversation %s", pk)
    return todos
