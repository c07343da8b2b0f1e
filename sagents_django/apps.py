from __future__ import annotations

from django.apps import AppConfig


class SagentsDjangoConfig(AppConfig):
    name = "sagents_django"
    label = "sagents_django"
    verbose_name = "Sagents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registration only: import time stays inert (no settings reads, no I/O).
        from django.conf import settings
        from django.contrib.auth.signals import user_logged_out
        from django.core import checks
        from django.core.signals import setting_changed
        from django.db.models.signals import pre_save

        from sagents_django import conf, sign_out
        from sagents_django.checks import (
            check_channel_layer,
            check_chat_pages_apps,
            check_sagents_settings,
            check_scope_resolves_owner,
        )
        from sagents_django.signals import conversation_changed
        from sagents_django.ui import live_lists

        checks.register(check_sagents_settings)
        checks.register(check_channel_layer)
        checks.register(check_scope_resolves_owner)
        checks.register(check_chat_pages_apps, checks.Tags.urls)
        setting_changed.connect(conf.reset_on_setting_changed)
        user_logged_out.connect(
            sign_out.close_sockets, dispatch_uid="sagents_close_sockets"
        )
        pre_save.connect(  # a lazy sender: the user model may not be loaded yet
            sign_out.credentials_changing,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="sagents_close_token_sockets",
        )
        conversation_changed.connect(
            live_lists.publish_change, dispatch_uid="sagents_live_lists"
        )
        # The site's triggers (a ``triggers`` module in any installed app, as the
        # admin finds ``admin`` modules), and the sweepers starting what waits.
        from django.utils.module_loading import autodiscover_modules

        from sagents_django import triggers
        from sagents_django.runtime import sweeper

        autodiscover_modules("triggers")
        if triggers.drain not in sweeper.chores:
            sweeper.chores.append(triggers.drain)
        # Budget reservations a crashed worker never settled are given back.
        from sagents_django.budgets.store import expire_reservations

        if expire_reservations not in sweeper.chores:
            sweeper.chores.append(expire_reservations)
        from sagents_django.approvals import expiry

        if expiry.expire_due not in sweeper.chores:
            sweeper.chores.append(expiry.expire_due)
