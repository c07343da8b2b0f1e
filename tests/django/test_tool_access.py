"""Tools offered by Django permission: ``ScopeToolAccess`` with real users,
permissions and groups.

Turns run on ``ScriptedModel``; the per-call check reads the database on the
runtime's database threads, which see only committed rows: those tests commit.
(A turn through the runtime on the fake provider: tests/runtime/test_tool_access.py.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.db import connection

from sagents_django.core import Agent, Message, SubAgent, Tool, ToolCall
from sagents_django.core.testing import ScriptedModel
from sagents_django.scope import Scope
from sagents_django.tool_access import ScopeToolAccess

RAN: list[str] = []


def gated(name: str, **options: Any) -> Tool:
    def function(args: dict[str, Any], context: Any) -> str:
        RAN.append(name)
        return f"{name} done"

    return Tool(
        name=name, description=f"The {name} tool.", function=function, **options
    )


def staff_only(scope: Any) -> bool:
    return bool(getattr(scope.user, "is_staff", False))


TOOLS = [
    gated("plain"),
    gated("deactivate_user", permission="auth.change_user"),
    gated("edit_groups", permission=["auth.view_group", "auth.change_group"]),
    gated("staff_report", available=staff_only),
]


@pytest.fixture(autouse=True)
def ran() -> list[str]:
    RAN.clear()
    return RAN


def permission(name: str) -> Permission:
    app_label, codename = name.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def make_user(name: str, *permissions: str, **fields: Any) -> Any:
    user = get_user_model().objects.create_user(username=name, **fields)
    user.user_permissions.add(*(permission(p) for p in permissions))
    return user


def build(scope: Any, model: ScriptedModel | None = None, **options: Any) -> Agent:
    return Agent(
        model=model or ScriptedModel([]),
        tools=options.pop("tools", TOOLS),
        tool_access=ScopeToolAccess(scope),
        tool_context={"scope": scope},
        replace_default_middleware=True,
        **options,
    )


abuild = sync_to_async(build)
"""Offering reads permissions: where the runtime builds agents, in a thread."""


def offered(agent: Agent) -> set[str]:
    return {t["function"]["name"] for t in agent.openai_tools}


def calls(*names: str) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=f"call_{i}", name=n) for i, n in enumerate(names)]
    )


def tool_replies(result: Any) -> list[tuple[str, str]]:
    return [
        (r.name, r.content)
        for m in result.state.messages
        if m.role == "tool"
        for r in m.tool_results
    ]


NOT_AVAILABLE = "Tool {!r} is not available to you."


def revoke_all(args: dict[str, Any], context: Any) -> str:
    """A sync tool (in a thread, the ORM as any tool uses it) that takes every
    permission of the caller away."""
    try:
        context.scope.user.user_permissions.clear()
    finally:
        connection.close()  # the test's loop drops its thread: not its connection
    return "revoked"


# Offered --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_user_is_offered_the_tools_whose_permissions_they_hold() -> None:
    nobody = Scope.for_user(make_user("nobody"))
    clerk = Scope.for_user(make_user("clerk", "auth.change_user", "auth.view_group"))
    groups = make_user("grouped", "auth.view_group")
    editors = Group.objects.create(name="editors")
    editors.permissions.add(permission("auth.change_group"))
    groups.groups.add(editors)
    staff = Scope.for_user(make_user("staff", is_staff=True))

    assert offered(build(nobody)) == {"plain"}
    # Both of edit_groups' permissions are needed: clerk holds one.
    assert offered(build(clerk)) == {"plain", "deactivate_user"}
    # A permission held through a group counts.
    assert offered(build(Scope.for_user(groups))) == {"plain", "edit_groups"}
    assert offered(build(staff)) == {"plain", "staff_report"}


@pytest.mark.django_db
def test_a_superuser_holds_every_permission_and_an_inactive_one_none() -> None:
    root = get_user_model().objects.create_superuser("root", password="x")
    gone = get_user_model().objects.create_superuser("gone", password="x")
    gone.is_active = False
    gone.save()

    # staff_report's available() asks is_staff, which create_superuser sets.
    assert offered(build(Scope.for_user(root))) == {t.name for t in TOOLS}
    # No permission for an inactive user (staff_report's available() only asks
    # is_staff).
    assert offered(build(Scope(user=gone))) == {"plain", "staff_report"}


@pytest.mark.django_db
@pytest.mark.parametrize("user", [AnonymousUser(), None])
def test_a_scope_without_a_signed_in_user_holds_no_permission(user: Any) -> None:
    seen: list[Any] = []

    def note(scope: Any) -> bool:
        seen.append(scope)
        return True

    agent = build(Scope.for_user(user), tools=[*TOOLS, gated("note", available=note)])

    assert offered(agent) == {"plain", "note"}
    assert seen[0].user is user  # available decides for itself


def test_a_user_model_without_permissions_holds_none() -> None:
    @dataclass
    class Bare:  # AbstractBaseUser without PermissionsMixin
        is_authenticated: bool = True
        pk: Any = None

    assert offered(build(Scope(user=Bare()))) == {"plain"}


# Refused --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_call_to_a_tool_the_user_lacks_is_an_error_the_model_reads(
    ran: list[str],
) -> None:
    user = await sync_to_async(make_user)("alice")
    model = ScriptedModel([calls("deactivate_user", "plain"), "Sorry."])
    agent = await abuild(Scope.for_user(user), model)

    result = await agent.aexecute(["Deactivate bob"])

    assert result.ok
    assert ran == ["plain"]
    assert tool_replies(result) == [
        ("deactivate_user", NOT_AVAILABLE.format("deactivate_user")),
        ("plain", "plain done"),
    ]
    # What the model read next: the same text, nothing about the permission.
    sent = [m for m in model.requests[1].messages if m["role"] == "tool"]
    assert sent[0]["content"] == "Tool 'deactivate_user' is not available to you."


@pytest.mark.django_db(transaction=True)
async def test_a_permission_revoked_between_turns_refuses_the_next_call_even_on_a_cached_user(
    ran: list[str],
) -> None:
    user = await sync_to_async(make_user)("alice", "auth.change_user")
    scope = Scope.for_user(user)
    model = ScriptedModel(
        [calls("deactivate_user"), "Done.", calls("deactivate_user"), "Sorry."]
    )
    first = await (await abuild(scope, model)).aexecute(["Deactivate bob"])
    assert tool_replies(first) == [("deactivate_user", "deactivate_user done")]
    assert hasattr(user, "_perm_cache")  # Django cached the permissions

    await sync_to_async(user.user_permissions.clear)()
    # The same scope and user object: still offered (from Django's cache)...
    agent = await abuild(scope, model)
    assert "deactivate_user" in offered(agent)
    second = await agent.aexecute(first.state.add_message("And carol"))

    # ...but the call reads the user again, and is refused.
    assert ran == ["deactivate_user"]
    assert tool_replies(second)[-1] == (
        "deactivate_user",
        NOT_AVAILABLE.format("deactivate_user"),
    )
    # A scope built for the next turn, as the runtime builds it, no longer offers it.
    again = await sync_to_async(Scope.from_dict)(scope.to_dict())
    assert "deactivate_user" not in offered(await abuild(again))


@pytest.mark.django_db(transaction=True)
async def test_a_permission_revoked_during_a_turn_refuses_the_calls_after_it(
    ran: list[str],
) -> None:
    user = await sync_to_async(make_user)("alice", "auth.change_user")

    model = ScriptedModel(
        [calls("deactivate_user"), calls("revoke"), calls("deactivate_user"), "Ok."]
    )
    agent = await abuild(
        Scope.for_user(user),
        model,
        tools=[*TOOLS, Tool(name="revoke", description="r", function=revoke_all)],
    )

    result = await agent.aexecute(["Go"])

    assert ran == ["deactivate_user"]
    assert [content for _, content in tool_replies(result)] == [
        "deactivate_user done",
        "revoked",
        NOT_AVAILABLE.format("deactivate_user"),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["demote", "deactivate", "delete"])
async def test_a_superuser_demoted_deactivated_or_deleted_mid_conversation_is_refused(
    change: str, ran: list[str]
) -> None:
    root = await sync_to_async(get_user_model().objects.create_superuser)(
        "root", password="x"
    )
    scope = Scope.for_user(root)
    agent = await abuild(
        scope, ScriptedModel([calls("edit_groups", "staff_report"), "Ok."])
    )
    assert {"edit_groups", "staff_report"} <= offered(agent)

    def apply() -> None:
        users = get_user_model().objects.filter(pk=root.pk)
        if change == "delete":
            users.delete()
        else:
            field = "is_superuser" if change == "demote" else "is_active"
            users.update(**{field: False, "is_staff": False})

    await sync_to_async(apply)()
    result = await agent.aexecute(["Go"])

    assert ran == []
    assert tool_replies(result) == [
        ("edit_groups", NOT_AVAILABLE.format("edit_groups")),
        ("staff_report", NOT_AVAILABLE.format("staff_report")),
    ]


@pytest.mark.django_db(transaction=True)
async def test_a_subagent_is_offered_and_runs_only_the_users_tools(
    ran: list[str],
) -> None:
    user = await sync_to_async(make_user)("alice", "auth.change_user")
    task = Message.assistant(
        tool_calls=[
            ToolCall(
                call_id="call_task",
                name="task",
                arguments={"instructions": "Go.", "subagent_type": "general-purpose"},
            )
        ]
    )

    def look_then_revoke(request: Any) -> Message:
        names = {t["function"]["name"] for t in request.tools}
        assert names == {"plain", "deactivate_user", "revoke"}  # the parent's
        return calls("revoke")

    model = ScriptedModel(
        [
            task,
            look_then_revoke,  # the sub-agent's replies
            calls("deactivate_user", "edit_groups"),
            "Sub done.",
            "Done.",
        ]
    )
    tools = [*TOOLS, Tool(name="revoke", description="r", function=revoke_all)]
    agent = await abuild(
        Scope.for_user(user), model, tools=tools, middleware=[SubAgent]
    )

    result = await agent.aexecute(["Delegate"])

    assert result.ok and ran == []
    sub_results = [
        m["content"] for m in model.requests[3].messages if m["role"] == "tool"
    ]
    assert sub_results == [
        "revoked",
        NOT_AVAILABLE.format("deactivate_user"),
        NOT_AVAILABLE.format("edit_groups"),
    ]


# The per-call check -----------------------------------------------------------------


@pytest.mark.django_db
def test_the_per_call_check_reads_the_user_and_their_permissions_again(
    django_assert_num_queries: Any,
) -> None:
    user = make_user("alice", "auth.change_user")
    root = get_user_model().objects.create_superuser("root", password="x")
    tool = TOOLS[1]
    access = ScopeToolAccess(Scope.for_user(user))
    assert access.permits(tool)  # fills Django's cache on the scope's user

    with django_assert_num_queries(3):  # the user, their permissions, their groups'
        assert access.refreshed().permits(tool)
    with django_assert_num_queries(1):  # a superuser holds all: the user only
        assert ScopeToolAccess(Scope.for_user(root)).refreshed().permits(tool)
    with django_assert_num_queries(0):  # anonymous: nothing to read
        assert not ScopeToolAccess(Scope.for_user(None)).refreshed().permits(tool)


@pytest.mark.django_db
def test_available_gets_a_copy_of_the_scope_holding_the_fresh_user() -> None:
    user = make_user("alice", is_staff=True)
    scope = Scope.for_user(user)
    access = ScopeToolAccess(scope)
    report = TOOLS[3]
    assert access.permits(report)

    get_user_model().objects.filter(pk=user.pk).update(is_staff=False)

    fresh = access.refreshed()
    assert not fresh.permits(report)
    assert fresh.scope.owner == scope.owner and fresh.scope.user.pk == user.pk
    assert scope.user.is_staff  # the turn's own scope is left as it was


@pytest.mark.django_db(transaction=True)
async def test_ahas_perms_answers_from_the_database_now() -> None:
    user = await sync_to_async(make_user)("alice", "auth.change_user")
    access = ScopeToolAccess(Scope.for_user(user))

    assert await access.ahas_perms(["auth.change_user"])
    assert not await access.ahas_perms(["auth.change_user", "auth.delete_user"])
    assert not await access.ahas_perms([])
    await sync_to_async(user.user_permissions.clear)()
    assert not await access.ahas_perms(["auth.change_user"])
