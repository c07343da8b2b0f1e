"""System checks for ``settings.SAGENTS``; ids are stable and tested by id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core import checks

from sagents_django import conf


def check_sagents_settings(**kwargs: Any) -> list[checks.CheckMessage]:
    user = conf.user_settings()
    if not isinstance(user, Mapping):
        return [
            checks.Error(
                f"settings.SAGENTS must be a dict, not {type(user).__name__}.",
                hint='Set SAGENTS = {"MODEL": "sagents/demo"} or remove the setting.',
                id="sagents_django.E001",
            )
        ]

    messages: list[checks.CheckMessage] = []
    model = user.get("MODEL", conf.DEFAULTS["MODEL"])
    if not isinstance(model, str) or not model.strip():
        messages.append(
            checks.Error(
                f"SAGENTS['MODEL'] must be a non-empty string, not {model!r}.",
                hint='Use a litellm model string such as "openai/gpt-4o-mini", or '
                '"sagents/demo" for the offline demo model.',
                id="sagents_django.E002",
            )
        )
    params = user.get("MODEL_PARAMS", {})
    if not isinstance(params, Mapping):
        messages.append(
            checks.Error(
                f"SAGENTS['MODEL_PARAMS'] must be a dict, not {params!r}.",
                hint='Pass litellm keyword arguments, e.g. {"temperature": 0}.',
                id="sagents_django.E003",
            )
        )
    executor = user.get("EXECUTOR", conf.DEFAULTS["EXECUTOR"])
    if executor not in conf.EXECUTORS:
        messages.append(
            checks.Error(
                f"SAGENTS['EXECUTOR'] must be one of {conf.EXECUTORS!r}, "
                f"not {executor!r}.",
                hint='Use "inline" to run turns in the web process, "celery" to run '
                "them on Celery workers.",
                id="sagents_django.E004",
            )
        )
    unknown = sorted(set(user) - set(conf.DEFAULTS))
    if unknown:
        messages.append(
            checks.Warning(
                f"Unknown SAGENTS keys: {', '.join(map(repr, unknown))}.",
                hint=f"Known keys: {', '.join(conf.DEFAULTS)}.",
                id="sagents_django.W001",
            )
        )
    return messages


def check_scope_resolves_owner(**kwargs: Any) -> list[checks.CheckMessage]:
    """The configured scope class can name an owner of the configured conversation
    model: the default ``Scope`` only knows users, so a model owned by anything else
    needs a scope that overrides ``resolve_owner``. A SCOPE that cannot be imported
    is another check's business."""
    from django.utils.module_loading import import_string

    from sagents_django.scope import Scope, conversation_model, owned_by_users

    try:
        cls = import_string(conf.get("SCOPE"))
        model = conversation_model()
    except Exception:
        return []
    if not (isinstance(cls, type) and issubclass(cls, Scope)):
        return []  # a scope of the host's own design: it answers for itself
    if owned_by_users(model) or _resolves_owner(cls):
        return []
    field = getattr(model, "OWNER_FIELD", None)
    return [
        checks.Error(
            f"The scope class {cls.__module__}.{cls.__qualname__} cannot resolve "
            f"the owner of {model._meta.label} ({field!r} is not a user), so every "
            "user owns nothing.",
            hint="Subclass sagents_django.scope.Scope, override the classmethod "
            "resolve_owner(cls, user) to return the user's owner instance (or None), "
            'and name it in SAGENTS["SCOPE"].',
            obj=model,
            id="sagents_django.E100",
        )
    ]


def _resolves_owner(cls: type) -> bool:
    """Whether a Scope subclass decides owners itself: it overrides
    ``resolve_owner``, or ``for_user``, which both ``from_request`` and
    ``from_dict`` (a worker's rebuilt scope) go through."""
    from sagents_django.scope import Scope

    for klass in cls.__mro__:
        if klass is Scope:
            return False
        if {"resolve_owner", "for_user"} & set(vars(klass)):
            return True
    return False
