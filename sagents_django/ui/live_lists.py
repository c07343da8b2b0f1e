"""Conversation lists that follow the owner's other tabs and devices.

The services send ``conversation_changed`` after commit (created, renamed,
deleted); ``publish_change`` passes it to the owner's group
(``groups.owner_group``), which every list socket of that owner joins: the
sidebar of the conversation page and the list page. A list socket answers with the
whole list drawn again from the database (``redraw``): no order or gap to keep, and
always a target on the page. The sidebar also redraws its page's title bar when the
conversation shown was renamed elsewhere.

Owner groups carry no ``seq``: a list event is a hint to read the database again,
never data, so a lost one costs a stale list until the next change or reload.
"""

from __future__ import annotations

from typing import Any, Literal

from django.template.loader import render_to_string

from sagents_django import services
from sagents_django.scope import Scope, conversation_model, owner_field

View = Literal["nav", "page"]

LIST_EVENT = "conversation_listed"
NAV_SIZE = 50
"""Conversations in the sidebar (``sagents_conversation_nav``)."""
PAGE_SIZE = 100
"""Conversations on the list page (``views.conversations.home``)."""


def owner_key(model: type[Any], owner_pk: Any) -> str:
    """The name of an owner for ``groups.owner_group``: ``"*"`` when conversations
    have no owner (everyone shares them)."""
    if owner_field(model) is None:
        return "*"
    return f"{model._meta.label_lower}:{owner_pk}"


def scope_owner_key(scope: Scope) -> str | None:
    """The owner whose list ``scope`` sees (None: it owns nothing)."""
    model = conversation_model()
    pk = scope.owner_pk(model)
    return None if pk is None else owner_key(model, pk)


def conversation_owner_key(conversation: Any) -> str:
    model = type(conversation)
    field = owner_field(model)
    if field is None:
        return "*"
    attname = model._meta.get_field(field).attname
    return owner_key(model, getattr(conversation, attname))


def publish_change(
    sender: Any, conversation: Any = None, change: str = "", **kwargs: Any
) -> None:
    """``conversation_changed``: tell the owner's list sockets. A layer that cannot
    be reached never fails the request that changed the conversation."""
    if conversation is None:
        return
    from sagents_django.runtime import groups, layer

    message = {
        "type": "agent.event",
        "list": True,
        "event": LIST_EVENT,
        "conversation": str(conversation.pk),
        "data": {"change": change},
    }
    layer.send_from_sync(
        groups.owner_group(conversation_owner_key(conversation)),
        message,
        what=f"tell the lists of {conversation.pk}",
    )


def redraw(scope: Scope, view: View, current: str | None) -> str:
    """The list of ``view`` again, to swap in place (oob); for the sidebar, with
    ``current`` marked."""
    if view == "nav":
        rows = services.list_conversations(scope, limit=NAV_SIZE)
        return render_to_string(
            "sagents_django/partials/nav_list.html",
            {"nav_conversations": rows, "current_pk": current or "", "oob": True},
        )
    rows = services.list_conversations(scope, limit=PAGE_SIZE)
    return render_to_string(
        "sagents_django/partials/conversation_ul.html",
        {"conversations": rows, "oob": True},
    )


def title_bar(scope: Scope, conversation_id: str) -> str:
    """The title bar's text of the conversation shown, renamed elsewhere."""
    conversation = services.get_conversation(scope, conversation_id)
    if conversation is None:
        return ""
    return render_to_string(
        "sagents_django/partials/title_live.html",
        {"conversation": conversation, "oob": True},
    )
