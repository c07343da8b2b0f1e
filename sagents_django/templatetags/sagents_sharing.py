"""Sharing's pieces as template tags: the owner's panel and "Shared with me".

::

    {% load sagents_sharing %}
    {% sagents_share_panel chat %}        the owner's share panel (nothing for others)
    {% sagents_shared_with_me %}          conversations shared with the user
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.context import Context
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from sagents_django.exceptions import NotFound
from sagents_django.scope import get_scope
from sagents_django.sharing import services
from sagents_django.sharing.views import panel_context

register = template.Library()

SHARED_LISTED = 50


@register.simple_tag(takes_context=True)
def sagents_share_panel(context: Context, chat: Any) -> SafeString:
    """The panel, for the conversation's owner only (a share's holder gets none:
    the services would refuse them anyway)."""
    request = context["request"]
    scope = get_scope(request)
    try:
        extra = panel_context(scope, chat.conversation)
    except NotFound:
        return SafeString("")
    return render_to_string(
        "sagents_django/partials/share_panel.html", extra, request=request
    )


@register.simple_tag(takes_context=True)
def sagents_shared_with_me(
    context: Context, current: Any = "", heading_level: int = 2
) -> SafeString:
    request = context["request"]
    shared = services.shared_with_me(get_scope(request), limit=SHARED_LISTED)
    if not shared:
        return SafeString("")  # nothing shared: no section at all
    return render_to_string(
        "sagents_django/partials/shared_with_me.html",
        {"shared": shared, "current_pk": str(current or ""), "level": heading_level},
        request=request,
    )
