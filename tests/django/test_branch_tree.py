"""The branch tree read from its rows: the id ranges of the branch shown, its
branch points, and which branch an alternative shows (``services.branches``)."""

from __future__ import annotations

from sagents_django.services.branches import Node, Tree


def node(
    number: int,
    parent: int | None,
    keeps_through: int | None,
    segments: list[tuple[int, int | None]],
    *,
    active: bool = False,
    shown_at: int = 0,
) -> Node:
    return Node(
        number=number,
        parent=parent,
        keeps_through=keeps_through,
        segments=tuple(segments),
        active=active,
        order=(shown_at, number),
    )


# The trunk wrote rows 1-10, then (shown again) 21-30; branch 1 departs after row 5
# and wrote 11-20; branch 2 departs from branch 1 after row 15 and is shown.
TREE = Tree(
    [
        node(0, None, None, [(0, 10), (20, 30)], shown_at=3),
        node(1, 0, 5, [(10, 20)], shown_at=2),
        node(2, 1, 15, [(30, None)], active=True, shown_at=4),
    ]
)


def test_the_branch_shown_sees_its_ancestors_rows_up_to_each_branch_point() -> None:
    assert TREE.ranges() == [(0, 5), (10, 15), (30, None)]
    assert TREE.owner_of(3) == 0 and TREE.owner_of(12) == 1
    assert TREE.owner_of(31) == 2
    assert TREE.owner_of(8) is None  # the trunk's, after the point: not shown


def test_each_point_names_its_alternatives_and_the_one_shown() -> None:
    points = {p.keeps_through: p for p in TREE.points()}
    assert set(points) == {5, 15}
    assert points[5].alternatives == (None, 1) and points[5].shown == 1
    assert points[15].alternatives == (None, 2) and points[15].shown == 1
    assert points[15].owner == 1 and points[5].count == 2


def test_an_alternative_shows_the_branch_last_shown_through_it() -> None:
    points = {p.keeps_through: p for p in TREE.points()}
    assert TREE.latest_in(points[5], 0) == 0  # the trunk going on
    assert TREE.latest_in(points[5], 1) == 2  # branch 1's subtree: 2 was shown last
    assert TREE.latest_in(points[15], 0) == 1


def test_branches_from_the_start_are_siblings_of_the_trunk() -> None:
    tree = Tree(
        [
            node(0, None, None, [(0, 10)]),
            node(1, 0, None, [(10, 20)]),
            node(2, 0, None, [(20, None)], active=True),
        ]
    )
    assert tree.ranges() == [(20, None)]
    [point] = tree.points()
    assert point.keeps_through is None
    assert point.alternatives == (None, 1, 2) and point.shown == 2
