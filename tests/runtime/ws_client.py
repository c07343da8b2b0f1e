"""A test client of the JSON WebSocket protocol, on channels' WebsocketCommunicator."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from sagents_django.routing import websocket_urlpatterns

_ids = itertools.count(1)


class Socket:
    """One connected socket: frames sent, every frame received kept in order."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.frames: list[dict[str, Any]] = []
        self.close_code: int | None = None

    async def send(self, action: str, **fields: Any) -> dict[str, Any]:
        """Send an action and wait for its reply (matched by a fresh ``id``)."""
        request_id = f"r{next(_ids)}"
        await self.communicator.send_json_to(
            {"action": action, "id": request_id, **fields}
        )
        return await self.until(lambda f: f.get("id") == request_id)

    async def send_raw(self, text: str) -> dict[str, Any]:
        """Send text as it is; the next reply frame (no id to match)."""
        await self.communicator.send_to(text_data=text)
        return await self.until(lambda f: "reply" in f)

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                output = await self.communicator.receive_output(timeout)
                if output["type"] == "websocket.close":
                    self.close_code = output.get("code")
                    raise SocketClosed(self.close_code)
                frame = json.loads(output["text"])
                self.frames.append(frame)
                if predicate(frame):
                    return frame

    async def event(self, name: str, conversation: Any = None) -> dict[str, Any]:
        return await self.until(
            lambda f: (
                f.get("event") == name
                and (conversation is None or f["conversation"] == str(conversation))
            )
        )

    async def closed(self) -> int | None:
        """The close code the server sends next (frames before it are kept)."""
        try:
            await self.until(lambda f: False)
        except SocketClosed as exc:
            return exc.code
        raise AssertionError("unreachable")

    def events(self, conversation: Any = None) -> list[dict[str, Any]]:
        return [
            f
            for f in self.frames
            if "event" in f
            and (conversation is None or f["conversation"] == str(conversation))
        ]

    async def disconnect(self) -> None:
        await self.communicator.disconnect()


class SocketClosed(Exception):
    def __init__(self, code: int | None) -> None:
        self.code = code
        super().__init__(f"closed with {code}")


async def connect(user: Any, path: str = "/ws/sagents/") -> Socket:
    """A socket of ``user`` (as AuthMiddlewareStack would set it) on the routes."""
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return Socket(communicator)


def streamed(frames: list[dict[str, Any]]) -> str:
    return "".join(
        delta.get("content", "")
        for frame in frames
        if frame.get("event") == "llm_deltas"
        for delta in frame["data"]["deltas"]
    )
