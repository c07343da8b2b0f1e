"""Tools: construction, the decorator, and executing calls (failures become results)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.messages import ToolCall, ToolResult
from sagents_django.core.state import State
from sagents_django.core.todo import Todo
from sagents_django.core.tools import Tool, ToolContext, execute_tool_call, tool

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def context(**tool_context: Any) -> ToolContext:
    return ToolContext(state=State(), agent_id="agent-1", tool_context=tool_context)


def make(
    function: Any, *, name: str = "weather", parameters: dict[str, Any] | None = None
) -> Tool:
    return Tool(
        name=name,
        description="Weather for a city",
        function=function,
        parameters=parameters or WEATHER_SCHEMA,
    )


async def run(found: Tool, arguments: dict[str, Any], **kwargs: Any) -> ToolResult:
    call = ToolCall(call_id="c1", name=found.name, arguments=arguments)
    return await execute_tool_call(call, {found.name: found}, context(), **kwargs)


# Construction --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", None, 5])
def test_a_tool_needs_a_non_empty_string_name(name: Any) -> None:
    with pytest.raises(ConfigurationError, match="name"):
        Tool(name=name, description="d", function=lambda a, c: "")


def test_a_tool_needs_a_callable_function() -> None:
    with pytest.raises(ConfigurationError, match="callable"):
        Tool(name="t", description="d", function="not callable")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "parameters",
    [{"type": "string"}, {"properties": {}}, ["type", "object"], "object"],
    ids=["string schema", "no type", "a list", "a string"],
)
def test_a_tool_schema_must_be_an_object_schema(parameters: Any) -> None:
    with pytest.raises(ConfigurationError, match="object"):
        Tool(name="t", description="d", function=lambda a, c: "", parameters=parameters)


def test_an_invalid_json_schema_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="invalid parameters schema"):
        Tool(
            name="t",
            description="d",
            function=lambda a, c: "",
            parameters={
                "type": "object",
                "properties": {"x": {"type": "no-such-type"}},
            },
        )


def test_a_tool_is_described_to_openai_as_a_function() -> None:
    found = make(lambda a, c: "")

    assert found.to_openai() == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather for a city",
            "parameters": WEATHER_SCHEMA,
        },
    }


def test_the_decorator_takes_name_description_and_schema_from_the_function() -> None:
    @tool(parameters=WEATHER_SCHEMA, display_text="Checking the weather")
    def get_weather(args: dict[str, Any], ctx: ToolContext) -> str:
        """Weather for a city."""
        return f"Sunny in {args['city']}"

    assert isinstance(get_weather, Tool)
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Weather for a city."
    assert get_weather.parameters == WEATHER_SCHEMA
    assert get_weather.display_text == "Checking the weather"


def test_the_decorator_accepts_an_explicit_name_and_description() -> None:
    @tool(name="lookup", description="Look it up")
    async def anything(args: dict[str, Any], ctx: ToolContext) -> str:
        return ""

    assert (anything.name, anything.description) == ("lookup", "Look it up")
    assert anything.parameters == {"type": "object", "properties": {}}


# Execution -----------------------------------------------------------------------


async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    def weather(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(threading.get_ident())
        return f"Sunny in {args['city']}"

    result = await run(make(weather), {"city": "Oslo"})

    assert result == ToolResult(
        tool_call_id="c1", name="weather", content="Sunny in Oslo"
    )
    assert seen and seen[0] != loop_thread


async def test_an_async_tool_runs_on_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    async def weather(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(threading.get_ident())
        await asyncio.sleep(0)
        return "Rain"

    result = await run(make(weather), {"city": "Oslo"})

    assert result.content == "Rain"
    assert not result.is_error
    assert seen == [loop_thread]


async def test_a_tool_receives_the_arguments_and_the_context() -> None:
    received: list[Any] = []

    def weather(args: dict[str, Any], ctx: ToolContext) -> str:
        received.extend([args, ctx.agent_id, ctx.user_id])
        return "ok"

    found = make(weather)
    call = ToolCall(call_id="c1", name="weather", arguments={"city": "Oslo", "days": 2})

    await execute_tool_call(call, {"weather": found}, context(user_id=42))

    assert received == [{"city": "Oslo", "days": 2}, "agent-1", 42]


async def test_a_tool_returning_text_and_a_state_carries_the_state_as_processed_content() -> (
    None
):
    update = State(todos=[Todo(id="t", content="plan")])

    result = await run(make(lambda a, c: ("Planned", update)), {"city": "x"})

    assert result.content == "Planned"
    assert result.processed_content is update


async def test_a_tool_returning_text_and_a_dict_carries_the_dict_as_processed_content() -> (
    None
):
    result = await run(
        make(lambda a, c: ("Titled", {"metadata": {"title": "T"}})), {"city": "x"}
    )

    assert result.content == "Titled"
    assert result.processed_content == {"metadata": {"title": "T"}}


async def test_a_tool_returning_a_tool_result_gets_the_call_id_and_name_filled_in() -> (
    None
):
    async def weather(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(
            tool_call_id="", name="", content="custom", display_text="Custom"
        )

    result = await run(make(weather), {"city": "x"})

    assert result == ToolResult(
        tool_call_id="c1", name="weather", content="custom", display_text="Custom"
    )


async def test_a_tool_returning_a_dict_gives_its_json_text() -> None:
    result = await run(make(lambda a, c: {"temp": 21, "sky": "clear ☀"}), {"city": "x"})

    assert result.content == '{"temp": 21, "sky": "clear ☀"}'
    assert not result.is_error


async def test_a_tools_display_text_is_put_on_its_results() -> None:
    found = Tool(
        name="weather",
        description="d",
        function=lambda a, c: "ok",
        parameters=WEATHER_SCHEMA,
        display_text="Checking the weather",
    )

    result = await run(found, {"city": "x"})

    assert result.display_text == "Checking the weather"


async def test_a_raising_tool_gives_an_error_result_naming_the_exception() -> None:
    def weather(args: dict[str, Any], ctx: ToolContext) -> str:
        raise LookupError("no station near Oslo")

    result = await run(make(weather), {"city": "Oslo"})

    assert result.is_error
    assert result.tool_call_id == "c1"
    assert "LookupError" in result.content
    assert "no station near Oslo" in result.content


async def test_a_tool_raising_timeout_error_without_a_timeout_gives_an_error_result() -> (
    None
):
    async def weather(args: dict[str, Any], ctx: ToolContext) -> str:
        raise TimeoutError("upstream API timed out")

    result = await run(make(weather), {"city": "Oslo"})

    assert result.is_error
    assert "upstream API timed out" in result.content


async def test_arguments_that_break_the_schema_give_an_error_result_naming_the_field() -> (
    None
):
    called = []

    result = await run(
        make(lambda a, c: called.append(a) or "ok"), {"city": "Oslo", "days": 0}
    )

    assert result.is_error
    assert "days" in result.content
    assert "Invalid arguments for tool 'weather'" in result.content
    assert called == []


async def test_a_missing_required_argument_is_named_in_the_error() -> None:
    result = await run(make(lambda a, c: "ok"), {})

    assert result.is_error
    assert "city" in result.content


async def test_raw_arguments_give_an_error_result_quoting_them() -> None:
    called = []
    found = make(lambda a, c: called.append(a) or "ok")
    call = ToolCall(call_id="c9", name="weather", raw_arguments='{"city": Oslo}')

    result = await execute_tool_call(call, {"weather": found}, context())

    assert result.is_error
    assert result.tool_call_id == "c9"
    assert '{"city": Oslo}' in result.content
    assert "Invalid JSON" in result.content
    assert called == []


async def test_an_unknown_tool_gives_an_error_listing_the_available_ones() -> None:
    tools = {
        "weather": make(lambda a, c: ""),
        "clock": make(lambda a, c: "", name="clock"),
    }
    call = ToolCall(call_id="c1", name="wether", arguments={})

    result = await execute_tool_call(call, tools, context())

    assert result.is_error
    assert "'wether' does not exist" in result.content
    assert "clock, weather" in result.content


async def test_an_unknown_tool_with_no_tools_says_none() -> None:
    result = await execute_tool_call(ToolCall(call_id="1", name="x"), {}, context())

    assert result.is_error
    assert "none" in result.content


async def test_a_slow_tool_times_out_quickly_with_an_error_result() -> None:
    async def weather(args: dict[str, Any], ctx: ToolContext) -> str:
        await asyncio.sleep(10)
        return "never"

    result = await run(make(weather), {"city": "x"}, timeout=0.05)

    assert result.is_error
    assert "timed out after 0.05 seconds" in result.content


async def test_a_fast_tool_within_its_timeout_succeeds() -> None:
    result = await run(make(lambda a, c: "quick"), {"city": "x"}, timeout=5)

    assert result == ToolResult(tool_call_id="c1", name="weather", content="quick")


# Tool context --------------------------------------------------------------------


def test_the_tool_context_exposes_state_agent_id_and_its_keys() -> None:
    state = State(metadata={"k": "v"})
    ctx = ToolContext(
        state=state, agent_id="a-1", tool_context={"user_id": 7, "tenant": "acme"}
    )

    assert ctx.state is state
    assert ctx.agent_id == "a-1"
    assert ctx.user_id == 7
    assert ctx.tenant == "acme"
    assert ctx.get("user_id") == 7
    assert ctx.get("missing") is None
    assert ctx.get("missing", "default") == "default"


def test_an_unknown_context_attribute_raises_attribute_error() -> None:
    ctx = context(user_id=7)

    with pytest.raises(AttributeError, match="project_id"):
        _ = ctx.project_id
    assert getattr(ctx, "project_id", "fallback") == "fallback"
    assert not hasattr(ctx, "_private")
