"""The usage ledger and the budgets it is measured against.

Why a ledger beside ``AgentRun.cost``: a run's cost is known when it ends, a budget
must be checked before every model call, and usage must outlive the conversation it
came from (erasure anonymises a row, it never removes what was spent). One
``UsageEntry`` per model call, written in the step's own transaction.

Why counters: summing a month of ledger rows before every call grows with the
ledger. A ``BudgetCounter`` holds what one scope spent and holds in reservations in
one period; a reservation is a conditional update of a few counter rows (locked in
id order, so concurrent turns wait for each other instead of both fitting the last
dollar), and the reply's record settles it. A counter made mid-period starts from
the ledger's sum (indexed by scope and time), once.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from sagents_django.models import CONVERSATION_MODEL, AgentRun

from .config import MAX_LIMIT, PERIODS, SCOPES

SOFT_STATES = [
    ("", "not reached"),
    ("notified", "notified"),
    ("approved", "approved"),
    ("declined", "declined"),
]


class UsageEntry(models.Model):
    """One model call: who, what, how many tokens, what it cost."""

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(db_index=True)
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    run = models.ForeignKey(
        AgentRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    owner_key = models.CharField(max_length=64, blank=True, default="")
    """The conversation owner's primary key as text (a user, a team...)."""
    model = models.CharField(max_length=255)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=10)
    """USD from litellm's offline price list; NULL when the model has no price."""
    charged = models.DecimalField(
        null=True, blank=True, max_digits=20, decimal_places=10
    )
    """What budgets counted: the cost, or the site's rate for an unpriced model
    (``SAGENTS["BUDGETS"]["UNPRICED"]``); NULL when nothing was counted."""
    anonymised = models.BooleanField(default=False)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_usage_entries"
        ordering = ["-created_at"]
        verbose_name_plural = "usage entries"
        indexes = [
            models.Index(fields=["user", "created_at"], name="sagents_usage_user"),
            models.Index(
                fields=["owner_key", "created_at"], name="sagents_usage_owner"
            ),
            models.Index(
                fields=["conversation", "created_at"], name="sagents_usage_conv"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model}: {self.input_tokens}+{self.output_tokens} tokens"


class Budget(models.Model):
    """A spending limit an admin sets: on the site, an owner, a user or one
    conversation, per day, per month or in all."""

    scope = models.CharField(max_length=16, choices=SCOPES)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="sagents_budgets",
    )
    owner_key = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The owner's primary key, for an owner budget.",
    )
    conversation = models.ForeignKey(
        CONVERSATION_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    period = models.CharField(max_length=8, choices=PERIODS, default="month")
    limit = models.DecimalField(
        max_digits=14,
        decimal_places=4,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(MAX_LIMIT)],
        help_text="USD. 0 stops every call.",
    )
    soft_percent = models.PositiveSmallIntegerField(
        default=80,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Past this share of the limit, warn or ask (100: never).",
    )
    enabled = models.BooleanField(default=True)
    note = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_budgets"
        ordering = ["scope", "period", "id"]
        permissions = [("raise_budget", "Can raise a budget or approve spending")]
        constraints = [
            models.CheckConstraint(
                condition=Q(limit__gte=0) & Q(limit__lte=MAX_LIMIT),
                name="sagents_budget_limit_range",
            ),
        ]
        indexes = [
            # The check reads one subject's rows: the site's (by scope), the
            # user's, the owner's and the conversation's (its foreign key's index).
            models.Index(fields=["scope"], name="sagents_budget_scope"),
            models.Index(fields=["user"], name="sagents_budget_user"),
            models.Index(fields=["owner_key"], name="sagents_budget_owner"),
        ]

    def __str__(self) -> str:
        return f"{self.key} {self.period}: ${self.limit}"

    @property
    def key(self) -> str:
        return scope_key(
            self.scope,
            user=self.user_id,
            owner=self.owner_key,
            conversation=self.conversation_id,
        )

    def clean(self) -> None:
        needs = {
            "site": (),
            "owner": ("owner_key",),
            "user": ("user",),
            "conversation": ("conversation",),
        }.get(self.scope, ())
        set_fields = {
            "user": self.user_id is not None,
            "owner_key": bool(self.owner_key),
            "conversation": self.conversation_id is not None,
        }
        errors = {}
        for name, present in set_fields.items():
            if name in needs and not present:
                errors[name] = f"A {self.scope} budget names its {name}."
            if name not in needs and present:
                errors[name] = f"A {self.scope} budget has no {name}."
        if errors:
            raise ValidationError(errors)
        same: dict[str, Any] = {
            "scope": self.scope,
            "user_id": self.user_id,
            "owner_key": self.owner_key,
            "conversation_id": self.conversation_id,
            "period": self.period,
        }
        twins = Budget.objects.filter(**same).exclude(pk=self.pk)
        if twins.exists():
            raise ValidationError(
                "This scope already has a budget for this period: edit that one."
            )


class BudgetCounter(models.Model):
    """What one scope spent, and holds in reservations, in one period."""

    id = models.BigAutoField(primary_key=True)
    key = models.CharField(max_length=80)
    period = models.CharField(max_length=8, choices=PERIODS)
    starts = models.DateField()
    spent = models.DecimalField(default=Decimal(0), max_digits=20, decimal_places=10)
    reserved = models.DecimalField(default=Decimal(0), max_digits=20, decimal_places=10)
    soft_state = models.CharField(
        max_length=10, choices=SOFT_STATES, blank=True, default=""
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_budget_counters"
        constraints = [
            models.UniqueConstraint(
                fields=["key", "period", "starts"], name="sagents_one_counter"
            )
        ]

    def __str__(self) -> str:
        return f"{self.key} {self.period} from {self.starts}: ${self.spent}"


class BudgetReservation(models.Model):
    """A model call's estimate held on counters until its reply is recorded; a
    crashed worker's expires (``expires_at``) and is given back."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run_id = models.UUIDField(null=True, blank=True)
    amount = models.DecimalField(max_digits=20, decimal_places=10)
    counters = models.JSONField(default=list)
    """The ids of the counters it holds on."""
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "sagents_django"
        db_table = "sagents_budget_reservations"

    def __str__(self) -> str:
        return f"Reservation of ${self.amount} until {self.expires_at:%H:%M:%S}"


def scope_key(
    scope: str, *, user: object = None, owner: object = "", conversation: object = None
) -> str:
    """A counter's key: ``site``, ``owner:<pk>``, ``user:<pk>``,
    ``conversation:<uuid>``."""
    if scope == "site":
        return "site"
    value = {"owner": owner, "user": user, "conversation": conversation}[scope]
    return f"{scope}:{value}"
