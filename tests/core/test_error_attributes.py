"""LLMError declares what callers read (retry_after, partial), on both transports."""

from __future__ import annotations

import pytest

from sagents_django.core import Message
from sagents_django.core.callbacks import Callbacks
from sagents_django.core.exceptions import LLMError, StreamError
from sagents_django.core.llm import call_model
from tests.core.conftest import model_for
from tests.fakes.openai_server import fault, reply

HELLO = [{"role": "user", "content": "Hi"}]


def test_a_new_llm_error_has_every_attribute_callers_read() -> None:
    error = LLMError("boom")
    assert (error.retryable, error.status_code) == (False, None)
    assert (error.retry_after, error.partial) == (None, None)


def test_the_attributes_are_taken_by_the_constructor() -> None:
    partial = Message.assistant("Half", status="stream_error")
    error = StreamError(
        "cut", retryable=True, status_code=503, retry_after=2.5, partial=partial
    )
    assert (error.retryable, error.status_code, error.retry_after) == (True, 503, 2.5)
    assert error.partial is partial


async def test_a_rate_limit_error_carries_its_retry_after_header(fake_llm, transport):
    fake_llm.script(fault.http(429, retry_after=7))
    model = model_for(fake_llm, transport, max_retries=0)
    with pytest.raises(LLMError) as info:
        await call_model([model], HELLO, [], execution=None, callbacks=Callbacks())
    assert info.value.status_code == 429
    assert info.value.retry_after == 7.0
    assert info.value.partial is None


async def test_a_server_error_without_the_header_has_no_retry_after(
    fake_llm, transport
):
    fake_llm.script(fault.http(500))
    model = model_for(fake_llm, transport, max_retries=0)
    with pytest.raises(LLMError) as info:
        await call_model([model], HELLO, [], execution=None, callbacks=Callbacks())
    assert info.value.retry_after is None


async def test_a_stream_dropped_mid_text_carries_the_partial_message(
    fake_llm, transport
):
    fake_llm.script(fault.drop(after=reply("Half an answer", chunks=3)))
    model = model_for(fake_llm, transport, max_retries=2)
    with pytest.raises(StreamError) as info:
        await call_model([model], HELLO, [], execution=None, callbacks=Callbacks())
    partial = info.value.partial
    assert partial is not None
    assert partial.text == "Half an answer"
    assert partial.status == "stream_error"
    assert info.value.retryable is False
    assert len(fake_llm.requests) == 1  # text that reached people is never replayed
