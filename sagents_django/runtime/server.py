"""AgentServer: Sagents' verbs, by conversation, scope first.

Sagents keeps a process per conversation; here nothing stays between turns, and each
verb is a module function of the concern it belongs to:

- ``admission``: add_message, execute, resume, dismiss, cancel;
- ``forks``, ``branches``: fork; regenerate, edit_and_resend, switch_branch;
- ``status``: get_status, get_info, get_metadata, touch, the inactivity status, the
  running agents;
- ``stored_state``: export / restore / update / reset the state, notify a
  middleware, publish events and rows of the site's own;
- ``subscriptions``: a consumer's channel following a conversation;
- ``waiting``: block until a run ends.

``agent_server`` gathers them under Sagents' names, for parity and for sites that
want one object; each verb has an async form prefixed with ``a`` (``execute`` /
``aexecute``) that runs the sync one on the runtime's database threads. A
conversation the scope does not own is ``NotFound``, exactly like one that does not
exist.

    from sagents_django.runtime import agent_server

    submission = agent_server.add_message(scope, conversation.pk, "Hello")
    agent_server.cancel(scope, conversation.pk)
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from . import admission, branches, forks, status, stored_state, subscriptions, waiting
from .admission import Submission
from .database import db

__all__ = ["AgentServer", "Submission", "agent_server"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _async(
    sync: Callable[_P, _R],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """The ``a`` form of a verb: the sync one on the runtime's database threads."""

    async def verb(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await db(sync)(*args, **kwargs)

    verb.__name__ = f"a{sync.__name__}"
    verb.__doc__ = f"``{sync.__name__}`` for async code."
    return verb


class AgentServer:
    """The verbs of Sagents' AgentServer (see the module's docstring)."""

    # Admission
    add_message = staticmethod(admission.add_message)
    execute = staticmethod(admission.execute)
    resume = staticmethod(admission.resume)
    dismiss = staticmethod(admission.dismiss)
    cancel = staticmethod(admission.cancel)
    # Status
    get_status = staticmethod(status.get_status)
    is_running = staticmethod(status.is_running)
    get_agent = staticmethod(status.get_agent)
    get_info = staticmethod(status.get_info)
    get_metadata = staticmethod(status.get_metadata)
    touch = staticmethod(status.touch)
    get_inactivity_status = staticmethod(status.get_inactivity_status)
    list_running_agents = staticmethod(status.list_running_agents)
    list_agents_matching = staticmethod(status.list_agents_matching)
    agent_count = staticmethod(status.agent_count)
    agent_info = staticmethod(status.agent_info)
    # Stored state
    export_state = staticmethod(stored_state.export_state)
    restore_state = staticmethod(stored_state.restore_state)
    update_agent_and_state = staticmethod(stored_state.update_agent_and_state)
    reset = staticmethod(stored_state.reset)
    notify_middleware = staticmethod(stored_state.notify_middleware)
    publish_event_from = staticmethod(stored_state.publish_event_from)
    publish_debug_event_from = staticmethod(stored_state.publish_debug_event_from)
    save_synthetic_message = staticmethod(stored_state.save_synthetic_message)
    # Forks
    fork = staticmethod(forks.fork)
    # Branches
    regenerate = staticmethod(branches.regenerate)
    edit_and_resend = staticmethod(branches.edit_and_resend)
    switch_branch = staticmethod(branches.switch_branch)
    # Subscriptions (async first: consumers call them)
    asubscribe = staticmethod(subscriptions.asubscribe)
    aunsubscribe = staticmethod(subscriptions.aunsubscribe)
    asubscribe_debug = staticmethod(subscriptions.asubscribe_debug)
    aunsubscribe_debug = staticmethod(subscriptions.aunsubscribe_debug)
    subscribe = staticmethod(subscriptions.subscribe)
    unsubscribe = staticmethod(subscriptions.unsubscribe)
    subscribe_debug = staticmethod(subscriptions.subscribe_debug)
    unsubscribe_debug = staticmethod(subscriptions.unsubscribe_debug)
    # Waiting
    wait_run = staticmethod(waiting.wait_run)
    await_run = staticmethod(waiting.await_run)

    aadd_message = staticmethod(_async(admission.add_message))
    aexecute = staticmethod(_async(admission.execute))
    aresume = staticmethod(_async(admission.resume))
    adismiss = staticmethod(_async(admission.dismiss))
    acancel = staticmethod(_async(admission.cancel))
    aget_status = staticmethod(_async(status.get_status))
    ais_running = staticmethod(_async(status.is_running))
    aget_agent = staticmethod(_async(status.get_agent))
    aget_info = staticmethod(_async(status.get_info))
    aget_metadata = staticmethod(_async(status.get_metadata))
    atouch = staticmethod(_async(status.touch))
    aget_inactivity_status = staticmethod(_async(status.get_inactivity_status))
    alist_running_agents = staticmethod(_async(status.list_running_agents))
    alist_agents_matching = staticmethod(_async(status.list_agents_matching))
    aagent_count = staticmethod(_async(status.agent_count))
    aagent_info = staticmethod(_async(status.agent_info))
    aexport_state = staticmethod(_async(stored_state.export_state))
    arestore_state = staticmethod(_async(stored_state.restore_state))
    aupdate_agent_and_state = staticmethod(_async(stored_state.update_agent_and_state))
    areset = staticmethod(_async(stored_state.reset))
    anotify_middleware = staticmethod(_async(stored_state.notify_middleware))
    apublish_event_from = staticmethod(_async(stored_state.publish_event_from))
    apublish_debug_event_from = staticmethod(
        _async(stored_state.publish_debug_event_from)
    )
    asave_synthetic_message = staticmethod(_async(stored_state.save_synthetic_message))
    afork = staticmethod(_async(forks.fork))
    aregenerate = staticmethod(_async(branches.regenerate))
    aedit_and_resend = staticmethod(_async(branches.edit_and_resend))
    aswitch_branch = staticmethod(_async(branches.switch_branch))


agent_server = AgentServer()
"""The server every entry point uses (views, consumers, the admin, scripts)."""
