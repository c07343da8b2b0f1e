"""What signing out does to the sockets of the session (``user_logged_out``), and
what a new password (or a deactivation) does to the sockets a bearer token signed in
(``pre_save`` of the user model).

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


def close_token_sockets(user: Any) -> None:
    """After commit: close, with 4401, every open socket a bearer token signed in
    as ``user`` (``agui.tokens``), in every process.

    Called when the user's password changes or the user is deactivated
    (``credentials_changing``): tokens carry a mark of the password and name an
    active user, so they stop working at their next connect, but a socket signed
    in already would otherwise go on. A site's own "sign out everywhere" that
    revokes tokens some other way calls it too. A rolled-back change closes
    nothing; a layer that cannot be reached never fails the change."""
    pk = getattr(user, "pk", None)
    if pk is None:
        return
    from django.db import transaction

    from sagents_django.runtime import groups, layer

    def send() -> None:
        layer.send_from_sync(
            groups.token_group(pk),
            {"type": "credentials.changed"},
            what="close the token sockets of a user whose password changed",
        )

    transaction.on_commit(send)


TOKEN_FIELDS = frozenset({"password", "is_active"})
"""What a bearer token depends on (``agui.tokens.user_for``)."""


def credentials_changing(
    sender: Any,
    instance: Any,
    raw: bool = False,
    update_fields: Any = None,
    **kwargs: Any,
) -> None:
    """``pre_save`` of the user model: a new password (any path: the password
    change form, ``set_password`` and save, the admin, ``changepassword``) or a
    deactivation closes the user's token sockets (``close_token_sockets``).

    Compares with the stored row, one query by primary key, skipped when the save
    names fields a token does not depend on (Django's sign-in saves only
    ``last_login``)."""
    if raw or instance.pk is None:
        return
    if update_fields is not None and not TOKEN_FIELDS & set(update_fields):
        return
    stored = (
        sender._default_manager.filter(pk=instance.pk)
        .values_list("password", "is_active")
        .first()
    )
    if stored is None:
        return
    password, active = stored
    now_active = getattr(instance, "is_active", True)
    if password != instance.password or (active and not now_active):
        close_token_sockets(instance)
