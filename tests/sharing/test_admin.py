"""The sharing inlines on the conversation's admin page: the site's rule applies,
staff without the model permissions see no shares, a change reaches the sockets."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from sagents_django.scope import Scope
from sagents_django.sharing import filesystems, notify
from sagents_django.sharing import services as sharing
from sagents_django.sharing.models import (
    ConversationShare,
    Filesystem,
    FilesystemShare,
)
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
    in_two_tenants(settings, user, other_user)
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


def files_form(user: Any, access: str) -> dict[str, str]:
    return {**empty_inline("shares"), **one_share(user, access)}


def in_two_tenants(settings: Any, user: Any, other_user: Any) -> None:
    """The site shares within an email domain; alice and bob are in two."""
    settings.SAGENTS = {"SHARE_WITH": "tests.sharing.tenants.share_with"}
    user.email, other_user.email = "alice@acme.test", "bob@other.test"
    user.save()
    other_user.save()


def test_a_filesystems_shares_are_edited_under_the_sites_rule_and_sockets_hear_it(
    admin_client: Client,
    user: Any,
    other_user: Any,
    conversation: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told: list[Any] = []
    monkeypatch.setattr(notify, "files_share_changed", told.append)
    in_two_tenants(settings, user, other_user)
    filesystem = filesystems.filesystem_of(Scope.for_user(user), conversation.pk)
    listed = admin_client.get(reverse("admin:sagents_django_filesystem_changelist"))
    assert str(filesystem) in listed.content.decode()
    assert (
        admin_client.get(reverse("admin:sagents_django_filesystem_add")).status_code
        == 403
    )  # rows are claimed by use

    refused = admin_client.post(change_url(filesystem), files_form(other_user, "read"))
    assert (
        refused.status_code == 200
        and "does not let it be shared" in refused.content.decode()
    )
    assert not FilesystemShare.objects.exists() and told == []

    other_user.email = "bob@acme.test"
    other_user.save()
    saved = admin_client.post(change_url(filesystem), files_form(other_user, "write"))
    assert saved.status_code == 302
    assert FilesystemShare.objects.get().access == "write"
    assert told == [filesystem.key]
    assert filesystems.access_to(Scope.for_user(other_user), filesystem) == "write"
    filesystem.refresh_from_db()
    assert filesystem.owner_key == str(user.pk)  # never changed here


def test_a_filesystem_claimed_by_naming_it_is_not_shared(
    admin_client: Client, user: Any, other_user: Any, conversation: Any
) -> None:
    named = Filesystem.objects.create(kind="project", ident="7", owner_key=user.pk)
    refused = admin_client.post(change_url(named), files_form(other_user, "read"))
    assert refused.status_code == 200
    assert "claimed by a call naming them" in refused.content.decode()
    assert not FilesystemShare.objects.exists()
