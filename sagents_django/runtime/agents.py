"""The agent of a conversation, built by the site's factory on every turn (config
lives in code, state lives in data), and what its model's usage cost."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils.module_loading import import_string

from sagents_django.conf import sagents_settings
from sagents_django.core import Agent, TokenUsage
from sagents_django.scope import Scope


def build_agent(agent_id: str, scope: Scope, filesystem_scope: Any) -> Agent:
    path = sagents_settings.FACTORY
    if path is None:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "SAGENTS['FACTORY'] is not set: name the agent factory that "
            "manage.py sagents_setup wrote, e.g. 'myproject.agents.factory.build_agent'"
        )
    factory = import_string(path)
    return factory(agent_id=agent_id, scope=scope, filesystem_scope=filesystem_scope)


def cost_of(agent: Agent | None, usage: TokenUsage) -> Decimal | None:
    """The run's cost; None when its model has no price (``runtime.usage``)."""
    if agent is None:
        return Decimal(0)
    from .usage import cost_of as model_cost

    return model_cost(agent.model.name, usage)
