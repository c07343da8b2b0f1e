"""MCP servers kept in the database, per user or per tenant, and who gets them.

Why they are narrower than the servers in settings: a row is written by people
(staff in the admin, or a site's own form), not by the operator who decides what
this process runs and which hosts it reaches. So a row names only a
streamable-HTTP URL on a host of ``SAGENTS["MCP_ALLOWED_HOSTS"]`` (a stdio command
comes from settings only), and its headers name secrets instead of holding them:
each header's value is the *name* of an entry of ``SAGENTS["MCP_SECRETS"]``, whose
value is sent. No secret is in the database, the admin, a status or a log line.

A row is checked twice by the same rules (``row_problems``): by the model's
``clean()`` when it is saved through a form, and again when its server is offered
(a row written by other means, or one whose host left the allow-list since, is left
out and logged). The HTTP client then checks the host of every request it sends
(``transports``), which refuses a redirect to another host.

Who gets a row's tools (``servers_for``): the row's ``user`` (their own), or every
scope whose owner is the row's ``tenant`` (the conversation owner's primary key, as
``Scope.owner_pk`` gives it: a team, an organization, or the user on a site whose
conversations belong to users). Nobody else, whatever they ask the model for.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sagents_django.core.exceptions import ConfigurationError

from .config import MAX_TOOLS_CEILING, NAME, McpServer

if TYPE_CHECKING:
    from .models import StoredMcpServer

logger = logging.getLogger(__name__)

MAX_NAME = 30
MAX_URL = 2000
MAX_TENANT = 255
MAX_HEADERS = 20
MAX_TOOL_NAME = 128
MAX_SERVERS_PER_SCOPE = 20
"""Rows offered to one scope at most (its own first, then its tenant's)."""

HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}\Z")
"""An HTTP header name (RFC 9110's token), so no line break or colon gets in."""
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept",
        "cookie",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    }
)
"""Headers the HTTP client or the protocol set: a row may not replace them."""

SEPARATOR = "#"
"""Between a row's name and its id in its server's name (``tickets#17``): no
settings server's name holds it, so the two never share a connection."""


def server_key(name: str, pk: Any) -> str:
    """The ``McpServer.name`` of row ``pk`` (statuses and logs show it)."""
    return f"{name}{SEPARATOR}{pk}"


def is_stored(server_name: str) -> bool:
    return SEPARATOR in server_name


# The rules of a row ----------------------------------------------------------------
def row_problems(
    *,
    name: Any,
    url: Any,
    headers: Any,
    tools: Any,
    hosts: frozenset[str],
    secrets: Mapping[str, str] | None,
    taken: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """What is wrong with a row's values, by field (empty: nothing). ``secrets``
    None skips the check that each named secret exists; ``taken`` are the
    prefixes of settings servers (a row's tools would clash with theirs)."""
    problems: dict[str, str] = {}
    if not isinstance(name, str) or not NAME.match(name) or "__" in name:
        problems["name"] = (
            f"must be a letter then up to {MAX_NAME - 1} letters, digits, '-' or '_' "
            "(no '__')"
        )
    elif name in taken:
        problems["name"] = (
            f"{name!r} is the prefix of a server in SAGENTS['MCP_SERVERS']: the "
            "tools' names would clash"
        )
    why = url_problem(url, hosts)
    if why is not None:
        problems["url"] = why
    why = headers_problem(headers, secrets)
    if why is not None:
        problems["headers"] = why
    why = tools_problem(tools)
    if why is not None:
        problems["tools"] = why
    return problems


def url_problem(url: Any, hosts: frozenset[str]) -> str | None:
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        return f"must be an http:// or https:// URL of at most {MAX_URL} characters"
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        return "must be an http:// or https:// URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            "must be an http:// or https:// URL (a stdio command comes only from "
            "settings)"
        )
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials: name a secret in the headers"
    if parts.hostname.lower() not in hosts:
        return (
            f"its host {parts.hostname[:100]!r} is not in "
            "SAGENTS['MCP_ALLOWED_HOSTS'] (ask the site's operator to allow it)"
        )
    return None


