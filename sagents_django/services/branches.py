"""A conversation's branches as a tree: which rows the shown branch sees, and where
its transcript offers other branches (``< 2 / 3 >``).

Why ranges of row ids: every row is written while exactly one branch is shown
(branching and switching are refused while a turn runs), so a branch's own rows
are the ids written between the moments it was shown. Recording those moments
(``ConversationBranch.segments``) lets the many writers of rows (the turn's
recorder, admission, notes, triggers) stay unaware of branches, and the transcript
of a branch is the conversation's rows filtered by a handful of id ranges: the
same index walk as without branches (``bench/ui.py`` measures it).

A branch's transcript is its parent's up to ``keeps_through`` (that row
included), then its own rows. A branch point is a row ``X`` of a branch ``O``
(None: the very start): the alternatives there are ``O`` going on after ``X``
and every branch made at ``X``, in the order they were made.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from sagents_django.models import ConversationBranch, DisplayMessage

Range = tuple[int, int | None]
"""Rows with ``after < id <= through`` (``through`` None: no upper bound)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    """One branch as the tree reads it."""

    number: int
    parent: int | None
    keeps_through: int | None
    segments: tuple[Range, ...]
    active: bool
    order: tuple[Any, int]
    """When it was last shown, then its number: the latest wins a tie."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """A place of the shown transcript where other branches depart."""

    owner: int
    """The branch the shared rows end in."""
    keeps_through: int | None
    """The last shared row (None: the alternatives differ from the first row)."""
    alternatives: tuple[int | None, ...]
    """None: the owner going on; a number: a branch made here."""
    shown: int
    """Index (from 0) of the alternative the shown transcript follows."""

    @property
    def count(self) -> int:
        return len(self.alternatives)


class Tree:
    """The branches of one conversation (at least the trunk)."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = {node.number: node for node in nodes}
        self.active = next(n for n in self.nodes.values() if n.active)

    def chain(self) -> list[Node]:
        """The shown branch and its ancestors, the shown one first."""
        out = [self.active]
        while out[-1].parent is not None:
            out.append(self.nodes[out[-1].parent])
        return out

    def ranges(self) -> list[Range]:
        """The id ranges of the shown transcript, oldest first, merged."""
        found: list[Range] = []
        limit: int | None = None
        for node in self.chain():
            for after, through in node.segments:
                if limit is not None:
                    if after >= limit:
                        continue
                    through = limit if through is None else min(through, limit)
                if through is None or through > after:
                    found.append((after, through))
            if node.keeps_through is None:
                break
            limit = node.keeps_through
        return _merged(found)

    def owner_of(self, row_id: int) -> int | None:
        """The branch of the shown transcript whose own rows hold ``row_id``
        (None: no row of it)."""
        limit: int | None = None
        for node in self.chain():
            for after, through in node.segments:
                inside = after < row_id and (through is None or row_id <= through)
                if inside and (limit is None or row_id <= limit):
                    return node.number
            if node.keeps_through is None:
                break
            limit = node.keeps_through
        return None

    def children(self, number: int) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.parent == number),
            key=lambda n: n.number,
        )

    def points(self) -> list[Point]:
        """Every branch point of the shown transcript."""
        chain = self.chain()
        out: list[Point] = []
        limit: int | None = None
        from_start = False  # the shown rows hold nothing of this node's
        for depth, node in enumerate(chain):
            child_on_path = chain[depth - 1] if depth else None
            made_here: dict[int | None, list[int]] = {}
            for child in self.children(node.number):
                x = child.keeps_through
                if from_start:
                    visible = x is None
                else:
                    visible = x is None or limit is None or x <= limit
                if visible:
                    made_here.setdefault(x, []).append(child.number)
            for x, numbers in made_here.items():
                alternatives: tuple[int | None, ...] = (None, *numbers)
                shown = 0
                if child_on_path is not None and child_on_path.number in numbers:
                    shown = alternatives.index(child_on_path.number)
                out.append(
                    Point(
                        owner=node.number,
                        keeps_through=x,
                        alternatives=alternatives,
                        shown=shown,
                    )
                )
            if node.keeps_through is None:
                from_start = True
            else:
                limit = node.keeps_through
        return out

    def latest_in(self, point: Point, index: int) -> int:
        """The branch to show for alternative ``index`` of ``point``: the one last
        shown among the branches that go through it."""
        choice = point.alternatives[index]
        if choice is None:
            x = point.keeps_through
            roots = [
                c.number
                for c in self.children(point.owner)
                if c.keeps_through is not None and (x is None or c.keeps_through > x)
            ]
            members = [point.owner] + [m for r in roots for m in self.subtree(r)]
        else:
            members = self.subtree(choice)
        return max(members, key=lambda m: self.nodes[m].order)

    def subtree(self, number: int) -> list[int]:
        out = [number]
        for child in self.children(number):
            out += self.subtree(child.number)
        return out


