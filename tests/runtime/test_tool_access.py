"""Tools offered by permission through the runtime, on the fake provider.

The runtime tests' factory (``tests.runtime.agents``) gives every agent
``count_users``, which needs ``auth.view_user``, and ``ScopeToolAccess(scope)``.
On the production stack the turns run in a Celery worker, which builds the agent
and checks each call against the database by itself.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.db import connection

from sagents_django.runtime import agent_server
from tests.fakes.openai_server import reply, tool_call
from tests.runtime import follow as follow_module
from tests.runtime.follow import follow, new_conversation

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site

REFUSED = "Tool 'count_users' is not available to you."


def view_user() -> Permission:
    return Permission.objects.get(content_type__app_label="auth", codename="view_user")


def set_permission(user_id: Any, held: bool) -> None:
    users = view_user().user_set
    if held:
        users.add(user_id)
    else:
        users.remove(user_id)


def offered(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


COUNT = reply(tool_calls=[tool_call("count_users", {})])


async def test_a_tool_the_user_lacks_is_not_offered_and_a_call_to_it_is_an_error_the_model_reads(
    site: Any,
) -> None:
    site.script(COUNT, reply("I cannot count them."))
    scope, conversation = await new_conversation()
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "How many users?")
    finished = await follower.until("run_finished")

    assert finished["data"]["status"] == "completed"
    first, second = site.requests
    assert "count_users" not in offered(first)
    assert "write_file" in offered(first)  # the others are there
    assert tool_results(second) == [REFUSED]
    failed = [
        e["data"]
        for e in follower.events
        if e["event"] == "tool_execution_update" and e["data"]["status"] == "failed"
    ]
    assert [(f["name"], f["error"]) for f in failed] == [("count_users", REFUSED)]


async def test_a_permission_revoked_between_turns_or_within_one_refuses_the_next_call(
    site: Any,
) -> None:
    scope, conversation = await new_conversation()
    user_id = scope.user.pk
    await sync_to_async(set_permission)(user_id, True)

    def revoke_while_the_model_answers(request: dict[str, Any]) -> Any:
        # The agent was built and offered the tool; the permission goes before the
        # model's call to it arrives. (In a thread: this runs on the fake server's
        # event loop, where Django refuses the ORM.)
        assert "count_users" in offered(request)

        def revoke() -> None:
            try:
                set_permission(user_id, False)
            finally:
                connection.close()

        worker = threading.Thread(target=revoke)
        worker.start()
        worker.join()
        return COUNT

    site.script(
        COUNT,  # turn 1: held
        reply("42."),
        COUNT,  # turn 2: revoked before it
        reply("No longer."),
        revoke_while_the_model_answers,  # turn 3: granted again, revoked mid-turn
        reply("Gone again."),
    )
    follower = await follow(scope, conversation.pk)

    await agent_server.aadd_message(scope, conversation.pk, "Count them")
    await follower.until("run_finished")
    await sync_to_async(set_permission)(user_id, False)
    await agent_server.aadd_message(scope, conversation.pk, "And now?")
    await follower.until("run_finished")
    await sync_to_async(set_permission)(user_id, True)
    await agent_server.aadd_message(scope, conversation.pk, "Once more")
    await follower.until("run_finished")

    requests = site.requests
    assert "count_users" in offered(requests[0])
    assert tool_results(requests[1]) == ["42 users"]
    assert "count_users" not in offered(requests[2])
    assert tool_results(requests[3]) == ["42 users", REFUSED]
    assert tool_results(requests[5]) == ["42 users", REFUSED, REFUSED]
