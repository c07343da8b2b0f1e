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
