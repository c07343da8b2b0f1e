"""No lost updates: a state save is a compare-and-set on ``AgentState.revision``.

Two writers that read the same state cannot both save it: the second gets
``StateConflict`` and the stored state stays the first one's. The interleavings run
in one thread (the logic, on every database); the race runs in real threads with
real commits on PostgreSQL (SQLite's in-memory test database serializes threads by
refusing them, which would test the database, not us).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from sagents_django import services
from sagents_django.exceptions import InvalidInput, NotFound, StateConflict
from sagents_django.models import AgentState
from sagents_django.scope import Scope

from .factories import envelope

pytestmark = pytest.mark.django_db


def stored_metadata(scope: Scope, conversation: Any) -> Any:
    return services.load_agent_state(scope, conversation.pk)["state"]["metadata"]


def test_each_save_moves_the_revision_on_by_one(
    scope: Scope, conversation: Any
) -> None:
    assert services.state_revision(scope, conversation.pk) == 0
    first = services.save_agent_state(
        scope, conversation.pk, envelope(), expected_revision=0
    )
    second = services.save_agent_state(
        scope, conversation.pk, envelope(), expected_revision=first.revision
    )
    blind = services.save_agent_state(scope, conversation.pk, envelope())
    assert (first.revision, second.revision, blind.revision) == (1, 2, 3)
    assert services.state_revision(scope, conversation.pk) == 3
    assert AgentState.objects.get(conversation=conversation).revision == 3


def test_the_second_of_two_writers_that_read_the_same_state_is_refused(
    scope: Scope, conversation: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"n": 0}))
    read_by_a = read_by_b = services.state_revision(scope, conversation.pk)

    services.save_agent_state(
        scope,
        conversation.pk,
        envelope(metadata={"by": "a"}),
        expected_revision=read_by_a,
    )
    with pytest.raises(StateConflict) as caught:
        services.save_agent_state(
            scope,
            conversation.pk,
            envelope(metadata={"by": "b"}),
            expected_revision=read_by_b,
        )

    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert "was changed by another writer" in str(caught.value)
    assert "revision 2" in str(caught.value)
    assert stored_metadata(scope, conversation) == {"by": "a"}


def test_two_first_saves_cannot_both_win(scope: Scope, conversation: Any) -> None:
    services.save_agent_state(
        scope, conversation.pk, envelope(metadata={"by": "a"}), expected_revision=0
    )
    with pytest.raises(StateConflict, match="holds revision 1"):
        services.save_agent_state(
            scope, conversation.pk, envelope(metadata={"by": "b"}), expected_revision=0
        )
    assert stored_metadata(scope, conversation) == {"by": "a"}


def test_a_writer_expecting_a_state_that_is_gone_is_refused(
    scope: Scope, conversation: Any
) -> None:
    with pytest.raises(StateConflict, match="holds no state"):
        services.save_agent_state(
            scope, conversation.pk, envelope(), expected_revision=4
        )
    assert not AgentState.objects.exists()


def test_another_tenant_gets_not_found_whatever_revision_it_names(
    scope: Scope, other_scope: Scope, conversation: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"mine": 1}))
    for revision in (None, 0, 1, 7):
        with pytest.raises(NotFound):
            services.save_agent_state(
                other_scope, conversation.pk, envelope(), expected_revision=revision
            )
    assert services.state_revision(other_scope, conversation.pk) == 0
    assert stored_metadata(scope, conversation) == {"mine": 1}


@pytest.mark.parametrize("revision", [-1, "1", True, 1.5, 2**63, [1]])
def test_a_malformed_expected_revision_is_invalid_input_and_writes_nothing(
    scope: Scope, conversation: Any, revision: Any
) -> None:
    with pytest.raises(InvalidInput, match="expected_revision"):
        services.save_agent_state(
            scope, conversation.pk, envelope(), expected_revision=revision
        )
    assert not AgentState.objects.exists()


def test_a_conflict_inside_the_callers_transaction_leaves_it_usable(
    scope: Scope, conversation: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"n": 1}))
    with transaction.atomic():
        with pytest.raises(StateConflict):
            services.save_agent_state(
                scope, conversation.pk, envelope(), expected_revision=0
            )
        # On PostgreSQL an aborted transaction would refuse this.
        assert services.state_revision(scope, conversation.pk) == 1


def test_the_admin_reset_moves_the_revision_so_a_stale_writer_cannot_undo_it(
    scope: Scope, conversation: Any, admin_client: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"n": 1}))
    read = services.state_revision(scope, conversation.pk)
    response = admin_client.post(
        "/admin/sagents_django/conversation/",
        {
            "action": "reset_conversations",
            "_selected_action": [str(conversation.pk)],
            "post": "yes",
        },
    )
    assert response.status_code == 302
    with pytest.raises(StateConflict):
        services.save_agent_state(
            scope, conversation.pk, envelope(metadata={"n": 2}), expected_revision=read
        )
    # The reset (agent_server.reset) keeps metadata; the stale write changed nothing.
    assert stored_metadata(scope, conversation) == {"n": 1}


postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="threads writing at once need a server database (see the module doc)",
)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_racing_writers_in_threads_one_wins_and_the_others_get_a_conflict(
    scope: Scope, conversation: Any
) -> None:
    services.save_agent_state(scope, conversation.pk, envelope(metadata={"n": 0}))
    read = services.state_revision(scope, conversation.pk)
    writers = 6
    start = threading.Barrier(writers)
    outcomes: dict[int, str] = {}

    def write(index: int) -> None:
        try:
            start.wait()
            services.save_agent_state(
                scope,
                conversation.pk,
                envelope(metadata={"by": index}),
                expected_revision=read,
            )
            outcomes[index] = "saved"
        except StateConflict:
            outcomes[index] = "conflict"
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    [winner] = [i for i, outcome in outcomes.items() if outcome == "saved"]
    assert sorted(outcomes.values()).count("conflict") == writers - 1
    assert stored_metadata(scope, conversation) == {"by": winner}
    assert services.state_revision(scope, conversation.pk) == read + 1