def headers_problem(headers: Any, secrets: Mapping[str, str] | None) -> str | None:
    """Why ``headers`` ({header name: secret name}) is not valid, else None. It
    never quotes a value: a person may have typed a secret there by mistake."""
    if not isinstance(headers, Mapping):
        return 'must be an object of header name to secret name: {"Authorization": "tickets_token"}'
    if len(headers) > MAX_HEADERS:
        return f"must have at most {MAX_HEADERS} headers"
    for header, secret in headers.items():
        if not isinstance(header, str) or not HEADER_NAME.match(header):
            return "a header name must be letters, digits and - (at most 64)"
        if header.lower() in RESERVED_HEADERS:
            return f"the header {header!r} is set by the client and cannot be replaced"
        if not isinstance(secret, str) or not SECRET_NAME.match(secret):
            return (
                f"the value of {header!r} must name an entry of "
                "SAGENTS['MCP_SECRETS'] (letters, digits and _), not hold a secret"
            )
        if secrets is not None and secret not in secrets:
            return f"the secret named for {header!r} is not in SAGENTS['MCP_SECRETS']"
    return None


def tools_problem(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS_CEILING:
        return (
            f"must be a list of at most {MAX_TOOLS_CEILING} tool names, or null "
            "for all the server's tools"
        )
    for tool in tools:
        if (
            not isinstance(tool, str)
            or not tool
            or len(tool) > MAX_TOOL_NAME
            or not tool.isprintable()
        ):
            return f"must hold tool names of 1 to {MAX_TOOL_NAME} printable characters"
    return None


# A row as a server -----------------------------------------------------------------
def server_of(
    row: StoredMcpServer,
    *,
    hosts: frozenset[str],
    secrets: Mapping[str, str],
    taken: frozenset[str] = frozenset(),
) -> McpServer:
    """The ``McpServer`` of ``row``, its header values read from ``secrets``;
    ``ConfigurationError`` (naming the row, never a value) when a rule fails."""
    problems = row_problems(
        name=row.name,
        url=row.url,
        headers=row.headers,
        tools=row.tools,
        hosts=hosts,
        secrets=secrets,
        taken=taken,
    )
    if problems:
        said = "; ".join(f"{field} {why}" for field, why in sorted(problems.items()))
        raise ConfigurationError(f"MCP server {row.name!r} (row {row.pk}): {said}")
    return McpServer(
        name=server_key(row.name, row.pk),
        prefix=row.name,
        url=row.url,
        headers={header: secrets[secret] for header, secret in row.headers.items()},
        tools=None if row.tools is None else frozenset(row.tools),
    )


def visible_rows(scope: Any) -> Any:
    """The enabled rows ``scope`` may use: its user's own, then its tenant's (a
    queryset; none for an anonymous scope or one that owns nothing)."""
    from django.db.models import Case, Q, Value, When

    from sagents_django.scope import Scope, conversation_model

    from .models import StoredMcpServer

    rows = StoredMcpServer.objects.filter(enabled=True)
    if not isinstance(scope, Scope) or not scope.is_authenticated:
        return rows.none()
    mine = Q(user_id=scope.user.pk)
    owner = scope.owner_pk(conversation_model())
    visible = mine | Q(tenant=str(owner)) if owner is not None else mine
    return (
        rows.filter(visible)
        .annotate(own=Case(When(mine, then=Value(0)), default=Value(1)))
        .order_by("own", "name", "pk")
    )


def servers_for(
    scope: Any, *, hosts: frozenset[str], taken: frozenset[str]
) -> list[McpServer]:
    """The servers of the rows ``scope`` may use, when the site allows rows
    (``SAGENTS["MCP_DATABASE_SERVERS"]``). A row that breaks a rule, or whose name
    one offered before it took (a user's own comes before the tenant's), is left
    out and logged. Runs the database query: call it where that is allowed."""
    from sagents_django.conf import sagents_settings

    if not sagents_settings.MCP_DATABASE_SERVERS:
        return []
    secrets = sagents_settings.MCP_SECRETS
    found: list[McpServer] = []
    used: set[str] = set()  # the settings prefixes: server_of checks those
    rows = list(visible_rows(scope)[: MAX_SERVERS_PER_SCOPE + 1])
    if len(rows) > MAX_SERVERS_PER_SCOPE:
        logger.warning(
            "More than %d MCP servers in the database for one scope: the first %d "
            "are offered",
            MAX_SERVERS_PER_SCOPE,
            MAX_SERVERS_PER_SCOPE,
        )
        rows = rows[:MAX_SERVERS_PER_SCOPE]
    for row in rows:
        if row.name in used:
            logger.warning(
                "MCP server %r (row %s) is not offered: a server offered before it "
                "has that name",
                row.name,
                row.pk,
            )
            continue
        try:
            server = server_of(row, hosts=hosts, secrets=secrets, taken=taken)
        except ConfigurationError as exc:
            logger.warning("%s; its tools are not offered", exc)
            continue
        used.add(server.prefix)
        found.append(server)
    return found
