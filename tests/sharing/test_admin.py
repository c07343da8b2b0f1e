"""The sharing inlines on the conversation's admin page: the site's rule applies,
staff without the model permissions see no shares, a change reaches the sockets."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from sagents_django.scope import Scope
from sagents_django.sharing import notify
from sagents_django.sharing import services as sharing
from sagents_django.sharing.models import ConversationShare
from tests.django.test_admin import change_url, empty_inline, fast_password_hashing

pytestmark = pytest.mark.django_db

__all__ = ["fast_password_hashing"]


def change_form(conversation: Any, **shares: str) -> dict[str, str]:
    return {
        "title": conversation.title,
        "user": str(conversation.user_id),
        **empty_inline("runs"),
        **empty_inline("share_links"),
        **empty_inline("shares"),
        **shares,
    }


def one_share(user: Any, access: str) -> dict[str, str]:
    return {
        "shares-TOTAL_FORMS": "1",
        "shares-0-user": str(user.pk),
        "shares-0-group": "",
        "shares-0-access": access,
    }


def test_an_operator_shares_under_the_sites_rule_and_the_sockets_hear_it(
    admin_client: Client,
    user: Any,
    other_user: Any,
    conversation: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told: list[Any] = []
    monkeypatch.setattr(notify, "share_changed", told.append)
    settings.SAGENTS = {"SHARE_WITH": "tests.sharing.tenants.share_with"}
    user.email, other_user.email = "alice@acme.test", "bob@other.test"
    user.save()
    other_user.save()
    refused = admin_client.post(
        change_url(conversation),
        change_form(conversation, **one_share(other_user, "read")),
    )
    assert (
        refused.status_code == 200
        and "does not let it be shared" in refused.content.decode()
    )
    assert not ConversationShare.objects.exists() and told == []

    other_user.email = "bob@acme.test"
    other_user.save()
    saved = admin_client.post(
        change_url(conversation),
        change_form(conversation, **one_share(other_user, "write")),
    )
    assert saved.status_code == 302
    assert ConversationShare.objects.get().access == "write"
    assert told == [conversation.pk]


def test_staff_without_the_share_permissions_see_no_shares(
    client: Client, user: Any, other_user: Any, conversation: Any
) -> None:
    sharing.share(Scope.for_user(user), conversation.pk, other_user, "read")
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_user("staff", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client.force_login(staff)
    page = client.get(change_url(conversation))
    assert page.status_code == 200
    models = {f.opts.model for f in page.context["inline_admin_formsets"]}
    assert ConversationShare not in models
    staff.user_permissions.add(
        Permission.objects.get(codename="view_conversationshare")
    )
    staff = get_user_model().objects.get(pk=staff.pk)
    client.force_login(staff)
    page = client.get(change_url(conversation))
    assert ConversationShare in {
        f.opts.model for f in page.context["inline_admin_formsets"]
    }
