"""Fixtures of the lifecycle tests: an export storage of their own, the disk
backend's root, and a scan of every store for what a user left behind."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.files.storage import storages
from django.core.serializers.json import DjangoJSONEncoder

from sagents_django.runtime import inflight, layer, viewers
from tests.lifecycle import agents


@pytest.fixture
def lifecycle_settings(settings: Any, tmp_path: Path) -> Any:
    """The lifecycle factory (three file backends) and an in-memory export
    storage, over whatever SAGENTS the test already has."""
    settings.STORAGES = {
        **settings.STORAGES,
        "exports": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    settings.SAGENTS = {
        **getattr(settings, "SAGENTS", {}),
        "FACTORY": "tests.lifecycle.agents.build_agent",
        "EXPORT_STORAGE": "exports",
    }
    agents.DISK_ROOT[:] = [tmp_path / "disk"]
    agents.SHARED_DISK[0] = False
    yield settings
    agents.DISK_ROOT.clear()
    agents.SHARED_DISK[0] = False


def rows_mentioning(needles: Iterable[str]) -> dict[str, int]:
    """Rows of every sagents_django table whose values contain one of
    ``needles``, counted per model."""
    needles = [n for n in needles if n]
    found: dict[str, int] = {}
    for model in apps.get_app_config("sagents_django").get_models():
        for row in model._default_manager.values():
            text = json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False)
            if any(n in text for n in needles):
                found[model._meta.label] = found.get(model._meta.label, 0) + 1
    return found


def user_rows(user_pk: Any) -> dict[str, int]:
    """Rows of every sagents_django table with a foreign key to the user."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    found: dict[str, int] = {}
    for model in apps.get_app_config("sagents_django").get_models():
        for field in model._meta.concrete_fields:
            if field.is_relation and field.related_model is user_model:
                count = model._default_manager.filter(
                    **{field.attname: user_pk}
                ).count()
                if count:
                    found[model._meta.label] = count
    return found


def live_entries(conversation_ids: Iterable[str]) -> list[str]:
    """Keys in Redis (beside a Redis layer) or entries of this process that name
    one of the conversations."""
    ids = [str(c) for c in conversation_ids]
    left = [c for c in ids if c in inflight._entries or c in viewers._memory]
    url = layer.redis_url() if layer.get_layer() is not None else None
    if url is not None:
        client = layer.sync_redis_client(url)
        for cid in ids:
            left.extend(k.decode() for k in client.scan_iter(match=f"*{cid}*"))
    return left


def storage_names(storage: Any, directory: str = "") -> list[str]:
    """Every file name under ``directory`` of a storage, recursively."""
    try:
        directories, files = storage.listdir(directory)
    except FileNotFoundError:
        return []
    names = [f"{directory}/{f}" if directory else f for f in files]
    for sub in directories:
        names.extend(storage_names(storage, f"{directory}/{sub}" if directory else sub))
    return names


def export_storage() -> Any:
    return storages["exports"]
