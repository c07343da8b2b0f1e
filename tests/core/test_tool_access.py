"""Tools offered by permission, in the core: the ``tool_access`` hook of an agent.

A ``Holder`` stands for the caller: the permissions it holds can change between
(and during) turns, as a site's can. The Django layer's check on real users is
tested in tests/django/test_tool_access.py.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sagents_django.core import (
    Agent,
    ConfigurationError,
    Message,
    SubAgentConfig,
    Tool,
    ToolAccess,
    ToolCall,
    tool,
)
from sagents_django.core.middleware.subagent import SubAgent
from sagents_django.core.testing import ScriptedModel, validate_openai_messages
from sagents_django.core.tool_access import NOT_AVAILABLE_TEXT

RAN: list[str] = []


def run_tool(name: str, **options: Any) -> Tool:
    def function(args: dict[str, Any], context: Any) -> str:
        RAN.append(name)
        return f"{name} done"

    return Tool(
        name=name, description=f"The {name} tool.", function=function, **options
    )


@pytest.fixture(autouse=True)
def ran() -> list[str]:
    RAN.clear()
    return RAN


class Holder(ToolAccess):
    """A caller holding ``held``; counts the per-call checks."""

    def __init__(self, *held: str, subject: Any = "alice") -> None:
        super().__init__(subject)
        self.held = set(held)
        self.checked: list[str] = []

    def has_perms(self, permissions: tuple[str, ...]) -> bool:
        return set(permissions) <= self.held

    def allows(self, tool: Tool) -> bool:
        self.checked.append(tool.name)
        return self.permits(tool)


def calls(*names: str) -> Message:
    return Message.assistant(
        tool_calls=[ToolCall(call_id=f"call_{n}", name=n) for n in names]
    )


def offered(model: ScriptedModel, index: int = 0) -> list[str]:
    return [t["function"]["name"] for t in model.requests[index].tools]


def results(state: Any) -> dict[str, tuple[str, bool]]:
    return {
        r.name: (r.content, r.is_error)
        for m in state.messages
        if m.role == "tool"
        for r in m.tool_results
    }


def not_available(name: str) -> tuple[str, bool]:
    return (f"Tool {name!r} is not available to you.", True)


def agent_with(
    model: ScriptedModel, tools: list[Tool], access: Any, **kw: Any
) -> Agent:
    return Agent(
        model=model,
        tools=tools,
        tool_access=access,
        replace_default_middleware=True,
        **kw,
    )


# Declaring ------------------------------------------------------------------------


def test_a_permission_is_kept_as_a_tuple_and_makes_the_tool_gated() -> None:
    one = run_tool("a", permission="shop.send_email")
    several = run_tool("b", permission=["shop.view_order", "shop.refund_order"])
    plain = run_tool("c")

    assert one.permissions == ("shop.send_email",)
    assert several.permissions == ("shop.view_order", "shop.refund_order")
    assert (one.gated, several.gated, plain.gated) == (True, True, False)
    assert run_tool("d", available=lambda subject: True).gated


def test_the_decorator_takes_permission_and_available() -> None:
    def staff_only(subject: Any) -> bool:
        return subject == "staff"

    @tool(
        description="Refund.", permission=("shop.refund_order",), available=staff_only
    )
    def refund(args: dict[str, Any], context: Any) -> str:
        return "ok"

    assert refund.permissions == ("shop.refund_order",)
    assert refund.available is staff_only


@pytest.mark.parametrize(
    "permission",
    [
        "send_email",
        ".send_email",
        "shop.",
        "",
        "shop.send email",
        " shop.send_email",
        [],
        ["shop.ok", "nodot"],
        ["shop.ok", 3],
        5,
    ],
)
def test_a_permission_not_shaped_app_label_dot_codename_is_refused_at_creation(
    permission: Any,
) -> None:
    with pytest.raises(ConfigurationError, match="permission"):
        run_tool("a", permission=permission)


def test_available_must_be_a_plain_function() -> None:
    async def later(subject: Any) -> bool:
        return True

    with pytest.raises(ConfigurationError, match="plain function"):
        run_tool("a", available=later)
    with pytest.raises(ConfigurationError, match="plain function"):
        run_tool("a", available="yes")  # type: ignore[arg-type]


def test_a_gated_tool_on_an_agent_without_tool_access_is_a_configuration_error() -> (
    None
):
    with pytest.raises(ConfigurationError, match="tool_access"):
        agent_with(ScriptedModel([]), [run_tool("a", permission="x.y")], None)
    # Tools that are not gated need none.
    agent_with(ScriptedModel([]), [run_tool("a")], None)


def test_two_tools_of_one_name_are_refused_even_when_one_is_withheld() -> None:
    with pytest.raises(ConfigurationError, match="Two tools"):
        agent_with(
            ScriptedModel([]),
            [run_tool("a"), run_tool("a", permission="x.y")],
            Holder(),
        )


# Offering -------------------------------------------------------------------------


async def test_only_the_tools_the_caller_may_use_are_offered_to_the_model() -> None:
    model = ScriptedModel(["Hello."])
    agent = agent_with(
        model,
        [
            run_tool("plain"),
            run_tool("email", permission="shop.send_email"),
            run_tool("refund", permission=["shop.send_email", "shop.refund"]),
            run_tool("report", available=lambda subject: subject == "alice"),
            run_tool("admin", available=lambda subject: subject == "root"),
        ],
        Holder("shop.send_email"),
    )

    result = await agent.aexecute(["Hi"])

    assert result.ok
    assert offered(model) == ["plain", "email", "report"]
    assert agent.withheld_tools == {"refund", "admin"}
    assert set(agent.tools_by_name) == {"plain", "email", "report"}


@pytest.mark.parametrize("answer", [1, "yes", None, False])
def test_available_refuses_anything_but_true(answer: Any) -> None:
    agent = agent_with(
        ScriptedModel([]),
        [run_tool("a", available=lambda subject: answer)],
        Holder(),
    )
    assert agent.withheld_tools == {"a"}


def test_an_available_check_that_raises_withholds_the_tool_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(subject: Any) -> bool:
        raise RuntimeError("no database")

    with caplog.at_level(logging.ERROR, "sagents_django.core.tool_access"):
        agent = agent_with(
            ScriptedModel([]), [run_tool("a", available=broken)], Holder()
        )
    assert agent.withheld_tools == {"a"}
    assert "no database" in caplog.text


def test_the_default_tool_access_holds_no_permission_and_passes_its_subject() -> None:
    seen: list[Any] = []

    def note(subject: Any) -> bool:
        seen.append(subject)
        return True

    agent = agent_with(
        ScriptedModel([]),
        [run_tool("a", permission="x.y"), run_tool("b", available=note)],
        ToolAccess("the subject"),
    )
    assert agent.withheld_tools == {"a"}
    assert seen == ["the subject"]


# Running --------------------------------------------------------------------------


async def test_a_call_to_a_withheld_tool_is_an_error_that_runs_nothing_and_names_nothing(
    ran: list[str],
) -> None:
    model = ScriptedModel([calls("refund", "nowhere"), "Sorry."])
    fired: list[str] = []
    agent = agent_with(
        model,
        [run_tool("plain"), run_tool("refund", permission="shop.refund")],
        Holder(),
    )

    result = await agent.aexecute(
        ["Refund me"],
        callbacks=[
            {"on_tool_execution_started": lambda ex, call, t: fired.append(call.name)}
        ],
    )

    assert result.ok
    assert ran == [] and fired == ["nowhere"]  # an unknown name "starts", as before
    found = results(result.state)
    assert found["refund"] == not_available("refund")
    # An unknown name's error lists only what is offered: nothing of "refund".
    assert found["nowhere"] == (
        "Tool 'nowhere' does not exist. Available tools: plain.",
        True,
    )
    validate_openai_messages(result.state)


async def test_every_call_of_a_gated_tool_is_checked_again_and_a_revoke_counts_within_the_turn(
    ran: list[str],
) -> None:
    access = Holder("shop.send_email")

    def revoke(args: dict[str, Any], context: Any) -> str:
        access.held.discard("shop.send_email")
        return "revoked"

    model = ScriptedModel(
        [calls("email"), calls("revoke"), calls("email", "plain"), "Done."]
    )
    agent = agent_with(
        model,
        [
            run_tool("email", permission="shop.send_email"),
            run_tool("plain"),
            Tool(name="revoke", description="r", function=revoke),
        ],
        access,
    )

    result = await agent.aexecute(["Go"])

    assert result.ok
    assert ran == ["email", "plain"]  # the second email never ran
    assert access.checked == ["email", "email"]  # only gated tools are checked
    replies = [
        (r.name, r.content)
        for m in result.state.messages
        if m.role == "tool"
        for r in m.tool_results
    ]
    assert replies == [
        ("email", "email done"),
        ("revoke", "revoked"),
        ("email", "Tool 'email' is not available to you."),
        ("plain", "plain done"),
    ]
    # The next turn's agent no longer offers it.
    model2 = ScriptedModel(["Ok."])
    await agent_with(model2, list(agent.base_tools), access).aexecute(["Again"])
    assert "email" not in offered(model2)


async def test_an_async_per_call_check_is_awaited_and_one_that_raises_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Async(Holder):
        async def allows(self, tool: Tool) -> bool:  # type: ignore[override]
            self.checked.append(tool.name)
            if tool.name == "broken":
                raise RuntimeError("lost the database")
            return self.permits(tool)

    access = Async("x.y")
    model = ScriptedModel([calls("ok", "broken"), "Done."])
    agent = agent_with(
        model,
        [run_tool("ok", permission="x.y"), run_tool("broken", permission="x.y")],
        access,
    )
    with caplog.at_level(logging.ERROR, "sagents_django.core.tool_access"):
        result = await agent.aexecute(["Go"])

    found = results(result.state)
    assert found["ok"] == ("ok done", False)
    assert found["broken"] == not_available("broken")
    assert "lost the database" in caplog.text


async def test_a_withheld_tool_named_in_interrupt_on_asks_nobody_and_is_refused() -> (
    None
):
    model = ScriptedModel([calls("refund"), "Sorry."])
    agent = agent_with(
        model,
        [run_tool("refund", permission="shop.refund")],
        Holder(),
        interrupt_on={"refund": True},
    )

    result = await agent.aexecute(["Refund me"])

    assert result.status == "completed"
    assert results(result.state)["refund"] == not_available("refund")


def test_the_refusal_text_is_the_one_the_model_reads() -> None:
    assert NOT_AVAILABLE_TEXT.format(name="x") == "Tool 'x' is not available to you."


# Sub-agents -----------------------------------------------------------------------


def task(subagent_type: str) -> Message:
    return Message.assistant(
        tool_calls=[
            ToolCall(
                call_id="call_task",
                name="task",
                arguments={"instructions": "Do it.", "subagent_type": subagent_type},
            )
        ]
    )


@pytest.mark.parametrize("subagent_type", ["general-purpose", "helper"])
async def test_a_subagent_is_offered_and_runs_only_what_its_parent_may(
    subagent_type: str, ran: list[str]
) -> None:
    tools = [run_tool("plain"), run_tool("refund", permission="shop.refund")]
    model = ScriptedModel(
        [
            task(subagent_type),
            calls("refund", "plain"),  # the sub-agent's first reply
            "Sub-agent done.",
            "Parent done.",
        ]
    )
    helper = SubAgentConfig(name="helper", description="Helps.", tools=tools)
    access = Holder()
    agent = agent_with(
        model,
        tools,
        access,
        middleware=[(SubAgent, {"subagents": [helper]})],
    )

    result = await agent.aexecute(["Delegate"])

    assert result.ok
    assert "refund" not in offered(model, 0)
    assert offered(model, 1) == ["plain"]  # the sub-agent's request
    assert ran == ["plain"]
    sub_results = [
        m["content"] for m in model.requests[2].messages if m["role"] == "tool"
    ]
    assert sub_results == ["Tool 'refund' is not available to you.", "plain done"]


async def test_a_subagent_checks_each_call_against_the_parent_access_again(
    ran: list[str],
) -> None:
    access = Holder("shop.refund")

    def revoke_then_call(request: Any) -> Message:
        assert "refund" in [t["function"]["name"] for t in request.tools]
        access.held.clear()  # taken away after the sub-agent was offered it
        return calls("refund")

    model = ScriptedModel(
        [task("general-purpose"), revoke_then_call, "Sub done.", "Parent done."]
    )
    agent = agent_with(
        model,
        [run_tool("refund", permission="shop.refund")],
        access,
        middleware=[SubAgent],
    )

    result = await agent.aexecute(["Delegate"])

    assert result.ok and ran == []
    assert access.checked == ["refund"]
    assert model.requests[2].messages[-1]["content"] == (
        "Tool 'refund' is not available to you."
    )


async def test_a_withheld_tool_called_with_bad_arguments_says_only_not_available() -> (
    None
):
    schema = {
        "type": "object",
        "properties": {"amount": {"type": "integer"}},
        "required": ["amount"],
    }
    model = ScriptedModel(
        [
            Message.assistant(
                tool_calls=[
                    ToolCall(call_id="c1", name="refund", arguments={"amount": "x"})
                ]
            ),
            "Sorry.",
        ]
    )
    agent = agent_with(
        model,
        [run_tool("refund", permission="shop.refund", parameters=schema)],
        Holder(),
    )

    result = await agent.aexecute(["Refund me"])

    # Not the schema's complaint, which would describe the tool.
    assert results(result.state)["refund"] == not_available("refund")


async def test_an_approved_call_whose_permission_went_while_it_waited_is_refused(
    ran: list[str],
) -> None:
    access = Holder("shop.refund")
    model = ScriptedModel([calls("refund"), "Ok."])
    agent = agent_with(
        model,
        [run_tool("refund", permission="shop.refund")],
        access,
        interrupt_on={"refund": True},
    )
    paused = await agent.aexecute(["Refund me"])
    assert paused.status == "interrupted"

    access.held.clear()
    result = await agent.aresume(paused.state, [{"type": "approve"}])

    assert result.ok and ran == []
    assert results(result.state)["refund"] == not_available("refund")
