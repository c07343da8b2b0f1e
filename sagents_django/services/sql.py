"""One-statement writes on PostgreSQL, through Django's public API only.

Appending display rows and moving a tool-call card are what the runtime writes for
every event of a turn. Through the ORM each is a transaction of several statements
(BEGIN, the ownership check, the write, COMMIT), and on PostgreSQL their cost is those
round trips, not Python: the single statement below appends rows at about 1.5 times
the ORM's rate (``bench/persistence.py``). A statement is atomic by itself, so in
autocommit it is its own transaction: one round trip, one commit.

Everything Django-specific here is documented API: the SQL is written in this module
and sent through ``connection.cursor()``; values go in through
``Field.pre_save``/``get_db_prep_save`` and rows come back through
``Field.from_db_value`` and ``Model.from_db``, as the ORM does. Django does not
publish the SQL of an arbitrary queryset, so this path takes scopes whose ownership
it can write itself: those that filter with ``Scope.filter_conversations`` (the
default, and any scope that only overrides ``resolve_owner``), over a conversation
model whose default manager filters nothing. ``direct`` says whether a call
qualifies; the others (a host's own filter, another database) take the ORM path,
which behaves the same, a few round trips slower.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models, router, transaction
from django.utils import timezone

from sagents_django.exceptions import NotFound
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.scope import Scope, conversation_model, owner_field

Condition = tuple[str, list[Any]]
"""A SQL condition and its parameters."""


def direct(scope: Scope, using: str) -> bool:
    """Whether a write for ``scope`` to the database ``using`` takes the
    one-statement path: PostgreSQL, and ownership this module can write."""
    if connections[using].vendor != "postgresql":
        return False
    filters = getattr(type(scope), "filter_conversations", None)
    manager = type(conversation_model()._default_manager)
    return (
        filters is Scope.filter_conversations
        # A lent scope's one conversation is not written here: the ORM path.
        and getattr(scope, "lent", None) is None
        and manager.get_queryset is models.Manager.get_queryset
    )


_in_unit: ContextVar[bool] = ContextVar("sagents_in_unit", default=False)


@contextmanager
def unit(using: str | None = None) -> Iterator[None]:
    """One transaction whose writes succeed or fail together (a runtime step's rows,
    checkpoint and journal entry): inside it ``isolated`` opens no savepoint and the
    persistence lets a database error through, so the first failure fails the whole
    unit, which its owner tries again. A savepoint per write cost two statements
    each, and protected nothing a unit needs (``bench/durable_step.py``)."""
    token = _in_unit.set(True)
    try:
        with transaction.atomic(using=using):
            yield
    finally:
        _in_unit.reset(token)


def in_unit() -> bool:
    return _in_unit.get()


def isolated(using: str | None = None) -> AbstractContextManager[Any]:
    """A savepoint if a transaction is open, else nothing.

    Inside a transaction, a failing statement aborts it on PostgreSQL; the savepoint
    undoes only what failed, so the caller's transaction stays usable. In autocommit
    each statement is its own transaction: a savepoint would need a BEGIN and a
    COMMIT around it and protect nothing. Inside a ``unit`` a failure fails the whole
    unit, so no savepoint either.
    """
    if _in_unit.get() or transaction.get_autocommit(using or DEFAULT_DB_ALIAS):
        return nullcontext()
    return transaction.atomic(using=using)


def insert_if_owned(
    scope: Scope, pk: Any, rows: list[DisplayMessage], using: str
) -> list[DisplayMessage]:
    """Insert ``rows`` into conversation ``pk`` and move its ``updated_at`` to now,
    only if ``scope`` owns it, as one statement (a data-modifying CTE: the INSERT
    takes the conversation's id from the UPDATE's RETURNING, so an UPDATE that
    matches nothing inserts nothing). NotFound, with nothing written, otherwise;
    ``rows`` come back saved, with their ids."""
    connection = connections[using]
    conversation = conversation_model()._meta
    owned = _owner(scope, connection, alias=None)
    if owned is None:
        raise NotFound("conversation", str(pk))
    updated_at = _fields(conversation_model())["updated_at"]
    conversation_pk = column_of(conversation.pk)
    touch = (
        f"UPDATE {quote(conversation.db_table)} "
        f"SET {column_of(updated_at)} = %s "
        f"WHERE {conversation_pk} = %s AND {owned[0]} RETURNING {conversation_pk}"
    )
    opts = DisplayMessage._meta
    columns = _fields(DisplayMessage)
    foreign_key = columns["conversation"]
    # Every column but the generated id and the conversation's, which comes from
    # the UPDATE: that is what ties the insert to the ownership check.
    fields = [f for f in columns.values() if f not in (opts.pk, foreign_key)]
    values: list[Any] = []
    for row in rows:
        # What the ORM's insert does per field: pre_save fills inserted_at (on the
        # instance too), get_db_prep_save adapts (JSON, for one).
        values += [
            f.get_db_prep_save(f.pre_save(row, add=True), connection) for f in fields
        ]
    # A NULL in VALUES has no type and PostgreSQL reads it as text, which a uuid or
    # integer column refuses: nullable columns get their type spelled out.
    one_row = "({})".format(
        ", ".join(
            f"CAST(%s AS {f.db_type(connection)})" if f.null else "%s" for f in fields
        )
    )
    sql = (
        f"WITH owned AS ({touch}) "
        f"INSERT INTO {quote(opts.db_table)} "
        f"({', '.join(column_of(f) for f in [foreign_key, *fields])}) "
        f"SELECT owned.{conversation_pk}, v.* FROM owned "
        f"CROSS JOIN (VALUES {', '.join([one_row] * len(rows))}) AS v "
        f"RETURNING {column_of(opts.pk)}"
    )
    params = [
        updated_at.get_db_prep_save(timezone.now(), connection),
        conversation.pk.get_db_prep_save(pk, connection),
        *owned[1],
        *values,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = cursor.fetchall()
    if not ids:
        raise NotFound("conversation", str(pk))
    # RETURNING follows the order rows were inserted in, which is the VALUES order
    # (the CTE has one row): the ids match ``rows`` as bulk_create's do.
    for row, (row_id,) in zip(rows, ids, strict=True):
        row.pk = row_id
        row._state.adding = False
        row._state.db = using
    return rows


def update_newest_call(
    scope: Scope,
    call_id: str,
    *,
    conversation_pk: Any,
    statuses: Sequence[str],
    to: str,
    merge: dict[str, Any],
    using: str,
) -> DisplayMessage | None:
    """Move the newest ``tool_call`` row of ``call_id`` in a status of ``statuses``,
    in a conversation ``scope`` owns (and ``conversation_pk`` unless None), to
    ``to``, merging ``merge`` into its metadata as ``{**metadata, **merge}``; the
    row as saved, or None when none matches.

    One statement: the subquery is the ORM path's ``SELECT ... FOR UPDATE`` (the
    row locked before it changes), the UPDATE its save."""
    connection = connections[using]
    opts = DisplayMessage._meta
    table = quote(opts.db_table)
    by_name = _fields(DisplayMessage)
    fields = list(by_name.values())
    column = {name: column_of(f) for name, f in by_name.items()}
    sets, set_params = [f"{column['status']} = %s"], [to]
    if merge:
        metadata = column["metadata"]
        # jsonb || on a non-object would build an array: start from {} instead.
        sets.append(
            f"{metadata} = (CASE WHEN jsonb_typeof({metadata}) = 'object' "
            f"THEN {metadata} ELSE '{{}}'::jsonb END) || %s"
        )
        set_params.append(by_name["metadata"].get_db_prep_save(merge, connection))
    where = [
        f"m.{column['tool_call_id']} = %s",
        f"m.{column['content_type']} = %s",
        f"m.{column['status']} IN ({', '.join(['%s'] * len(statuses))})",
    ]
    where_params: list[Any] = [call_id, "tool_call", *statuses]
    if conversation_pk is not None:
        where.append(f"m.{column['conversation']} = %s")
        where_params.append(
            conversation_model()._meta.pk.get_db_prep_save(conversation_pk, connection)
        )
    owned = _owner(scope, connection, alias="c")
    if owned is None:
        return None
    if owned[0] != "TRUE":
        conversation = conversation_model()._meta
        where.append(
            f"m.{column['conversation']} IN (SELECT c.{column_of(conversation.pk)} "
            f"FROM {quote(conversation.db_table)} AS c WHERE {owned[0]})"
        )
        where_params += owned[1]
    pk = column_of(opts.pk)
    sql = (
        f"UPDATE {table} SET {', '.join(sets)} "
        f"WHERE {pk} = (SELECT m.{pk} FROM {table} AS m "
        f"WHERE {' AND '.join(where)} ORDER BY m.{pk} DESC LIMIT 1 "
        "FOR UPDATE) "
        f"RETURNING {', '.join(column[f.name] for f in fields)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*set_params, *where_params])
        found = cursor.fetchone()
    if found is None:
        return None
    values = _loaded(fields, found, connection)
    return DisplayMessage.from_db(using, [f.attname for f in fields], values)


def claim_returning(
    pk: Any,
    *,
    owner: str,
    now: Any,
    stale_before: Any,
    max_attempts: int,
    using: str,
) -> AgentRun | None:
    """``runtime.runs.claim_run`` on PostgreSQL as one statement: the UPDATE that
    takes a queued run (or a running one whose heartbeat is older than
    ``stale_before`` and has attempts left) returns the row it wrote, where the
    ORM reads it again. None when nothing matched."""
    connection = connections[using]
    by_name = _fields(AgentRun)
    fields = list(by_name.values())
    column = {name: column_of(f) for name, f in by_name.items()}

    def value(name: str, v: Any) -> Any:
        return by_name[name].get_db_prep_save(v, connection)

    status, heartbeat, attempts = (
        column["status"],
        column["heartbeat_at"],
        (column["attempts"]),
    )
    sql = (
        f"UPDATE {quote(AgentRun._meta.db_table)} SET {status} = %s, "
        f"{column['started_at']} = %s, {heartbeat} = %s, "
        f"{column['lease_owner']} = %s, {attempts} = {attempts} + 1 "
        f"WHERE {column['id']} = %s AND ({status} = %s OR ({status} = %s AND "
        f"({heartbeat} < %s OR {heartbeat} IS NULL) AND {attempts} < %s)) "
        f"RETURNING {', '.join(column[f.name] for f in fields)}"
    )
    params = [
        "running",
        value("started_at", now),
        value("heartbeat_at", now),
        owner,
        value("id", pk),
        "queued",
        "running",
        value("heartbeat_at", stale_before),
        max_attempts,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    if found is None:
        return None
    return AgentRun.from_db(
        using, [f.attname for f in fields], _loaded(fields, found, connection)
    )


def _loaded(
    fields: list[models.Field[Any, Any]], row: Sequence[Any], connection: Any
) -> list[Any]:
    """A row's values as the ORM loads them (``Field.from_db_value``)."""
    return [
        f.from_db_value(value, None, connection)
        if hasattr(f, "from_db_value")
        else value
        for f, value in zip(fields, row, strict=True)
    ]


