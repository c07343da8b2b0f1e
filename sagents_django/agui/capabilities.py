"""What the AG-UI endpoint declares (AG-UI ``AgentCapabilities``, served at
``agui/capabilities/``), with ``transport.resumable`` meaning our extension:
every event carries the conversation's ``seq`` and a stream can be rejoined from
a ``Last-Event-ID`` (docs/agui.md)."""

from __future__ import annotations

from typing import Any, Final

from sagents_django import __version__

EXTENSION: Final = "sagents.resumable/1"
"""The name and version of the resume extension, under ``custom``."""

CAPABILITIES: Final[dict[str, Any]] = {
    "identity": {"name": "sagents-django", "version": __version__},
    "transport": {"streaming": True, "websocket": True, "resumable": True},
    "state": {"snapshots": True, "deltas": True, "persistentState": True},
    "reasoning": {"supported": True, "streaming": True},
    "humanInTheLoop": {
        "supported": True,
        "approvals": True,
        "interrupts": True,
        "approveWithEdits": True,
    },
    "custom": {
        EXTENSION: {
            "eventId": "seq",
            "sse": "id: <seq> on the last AG-UI event of each event of ours",
            "websocket": "ws/sagents/agui/, each frame's seq",
            "reconnect": "GET agui/<threadId>/ with Last-Event-ID",
        }
    },
}
