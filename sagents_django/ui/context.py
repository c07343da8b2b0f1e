"""One conversation as the chat page shows it: rows, status, todos, files...

``Chat`` computes each part on first use, so a template tag that draws only the
todo panel reads only the todos. The views, the template tags and the HTML socket
all build their fragments from it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from sagents_django import services
from sagents_django.conf import sagents_settings
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from sagents_django.services.branches import Point, Tree, load_tree, point_rows
from sagents_django.services.usage import NO_MODEL_TRIGGERS

from . import approvals, files, transcript

PAGE_SIZE = 100
"""Rows of history a page shows; older ones load on scroll (cursor ``before``)."""
MAX_RUNS_SHOWN = 50
VERB_TRIGGERS = NO_MODEL_TRIGGERS
"""Short runs of verbs that held the conversation without a turn: no usage row."""


class Chat:
    """What the chat page of ``conversation`` shows to ``scope``."""

    def __init__(
        self,
        scope: Scope,
        conversation: Any,
        *,
        before: Any = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.scope = scope
        self.conversation = conversation
        self.before = before
        self.page_size = page_size

    @property
    def pk(self) -> str:
        return str(self.conversation.pk)

    @property
    def lent(self) -> Any:
        """The share the viewer uses the conversation through (None: theirs)."""
        return getattr(self.scope, "lent", None)

    @property
    def can_write(self) -> bool:
        """Whether the viewer may send and approve (not through a read share)."""
        return not getattr(self.scope, "read_only", False)

    @cached_property
    def status(self) -> str:
        return str(agent_server.get_status(self.scope, self.conversation.pk))

    @property
    def running(self) -> bool:
        return self.status == "running"

    @cached_property
    def rows(self) -> list[DisplayMessage]:
        # One more than a page tells whether older rows exist.
        rows = services.load_display_messages(
            self.scope,
            self.conversation.pk,
            limit=self.page_size + 1,
            before=self.before,
        )
        return rows

    @property
    def has_older(self) -> bool:
        return len(self.rows) > self.page_size

    @cached_property
    def page_rows(self) -> list[DisplayMessage]:
        return self.rows[1:] if self.has_older else self.rows

    @property
    def older_cursor(self) -> int | None:
        return self.page_rows[0].pk if self.has_older and self.page_rows else None

    @cached_property
    def entries(self) -> list[transcript.Entry]:
        rows = self.page_rows
        extra = transcript.tool_results_for(self.conversation.pk, rows, tree=self.tree)
        items = transcript.entries(rows, results=extra, status=self.status)
        self.add_branches(items)
        return self.annotate(items)

    @cached_property
    def tree(self) -> Tree | None:
        """The conversation's branches (None: it never branched)."""
        return load_tree(self.conversation.pk)

    @cached_property
    def branch_points(self) -> dict[int, Point]:
        """The rows that show ``< n / m >``, by id."""
        return point_rows(self.conversation.pk, self.tree)

    def add_branches(self, items: list[transcript.Entry]) -> None:
        """Set ``< n / m >`` on the entries that start a branch point."""
        if self.tree is None:
            return
        for item in items:
            point = self.branch_points.get(item.pk)
            if point is not None:
                item.branch = transcript.BranchNav(
                    index=point.shown + 1, count=point.count
                )

    def annotate(self, items: list[transcript.Entry]) -> list[transcript.Entry]:
        """``items`` with what the viewer sees on replies: their own rating, and
        on a turn's last reply the usage of the whole turn."""
        replies = [e for e in items if e.role == "assistant" and e.kind == "text"]
        if not replies:
            return items
        ratings = self.feedback
        usage = self.usage_by_reply
        for item in replies:
            item.feedback = ratings.get(item.pk)
            item.usage = usage.get(item.pk)
        return items

    @cached_property
    def feedback(self) -> dict[int, Any]:
        """The viewer's ratings, by display row id."""
        return services.feedback_for(self.scope, self.conversation.pk)

    @cached_property
    def usage_by_reply(self) -> dict[int, services.TurnUsage]:
        """Each finished user turn's usage, by the display row of its last reply."""
        return {
            turn.reply_id: turn
            for turn in services.usage_by_turn(self.scope, self.conversation.pk)
            if turn.reply_id is not None and not turn.active
        }

    @cached_property
    def todos(self) -> list[Any]:
        return services.load_todos(self.scope, self.conversation.pk)

    @cached_property
    def files(self) -> list[files.FileRow]:
        return files.tree(self.scope, self.conversation)

    @cached_property
    def approvals(self) -> list[approvals.Request]:
        if not self.can_write:
            return []  # a read share decides nothing: no form to draw
        return approvals.with_previews(
            self.scope,
            self.conversation,
            approvals.pending_for(self.scope, self.conversation.pk),
        )

    @cached_property
    def paused_without_form(self) -> str:
        """What a pause no approval form can answer says ("" when none): shown with
        Dismiss (``approvals.waiting_without_form``)."""
        if not self.can_write or self.approvals:
            return ""
        return approvals.waiting_without_form(self.scope, self.conversation.pk)

    @cached_property
    def turns(self) -> list[services.TurnUsage]:
        """The usage of each user turn (its runs summed), the latest
        ``MAX_RUNS_SHOWN``."""
        return services.usage_by_turn(self.scope, self.conversation.pk)[
            -MAX_RUNS_SHOWN:
        ]

    @cached_property
    def runs(self) -> list[AgentRun]:
        return list(
            AgentRun.objects.filter(conversation_id=self.conversation.pk)
            .exclude(status__in=("queued",))
            .exclude(trigger__in=VERB_TRIGGERS)
            .order_by("created_at")[:MAX_RUNS_SHOWN]
        )

    @property
    def double_text(self) -> str:
        return str(sagents_settings.DOUBLE_TEXT)

    @property
    def while_approval_pending(self) -> str:
        return str(sagents_settings.WHILE_APPROVAL_PENDING)

    @property
    def title(self) -> str:
        return str(self.conversation.title or "")
