"""Display messages: what people see of a conversation, one row per item.

Rows are ordered by ``(inserted_at, sequence, id)`` (the ``sagents_dm_conv_order``
index). Pagination cursors are row ids: a row's sort key never changes once
written, so its id names a fixed position, the UI already holds the ids of the rows
it shows, and an id is trivially validated. ``before``/``after`` resolve the id to its
sort key (one primary-key lookup, within the conversation) and then walk the index
with a keyset condition (``keyset``). The latest page is one query, ownership
included.

On PostgreSQL an append is one statement too (``sql``): ownership check, the
conversation's ``updated_at`` and the INSERT of every row, a transaction of its own
in autocommit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from django.db import router, transaction
from django.db.models import Exists, QuerySet

from sagents_django.conf import sagents_settings
from sagents_django.exceptions import InvalidInput
from sagents_django.models import (
    CONTENT_TYPES,
    DISPLAY_STATUSES,
    MESSAGE_TYPES,
    ConversationBranch,
    DisplayMessage,
)
from sagents_django.scope import Scope

from . import sql
from .branches import Tree, load_tree, path_filter
from .conversations import (
    METADATA_MAX_BYTES,
    conversation_pk,
    owned_conversations,
    owned_ids,
    refuse_read_only,
    require_conversation,
)
from .keyset import beyond
from .validation import (
    choice,
    clean_json,
    clean_mapping,
    clean_text,
    parse_int,
    parse_uuid,
)

MAX_SEQUENCE: Final = 2**31 - 1
MAX_LOAD: Final = 10_000
"""Largest ``limit`` of ``load_display_messages``."""
ONE_STATEMENT_MAX_ROWS: Final = 1_000
"""Largest batch appended in one statement on PostgreSQL. A bigger one goes through
the ORM (one transaction): a few more round trips do not matter to it, and the
statement stays well below the 65,535 parameters PostgreSQL accepts when a site
binds them server-side."""
ATTRIBUTES: Final = frozenset(
    (
        "message_type",
        "content_type",
        "content",
        "status",
        "sequence",
        "metadata",
        "tool_call_id",
        "run_id",
    )
)
READ_TREE: Final = object()
"""``load_display_messages(tree=...)``'s default: read the branches."""
_ORDER = ("inserted_at", "sequence", "id")
_ORDER_DESC = ("-inserted_at", "-sequence", "-id")


def build_display_message(
    conversation_id: Any,
    *,
    message_type: str,
    content_type: str,
    content: dict[str, Any],
    status: str | None = None,
    sequence: int = 0,
    metadata: dict[str, Any] | None = None,
    tool_call_id: str | None = None,
    run_id: Any = None,
) -> DisplayMessage:
    """A validated, unsaved row. ``status`` None means: "pending" for a tool call,
    "interrupted" for a tool result marked ``is_interrupt``, else "completed".
    ``tool_call_id`` None is taken from the content of tool calls and results."""
    choice(message_type, MESSAGE_TYPES, what="message_type")
    choice(content_type, CONTENT_TYPES, what="content_type")
    content, _ = clean_json(
        content, what="content", max_bytes=sagents_settings.MAX_STATE_BYTES
    )
    metadata = clean_mapping(metadata, what="metadata", max_bytes=METADATA_MAX_BYTES)
    sequence = parse_int(sequence, what="sequence", maximum=MAX_SEQUENCE)
    if status is None:
        status = _default_status(content_type, content)
    else:
        choice(status, DISPLAY_STATUSES, what="status")
    if tool_call_id is None:
        tool_call_id = _call_id_of(content_type, content)
    tool_call_id = clean_text(tool_call_id, what="tool_call_id", max_length=255)
    if run_id is not None:
        run_id = parse_uuid(run_id, what="run_id")
    return DisplayMessage(
        run_id=run_id,
        conversation_id=conversation_id,
        message_type=message_type,
        content_type=content_type,
        content=content,
        status=status,
        sequence=sequence,
        metadata=metadata,
        tool_call_id=tool_call_id,
    )


def append_display_message(
    scope: Scope, conversation_id: Any, **attributes: Any
) -> DisplayMessage:
    """Append one row (attributes as ``build_display_message``); NotFound outside
    ``scope``. The conversation's ``updated_at`` moves to now."""
    return append_display_messages(scope, conversation_id, [attributes])[0]


def append_display_messages(
    scope: Scope, conversation_id: Any, items: Iterable[Mapping[str, Any]]
) -> list[DisplayMessage]:
    """Append several rows in one INSERT (all validated first: one bad item and
    none is written); returns them saved, with ids."""
    pk = conversation_pk(conversation_id)
    refuse_read_only(scope, pk)
    if isinstance(items, Mapping | str | bytes):
        raise InvalidInput("items must be a list of attribute dicts")
    rows = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInput(
                f"item {index} must be a dict, not {type(item).__name__}"
            )
        unknown = set(item) - ATTRIBUTES
        if unknown:
            raise InvalidInput(
                f"item {index} has unknown attributes {sorted(map(str, unknown))}; "
                f"allowed: {', '.join(sorted(ATTRIBUTES))}"
            )
        missing = {"message_type", "content_type", "content"} - set(item)
        if missing:
            raise InvalidInput(f"item {index} lacks {', '.join(sorted(missing))}")
        rows.append(build_display_message(pk, **item))
    if not rows:
        require_conversation(scope, pk, touch=False)
        return []
    using = router.db_for_write(DisplayMessage)
    if len(rows) <= ONE_STATEMENT_MAX_ROWS and sql.direct(scope, using):
        with sql.isolated(using):
            return sql.insert_if_owned(scope, pk, rows, using)
    with transaction.atomic():
        require_conversation(scope, pk, touch=True)
        if len(rows) == 1:
            rows[0].save(force_insert=True)
        else:
            DisplayMessage.objects.bulk_create(rows)
    return rows


