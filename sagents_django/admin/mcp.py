"""MCP servers in the admin: the database's rows (per user or per tenant) with their
status, and a read-only page of the servers in settings with theirs.

A status is this process's (``mcp.server_statuses()``): the web process connects to
a server only when someone asks it to, so the rows' "Check now" action and the
settings page's button connect from here and show what they found: up or down,
the last error (cut short, escaped), the tools offered and when it was checked.
No secret is shown: a row's headers hold the names of ``SAGENTS["MCP_SECRETS"]``
entries, never their values, and a status never holds a header.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from sagents_django.conf import sagents_settings
from sagents_django.core.exceptions import ConfigurationError
from sagents_django.mcp.config import McpServer, configured_servers, host_of
from sagents_django.mcp.models import StoredMcpServer
from sagents_django.mcp.offer import check_servers
from sagents_django.mcp.status import ServerStatus
from sagents_django.mcp.stored import server_key, server_of

ERROR_CHARS = 300
"""Characters of a server's last error the admin shows."""
STATES = {
    "connected": "up",
    "failed": "down",
    "idle": "not checked",
    "connecting": "connecting",
    "closed": "closed",
}


def statuses() -> dict[str, ServerStatus]:
    from sagents_django.mcp import server_statuses

    return {s.name: s for s in server_statuses()}


def _when(at: float | None) -> str:
    if at is None:
        return "never"
    moment = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")


def status_text(status: ServerStatus | None) -> dict[str, str]:
    """What the admin shows of ``status`` (plain text: the templates escape it)."""
    if status is None:
        return {"state": "not checked", "error": "", "tools": "", "checked": "never"}
    checked = max(
        (t for t in (status.listed_at, status.last_error_at) if t is not None),
        default=None,
    )
    error = status.last_error if status.state == "failed" else None
    return {
        "state": STATES.get(status.state, status.state),
        "error": Truncator(error or "").chars(ERROR_CHARS),
        "tools": str(status.tools) if status.listed_at is not None else "",
        "checked": _when(checked),
    }


def status_cell(status: ServerStatus | None, problem: str | None) -> SafeString:
    if problem is not None:
        return format_html(
            '<span class="sagents-mcp-down">not offered</span>: {}',
            Truncator(problem).chars(ERROR_CHARS),
        )
    shown = status_text(status)
    tools = f", {shown['tools']} tools" if shown["tools"] else ""
    error = format_html(": {}", shown["error"]) if shown["error"] else ""
    return format_html(
        '<span class="sagents-mcp-{}">{}</span>{}{} <small>(checked {})</small>',
        shown["state"].replace(" ", "-"),
        shown["state"],
        tools,
        error,
        shown["checked"],
    )


def row_server(row: StoredMcpServer) -> tuple[McpServer | None, str | None]:
    """``row``'s server as it would be offered now, or why it would not be."""
    if not sagents_settings.MCP_DATABASE_SERVERS:
        return None, "SAGENTS['MCP_DATABASE_SERVERS'] is off"
    configured, hosts = configured_servers()
    try:
        server = server_of(
            row,
            hosts=hosts,
            secrets=sagents_settings.MCP_SECRETS,
            taken=frozenset(s.prefix for s in configured.values()),
        )
    except ConfigurationError as exc:
        return None, str(exc)
    return server, None


class StoredMcpServerAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "host", "enabled", "updated_at")
    list_filter = ("enabled",)
    list_select_related = ("user",)
    search_fields = ("name", "=tenant")
    raw_id_fields = ("user",)
    fields = ("name", "user", "tenant", "url", "headers", "tools", "enabled", "status")
    readonly_fields = ("status",)
    actions = ("check_now",)
    change_list_template = "admin/sagents_django/mcp/change_list.html"

    def get_list_display(
        self, request: HttpRequest
    ) -> tuple[str | Callable[[Any], str | bool], ...]:
        # One reading of this process's statuses for the whole page.
        found = statuses()

        def status(row: StoredMcpServer) -> SafeString:
            _, problem = row_server(row) if row.enabled else (None, "disabled")
            return status_cell(found.get(server_key(row.name, row.pk)), problem)

        column: Callable[[Any], str] = admin.display(description="status")(status)
        return (*self.list_display, column)

    @admin.display(description="owner")
    def owner(self, row: StoredMcpServer) -> str:
        return f"user {row.user}" if row.user_id is not None else f"tenant {row.tenant}"

    @admin.display(description="host")
    def host(self, row: StoredMcpServer) -> str:
        return host_of(row.url) if isinstance(row.url, str) else ""

    @admin.display(description="status")
    def status(self, row: StoredMcpServer) -> SafeString:
        if row.pk is None:
            return format_html("{}", "not saved yet")
        _, problem = row_server(row) if row.enabled else (None, "disabled")
        return status_cell(statuses().get(server_key(row.name, row.pk)), problem)

    @admin.action(
        description="Check now (connect and list tools)", permissions=["change"]
    )
    def check_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        servers = []
        for row in queryset:
            server, problem = row_server(row)
            if server is None:
                self.message_user(
                    request, f"{row.name}: not offered: {problem}", messages.WARNING
                )
            else:
                servers.append(server)
        for found in check_servers(servers):
            shown = status_text(found)
            level = messages.SUCCESS if found.state == "connected" else messages.ERROR
            said = f"{found.name.partition('#')[0]}: {shown['state']}"
            if shown["tools"]:
                said += f", {shown['tools']} tools"
            if shown["error"]:
                said += f": {shown['error']}"
            self.message_user(request, said, level)

    # The settings' servers ------------------------------------------------------
    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "settings-servers/",
                self.admin_site.admin_view(self.settings_servers_view),
                name="sagents_django_mcp_settings_servers",
            )
        ]
        return own + super().get_urls()

    def settings_servers_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        configured, _ = configured_servers()
        if request.method == "POST":
            if not self.has_change_permission(request):
                raise PermissionDenied
            check_servers(list(configured.values()))
            return HttpResponseRedirect(
                reverse("admin:sagents_django_mcp_settings_servers")
            )
        found = statuses()
        rows = [
            {
                "name": server.name,
                "transport": server.transport,
                "target": (host_of(server.url) if server.url else server.command[0]),
                "permission": ", ".join(server.permission),
                **status_text(found.get(server.name)),
            }
            for server in configured.values()
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "MCP servers in settings",
            "servers": rows,
            "can_check": self.has_change_permission(request),
        }
        return TemplateResponse(
            request, "admin/sagents_django/mcp/settings_servers.html", context
        )
