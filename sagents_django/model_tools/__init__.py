"""Django models as agent tools that cannot leave the caller's tenant.

``ModelTools(model, get_queryset=..., fields=[...], ...)`` makes ordinary core
``Tool``s named ``<name>_list``, ``_search``, ``_get``, ``_count`` and, when the site
allows them, ``_create`` and ``_update``. Every call runs over the queryset the site
gives for the caller's scope; the model sees only the fields, filters and orders the
site lists; pages are bounded and continue by keyset cursors; writes go through
``full_clean()`` in a transaction and may need a person's approval. Whatever the
model sends, the answer is rows of that queryset or an error it can read.

The modules: ``toolset`` (the class), ``spec`` (its configuration, checked),
``fields`` (paths, schemas, values), ``filters``, ``pages`` (ordering, cursors,
result size), ``reads``, ``writes``, ``schemas`` (what the model reads).
"""

from __future__ import annotations

from .filters import LOOKUPS, MAX_IN_VALUES, Lookup
from .spec import MAX_COUNT_LIMIT, MAX_PAGE_SIZE, Operation
from .toolset import ModelTools

__all__ = [
    "LOOKUPS",
    "MAX_COUNT_LIMIT",
    "MAX_IN_VALUES",
    "MAX_PAGE_SIZE",
    "Lookup",
    "ModelTools",
    "Operation",
]
