"""Scope: who is asking, and which conversations that lets them see.

Every service function takes a scope first (the Phoenix scope pattern Sagents uses)
and sees only the conversations the scope owns; a conversation outside it is "not
found", never "forbidden", so ids of other tenants cannot be probed.

The default ``Scope`` is built from ``request.user``: the owner is the user, which
matches the default conversation model (``OWNER_FIELD = "user"``). Anonymous or
unauthenticated users own nothing: they see no conversation and cannot create one.

The protocol a host's scope class follows (subclass ``Scope`` or write your own)::

    from_request(request) -> scope          classmethod; what get_scope() calls
    filter_conversations(queryset) -> qs     the conversations this scope owns
    owner_values(model) -> dict              field values a new conversation gets
                                             (raise PermissionDenied if none)
    to_dict() -> dict / from_dict(data)      JSON form, for a worker that rebuilds
                                             the scope of a queued run

Name the class in ``SAGENTS["SCOPE"]`` (a dotted path). A site whose conversations
belong to a team only changes where the owner comes from::

    @dataclass(frozen=True, kw_only=True)
    class TeamScope(Scope):
        @classmethod
        def for_user(cls, user):
            team = getattr(user, "team", None) if _authenticated(user) else None
            return cls(user=user, owner=team)

    SAGENTS = {"SCOPE": "myapp.scope.TeamScope"}

A scope is runtime data of the current caller: never store it in agent state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest
from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings


def _authenticated(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def owner_field(model: type[models.Model]) -> str | None:
    """The owner foreign key a conversation model declares (None: ownerless)."""
    return getattr(model, "OWNER_FIELD", None)


@dataclass(frozen=True, kw_only=True)
class Scope:
    """The acting user and the owner whose conversations they may use."""

    user: Any = None
    """The acting user (a user instance, ``AnonymousUser`` or None)."""
    owner: Any = None
    """What conversations belong to (an instance or its primary key); None: nothing."""

    @classmethod
    def for_user(cls, user: Any) -> Self:
        """The default: an authenticated user owns their own conversations."""
        return cls(user=user, owner=user if _authenticated(user) else None)

    @classmethod
    def from_request(cls, request: HttpRequest) -> Self:
        return cls.for_user(getattr(request, "user", None))

    @property
    def is_authenticated(self) -> bool:
        return _authenticated(self.user)

    def owner_pk(self) -> Any:
        """The owner's primary key, or None when the scope owns nothing."""
        owner = self.owner
        if isinstance(owner, models.Model):
            return owner.pk  # None for an unsaved instance: owns nothing
        return owner

    def filter_conversations(self, queryset: models.QuerySet) -> models.QuerySet:
        """Narrow ``queryset`` (of the conversation model) to what this scope owns."""
        pk = self.owner_pk()
        if pk is None:
            return queryset.none()
        field = owner_field(queryset.model)
        if field is None:
            # Ownerless conversations are shared by everyone the site lets in.
            return queryset
        attname = queryset.model._meta.get_field(field).attname
        return queryset.filter(**{attname: pk})

    def owner_values(self, model: type[models.Model]) -> dict[str, Any]:
        """The owner field values of a conversation this scope creates."""
        pk = self.owner_pk()
        if pk is None:
            raise PermissionDenied("An anonymous scope cannot create conversations.")
        field = owner_field(model)
        if field is None:
            return {}
        return {model._meta.get_field(field).attname: pk}

    def to_dict(self) -> dict[str, Any]:
        """JSON form: only the acting user's id; the owner is derived again on load."""
        user = self.user
        pk = user.pk if _authenticated(user) else None
        return {"user_id": pk if pk is None or isinstance(pk, int) else str(pk)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Rebuild with ``for_user``, so ownership is checked again (a user who left
        a team no longer sees its conversations); an unknown user owns nothing."""
        user_id = data.get("user_id") if isinstance(data, dict) else None
        user = None
        if user_id is not None:
            user = get_user_model()._default_manager.filter(pk=user_id).first()
        return cls.for_user(user)


def scope_class() -> type[Scope]:
    """The class named by ``SAGENTS["SCOPE"]``."""
    return import_string(sagents_settings.SCOPE)


def get_scope(request: HttpRequest) -> Scope:
    """The scope of ``request``, built by the configured scope class."""
    return scope_class().from_request(request)
