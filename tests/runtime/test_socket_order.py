"""A conversation's frames reach a socket in ``seq`` order, whatever order two
publishing processes' messages cross in; a number that never comes is a gap after a
short wait. On both stacks (the production one's messages go through Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from sagents_django.runtime import groups, layer
from sagents_django.sequencing import Sequencer
from tests.runtime import follow as follow_module
from tests.runtime.follow import new_conversation
from tests.runtime.ws_client import connect

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


async def publish_numbered(cid: str, *seqs: int) -> None:
    """Messages numbered ``seqs``, sent in that order (as two publishers' can
    cross)."""
    for seq in seqs:
        await layer.group_send(
            groups.conversation_group(cid),
            {
                "type": "agent.event",
                "conversation": cid,
                "event": "llm_deltas",
                "seq": seq,
                "data": {"deltas": [{"content": f"<{seq}>"}]},
            },
        )


async def test_frames_that_cross_on_the_way_reach_the_socket_in_seq_order(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)

    await publish_numbered(cid, 2, 3, 1, 4)
    await sock.until(lambda f: f.get("seq") == 4)
    await sock.disconnect()

    assert [f["seq"] for f in sock.events(cid)] == [0, 1, 2, 3, 4]


async def test_a_number_that_never_comes_is_a_gap_and_a_late_frame_is_dropped(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    cid = str(conversation.pk)
    sock = await connect(scope.user)
    await sock.send("subscribe", conversation=cid)

    await publish_numbered(cid, 1, 3)
    # 2 is lost: 3 goes out once the wait is over.
    await sock.until(lambda f: f.get("seq") == 3)
    # 2 turns up after all: given up on (the client resyncs for the gap), dropped.
    await publish_numbered(cid, 2, 4)
    await sock.until(lambda f: f.get("seq") == 4)
    await sock.disconnect()

    assert [f["seq"] for f in sock.events(cid)] == [0, 1, 3, 4]


def test_a_sequencer_releases_held_frames_in_order_when_its_wait_is_over() -> None:
    sequencer: Sequencer[str] = Sequencer(wait=0.0)

    first = sequencer.push(5, "five")
    held = [sequencer.push(8, "eight"), sequencer.push(7, "seven")]
    due = sequencer.due()
    released = sequencer.release()
    late = sequencer.push(6, "six")

    assert first == ["five"]
    assert held == [[], []]
    assert due == 0.0
    assert released == ["seven", "eight"]
    assert late == []
    assert sequencer.due() is None
    assert sequencer.push(9, "nine") == ["nine"]


def test_a_resync_counts_on_from_its_number_and_frees_what_was_held_after_it() -> None:
    sequencer: Sequencer[str] = Sequencer()
    sequencer.push(1, "one")
    held = [sequencer.push(3, "three"), sequencer.push(4, "four")]

    freed = sequencer.rebase(2)

    assert held == [[], []]
    assert freed == ["three", "four"]
    assert sequencer.due() is None
    assert sequencer.push(2, "two") == []  # covered by the resync


def test_an_unbased_sequencer_holds_every_frame_until_the_first_resync() -> None:
    sequencer: Sequencer[str] = Sequencer(based=False)

    held = [sequencer.push(7, "seven"), sequencer.push(6, "six")]
    freed = sequencer.rebase(6)  # the resync read everything up to 6

    assert held == [[], []]
    assert freed == ["seven"]
    assert sequencer.push(8, "eight") == ["eight"]


def test_an_unbased_sequencer_gives_up_waiting_for_a_resync_as_a_gap() -> None:
    sequencer: Sequencer[str] = Sequencer(wait=0.0, based=False)

    assert sequencer.push(3, "three") == []
    assert sequencer.due() == 0.0
    assert sequencer.release() == ["three"]
    assert sequencer.push(4, "four") == ["four"]
