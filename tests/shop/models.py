"""A multi-tenant shop: the site data the ORM tools' tests expose to an agent.

A ``Shop`` is the tenant and a user sees his own shop's customers and orders. The
``Product`` catalogue is shared by every shop, so a path from an order through its
product (``product__orders__...``) reaches every shop's orders: the relation
traversal a site must never let the model follow.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils import timezone


class Shop(models.Model):
    name = models.CharField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="shops"
    )

    def __str__(self) -> str:
        return self.name


class Product(models.Model):
    name = models.CharField(max_length=100)
    sku = models.CharField(max_length=20, unique=True)

    def __str__(self) -> str:
        return self.name


class Customer(models.Model):
    shop = models.ForeignKey(Shop, on_delete=models.CASCADE, related_name="customers")
    name = models.CharField(max_length=100)
    email = models.EmailField(blank=True)

    def __str__(self) -> str:
        return self.name


class Order(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        PAID = "paid"
        SHIPPED = "shipped"

    shop = models.ForeignKey(Shop, on_delete=models.CASCADE, related_name="orders")
    customer = models.ForeignKey(
        Customer,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="orders",
    )
    product = models.ForeignKey(
        Product, on_delete=models.PROTECT, related_name="orders"
    )
    number = models.CharField(max_length=20)
    status = models.CharField(max_length=10, choices=Status, default=Status.OPEN)
    quantity = models.PositiveIntegerField(
        default=1, validators=[MaxValueValidator(1000)]
    )
    total = models.DecimalField(max_digits=10, decimal_places=2)
    paid = models.BooleanField(default=False)
    placed_at = models.DateTimeField(default=timezone.now)
    reference = models.UUIDField(default=uuid.uuid4)
    note = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    internal_note = models.TextField(blank=True)
    """Never exposed to the agent."""

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["shop", "number"], name="shop_order_number_unique"
            )
        ]
        # Pages newest first within a shop (keyset pagination, bench/model_tools.py).
        indexes = [models.Index(fields=["shop", "placed_at", "id"])]

    def __str__(self) -> str:
        return self.number

    def clean(self) -> None:
        if self.paid and self.total is not None and self.total <= 0:
            raise ValidationError("A paid order needs a total above zero.")
