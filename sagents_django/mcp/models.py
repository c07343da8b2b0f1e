"""The database row of a per-user or per-tenant MCP server (``stored`` says why it is
narrower than a server in settings). Imported by ``sagents_django.models``, so it
is one of the app's models (its table keeps the app's ``sagents_`` names)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from .stored import MAX_NAME, MAX_TENANT, MAX_URL, row_problems


class StoredMcpServer(models.Model):
    """A streamable-HTTP MCP server of one user, or of one tenant."""

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="sagents_mcp_servers",
        help_text="The user whose own server this is (only they get its tools).",
    )
    tenant = models.CharField(
        max_length=MAX_TENANT,
        blank=True,
        default="",
        help_text="Or: the primary key of the conversations' owner (a team, an "
        "organization...) whose members all get its tools.",
    )
    name = models.CharField(
        max_length=MAX_NAME,
        help_text="Its tools are offered as <name>__<tool>: a letter, then letters, "
        "digits, '-' or '_'.",
    )
    url = models.CharField(
        "URL",
        max_length=MAX_URL,
        help_text="The streamable-HTTP endpoint, on a host of "
        "SAGENTS['MCP_ALLOWED_HOSTS'].",
    )
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='Header name to the NAME of a secret in SAGENTS["MCP_SECRETS"], '
        'e.g. {"Authorization": "tickets_token"} (the secret itself is never '
        "stored here).",
    )
    tools = models.JSONField(
        null=True,
        blank=True,
        help_text='The server\'s tools the agent may use, e.g. ["search"]; empty '
        "(null): all it lists.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sagents_mcp_servers"
        ordering = ("name", "id")
        verbose_name = "MCP server"
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(tenant=""))
                | (Q(user__isnull=True) & ~Q(tenant="")),
                name="sagents_mcp_server_one_owner",
            ),
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=Q(user__isnull=False),
                name="sagents_mcp_server_user_name",
            ),
            models.UniqueConstraint(
                fields=["tenant", "name"],
                condition=~Q(tenant=""),
                name="sagents_mcp_server_tenant_name",
            ),
        ]
        indexes = [models.Index(fields=["tenant"], name="sagents_mcp_tenant")]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from sagents_django.conf import sagents_settings

        from .config import configured_servers

        errors: dict[str, Any] = {}
        if (self.user_id is None) == (not self.tenant):
            errors["tenant"] = "Give either a user or a tenant (not both)."
        elif self.tenant:
            why = tenant_problem(self.tenant)
            if why is not None:
                errors["tenant"] = why
            else:
                self.tenant = canonical_tenant(self.tenant)
        configured, hosts = configured_servers()
        errors.update(
            row_problems(
                name=self.name,
                url=self.url,
                headers=self.headers,
                tools=self.tools,
                hosts=hosts,
                secrets=sagents_settings.MCP_SECRETS,
                taken=frozenset(s.prefix for s in configured.values()),
            )
        )
        if errors:
            raise ValidationError(errors)


def _owner_model() -> type[models.Model] | None:
    from sagents_django.scope import conversation_model, owner_model

    return owner_model(conversation_model())


def tenant_problem(value: str) -> str | None:
    """Why ``value`` names no conversation owner, else None."""
    model = _owner_model()
    if model is None:
        return "Conversations have no owner on this site: give a user instead."
    try:
        pk = model._meta.pk.to_python(value)
    except ValidationError:
        pk = None
    if pk is None or not model._default_manager.filter(pk=pk).exists():
        return (
            f"No {model._meta.verbose_name} has the primary key "
            f"{value[:50]!r} (a tenant is a conversation owner's primary key)."
        )
    return None


def canonical_tenant(value: str) -> str:
    """The owner's primary key as ``Scope.owner_pk`` gives it, as text."""
    model = _owner_model()
    assert model is not None and model._meta.pk is not None
    return str(model._meta.pk.to_python(value))
