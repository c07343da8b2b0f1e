"""Failed writes of a turn, recorded where an operator sees them.

A save that fails during a turn must not be a log line only: ``record_failure``
writes a ``PersistenceFailure`` row on the conversation (listed on its admin page
and in its own admin list). It is called from an error path, so it never raises:
when even the record cannot be written (the database is gone, the conversation
was deleted or is not the scope's) it logs and answers None.
"""

from __future__ import annotations

import logging
from typing import Any

from sagents_django.models import FAILURE_KINDS, PersistenceFailure
from sagents_django.scope import Scope

from .conversations import require_conversation
from .sql import isolated
from .validation import choice, clean_mapping, clean_text, parse_uuid

logger = logging.getLogger(__name__)

ERROR_MAX_LENGTH = 4_000
"""An error message longer than this is cut: it may quote the value it refused."""
DETAILS_MAX_BYTES = 16 * 1024


def record_failure(
    scope: Scope,
    conversation_id: Any,
    *,
    kind: str,
    operation: str,
    error: BaseException,
    run_id: Any = None,
    details: dict[str, Any] | None = None,
) -> PersistenceFailure | None:
    """Record that writing ``kind`` ("state" or "display") failed with ``error``
    while doing ``operation``; None when the record itself could not be written."""
    try:
        with isolated():
            pk = require_conversation(scope, conversation_id, touch=False)
            return PersistenceFailure.objects.create(
                conversation_id=pk,
                run_id=None if run_id is None else parse_uuid(run_id, what="run_id"),
                kind=choice(kind, FAILURE_KINDS, what="kind"),
                operation=str(operation)[:64],
                error_type=_qualified_name(type(error))[:255],
                error=_message(error),
                details=clean_mapping(
                    details or {}, what="details", max_bytes=DETAILS_MAX_BYTES
                ),
            )
    except Exception:
        logger.exception(
            "Could not record a failed %s write (%s) of conversation %s: %s",
            kind,
            operation,
            conversation_id,
            _message(error),
        )
        return None


def _qualified_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _message(error: BaseException) -> str:
    text = str(error) or repr(error)
    if len(text) > ERROR_MAX_LENGTH:
        text = f"{text[:ERROR_MAX_LENGTH]}… ({len(text)} characters)"
    # NULs and lone surrogates cannot be stored on PostgreSQL: replaced.
    return clean_text(text, what="error", max_length=2 * ERROR_MAX_LENGTH)
