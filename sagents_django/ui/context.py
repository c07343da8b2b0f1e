"""One conversation as the chat page shows it: rows, status, todos, files...

``Chat`` computes each part on first use, so a template tag that draws only the
todo panel reads only the todos. The views, the template tags and the HTML socket
all build their fragments from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.db.models import Q

from sagents_django import services
from sagents_django.conf import sagents_settings
from sagents_django.models import AgentRun, DisplayMessage
from sagents_django.runtime import agent_server
from sagents_django.scope import Scope
from sagents_django.services.branches import (
    Point,
    Tree,
    load_tree,
    path_filter,
    point_rows,
)
from sagents_django.services.usage import NO_MODEL_TRIGGERS

from . import approvals, files, transcript

PAGE_SIZE = 100
"""Rows of history a page shows; older ones load on scroll (cursor ``before``)."""
MAX_RUNS_SHOWN = 50
VERB_TRIGGERS = NO_MODEL_TRIGGERS
"""Short runs of verbs that held the conversation without a turn: no usage row."""


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One line of the usage panel: what it was, and what it used."""

    label: str
    turn: services.TurnUsage


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

    def annotate(
        self, items: list[transcript.Entry], *, open_turn: bool | None = None
    ) -> list[transcript.Entry]:
        """``items`` (rows of the branch shown, in display order) with what the
        viewer sees on replies: their own rating, on a turn's last reply the
        usage of the whole turn, and which reply ends its turn (Regenerate).
        ``open_turn``: whether the conversation's last turn is still going (None:
        from the status)."""
        replies = [e for e in items if transcript.is_reply(e)]
        if not replies:
            return items
        self.mark_turn_ends(items, open_turn=open_turn)
        ratings = self.feedback
        usage = self.usage_by_reply
        for item in replies:
            item.feedback = ratings.get(item.pk)
            item.usage = usage.get(item.pk)
        return items

    def mark_turn_ends(
        self, items: list[transcript.Entry], *, open_turn: bool | None = None
    ) -> None:
        """``transcript.mark_turn_ends`` for ``items``, reading the rows of the
        branch shown around them when they do not say it (at most two small
        queries: a page cut inside a turn, a reply rated alone)."""
        people = [i for i, e in enumerate(items) if transcript.by_person(e)]
        first, last = (people[0], people[-1]) if people else (len(items), -1)
        opened = True
        if any(transcript.is_reply(e) for e in items[:first]):
            opened = self._speaking(items[0], after=False, person=True) is not None
        following: bool | None = None
        trailing = any(transcript.is_reply(e) for e in items[last + 1 :])
        if trailing and (people or opened):
            after = self._speaking(items[-1], after=True, person=None)
            if after is not None:
                following = after.message_type == "user"
            else:
                if open_turn is None:
                    open_turn = self.status in ("running", "interrupted")
                following = False if open_turn else None
        transcript.mark_turn_ends(items, opened=opened, followed_by_person=following)

    def _speaking(
        self, anchor: transcript.Entry, *, after: bool, person: bool | None
    ) -> DisplayMessage | None:
        """The nearest text row of the person (``person`` True) or of either side
        (None) in the branch shown, after or before ``anchor``'s row."""
        rows = DisplayMessage.objects.filter(
            conversation_id=self.conversation.pk, content_type="text"
        )
        rows = (
            rows.filter(message_type="user")
            if person
            else rows.filter(message_type__in=("user", "assistant"))
        )
        shown = path_filter(self.tree)
        if shown is not None:
            rows = rows.filter(shown)
        at, seq, pk = anchor.inserted_at, anchor.sequence, anchor.pk
        if at is None:
            near = Q(pk__gt=pk) if after else Q(pk__lt=pk)
        elif after:
            near = (
                Q(inserted_at__gt=at)
                | Q(inserted_at=at, sequence__gt=seq)
                | Q(inserted_at=at, sequence=seq, pk__gt=pk)
            )
        else:
            near = (
                Q(inserted_at__lt=at)
                | Q(inserted_at=at, sequence__lt=seq)
                | Q(inserted_at=at, sequence=seq, pk__lt=pk)
            )
        order: tuple[str, ...] = ("inserted_at", "sequence", "id")
        if not after:
            order = tuple(f"-{o}" for o in order)
        return rows.filter(near).order_by(*order).only("message_type").first()

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
    def turns(self) -> list[UsageRow]:
        """The usage of each user turn (its runs summed), the latest
        ``MAX_RUNS_SHOWN``, of every branch: the person's turns numbered, a
        regenerated reply (a model call, not a turn of theirs) unnumbered."""
        rows: list[UsageRow] = []
        number = 0
        for turn in services.usage_by_turn(self.scope, self.conversation.pk):
            if not turn.by_person:
                rows.append(UsageRow(label="Regenerated reply", turn=turn))
                continue
            number += 1
            edited = " (edited)" if turn.trigger == "edit" else ""
            rows.append(UsageRow(label=f"{number}{edited}", turn=turn))
        return rows[-MAX_RUNS_SHOWN:]

    @property
    def branched_usage(self) -> bool:
        """Whether the usage panel lists a regenerated reply or an edit (it says
        that every branch counts)."""
        return any(row.turn.trigger in ("regenerate", "edit") for row in self.turns)

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
