"""The MCP servers a site configures, read from ``SAGENTS["MCP_SERVERS"]``.

Why a server is data in settings and nothing else: a stdio server is a command this
process runs, and an HTTP server is a host this process connects to with the site's
credentials. Both are decisions of the site's operator, so they come from settings
only, never from the database, a request or a model. A command is a list of
arguments handed to the operating system as it is (no shell parses it, nothing is
interpolated into it), and a URL must name a host of ``SAGENTS["MCP_ALLOWED_HOSTS"]``.

This module is pure data and checks (it imports neither Django nor the MCP SDK):
``conf`` validates the settings with ``servers_problem`` and the connections are
built from the ``McpServer`` values ``parse_servers`` returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from sagents_django.core.exceptions import ConfigurationError
from sagents_django.core.tools import checked_permissions

Transport = Literal["stdio", "http"]

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,29}\Z")
"""A server's name or prefix: a letter, then up to 29 letters, digits, ``-`` or
``_`` (no ``__``, which separates the prefix from the tool's name)."""

MAX_TOOLS_CEILING = 1000
"""The most tools one server may be configured to offer (a model is offered a few
dozen well; providers refuse requests with more than 128 tools)."""

OPTIONS: frozenset[str] = frozenset(
    (
        "command",
        "env",
        "cwd",
        "url",
        "headers",
        "tools",
        "prefix",
        "timeout",
        "connect_timeout",
        "list_ttl",
        "idempotent",
        "max_tools",
        "max_message_bytes",
        "permission",
        "tool_permissions",
    )
)


@dataclass(frozen=True, kw_only=True)
class McpServer:
    """One configured MCP server (its secrets never appear in its ``repr``)."""

    name: str
    """Its key in ``MCP_SERVERS``; names it in logs, statuses and errors."""
    prefix: str
    """Its tools are offered as ``<prefix>__<tool>`` (the name by default)."""
    command: tuple[str, ...] = ()
    """stdio: the program and its arguments, run without a shell."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """stdio: environment variables added to the SDK's short safe list."""
    cwd: str | None = None
    """stdio: the working directory of the server process."""
    url: str | None = None
    """HTTP: the streamable-HTTP endpoint."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """HTTP: headers sent with every request (an ``Authorization`` token...)."""
    tools: frozenset[str] | None = None
    """The server's tool names the agent may use (None: all it lists)."""
    timeout: float = 60.0
    """Seconds one call (or one listing) may take before it is cancelled."""
    connect_timeout: float = 10.0
    """Seconds to start (or reach) the server and agree on a protocol version."""
    list_ttl: float = 300.0
    """Seconds a tool list is kept before it is read again (a server's
    ``tools/list_changed`` notification refreshes it at once)."""
    idempotent: bool | frozenset[str] | None = None
    """Which tools run again when a turn is taken over after its worker died: None
    follows each tool's ``idempotentHint``, True/False overrides it for every tool,
    a set names the tools that are."""
    max_tools: int = 100
    """The most tools taken from its list; the rest are left out (and logged)."""
    max_message_bytes: int = 64 * 1024 * 1024
    """The largest message accepted from it (a stdio line, an HTTP body or event);
    a larger one fails the call instead of filling memory."""
    permission: tuple[str, ...] = ()
    """The Django permissions (``app_label.codename``) a caller needs for any of
    its tools (``Tool(permission=...)``, checked by the agent's ``tool_access``)."""
    tool_permissions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """More permissions for some of its tools, by the server's tool name."""

    def permissions_for(self, tool_name: str) -> tuple[str, ...]:
        """What a caller needs for ``tool_name``: the server's and the tool's own."""
        return (*self.permission, *self.tool_permissions.get(tool_name, ()))

    @property
    def transport(self) -> Transport:
        return "stdio" if self.command else "http"

    def is_idempotent(self, tool_name: str, hint: bool | None) -> bool:
        """Whether ``tool_name`` may run twice (see ``idempotent``)."""
        if self.idempotent is None:
            return hint is True
        if isinstance(self.idempotent, bool):
            return self.idempotent
        return tool_name in self.idempotent


def parse_servers(value: Any, allowed_hosts: Any = None) -> dict[str, McpServer]:
    """``MCP_SERVERS`` as ``McpServer`` values by name; ``ConfigurationError``
    naming the bad value otherwise (a message that follows the setting's name).
    With ``allowed_hosts`` (``MCP_ALLOWED_HOSTS``), an HTTP server's host must be
    one of them."""
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"must be a dict of server name to options, not {value!r}"
        )
    hosts = parse_hosts(allowed_hosts)
    servers: dict[str, McpServer] = {}
    prefixes: dict[str, str] = {}
    for name, options in value.items():
        server = _server(name, options)
        if server.url is not None and hosts is not None:
            check_host(server.url, hosts, server=server.name)
        other = prefixes.get(server.prefix)
        if other is not None:
            raise ConfigurationError(
                f"MCP servers {other!r} and {name!r} both use the prefix "
                f"{server.prefix!r}: their tools' names would clash"
            )
        prefixes[server.prefix] = name
        servers[name] = server
    return servers


