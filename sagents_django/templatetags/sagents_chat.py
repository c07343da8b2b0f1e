"""The chat UI's pieces as template tags a host site drops into its own pages.

::

    {% load sagents_chat %}
    {% sagents_assets %}                       in <head>: our CSS, htmx, our JS
    {% sagents_chat_box conversation %}        the whole live chat of a conversation
    {% sagents_message_list conversation %}    the transcript only
    {% sagents_todo_panel conversation %}      the agent's plan
    {% sagents_file_panel conversation %}      the agent's files (open, upload)
    {% sagents_approval_inbox %}               every approval waiting for the user
    {% sagents_inbox_count %}                  the header badge
    {% sagents_conversation_nav current %}     the sidebar: the user's conversations
    {% sagents_theme_attr %}                   on <html>: the theme the person chose
    {% sagents_sign_in_url as url %}           settings.LOGIN_URL, if served
    {{ text|sagents_markdown }}                sanitized markdown

Each renders a template of the same name under ``sagents_django/partials/``
(``chat_box.html``, ``message_list.html`` ...); a site overrides one by putting a
template of that name first in its template directories. A tag given a
conversation reads it with the request's scope, so a host page can only show
what the signed-in user may see. One chat box per page (element ids are fixed).
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.context import Context
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from sagents_django.scope import get_scope
from sagents_django.ui import approvals
from sagents_django.ui.context import Chat
from sagents_django.ui.live_lists import NAV_SIZE
from sagents_django.ui.markdown import render_markdown
from sagents_django.ui.theme import chosen_theme
from sagents_django.ui.transcript import dom_id, sender_label

register = template.Library()

"""Conversations the sidebar lists (the list page has all, and search)."""


def _chat(context: Context, target: Any) -> Chat:
    if isinstance(target, Chat):
        return target
    request = context["request"]
    scope = get_scope(request)
    if not hasattr(target, "pk"):
        from sagents_django import services

        target = services.get_conversation_or_404(scope, target)
    else:
        # A host passing a conversation object still gets only what the user owns.
        from sagents_django import services

        target = services.get_conversation_or_404(scope, target.pk)
    return Chat(scope, target)


def _render(context: Context, name: str, **extra: Any) -> SafeString:
    flat: dict[str, Any] = {str(k): v for k, v in context.flatten().items()}
    flat.update(extra)
    return render_to_string(
        f"sagents_django/partials/{name}.html", flat, request=context.get("request")
    )


@register.simple_tag(takes_context=True)
def sagents_assets(context: Context) -> SafeString:
    return _render(context, "assets")


@register.simple_tag(takes_context=True)
def sagents_chat_box(context: Context, conversation: Any) -> SafeString:
    return _render(context, "chat_box", chat=_chat(context, conversation))


@register.simple_tag(takes_context=True)
def sagents_message_list(context: Context, conversation: Any) -> SafeString:
    return _render(context, "message_list", chat=_chat(context, conversation))


@register.simple_tag(takes_context=True)
def sagents_todo_panel(context: Context, conversation: Any) -> SafeString:
    return _render(context, "todo_panel", chat=_chat(context, conversation))


@register.simple_tag(takes_context=True)
def sagents_file_panel(context: Context, conversation: Any) -> SafeString:
    return _render(context, "file_panel", chat=_chat(context, conversation))


@register.simple_tag(takes_context=True)
def sagents_approval_inbox(context: Context) -> SafeString:
    scope = get_scope(context["request"])
    return _render(context, "approval_inbox", pending=approvals.inbox(scope))


@register.simple_tag(takes_context=True)
def sagents_inbox_count(context: Context) -> SafeString:
    request = context.get("request")
    user = getattr(request, "user", None)
    if request is None or user is None or not user.is_authenticated:
        return SafeString("")
    count = approvals.inbox_count(get_scope(request))
    return _render(context, "inbox_count", inbox_count=count)


@register.simple_tag(takes_context=True)
def sagents_conversation_nav(context: Context, current: Any = None) -> SafeString:
    """The user's newest conversations, ``current`` marked (the sidebar)."""
    from sagents_django import services

    scope = get_scope(context["request"])
    conversations = services.list_conversations(scope, limit=NAV_SIZE)
    current_pk = str(getattr(current, "pk", current) or "")
    return _render(
        context,
        "conversation_nav",
        nav_conversations=conversations,
        current_pk=current_pk,
    )


@register.simple_tag(takes_context=True)
def sagents_theme_attr(context: Context) -> SafeString:
    """`` data-theme="dark"`` (or light) when the person chose one, else ""."""
    request = context.get("request")
    chosen = chosen_theme(request) if request is not None else ""
    # chosen is one of two literals: nothing of the request reaches the page.
    return SafeString(f' data-theme="{chosen}"' if chosen else "")


@register.simple_tag
def sagents_sign_in_url() -> str:
    """Where ``settings.LOGIN_URL`` leads, or "" when no view of this site serves
    it: the pages then say how to add one instead of linking to a 404."""
    from urllib.parse import urlsplit

    from django.conf import settings
    from django.shortcuts import resolve_url
    from django.urls import NoReverseMatch, Resolver404, get_script_prefix, resolve

    try:
        url = str(resolve_url(settings.LOGIN_URL))
    except NoReverseMatch:
        return ""
    parts = urlsplit(url)
    if parts.netloc:
        return url  # another site signs people in (single sign-on)
    prefix = get_script_prefix()
    path = parts.path
    if path.startswith(prefix):
        path = "/" + path[len(prefix) :]
    try:
        resolve(path)
    except Resolver404:
        return ""
    return url


@register.filter
def sagents_markdown(text: Any) -> SafeString:
    return render_markdown(text)


@register.filter
def sg_one_line(value: Any) -> str:
    """A tool card's arguments on one short line (its summary)."""
    text = " ".join(str(value or "").split())
    return text if len(text) <= 120 else text[:119] + "…"


@register.filter
def sg_dom_id(value: Any) -> str:
    return dom_id(value)


@register.simple_tag
def sagents_sender(entry: Any, chat: Any) -> str:
    """Who wrote the person's message ``entry``, for the viewer of ``chat``."""
    scope = getattr(chat, "scope", None)
    viewer = getattr(getattr(scope, "user", None), "pk", None)
    return sender_label(entry, viewer, lent=getattr(chat, "lent", None) is not None)
