"""Shares and read-only links on the conversation's admin page.

Operators manage them as the owner would, under the same rules: the site's
``SHARE_WITH`` (the owner's scope asks it) refuses a share to someone it forbids,
and a change tells the conversation's open sockets at once. Django's model
permissions on ``ConversationShare`` and ``ShareLink`` decide which staff may see
or change them here.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from sagents_django.admin.actions import conversation_scope
from sagents_django.sharing import notify
from sagents_django.sharing.models import ConversationShare, ShareLink
from sagents_django.sharing.policy import may_share_with


class ShareFormSet(BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        conversation = self.instance
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            if not data or data.get("DELETE"):
                continue
            target = data.get("user") or data.get("group")
            if target is None or (data.get("user") and data.get("group")):
                raise ValidationError("Each share names one user or one group.")
            try:
                scope = conversation_scope(conversation)
            except PermissionError:
                raise ValidationError(
                    "Share a conversation owned by something else than a user "
                    "from the site's own pages."
                ) from None
            if not may_share_with(scope, conversation, target):
                raise ValidationError(
                    f"The site does not let it be shared with {target}."
                )

    def save(self, commit: bool = True) -> Any:
        saved = super().save(commit)
        if self.has_changed() and self.instance.pk is not None:
            notify.share_changed(self.instance.pk)
        return saved


class ConversationShareInline(admin.TabularInline):
    model = ConversationShare
    formset = ShareFormSet
    extra = 0
    fields = ("user", "group", "access", "created_by", "created_at")
    readonly_fields = ("created_by", "created_at")
    autocomplete_fields = ()
    raw_id_fields = ("user", "group")


class ShareLinkForm(forms.ModelForm):
    class Meta:
        model = ShareLink
        fields = ("expires_at", "revoked_at")


class ShareLinkInline(admin.TabularInline):
    """Links are made on the conversation's page (their token is shown there);
    here they can be ended (a revocation time, or deleted)."""

    model = ShareLink
    form = ShareLinkForm
    extra = 0
    fields = ("id", "created_by", "created_at", "expires_at", "revoked_at")
    readonly_fields = ("id", "created_by", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
