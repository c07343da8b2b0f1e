"""The Django admin for sagents_django (autodiscovered by ``django.contrib.admin``).

Registration happens here, at import, as every admin module does; ``register`` exists
so a test (or a site with its own ``AdminSite``) can register on another site.

A site that swaps in its own conversation model (``SAGENTS_DJANGO_CONVERSATION_MODEL``)
registers it itself, usually with our ``ConversationAdmin``::

    admin.site.register(TeamConversation, ConversationAdmin)

We leave it unregistered then, because the host's admin module may register the
model too, and whichever ran second would raise ``AlreadyRegistered``.
"""

from __future__ import annotations

import swapper
from django.contrib import admin
from django.contrib.admin import AdminSite

from sagents_django.admin.approvals import ApprovalRequestAdmin
from sagents_django.admin.budgets import BudgetAdmin, UsageEntryAdmin
from sagents_django.admin.conversations import AgentRunInline, ConversationAdmin
from sagents_django.admin.feedback import ReplyFeedbackAdmin
from sagents_django.admin.lifecycle import DataExportAdmin
from sagents_django.admin.mcp import StoredMcpServerAdmin
from sagents_django.admin.records import (
    AgentStateAdmin,
    DisplayMessageAdmin,
    PersistenceFailureAdmin,
    ReadOnlyAdmin,
    StoredFileAdmin,
)
from sagents_django.admin.runs import AgentRunAdmin
from sagents_django.admin.sharing import FilesystemAdmin
from sagents_django.admin.triggers import TriggerEventAdmin
from sagents_django.models import (
    AgentRun,
    AgentState,
    ApprovalRequest,
    Budget,
    DataExport,
    DisplayMessage,
    Filesystem,
    PersistenceFailure,
    ReplyFeedback,
    StoredFile,
    StoredMcpServer,
    TriggerEvent,
    UsageEntry,
)

__all__ = [
    "AgentRunAdmin",
    "AgentRunInline",
    "AgentStateAdmin",
    "ApprovalRequestAdmin",
    "BudgetAdmin",
    "ConversationAdmin",
    "DataExportAdmin",
    "DisplayMessageAdmin",
    "FilesystemAdmin",
    "PersistenceFailureAdmin",
    "ReadOnlyAdmin",
    "ReplyFeedbackAdmin",
    "StoredFileAdmin",
    "StoredMcpServerAdmin",
    "TriggerEventAdmin",
    "UsageEntryAdmin",
    "register",
]


def register(site: AdminSite) -> None:
    """Register every sagents_django admin on ``site``."""
    if not swapper.is_swapped("sagents_django", "Conversation"):
        site.register(
            swapper.load_model("sagents_django", "Conversation"), ConversationAdmin
        )
    site.register(DisplayMessage, DisplayMessageAdmin)
    site.register(AgentRun, AgentRunAdmin)
    site.register(AgentState, AgentStateAdmin)
    site.register(StoredFile, StoredFileAdmin)
    site.register(PersistenceFailure, PersistenceFailureAdmin)
    site.register(StoredMcpServer, StoredMcpServerAdmin)
    site.register(TriggerEvent, TriggerEventAdmin)
    site.register(ReplyFeedback, ReplyFeedbackAdmin)
    site.register(DataExport, DataExportAdmin)
    site.register(Budget, BudgetAdmin)
    site.register(UsageEntry, UsageEntryAdmin)
    site.register(ApprovalRequest, ApprovalRequestAdmin)
    site.register(Filesystem, FilesystemAdmin)


register(admin.site)
