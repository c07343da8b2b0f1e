"""Scope: who is asking, and which conversations that lets them see.

Every service function takes a scope first (the Phoenix scope pattern Sagents uses)
and sees only the conversations the scope owns; a conversation outside it is "not
found", never "forbidden", so ids of other tenants cannot be probed.

A scope is built from ``request.user``; what the user owns conversations as comes
from one classmethod, ``resolve_owner(user)``. The default answers the user itself,
but only when the conversation model's owner foreign key points at the user model
(or the model has no owner): for any other owner (a team, an organization) it
refuses to guess and answers None, and a scope whose owner is None owns nothing: it
sees no conversation and cannot create one. Anonymous users own nothing either. A
system check (``sagents_django.E100``) fails while the configured scope class cannot
resolve the configured model's owner.

A site whose conversations belong to a team overrides that one method::

    @dataclass(frozen=True, kw_only=True)
    class TeamScope(Scope):
        @classmethod
        def resolve_owner(cls, user):
            return user.team  # None (no team): sees nothing, cannot create

    SAGENTS = {"SCOPE": "myapp.scope.TeamScope"}

What the app calls on a scope (a host's scope class subclasses ``Scope``: the
runtime refuses any other, and system check E008 says so)::

    from_request(request) -> scope          classmethod; what get_scope() calls
    filter_conversations(queryset) -> qs     the conversations this scope owns
    owner_values(model) -> dict              field values a new conversation gets
                                             (raise PermissionDenied if none)
    to_dict() -> dict / from_dict(data)      JSON form, for a worker that rebuilds
                                             the scope of a queued run

A scope is runtime data of the current caller: never store it in agent state.

A conversation shared with a user (``sagents_django.sharing``) is used through the
scope its share *lends* (``sharing.scope_for``): the conversation owner's scope,
narrowed to that one conversation, with the acting user kept as ``user`` and the
share's access in ``lent``. Every service reads through ``filter_conversations``, so
a lent scope sees that conversation and nothing else of the owner's; a "read" one
changes nothing there (the services answer ``NotFound``), and no lent scope manages
the conversation (rename, delete, shares: the owner's own scope only).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal, Self, cast

import swapper
from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.db import models
from django.http import HttpRequest
from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.exceptions import InvalidInput


def _authenticated(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def owner_field(model: type[models.Model]) -> str | None:
    """The owner foreign key a conversation model declares (None: ownerless)."""
    return getattr(model, "OWNER_FIELD", None)


def owner_model(model: type[models.Model]) -> type[models.Model] | None:
    """The model the owner field of conversation ``model`` points at (None when the
    model is ownerless or the field is not a relation)."""
    field = owner_field(model)
    if field is None:
        return None
    target = model._meta.get_field(field).related_model
    return target if isinstance(target, type) else None  # "self" when unresolved


def owned_by_users(model: type[models.Model]) -> bool:
    """Whether conversations of ``model`` are owned by users (or by nobody), the only
    case where a user can stand for the owner without a host's say."""
    if owner_field(model) is None:
        return True
    target = owner_model(model)
    if not isinstance(target, type):  # not a relation, or unresolved
        return False
    user_model = get_user_model()
    return target._meta.concrete_model is user_model._meta.concrete_model


def conversation_model() -> type[models.Model]:
    """The active (possibly swapped) conversation model."""
    return swapper.load_model("sagents_django", "Conversation")


Access = Literal["read", "write"]
"""What a share lends: "read" (the transcript and files) or "write" (also send,
approve, cancel)."""
ACCESS: tuple[Access, ...] = ("read", "write")


@dataclass(frozen=True, kw_only=True, slots=True)
class Lending:
    """The share a lent scope acts through."""

    conversation_id: uuid.UUID
    """The one conversation the scope may use."""
    access: Access
    """What the share allows there."""

    def to_dict(self) -> dict[str, str]:
        return {"conversation_id": str(self.conversation_id), "access": self.access}


