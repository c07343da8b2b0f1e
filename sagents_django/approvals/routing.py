"""Who may decide an approval request, and which requests a person sees.

A request may be decided by its conversation's owner (``OWNER_DECIDES``: the
people the site's scope lets use the conversation, and those a share lets write
it) and by holders of its
permission (from ``APPROVALS["PERMISSIONS"]`` or the tool's ``interrupt_on``
entry) within their tenancy. Django permissions are site-wide, so the tenancy is
what keeps a manager of one team from another team's requests: by default, a site
whose conversations belong to users is one tenant, and a site whose conversations
belong to teams (a scope that resolves another owner) limits a permission holder
to the conversations their own scope sees; ``APPROVALS["TENANCY"]`` replaces that
rule. A request nobody in the tenancy may decide is, to that person, not found.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.scope import conversation_model, owned_by_users, scope_class
from sagents_django.sharing.access import share_access, shares_for

from .models import PENDING, ApprovalRequest


def _signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False)) and bool(
        getattr(user, "is_active", True)
    )


def owned(user: Any) -> QuerySet:
    """The conversations ``user``'s scope owns."""
    scope = scope_class().for_user(user)
    return scope.filter_conversations(conversation_model()._default_manager.all())


def tenancy(user: Any) -> QuerySet:
    """The conversations in which ``user``'s permissions count."""
    conversations = conversation_model()._default_manager.all()
    hook = sagents_settings.APPROVALS.tenancy
    if hook is not None:
        return import_string(hook)(user, conversations)
    if owned_by_users(conversation_model()):
        return conversations
    return owned(user)


def may_decide(user: Any, row: ApprovalRequest) -> bool:
    if not _signed_in(user) or row.conversation_id is None:
        return False
    if row.owner_decides and (
        owned(user).filter(pk=row.conversation_id).exists()
        or share_access(user, row.conversation_id) == "write"
    ):
        return True
    return bool(row.permission) and (
        user.has_perm(row.permission)
        and tenancy(user).filter(pk=row.conversation_id).exists()
    )


def decidable(user: Any) -> QuerySet[ApprovalRequest]:
    """The pending, unexpired requests ``user`` may decide, across conversations."""
    if not _signed_in(user):
        return ApprovalRequest.objects.none()
    pending = ApprovalRequest.objects.filter(status=PENDING).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )
    allowed = Q(owner_decides=True, conversation__in=owned(user).values("pk")) | Q(
        owner_decides=True,
        conversation__in=shares_for(user)
        .filter(access="write")
        .values("conversation_id"),
    )
    permissions = set(
        pending.exclude(permission="")
        .order_by()  # the model's ordering would make DISTINCT see every row
        .values_list("permission", flat=True)
        .distinct()
    )
    held = [p for p in permissions if user.has_perm(p)]
    if held:
        allowed |= Q(permission__in=held, conversation__in=tenancy(user).values("pk"))
    # Requests this person approved already wait for someone else.
    return pending.filter(allowed).exclude(votes__user=user)


def deciders(row: ApprovalRequest) -> QuerySet:
    """Active users who may decide ``row`` (checked one by one: permissions come
    from groups, backends and superuser status, which no single query sees)."""
    users = get_user_model()._default_manager.filter(is_active=True)
    candidates = users.filter(is_superuser=True)
    if row.permission:
        app_label, _, codename = row.permission.partition(".")
        candidates = users.filter(
            Q(is_superuser=True)
            | Q(
                user_permissions__codename=codename,
                user_permissions__content_type__app_label=app_label,
            )
            | Q(
                groups__permissions__codename=codename,
                groups__permissions__content_type__app_label=app_label,
            )
        )
    pks = [u.pk for u in candidates.distinct() if may_decide(u, row)]
    requester = row.requested_by
    if requester is not None and may_decide(requester, row):
        pks.append(requester.pk)
    return users.filter(pk__in=pks)