def servers_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid ``MCP_SERVERS`` (hosts aside), else None; it
    follows the setting's name ("SAGENTS['MCP_SERVERS'] ...")."""
    try:
        parse_servers(value)
    except ConfigurationError as exc:
        return _after_name(str(exc))
    return None


def parse_hosts(value: Any) -> frozenset[str] | None:
    """``MCP_ALLOWED_HOSTS`` as lower-case host names (None: not checked)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple | frozenset | set):
        raise ConfigurationError(f"must be a list of host names, not {value!r}")
    hosts = set()
    for host in value:
        if not isinstance(host, str) or not host.strip() or "/" in host:
            raise ConfigurationError(
                "must hold host names such as 'mcp.example.com' (no scheme, no "
                f"path), not {host!r}"
            )
        hosts.add(host.strip().strip("[]").lower())
    return frozenset(hosts)


def hosts_problem(value: Any) -> str | None:
    if value is None:
        return "must be a list of host names, not None"
    try:
        parse_hosts(value)
    except ConfigurationError as exc:
        return _after_name(str(exc))
    return None


def _after_name(why: str) -> str:
    return why if why.startswith("must") else f"is not valid: {why}"


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def check_host(url: str, hosts: frozenset[str], *, server: str) -> None:
    """Refuse a URL whose host is not allowed (the SSRF guard, also applied to
    every request the HTTP client sends)."""
    host = host_of(url)
    if host not in hosts:
        raise ConfigurationError(
            f"MCP server {server!r} points at host {host!r}, which is not in "
            "SAGENTS['MCP_ALLOWED_HOSTS']"
        )


# One server -----------------------------------------------------------------------
def _server(name: Any, options: Any) -> McpServer:
    if not isinstance(name, str) or not NAME.match(name) or "__" in name:
        raise ConfigurationError(
            f"MCP server name {name!r} must be a letter then up to 29 letters, "
            "digits, '-' or '_' (no '__')"
        )
    where = f"MCP server {name!r}"
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"{where} must be a dict of options, not {options!r}")
    unknown = sorted(set(options) - OPTIONS, key=repr)
    if unknown:
        raise ConfigurationError(
            f"{where} has unknown options {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(sorted(OPTIONS))}"
        )
    has_command, has_url = "command" in options, "url" in options
    if has_command == has_url:
        raise ConfigurationError(
            f"{where} needs either 'command' (a stdio server) or 'url' (a "
            "streamable-HTTP server), not both or neither"
        )
    stdio_only = {"env", "cwd"} & set(options)
    http_only = {"headers"} & set(options)
    if has_url and stdio_only:
        raise ConfigurationError(
            f"{where} is an HTTP server: {sorted(stdio_only)} are stdio options"
        )
    if has_command and http_only:
        raise ConfigurationError(
            f"{where} is a stdio server: {sorted(http_only)} are HTTP options"
        )
    prefix = options.get("prefix", name)
    if not isinstance(prefix, str) or not NAME.match(prefix) or "__" in prefix:
        raise ConfigurationError(
            f"{where} prefix {prefix!r} must be a letter then up to 29 letters, "
            "digits, '-' or '_' (it keeps the server's tools apart from the "
            "agent's own, so it cannot be empty)"
        )
    values: dict[str, Any] = {"name": name, "prefix": prefix}
    if has_command:
        values["command"] = _command(where, options["command"])
        values["env"] = _strings(where, "env", options.get("env", {}))
        cwd = options.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise ConfigurationError(
                f"{where} cwd must be a directory path, not {cwd!r}"
            )
        values["cwd"] = cwd
    else:
        values["url"] = _url(where, options["url"])
        values["headers"] = _strings(where, "headers", options.get("headers", {}))
    if "tools" in options:
        values["tools"] = _names(where, "tools", options["tools"], allow_none=True)
    for key in ("timeout", "connect_timeout", "list_ttl"):
        if key in options:
            values[key] = _seconds(where, key, options[key])
    if "idempotent" in options:
        values["idempotent"] = _idempotent(where, options["idempotent"])
    if "max_tools" in options:
        values["max_tools"] = _count(
            where, "max_tools", options["max_tools"], MAX_TOOLS_CEILING
        )
    if "max_message_bytes" in options:
        values["max_message_bytes"] = _count(
            where, "max_message_bytes", options["max_message_bytes"], 1 << 31
        )
    if "permission" in options:
        values["permission"] = checked_permissions(where, options["permission"])
    if "tool_permissions" in options:
        given = options["tool_permissions"]
        if not isinstance(given, Mapping) or not all(isinstance(k, str) for k in given):
            raise ConfigurationError(
                f"{where} tool_permissions must be a dict of tool name to "
                f"permission, not {given!r}"
            )
        values["tool_permissions"] = {
            tool: checked_permissions(f"{where} tool {tool!r}", perm)
            for tool, perm in given.items()
        }
    return McpServer(**values)


def _command(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ConfigurationError(
            f"{where} command must be a list of arguments such as "
            "['python', '-m', 'my_server'], not the string "
            f"{value[:200]!r}: no shell parses it"
        )
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(
            isinstance(part, str) and part and "\0" not in part for part in value
        )
    ):
        raise ConfigurationError(
            f"{where} command must be a non-empty list of non-empty strings, "
            f"not {value!r}"
        )
    return tuple(value)


def _url(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"{where} url must be a string, not {value!r}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{where} url must be an http:// or https:// URL, not {value[:200]!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"{where} url must not carry credentials: send them in 'headers'"
        )
    return value


def _strings(where: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        # The values may be secrets: name the key, never echo the mapping.
        raise ConfigurationError(f"{where} {key} must be a dict of strings to strings")
    return dict(value)


def _names(
    where: str, key: str, value: Any, *, allow_none: bool = False
) -> frozenset[str] | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise ConfigurationError(
            f"{where} {key} must be a list of tool names, not {value!r}"
        )
    if not all(isinstance(item, str) and item for item in value):
        raise ConfigurationError(f"{where} {key} must hold tool names, not {value!r}")
    return frozenset(value)


def _seconds(where: str, key: str, value: Any) -> float:
    if type(value) in (int, float) and value > 0:
        return float(value)
    raise ConfigurationError(
        f"{where} {key} must be a positive number of seconds, not {value!r}"
    )


def _count(where: str, key: str, value: Any, ceiling: int) -> int:
    if type(value) is int and 0 < value <= ceiling:
        return value
    raise ConfigurationError(
        f"{where} {key} must be an integer from 1 to {ceiling}, not {value!r}"
    )


def _idempotent(where: str, value: Any) -> bool | frozenset[str] | None:
    if value is None or isinstance(value, bool):
        return value
    try:
        return _names(where, "idempotent", value)
    except ConfigurationError:
        raise ConfigurationError(
            f"{where} idempotent must be None (follow each tool's idempotentHint), "
            f"True, False or a list of tool names, not {value!r}"
        ) from None


def configured_servers() -> tuple[dict[str, McpServer], frozenset[str]]:
    """``SAGENTS["MCP_SERVERS"]`` (checked against ``MCP_ALLOWED_HOSTS``) and the
    allowed hosts; ``ImproperlyConfigured`` saying what is wrong."""
    from django.core.exceptions import ImproperlyConfigured

    from sagents_django.conf import sagents_settings

    hosts = frozenset(h.lower() for h in sagents_settings.MCP_ALLOWED_HOSTS)
    try:
        servers = parse_servers(sagents_settings.MCP_SERVERS, hosts)
    except ConfigurationError as exc:
        raise ImproperlyConfigured(
            f"SAGENTS['MCP_SERVERS'] is not valid: {exc} (`manage.py check` says more)"
        ) from None
    return servers, hosts
