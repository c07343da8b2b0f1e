"""Where a conversation's data lives besides its rows, found and emptied.

Files: which backends hold a filesystem scope's files is code, not data (the site's
factory builds the ``FileSystem`` middleware and its configs on every turn), so the
one way to reach every backend (the database, a Django storage, a disk, the site's
own) is to ask the factory: the agent built for the scope names its configs, and
each config's backend lists and deletes the scope's entries through the core's
``Persistence`` seam. ``StoredFile`` rows of the scope go too, whatever the factory
says today (a backend removed from the factory left its rows behind).

A disk backend keeps files under a root the factory chooses; one root shared by
every scope is not a scope's to empty, so a root that is the same for another scope
is skipped and reported, never emptied.

Redis (or, beside the in-memory layer, this process): the conversation's event
counter, in-flight buffer, todos and viewer entries, by their keys.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sagents_django.core.filesystem import registry
from sagents_django.core.filesystem.config import FileSystemConfig
from sagents_django.core.filesystem.errors import FileNotFound
from sagents_django.core.filesystem.scope import ScopeKey, canonical_scope
from sagents_django.core.middleware.filesystem import FileSystem
from sagents_django.filesystems import DatabasePersistence
from sagents_django.filesystems.keys import scope_parts
from sagents_django.models import AgentRun, StoredFile
from sagents_django.runtime import inflight, layer, viewers
from sagents_django.runtime.agents import build_agent
from sagents_django.runtime.file_scopes import conversation_filesystem_scope
from sagents_django.scope import Scope

logger = logging.getLogger(__name__)

PROBE_SCOPE: ScopeKey = ("sagents-probe", "0")
"""A scope no conversation has: a disk root that is the same for it is shared."""


@dataclass(kw_only=True)
class FilesRemoved:
    """What emptying some filesystem scopes removed."""

    files: int = 0
    """Entries (files and directories) deleted through the factory's backends."""
    stored_rows: int = 0
    """``StoredFile`` rows deleted directly."""
    skipped: list[str] = field(default_factory=list)
    """Backends left alone, and why (a disk root shared by every scope)."""


def file_scopes(scope: Scope, conversations: Iterable[Any]) -> set[ScopeKey]:
    """The filesystem scopes the agents of ``conversations`` used: the site's
    choice for each, and any a call named for one of its runs."""
    keys: set[ScopeKey] = set()
    conversations = list(conversations)
    for conversation in conversations:
        keys.add(conversation_filesystem_scope(scope, conversation))
    named = AgentRun.objects.filter(
        conversation__in=[c.pk for c in conversations]
    ).values_list("metadata__filesystem_scope", flat=True)
    for value in named.distinct():
        if value:
            keys.add(canonical_scope(value))
    return keys


def backends(scope: Scope, key: ScopeKey) -> list[FileSystemConfig]:
    """The file configs the site's agent has for filesystem scope ``key`` (none
    when the site has no factory: then only ``StoredFile`` rows are reached)."""
    from sagents_django.conf import sagents_settings

    if sagents_settings.FACTORY is None:
        return []
    agent = build_agent(f"sagents-files-{scope_label(key)}", scope, key)
    found: list[FileSystemConfig] = []
    for entry in agent.middleware:
        if isinstance(entry.middleware, FileSystem):
            found.extend(entry.middleware.configs)
    return found


def scope_label(key: ScopeKey) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    return "-".join(str(p) for p in parts)


def remove_files(scope: Scope, keys: Iterable[ScopeKey]) -> FilesRemoved:
    """Delete every file of every scope in ``keys``, in every backend."""
    removed = FilesRemoved()
    probes: dict[str, Any] = {}
    for key in sorted(keys, key=repr):
        # Pending writes of a turn of this process are stored first, so none lands
        # after the deletion; the cached state is dropped again at the end.
        registry.stop_filesystem(key)
        try:
            configs = backends(scope, key)
            for config in configs:
                _empty(config, key, scope, removed, probes)
        finally:
            registry.stop_filesystem(key)
        if isinstance(key, tuple) and len(key) == 2:
            kind, ident = scope_parts(key)
            count, _ = StoredFile.objects.filter(
                scope_kind=kind, scope_id=ident
            ).delete()
            removed.stored_rows += count
    return removed


def _empty(
    config: FileSystemConfig,
    key: ScopeKey,
    scope: Scope,
    removed: FilesRemoved,
    probes: dict[str, Any],
) -> None:
    backend = config.persistence
    if isinstance(backend, DatabasePersistence):
        return  # its rows are deleted in one statement by the caller
    opts = config.build_storage_opts(key)
    shared = shared_root(config, key, scope, probes)
    if shared is not None:
        removed.skipped.append(shared)
        return
    entries = backend.list_persisted_entries(opts)
    # Deepest first: a directory is empty when its turn comes.
    for entry in sorted(entries, key=lambda e: (-e.path.count("/"), e.path)):
        try:
            backend.delete(entry, opts)
        except FileNotFound:
            continue
        removed.files += 1


def shared_root(
    config: FileSystemConfig, key: ScopeKey, scope: Scope, probes: dict[str, Any]
) -> str | None:
    """Why ``config``'s backend is not the scope's own to read or empty (a disk
    whose root is the same for every scope), else None."""
    backend = config.persistence
    if not hasattr(backend, "path"):
        return None
    mine = config.build_storage_opts(key).get("path") or backend.path
    if config.mount not in probes:
        probes[config.mount] = _probe_root(scope, config)
    if mine is not None and mine == probes[config.mount]:
        return (
            f"{backend!r} for {config.mount}: its root {mine!r} is shared by every "
            "filesystem scope"
        )
    return None


def _probe_root(scope: Scope, config: FileSystemConfig) -> Any:
    try:
        for other in backends(scope, PROBE_SCOPE):
            if other.mount == config.mount:
                opts = other.build_storage_opts(PROBE_SCOPE)
                return opts.get("path") or getattr(other.persistence, "path", None)
    finally:
        registry.stop_filesystem(PROBE_SCOPE)
    return None


# Redis, or this process ----------------------------------------------------------
def redis_keys(conversation_id: str) -> list[str]:
    """Every key the runtime keeps for a conversation."""
    return [
        *_inflight_keys(conversation_id),
        layer.SEQ_KEY.format(f"debug:{conversation_id}"),
        viewers.VIEWERS_KEY.format(conversation_id),
        viewers.ACTIVITY_KEY.format(conversation_id),
    ]


def _inflight_keys(conversation_id: str) -> list[str]:
    return [
        layer.SEQ_KEY.format(conversation_id),
        inflight.RUN_KEY.format(conversation_id),
        inflight.DELTAS_KEY.format(conversation_id),
        inflight.TODOS_KEY.format(conversation_id),
    ]


def forget_live_state(conversation_ids: Iterable[str]) -> int:
    """Delete the conversations' counters, buffers and viewer entries; how many
    keys (or in-process entries) there were."""
    ids = [str(c) for c in conversation_ids]
    removed = 0
    url = layer.redis_url() if layer.get_layer() is not None else None
    if url is not None:
        client = layer.sync_redis_client(url)
        for chunk in _chunks(ids, 500):
            keys = [k for cid in chunk for k in redis_keys(cid)]
            removed += int(client.delete(*keys)) if keys else 0
    for cid in ids:
        removed += int(inflight.forget_in_process(cid))
        removed += viewers.forget_in_process(cid)
    return removed


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
