"""Sockets a bearer token signed in, against real daphne over the Redis layer: a
new password (set in this process, as a password change form would) or a
deactivation closes the user's open token sockets at once with 4401, in another
process; a sign-in's save, another user's change and a rolled-back change close
nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import update_last_login
from django.db import transaction

from sagents_django.agui import tokens
from tests.fakes.openai_server import FakeOpenAIServer
from tests.runtime import stacks
from tests.support.processes import Daphne

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "production" not in stacks.names(),
        reason="real daphne and the Redis layer: the PostgreSQL pass",
    ),
]


@pytest.fixture(scope="module")
def daphne(production_llm: FakeOpenAIServer) -> Iterator[Daphne]:
    server = Daphne(stacks.process_env(production_llm))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def layer(settings: Any, daphne: Daphne) -> AsyncIterator[Daphne]:
    """This process tells daphne's sockets through the same Redis layer."""
    settings.CHANNEL_LAYERS = {"default": stacks.redis_layer()}
    yield daphne


async def token_socket(server: Daphne, user: Any) -> Any:
    """An AG-UI socket signed in with ``user``'s token, once it has answered a
    frame (so its sign-in, and the group it joins, are done)."""
    token = await sync_to_async(tokens.issue)(user)
    socket = await websockets.connect(
        server.url.replace("http://", "ws://") + "/ws/sagents/agui/",
        subprotocols=["agui", tokens.subprotocol(token)],  # type: ignore[list-item]
        origin=server.url,  # type: ignore[arg-type]
    )
    await socket.send("{}")
    assert "error" in json.loads(await socket.recv())
    return socket


async def close_code(socket: Any) -> int | None:
    """How the server closed the socket (a socket never closed fails the test
    after a minute instead of hanging it)."""

    async def closed() -> int | None:
        try:
            while True:
                await socket.recv()
        except websockets.ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else None

    return await asyncio.wait_for(closed(), 60)


async def still_open(socket: Any) -> bool:
    """Whether the socket answers a frame (a closed one raises)."""
    try:
        await socket.send("{}")
        return "error" in json.loads(await socket.recv())
    except websockets.ConnectionClosed:
        return False


@sync_to_async
def people() -> tuple[Any, Any]:
    model = get_user_model()
    return (
        model.objects.create_user("alice", password="old"),
        model.objects.create_user("bob", password="old"),
    )


@sync_to_async
def new_password(user: Any, password: str, *, rollback: bool = False) -> None:
    with transaction.atomic():
        user.set_password(password)
        user.save()
        if rollback:
            transaction.set_rollback(True)


async def test_a_new_password_closes_the_users_token_sockets_at_once(
    layer: Daphne,
) -> None:
    alice, bob = await people()
    alices = [await token_socket(layer, alice) for _ in range(2)]
    bobs = await token_socket(layer, bob)

    await sync_to_async(update_last_login)(None, alice)  # a sign-in: nothing
    await new_password(alice, "tried", rollback=True)  # rolled back: nothing
    still = await still_open(alices[0])
    await new_password(alice, "new")
    codes = [await close_code(s) for s in alices]

    assert still
    assert codes == [4401, 4401]
    assert await still_open(bobs)
    await bobs.close()


async def test_a_deactivated_user_is_closed_too(layer: Daphne) -> None:
    alice, _ = await people()
    socket = await token_socket(layer, alice)

    alice.is_active = False
    await sync_to_async(alice.save)()

    assert await close_code(socket) == 4401
