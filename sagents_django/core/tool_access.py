"""Which tools the caller may use: the ones offered to the model, and run.

A tool may carry a ``permission`` (one ``"app_label.codename"``, or several, all
needed) and ``available(subject) -> bool``; such a tool is *gated*. The core does not
know what a permission is: the agent's ``tool_access`` (a ``ToolAccess``) decides,
at two moments:

- ``offers(tool)``, once per gated tool when the agent is built: a tool it refuses
  is left out of the list sent to the model (and out of the "Available tools" an
  unknown name's error lists);
- ``allows(tool)``, before every call of a gated tool (the agents are built for
  each turn, but a turn may run for minutes): a permission taken away
  mid-conversation takes effect at the next call.

A refused call, or a call to a gated tool that was not offered, is a tool error the
model reads: ``Tool 'send_email' is not available to you.``, never why (which
permission) or what the tool does. Tools that are not gated are always offered and
never checked. Sub-agents built by the SubAgent middleware get their parent's
``tool_access``, so they are offered and run the same tools; a ``CompiledSubAgent``
is an agent you built: give it the same ``tool_access``.

An agent given a gated tool and no ``tool_access`` is a ConfigurationError: nobody
could check the tool's permission, and offering it to everyone would be the wrong
way to fail. (An MCP server's tools become ordinary ``Tool``s, so they carry a
``permission`` the same way.)

The Django layer's ``sagents_django.tool_access.ScopeToolAccess`` checks
``scope.user.has_perms``, calls ``available(scope)`` and reads the user again from
the database for every call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigurationError
from .middleware.base import call_hook
from .tools import Tool, error_result

if TYPE_CHECKING:
    from .agent import Agent
    from .messages import ToolCall, ToolResult

logger = logging.getLogger(__name__)

NOT_AVAILABLE_TEXT = "Tool {name!r} is not available to you."
"""The error a refused call gets, whatever the reason (no hint that would help to
probe the tool's permission)."""


class ToolAccess:
    """Decides which gated tools the caller may use; subclass it.

    The rule, written once in ``permits``: the caller holds every permission of the
    tool (``has_perms``) and the tool's ``available(subject)`` returns ``True``.
    Override ``has_perms`` (the default holds none) and, when the answer can change
    while a turn runs, ``allows`` (the per-call check, sync or async; the default
    asks ``permits`` again). An exception in a check refuses, and is logged.
    """

    def __init__(self, subject: Any = None) -> None:
        self.subject = subject
        """What ``available`` receives (the Django layer's: the scope)."""

    def has_perms(self, permissions: tuple[str, ...]) -> bool:
        """Whether the caller holds every one of ``permissions`` (never empty)."""
        return False

    def permits(self, tool: Tool) -> bool:
        """Whether the caller may use the gated ``tool``."""
        if tool.permissions and self.has_perms(tool.permissions) is not True:
            return False
        return tool.available is None or tool.available(self.subject) is True

    def offers(self, tool: Tool) -> bool:
        """When the agent is built: whether the model is offered ``tool``."""
        return self.permits(tool)

    def allows(self, tool: Tool) -> bool | Awaitable[bool]:
        """Before each call of the offered ``tool``: whether it may run now. A sync
        check runs on the event loop: one that waits on I/O is ``async def``."""
        return self.permits(tool)


def offered_tools(
    tools: Iterable[Tool], access: ToolAccess | None
) -> tuple[list[Tool], frozenset[str]]:
    """The tools ``access`` offers, in order, and the names of those it withholds."""
    offered: list[Tool] = []
    withheld: set[str] = set()
    for tool in tools:
        if not tool.gated:
            offered.append(tool)
            continue
        if access is None:
            raise ConfigurationError(
                f"Tool {tool.name!r} has a permission or an available() check, and "
                "the agent has no tool_access to check it: pass "
                "Agent(tool_access=...) (in Django, ScopeToolAccess(scope))"
            )
        if _checked(access.offers, tool):
            offered.append(tool)
        else:
            withheld.add(tool.name)
    return offered, frozenset(withheld)


async def refusal(agent: Agent, call: ToolCall) -> ToolResult | None:
    """The error result of a call the caller may not make now, else None."""
    if call.name not in agent.withheld_tools:
        tool = agent.tools_by_name.get(call.name)
        if tool is None or not tool.gated or agent.tool_access is None:
            return None
        try:
            allowed = await call_hook(agent.tool_access.allows, tool)
        except Exception:
            logger.exception("The tool_access check of %r failed", call.name)
            allowed = False
        if allowed is True:
            return None
    return error_result(call, NOT_AVAILABLE_TEXT.format(name=call.name))


def _checked(check: Any, tool: Tool) -> bool:
    try:
        return check(tool) is True
    except Exception:
        logger.exception("The tool_access check of %r failed", tool.name)
        return False
