"""One-statement writes on PostgreSQL, and when a savepoint is worth its round trips.

Appending display rows and moving a tool-call card are what the runtime writes for
every event of a turn. Through the ORM each is a transaction of several statements
(BEGIN, the ownership check, the write, COMMIT), and on PostgreSQL their cost is those
round trips, not Python. There the services send one statement instead: a statement
is atomic by itself, so in autocommit it is its own transaction (one round trip, one
commit). Ownership stays the scope's business: the statement embeds the SQL Django
compiles from ``owned_conversations(scope)``, so a host's scope class, a swapped
conversation model or another owner field work unchanged. Other backends keep the
ORM path.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.sql import Query

from sagents_django.scope import Scope

from .conversations import conversation_model, owned_conversations


def one_statement(using: str) -> bool:
    """Whether writes to the database ``using`` take the one-statement path."""
    return connections[using].vendor == "postgresql"


def isolated(using: str | None = None) -> AbstractContextManager[Any]:
    """A savepoint if a transaction is open, else nothing.

    Inside a transaction, a failing statement aborts it on PostgreSQL; the savepoint
    undoes only what failed, so the caller's transaction stays usable. In autocommit
    each statement is its own transaction: a savepoint would need a BEGIN and a
    COMMIT around it and protect nothing.
    """
    connection = connections[using or DEFAULT_DB_ALIAS]
    if connection.in_atomic_block or not connection.get_autocommit():
        return transaction.atomic(using=using)
    return nullcontext()


def compiled(
    queryset: models.QuerySet, connection: BaseDatabaseWrapper
) -> tuple[str, tuple[Any, ...]]:
    """The SQL and parameters of ``queryset`` for ``connection``.

    Raises ``EmptyResultSet`` when it cannot match anything (a scope that owns
    nothing filters with ``none()``): the caller answers "not found" without a query.
    """
    return queryset.query.get_compiler(connection=connection).as_sql()


def touch_owned_conversation(
    scope: Scope, pk: uuid.UUID, now: datetime, connection: BaseDatabaseWrapper
) -> tuple[str, list[Any]]:
    """``UPDATE`` that moves the conversation's ``updated_at`` to ``now`` and
    ``RETURNING`` its id, only if ``scope`` owns it: no row back means not found.

    The owner condition is the scope's own queryset, as a subquery. Raises
    ``EmptyResultSet`` as ``compiled`` does.
    """
    opts = conversation_model()._meta
    quote = connection.ops.quote_name
    # No ordering: it means nothing in a subquery and costs to compile.
    owned = owned_conversations(scope).order_by().values("pk")
    owned_sql, owned_params = compiled(owned, connection)
    updated_at = opts.get_field("updated_at")
    pk_column = quote(opts.pk.column)
    sql = (
        f"UPDATE {quote(opts.db_table)} SET {quote(updated_at.column)} = %s "
        f"WHERE {pk_column} = %s AND {pk_column} IN ({owned_sql}) "
        f"RETURNING {pk_column}"
    )
    params = [
        updated_at.get_db_prep_save(now, connection),
        opts.pk.get_db_prep_save(pk, connection),
        *owned_params,
    ]
    return sql, params


def fetch(
    connection: BaseDatabaseWrapper,
    sql: str,
    params: list[Any],
    fields: list[models.Field],
) -> list[list[Any]]:
    """Execute ``sql``, whose RETURNING lists the columns of ``fields`` in that order,
    and return its rows converted as the ORM converts them (jsonb arrives as text,
    for one)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    model = fields[0].model
    compiler = Query(model).get_compiler(connection=connection)
    converters = compiler.get_converters(
        [field.get_col(model._meta.db_table) for field in fields]
    )
    if not converters:
        return [list(row) for row in rows]
    return list(compiler.apply_converters(rows, converters))
