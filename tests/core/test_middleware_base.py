"""Middleware entries: building a stack from specs, ids, raw specs, overrides."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sagents_django.core import Agent, ContentPart, Message
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.middleware.base import (
    Middleware,
    MiddlewareEntry,
    class_path,
    init_middleware,
    init_stack,
)
from sagents_django.core.state import State
from sagents_django.core.testing import ScriptedModel

HERE = __name__


class Plain(Middleware):
    pass


class Titled(Middleware):
    def __init__(self, *, language: str = "en", max_words: int = 5) -> None:
        super().__init__(language=language, max_words=max_words)
        self.language = language

    def before_model(self, state: State) -> State:
        return state.put_metadata("language", self.language)


class OwnInit(Middleware):
    """A subclass whose __init__ does not call super().__init__."""

    def __init__(self, limit: int = 3) -> None:
        self.limit = limit


class RestoresAsk(Middleware):
    def restorable_interrupt(self, interrupt_data: dict[str, Any]) -> bool:
        return interrupt_data.get("type") == "ask"


def test_a_class_becomes_an_entry_with_the_class_path_as_id() -> None:
    entry = init_middleware(Plain)

    assert isinstance(entry, MiddlewareEntry)
    assert entry.id == f"{HERE}.Plain" == class_path(Plain)
    assert isinstance(entry.middleware, Plain)
    assert entry.middleware.id == entry.id
    assert entry.options == {}
    assert entry.cls is Plain


def test_a_class_with_options_is_built_with_them() -> None:
    entry = init_middleware((Titled, {"language": "fr"}))

    assert entry.middleware.language == "fr"  # type: ignore[attr-defined]
    assert entry.middleware.options == {"language": "fr", "max_words": 5}
    assert entry.options == {"language": "fr"}


def test_the_id_option_names_the_entry_and_is_not_passed_to_the_class() -> None:
    entry = init_middleware((Titled, {"id": "title_fr", "language": "fr"}))

    assert entry.id == "title_fr"
    assert entry.middleware.id == "title_fr"
    assert entry.options == {"language": "fr"}


def test_an_instance_is_wrapped_as_it_is() -> None:
    instance = Titled(language="de")

    entry = init_middleware(instance)

    assert entry.middleware is instance
    assert entry.id == class_path(Titled)
    assert entry.options == {"language": "de", "max_words": 5}


def test_an_instance_that_already_has_an_id_keeps_it() -> None:
    instance = Plain()
    instance.id = "custom"

    assert init_middleware(instance).id == "custom"


def test_an_instance_of_a_class_that_skips_the_base_init_is_wrapped() -> None:
    instance = OwnInit(limit=9)

    entry = init_middleware(instance)

    assert entry.middleware is instance
    assert entry.options == {}


def test_a_class_that_skips_the_base_init_is_built_with_its_options() -> None:
    entry = init_middleware((OwnInit, {"limit": 4}))

    assert entry.middleware.limit == 4  # type: ignore[attr-defined]


def test_a_dotted_path_string_is_imported() -> None:
    entry = init_middleware(f"{HERE}.Titled")

    assert entry.cls is Titled
    assert entry.id == class_path(Titled)


def test_a_dotted_path_with_options_is_imported() -> None:
    entry = init_middleware((f"{HERE}.Titled", {"language": "es"}))

    assert entry.middleware.language == "es"  # type: ignore[attr-defined]


def test_an_entry_passes_through_unchanged() -> None:
    entry = init_middleware(Plain)

    assert init_middleware(entry) is entry


@pytest.mark.parametrize(
    "path",
    ["no.such.module.Middleware", f"{HERE}.Missing", "nodots", ""],
)
def test_a_path_that_cannot_be_imported_is_a_configuration_error(path: str) -> None:
    with pytest.raises(ConfigurationError, match="Cannot import"):
        init_middleware(path)


@pytest.mark.parametrize(
    "spec",
    [f"{HERE}.HERE", State, 42, None, (Plain, {}, "extra"), lambda: None],
    ids=[
        "path to a non-class",
        "not a middleware class",
        "int",
        "None",
        "three-tuple",
        "function",
    ],
)
def test_a_spec_that_is_not_a_middleware_is_a_configuration_error(spec: Any) -> None:
    with pytest.raises(ConfigurationError, match="Middleware"):
        init_middleware(spec)


def test_options_that_are_not_a_dict_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="must be a dict"):
        init_middleware((Titled, [("language", "fr")]))


def test_options_the_class_does_not_take_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Bad options"):
        init_middleware((Titled, {"colour": "red"}))


def test_a_stack_keeps_the_order_of_its_specs() -> None:
    entries = init_stack([Titled, Plain, (Titled, {"id": "second"})])

    assert [e.id for e in entries] == [class_path(Titled), class_path(Plain), "second"]


def test_two_middleware_with_one_id_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="share the id"):
        init_stack([Titled, (Titled, {"language": "fr"})])


def test_two_custom_ids_that_clash_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="'same'"):
        init_stack([(Plain, {"id": "same"}), (Titled, {"id": "same"})])


def test_a_default_entry_turns_back_into_its_class() -> None:
    assert init_middleware(Plain).to_raw_spec() is Plain


def test_an_entry_with_options_turns_back_into_a_class_and_options() -> None:
    assert init_middleware((Titled, {"language": "fr"})).to_raw_spec() == (
        Titled,
        {"language": "fr"},
    )


def test_a_custom_id_is_kept_in_the_raw_spec() -> None:
    assert init_middleware((Plain, {"id": "mine"})).to_raw_spec() == (
        Plain,
        {"id": "mine"},
    )


@pytest.mark.parametrize(
    "spec",
    [
        Plain,
        (Titled, {"language": "fr"}),
        (Titled, {"id": "t2", "max_words": 9}),
        (Plain, {"id": "p"}),
    ],
)
def test_a_raw_spec_builds_an_equal_entry(spec: Any) -> None:
    entry = init_middleware(spec)

    again = init_middleware(entry.to_raw_spec())

    assert (again.id, again.cls, again.options) == (entry.id, entry.cls, entry.options)
    assert again.middleware is not entry.middleware
    assert again.middleware.options == entry.middleware.options


def test_to_raw_spec_does_not_change_the_entry() -> None:
    entry = init_middleware((Titled, {"id": "t", "language": "fr"}))

    entry.to_raw_spec()

    assert entry.options == {"language": "fr"}


def test_overrides_tells_which_hooks_a_class_replaces() -> None:
    assert Titled.overrides("before_model")
    assert not Titled.overrides("after_model")
    assert RestoresAsk.overrides("restorable_interrupt")
    assert not Plain.overrides("restorable_interrupt")
    assert not Middleware.overrides("before_model")


def test_the_base_hooks_change_nothing() -> None:
    middleware = Plain()
    state = State(metadata={"k": 1})

    assert middleware.before_model(state) is state
    assert middleware.after_model(state) is state
    assert middleware.handle_message("hello", state) is state
    assert middleware.on_turn_end(state) is state
    assert middleware.on_server_start(state) is state
    assert middleware.handle_resume(None, state, {}) is None  # type: ignore[arg-type]
    assert middleware.restorable_interrupt({"type": "any"}) is False
    assert middleware.system_prompt() is None
    assert middleware.tools() == []
    assert middleware.callbacks() == {}
    assert middleware.debug_summary() is None


def test_a_subclass_hook_is_the_one_called() -> None:
    entry = init_middleware((Titled, {"language": "nl"}))

    assert entry.middleware.before_model(State()).metadata == {"language": "nl"}


async def test_display_hooks_compose_in_order_and_a_raising_one_is_skipped() -> None:
    class Upper(Middleware):
        def transform_display_message(self, message: Message) -> Message:
            return replace(
                message,
                content=[ContentPart.text(message.text.upper())],
                metadata={**message.metadata, "shouted": True},
            )

    class Broken(Middleware):
        def transform_display_message(self, message: Message) -> Message:
            raise RuntimeError("a bug in a display hook")

    class Exclaim(Middleware):
        async def transform_display_message(self, message: Message) -> Message:
            return replace(message, content=[ContentPart.text(message.text + "!")])

    agent = Agent(
        model=ScriptedModel([]),
        middleware=[Upper, Broken, Exclaim],
        replace_default_middleware=True,
    )
    original = replace(Message.assistant("hello"), metadata={"usage": {"input": 1}})

    shown = await agent.display_message(original)

    assert shown.text == "HELLO!"
    assert shown.metadata["display_metadata"] == {"shouted": True}
    assert original.text == "hello" and "shouted" not in original.metadata
    plain = Agent(model=ScriptedModel([]), replace_default_middleware=True)
    assert await plain.display_message(original) is original