def _merged(ranges: list[Range]) -> list[Range]:
    out: list[Range] = []
    for after, through in sorted(ranges, key=lambda r: r[0]):
        if out and (out[-1][1] is None or after <= out[-1][1]):
            last_after, last_through = out[-1]
            top = (
                None
                if last_through is None or through is None
                else max(last_through, through)
            )
            out[-1] = (last_after, top)
        else:
            out.append((after, through))
    return out


def node_of(row: ConversationBranch) -> Node:
    return Node(
        number=row.number,
        parent=row.parent,
        keeps_through=row.keeps_through,
        segments=tuple(
            (int(after), None if through is None else int(through))
            for after, through in row.segments
        ),
        active=row.active,
        order=(row.activated_at, row.number),
    )


def load_tree(conversation_pk: Any) -> Tree | None:
    """The conversation's branches (None: it never branched). One query."""
    rows = ConversationBranch.objects.filter(conversation_id=conversation_pk).only(
        "number", "parent", "keeps_through", "segments", "active", "activated_at"
    )
    nodes = [node_of(row) for row in rows]
    return Tree(nodes) if nodes else None


def point_rows(conversation_pk: Any, tree: Tree | None) -> dict[int, Point]:
    """The branch points of the shown transcript by the id of the row that shows
    ``< n / m >`` (the first shown row after the shared ones): one indexed
    query per point, whichever rows a page or an event draws."""
    if tree is None:
        return {}
    shown = DisplayMessage.objects.filter(conversation_id=conversation_pk)
    condition = path_filter(tree)
    if condition is not None:
        shown = shown.filter(condition)
    found: dict[int, Point] = {}
    for point in tree.points():
        rows = shown
        if point.keeps_through is not None:
            rows = rows.filter(pk__gt=point.keeps_through)
        first = rows.order_by("pk").values_list("pk", flat=True).first()
        if first is not None:
            found[first] = point
    return found


def shown_filter(conversations: Any) -> Q:
    """The condition on display rows of ``conversations`` (a queryset of their ids)
    that keeps only each one's shown branch: a conversation that never branched
    keeps every row. One query for the branches of all of them."""
    nodes: dict[Any, list[Node]] = {}
    rows = ConversationBranch.objects.filter(conversation__in=conversations).only(
        "conversation_id",
        "number",
        "parent",
        "keeps_through",
        "segments",
        "active",
        "activated_at",
    )
    for row in rows:
        nodes.setdefault(row.conversation_id, []).append(node_of(row))
    if not nodes:
        return Q()
    condition = ~Q(conversation_id__in=list(nodes))
    for pk, found in nodes.items():
        shown = path_filter(Tree(found))
        assert shown is not None
        condition |= Q(conversation_id=pk) & shown
    return condition


def path_filter(tree: Tree | None) -> Q | None:
    """The condition on display rows of the shown branch (None: every row)."""
    if tree is None:
        return None
    condition = Q(pk__in=[])
    for after, through in tree.ranges():
        part = Q(pk__gt=after)
        if through is not None:
            part &= Q(pk__lte=through)
        condition |= part
    return condition