def append_text_message(
    scope: Scope,
    conversation_id: Any,
    message_type: str,
    text: str,
    *,
    metadata: dict[str, Any] | None = None,
    run_id: Any = None,
) -> DisplayMessage:
    """Append a text row (of the run ``run_id``, if any)."""
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, not {type(text).__name__}")
    return append_display_message(
        scope,
        conversation_id,
        message_type=message_type,
        content_type="text",
        content={"text": text},
        metadata=metadata,
        run_id=run_id,
    )


def load_display_messages(
    scope: Scope,
    conversation_id: Any,
    *,
    limit: int | None = None,
    before: int | str | None = None,
    after: int | str | None = None,
    all_branches: bool = False,
    tree: Tree | object | None = READ_TREE,
) -> list[DisplayMessage]:
    """Rows in display order; ``[]`` when the conversation is not in ``scope``.

    The rows of the branch shown (``services.branches``), or, with
    ``all_branches``, every row of the conversation. ``tree``: the branches as
    the caller knows them (a page drawing rows of the branch it shows), instead
    of reading them.

    ``limit``: the latest ``limit`` rows (or, with only ``after``, the first
    ``limit`` after it). ``before``/``after``: row ids (cursors); only rows strictly
    before/after that row. A cursor that is not a row of this conversation is
    InvalidInput.
    """
    pk = conversation_pk(conversation_id)
    if limit is not None:
        limit = parse_int(limit, what="limit", minimum=1, maximum=MAX_LOAD)
    before_id = _cursor(before, "before")
    after_id = _cursor(after, "after")
    # Ownership is part of the query (one round trip for the latest page): rows of a
    # conversation outside the scope simply do not match.
    rows = DisplayMessage.objects.filter(
        conversation_id=pk, conversation__in=owned_ids(scope)
    )
    if all_branches is True:
        return _page(scope, pk, rows, limit, before_id, after_id)[0]
    if tree is not READ_TREE:
        shown = path_filter(tree if isinstance(tree, Tree) else None)
        rows = rows if shown is None else rows.filter(shown)
        return _page(scope, pk, rows, limit, before_id, after_id)[0]
    # Whether the conversation ever branched comes with the rows (still one round
    # trip for the latest page of one that never did); one that did is read again
    # with the branch shown's rows only.
    marked = rows.annotate(
        _branched=Exists(ConversationBranch.objects.filter(conversation_id=pk))
    )
    found, branched = _page(scope, pk, marked, limit, before_id, after_id)
    if not branched:
        return found
    shown = path_filter(load_tree(pk))
    rows = rows if shown is None else rows.filter(shown)
    return _page(scope, pk, rows, limit, before_id, after_id)[0]


def _page(
    scope: Scope,
    pk: Any,
    rows: QuerySet[DisplayMessage],
    limit: int | None,
    before_id: int | None,
    after_id: int | None,
) -> tuple[list[DisplayMessage], bool]:
    """The rows asked for, and whether a row read says its conversation branched
    (``rows`` annotated with ``_branched``; False when not)."""
    branched = False
    cursors = [i for i in (before_id, after_id) if i is not None]
    keys: dict[int, tuple[Any, ...]] = {}
    if cursors:
        marks = ("_branched",) if "_branched" in rows.query.annotations else ()
        for key in rows.filter(pk__in=cursors).values_list(*_ORDER, *marks):
            keys[key[2]] = key[:3]
            branched = branched or bool(marks and key[3])
        missing = [i for i in cursors if i not in keys]
        if missing and not branched:
            if not owned_conversations(scope).filter(pk=pk).exists():
                return [], False
            raise InvalidInput(
                f"cursor {missing[0]} is not a display message of this conversation"
            )
        if missing:
            return [], True
    if before_id is not None:
        rows = rows.filter(beyond(_ORDER, keys[before_id], descending=True))
    if after_id is not None:
        rows = rows.filter(beyond(_ORDER, keys[after_id], descending=False))
    if limit is None:
        found = list(rows.order_by(*_ORDER))
    elif after_id is not None and before_id is None:
        found = list(rows.order_by(*_ORDER)[:limit])
    else:
        found = list(rows.order_by(*_ORDER_DESC)[:limit])
        found.reverse()
    return found, branched or any(getattr(r, "_branched", False) for r in found)


def display_message_cursor(message: DisplayMessage) -> int:
    """The cursor naming ``message``'s position: its id."""
    return message.pk


def _cursor(value: Any, what: str) -> int | None:
    if value is None:
        return None
    # At most 19 digits (ids are 64-bit): a longer string is not converted at all
    # (Python refuses numbers of over 4,300 digits with a ValueError of its own).
    if (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value) <= 19
    ):
        value = int(value)
    return parse_int(value, what=what, minimum=1, maximum=2**63 - 1)


def _default_status(content_type: str, content: dict[str, Any]) -> str:
    if content_type == "tool_call":
        return "pending"
    if content_type == "tool_result" and content.get("is_interrupt") is True:
        return "interrupted"
    return "completed"


def _call_id_of(content_type: str, content: dict[str, Any]) -> str:
    key = {"tool_call": "call_id", "tool_result": "tool_call_id"}.get(content_type)
    value = content.get(key) if key else None
    return value if isinstance(value, str) else ""
