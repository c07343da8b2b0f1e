"""Agent state: the serialized envelope of one conversation, and its todos.

``save_agent_state`` validates before writing (a dict envelope with an integer
``version`` and a ``state`` dict, JSON only, no deeper than the loader accepts, at
most ``SAGENTS["MAX_STATE_BYTES"]``), replaces NUL characters (see
``validation``), and upserts the conversation's one ``AgentState`` row. The row's
``version`` is the envelope's format version, as in Sagents; its ``revision`` counts
the saves. Only the first save moves the conversation's ``updated_at`` (appending
display messages moves it too): checkpoints rewrite the state often and need not
rewrite the conversation row.

No lost updates: a save is a compare-and-set on ``revision``. The writer passes the
revision it read (``expected_revision``; 0 when it read no state) and the UPDATE
only matches that revision, so of two writers that read the same state the second
gets ``StateConflict`` and changes nothing. Without ``expected_revision`` the save
writes over whatever is stored (an import, an admin tool), still one revision on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connections, router, transaction
from django.db.models import F, JSONField, TextField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from sagents_django.conf import sagents_settings
from sagents_django.core.exceptions import SerializationError
from sagents_django.core.todo import Todo
from sagents_django.exceptions import InvalidInput, StateConflict
from sagents_django.models import AgentState
from sagents_django.scope import Scope

from .conversations import (
    conversation_pk,
    owned_ids,
    refuse_read_only,
    require_conversation,
)
from .validation import clean_json, parse_int

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

MAX_REVISION = 2**63 - 1
BLIND_ATTEMPTS = 3
"""A save without ``expected_revision`` retries this often when another writer
moves the revision between its read and its write, then reports the conflict."""


def save_agent_state(
    scope: Scope,
    conversation_id: Any,
    state_data: dict[str, Any],
    *,
    expected_revision: int | None = None,
) -> AgentState:
    """Store ``state_data`` (a ``serialize_server_state`` envelope) as the state of
    the conversation, over ``expected_revision`` when given (0: no state yet).

    Returns the row, its ``revision`` the new one. NotFound outside ``scope``,
    InvalidInput for a bad envelope or revision, StateConflict when the stored
    revision is not ``expected_revision`` (nothing is written then).
    """
    refuse_read_only(scope, conversation_id)
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
    if expected_revision is not None:
        parse_int(expected_revision, what="expected_revision", maximum=MAX_REVISION)
    state_data, encoded = clean_json(
        state_data, what="state_data", max_bytes=sagents_settings.MAX_STATE_BYTES
    )
    pk = conversation_pk(conversation_id)
    write = _Write(pk=pk, document=_json_text(encoded), version=version)
    for _attempt in range(BLIND_ATTEMPTS):
        # One small query answers "is it ours?", "is there a row?" and "which
        # revision?" (the stored document may be megabytes: it is not read).
        found = (
            AgentState.objects.filter(
                conversation_id=pk, conversation__in=owned_ids(scope)
            )
            .values_list("pk", "revision", "created_at")
            .first()
        )
        current = 0 if found is None else found[1]
        expected = current if expected_revision is None else expected_revision
        if current != expected:
            if found is None:
                # "No state" must not answer for another tenant's conversation.
                require_conversation(scope, pk, touch=False)
            raise StateConflict(pk, expected=expected, actual=current)
        row = write.insert(scope) if found is None else write.update(*found)
        if row is None:
            if expected_revision is None:
                continue  # a blind save read a revision someone moved: read again
            break
        # The row goes back with the document, not the SQL expression that wrote it.
        row.state_data = state_data
        return row
    raise StateConflict(pk, expected=expected, actual=state_revision(scope, pk))


def state_revision(scope: Scope, conversation_id: Any) -> int:
    """The stored state's revision (0: no state yet, or not in ``scope``).

    Read it *before* the state it goes with: a save in between then makes the pair
    look older than it is (the next compare-and-set fails, safely), never newer.
    """
    pk = conversation_pk(conversation_id)
    found = (
        AgentState.objects.filter(conversation_id=pk, conversation__in=owned_ids(scope))
        .values_list("revision", flat=True)
        .first()
    )
    return found or 0


class _Write:
    """One state write: an UPDATE that only matches the revision it read, or the
    first INSERT (whose unique conversation key refuses a second first save).
    Either answers None when another writer got there first."""

    def __init__(self, *, pk: Any, document: Cast, version: int) -> None:
        self.pk, self.document, self.version = pk, document, version

    def update(self, row_pk: int, revision: int, created_at: Any) -> AgentState | None:
        now = timezone.now()
        # The revision condition makes this the compare-and-set: a writer that
        # read the same revision and saved first leaves nothing to match.
        rows = AgentState.objects.filter(pk=row_pk, revision=revision)
        with server_binding(connections[router.db_for_write(AgentState)]):
            updated = rows.update(
                state_data=self.document,
                version=self.version,
                revision=F("revision") + 1,
                updated_at=now,
            )
        if not updated:
            return None
        return AgentState(
            pk=row_pk,
            conversation_id=self.pk,
            version=self.version,
            revision=revision + 1,
            created_at=created_at,
            updated_at=now,
        )

    def insert(self, scope: Scope) -> AgentState | None:
        try:
            with transaction.atomic():
                require_conversation(scope, self.pk, touch=True)
                return AgentState.objects.create(
                    conversation_id=self.pk,
                    state_data=self.document,
                    version=self.version,
                    revision=1,
                )
        except IntegrityError:
            # A concurrent first save won the insert; ours read no state, so it
            # is stale. (A deleted conversation is NotFound, raised above.)
            return None


@contextmanager
def server_binding(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Inside, the cursors of a PostgreSQL (psycopg 3) connection bind parameters
    on the server; elsewhere this does nothing.

    Django's psycopg cursors bind on the client unless the site sets the
    ``server_side_binding`` database option: a megabyte document is then escaped
    into the SQL text and lexed again by the server, which doubled the cost of a
    checkpoint (29 ms against 57 ms for 1.3 MB, measured here). Only public API is
    used: psycopg's documented ``Connection.cursor_factory`` on the connection
    Django holds (``connection.connection``), and ``connection.cursor()``, so the
    statement still goes through Django's wrapper (error translation, logging).
    """
    if connection.vendor != "postgresql":
        yield
        return
    try:
        import psycopg
    except ImportError:  # psycopg2 binds on the client only
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    factory = getattr(raw, "cursor_factory", None)
    if not (isinstance(factory, type) and issubclass(factory, psycopg.ClientCursor)):
        yield  # already binding on the server (or not psycopg's connection)
        return
    raw.cursor_factory = psycopg.Cursor
    try:
        yield
    finally:
        raw.cursor_factory = factory


