"""Signing out closes the sockets that session signed in, on both sockets (the
JSON protocol's and the chat page's) and both stacks: the sign-out's message goes
through the channel layer to every process holding one of them."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from sagents_django import protocol, services
from sagents_django.routing import websocket_urlpatterns
from sagents_django.scope import Scope
from tests.runtime import follow as follow_module

pytestmark = pytest.mark.django_db(transaction=True)

site = follow_module.site


@sync_to_async
def browser(user: Any) -> Client:
    """A browser signed in as ``user`` (a session of its own)."""
    client = Client()
    client.force_login(user)
    return client


@sync_to_async
def person(name: str) -> tuple[Any, str]:
    user = get_user_model().objects.create_user(username=name)
    return user, str(services.create_conversation(Scope.for_user(user)).pk)


async def open_socket(client: Client, path: str) -> WebsocketCommunicator:
    """A socket signed in by ``client``'s session cookie, as a browser's is."""
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    communicator = WebsocketCommunicator(
        AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
        path,
        headers=[
            (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode())
        ],
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def close_code(communicator: WebsocketCommunicator) -> int | None:
    while True:
        output = await communicator.receive_output(10)
        if output["type"] == "websocket.close":
            return output.get("code")


def paths(cid: str) -> dict[str, str]:
    return {"json": "/ws/sagents/", "html": f"/ws/sagents/html/{cid}/"}


@pytest.mark.parametrize("socket", ["json", "html"])
async def test_signing_out_closes_that_sessions_sockets_and_no_other(
    site: Any, socket: str
) -> None:
    alice, cid = await person("alice")
    here, elsewhere = await browser(alice), await browser(alice)
    signed_out = await open_socket(here, paths(cid)[socket])
    still_in = await open_socket(elsewhere, paths(cid)[socket])

    await sync_to_async(here.logout)()
    code = await close_code(signed_out)
    untouched = await still_in.receive_nothing(0.3)
    await still_in.disconnect()

    assert code == protocol.CLOSE_UNAUTHENTICATED
    assert untouched  # the other browser's session is still signed in


async def test_a_signed_out_session_opens_no_new_socket(site: Any) -> None:
    alice, _ = await person("alice")
    client = await browser(alice)
    cookie_holder = Client()
    cookie_holder.cookies = client.cookies

    await sync_to_async(client.logout)()
    communicator = await open_socket(cookie_holder, "/ws/sagents/")

    assert await close_code(communicator) == protocol.CLOSE_UNAUTHENTICATED
