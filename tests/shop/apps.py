from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    """A small multi-tenant site's data, for the ORM tools' tests and bench."""

    name = "tests.shop"
    label = "shop"
    default_auto_field = "django.db.models.BigAutoField"
