"""The lean Redis connection the runtime publishes frames on (``runtime.wire``).

Real Redis servers: the shared one, and a private one where a test flushes scripts
or restarts the server (which the shared one's other users must not see).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from sagents_django.runtime import layer, wire
from tests.runtime import stacks
from tests.support.ports import free_port
from tests.support.processes import PrivateRedis

ECHO = "return KEYS[1] .. ARGV[1]"
INCR = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


@pytest.fixture(autouse=True)
async def closed_after() -> Any:
    """This test's loop closes with the test: its connections close first."""
    yield
    wire.close_this_loops()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis().start()
    yield server  # a failing test's teardown runs all the same
    server.stop()


def fed(*pieces: bytes) -> list[Any]:
    """What a connection hands its callers when Redis's replies arrive in
    ``pieces`` (as the socket may split them)."""
    loop = asyncio.new_event_loop()
    try:
        protocol = wire._Protocol(loop)
        futures = [loop.create_future() for _ in range(5)]
        protocol.waiting.extend((f, 0.0) for f in futures)
        for piece in pieces:
            protocol.data_received(piece)
        return [
            (f.exception() or f.result()) if f.done() else "waiting" for f in futures
        ]
    finally:
        loop.close()


def test_commands_are_packed_as_resp_arrays_of_bulk_strings() -> None:
    assert wire.pack("SET", b"k\r\n", 7) == (
        b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$1\r\n7\r\n"
    )


def test_replies_are_read_whole_however_the_socket_splits_them() -> None:
    replies = b":42\r\n+OK\r\n$5\r\nab\r\nc\r\n$-1\r\n-NOSCRIPT No matching script\r\n"
    whole = fed(replies)
    assert whole[:4] == [42, b"OK", b"ab\r\nc", None]
    assert isinstance(whole[4], wire.ReplyError)
    assert str(whole[4]).startswith("NOSCRIPT")

    for cut in range(1, len(replies)):
        split = fed(replies[:cut], replies[cut:])
        assert split[:4] == whole[:4], cut
        assert str(split[4]) == str(whole[4])

    assert fed(b":1\r\n$5\r\nab")[:2] == [1, "waiting"]


async def test_pipelined_commands_get_their_own_replies_in_order() -> None:
    writer = wire.writer(stacks.REDIS_URL)
    assert writer is not None
    key = f"sagents-test-wire-{uuid.uuid4().hex}"
    try:
        replies = await asyncio.gather(
            *(writer.evalsha(INCR, [key], [n]) for n in range(1, 51))
        )
        assert replies == [n * (n + 1) // 2 for n in range(1, 51)]
        assert await writer.execute(wire.pack("GET", key), wire.pack("PING")) == [
            b"1275",
            b"PONG",
        ]
    finally:
        await writer.execute(wire.pack("DEL", key))


async def test_a_script_redis_no_longer_has_is_sent_whole(
    private_redis: PrivateRedis,
) -> None:
    writer = wire.writer(private_redis.url)
    assert writer is not None
    assert await writer.evalsha(ECHO, ["k"], ["v"]) == b"kv"
    await writer.execute(wire.pack("SCRIPT", "FLUSH"))

    assert await writer.evalsha(ECHO, ["k"], ["w"]) == b"kw"


async def test_a_command_is_not_retried_when_its_connection_breaks_the_next_connects(
    private_redis: PrivateRedis,
) -> None:
    writer = wire.writer(private_redis.url)
    assert writer is not None
    assert await writer.evalsha(INCR, ["n"], [1]) == 1

    await asyncio.to_thread(private_redis.stop)
    with pytest.raises(OSError):  # ConnectionError, refused: counted as lost
        await writer.evalsha(INCR, ["n"], [1])
    await asyncio.to_thread(private_redis.start)

    assert await writer.evalsha(INCR, ["n"], [1]) == 1  # a fresh server


async def test_a_redis_that_stops_answering_fails_the_waiting_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that takes commands and never answers (a hung or cut-off Redis):
    the commands fail after ``TIMEOUT``, as redis-py's socket timeout would."""
    monkeypatch.setattr(wire, "TIMEOUT", 0.3)
    port = free_port()
    held: list[asyncio.StreamWriter] = []

    async def take_and_keep_quiet(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        held.append(writer)
        await reader.read()

    server = await asyncio.start_server(take_and_keep_quiet, "127.0.0.1", port)
    try:
        writer = wire.writer(f"redis://127.0.0.1:{port}")
        assert writer is not None
        with pytest.raises(ConnectionError, match="did not answer"):
            await writer.execute(wire.pack("PING"), wire.pack("PING"))
    finally:
        for quiet in held:
            quiet.close()
        server.close()
        await server.wait_closed()


async def test_the_database_of_the_url_is_the_one_written() -> None:
    key = f"sagents-test-wire-{uuid.uuid4().hex}"
    url = f"redis://{urlparse(stacks.REDIS_URL).netloc}/3"
    writer = wire.writer(url)
    assert writer is not None
    await writer.evalsha(INCR, [key], [5])
    client = layer.sync_redis_client(url)
    try:
        assert await asyncio.to_thread(client.get, key) == b"5"
    finally:
        await asyncio.to_thread(client.delete, key)


def test_urls_it_does_not_speak_are_left_to_redis_py() -> None:
    assert wire._make("rediss://example.com:6380") is None
    assert wire._make("unix:///tmp/redis.sock") is None
    made = wire._make("redis://user:p%40ss@example.com:6390/2")
    assert made is not None
    assert (made.host, made.port) == ("example.com", 6390)
    assert made.setup == [
        wire.pack("AUTH", "user", "p@ss"),
        wire.pack("SELECT", 2),
    ]


async def test_a_password_and_database_in_the_url_are_sent_first(
    private_redis: PrivateRedis,
) -> None:
    plain = wire.writer(private_redis.url)
    assert plain is not None
    await plain.execute(wire.pack("CONFIG", "SET", "requirepass", "s3cret"))
    address = urlparse(private_redis.url).netloc

    wrong = wire.writer(f"redis://:nope@{address}/0")
    assert wrong is not None
    with pytest.raises(wire.ReplyError):
        await wrong.execute(wire.pack("PING"))

    right = wire.writer(f"redis://:s3cret@{address}/2")
    assert right is not None
    assert await right.evalsha(INCR, ["n"], [4]) == 4
    assert await right.execute(wire.pack("GET", "n")) == [b"4"]
