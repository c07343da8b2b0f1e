"""The shared files page's WebSocket: the file list, live.

``ws/sagents/html/files/<filesystem>/`` follows one filesystem's file events the
way the JSON protocol's ``follow_files`` does (``sockets.AgentConsumerBase``,
``follow_filesystem``): only a filesystem the user may read (its own, or one
shared with them: 4404 otherwise, as for any id), and a share revoked while it is
open stops it at once (``filesystem_revoked``: the socket closes with 4404, and
the page says so). Each file event draws the list again from the database, whole,
so the order of events does not matter and none is drawn twice; the list is also
sent once the socket opens, for what changed between the page and the socket.
Signing in and out are the other sockets' (4401).
"""

from __future__ import annotations

from typing import Any

from sagents_django import protocol
from sagents_django.exceptions import InvalidInput, NotFound
from sagents_django.sockets import AgentConsumerBase  # says to install Channels

from . import file_views


class SharedFilesConsumer(AgentConsumerBase):
    filesystem: Any = None
    """The followed filesystem's row (``Filesystem``)."""

    async def connect(self) -> None:
        self.setup()
        if not await self.sign_in():
            return
        fid = self.scope["url_route"]["kwargs"]["filesystem_id"]
        try:
            self.filesystem, _level = await self.follow_filesystem(fid)
        except (NotFound, InvalidInput):
            await self.refuse(protocol.CLOSE_NOT_FOUND)
            return
        await self.accept()
        await self._redraw()

    async def agent_event(self, message: dict[str, Any]) -> None:
        if message.get("files") and not self.closed:
            await self._redraw()

    async def filesystem_revoked(self, filesystem_id: int) -> None:
        if not self.closed:
            await self.close_with(protocol.CLOSE_NOT_FOUND)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        """Nothing is asked of this socket (the upload form posts over HTTP)."""

    async def _redraw(self) -> None:
        html = await self.in_database(file_views.tree_fragment, self.filesystem)
        if not self.closed:
            await self.send(text_data=html)