@dataclass(frozen=True, kw_only=True)
class Scope:
    """The acting user and the owner whose conversations they may use."""

    user: Any = None
    """The acting user (a user instance, ``AnonymousUser`` or None)."""
    owner: Any = None
    """What conversations belong to (an instance or its primary key); None: nothing."""
    lent: Lending | None = None
    """Set on a scope a share lends (``sharing.scope_for``): ``owner`` is then the
    conversation's owner, ``user`` the person acting, and the scope sees only
    ``lent.conversation_id``. None: the user's own scope."""

    @classmethod
    def resolve_owner(cls, user: Any) -> Any:
        """What the authenticated ``user`` owns conversations as (an instance of the
        owner model, or its primary key), or None: owns nothing, sees nothing,
        cannot create. The one method a host overrides for a non-user owner.

        The default answers ``user`` only when the conversation model's owner
        foreign key targets ``AUTH_USER_MODEL`` (or the model has no owner), and
        refuses (None) otherwise: a user's id is never taken for a team's.
        """
        return user if owned_by_users(conversation_model()) else None

    @classmethod
    def for_user(cls, user: Any) -> Self:
        """The scope of ``user``: ``resolve_owner`` for a signed-in user, nothing for
        anyone else. A related object the user lacks (``user.membership`` raising
        DoesNotExist) is no owner."""
        owner = None
        if _authenticated(user):
            try:
                owner = cls.resolve_owner(user)
            except ObjectDoesNotExist:
                owner = None
        return cls(user=user, owner=owner)

    @classmethod
    def from_request(cls, request: HttpRequest) -> Self:
        return cls.for_user(getattr(request, "user", None))

    @property
    def is_authenticated(self) -> bool:
        return _authenticated(self.user)

    @property
    def read_only(self) -> bool:
        """Lent by a read share: the services change nothing through it."""
        return self.lent is not None and self.lent.access != "write"

    def owner_pk(self, model: type[models.Model] | None = None) -> Any:
        """The owner's primary key, or None when the scope owns nothing.

        With the conversation ``model``, an owner instance of another model than
        its owner field targets owns nothing there (a group whose id equals a
        user's id is not that user).
        """
        owner = self.owner
        if isinstance(owner, models.Model):
            target = owner_model(model) if model is not None else None
            if isinstance(target, type) and not isinstance(owner, target):
                return None
            return owner.pk  # None for an unsaved instance: owns nothing
        return owner

    def filter_conversations(self, queryset: models.QuerySet) -> models.QuerySet:
        """Narrow ``queryset`` (of the conversation model) to what this scope owns
        (lent: to the one conversation its share lends)."""
        pk = self.owner_pk(queryset.model)
        if pk is None:
            return queryset.none()
        if self.lent is not None:
            queryset = queryset.filter(pk=self.lent.conversation_id)
        field = owner_field(queryset.model)
        if field is None:
            # Ownerless conversations are shared by everyone the site lets in.
            return queryset
        attname = _concrete(queryset.model, field).attname
        return queryset.filter(**{attname: pk})

    def owner_values(self, model: type[models.Model]) -> dict[str, Any]:
        """The owner field values of a conversation this scope creates."""
        pk = self.owner_pk(model)
        if pk is None:
            if not self.is_authenticated:
                raise PermissionDenied(
                    "An anonymous scope cannot create conversations."
                )
            raise PermissionDenied(
                "This scope owns nothing (its resolve_owner found no owner for the "
                "user), so it cannot create conversations."
            )
        field = owner_field(model)
        if field is None:
            return {}
        return {_concrete(model, field).attname: pk}

    def to_dict(self) -> dict[str, Any]:
        """JSON form: only the acting user's id (and, lent, the share's
        conversation and access); the owner is derived again on load."""
        user = self.user
        pk = user.pk if _authenticated(user) else None
        data: dict[str, Any] = {
            "user_id": pk if pk is None or isinstance(pk, int) else str(pk)
        }
        if self.lent is not None:
            data["lent"] = self.lent.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Rebuild with ``for_user``, so ownership is checked again (a user who left
        a team no longer sees its conversations); an unknown user owns nothing.

        ``data`` must be what ``to_dict`` writes: ``{"user_id": None}`` or the id in
        the type the user model's primary key takes (an int for integer keys, text
        otherwise), with ``"lent"`` for a scope a share lent (the share is asked
        again: ``sharing.access.lend_again``); anything else is InvalidInput, never
        a guess.
        """
        if not isinstance(data, dict) or "user_id" not in data:
            raise InvalidInput(
                f"A scope's JSON form is {{'user_id': ...}}; got {_short(data)}"
            )
        user_id = data["user_id"]
        lent = _lending(data.get("lent"))
        if user_id is None:
            return cls.for_user(None)
        model = get_user_model()
        user_id = _user_pk(model, user_id)
        scope = cls.for_user(model._default_manager.filter(pk=user_id).first())
        if lent is None:
            return scope
        # The share is asked again: revoked (or narrowed) since, the scope gets
        # what is left, which may be nothing.
        from sagents_django.sharing.access import lend_again

        return cast(Self, lend_again(scope, lent))


def _lending(value: Any) -> Lending | None:
    """The ``lent`` part of a scope's JSON form (absent: None), or InvalidInput."""
    if value is None:
        return None
    bad = InvalidInput(
        "lent must be {'conversation_id': <uuid>, 'access': 'read' or 'write'}; "
        f"got {_short(value)}"
    )
    if not isinstance(value, dict) or set(value) != {"conversation_id", "access"}:
        raise bad
    access, cid = value["access"], value["conversation_id"]
    if access not in ACCESS or not isinstance(cid, str) or len(cid) > 64:
        raise bad
    try:
        return Lending(conversation_id=uuid.UUID(cid), access=access)
    except ValueError:
        raise bad from None


def _user_pk(model: type[models.Model], value: Any) -> Any:
    """``value`` as a primary key of the user ``model``, or InvalidInput."""
    field = model._meta.pk
    bad = InvalidInput(
        f"user_id must be a {model._meta.label} primary key, not {_short(value)}"
    )
    if isinstance(field, models.IntegerField):
        # A float or a bool would be read as an integer (1.5 and True as user 1).
        if type(value) is not int:
            raise bad
    elif type(value) is not str or len(value) > 255:
        raise bad
    try:
        value = field.to_python(value)
        field.run_validators(value)  # the column's range, for integers
    except ValidationError:
        raise bad from None
    return value


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}..."


def decides_owners(cls: type[Scope]) -> bool:
    """Whether a Scope subclass decides owners itself: it overrides
    ``resolve_owner``, or ``for_user``, which both ``from_request`` and
    ``from_dict`` (a worker's rebuilt scope) go through. ``Scope`` itself does not:
    it knows only users."""
    for klass in cls.__mro__:
        if klass is Scope:
            return False
        if {"resolve_owner", "for_user"} & set(vars(klass)):
            return True
    return False


def scope_class() -> type[Scope]:
    """The class named by ``SAGENTS["SCOPE"]``."""
    return import_string(sagents_settings.SCOPE)


def get_scope(request: HttpRequest) -> Scope:
    """The scope of ``request``, built by the configured scope class."""
    return scope_class().from_request(request)


def _concrete(model: type[models.Model], name: str) -> models.Field:
    """The owner field (a foreign key by contract: OWNER_FIELD names one)."""
    return cast(models.Field, model._meta.get_field(name))
