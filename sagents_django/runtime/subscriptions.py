"""Subscription verbs: a consumer's channel follows a conversation's events (and
counts as a viewer of it), or its debug events."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync

from sagents_django.scope import Scope
from sagents_django.services.conversations import conversation_pk

from . import groups, layer, viewers
from .database import db
from .lookup import require


async def asubscribe(scope: Scope, conversation_id: Any, channel_name: str) -> None:
    """Send the conversation's events to ``channel_name`` (a consumer's)."""
    pk = await _arequire(scope, conversation_id)
    await layer.group_add(groups.conversation_group(pk), channel_name)
    await viewers.aadd(str(pk), channel_name)


async def aunsubscribe(scope: Scope, conversation_id: Any, channel_name: str) -> None:
    """Stop sending the conversation's events to ``channel_name``; the last
    viewer leaving an idle conversation publishes ``agent_shutdown``."""
    pk = await _arequire(scope, conversation_id)
    await layer.group_discard(groups.conversation_group(pk), channel_name)
    await viewers.release(str(pk), channel_name)


async def asubscribe_debug(
    scope: Scope, conversation_id: Any, channel_name: str
) -> None:
    pk = await _arequire(scope, conversation_id)
    await layer.group_add(groups.debug_group(pk), channel_name)


async def aunsubscribe_debug(
    scope: Scope, conversation_id: Any, channel_name: str
) -> None:
    pk = await _arequire(scope, conversation_id)
    await layer.group_discard(groups.debug_group(pk), channel_name)


async def _arequire(scope: Scope, conversation_id: Any) -> Any:
    pk = conversation_pk(conversation_id)
    await db(require)(scope, pk)
    return pk


def subscribe(scope: Scope, conversation_id: Any, channel_name: str) -> None:
    async_to_sync(asubscribe)(scope, conversation_id, channel_name)


def unsubscribe(scope: Scope, conversation_id: Any, channel_name: str) -> None:
    async_to_sync(aunsubscribe)(scope, conversation_id, channel_name)


def subscribe_debug(scope: Scope, conversation_id: Any, channel_name: str) -> None:
    async_to_sync(asubscribe_debug)(scope, conversation_id, channel_name)


def unsubscribe_debug(scope: Scope, conversation_id: Any, channel_name: str) -> None:
    async_to_sync(aunsubscribe_debug)(scope, conversation_id, channel_name)
