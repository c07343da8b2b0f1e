"""Shares and read-only links on the conversation's admin page, and a
filesystem's shares on its own page.

Operators manage them as the owner would, under the same rules: the site's
``SHARE_WITH`` (the owner's scope asks it) refuses a share to someone it forbids,
and a change tells the open sockets at once (the conversation's, or those
following the filesystem's files). Django's model permissions on
``ConversationShare``, ``ShareLink``, ``Filesystem`` and ``FilesystemShare``
decide which staff may see or change them here. Filesystem rows are written by use
(``sharing.filesystems``): the admin lists them and edits their shares, never who
owns them.
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
from sagents_django.sharing.models import (
    ConversationShare,
    FilesystemShare,
    ShareLink,
)
from sagents_django.sharing.policy import may_share_with


class ShareFormSet(BaseInlineFormSet):
    """A conversation's shares: the owner's scope is the conversation's."""

    what = "a conversation"

    def conversation(self) -> Any:
        return self.instance

    def changed(self) -> None:
        notify.share_changed(self.instance.pk)

    def clean(self) -> None:
        super().clean()
        conversation = self.conversation()
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            if not data or data.get("DELETE"):
                continue
            target = data.get("user") or data.get("group")
            if target is None or (data.get("user") and data.get("group")):
                raise ValidationError("Each share names one user or one group.")
            if conversation is None:
                raise ValidationError(
                    "These files were claimed by a call naming them, not as a "
                    "conversation's own: they have no owner's conversation to be "
                    "shared from."
                )
            try:
                scope = conversation_scope(conversation)
            except PermissionError:
                raise ValidationError(
                    f"Share {self.what} owned by something else than a user "
                    "from the site's own pages."
                ) from None
            if not may_share_with(scope, conversation, target):
                raise ValidationError(
                    f"The site does not let it be shared with {target}."
                )

    def save(self, commit: bool = True) -> Any:
        saved = super().save(commit)
        if self.has_changed() and self.instance.pk is not None:
            self.changed()
        return saved


class FilesystemShareFormSet(ShareFormSet):
    """A filesystem's shares: the owner's scope is that of the conversation
    that claimed it (a filesystem claimed by naming it has none, and is not
    shared: ``sharing.filesystems``)."""

    what = "files"

    def conversation(self) -> Any:
        return self.instance.conversation

    def changed(self) -> None:
        notify.files_share_changed(self.instance.key)


class _ShareInline(admin.TabularInline):
    extra = 0
    fields = ("user", "group", "access", "created_by", "created_at")
    readonly_fields = ("created_by", "created_at")
    autocomplete_fields = ()
    raw_id_fields = ("user", "group")


class ConversationShareInline(_ShareInline):
    model = ConversationShare
    formset = ShareFormSet


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


class FilesystemShareInline(_ShareInline):
    model = FilesystemShare
    formset = FilesystemShareFormSet


class FilesystemAdmin(admin.ModelAdmin):
    """Filesystem scopes that have an owner, and their shares."""

    list_display = ("__str__", "owner_key", "conversation", "created_at")
    list_filter = ("kind",)
    search_fields = ("kind", "ident", "owner_key")
    fields = ("kind", "ident", "owner_key", "conversation", "created_at")
    readonly_fields = fields
    inlines = (FilesystemShareInline,)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