def quote(name: str) -> str:
    """A PostgreSQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def _owner(scope: Scope, connection: Any, *, alias: str | None) -> Condition | None:
    """The SQL of ``Scope.filter_conversations`` on the conversation table (named
    ``alias``, if given); None when the scope owns nothing (the ORM filters with
    ``none()``, so the answer is "not found" without a query)."""
    model = conversation_model()
    pk = scope.owner_pk(model)
    if pk is None:
        return None
    field_name = owner_field(model)
    if field_name is None:
        return "TRUE", []  # ownerless conversations: everyone's
    field = _fields(model)[field_name]
    prefix = f"{alias}." if alias else ""
    # Prepared as filter() prepares it (an integer key given as "3" is 3).
    return f"{prefix}{column_of(field)} = %s", [field.get_db_prep_value(pk, connection)]


def column_of(field: models.Field[Any, Any]) -> str:
    """The quoted column of a concrete ``field``."""
    return quote(field.column)


def _fields(model: type[models.Model]) -> dict[str, models.Field[Any, Any]]:
    """The fields of ``model`` that have a column, by name, in the table's order."""
    return {
        f.name: f
        for f in model._meta.get_fields()
        if isinstance(f, models.Field) and f.concrete
    }


def insert_where(
    row: models.Model, fence: type[models.Model], **conditions: Any
) -> bool:
    """Insert ``row`` only while a row of ``fence`` matches ``conditions`` (field
    name to value, all equal), as one statement (``INSERT ... SELECT ... WHERE
    EXISTS``); whether it went in. The id is not read back. Every value is cast to
    its column's type (a bare parameter in a SELECT list is text to PostgreSQL)."""
    model = type(row)
    opts = model._meta
    connection = connections[router.db_for_write(model)]
    fields = [f for f in _fields(model).values() if f is not opts.pk]
    values = [f.get_db_prep_save(f.pre_save(row, add=True), connection) for f in fields]
    casts = ", ".join(f"CAST(%s AS {f.db_type(connection)})" for f in fields)
    fence_fields = _fields(fence)
    where = " AND ".join(f"{column_of(fence_fields[name])} = %s" for name in conditions)
    where_params = [
        fence_fields[name].get_db_prep_value(value, connection)
        for name, value in conditions.items()
    ]
    sql = (
        f"INSERT INTO {quote(opts.db_table)} "
        f"({', '.join(column_of(f) for f in fields)}) "
        f"SELECT {casts} WHERE EXISTS "
        f"(SELECT 1 FROM {quote(fence._meta.db_table)} WHERE {where})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, *where_params])
        return bool(cursor.rowcount)
