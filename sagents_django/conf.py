"""The one door to ``settings.SAGENTS``.

Read late (never at import, so ``override_settings`` and test settings apply), merged
over embedded defaults, cached until Django's ``setting_changed`` signal says SAGENTS
changed. Validation with hints lives in ``checks.py``; here a bad value only raises
``ImproperlyConfigured`` for code that runs despite the failed check.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Final, Literal, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

Executor = Literal["inline", "celery"]
EXECUTORS: Final[tuple[Executor, ...]] = ("inline", "celery")

DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        # A litellm model string; the default is the offline demo model.
        "MODEL": "sagents/demo",
        # Extra keyword arguments for every litellm completion call.
        "MODEL_PARAMS": {},
        # Models litellm falls back to, in order, when MODEL fails.
        "FALLBACK_MODELS": [],
        # Where turns run: "inline" (an asyncio task in the web process) or "celery".
        "EXECUTOR": "inline",
        # The Scope class (dotted path) that get_scope() builds from a request.
        "SCOPE": "sagents_django.scope.Scope",
        # Largest JSON document (UTF-8 bytes) stored as agent state or display content.
        "MAX_STATE_BYTES": 20 * 1024 * 1024,
    }
)


def user_settings() -> Any:
    """Return ``settings.SAGENTS`` as the project wrote it (``{}`` when unset)."""
    return getattr(settings, "SAGENTS", {})


@cache
def _merged() -> Mapping[str, Any]:
    user = user_settings()
    if not isinstance(user, Mapping):
        raise ImproperlyConfigured(
            f"settings.SAGENTS must be a dict, not {type(user).__name__}: {user!r}"
        )
    return MappingProxyType({**DEFAULTS, **user})


def reset_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    """Drop the cache when SAGENTS changes (connected in ``AppConfig.ready``)."""
    if setting == "SAGENTS":
        _merged.cache_clear()


def get(key: str) -> Any:
    """Return one SAGENTS value, the embedded default when the project set none."""
    try:
        return _merged()[key]
    except KeyError:
        raise ImproperlyConfigured(f"Unknown SAGENTS setting {key!r}") from None


class SagentsSettings:
    """Typed accessors over ``settings.SAGENTS``; use ``sagents_settings``."""

    @property
    def MODEL(self) -> str:
        return cast(str, get("MODEL"))

    @property
    def MODEL_PARAMS(self) -> dict[str, Any]:
        return dict(get("MODEL_PARAMS"))

    @property
    def FALLBACK_MODELS(self) -> list[str]:
        return list(get("FALLBACK_MODELS"))

    @property
    def EXECUTOR(self) -> Executor:
        return cast(Executor, get("EXECUTOR"))

    @property
    def SCOPE(self) -> str:
        return cast(str, get("SCOPE"))

    @property
    def MAX_STATE_BYTES(self) -> int:
        return cast(int, get("MAX_STATE_BYTES"))


sagents_settings = SagentsSettings()
