"""Sharing's pieces as template tags: the owner's panel and "Shared with me".

::

    {% load sagents_sharing %}
    {% sagents_share_panel chat %}        the owner's share panel (nothing for others)
    {% sagents_file_share_panel chat %}   the files panel's "Share files" (the owner's)
    {% sagents_shared_with_me %}          conversations and files shared with the user
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.context import Context
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from sagents_django.exceptions import NotFound
from sagents_django.scope import get_scope
from sagents_django.sharing import filesystems, services
from sagents_django.sharing.views import PANELS

register = template.Library()

SHARED_LISTED = 50


def _owners_panel(context: Context, chat: Any, panel: str, **extra: Any) -> SafeString:
    """A share panel (``views.PANELS``), for the owner only: anyone else gets
    nothing (the views would refuse them anyway)."""
    request = context["request"]
    shown = PANELS[panel]
    try:
        found = shown.context(get_scope(request), chat.conversation)
    except NotFound:
        return SafeString("")
    return render_to_string(shown.template, {**found, **extra}, request=request)


@register.simple_tag(takes_context=True)
def sagents_share_panel(context: Context, chat: Any) -> SafeString:
    """The conversation's Sharing panel."""
    return _owners_panel(context, chat, "conversation")


@register.simple_tag(takes_context=True)
def sagents_file_share_panel(context: Context, chat: Any) -> SafeString:
    """The files panel's "Share files" (none either on a site whose filesystem
    is not a ``(kind, id)`` pair, or files someone else claimed first)."""
    return _owners_panel(context, chat, "files", folded=True)


@register.simple_tag(takes_context=True)
def sagents_shared_with_me(
    context: Context, current: Any = "", heading_level: int = 2
) -> SafeString:
    request = context["request"]
    scope = get_scope(request)
    shared = services.shared_with_me(scope, limit=SHARED_LISTED)
    files = filesystems.files_shared_with_me(scope)[:SHARED_LISTED]
    if not shared and not files:
        return SafeString("")  # nothing shared: no section at all
    return render_to_string(
        "sagents_django/partials/shared_with_me.html",
        {
            "shared": shared,
            "files": files,
            "current_pk": str(current or ""),
            "level": heading_level,
        },
        request=request,
    )
