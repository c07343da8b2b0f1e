"""Sharing: conversations shared with chosen users and groups, and read-only links.

``access`` lends scopes (what a share lets its holder do, enforced by the scope's
own querysets), ``services`` is the owner's API (share, revoke, list, links),
``models`` the rows, ``notify`` tells open sockets when a share changes.
"""
