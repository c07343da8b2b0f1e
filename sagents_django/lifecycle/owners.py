"""Whose conversations are whose (the owner column of the active conversation
model), and their removal: named once for retention, erasure and export."""

from __future__ import annotations

from typing import Any, cast

from django.db import models

from sagents_django.models import DisplayMessage, TriggerEvent
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


def delete_conversations(ids: list[Any]) -> dict[str, int]:
    """Delete the conversations ``ids`` and every row hanging from them (in the
    caller's transaction); rows deleted per model label."""
    counts: dict[str, int] = {}
    # The transcript first, fetching ids only: deleted through the conversation,
    # every row would be loaded whole (content and all) by Django's collector
    # before its DELETE (bench/lifecycle.py: a third of a batch's time).
    rows = DisplayMessage.objects.filter(conversation__in=ids).only("pk")
    events = TriggerEvent.objects.filter(conversation_id__in=[str(pk) for pk in ids])
    conversations = conversation_model()._default_manager.filter(pk__in=ids)
    for queryset in (rows, events, conversations):
        for label, count in queryset.delete()[1].items():
            counts[label] = counts.get(label, 0) + count
    return counts