def _json_text(encoded: str) -> Cast:
    """The already-encoded document as a SQL value: the validation pass made the
    text, so the driver need not encode megabytes a second time."""
    return Cast(Value(encoded, output_field=TextField()), output_field=JSONField())


def load_agent_state(scope: Scope, conversation_id: Any) -> dict[str, Any] | None:
    """The stored envelope, or None (no state yet, or not in ``scope``).

    A row that exists but cannot be read as a JSON object (nested deeper than the
    decoder goes, not an object, JSON null) is SerializationError, not None: None
    would start the conversation over and the next save would overwrite it.
    """
    return load_agent_state_revision(scope, conversation_id)[0]


def load_agent_state_revision(
    scope: Scope, conversation_id: Any
) -> tuple[dict[str, Any] | None, int]:
    """The stored envelope and its revision, read together by one statement (so
    they always belong together); ``(None, 0)`` when there is none in ``scope``."""
    pk = conversation_pk(conversation_id)
    found = _read(
        pk,
        AgentState.objects.filter(
            conversation_id=pk, conversation__in=owned_ids(scope)
        ).values_list("state_data", "revision"),
    )
    if found is None:
        return None, 0
    data, revision = found
    if not isinstance(data, dict):
        raise _unreadable(pk, f"it holds a {type(data).__name__}, not an object")
    return data, revision


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
