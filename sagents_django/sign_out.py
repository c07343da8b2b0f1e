"""What signing out does to the sockets of the session (``user_logged_out``).

Kept out of ``signals``, which the runtime imports: this receiver uses the runtime,
and the runtime must not import what imports it back."""

from __future__ import annotations

from typing import Any


def close_sockets(
    sender: Any, request: Any = None, user: Any = None, **kwargs: Any
) -> None:
    """``user_logged_out``: close the sockets this session signed in, with 4401.

    A socket is signed in once, when it opens; without this it would go on
    following and sending for someone who signed out. Only this session's sockets
    close (they joined its group, ``groups.session_group``): the person's other
    browsers are still signed in. Sent before Django flushes the session, so its
    key is still there. A layer that cannot be reached never fails a sign-out."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if not key:
        return
    from sagents_django.runtime import groups, layer

    layer.send_from_sync(
        groups.session_group(key),
        {"type": "session.signed_out"},
        what="close the sockets of a signed-out session",
    )
