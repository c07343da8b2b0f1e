"""Messages for middleware while a turn runs (``Inbox``), and ``on_step_end``."""

from __future__ import annotations

from typing import Any

from sagents_django.core import Agent, Inbox, Message, Middleware, State, Tool, ToolCall
from sagents_django.core.testing import ScriptedModel


def make_tool(name: str, function: Any) -> Tool:
    return Tool(
        name=name,
        description=f"The {name} tool.",
        function=function,
        parameters={"type": "object", "properties": {}},
    )


class Notes(Middleware):
    """Keeps what it is told in metadata, and shows it to the model."""

    def handle_message(self, message: Any, state: State) -> State:
        notes = [*state.get_metadata("notes", []), message]
        return state.put_metadata("notes", notes)


def agent_with(model: ScriptedModel, *tools: Any) -> Agent:
    return Agent(
        replace_default_middleware=True,
        model=model,
        middleware=[(Notes, {"id": "notes"})],
        tools=list(tools),
    )


async def test_a_message_posted_before_the_turn_is_applied_before_the_first_call():
    inbox = Inbox()
    inbox.post("notes", {"page": "/blog"})
    model = ScriptedModel(["Hello"])

    result = await agent_with(model).aexecute(["Hi"], inbox=inbox)

    assert result.status == "completed", result.error
    assert result.state.get_metadata("notes") == [{"page": "/blog"}]


async def test_a_message_posted_during_a_tool_is_applied_at_the_next_step():
    inbox = Inbox()
    seen_at_step_end: list[Any] = []

    def post(args: dict, _ctx: object) -> str:
        inbox.post("notes", "from the tool")
        return "posted"

    call = ToolCall(call_id="call-1", name="post")
    model = ScriptedModel([Message.assistant(tool_calls=[call]), "Done"])
    agent = agent_with(model, make_tool("post", post))

    async def on_step_end(execution: Any) -> None:
        seen_at_step_end.append(execution.state.get_metadata("notes"))

    result = await agent.aexecute(
        ["Go"], inbox=inbox, callbacks=[{"on_step_end": on_step_end}]
    )

    assert result.status == "completed", result.error
    # The step ended before the message was applied; the next call saw it.
    assert seen_at_step_end == [None]
    assert result.state.get_metadata("notes") == ["from the tool"]


async def test_a_message_for_an_unknown_middleware_is_skipped_not_fatal():
    inbox = Inbox()
    inbox.post("Nobody", "hello")

    result = await agent_with(ScriptedModel(["Fine"])).aexecute(["Hi"], inbox=inbox)

    assert result.status == "completed", result.error
    assert result.state.get_metadata("notes") is None
