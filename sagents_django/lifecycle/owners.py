"""Whose conversations are whose: the owner column of the active conversation
model, named once for retention, erasure and export."""

from __future__ import annotations

from typing import Any, cast

from django.db import models

from sagents_django.scope import conversation_model, owned_by_users, owner_field


def owner_attname() -> str | None:
    """The owner foreign key's column (``user_id``), None for ownerless ones."""
    model = conversation_model()
    name = owner_field(model)
    if name is None:
        return None
    return cast(models.Field, model._meta.get_field(name)).attname


def conversations_of(owner_pk: Any) -> models.QuerySet:
    """The conversations of owner ``owner_pk`` (none on an ownerless site)."""
    manager = conversation_model()._default_manager
    attname = owner_attname()
    if attname is None:
        return manager.none()
    return manager.filter(**{attname: owner_pk})


def conversations_of_user(user_pk: Any) -> models.QuerySet:
    """The conversations user ``user_pk`` owns: on a site whose conversations
    belong to users; a team's conversations are not a member's."""
    if not owned_by_users(conversation_model()):
        return conversation_model()._default_manager.none()
    return conversations_of(user_pk)
