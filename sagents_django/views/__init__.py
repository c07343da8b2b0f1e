"""The chat pages: thin views that call the services and ``agent_server``.

One module per concept: ``conversations`` (the list, search, new, rename, delete),
``chat`` (a conversation: read, send, stop, retry, older history), ``approvals``
(decisions and the inbox), ``files`` (the file panel), ``actions`` (rate a reply,
fork from a turn, the person's own usage), ``branches`` (regenerate, edit and
resend, switch branches), ``exports`` (the person's data as a
zip, downloaded once), ``inspector`` (staff).
Every view takes the caller's scope from the request; another tenant's
conversation is a 404, like one that does not exist.
"""

from __future__ import annotations

from .conversations import home

__all__ = ["home"]
